/**
 * How a pool grows for text on demand (Residency.reserve): which shards add pages, and
 * how per-slot or per-page state follows the shards' new page ids (PageAllocator.grow).
 */
import { ContextTooLongError } from '../errors.js';
import type { PageAllocator, PoolShard } from './page-allocator.js';

/**
 * Pages to add per shard so that shard s has `need[s]` free pages: `growPages` per head
 * of the shard at once (so growths stay rare), or the shortfall where larger; only the
 * shortfall near the `maxPages` budget. Null when every shard has its pages already.
 * Throws ContextTooLongError where even the shortfall passes the budget.
 */
export function growthFor(pool: PageAllocator, need: Int32Array, growPages: number, maxPages = Infinity): Int32Array | null {
  const add = new Int32Array(need.length);
  const short = new Int32Array(need.length);
  need.forEach((n, s) => {
    short[s] = Math.max(0, n - pool.freeIn(s));
    if (short[s]) add[s] = Math.max(short[s], pool.shards[s].heads * growPages);
  });
  const sum = (a: Int32Array) => a.reduce((x, y) => x + y, 0);
  if (sum(short) === 0) return null;
  if (pool.capacity + sum(add) <= maxPages) return add;
  if (pool.capacity + sum(short) <= maxPages) return short;
  const b = pool.bytesPerPage;
  throw new ContextTooLongError(
    (pool.capacity + sum(short)) * b,
    maxPages * b,
    `the KV pool cannot grow for the next tokens (${pool.capacity} pages in use of a ${maxPages}-page budget)`,
  );
}

/** `from` (per page, `per` entries a page) laid out for the grown pool in `into`: each shard's range moved up by its shift. */
export function movePages<T extends Int32Array | Uint8Array>(
  from: T,
  before: readonly PoolShard[],
  shifts: Int32Array,
  per: number,
  into: T,
): T {
  before.forEach((s, i) =>
    into.set(from.subarray(s.firstPage * per, (s.firstPage + s.pages) * per), (s.firstPage + shifts[i]) * per),
  );
  return into;
}
