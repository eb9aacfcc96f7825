/**
 * Summary slots over positions a head keeps in CPU memory (a tidal head's offloaded part).
 * Such a slot stands for its group only while none of the group is on the GPU: a recall
 * of any of it silences the slot (EMPTY, weight 0), so no position is counted twice, and
 * the release of the last of it gives the slot its count back. The residency owns the
 * pool's position entries; this keeps, per head, which group each position belongs to.
 */
export interface RecallableGroup {
  slot: number;
  entry: number;
  /** Positions of the group on the GPU now. */
  resident: number;
}

export class RecallableSummaries {
  /** Per head: audio offset → group index, or −1. */
  private readonly groupOf: Int32Array[];
  private readonly groups: RecallableGroup[][];

  constructor(
    heads: number,
    private readonly audioLength: number,
  ) {
    this.groupOf = Array.from({ length: heads }, () => new Int32Array(0));
    this.groups = Array.from({ length: heads }, () => []);
  }

  /** A recallable group of `head`, placed in `slot` with position entry `entry`. */
  add(head: number, group: Int32Array, slot: number, entry: number): void {
    if (this.groupOf[head].length === 0) this.groupOf[head] = new Int32Array(this.audioLength).fill(-1);
    const id = this.groups[head].length;
    this.groups[head].push({ slot, entry, resident: 0 });
    for (const p of group) this.groupOf[head][p] = id;
  }

  /** Whether `head` has any recallable group (most heads have none: their moves need no lookups). */
  any(head: number): boolean {
    return this.groups[head].length > 0;
  }

  /** `pos` of `head` came onto the GPU: the slot to silence, where this was the group's first. */
  recalled(head: number, pos: number): number | undefined {
    const g = this.groupAt(head, pos);
    if (!g) return undefined;
    return g.resident++ === 0 ? g.slot : undefined;
  }

  /** `pos` of `head` left the GPU: the slot and entry to restore, where it was the group's last. */
  released(head: number, pos: number): RecallableGroup | undefined {
    const g = this.groupAt(head, pos);
    if (!g) return undefined;
    return --g.resident === 0 ? g : undefined;
  }

  /** The pool grew: the head's slots moved by `d`. */
  shift(head: number, d: number): void {
    for (const g of this.groups[head]) g.slot += d;
  }

  private groupAt(head: number, pos: number): RecallableGroup | undefined {
    const ids = this.groupOf[head];
    const id = ids.length ? ids[pos] : -1;
    return id < 0 ? undefined : this.groups[head][id];
  }
}
