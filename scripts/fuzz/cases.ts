/**
 * One fuzz case from its seed: what is broken (audio, a model file, load or transcribe
 * options, CLI flags), the run on the CPU backend, and the verdict. A case passes when it
 * ends in a transcript or one typed WnwError whose message names what was wrong (the
 * broken file, for a model file) with no doubled `wnw:` prefix; the CLI must answer with
 * an exit code and one-line reasons, never a stack trace.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { tmpdir } from 'node:os';
import { runCli } from '../../src/cli/main.js';
import { encodeWav } from '../../src/audio/wav.js';
import { fuzzAudio } from './audio.js';
import { mutateJson, mutateSafetensors } from './files.js';
import { fuzzCliArgs, fuzzLoadOptions, fuzzTranscribeOptions } from './options.js';
import { Dice } from './random.js';
import {
  WnwError,
  loadTranscriber,
  toMono16k,
  type LoadOptions,
  type TranscribeOptions,
  type Transcriber,
} from '../../src/index.js';

/** The valid folders the cases break: our own format and the Hugging Face miniatures present. */
export interface Bases {
  tiny: string;
  hf: string[];
  /** Scratch space for the cases' folders and files, emptied after each case. */
  scratch: string;
}

export interface Verdict {
  seed: number;
  kind: string;
  what: string;
  /** 'transcript', a WnwError's code, or the CLI's exit code. */
  outcome: string;
  /** Every WnwError message the case produced (the doubled-prefix check reads them). */
  messages: string[];
  failure?: string;
  ms?: number;
}

const clip = (seconds: number) =>
  encodeWav([Float32Array.from({ length: Math.round(seconds * 16000) }, (_, i) => 0.3 * Math.sin(i / 7))], 16000);

/** A loaded transcriber of the tiny base, shared by the cases that break only audio or call options. */
let shared: { base: string; asr: Transcriber } | null = null;
async function sharedTranscriber(base: string): Promise<Transcriber> {
  if (shared?.base !== base) {
    shared?.asr.dispose();
    shared = { base, asr: await loadTranscriber({ model: base, backend: 'cpu', policy: 'wnw', budget: 0.3 }) };
  }
  return shared.asr;
}

export function disposeShared(): void {
  shared?.asr.dispose();
  shared = null;
}

/** A copy of `base` in which `file` holds `bytes` (or is absent); the other files are links. */
function brokenFolder(base: string, scratch: string, file: string, bytes: Uint8Array | null): string {
  const dir = join(scratch, 'model');
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(base)) if (f !== file) symlinkSync(join(base, f), join(dir, f));
  if (bytes) writeFileSync(join(dir, file), bytes);
  return dir;
}

const parsedJson = new Map<string, { text: string; parsed: unknown }>();
function jsonOf(path: string): { text: string; parsed: unknown } {
  let j = parsedJson.get(path);
  if (!j) {
    const text = readFileSync(path, 'utf8');
    parsedJson.set(path, (j = { text, parsed: JSON.parse(text) }));
  }
  return j;
}

/** Runs `run` and judges what it ended in: a result, a WnwError, or anything else (a crash). */
async function judge(
  run: () => Promise<unknown>,
  needsName: string | undefined,
): Promise<{ outcome: string; messages: string[]; failure?: string }> {
  try {
    const r = (await run()) as { error?: unknown } | undefined;
    const err = r?.error;
    if (err === undefined) return { outcome: 'transcript', messages: [] };
    if (!(err instanceof WnwError))
      return { outcome: 'crash', messages: [], failure: `the result carried a non-Wnw error: ${describe(err)}` };
    return { outcome: `partial:${err.code}`, messages: [err.message], ...messageFault(err, undefined) };
  } catch (e) {
    if (!(e instanceof WnwError))
      return { outcome: 'crash', messages: [], failure: `threw a non-Wnw error: ${describe(e)}` };
    return { outcome: e.code, messages: [e.message], ...messageFault(e, needsName) };
  }
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}\n${e.stack?.split('\n').slice(1, 6).join('\n')}` : String(e);
}

/** What is wrong with a typed error's message, if anything. */
function messageFault(e: WnwError, file: string | undefined): { failure?: string } {
  if (/wnw:\s*wnw:/.test(e.message) || /^wnw:/.test(e.message))
    return { failure: `message carries the CLI's prefix: ${e.message}` };
  if (!e.message.trim()) return { failure: `${e.code} with an empty message` };
  // A value the code could not read, shown as such: the message then names no real fault.
  // (A third-party cause quoted in parentheses, such as the tokenizer library's, is its own words.)
  const own = e.message.replace(/\([^()]*\)/g, '');
  if (
    /\[object Object\]|\bundefined\b/.test(own) ||
    /\b(NaN|Infinity) (min|s|pages|MiB|GiB|bytes|audio|positions|tokens)\b/.test(e.message)
  )
    return { failure: `message shows an unread value: ${e.message}` };
  if (file && e.code === 'MODEL_LOAD' && !e.message.includes(file))
    return { failure: `MODEL_LOAD does not name ${file}: ${e.message}` };
  return {};
}

async function audioCase(d: Dice, b: Bases): Promise<Omit<Verdict, 'seed'>> {
  const { input, what } = fuzzAudio(d);
  const asr = await sharedTranscriber(b.tiny);
  const policy = d.pick(['full', 'wnw', 'snapkv', 'quest'] as const);
  return {
    kind: 'audio',
    what: `${what}, policy ${policy}`,
    ...(await judge(() => asr.transcribe(input, { policy, maxNewTokens: 3 }), undefined)),
  };
}

