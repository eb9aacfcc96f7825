/**
 * `npm run bench -- --memory [--weights q4|f16|f32] [--kv f16|f32] [--minutes 10,20,30,40] [--text-rate 4] [--json]`
 *
 * The GPU memory a released backbone needs for a recording, full cache against WnW at
 * r_GPU 0.2, from the sizing the WebGPU backend itself uses (`sessionSizes`, the pool's
 * page arithmetic, `decoderWeightBytes`): no weights are read and no GPU work is done, so
 * it answers "will it fit?" on any machine (src/backend/webgpu/fit.ts, which the demo and
 * the loader use too). The configs are the released config.json files'
 * values, read through the same family mapping as a downloaded folder.
 *
 * Peak = the larger of two phases (fit.ts memoryNeed): the prefill (decoder weights, the
 * decode step's buffers, the per-layer prefill's buffers: one layer's prompt K/V, the
 * hidden states, row blocks, and the pool as the layers placed it, with one layer's K/V
 * staged for CPU copies) and decoding (weights, decode buffers, the pool grown for the
 * text at `--text-rate` generated tokens per second of audio, default 4, and one layer's
 * K/V copied into its larger buffer). Text KV is taken as tokens are generated, so the
 * rate, not the transcriber's cap of 6 a second, sizes it. The WnW pool is a bound: per
 * head 0.2 of the audio positions and a part-filled page, the recall headroom (every head
 * counted tidal), and the text. Before both, the audio tower encodes (a phase of its own,
 * shown apart): the decoder's weights, the tower's and one encode batch (src/encoder/
 * sizing.ts), with the tower in f16 (the transcriber's default beside a q4 decoder) and in
 * q4 (what it falls to where the f16 tower's phase does not fit); the tower is freed before
 * the prefill, and its phase does not grow with the recording.
 *
 * A row whose prompt passes the model's positions is marked and not sized (the model cannot
 * take that recording); one past a limit the model's makers state is sized and marked.
 */
import { FAMILIES } from '../model/families/registry.js';
import { pastStated } from '../model/families/limits.js';
import { hfModelConfig } from '../model/hf/config.js';
import { isWeightFormat } from '../model/packed-weights.js';
import { parseWhisperEncoderConfig } from '../encoder/whisper-config.js';
import { towerBytes } from '../encoder/sizing.js';
import { TEXT_TOKENS_PER_SECOND, defaultMaxNewTokens, maxAudioTokens, poolBytes } from '../backend/webgpu/fit.js';
import { memoryNeed } from '../index.js';
import type { WeightFormat } from '../index.js';

interface RowBase {
  model: string;
  minutes: number;
  audioTokens: number;
}

export interface SizedMemoryRow extends RowBase {
  /** Generated tokens the decode phase holds (the text rate × the audio's seconds). */
  textTokens: number;
  weightBytes: number;
  prefillBytes: number;
  decodeBytes: number;
  /** The encode phase (the decoder's weights, the audio tower's and one encode batch), with the tower in f16 and in q4. */
  encodeF16: number;
  encodeQ4: number;
  poolFull: number;
  poolWnw: number;
  peakFull: number;
  peakWnw: number;
  /** The phase each peak falls in. */
  peakPhaseFull: 'prefill' | 'decode';
  peakPhaseWnw: 'prefill' | 'decode';
  /** The stated limits the recording passes, where it passes any. */
  note?: string;
}

/** A recording whose prompt passes the model's positions: not sized, since the model cannot take it. */
export interface PastPositionsRow extends RowBase {
  positions: number;
  note: string;
}

export type MemoryRow = SizedMemoryRow | PastPositionsRow;

export const isSized = (r: MemoryRow): r is SizedMemoryRow => !('positions' in r);

export { poolBytes };

export function memoryTable(
  weights: WeightFormat,
  kv: 'f16' | 'f32',
  minutes: number[],
  textPerSecond = TEXT_TOKENS_PER_SECOND,
): MemoryRow[] {
  const rows: MemoryRow[] = [];
  // The released checkpoints the family records describe.
  for (const family of FAMILIES) {
    const r = family.shapes.released;
    if (!r) continue;
    const model = r.name;
    const { config: c, tiedEmbeddings } = hfModelConfig(family, r.json, `${model}/config.json`);
    const towerConfig = parseWhisperEncoderConfig(family.audioConfig(r.json), `${model}/config.json`, family.encoder);
    const tower = (f: WeightFormat) => towerBytes(towerConfig, family.encoder, c.hiddenSize, f);
    for (const m of minutes) {
      const A = r.audioTokens(60 * m);
      // The prompt alone is held against the positions: the transcript's length is not known, and its reserve is a cap.
      if (A > maxAudioTokens(c)) {
        rows.push({
          model,
          minutes: m,
          audioTokens: A,
          positions: c.maxPositions,
          note: `past the model's ${c.maxPositions.toLocaleString('en-US')} positions`,
        });
        continue;
      }
      // The text cap from the recording's length, padding aside.
      const request = {
        weightFormat: weights,
        tied: tiedEmbeddings,
        audioTokens: A,
        kvPrecision: kv,
        budget: 0.2,
        maxNewTokens: defaultMaxNewTokens(60 * m),
        textPerSecond,
      };
      const p = memoryNeed(c, request);
      const encode = (f: WeightFormat) => memoryNeed(c, { ...request, audioTower: tower(f) }).phases.encode;
      const note = pastStated(family.statedLimits ?? [], m);
      const phase = (x: { prefill: number; decode: number }) =>
        x.prefill > x.decode ? ('prefill' as const) : ('decode' as const);
      rows.push({
        model,
        minutes: m,
        audioTokens: A,
        textTokens: p.textTokens,
        weightBytes: p.weightBytes,
        prefillBytes: p.prefillBytes,
        decodeBytes: p.decodeBytes,
        encodeF16: encode('f16'),
        encodeQ4: encode('q4'),
        poolFull: p.poolFull,
        poolWnw: p.poolBytes,
        peakFull: p.peakFull,
        peakWnw: p.peakBytes,
        peakPhaseFull: phase(p.phasesFull),
        peakPhaseWnw: phase(p.phases),
        ...(note ? { note } : {}),
      });
    }
  }
  return rows;
}

