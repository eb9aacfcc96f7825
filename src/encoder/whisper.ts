/**
 * Reference Whisper-family audio encoder on the CPU (f32): the numbers the WebGPU encoder
 * must reproduce, for Voxtral, Qwen2-Audio and Qwen2.5-Omni alike.
 *
 * Per window of mel frames: conv1 (k 3, pad 1) + GELU, conv2 (k 3, stride 2, pad 1) +
 * GELU, plus positions 0.. of the window, then pre-LN layers (LayerNorm → attention with
 * q/v/out biases and no k bias → residual; LayerNorm → fc1 → GELU → fc2 → residual).
 * What follows the layers (final norm, pooling or 4-frame stacking, projector) is the
 * family spec's `post` list, run on the example's frames in order. Windows are encoded one
 * at a time, so memory beyond the weights is one window's activations plus the output.
 */
import { ModelLoadError } from '../errors.js';
import {
  attention,
  avgPool2,
  conv1dK3,
  convWeightTimeMajor,
  geluInPlace,
  layerNorm,
  linear,
  sinusoids,
} from './ops.js';
import type { PostStep, WhisperEncoderConfig, WhisperFamilySpec } from './whisper-config.js';

/** Where the encoder's tensors come from: f32 by name, undefined when absent. */
export interface TensorLookup {
  get(name: string): Float32Array | undefined;
  /** Names the source (folder or file) in error messages. */
  readonly source: string;
}

/** One processor example's features, as the Whisper front-end returns them. */
export interface MelInput {
  data: Float32Array; // [nMels, frames], mel-major
  nMels: number;
  frames: number;
  validFrames: number;
}

export interface EncoderOutput {
  /** Audio embeddings for the decoder, [tokens, width]. */
  data: Float32Array;
  tokens: number;
  width: number;
}

interface Layer {
  ln1w: Float32Array;
  ln1b: Float32Array;
  qw: Float32Array;
  qb: Float32Array;
  kw: Float32Array;
  vw: Float32Array;
  vb: Float32Array;
  ow: Float32Array;
  ob: Float32Array;
  ln2w: Float32Array;
  ln2b: Float32Array;
  fc1w: Float32Array;
  fc1b: Float32Array;
  fc2w: Float32Array;
  fc2b: Float32Array;
}

function need(t: TensorLookup, name: string, size: number, what: string): Float32Array {
  const v = t.get(name);
  if (!v) throw new ModelLoadError(t.source, `tensor is missing (${what})`, name);
  if (v.length !== size)
    throw new ModelLoadError(t.source, `holds ${v.length} values; the audio_config implies ${size} (${what})`, name);
  return v;
}

export class WhisperEncoder {
  readonly config: WhisperEncoderConfig;
  readonly spec: WhisperFamilySpec;
  private readonly conv1: Float32Array;
  private readonly conv1b: Float32Array;
  private readonly conv2: Float32Array;
  private readonly conv2b: Float32Array;
  private readonly positions: Float32Array;
  private readonly layers: Layer[] = [];
  private readonly post: { step: PostStep; w?: Float32Array; b?: Float32Array; outDim?: number }[] = [];
  /** Width of the audio embeddings handed to the decoder. */
  readonly outputWidth: number;

