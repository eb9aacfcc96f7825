/**
 * `wnw convert` on the Hugging Face miniatures: the converted folder loads without
 * conversion into exactly the packed weights the runtime would make at load, keeps the
 * audio encoder's tensors bit for bit, leaves out what the runtime never loads, and a
 * converted tensor that disagrees with config.json fails naming file and tensor.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { convertFolder, parseConvertArgs } from '../../src/cli/convert.js';
import { UsageError } from '../../src/cli/args.js';
import { ModelLoadError } from '../../src/errors.js';
import { HfCheckpoint } from '../../src/model/hf/checkpoint.js';
import { loadModel } from '../../src/model/loader.js';
import { packDecoderWeights, packedWeightBytes, type PackedDecoderWeights } from '../../src/model/packed-weights.js';
import type { PackedMatrix } from '../../src/model/quant.js';
import { ensureMiniatures } from '../helpers/miniatures.js';

let mini: string;
const tmp = mkdtempSync(join(tmpdir(), 'wnw-convert-'));

beforeAll(async () => {
  mini = await ensureMiniatures();
}, 300_000);

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function sameMatrix(a: PackedMatrix, b: PackedMatrix, what: string): void {
  expect({ what, format: a.format, rows: a.rows, cols: a.cols }).toEqual({
    what,
    format: b.format,
    rows: b.rows,
    cols: b.cols,
  });
  expect(
    Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength).equals(
      Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength),
    ),
    what,
  ).toBe(true);
}

function samePacked(got: PackedDecoderWeights, want: PackedDecoderWeights): void {
  sameMatrix(got.embed, want.embed, 'embed');
  sameMatrix(got.lmHead, want.lmHead, 'lm_head');
  expect(got.lmHead === got.embed).toBe(want.lmHead === want.embed);
  expect(Array.from(got.norm)).toEqual(Array.from(want.norm));
  got.layers.forEach((l, i) => {
    const w = want.layers[i];
    for (const k of ['qkv', 'o', 'gateUp', 'down'] as const) sameMatrix(l[k], w[k], `layer ${i} ${k}`);
    expect(Array.from(l.attnNorm)).toEqual(Array.from(w.attnNorm));
    expect(Array.from(l.mlpNorm)).toEqual(Array.from(w.mlpNorm));
    expect(l.qkvBias && Array.from(l.qkvBias)).toEqual(w.qkvBias && Array.from(w.qkvBias));
  });
}

describe('wnw convert', () => {
  it('parses HF_DIR OUT_DIR [--quant] (default q4)', () => {
    expect(parseConvertArgs(['a', 'b'], '/x')).toEqual({ from: '/x/a', to: '/x/b', format: 'q4' });
    expect(parseConvertArgs(['a', 'b', '--quant', 'f16'], '/x').format).toBe('f16');
    expect(() => parseConvertArgs(['a', 'b', '--quant', 'q8'])).toThrow(UsageError);
    expect(() => parseConvertArgs(['a'])).toThrow(UsageError);
    expect(() => parseConvertArgs(['a', 'a'])).toThrow(/differ/);
  });

  it('Voxtral, q4 in several shards: loads packed, equal to packing the upstream folder at load; encoder tensors unchanged', async () => {
    const src = join(mini, 'voxtral');
    const out = join(tmp, 'voxtral-q4');
    const r = await convertFolder({ from: src, to: out, format: 'q4' }, () => {}, 4 * 2 ** 20);
    expect(r.shards).toBeGreaterThan(1);
    expect(existsSync(join(out, 'tekken.json')) && existsSync(join(out, 'wnw-weights.json'))).toBe(true);
    const [orig, conv] = await Promise.all([loadModel(src), loadModel(out)]);
    // The same config but for the name, which is the folder's.
    expect({ ...conv.config, name: '' }).toEqual({ ...orig.config, name: '' });
    expect(conv.packed?.format).toBe('q4');
    const want = packDecoderWeights(orig.config, orig.weights, 'q4');
    samePacked(conv.packed!, want);
    // 4.5 bits a weight, more at the miniature's small K (scales padded to 16 bytes a row).
    expect(conv.weightBytes).toBe(packedWeightBytes(want).total);
    expect(conv.weightBytes).toBeLessThan(orig.weightBytes / 4);
    // The audio tower and projector: same dtype, shape and values.
    const [a, b] = await Promise.all([HfCheckpoint.open(src), HfCheckpoint.open(out)]);
    try {
      const enc = [...a.tensors.keys()].filter((n) => orig.family!.encoderPrefixes.some((p) => n.startsWith(p)));
      expect(enc.length).toBeGreaterThan(10);
      for (const n of enc) {
        const [ta, tb] = [a.info(n)!, b.info(n)!];
        expect({ n, dtype: tb.dtype, shape: tb.shape }).toEqual({ n, dtype: ta.dtype, shape: ta.shape });
        expect(
          Buffer.from((await b.f32(n, tb.shape)).buffer).equals(Buffer.from((await a.f32(n, ta.shape)).buffer)),
          n,
        ).toBe(true);
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 120_000);

  it('Qwen2.5-Omni, f16: the talker is left out, biases and a tied or untied head as upstream', async () => {
    const src = join(mini, 'qwen2_5_omni');
    const out = join(tmp, 'omni-f16');
    const r = await convertFolder({ from: src, to: out, format: 'f16' });
    expect(r.dropped).toBeGreaterThan(0);
    const index = JSON.parse(readFileSync(join(out, 'model.safetensors.index.json'), 'utf8')) as {
      weight_map: Record<string, string>;
    };
    expect(Object.keys(index.weight_map).some((n) => n.startsWith('talker.'))).toBe(false);
    const [orig, conv] = await Promise.all([loadModel(src), loadModel(out)]);
    samePacked(conv.packed!, packDecoderWeights(orig.config, orig.weights, 'f16'));
    expect(conv.packed!.layers[0].qkvBias).toBeDefined();
    // The lazily dequantised weights are the packed values.
    expect(conv.weights.layers[0].qBias).toEqual(orig.weights.layers[0].qBias);
  }, 120_000);

  it('a converted tensor that config.json contradicts fails naming the shard and tensor', async () => {
    const src = join(mini, 'qwen2_audio');
    const out = join(tmp, 'qwen2-audio-q4');
    await convertFolder({ from: src, to: out, format: 'q4' });
    const cfgFile = join(out, 'config.json');
    const cfg = JSON.parse(readFileSync(cfgFile, 'utf8'));
    const text = cfg.text_config ?? cfg;
    text.intermediate_size = (text.intermediate_size ?? 11008) + 32;
    writeFileSync(cfgFile, JSON.stringify(cfg));
    const err = await loadModel(out).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as ModelLoadError).message).toMatch(/mlp\.(gate|up|down)_proj\.weight/);
    expect((err as ModelLoadError).message).toMatch(/model-0000\d-of-0000\d\.safetensors/);
    expect(readdirSync(out).includes('wnw-weights.json')).toBe(true);
  }, 120_000);
});

// A full collection on demand, to see which f32 tensors the loader still holds.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/**
 * Watches the checkpoint's f32 reads during `run`: how many reads, and the most f32
 * tensors read earlier that were still reachable when a read finished (after a full
 * collection): 0 means at most one f32 tensor existed at a time.
 */
