/**
 * The Whisper-family audio tower's GPU memory, from its config and the family's spec alone:
 * the weights in their format and the buffers one encode batch takes. WebGpuWhisperEncoder
 * allocates by these same functions (`encodeBatch`), so "will it fit?" (fit.ts's encode
 * phase, the memory bench, the demo's verdict) and the run cannot disagree.
 *
 * The tower runs before the prefill, with the decoder's weights already on the device, and
 * its weights and buffers are freed once the recording is encoded: its phase is decoder
 * weights + tower weights + one batch. The batch is sized for memory: past one 30 s window
 * of 1,500 rows a Whisper-large matmul keeps a GPU as busy as it gets, so more windows a
 * batch buy submits, not speed, and at that width each window costs about 130 MB.
 */
import { colsMultiple, rowBytes, type WeightFormat } from '../model/quant.js';
import type { WhisperEncoderConfig, WhisperFamilySpec } from './whisper-config.js';

/** Bytes the batch buffers may take together: one Whisper-large window (about 130 MB), many of a small tower's. */
export const ENCODER_BATCH_BYTES = 160 * 2 ** 20;

/** Mel frames a batch takes at most, whatever the memory allows. */
export const DEFAULT_BATCH_FRAMES = 12_000;

/** Every Linear the GPU encoder packs (layer projections, then the projector), with its shape. */
export function encoderLinears(
  config: WhisperEncoderConfig,
  spec: WhisperFamilySpec,
  projectorRows: (name: string, cols: number) => number,
): { name: string; rows: number; cols: number }[] {
  const { dModel: d, ffnDim: f } = config;
  const out: { name: string; rows: number; cols: number }[] = [];
  for (let i = 0; i < config.layers; i++) {
    const l = `${spec.prefix}layers.${i}.`;
    for (const n of ['q_proj', 'k_proj', 'v_proj', 'out_proj'])
      out.push({ name: `${l}self_attn.${n}.weight`, rows: d, cols: d });
    out.push({ name: `${l}fc1.weight`, rows: f, cols: d }, { name: `${l}fc2.weight`, rows: d, cols: f });
  }
  let width = d;
  for (const st of spec.post) {
    if (st.op === 'stack') width *= st.size;
    else if (st.op === 'linear') {
      const rows = projectorRows(`${st.name}.weight`, width);
      out.push({ name: `${st.name}.weight`, rows, cols: width });
      width = rows;
    }
  }
  return out;
}

/** The format a Linear of `cols` inputs is stored in: the chosen one when K fits it, else f32. */
export function linearFormat(format: WeightFormat, cols: number): WeightFormat {
  return cols % colsMultiple(format) === 0 ? format : 'f32';
}

/** Bytes of the tower's weights as the GPU encoder uploads them (Linears in `format`, the rest f32). */
export function encoderWeightBytes(
  config: WhisperEncoderConfig,
  spec: WhisperFamilySpec,
  decoderWidth: number,
  format: WeightFormat,
): { linears: number; other: number } {
  const { nMels, dModel: d, ffnDim: f, maxSourcePositions: P } = config;
  let linears = 0;
  for (const l of encoderLinears(config, spec, () => decoderWidth))
    linears += l.rows * rowBytes(linearFormat(format, l.cols), l.cols);
  // The post steps' norms and biases, at the width each sees.
  let post = 0;
  let width = d;
  for (const st of spec.post) {
    if (st.op === 'stack') width *= st.size;
    else if (st.op === 'layernorm') post += 2 * width;
    else if (st.op === 'linear') {
      width = decoderWidth;
      if (st.bias) post += width;
    }
  }
  // conv1, conv2 and their biases, the positions (stored or made), per layer two norms, four biases
  // (k_proj has none) and fc1's, and a zero word.
  const other = 4 * (d * nMels * 3 + d * d * 3 + 2 * d + P * d + config.layers * (8 * d + f) + post + 4);
  return { linears, other };
}

/** One encode batch: whole windows, as many as memory, `maxBatchFrames` and each buffer's binding allow. */
export interface EncodeBatch {
  windows: number;
  /** Mel frames and encoder rows (after the stride-2 conv) a batch holds. */
  frames: number;
  rows: number;
  /** The widest row any batch buffer holds (FFN, projector, the stacked frames). */
  maxWidth: number;
  /** [label, floats] of every buffer the batch makes, and their bytes together (the readback staging included). */
  buffers: [string, number][];
  bytes: number;
}