  constructor(config: WhisperEncoderConfig, spec: WhisperFamilySpec, tensors: TensorLookup) {
    this.config = config;
    this.spec = spec;
    const { nMels, dModel: d, ffnDim: f, maxSourcePositions: P } = config;
    const p = spec.prefix;
    this.conv1 = convWeightTimeMajor(
      need(tensors, `${p}conv1.weight`, d * nMels * 3, `Conv1d ${nMels}→${d}, k 3`),
      d,
      nMels,
    );
    this.conv1b = need(tensors, `${p}conv1.bias`, d, 'conv1 bias');
    this.conv2 = convWeightTimeMajor(need(tensors, `${p}conv2.weight`, d * d * 3, `Conv1d ${d}→${d}, k 3`), d, d);
    this.conv2b = need(tensors, `${p}conv2.bias`, d, 'conv2 bias');
    this.positions =
      spec.positions === 'stored'
        ? need(tensors, `${p}embed_positions.weight`, P * d, `[${P}, ${d}]`)
        : sinusoids(P, d);
    for (let i = 0; i < config.layers; i++) {
      const l = `${p}layers.${i}.`;
      const vec = (n: string, size = d) => need(tensors, l + n, size, 'encoder layer');
      this.layers.push({
        ln1w: vec('self_attn_layer_norm.weight'),
        ln1b: vec('self_attn_layer_norm.bias'),
        qw: vec('self_attn.q_proj.weight', d * d),
        qb: vec('self_attn.q_proj.bias'),
        kw: vec('self_attn.k_proj.weight', d * d),
        vw: vec('self_attn.v_proj.weight', d * d),
        vb: vec('self_attn.v_proj.bias'),
        ow: vec('self_attn.out_proj.weight', d * d),
        ob: vec('self_attn.out_proj.bias'),
        ln2w: vec('final_layer_norm.weight'),
        ln2b: vec('final_layer_norm.bias'),
        fc1w: vec('fc1.weight', f * d),
        fc1b: vec('fc1.bias', f),
        fc2w: vec('fc2.weight', d * f),
        fc2b: vec('fc2.bias'),
      });
    }
    let width = d;
    for (const step of spec.post) {
      if (step.op === 'layernorm') {
        this.post.push({
          step,
          w: need(tensors, `${step.name}.weight`, width, 'LayerNorm'),
          b: need(tensors, `${step.name}.bias`, width, 'LayerNorm'),
        });
      } else if (step.op === 'stack') {
        width *= step.size;
        this.post.push({ step });
      } else if (step.op === 'linear') {
        const w = tensors.get(`${step.name}.weight`);
        if (!w) throw new ModelLoadError(tensors.source, 'tensor is missing (audio projector)', `${step.name}.weight`);
        if (w.length % width !== 0)
          throw new ModelLoadError(
            tensors.source,
            `holds ${w.length} values, not a multiple of the input width ${width}`,
            `${step.name}.weight`,
          );
        const outDim = w.length / width;
        const b = step.bias ? need(tensors, `${step.name}.bias`, outDim, 'projector bias') : undefined;
        this.post.push({ step, w, b, outDim });
        width = outDim;
      } else {
        this.post.push({ step });
      }
    }
    this.outputWidth = width;
  }

  /** Audio tokens the decoder receives for an example of `frames` mel frames, `valid` of them audio. */
  tokenCount(frames: number, valid: number): number {
    const { spec } = this;
    const n = spec.padding === 'drop' ? valid : frames;
    let rows = 0;
    for (let s = 0; s < n; s += spec.windowFrames) rows += Math.floor((Math.min(spec.windowFrames, n - s) - 1) / 2) + 1;
    if (spec.padding === 'mask-keys') rows = Math.floor((valid - 1) / 2) + 1;
    for (const { step } of this.post) {
      if (step.op === 'avgpool') rows = Math.floor(rows / 2);
      else if (step.op === 'stack') rows = Math.floor(rows / step.size);
    }
    return rows;
  }

