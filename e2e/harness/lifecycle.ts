/**
 * Cancel and device loss at every phase, in one page on WebGPU (e2e/lifecycle.spec.ts).
 * Every GPU buffer made in the page is counted by a createBuffer/destroy hook on
 * GPUDevice.prototype (src/bench/live-bytes.ts), every device made is recorded, and each
 * case checks three things: the typed error with the text decoded so far, the live
 * buffers back at the baseline, and a following run that gives the reference transcript.
 * Loading phases (download, convert, upload, compile) cancel a load of the shipped model;
 * transcription phases (encode, prefill at layer k, decode at step s) cancel a run of a
 * loaded transcriber, whose run before the cancels sets the reference and the baseline.
 * Device loss is `device.destroy()` on the decoder's device.
 * Exposed as window.wnwLifecycle.run(name).
 */
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { loadTranscriberInWorker } from '../../src/worker/client.js';
import { CancelledError, DeviceLostError } from '../../src/errors.js';
import { countLiveBuffersEverywhere } from '../../src/bench/live-bytes.js';
import { parseWav } from '../../src/audio/wav.js';
import { downmix } from '../../src/audio/downmix.js';
import type { GpuContext } from '../../src/gpu/device.js';
import type { LoadOptions, ProgressEvent, TranscribeOptions, TranscriptionResult } from '../../src/types.js';

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

const live = countLiveBuffersEverywhere();
const devices: GPUDevice[] = [];
const requestDevice = GPUAdapter.prototype.requestDevice;
GPUAdapter.prototype.requestDevice = async function (this: GPUAdapter, d?: GPUDeviceDescriptor) {
  const device = await requestDevice.call(this, d);
  devices.push(device);
  return device;
};

const LAYERS = 4;
// f16 weights: the reference model's load then has a convert phase too.
const LOAD: LoadOptions = {
  model: '/models/wnw-ref',
  backend: 'webgpu',
  policy: 'wnw',
  budget: 0.2,
  weightFormat: 'f16',
  cache: false,
};
const RUN: TranscribeOptions = { maxNewTokens: 12 };
const SECONDS = 4;

interface Snapshot {
  buffers: number;
  bytes: number;
}
const snap = (): Snapshot => ({ buffers: live.buffers, bytes: live.live });
const same = (a: Snapshot, b: Snapshot) => a.buffers === b.buffers && a.bytes === b.bytes;
const show = (s: Snapshot) => `${s.buffers} buffers / ${s.bytes} B`;
/** The live buffers by label, for a count that is off. */
const labels = () =>
  JSON.stringify(
    Object.entries(live.byLabel())
      .sort((a, b) => b[1].bytes - a[1].bytes)
      .slice(0, 12),
  );

let audio: Float32Array | null = null;
let asr: WnwTranscriber | null = null;
let reference: TranscriptionResult | null = null;
/** Live buffers with the model loaded and one run done (its caches warm): every transcription-phase case returns here. */
let loadedBaseline: Snapshot = { buffers: 0, bytes: 0 };
/** Live buffers with no transcriber loaded, before and after the reference's load, run and dispose. */
let emptyBaseline: Snapshot = { buffers: 0, bytes: 0 };

class Failed extends Error {}
function expectThat(ok: boolean, what: string): void {
  if (!ok) throw new Failed(what);
}

/**
 * The clip, and the reference: a load, a run and a dispose, which must leave the live
 * buffers where they were (the encoder's runtime frees its own once its last session goes).
 */
async function setup(): Promise<string> {
  const r = await fetch('/samples/sample1.wav');
  audio = downmix(parseWav(new Uint8Array(await r.arrayBuffer())).channels).slice(0, SECONDS * 16000);
  const before = snap();
  const first = await loadTranscriber(LOAD);
  expectThat(first.backendKind === 'webgpu', `not on WebGPU: ${first.backend}`);
  reference = await first.transcribe(audio, RUN);
  first.dispose();
  await settle();
  emptyBaseline = snap();
  expectThat(
    !reference.error && reference.tokens.length >= 6 && reference.text.length > 0,
    `reference run: ${reference.error?.message ?? ''} ${reference.tokens.length} tokens "${reference.text}"`,
  );
  expectThat(
    same(emptyBaseline, before),
    `a loaded, run and disposed transcriber left ${show(emptyBaseline)} (${show(before)} before); live: ${labels()}`,
  );
  return `reference "${reference.text}" (${reference.tokens.length} tokens); ${show(emptyBaseline)} before and after a load, run and dispose`;
}

