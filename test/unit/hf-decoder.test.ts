/**
 * The three Hugging Face miniatures loaded through loadModel and decoded by the CPU
 * backend (prefill, then teacher-forced steps), against the PyTorch reference forward
 * written from the upstream modeling code (training/hf/decoder_ref.py) on the same prompt
 * and audio embeddings. Metric per compared position: max |a - b| / max |b| over the vocabulary.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { kvHeadCount, promptLength, type ModelConfig } from '../../src/model/config.js';
import { loadModel } from '../../src/model/loader.js';
import { randomEmbeddings } from '../../src/model/testing.js';
import type { PrefillPlan } from '../../src/kv/plan.js';
import { ensureMiniatures, MINIATURE_FAMILIES, PY, type MiniatureFamily } from '../helpers/miniatures.js';

const N = 12;
/** Teacher-forced tokens fed after the prompt: ordinary ids spread over the vocabulary. */
const forced = (vocab: number) => [17, Math.floor(vocab / 3), Math.floor(vocab / 2) + 5, vocab - 7];

function fullPlan(heads: number): PrefillPlan {
  const all = Int32Array.from({ length: N }, (_, i) => i);
  return { heads: Array.from({ length: heads }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
}

interface Run {
  config: ModelConfig;
  /** CPU backend logits after the prompt and after each forced token. */
  ours: Float32Array[];
  /** The reference's logits [positions, vocab]. */
  ref: Float32Array;
}

/** The CPU backend on one miniature; the reference's inputs written to `tmp`. */
async function runOurs(dir: string, tmp: string, family: MiniatureFamily): Promise<Omit<Run, 'ref'>> {
  const m = await loadModel(dir);
  const c = m.config;
  const audio = randomEmbeddings(c, N, 11);
  const suffix = forced(c.vocabSize);
  const be = new CpuBackend(c, m.weights);
  const pre = await be
    .open({ audioLength: N, maxNewTokens: 8, request: { decodeHeads: [0], prefillQueries: 1 }, returnLogits: true })
    .prefill(audio);
  const ours: Float32Array[] = [pre.logits!];
  const session = await pre.place(fullPlan(kvHeadCount(c)));
  for (const t of suffix) ours.push((await session.step(t)).logits!);
  be.dispose();
  writeFileSync(
    join(tmp, `${family}.json`),
    JSON.stringify({ prefix: c.prefix, audio: Array.from(audio), audio_rows: N, instruction: c.instruction, suffix }),
  );
  return { config: c, ours };
}

const runs = new Map<MiniatureFamily, Run>();
beforeAll(async () => {
  const root = await ensureMiniatures();
  const tmp = mkdtempSync(join(tmpdir(), 'wnw-hfref-'));
  try {
    const mine = new Map<MiniatureFamily, Omit<Run, 'ref'>>();
    for (const f of MINIATURE_FAMILIES) mine.set(f, await runOurs(join(root, f), tmp, f));
    // One interpreter for the three references (importing torch dominates their cost).
    const jobs = MINIATURE_FAMILIES.map((f) => ({
      model: join(root, f),
      inputs: join(tmp, `${f}.json`),
      out: join(tmp, `${f}.bin`),
    }));
    writeFileSync(join(tmp, 'jobs.json'), JSON.stringify(jobs));
    const shapes = execFileSync(PY, ['training/hf/decoder_ref.py', '--batch', join(tmp, 'jobs.json')], {
      encoding: 'utf8',
    })
      .trim()
      .split('\n');
    MINIATURE_FAMILIES.forEach((f, i) => {
      const r = mine.get(f)!;
      expect(JSON.parse(shapes[i])).toEqual({
        positions: promptLength(r.config, N) + forced(r.config.vocabSize).length,
        vocab: r.config.vocabSize,
      });
      const b = readFileSync(jobs[i].out);
      runs.set(f, { ...r, ref: new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)) });
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}, 300_000);

function relErr(a: Float32Array, b: Float32Array): number {
  let err = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    err = Math.max(err, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  expect(scale).toBeGreaterThan(0);
  return err / scale;
}

const EXPECT: Record<
  MiniatureFamily,
  { headDim: number; heads: number; kv: number; bias: boolean; theta: number; stop: number[] }
> = {
  voxtral: { headDim: 32, heads: 16, kv: 4, bias: false, theta: 1e8, stop: [2] },
  qwen2_audio: { headDim: 16, heads: 4, kv: 4, bias: true, theta: 10000, stop: [151645, 151643] },
  qwen2_5_omni: { headDim: 8, heads: 16, kv: 2, bias: true, theta: 1e6, stop: [151645, 151643] },
};

describe('Hugging Face decoders: CPU backend vs the PyTorch reference', () => {
  for (const family of MINIATURE_FAMILIES) {
    it(`${family}: config as upstream reads it; prefill and 4 teacher-forced steps within 1e-4 relative`, () => {
      const { config: c, ours, ref } = runs.get(family)!;
      const e = EXPECT[family];
      expect([c.headDim, c.numHeads, c.numKvHeads, c.attentionBias, c.ropeTheta]).toEqual([
        e.headDim,
        e.heads,
        e.kv,
        e.bias,
        e.theta,
      ]);
      expect(c.stopTokens).toEqual(e.stop);
      expect(c.prefix.length).toBeGreaterThan(0);
      const P = promptLength(c, N);
      const V = c.vocabSize;
      const errs = ours.map((logits, i) => relErr(logits, ref.subarray((P - 1 + i) * V, (P + i) * V)));
      console.log(
        `${family}: prompt ${P} tokens, max |a-b|/max|b| per position ${errs.map((x) => x.toExponential(2)).join(' ')}`,
      );
      expect(errs).toHaveLength(5);
      for (const x of errs) expect(x).toBeLessThan(1e-4);
    });
  }
});
