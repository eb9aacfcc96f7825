/**
 * `--queue redis://[USER:PASSWORD@]HOST:PORT/NAME` (rediss:// for TLS): where the Redis server
 * is and which queue on it. The name is the path, not a Redis database number, so several
 * archives can share one server.
 */
import type { ConnectionOptions } from 'bullmq';
import { UsageError } from '../option-values.js';

export interface QueueAddress {
  name: string;
  connection: ConnectionOptions;
  /** The URL without its password, for messages. */
  shown: string;
}

export function parseQueueUrl(url: string): QueueAddress {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`--queue takes redis://HOST:PORT/NAME, got "${url}"`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:')
    throw new UsageError(`--queue takes redis://HOST:PORT/NAME (or rediss:// for TLS), got "${url}"`);
  const name = decodeURIComponent(u.pathname.replace(/^\/+/, ''));
  if (!/^[A-Za-z0-9_.-]+$/.test(name))
    throw new UsageError(
      `--queue needs the queue's name after the port, letters, digits, _ . or - (redis://HOST:PORT/NAME), got "${url}"`,
    );
  if (!u.hostname) throw new UsageError(`--queue needs a host, got "${url}"`);
  const port = u.port ? Number(u.port) : 6379;
  const shown = `${u.protocol}//${u.hostname}:${port}/${name}`;
  return {
    name,
    shown,
    connection: {
      host: u.hostname,
      port,
      ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
      ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
      ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
      // BullMQ's workers block on Redis and must wait out a reconnect rather than fail a command.
      maxRetriesPerRequest: null,
    },
  };
}
