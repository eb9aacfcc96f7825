/**
 * A one-shot command (enqueue, --status) first checks that Redis answers, once and within a few
 * seconds: BullMQ's own connection retries forever, which suits a worker waiting out a Redis
 * restart but would leave a command hanging silently on a wrong host or port.
 */
import { Redis } from 'ioredis';
import { WnwError } from '../errors.js';
import type { QueueAddress } from './queue-url.js';

export async function checkRedisReachable(address: QueueAddress, timeoutMs = 5000): Promise<void> {
  const client = new Redis({
    ...(address.connection as Record<string, unknown>),
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // The cause (ECONNREFUSED, ENOTFOUND, a wrong password) comes as an event; the rejection only says the connection closed.
  let cause = '';
  client.on('error', (e: Error) => void (cause ||= e.message));
  try {
    await client.connect();
    await client.ping();
  } catch (e) {
    throw new WnwError(
      'BAD_ARGUMENT',
      `cannot reach Redis at ${address.shown}: ${cause || (e as Error).message}. Check that redis-server runs there and ` +
        'this machine may connect (bind, firewall, password in the URL: redis://:PASSWORD@HOST:PORT/NAME).',
    );
  } finally {
    client.disconnect();
  }
}
