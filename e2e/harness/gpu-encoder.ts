/**
 * The Whisper-family encoder on WebGPU against its plain-TS reference (src/encoder/ops.ts,
 * src/encoder/whisper.ts): each kernel at the real encoder's shapes (width 1280, 20 heads,
 * FFN 5120, 1500 frames, 2 s windows), and whole encoders of the three families (the
 * miniatures of training/hf/miniatures.py, read as Hugging Face folders) fed the Whisper
 * features of real speech.
 */
import { randomArray, rng } from '../../src/model/testing.js';
import {
  attention,
  avgPool2,
  conv1dK3,
  convWeightTimeMajor,
  geluInPlace,
  layerNorm,
  linear,
  sinusoids,
} from '../../src/encoder/ops.js';
import { EncoderKernels, EncoderPass } from '../../src/encoder/webgpu-kernels.js';
import { WebGpuWhisperEncoder, asStored } from '../../src/encoder/webgpu.js';
import { dequantize, pack, type WeightFormat } from '../../src/model/quant.js';
import { WhisperEncoder, type MelInput } from '../../src/encoder/whisper.js';
import { parseWhisperEncoderConfig, type WhisperFamilySpec } from '../../src/encoder/whisper-config.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { qwen2Audio } from '../../src/model/families/qwen2-audio.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';
import { lookupFromCheckpoint } from '../../src/encoder/tensors.js';
import { HfCheckpoint } from '../../src/model/hf/checkpoint.js';
import { WhisperLogMel, type WhisperPadding } from '../../src/audio/whisper-mel.js';
import { parseWav } from '../../src/audio/wav.js';
import { downmix } from '../../src/audio/downmix.js';
import { compare, gpu, readF32, upload, empty, type CheckResult } from './gpu-util.js';

const F32_BOUND = 1e-7;
/** Attention and whole encoders: f32 exp/erf on the GPU against float64-accumulated TS. */
const ENC_BOUND = 1e-6;

async function run(record: (pass: EncoderPass) => void): Promise<void> {
  const { ctx } = await gpu();
  const enc = ctx.device.createCommandEncoder();
  const pass = new EncoderPass(ctx, enc.beginComputePass());
  record(pass);
  pass.pass.end();
  ctx.device.queue.submit([enc.finish()]);
  await ctx.device.queue.onSubmittedWorkDone();
  pass.release();
}

async function kernels(): Promise<EncoderKernels> {
  return EncoderKernels.create((await gpu()).cache);
}

/** fc1 + GELU at the real shape (1280 → 5120) on 67 rows (not a multiple of the 4-row tile). */
async function linearGelu(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const [rows, inDim, out] = [67, 1280, 5120];
  const r = rng(21);
  const w = randomArray(out * inDim, Math.sqrt(3 / inDim), r);
  const b = randomArray(out, 0.5, r);
  const x = randomArray(rows * inDim, 1, r);
  const ref = geluInPlace(linear(x, rows, inDim, w, b, out));
  const y = empty(ctx, rows * out * 4);
  const p = await (await kernels()).linear(true, true, false);
  await run((pass) =>
    p.record(pass, { w: upload(ctx, w), x: upload(ctx, x), b: upload(ctx, b), y }, { out, inDim, n: rows }),
  );
  return compare('enc_linear_gelu_67x1280to5120', ref, await readF32(ctx, y, rows * out), F32_BOUND, t0);
}

/** fc2 with the residual add (5120 → 1280, y += x·Wᵀ + b). */
async function linearAcc(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const [rows, inDim, out] = [33, 5120, 1280];
  const r = rng(22);
  const w = randomArray(out * inDim, Math.sqrt(3 / inDim), r);
  const b = randomArray(out, 0.5, r);
  const x = randomArray(rows * inDim, 1, r);
  const y0 = randomArray(rows * out, 1, r);
  const ref = linear(x, rows, inDim, w, b, out);
  for (let i = 0; i < ref.length; i++) ref[i] += y0[i];
  const y = upload(ctx, y0);
  const p = await (await kernels()).linear(true, false, true);
  await run((pass) =>
    p.record(pass, { w: upload(ctx, w), x: upload(ctx, x), b: upload(ctx, b), y }, { out, inDim, n: rows }),
  );
  return compare('enc_linear_acc_33x5120to1280', ref, await readF32(ctx, y, rows * out), F32_BOUND, t0);
}