async function watchF32<T>(run: () => Promise<T>): Promise<{ result: T; reads: number; maxHeldBefore: number }> {
  const orig = HfCheckpoint.prototype.f32;
  const refs: WeakRef<Float32Array>[] = [];
  let maxHeldBefore = 0;
  // Patched by hand: a vitest spy would keep every result it returned.
  HfCheckpoint.prototype.f32 = async function (this: HfCheckpoint, ...args: Parameters<HfCheckpoint['f32']>) {
    const out = await orig.apply(this, args);
    collect();
    maxHeldBefore = Math.max(maxHeldBefore, refs.filter((r) => r.deref() !== undefined).length);
    refs.push(new WeakRef(out));
    return out;
  };
  try {
    const result = await run();
    return { result, reads: refs.length, maxHeldBefore };
  } finally {
    HfCheckpoint.prototype.f32 = orig;
  }
}

describe('a Hugging Face folder loaded in a weight format', () => {
  for (const [family, format] of [
    ['voxtral', 'q4'],
    ['qwen2_5_omni', 'q4'],
    ['qwen2_audio', 'f16'],
  ] as const) {
    it(`${family}, ${format}: packed tensor by tensor into exactly what the converted folder holds, one f32 tensor at a time`, async () => {
      const src = join(mini, family);
      const out = join(tmp, `${family}-${format}-ref`);
      await convertFolder({ from: src, to: out, format });
      const conv = await loadModel(out);
      const {
        result: model,
        reads,
        maxHeldBefore,
      } = await watchF32(() => loadModel(src, undefined, { weightFormat: format }));
      expect(model.packed?.format).toBe(format);
      samePacked(model.packed!, conv.packed!);
      expect(model.weightBytes).toBe(conv.weightBytes);
      // Each decoder tensor read once (a tied head's table once), none kept after packing.
      const tables = new Set([model.packed!.embed, model.packed!.lmHead]).size;
      expect(reads).toBe(tables + 1 + model.config.numLayers * (model.config.attentionBias ? 12 : 9));
      expect(maxHeldBefore).toBe(0);
    }, 120_000);
  }

  it('reports the bytes of the decoder tensors read, up to their total, in f32 and while packing', async () => {
    const src = join(mini, 'voxtral');
    const ckpt = await HfCheckpoint.open(src);
    let decoderBytes = 0;
    for (const t of ckpt.tensors.values()) if (t.name.startsWith('language_model.')) decoderBytes += t.byteLength;
    await ckpt.close();
    for (const weightFormat of ['f32', 'q4'] as const) {
      // Packing reports its own phase ('convert') over the same bytes, tensor by tensor.
      const seen: { loaded: number; total: number }[] = [];
      const packed: { loaded: number; total: number }[] = [];
      await loadModel(
        src,
        (_, __, bytes, phase) => {
          if (bytes) (phase === 'convert' ? packed : seen).push(bytes);
        },
        { weightFormat, cache: false },
      );
      expect(seen.length).toBeGreaterThan(10);
      for (const xs of weightFormat === 'q4' ? [seen, packed] : [seen]) {
        expect(xs.every((b, i) => b.total === decoderBytes && (i === 0 || b.loaded > xs[i - 1].loaded))).toBe(true);
        expect(xs[xs.length - 1].loaded).toBe(decoderBytes);
      }
      expect(packed.length > 0).toBe(weightFormat === 'q4');
    }
  }, 120_000);

  it('the probe sees the f32 load hold every tensor (so the check above can fail)', async () => {
    const { result: model, reads, maxHeldBefore } = await watchF32(() => loadModel(join(mini, 'voxtral')));
    expect(model.packed).toBeUndefined();
    expect(maxHeldBefore).toBe(reads - 1);
  }, 120_000);
});
