/**
 * The CPU backend's last prefill, kept for the next session on the same clip (evaluation
 * runs many policies on one clip, and the prefill, the same for every policy, is most of
 * a CPU run's time), and the KV bytes a session holds: prompt K/V (the prefill's, the
 * memo's) and the pool's pages, now and at the peak. Weights, hidden states and scratch
 * are the same under every policy and not counted.
 */
import type { PromptIds } from '../../model/config.js';
import type { PrefillOutput } from '../../reference/prefill.js';

export class PrefillMemo {
  private kept: { embeddings: Float32Array; prompt: PromptIds; out: PrefillOutput } | null = null;
  private bytes = { live: 0, peak: 0 };

  /** A new session starts holding what the memo keeps. */
  begin(): void {
    const held = this.kept ? kvBytesOf(this.kept.out) : 0;
    this.bytes = { live: held, peak: held };
  }

  hold(bytes: number): void {
    this.bytes.live += bytes;
    this.bytes.peak = Math.max(this.bytes.peak, this.bytes.live);
  }

  get kvMemory(): { liveBytes: number; peakBytes: number } {
    return { liveBytes: this.bytes.live, peakBytes: this.bytes.peak };
  }

  /** The kept prefill when it serves these embeddings, prompt and score window. */
  find(embeddings: Float32Array, prompt: PromptIds, window: number): PrefillOutput | null {
    const m = this.kept;
    return m?.embeddings === embeddings && samePrompt(m.prompt, prompt) && m.out.scores.has(window) ? m.out : null;
  }

  /** Keeps `out`; `counted` when its bytes are already held (a layered prefill holds them as it goes). */
  keep(embeddings: Float32Array, prompt: PromptIds, out: PrefillOutput, counted = false): void {
    this.kept = { embeddings, prompt, out };
    if (!counted) this.hold(kvBytesOf(out));
  }

  /** Frees the kept prefill (its bytes with it). */
  drop(): void {
    if (this.kept) this.hold(-kvBytesOf(this.kept.out));
    this.kept = null;
  }

  /** Forgets it without counting (the backend is disposed). */
  clear(): void {
    this.kept = null;
  }
}

function kvBytesOf(out: PrefillOutput): number {
  return out.k.reduce((n, a) => n + a.byteLength, 0) + out.v.reduce((n, a) => n + a.byteLength, 0);
}

function samePrompt(a: PromptIds, b: PromptIds): boolean {
  const same = (x: readonly number[], y: readonly number[]) => x.length === y.length && x.every((t, i) => t === y[i]);
  return same(a.prefix, b.prefix) && same(a.instruction, b.instruction);
}
