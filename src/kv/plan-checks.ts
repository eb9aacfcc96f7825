/** What a prefill plan must hold before the residency places it: positions a head can keep, summaries of dropped ones only. */

export function checkPositions(a: Int32Array, n: number, what: string): void {
  for (let i = 0; i < a.length; i++) {
    if (a[i] < 0 || a[i] >= n || (i > 0 && a[i] <= a[i - 1])) {
      throw new Error(`${what}: positions must be sorted, unique and within [0, ${n}); got ${a[i]} at ${i}`);
    }
  }
}

/** Summary groups hold dropped positions only (in neither gpu nor cpu), each position in one group at most. */
export function checkSummaries(groups: Int32Array[], gpu: Int32Array, cpu: Int32Array, n: number, head: number): void {
  const taken = new Uint8Array(n);
  for (const p of gpu) taken[p] = 1;
  for (const p of cpu) taken[p] = 1;
  groups.forEach((g, i) => {
    if (g.length === 0) throw new Error(`head ${head} summary ${i} is empty`);
    checkPositions(g, n, `head ${head} summary ${i}`);
    for (const p of g) {
      if (taken[p]) throw new Error(`head ${head} summary ${i}: position ${p} is on the GPU, in CPU memory or in another summary`);
      taken[p] = 1;
    }
  });
}