/** A packed-weight Linear (f16 or q4, src/model/quant.ts) against TS on the dequantised weights. */
async function linearPacked(
  name: string,
  format: WeightFormat,
  rows: number,
  inDim: number,
  out: number,
  gelu: boolean,
  acc: boolean,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const r = rng(26 + inDim);
  const w = randomArray(out * inDim, Math.sqrt(3 / inDim), r);
  const b = randomArray(out, 0.5, r);
  const x = randomArray(rows * inDim, 1, r);
  const y0 = acc ? randomArray(rows * out, 1, r) : new Float32Array(rows * out);
  const m = pack(format, w, out, inDim);
  const ref = linear(x, rows, inDim, dequantize(m), b, out);
  if (gelu) geluInPlace(ref);
  if (acc) for (let i = 0; i < ref.length; i++) ref[i] += y0[i];
  const y = upload(ctx, y0);
  const p = await (await kernels()).linear(true, gelu, acc, format);
  await run((pass) =>
    p.record(pass, { w: upload(ctx, m.data), x: upload(ctx, x), b: upload(ctx, b), y }, { out, inDim, n: rows }),
  );
  return compare(name, ref, await readF32(ctx, y, rows * out), F32_BOUND, t0);
}

/** conv1 (128 → 1280) and conv2 (stride 2, + positions) over a 2 s window and a short tail. */
async function convs(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const [mels, d, win, frames] = [128, 1280, 200, 237]; // windows of 200 and 37 frames
  const r = rng(23);
  const w1 = randomArray(d * mels * 3, Math.sqrt(3 / (3 * mels)), r);
  const b1 = randomArray(d, 0.5, r);
  const w2 = randomArray(d * d * 3, Math.sqrt(3 / (3 * d)), r);
  const b2 = randomArray(d, 0.5, r);
  const x = randomArray(frames * mels, 1, r);
  const pos = sinusoids(1500, d);
  const refParts: Float32Array[] = [];
  for (let s = 0; s < frames; s += win) {
    const len = Math.min(win, frames - s);
    const h1 = geluInPlace(
      conv1dK3(x.subarray(s * mels, (s + len) * mels), len, mels, convWeightTimeMajor(w1, d, mels), b1, d, 1),
    );
    const h2 = geluInPlace(conv1dK3(h1, len, d, convWeightTimeMajor(w2, d, d), b2, d, 2));
    for (let i = 0; i < h2.length; i++) h2[i] += pos[i];
    refParts.push(h2);
  }
  const ref = new Float32Array(refParts.reduce((a, p) => a + p.length, 0));
  refParts.reduce((o, p) => (ref.set(p, o), o + p.length), 0);
  const outRows = ref.length / d;
  const y1 = empty(ctx, frames * d * 4);
  const y2 = empty(ctx, outRows * d * 4);
  const k = await kernels();
  const [p1, p2] = await Promise.all([k.conv(mels, d, 1, false), k.conv(d, d, 2, true)]);
  const zero = upload(ctx, new Float32Array(4));
  await run((pass) => {
    p1.record(
      pass,
      { x: upload(ctx, x), w: upload(ctx, convWeightTimeMajor(w1, d, mels)), b: upload(ctx, b1), pos: zero, y: y1 },
      { inRows: frames, outRows: frames, winIn: win, winOut: win },
    );
    p2.record(
      pass,
      { x: y1, w: upload(ctx, convWeightTimeMajor(w2, d, d)), b: upload(ctx, b2), pos: upload(ctx, pos), y: y2 },
      { inRows: frames, outRows, winIn: win, winOut: win / 2 },
    );
  });
  return compare('enc_conv1_conv2_237x128to1280_2s_windows', ref, await readF32(ctx, y2, outRows * d), F32_BOUND, t0);
}