/**
 * The transcriber of the transcription-phase cases, loaded once after the load cases (which
 * so compare against a page with no transcriber, the encoder's runtime included), with one
 * run done: its buffers then are the baseline every case there returns to.
 */
async function loaded(): Promise<WnwTranscriber> {
  if (asr) return asr;
  asr = await loadTranscriber(LOAD);
  await referenceAgain(asr);
  loadedBaseline = snap();
  return asr;
}

/** A destroyed buffer's count drops at once; this only lets a dispose's async part (the encoder's session) finish. */
const settle = () => new Promise((r) => setTimeout(r, 50));

/** The next run on `t` is the reference run. */
async function referenceAgain(t: WnwTranscriber): Promise<void> {
  const r = await t.transcribe(audio!, RUN);
  expectThat(!r.error, `the following run failed: ${r.error?.message}`);
  expectThat(
    r.tokens.join() === reference!.tokens.join(),
    `the following run gave "${r.text}", the reference "${reference!.text}"`,
  );
}

/** A whole load and run after a cancelled or lost load: the reference, and the buffers back at `before` once disposed. */
async function freshLoadWorks(before: Snapshot): Promise<void> {
  const t = await loadTranscriber(LOAD);
  try {
    await referenceAgain(t);
  } finally {
    t.dispose();
  }
  await settle();
  expectThat(
    same(snap(), before),
    `after the following load and dispose: ${show(snap())}, before: ${show(before)}; live: ${labels()}`,
  );
}

/** A load cancelled (or its device destroyed) at the first progress event `at` accepts. */
async function interruptLoad(
  at: (e: ProgressEvent) => boolean,
  how: 'cancel' | 'lose',
): Promise<{ error: unknown; after: ProgressEvent[] }> {
  const ac = new AbortController();
  const firstDevice = devices.length;
  const after: ProgressEvent[] = [];
  let fired = false;
  try {
    const t = await loadTranscriber({
      ...LOAD,
      signal: ac.signal,
      onProgress: (e) => {
        if (fired) return void after.push(e);
        if (!at(e)) return;
        fired = true;
        if (how === 'cancel') ac.abort();
        else devices.slice(firstDevice).forEach((d) => d.destroy());
      },
    });
    t.dispose();
    return { error: null, after };
  } catch (e) {
    return { error: e, after };
  }
}

async function loadCase(
  phase: 'download' | 'convert' | 'upload' | 'compile',
  at: (e: ProgressEvent) => boolean,
): Promise<string> {
  const before = snap();
  const { error, after } = await interruptLoad(at, 'cancel');
  expectThat(
    error instanceof CancelledError,
    `expected a CancelledError, got ${error instanceof Error ? `${error.name}: ${error.message}` : 'a loaded transcriber'}`,
  );
  const c = error as CancelledError;
  expectThat(c.phase === phase && c.text === '', `cancelled in "${c.phase}" with text "${c.text}"`);
  // Nothing of a later phase is reported once the cancel is in.
  const order = ['download', 'convert', 'upload', 'compile'];
  const later = after.filter(
    (e) => order.indexOf(e.phase) > order.indexOf(phase) && !(phase === 'upload' && e.phase === 'compile'),
  );
  expectThat(later.length === 0, `after the cancel: ${later.map((e) => e.phase).join(', ')}`);
  await settle();
  const now = snap();
  expectThat(same(now, before), `after the cancel ${show(now)}, before the load ${show(before)}; live: ${labels()}`);
  await freshLoadWorks(before);
  return `${c.message} ${show(now)} after it (as before the load); the following load gives the reference`;
}

async function compileLost(): Promise<string> {
  const before = snap();
  const { error } = await interruptLoad((e) => e.phase === 'compile' && (e.pipelines?.compiled ?? 0) >= 1, 'lose');
  expectThat(
    error instanceof DeviceLostError,
    `expected a DeviceLostError, got ${error instanceof Error ? `${error.name}: ${error.message}` : 'a loaded transcriber'}`,
  );
  await settle();
  const now = snap();
  expectThat(same(now, before), `after the loss ${show(now)}, before the load ${show(before)}; live: ${labels()}`);
  await freshLoadWorks(before);
  return `${(error as Error).message} ${show(now)} after it; the following load gives the reference`;
}