  /** Encodes one processor example (see whisper-mel.ts for what an example is per family). */
  encode(mel: MelInput): EncoderOutput {
    const { config: c, spec } = this;
    if (mel.nMels !== c.nMels)
      throw new RangeError(`features have ${mel.nMels} mel bins, the encoder expects ${c.nMels}`);
    const valid = Math.min(mel.validFrames, mel.frames);
    const n = spec.padding === 'drop' ? valid : mel.frames;
    if (n < 1) throw new RangeError('no mel frames to encode');
    if (spec.windows === 'exact' && n % spec.windowFrames !== 0) {
      throw new RangeError(
        `${spec.family} encodes whole ${spec.windowFrames}-frame windows; got ${n} frames (pad the audio as the front-end's options say)`,
      );
    }
    if (spec.padding === 'mask-keys' && n !== spec.windowFrames) {
      throw new RangeError(
        `${spec.family} encodes one ${spec.windowFrames}-frame window per clip; got ${n} frames (split longer audio into clips)`,
      );
    }
    // 'mask-keys' masks encoder frames at or past (valid − 1) // 2 + 1 as attention keys.
    const keyLimit = spec.padding === 'mask-keys' ? Math.floor((valid - 1) / 2) + 1 : Infinity;
    const parts: Float32Array[] = [];
    let rows = 0;
    for (let s = 0; s < n; s += spec.windowFrames) {
      const w = Math.min(spec.windowFrames, n - s);
      const h = this.encodeWindow(mel, s, w, Math.min(keyLimit - rows, Math.floor((w - 1) / 2) + 1));
      parts.push(h);
      rows += h.length / c.dModel;
    }
    let x = concat(parts, rows * c.dModel);
    if (spec.padding === 'mask-keys') {
      // Only the valid frames reach tokens; the rest were computed and are dropped here.
      rows = Math.min(rows, keyLimit);
      x = x.slice(0, rows * c.dModel);
    }
    let width = c.dModel;
    for (const { step, w, b, outDim } of this.post) {
      if (step.op === 'layernorm') x = layerNorm(x, rows, width, w!, b!);
      else if (step.op === 'avgpool') {
        x = avgPool2(x, rows, width);
        rows >>= 1;
      } else if (step.op === 'stack') {
        rows = Math.floor(rows / step.size);
        width *= step.size;
        x = x.slice(0, rows * width); // row-major reshape: consecutive frames side by side
      } else if (step.op === 'linear') {
        x = linear(x, rows, width, w!, b ?? null, outDim!);
        width = outDim!;
      } else geluInPlace(x);
    }
    return { data: x, tokens: rows, width };
  }

  /**
   * One window: mel frames [start, start + len) → encoder frames [ceil(len / 2), d], of
   * which only the first `keys` are attention keys and are returned (the rest are padding).
   */
  private encodeWindow(mel: MelInput, start: number, len: number, keys: number): Float32Array {
    const { nMels, dModel: d, heads } = this.config;
    const hd = d / heads;
    const x0 = new Float32Array(len * nMels);
    for (let m = 0; m < nMels; m++) {
      const row = m * mel.frames + start;
      for (let t = 0; t < len; t++) x0[t * nMels + m] = mel.data[row + t];
    }
    const x1 = geluInPlace(conv1dK3(x0, len, nMels, this.conv1, this.conv1b, d, 1));
    let h = geluInPlace(conv1dK3(x1, len, d, this.conv2, this.conv2b, d, 2));
    const t = h.length / d;
    if (t > this.config.maxSourcePositions)
      throw new RangeError(`window of ${t} frames exceeds max_source_positions ${this.config.maxSourcePositions}`);
    for (let i = 0; i < t * d; i++) h[i] += this.positions[i];
    // Frames past `keys` never influence the valid frames (keys are masked; everything
    // else is per frame), so a masked window runs its layers on the valid frames only.
    const rows = Math.max(1, Math.min(t, keys));
    if (rows < t) h = h.slice(0, rows * d);
    const scale = 1 / Math.sqrt(hd);
    for (const L of this.layers) {
      const a = layerNorm(h, rows, d, L.ln1w, L.ln1b);
      const q = linear(a, rows, d, L.qw, L.qb, d);
      for (let i = 0; i < q.length; i++) q[i] *= scale;
      const k = linear(a, rows, d, L.kw, null, d);
      const v = linear(a, rows, d, L.vw, L.vb, d);
      const o = linear(attention(q, k, v, rows, heads, hd), rows, d, L.ow, L.ob, d);
      for (let i = 0; i < h.length; i++) h[i] += o[i];
      const m = layerNorm(h, rows, d, L.ln2w, L.ln2b);
      const f = linear(
        geluInPlace(linear(m, rows, d, L.fc1w, L.fc1b, this.config.ffnDim)),
        rows,
        this.config.ffnDim,
        L.fc2w,
        L.fc2b,
        d,
      );
      for (let i = 0; i < h.length; i++) h[i] += f[i];
    }
    return h;
  }
}

function concat(parts: Float32Array[], total: number): Float32Array {
  if (parts.length === 1) return parts[0];
  const out = new Float32Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
