/** What a prefill plan must hold before the residency places it: positions a head can keep, summaries of dropped ones only. */

export function checkPositions(a: Int32Array, n: number, what: string): void {
  for (let i = 0; i < a.length; i++) {
    if (a[i] < 0 || a[i] >= n || (i > 0 && a[i] <= a[i - 1])) {
      throw new Error(`${what}: positions must be sorted, unique and within [0, ${n}); got ${a[i]} at ${i}`);
    }
  }
}

/**
 * Summary groups hold positions off the GPU, each in one group at most, and a group is
 * wholly dropped or wholly in CPU memory (recallable). Returns, per group, whether it is recallable.
 */
export function checkSummaries(
  groups: Int32Array[],
  gpu: Int32Array,
  cpu: Int32Array,
  n: number,
  head: number,
): boolean[] {
  const taken = new Uint8Array(n);
  const inCpu = new Uint8Array(n);
  for (const p of gpu) taken[p] = 1;
  for (const p of cpu) inCpu[p] = 1;
  return groups.map((g, i) => {
    if (g.length === 0) throw new Error(`head ${head} summary ${i} is empty`);
    checkPositions(g, n, `head ${head} summary ${i}`);
    const recallable = inCpu[g[0]] === 1;
    for (const p of g) {
      if (taken[p]) throw new Error(`head ${head} summary ${i}: position ${p} is on the GPU or in another summary`);
      if ((inCpu[p] === 1) !== recallable)
        throw new Error(
          `head ${head} summary ${i}: position ${p} ${recallable ? 'has no' : 'has a'} CPU copy ` +
            `where position ${g[0]} ${recallable ? 'has one' : 'has none'}; a group is wholly dropped or wholly recallable`,
        );
      taken[p] = 1;
    }
    return recallable;
  });
}