/**
 * The load's signal through the worker client: a cancel at the first upload event rejects
 * with the CancelledError naming it, nothing of a later phase arrives, and a following load
 * in a new worker transcribes as the page does. (The cancelled load's worker is stopped, so
 * its buffers go with it; the in-page cases count them.)
 */
async function workerUploadCancel(): Promise<string> {
  const ac = new AbortController();
  const after: ProgressEvent[] = [];
  let fired = false;
  let error: unknown = null;
  try {
    const t = await loadTranscriberInWorker({
      ...LOAD,
      signal: ac.signal,
      onProgress: (e) => {
        if (fired) after.push(e);
        else if (e.phase === 'upload' && (e.bytes?.loaded ?? 0) > 0) ((fired = true), ac.abort());
      },
    });
    t.dispose();
  } catch (e) {
    error = e;
  }
  expectThat(
    error instanceof CancelledError,
    `expected a CancelledError, got ${error instanceof Error ? `${error.name}: ${error.message}` : 'a loaded transcriber'}`,
  );
  const c = error as CancelledError;
  // The cancel reaches the worker a message later, while its upload and compilation run side
  // by side: it names whichever of the two reported last there.
  expectThat(
    (c.phase === 'upload' || c.phase === 'compile') && c.text === '',
    `cancelled in "${c.phase}" with text "${c.text}"`,
  );
  // Events already posted by the worker may still arrive; none past the upload.
  const later = after.filter((e) => e.phase !== 'upload' && e.phase !== 'compile');
  expectThat(later.length === 0, `after the cancel: ${later.map((e) => e.phase).join(', ')}`);
  const t = await loadTranscriberInWorker(LOAD);
  try {
    const r = await t.transcribe(audio!, RUN);
    expectThat(
      !r.error && r.tokens.join() === reference!.tokens.join(),
      `the following load in a worker gave "${r.text}" (${r.error?.message ?? 'no error'}), the reference "${reference!.text}"`,
    );
  } finally {
    t.dispose();
  }
  return `${c.message} through the worker; the following load in a new worker gives the reference`;
}

const decoderDevice = () => (asr as unknown as { decoder: { ctx: GpuContext } }).decoder.ctx.device;

/**
 * A run of the loaded transcriber interrupted where `hooks` say; the error (returned in the
 * result or thrown), the result if any.
 */
async function interruptRun(
  hooks: (interrupt: () => void) => TranscribeOptions,
  how: 'cancel' | 'lose',
): Promise<{ error: unknown; r: TranscriptionResult | null }> {
  await loaded();
  const ac = new AbortController();
  const interrupt = how === 'cancel' ? () => ac.abort() : () => decoderDevice().destroy();
  try {
    const r = await asr!.transcribe(audio!, { ...RUN, signal: ac.signal, ...hooks(interrupt) });
    return { error: r.error ?? null, r };
  } catch (e) {
    return { error: e, r: null };
  }
}

/** The error's class and text, the result's text and tokens a prefix of the reference's, at least `minTokens`. */
function checkPartial(
  error: unknown,
  r: TranscriptionResult | null,
  kind: typeof CancelledError | typeof DeviceLostError,
  minTokens: number,
  maxTokens: number,
): string {
  expectThat(
    error instanceof kind,
    `expected a ${kind.name}, got ${error instanceof Error ? `${error.name}: ${error.message}` : 'no error'}`,
  );
  const text = (error as CancelledError | DeviceLostError).text;
  const tokens = r?.tokens ?? [];
  expectThat(!r || r.text === text, `the error's text "${text}" is not the result's "${r?.text}"`);
  expectThat(
    tokens.length >= minTokens && tokens.length <= maxTokens,
    `${tokens.length} tokens decoded, expected ${minTokens}..${maxTokens}`,
  );
  expectThat(
    tokens.join() === reference!.tokens.slice(0, tokens.length).join(),
    `tokens [${tokens}] are not a prefix of the reference's [${reference!.tokens}]`,
  );
  expectThat(reference!.text.startsWith(text), `"${text}" is not a prefix of the reference "${reference!.text}"`);
  return `${(error as Error).message} "${text}" (${tokens.length} tokens)`;
}