const gb = (b: number) => (b / 1e9).toFixed(2);

export function memoryMarkdown(
  rows: MemoryRow[],
  weights: WeightFormat,
  kv: string,
  textPerSecond = TEXT_TOKENS_PER_SECOND,
): string {
  const lines = [
    `| model | audio | decoder weights (${weights}) | prefill + decode buffers | KV pool with the text: full / WnW 0.2 | ` +
      'peak prefilling or decoding: full / WnW 0.2 | peak encoding: f16 / q4 audio tower |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  const at = (phase: 'prefill' | 'decode') => (phase === 'prefill' ? ' (p)' : '');
  for (const r of rows) {
    const audio = `${r.minutes} min${r.note ? ` (${r.note})` : ''}`;
    if (!isSized(r)) {
      lines.push(`| ${r.model} | ${audio} | – | – | – | – | – |`);
      continue;
    }
    lines.push(
      `| ${r.model} | ${audio} | ${gb(r.weightBytes)} | ${gb(r.prefillBytes + r.decodeBytes)} | ` +
        `${gb(r.poolFull)} / ≤ ${gb(r.poolWnw)} | ${gb(r.peakFull)}${at(r.peakPhaseFull)} / ≤ ${gb(r.peakWnw)}${at(r.peakPhaseWnw)} | ` +
        `${gb(r.encodeF16)} / ${gb(r.encodeQ4)} |`,
    );
  }
  const flag = textPerSecond === TEXT_TOKENS_PER_SECOND ? '' : ` --text-rate ${textPerSecond}`;
  lines.push(
    '',
    `GB (10⁹ bytes); ${kv} KV pool; text at ${textPerSecond} generated tokens per second of audio, its KV taken as it is generated; ` +
      'peak = the larger of the prefill (marked (p)) and decoding; ' +
      "encoding comes before both (the decoder's weights, the audio tower's and one batch), " +
      "and the run's peak is the largest of the three; " +
      `from \`npm run bench -- --memory --weights ${weights} --kv ${kv}${flag}\`.`,
  );
  return lines.join('\n');
}

/** `--measure`: the sizing held against live GPU bytes at Voxtral's per-layer shapes (memory-measure.ts), in headless Chromium. */
async function runMeasure(argv: string[], log: (s: string) => void): Promise<void> {
  const { onHarnessPage } = await import('./webgpu.js');
  const { deviation, measuredMarkdown } = await import('./memory-measure.js');
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const req = { layers: [1, 2], audioTokens: Number(get('audio-tokens') ?? 375), steps: Number(get('steps') ?? 8) };
  const rows = await onHarnessPage(
    log,
    (page) =>
      page.evaluate(
        (r) => (window as unknown as { wnwMeasure(r: unknown): Promise<unknown> }).wnwMeasure(r),
        req,
      ) as Promise<import('./memory-measure.js').MeasuredRow[]>,
  );
  if (!rows) return;
  console.log(
    argv.includes('--json')
      ? JSON.stringify(
          rows.map((r) => ({ ...r, deviation: deviation(r) })),
          null,
          2,
        )
      : measuredMarkdown(rows),
  );
  const off = rows.filter((r) => deviation(r).peak > 0.02);
  if (off.length)
    throw new Error(`the sizing is more than 2 % from the measured peak at K = ${off.map((r) => r.layers).join(', ')}`);
}

export async function runMemory(argv: string[], log: (s: string) => void = (s) => console.error(s)): Promise<void> {
  if (argv.includes('--measure')) return runMeasure(argv, log);
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const weights = get('weights') ?? 'q4';
  if (!isWeightFormat(weights))
    throw new RangeError(`--weights must be f32, f16 or q4, got ${JSON.stringify(weights)}`);
  const kv = get('kv') ?? 'f16';
  if (kv !== 'f16' && kv !== 'f32') throw new RangeError(`--kv must be f16 or f32, got ${JSON.stringify(kv)}`);
  const minutes = (get('minutes') ?? '10,20,30,40').split(',').map(Number);
  if (!minutes.every((m) => m > 0)) throw new RangeError(`--minutes takes positive numbers, got ${get('minutes')}`);
  const rate = Number(get('text-rate') ?? TEXT_TOKENS_PER_SECOND);
  if (!(rate >= 0))
    throw new RangeError(`--text-rate takes generated tokens per second of audio, got ${get('text-rate')}`);
  const rows = memoryTable(weights, kv, minutes, rate);
  console.log(argv.includes('--json') ? JSON.stringify(rows, null, 2) : memoryMarkdown(rows, weights, kv, rate));
}
