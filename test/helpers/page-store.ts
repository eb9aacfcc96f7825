/** Page storage held in two plain arrays, for residency tests that read back what was written. */
import type { PageStorage } from '../../src/kv/residency.js';

export class ArrayPageStorage implements PageStorage {
  readonly k: Float32Array;
  readonly v: Float32Array;
  constructor(
    private readonly headDim: number,
    slots: number,
  ) {
    this.k = new Float32Array(slots * headDim);
    this.v = new Float32Array(slots * headDim);
  }
  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void {
    this.k.set(k.subarray(0, count * this.headDim), slot * this.headDim);
    this.v.set(v.subarray(0, count * this.headDim), slot * this.headDim);
  }
  syncPositions(): void {}
}