async function runCase(
  name: string,
  hooks: (interrupt: () => void) => TranscribeOptions,
  how: 'cancel' | 'lose',
  kind: typeof CancelledError | typeof DeviceLostError,
  tokens: [number, number],
  phase?: string,
): Promise<string> {
  const { error, r } = await interruptRun(hooks, how);
  const said = checkPartial(error, r, kind, tokens[0], tokens[1]);
  if (phase)
    expectThat(
      (error as CancelledError).phase === phase,
      `cancelled in "${(error as CancelledError).phase}", expected ${phase}`,
    );
  let counted: string;
  if (how === 'cancel') {
    const now = snap();
    expectThat(
      same(now, loadedBaseline),
      `after the cancel ${show(now)}, loaded baseline ${show(loadedBaseline)}; live: ${labels()}`,
    );
    counted = `${show(now)} after it (the baseline)`;
  } else {
    // A lost engine is freed when the loss is seen: the page holds what it held with no transcriber.
    await settle();
    const now = snap();
    expectThat(
      same(now, emptyBaseline),
      `after the loss ${show(now)}, with no transcriber ${show(emptyBaseline)}; live: ${labels()}`,
    );
    counted = `${show(now)} after it (as with no transcriber)`;
  }
  await referenceAgain(asr!);
  await settle();
  // After a loss the next run rebuilt the engine on a new device: the old one's buffers are all freed.
  const now = snap();
  expectThat(
    same(now, loadedBaseline),
    `after the following run ${show(now)}, loaded baseline ${show(loadedBaseline)}; live: ${labels()}`,
  );
  return `${name}: ${said}; ${counted}, ${show(now)} after the following run (the baseline); the following run gives the reference`;
}

const prefillAt =
  (k: number) =>
  (interrupt: () => void): TranscribeOptions => ({
    onProgress: (e) => void (e.phase === 'prefill' && e.detail === `layer ${k} of ${LAYERS}` && interrupt()),
  });
const decodeAt =
  (s: number) =>
  (interrupt: () => void): TranscribeOptions => {
    let n = 0;
    return { onToken: () => void (++n === s && interrupt()) };
  };

const CASES: Record<string, () => Promise<string>> = {
  setup,
  cancel_download: () => loadCase('download', (e) => e.phase === 'download'),
  cancel_convert: () => loadCase('convert', (e) => e.phase === 'convert'),
  cancel_upload: () => loadCase('upload', (e) => e.phase === 'upload' && (e.bytes?.loaded ?? 0) > 0),
  cancel_compile: () => loadCase('compile', (e) => e.phase === 'compile' && (e.pipelines?.compiled ?? 0) >= 1),
  lost_compile: compileLost,
  cancel_upload_in_worker: workerUploadCancel,
  cancel_encode: () =>
    runCase(
      'encode',
      (stop) => ({ onProgress: (e) => void (e.phase === 'encode' && stop()) }),
      'cancel',
      CancelledError,
      [0, 0],
      'encode',
    ),
  cancel_prefill_layer_2: () =>
    runCase('prefill at layer 2', prefillAt(2), 'cancel', CancelledError, [0, 0], 'prefill'),
  cancel_decode_step_3: () => runCase('decode at step 3', decodeAt(3), 'cancel', CancelledError, [3, 3], 'decode'),
  lost_prefill_layer_2: () => runCase('device lost at prefill layer 2', prefillAt(2), 'lose', DeviceLostError, [0, 0]),
  lost_decode_step_3: () => runCase('device lost at decode step 3', decodeAt(3), 'lose', DeviceLostError, [3, 4]),
};

async function run(name: string): Promise<CheckResult> {
  const t0 = performance.now();
  const c = CASES[name];
  if (!c) return { name, pass: false, detail: `no case ${name}`, ms: 0 };
  try {
    return { name, pass: true, detail: await c(), ms: performance.now() - t0 };
  } catch (e) {
    const err = e as Error;
    return {
      name,
      pass: false,
      detail: e instanceof Failed ? err.message : `${err.name}: ${err.message}\n${err.stack ?? ''}`,
      ms: performance.now() - t0,
    };
  }
}

(window as unknown as { wnwLifecycle: unknown }).wnwLifecycle = { run, cases: Object.keys(CASES) };
document.getElementById('status')!.textContent = 'ready';