/** Rows of the tower's output after its post steps (avg-pool halves them, a stack of k divides them by k). */
export function outputRows(spec: WhisperFamilySpec, rows: number): number {
  let r = rows;
  for (const st of spec.post) {
    if (st.op === 'avgpool') r >>= 1;
    else if (st.op === 'stack') r = Math.floor(r / st.size);
  }
  return r;
}

/**
 * The batch WebGpuWhisperEncoder.encode runs (its buffers made from `buffers`): `outputWidth`
 * and `projectorWidths` are the projector's, `bindableBytes` the device's storage binding limit.
 */
export function encodeBatch(
  config: WhisperEncoderConfig,
  spec: WhisperFamilySpec,
  outputWidth: number,
  projectorWidths: number[],
  bindableBytes: number,
  maxBatchFrames = DEFAULT_BATCH_FRAMES,
): EncodeBatch {
  const d = config.dModel;
  const W = spec.windowFrames;
  const winOut = Math.floor((W - 1) / 2) + 1;
  const maxWidth = Math.max(config.ffnDim, outputWidth, ...projectorWidths, d * 4);
  const layout = (windows: number): [string, number][] => {
    const frames = windows * W;
    const rows = windows * winOut;
    return [
      ['mel batch', frames * config.nMels],
      ['conv1 out', frames * d],
      ['hidden', rows * d],
      ['normed', rows * d],
      ['q', rows * d],
      ['k', rows * d],
      ['v', rows * d],
      ['attention out', rows * d],
      ['ffn', rows * maxWidth],
      ['post', rows * maxWidth],
      ['readback', Math.ceil((outputRows(spec, rows) * outputWidth) / 4) * 4],
    ];
  };
  const bytesOf = (b: [string, number][]) => 4 * b.reduce((a, [, f]) => a + f, 0);
  const bindable = Math.floor(bindableBytes / 4);
  const byBinding = Math.min(
    Math.floor(bindable / (W * Math.max(config.nMels, d))),
    Math.floor(bindable / (winOut * maxWidth)),
  );
  const byMemory = Math.floor(ENCODER_BATCH_BYTES / bytesOf(layout(1)));
  // At least one window where a binding holds it: memory bounds the batch, never the window.
  const windows = Math.min(Math.floor(Math.max(W, maxBatchFrames) / W), byBinding, Math.max(1, byMemory));
  if (windows < 1)
    throw new RangeError(`one ${W}-frame window does not fit the device's ${bindable * 4}-byte storage bindings`);
  const buffers = layout(windows);
  return { windows, frames: windows * W, rows: windows * winOut, maxWidth, buffers, bytes: bytesOf(buffers) };
}

/** The projector's output widths where its rows are the decoder's width (every released family's). */
export function projectorWidths(spec: WhisperFamilySpec, decoderWidth: number): number[] {
  return spec.post.filter((s) => s.op === 'linear').map(() => decoderWidth);
}

/** The audio tower's phase: its weights in `format` and one batch's buffers. */
export interface TowerBytes {
  format: WeightFormat;
  weightBytes: number;
  batchBytes: number;
}

export function towerBytes(
  config: WhisperEncoderConfig,
  spec: WhisperFamilySpec,
  decoderWidth: number,
  format: WeightFormat,
  bindableBytes = 2 ** 31 - 4,
): TowerBytes {
  const w = encoderWeightBytes(config, spec, decoderWidth, format);
  const batch = encodeBatch(config, spec, decoderWidth, projectorWidths(spec, decoderWidth), bindableBytes);
  return { format, weightBytes: w.linears + w.other, batchBytes: batch.bytes };
}

/**
 * The tower's format where none is asked: the decoder's where that is f32 or f16 (a
 * reference run stays exact), f16 beside a q4 decoder (a q4 tower moves the audio
 * embeddings by 0.16–0.33 on random-weight miniatures, more than the decoder's q4 moves its
 * logits), and q4 where that format's encode phase (`phaseOf`: with the decoder's weights)
 * passes the memory the device surely has; `why` says so.
 */
export function defaultTowerFormat(
  decoder: WeightFormat,
  phaseOf: (f: WeightFormat) => number,
  sureMemoryBytes?: number,
): { format: WeightFormat; why?: string } {
  const preferred: WeightFormat = decoder === 'q4' ? 'f16' : decoder;
  if (sureMemoryBytes === undefined) return { format: preferred };
  const need = phaseOf(preferred);
  if (need <= sureMemoryBytes) return { format: preferred };
  const gb = (b: number) => (b / 1e9).toFixed(2);
  return {
    format: 'q4',
    why: `a ${preferred} tower beside the decoder needs ${gb(need)} GB while encoding, over the ${gb(sureMemoryBytes)} GB this device surely has`,
  };
}
