/** The CPU backend's KV pool storage: the pages' keys and values in plain arrays. */
import type { PageStorage } from '../../kv/residency.js';
import type { PoolShard } from '../../kv/page-allocator.js';
import { roundF16 } from '../../kv/precision.js';

/** One shard of the pool: the K/V of slots [firstSlot, firstSlot + k.length / headDim). */
export interface CpuShard {
  firstSlot: number;
  k: Float32Array;
  v: Float32Array;
}

/**
 * The pool's K/V in f32 arrays, one pair per shard (all layers at once, or one layer's
 * as a per-layer prefill places it); with f16 every stored value is rounded as the
 * GPU's packing rounds it.
 */
export class CpuPageStorage implements PageStorage {
  private readonly shards: CpuShard[] = [];
  private readonly shardOfLayer: CpuShard[] = [];
  /** `onGrow`: bytes the pool's growth adds (the backend's memory accounting). */
  constructor(
    private readonly headDim: number,
    private readonly f16: boolean,
    private readonly pageSize: number,
    private readonly onGrow?: (bytes: number) => void,
  ) {}

  /** The pool grew: shard i (the residency's shard i) moves to its new first slot, its rows kept at the start. */
  grow(_from: readonly PoolShard[], to: readonly PoolShard[]): void {
    to.forEach((s, i) => {
      const sh = this.shards[i];
      sh.firstSlot = s.firstPage * this.pageSize;
      const n = s.pages * this.pageSize * this.headDim;
      if (n === sh.k.length) return;
      this.onGrow?.(8 * (n - sh.k.length));
      const k = new Float32Array(n);
      const v = new Float32Array(n);
      k.set(sh.k);
      v.set(sh.v);
      sh.k = k;
      sh.v = v;
    });
  }

  /** Adds the shard of layers [firstLayer, firstLayer + layers); returns its bytes. */
  addShard(firstLayer: number, layers: number, firstSlot: number, slots: number): number {
    const s = { firstSlot, k: new Float32Array(slots * this.headDim), v: new Float32Array(slots * this.headDim) };
    this.shards.push(s);
    for (let l = firstLayer; l < firstLayer + layers; l++) this.shardOfLayer[l] = s;
    return 8 * slots * this.headDim;
  }

  ofLayer(layer: number): CpuShard {
    return this.shardOfLayer[layer];
  }

  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void {
    const n = count * this.headDim;
    // A run of rows lies within one page, hence within one shard; shards are in slot order.
    let s = this.shards.length - 1;
    while (s > 0 && this.shards[s].firstSlot > slot) s--;
    const sh = this.shards[s];
    const at = (slot - sh.firstSlot) * this.headDim;
    if (this.f16) {
      roundF16(k, n, sh.k, at);
      roundF16(v, n, sh.v, at);
      return;
    }
    sh.k.set(k.subarray(0, n), at);
    sh.v.set(v.subarray(0, n), at);
  }
  syncPositions(): void {
    // Attention reads Residency.positions directly.
  }
}
