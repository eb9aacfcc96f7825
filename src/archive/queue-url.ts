/**
 * `--queue redis://[USER:PASSWORD@]HOST:PORT/NAME` (rediss:// for TLS): where the Redis server
 * is and which queue on it. The name is the path, not a Redis database number, so several
 * archives can share one server.
 */
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'bullmq';
import { UsageError } from '../option-values.js';

export interface QueueAddress {
  name: string;
  connection: ConnectionOptions;
  /** The URL without its password, for messages. */
  shown: string;
}

/** A URL's part with its %XX escapes undone; a lone '%' (a password such as "50%off") must be written %25. */
function decoded(part: string, what: string, url: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new UsageError(
      `--queue: the ${what} in "${url}" has a "%" that starts no %XX escape: write "%" as %25 (and "@", ":", "/" as %40, %3A, %2F)`,
    );
  }
}

/** The URL as messages quote it: a password ends up in logs and terminals' scrollback otherwise. */
const withoutPassword = (url: string) => url.replace(/^([a-z]+:\/\/[^/@:]*:)[^/]*@/i, '$1***@');

export function parseQueueUrl(given: string): QueueAddress {
  const url = withoutPassword(given);
  let u: URL;
  try {
    u = new URL(given);
  } catch {
    throw new UsageError(`--queue takes redis://HOST:PORT/NAME, got "${url}"`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:')
    throw new UsageError(`--queue takes redis://HOST:PORT/NAME (or rediss:// for TLS), got "${url}"`);
  const name = decoded(u.pathname.replace(/^\/+/, ''), 'queue name', url);
  if (!/^[A-Za-z0-9_.-]+$/.test(name))
    throw new UsageError(
      `--queue needs the queue's name after the port, letters, digits, _ . or - (redis://HOST:PORT/NAME), got "${url}"`,
    );
  if (!u.hostname) throw new UsageError(`--queue needs a host, got "${url}"`);
  const port = u.port ? Number(u.port) : 6379;
  // An IPv6 address comes bracketed ("[::1]"); the socket takes it bare.
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  const shown = `${u.protocol}//${u.hostname}:${port}/${name}`;
  return {
    name,
    shown,
    connection: {
      host,
      port,
      ...(u.username ? { username: decoded(u.username, 'user name', url) } : {}),
      ...(u.password ? { password: decoded(u.password, 'password', url) } : {}),
      // The certificate is checked against the host named in the URL (Node's default CAs).
      ...(u.protocol === 'rediss:' ? { tls: isIP(host) ? {} : { servername: host } } : {}),
      // BullMQ's workers block on Redis and must wait out a reconnect rather than fail a command.
      maxRetriesPerRequest: null,
    },
  };
}
