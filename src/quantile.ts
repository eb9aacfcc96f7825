/** The value below which `q` of the sorted values fall (linear between ranks); NaN for none. */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return NaN;
  const x = q * (sorted.length - 1);
  const lo = Math.floor(x);
  return sorted[lo] + (sorted[Math.min(lo + 1, sorted.length - 1)] - sorted[lo]) * (x - lo);
}