/** LayerNorm (1500 × 1280) then AvgPool(2). */
async function normPool(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const [rows, d] = [1500, 1280];
  const r = rng(24);
  const x = randomArray(rows * d, 2, r);
  for (let i = 0; i < x.length; i++) x[i] += 0.3; // a mean to remove
  const g = randomArray(d, 1, r);
  const b = randomArray(d, 0.5, r);
  const ref = avgPool2(layerNorm(x, rows, d, g, b), rows, d);
  const k = await kernels();
  const [ln, pool] = await Promise.all([k.layerNorm(d), k.avgPool2(d)]);
  const y = empty(ctx, rows * d * 4);
  const z = empty(ctx, (rows / 2) * d * 4);
  await run((pass) => {
    ln.record(pass, { x: upload(ctx, x), g: upload(ctx, g), b: upload(ctx, b), y }, rows);
    pool.record(pass, { x: y, y: z }, rows / 2);
  });
  return compare('enc_layernorm_avgpool_1500x1280', ref, await readF32(ctx, z, (rows / 2) * d), F32_BOUND, t0);
}

/**
 * 20-head attention (head dim 64): `rows` frames in windows of `win`, the first `keys` of
 * each window as keys (the key limit itself is covered by the Qwen2-Audio encoder check). The TS reference checks every `stride`-th query row (rows are
 * independent), which keeps the 1500-frame case affordable on the CPU.
 */
async function attentionCase(
  name: string,
  rows: number,
  win: number,
  keys: number,
  stride: number,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const [heads, hd] = [20, 64];
  const d = heads * hd;
  const r = rng(25 + rows);
  const q = randomArray(rows * d, 1, r);
  const k = randomArray(rows * d, 1, r);
  const v = randomArray(rows * d, 1, r);
  const o = empty(ctx, rows * d * 4);
  const p = await (await kernels()).attention(d, hd);
  await run((pass) =>
    p.record(pass, { q: upload(ctx, q), k: upload(ctx, k), v: upload(ctx, v), out: o }, { rows, heads, win, keys }),
  );
  const got = await readF32(ctx, o, rows * d);
  const ref: number[] = [];
  const sel: number[] = [];
  const qs = q.map((x) => x / Math.sqrt(hd));
  for (let w0 = 0; w0 < rows; w0 += win) {
    const len = Math.min(win, rows - w0);
    const nk = Math.min(len, keys);
    for (let i = 0; i < len; i += stride) {
      // One query against its window's keys, through the reference kernel.
      const out = attention(
        qs.subarray((w0 + i) * d, (w0 + i + 1) * d),
        k.subarray(w0 * d, (w0 + nk) * d),
        v.subarray(w0 * d, (w0 + nk) * d),
        1,
        heads,
        hd,
        nk,
      );
      ref.push(...out);
      sel.push(...got.subarray((w0 + i) * d, (w0 + i + 1) * d));
    }
  }
  return compare(name, ref, sel, ENC_BOUND, t0);
}

/**
 * The URL of training/hf/miniatures.py's folder (the spec passes it; the page cannot compute
 * it). Kept on the window: Vite's hot updates re-run this module when a source changes.
 */
const holder = globalThis as { wnwMiniatures?: string };
export function setMiniatures(url: string): void {
  holder.wnwMiniatures = url;
}

let speech: Promise<Float32Array> | null = null;
function sample(): Promise<Float32Array> {
  speech ??= fetch('/samples/sample1.wav').then(async (res) =>
    downmix(parseWav(new Uint8Array(await res.arrayBuffer())).channels),
  ); // 32.2 s, 16 kHz
  return speech;
}

/**
 * A whole encoder on WebGPU against the TS reference: the family's miniature in the exact
 * Hugging Face layout (bf16 shards), fed the Whisper features of real speech.
 */
