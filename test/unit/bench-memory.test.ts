import { describe, expect, it } from 'vitest';
import { isSized, memoryMarkdown, memoryTable, poolBytes } from '../../src/bench/memory.js';
import { decoderShapeConfig } from '../../src/model/testing.js';
import { kvHeadCount, segmentLength } from '../../src/model/config.js';

describe('bench --memory', () => {
  it('sizes the released backbones from their config mapping: Voxtral 240 KV heads of 128, Omni 72', () => {
    const rows = memoryTable('q4', 'f16', [10]).filter(isSized);
    expect(rows.length).toBe(2);
    const vox = rows.find((r) => r.model.startsWith('Voxtral'))!;
    const omni = rows.find((r) => r.model.startsWith('Qwen2.5-Omni'))!;
    // 10 min of Voxtral audio: 20 chunks of 375 tokens; Omni: 25 tokens a second.
    expect(vox.audioTokens).toBe(7500);
    expect(omni.audioTokens).toBe(15000);
    // Full pool K+V pages alone: heads × (audio pages + text pages) × page bytes (f16: 2 B an element),
    // the text at 4 generated tokens a second (its pages taken as they are generated, in growths of 8).
    const text = (seconds: number, instr: number) => Math.ceil(seconds * 4) + instr;
    // Segments (pages) of 2 s: 25 tokens for Voxtral, 50 for Omni.
    const kvBytes = (heads: number, P: number, audio: number, textTokens: number) =>
      heads * (Math.ceil(audio / P) + Math.ceil(textTokens / P)) * P * 128 * 2 * 2;
    const voxKv = kvBytes(240, 25, 7500, text(600, 5));
    const omniKv = kvBytes(72, 50, 15000, text(600, 5));
    // The pool also holds positions, page tables and decode scratch: a few per cent more.
    expect(vox.poolFull / voxKv).toBeGreaterThan(1);
    expect(vox.poolFull / voxKv).toBeLessThan(1.25);
    expect(omni.poolFull / omniKv).toBeGreaterThan(1);
    expect(omni.poolFull / omniKv).toBeLessThan(1.25);
    for (const r of rows) {
      expect(r.poolWnw).toBeLessThan(r.poolFull);
      expect(r.peakWnw).toBeLessThan(r.peakFull);
      // The larger phase: at least the prefill's buffers, and at least the final pool (never both at once).
      expect(r.peakFull).toBeGreaterThanOrEqual(r.weightBytes + r.prefillBytes + r.decodeBytes);
      expect(r.peakFull).toBeGreaterThanOrEqual(r.weightBytes + r.decodeBytes + r.poolFull);
      expect(r.peakFull).toBeLessThan(r.weightBytes + r.prefillBytes + r.decodeBytes + r.poolFull);
      expect(r.textTokens).toBe(2400);
    }
    expect(memoryMarkdown(rows, 'q4', 'f16')).toContain('| Voxtral-Mini-3B-2507 | 10 min |');
  });

  it("marks a row past the model's positions without sizing it, and sizes and marks one past a stated limit", () => {
    const rows = memoryTable('q4', 'f16', [10, 20, 30, 40, 50]);
    const note = (model: string, minutes: number) =>
      rows.find((r) => r.model.startsWith(model) && r.minutes === minutes)!;
    // Voxtral's 131,072 positions hold every length here; its card states 30 min for transcription, 40 for understanding.
    expect([10, 20, 30].map((m) => note('Voxtral', m).note)).toEqual([undefined, undefined, undefined]);
    expect(note('Voxtral', 40).note).toBe('past the stated 30 min transcription limit');
    expect(note('Voxtral', 50).note).toBe('past the stated 30 min transcription and 40 min audio understanding limits');
    expect(isSized(note('Voxtral', 40))).toBe(true);
    // Qwen2.5-Omni: 32,768 positions at 25 audio tokens a second are 21.8 minutes.
    expect(isSized(note('Qwen2.5-Omni', 20))).toBe(true);
    expect(note('Qwen2.5-Omni', 20).note).toBeUndefined();
    for (const m of [30, 40, 50]) {
      const r = note('Qwen2.5-Omni', m);
      expect(isSized(r)).toBe(false);
      expect(r).toMatchObject({ positions: 32768, note: "past the model's 32,768 positions" });
    }
    const md = memoryMarkdown(rows, 'q4', 'f16');
    expect(md).toContain('| Voxtral-Mini-3B-2507 | 40 min (past the stated 30 min transcription limit) | 2.26 |');
    expect(md).toContain("| Qwen2.5-Omni-3B | 30 min (past the model's 32,768 positions) | – | – | – | – |");
  });

  it("WnW's bound approaches 0.2 of the audio pages once the audio dwarfs the recall headroom and the text", () => {
    const c = decoderShapeConfig('voxtral');
    const P = segmentLength(c);
    const A = 400 * P;
    const { full, atBudget: wnw } = poolBytes(c, A, 0, 2, 0.2, 2 ** 31);
    const heads = kvHeadCount(c);
    const expectedPages = (x: number) => heads * x;
    // Pages per head: full 400; WnW 80 kept + 1 part-filled + 48 recall.
    expect(wnw / full).toBeCloseTo(expectedPages(80 + 1 + 48) / expectedPages(400), 2);
  });
});
