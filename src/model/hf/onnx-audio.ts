/**
 * An ONNX audio encoder stored in a Hugging Face folder the way onnx-community exports it
 * for transformers.js: `onnx/audio_encoder{suffix}.onnx` (suffix by dtype: "" fp32, _fp16,
 * _quantized, _int8, _uint8, _q4, _q4f16, _bnb4), its input and output named and shaped as
 * the family record's `onnx` layout says (the projector is inside the graph), with its
 * weights in `{file}_data` when the graph is too large for one protobuf.
 *
 * Which encoder a folder runs is decided here, as data the loader reports:
 * - by default the ONNX graph where the folder holds one (the folder's author put it there;
 *   onnxruntime-web runs it, on WebGPU where it can);
 * - `audioEncoder: 'audio-tower'` forces the checkpoint's own audio tower and projector
 *   (src/encoder), the route checked against a PyTorch reference of the upstream modeling
 *   code; an ONNX graph computes whatever its export computed (quantised, fused, or not the
 *   same model at all), and this runtime can only check its names and shapes.
 */
import { ModelLoadError } from '../../errors.js';
import { FAMILIES } from '../families/registry.js';
import type { HfFamily, OnnxAudioLayout } from '../families/types.js';
import { exists, joinModelPath, readBytes } from '../files.js';

/** Which audio encoder a Hugging Face folder runs: its ONNX graph (when present) or its audio tower. */
export const AUDIO_ENCODERS = ['onnx', 'audio-tower'] as const;
export type AudioEncoderChoice = (typeof AUDIO_ENCODERS)[number];

/** transformers.js's dtype suffixes, in the order tried: full precision first. */
export const ONNX_DTYPE_SUFFIXES = ['', '_fp16', '_quantized', '_int8', '_uint8', '_q4', '_q4f16', '_bnb4'] as const;

/** The folder's ONNX audio encoder file, or undefined. */
export async function findOnnxAudioEncoder(base: string): Promise<string | undefined> {
  for (const s of ONNX_DTYPE_SUFFIXES) {
    const file = joinModelPath(base, `onnx/audio_encoder${s}.onnx`);
    if (await exists(file)) return file;
  }
  return undefined;
}

export interface HfOnnxEncoder {
  kind: 'onnx';
  file: string;
  bytes: Uint8Array;
  /** `{file}_data` (external initialisers), when the export has one. */
  externalData?: { path: string; data: Uint8Array };
  input: string;
  output: string;
  /** The family whose graph this is, for readouts. */
  modelType: string;
  /** How the route feeds the graph and reads it (the family's). */
  layout: OnnxAudioLayout;
}

/**
 * The folder's ONNX audio encoder, read, unless `choice` is 'audio-tower' or there is none.
 * `choice: 'onnx'` on a folder without one is a typed error.
 */
export async function readHfOnnxEncoder(
  base: string,
  family: HfFamily,
  choice: AudioEncoderChoice | undefined,
  onProgress?: (fraction: number, detail: string) => void,
): Promise<HfOnnxEncoder | undefined> {
  if (choice === 'audio-tower') return undefined;
  const file = await findOnnxAudioEncoder(base);
  if (!file) {
    if (choice === 'onnx') {
      throw new ModelLoadError(
        joinModelPath(base, 'onnx/audio_encoder.onnx'),
        `is missing (nor any of ${ONNX_DTYPE_SUFFIXES.filter(Boolean)
          .map((s) => `audio_encoder${s}.onnx`)
          .join(', ')}): the ONNX audio encoder was asked for; omit the option to run the checkpoint's audio tower`,
      );
    }
    return undefined;
  }
  const layout = family.onnx;
  if (!layout) {
    const known = FAMILIES.filter((f) => f.onnx).map((f) => f.modelType);
    throw new ModelLoadError(
      file,
      `an ONNX audio encoder is only read for ${known.join(', ')} folders, not ${family.modelType}; remove it or load with the audio tower option`,
    );
  }
  const bytes = new Uint8Array(await readBytes(file, (l, t) => onProgress?.(l / t, 'audio encoder')));
  const dataFile = `${file}_data`;
  const name = dataFile.split('/').pop()!;
  const externalData = (await exists(dataFile))
    ? { path: name, data: new Uint8Array(await readBytes(dataFile)) }
    : undefined;
  return {
    kind: 'onnx',
    file,
    bytes,
    ...(externalData ? { externalData } : {}),
    input: layout.input,
    output: layout.output,
    modelType: family.modelType,
    layout,
  };
}