async function wholeEncoder(
  name: string,
  family: string,
  spec: WhisperFamilySpec,
  clips: (x: Float32Array) => { x: Float32Array; pad: WhisperPadding }[],
  maxBatchFrames: number,
  weightFormat: WeightFormat = 'f32',
): Promise<CheckResult> {
  const t0 = performance.now();
  const miniatures = holder.wnwMiniatures;
  if (!miniatures) return { name, pass: false, detail: 'the spec did not pass the miniatures folder', ms: 0 };
  const { ctx, cache } = await gpu();
  const base = `${miniatures}/${family}`;
  const json = (await (await fetch(`${base}/config.json`)).json()) as Record<string, unknown>;
  const audio = ((json.thinker_config as Record<string, unknown> | undefined) ?? json).audio_config as Record<
    string,
    unknown
  >;
  const config = parseWhisperEncoderConfig(audio, `${base}/config.json`, spec);
  const ckpt = await HfCheckpoint.open(base);
  const tensors = await lookupFromCheckpoint(ckpt, spec).finally(() => ckpt.close());
  const cpu = new WhisperEncoder(config, spec, asStored(tensors, config, spec, weightFormat));
  const enc = await WebGpuWhisperEncoder.create(ctx, cache, config, spec, tensors, { maxBatchFrames, weightFormat });
  const fe = new WhisperLogMel();
  const ref: number[] = [];
  const got: number[] = [];
  let tokens = 0;
  try {
    for (const c of clips(await sample())) {
      const mel: MelInput = fe.compute(c.x, c.pad);
      const a = cpu.encode(mel);
      const b = await enc.encode(mel);
      if (a.tokens !== b.tokens || a.width !== b.width)
        return {
          name,
          pass: false,
          detail: `shape ${b.tokens}x${b.width}, reference ${a.tokens}x${a.width}`,
          ms: performance.now() - t0,
        };
      ref.push(...a.data);
      got.push(...b.data);
      tokens += a.tokens;
    }
  } finally {
    enc.destroy();
  }
  return compare(name, ref, got, ENC_BOUND, t0, 0.5, `tokens=${tokens}`);
}

export const encoderTests: Record<string, () => Promise<CheckResult>> = {
  enc_linear_gelu_67x1280to5120: linearGelu,
  enc_linear_acc_33x5120to1280: linearAcc,
  enc_linear_gelu_f16_67x1280to5120: () =>
    linearPacked('enc_linear_gelu_f16_67x1280to5120', 'f16', 67, 1280, 5120, true, false),
  enc_linear_acc_q4_33x5120to1280: () =>
    linearPacked('enc_linear_acc_q4_33x5120to1280', 'q4', 33, 5120, 1280, false, true),
  enc_conv1_conv2_237x128to1280_2s_windows: convs,
  enc_layernorm_avgpool_1500x1280: normPool,
  enc_attention_20h_1500_frames: () => attentionCase('enc_attention_20h_1500_frames', 1500, 1500, 1500, 23),
  enc_attention_20h_block_diagonal_2s: () => attentionCase('enc_attention_20h_block_diagonal_2s', 3550, 100, 100, 3),
  enc_voxtral_32s: () =>
    wholeEncoder(
      'enc_voxtral_32s',
      'voxtral',
      voxtral.encoder,
      (x) => [{ x, pad: { padToMultipleOf: 480_000 } }],
      3000,
    ),
  enc_qwen2_audio_32s: () =>
    wholeEncoder(
      'enc_qwen2_audio_32s',
      'qwen2_audio',
      qwen2Audio.encoder,
      (x) =>
        [x.subarray(0, 480_000), x.subarray(480_000)].map((c) => ({
          x: c,
          pad: { truncateTo: 480_000, padToLength: 480_000 },
        })),
      3000,
    ),
  enc_qwen2_5_omni_32s: () =>
    wholeEncoder(
      'enc_qwen2_5_omni_32s',
      'qwen2_5_omni',
      qwen25Omni.encoder,
      (x) => [{ x, pad: { padToLength: 480_000 } }],
      1000,
    ),
  enc_voxtral_32s_q4: () =>
    wholeEncoder(
      'enc_voxtral_32s_q4',
      'voxtral',
      voxtral.encoder,
      (x) => [{ x, pad: { padToMultipleOf: 480_000 } }],
      3000,
      'q4',
    ),
  enc_qwen2_5_omni_32s_f16: () =>
    wholeEncoder(
      'enc_qwen2_5_omni_32s_f16',
      'qwen2_5_omni',
      qwen25Omni.encoder,
      (x) => [{ x, pad: { padToLength: 480_000 } }],
      1000,
      'f16',
    ),
};
