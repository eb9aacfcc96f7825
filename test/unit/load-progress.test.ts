/**
 * Progress while loading, per phase with bytes: download (shard bytes read), convert
 * (bytes packed to f16/q4), compile; upload is WebGPU's and does not occur on the CPU
 * backend (e2e/hf-transcribe.spec.ts sees it in the browser).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { convertFolder } from '../../src/cli/convert.js';
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { defaultModelDir } from '../../src/cli/args.js';
import type { LoadOptions, ProgressEvent } from '../../src/types.js';
import { ensureMiniatures } from '../helpers/miniatures.js';
import { tempDir } from '../helpers/temp.js';

async function load(options: LoadOptions): Promise<ProgressEvent[]> {
  const events: ProgressEvent[] = [];
  const t = await loadTranscriber({ backend: 'cpu', policy: 'full', ...options, onProgress: (e) => events.push(e) });
  t.dispose();
  return events;
}

/** Phases in order of appearance, repeats of the same phase folded. */
const sequence = (events: ProgressEvent[]) => events.map((e) => e.phase).filter((p, i, a) => i === 0 || a[i - 1] !== p);

function expectBytesCounting(events: ProgressEvent[], phase: ProgressEvent['phase']) {
  const of = events.filter((e) => e.phase === phase);
  expect(of.length).toBeGreaterThan(0);
  const total = of[0].bytes!.total;
  let last = -1;
  for (const e of of) {
    expect(e.bytes!.total).toBe(total);
    expect(e.bytes!.loaded).toBeGreaterThanOrEqual(last);
    expect(e.fraction).toBeCloseTo(e.bytes!.loaded / total, 12);
    last = e.bytes!.loaded;
  }
  expect(last).toBe(total);
  return total;
}

describe('load progress per phase', () => {
  let models: string;
  beforeAll(async () => {
    models = await ensureMiniatures();
  }, 300_000);

  it('a Hugging Face folder packed to q4 at load: each tensor downloaded then converted, then compile; no upload on the CPU', async () => {
    const events = await load({ model: join(models, 'voxtral'), weightFormat: 'q4', cache: false });
    const seq = sequence(events);
    // Tensor by tensor: download, convert, download, convert, …, then the model's own last steps and compile.
    const loading = seq.slice(0, seq.indexOf('compile'));
    expect(loading.slice(0, 4)).toEqual(['download', 'convert', 'download', 'convert']);
    expect(new Set(loading)).toEqual(new Set(['download', 'convert']));
    expect(seq.slice(seq.indexOf('compile'))).toEqual(['compile']);
    expect(seq).not.toContain('upload');
    // Both count the same checkpoint bytes, and reach them.
    expect(expectBytesCounting(events, 'convert')).toBe(
      expectBytesCounting(
        events.filter((e) => e.bytes),
        'download',
      ),
    );
    const lastConvert = events.filter((e) => e.phase === 'convert').at(-1)!;
    expect(lastConvert.detail).toBe('decoder weights to q4');
    expect(events.at(-1)).toMatchObject({ phase: 'compile', fraction: 1 });
  }, 120_000);

  it('a folder converted by `npx wnw convert`: the packed bytes downloaded, nothing converted', async () => {
    const out = join(tempDir('wnw-progress-'), 'omni-q4');
    await convertFolder({ from: join(models, 'qwen2_5_omni'), to: out, format: 'q4' });
    const events = await load({ model: out, weightFormat: 'q4' });
    expect(sequence(events)).toEqual(['download', 'compile']);
    expectBytesCounting(
      events.filter((e) => e.bytes),
      'download',
    );
  }, 120_000);

  it('an unconverted folder in f32 has no convert phase', async () => {
    const seq = sequence(await load({ model: join(models, 'qwen2_audio') }));
    expect(seq[0]).toBe('download');
    expect(seq).not.toContain('convert');
    expect(seq.at(-1)).toBe('compile');
  }, 120_000);

  it("our own folder in f16: download, then one convert of the decoder's bytes, then compile", async () => {
    const events = await load({ model: defaultModelDir(), weightFormat: 'f16' });
    expect(sequence(events)).toEqual(['download', 'convert', 'compile']);
    const convert = events.filter((e) => e.phase === 'convert');
    expect(convert.map((e) => e.fraction)).toEqual([0, 1]);
    expect(convert[1].bytes!.loaded).toBe(convert[1].bytes!.total);
    expect(convert[1].bytes!.total).toBeGreaterThan(0);
  }, 120_000);
});