const TINY_FILES = ['config.json', 'decoder.safetensors', 'tokenizer.json', 'heads.json'];

async function fileCase(d: Dice, b: Bases, hf: boolean): Promise<Omit<Verdict, 'seed'>> {
  const base = hf ? d.pick(b.hf) : b.tiny;
  const files = readdirSync(base).filter(
    (f) => !f.startsWith('.') && (hf ? f !== 'generation_config.json' || d.chance(0.3) : TINY_FILES.includes(f)),
  );
  const file = d.pick(files);
  const path = join(base, file);
  const m = file.endsWith('.safetensors')
    ? mutateSafetensors(d, readFileSync(path))
    : mutateJson(d, jsonOf(path).text, jsonOf(path).parsed);
  const dir = brokenFolder(base, b.scratch, file, m.bytes);
  // The miniatures ship no heads.json, so only the full cache runs on them.
  const policy = hf ? 'full' : d.pick(['full', 'wnw'] as const);
  const run = async () => {
    const asr = await loadTranscriber({ model: dir, backend: 'cpu', policy, budget: 0.3 });
    try {
      return await asr.transcribe(clip(1), { maxNewTokens: 2 });
    } finally {
      asr.dispose();
    }
  };
  return {
    kind: hf ? 'hf-file' : 'file',
    what: `${basename(base)}/${file}: ${m.what}, policy ${policy}`,
    ...(await judge(run, file)),
  };
}

async function optionsCase(d: Dice, b: Bases): Promise<Omit<Verdict, 'seed'>> {
  if (d.chance(0.5)) {
    const o = fuzzTranscribeOptions(d);
    const asr = await sharedTranscriber(b.tiny);
    return {
      kind: 'transcribe-options',
      what: JSON.stringify(o),
      ...(await judge(() => asr.transcribe(clip(d.pick([0.5, 1, 2])), o as TranscribeOptions), undefined)),
    };
  }
  const o = { model: b.tiny, ...fuzzLoadOptions(d) } as LoadOptions;
  const run = async () => {
    const asr = await loadTranscriber(o);
    try {
      return await asr.transcribe(clip(1), { maxNewTokens: 2 });
    } finally {
      asr.dispose();
    }
  };
  return { kind: 'load-options', what: JSON.stringify({ ...o, model: undefined }), ...(await judge(run, undefined)) };
}

async function cliCase(d: Dice, b: Bases): Promise<Omit<Verdict, 'seed'>> {
  const wav = join(b.scratch, 'in.wav');
  const audio = d.chance(0.6) ? { input: clip(1), what: 'valid 1 s WAV' } : fuzzAudio(d);
  const raw = audio.input instanceof Float32Array ? encodeWav([audio.input], 16000) : audio.input;
  writeFileSync(wav, new Uint8Array(raw as ArrayBuffer | Uint8Array));
  const argv = fuzzCliArgs(d, { wav, model: b.tiny, missing: join(b.scratch, 'nope') });
  let out = '';
  let err = '';
  const io = {
    load: (o: LoadOptions) => loadTranscriber({ ...o, backend: o.backend === 'auto' ? 'cpu' : o.backend }),
    stdout: (s: string) => void (out += s),
    stderr: (s: string) => void (err += s),
    readFile: async (p: string) => new Uint8Array(readFileSync(p)),
    decode: (bytes: Uint8Array) => toMono16k(bytes),
    tty: false,
  };
  const what = `${audio.what}; wnw ${argv.map((a) => (a === wav ? 'in.wav' : a === b.tiny ? 'TINY' : a)).join(' ')}`;
  let code: number;
  try {
    code = await runCli(argv, io);
  } catch (e) {
    return { kind: 'cli', what, outcome: 'crash', messages: [], failure: `runCli threw: ${describe(e)}` };
  }
  const messages = err
    .split('\n')
    .filter((l) => l.startsWith('wnw: '))
    .map((l) => l.slice(5));
  const fault = /\n\s+at .+:\d+:\d+/.test(err)
    ? 'a stack trace on stderr'
    : /wnw:\s*wnw:/.test(err)
      ? 'a doubled wnw: prefix on stderr'
      : ![0, 1, 2].includes(code)
        ? `exit code ${code}`
        : code !== 0 && !messages.length && !/^Usage|usage/m.test(err)
          ? 'a failure without a reason on stderr'
          : undefined;
  void out;
  return {
    kind: 'cli',
    what,
    outcome: `exit ${code}`,
    messages,
    ...(fault ? { failure: `${fault}:\n${err.slice(0, 2000)}` } : {}),
  };
}

/** One case: its seed decides everything. */
export async function runCase(seed: number, b: Bases): Promise<Verdict> {
  const d = new Dice(seed);
  const roll = d.float();
  rmSync(b.scratch, { recursive: true, force: true });
  mkdirSync(b.scratch, { recursive: true });
  const t0 = Date.now();
  try {
    const v =
      roll < 0.22
        ? await audioCase(d, b)
        : roll < 0.52
          ? await fileCase(d, b, false)
          : roll < 0.66 && b.hf.length
            ? await fileCase(d, b, true)
            : roll < 0.86
              ? await optionsCase(d, b)
              : await cliCase(d, b);
    return { seed, ...v, ms: Date.now() - t0 };
  } finally {
    rmSync(b.scratch, { recursive: true, force: true });
  }
}

/** A scratch folder for one run of the fuzzer. */
export function scratchDir(tag: string): string {
  const dir = join(tmpdir(), `wnw-fuzz-${tag}-${process.pid}`);
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  return dir;
}
