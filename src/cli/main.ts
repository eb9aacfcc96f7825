/**
 * `wnw transcribe FILE ...`: the transcript on stdout (JSON or subtitles with --format), what
 * happened on stderr, and a non-zero exit with a one-line reason when it fails.
 * The work is in `runCli`, which takes its I/O as arguments so tests run it with a fake
 * transcriber and no model.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readFile } from 'node:fs/promises';
import { formatResult, loadFor, oneLine, progressDrawer, readAudio, type CliIo } from './file-run.js';
import {
  ASK_USAGE,
  LIVE_USAGE,
  TRANSCRIBE_USAGE,
  UsageError,
  parseTranscribeArgs,
  type TranscribeArgs,
} from './args.js';
import type { Transcriber, TranscriptionResult } from '../index.js';

export { jsonOutput, oneLine, progressLine, type CliIo } from './file-run.js';

export const USAGE =
  `${TRANSCRIBE_USAGE}\n\n` +
  'Transcribes an audio file: WAV (PCM or float; any rate; any channels), MP3, FLAC, Ogg Vorbis, Ogg Opus, ' +
  'or M4A/AAC (this one through an ffmpeg on the PATH), told apart by their first bytes. --model takes our own model folder or a ' +
  'Hugging Face folder of Voxtral, Qwen2-Audio or Qwen2.5-Omni; the policies wnw and audiokv need its heads.json (npm run calibrate -- --model DIR). ' +
  'A Hugging Face folder with an ONNX audio encoder (onnx/audio_encoder*.onnx) runs it by default; ' +
  "--audio-encoder audio-tower runs the checkpoint's audio tower " +
  'instead, --audio-encoder onnx makes a missing graph an error. ' +
  "--weights defaults to q4 for a Hugging Face folder (in f32 Voxtral-Mini-3B's decoder alone is " +
  '14.95 GiB, against 2.10 GiB in q4), to the format a folder converted by wnw convert was packed in, and to f32 for our own model folder. ' +
  '--language takes a 2- or 3-letter code, or none to let the model detect it; --task translate --target-language de asks a Hugging Face model whose ' +
  'prompt recipe has a translation for the speech in that language. ' +
  "--audio-weights (a Hugging Face audio tower's Linears) defaults to f16 beside a q4 decoder, else to the decoder's format. " +
  '--format txt prints the text (the default), json the text, dated words and stats (--json is the same), ' +
  'srt or vtt subtitles cut from the dated words (2 lines of 42 characters at most, 1 to 7 s each).\n\n' +
  `${ASK_USAGE}\n\n` +
  'Asks questions about one recording of a Hugging Face model that chats (Voxtral, Qwen2-Audio, Qwen2.5-Omni): ' +
  'the audio is encoded and prefilled once, and each question after the first continues the conversation. ' +
  '--json prints each request (its text, the positions it reused and prefilled, its ms) and the stats.\n\n' +
  `${LIVE_USAGE}\n\n` +
  'Transcribes audio as it comes: 16 kHz mono s16le PCM from stdin, or --simulate FILE fed as if spoken ' +
  '(each tick waited for, or at --speed N times real time). Each --tick seconds of new audio the model decodes a ' +
  'hypothesis; the words two consecutive hypotheses agree on are printed. --json prints the text and the commit ' +
  'latencies at the end. Each tick prefills all the audio heard: its cost grows with the recording.\n\n' +
  'usage: wnw convert HF_DIR OUT_DIR [--quant q4|f16|f32]\n\n' +
  "Packs a Hugging Face folder's decoder weights once (default q4), so it loads without conversion.\n\n" +
  'usage: wnw calibrate --model DIR [--clips DIR] [--limit N] [--out FILE] [--directions M] [--block N] [--language CODE] [--compare HEADS.json]\n\n' +
  'Writes heads.json (WnW head roles) computed by the runtime alone: Voice Score from teacher-forced attention, ' +
  'Head Sensitivity estimated from forward passes ' +
  '(docs/calibrate-real-model.md). Resumes from OUT.partial.json after a stop.\n\n' +
  "usage: wnw batch IN... --out DIR [--format json|txt|srt|vtt] [--queue redis://HOST:PORT/NAME] [transcribe's options]\n" +
  '       wnw worker --queue redis://HOST:PORT/NAME --out DIR [--input-root DIR] [--model DIR] [--concurrency 1] [--lock-duration 30] [--exit-when-idle]\n\n' +
  'Transcribes an archive: files, folders or manifests (.txt one path a line, .jsonl with per-file options), one output ' +
  'per recording in DIR, written atomically and skipped when done with the same options, so a rerun resumes. ' +
  'With --queue the recordings are enqueued on Redis (BullMQ) for workers on any number of machines; ' +
  'wnw batch --queue URL --status reports on them (docs/archives.md).\n';

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    (command ? io.stdout : io.stderr)(USAGE);
    return command ? 0 : 2;
  }
  if (command === 'convert') return convertCommand(rest, io);
  if (command === 'calibrate') return calibrate(rest, io);
  if (command === 'ask') return ask(rest, io);
  if (command === 'live') return live(rest, io);
  if (command === 'batch') return batch(rest, io);
  if (command === 'worker') return worker(rest, io);
  if (command !== 'transcribe') {
    io.stderr(`wnw: unknown command "${command}"\n${TRANSCRIBE_USAGE}\n`);
    return 2;
  }
  let args: TranscribeArgs;
  try {
    args = parseTranscribeArgs(rest);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(`wnw: ${e.message}\n${TRANSCRIBE_USAGE}\n`);
    return 2;
  }
  return transcribeFile(args, io);
}

/** A subcommand: a usage error prints its usage (exit 2), a failure one line (exit 1). */
async function subcommand<A>(
  argv: string[],
  io: CliIo,
  usage: string,
  parse: (argv: string[]) => A,
  run: (args: A) => Promise<number>,
): Promise<number> {
  let args: A;
  try {
    args = parse(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(`wnw: ${e.message}\n${usage}\n`);
    return 2;
  }
  try {
    return await run(args);
  } catch (e) {
    io.stderr(`wnw: ${oneLine(e)}\n`);
    return 1;
  }
}

/** `wnw convert`: packs a Hugging Face folder's decoder once (src/cli/convert.ts). */
async function convertCommand(argv: string[], io: CliIo): Promise<number> {
  // Imported here: the converter pulls in node:fs and the checkpoint reader.
  const { CONVERT_USAGE, convertFolder, parseConvertArgs } = await import('./convert.js');
  return subcommand(argv, io, CONVERT_USAGE, parseConvertArgs, async (args) => {
    const r = await convertFolder(args, (line) => io.stderr(`${line}\n`));
    const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    io.stdout(
      `converted ${r.tensors} tensors (${r.dropped} not used by the runtime left out) into ${r.shards} shards: ` +
        `${mb(r.bytesIn)} -> ${mb(r.bytesOut)}; decoder ${args.format}: ` +
        `${Object.entries(r.byFormat)
          .filter(([, b]) => b > 0)
          .map(([f, b]) => `${f} ${mb(b)}`)
          .join(', ')}\n`,
    );
    return 0;
  });
}

/** `wnw ask`: questions about one recording, in one conversation (src/cli/ask.ts). */
async function ask(argv: string[], io: CliIo): Promise<number> {
  const { ASK_USAGE, askCommand, parseAskArgs } = await import('./ask.js');
  return subcommand(
    argv,
    io,
    ASK_USAGE,
    (a) => parseAskArgs(a),
    (args) => askCommand(args, io),
  );
}

/** `wnw live`: audio transcribed as it comes (src/cli/live.ts). */
async function live(argv: string[], io: CliIo): Promise<number> {
  const { LIVE_USAGE, liveCommand, parseLiveArgs } = await import('./live.js');
  return subcommand(
    argv,
    io,
    LIVE_USAGE,
    (a) => parseLiveArgs(a),
    (args) => liveCommand(args, io),
  );
}

/** `wnw batch`: an archive here or through a queue (src/cli/batch.ts, docs/archives.md). */
async function batch(argv: string[], io: CliIo): Promise<number> {
  const { BATCH_USAGE, batchCommand, parseBatchArgs } = await import('./batch.js');
  return subcommand(
    argv,
    io,
    BATCH_USAGE,
    (a) => parseBatchArgs(a),
    (args) => batchCommand(args, io),
  );
}

/** `wnw worker`: a queue's jobs on this machine (src/cli/worker.ts). */
async function worker(argv: string[], io: CliIo): Promise<number> {
  const { WORKER_USAGE, workerCommand, parseWorkerArgs } = await import('./worker.js');
  return subcommand(
    argv,
    io,
    WORKER_USAGE,
    (a) => parseWorkerArgs(a),
    (args) => workerCommand(args, io),
  );
}

/** `wnw calibrate`: heads.json from the runtime alone (src/cli/calibrate.ts). */
async function calibrate(argv: string[], io: CliIo): Promise<number> {
  const { CALIBRATE_USAGE, calibrateCommand, parseCalibrateArgs } = await import('./calibrate.js');
  return subcommand(
    argv,
    io,
    CALIBRATE_USAGE,
    (a) => parseCalibrateArgs(a),
    (args) => calibrateCommand(args, io),
  );
}

async function transcribeFile(args: TranscribeArgs, io: CliIo): Promise<number> {
  const audio = await readAudio(args.file, io);
  if (!audio) return 1;
  const { onProgress, clear: clearProgress } = progressDrawer(io);
  let asr: Transcriber | undefined;
  try {
    asr = await loadFor(args, audio.length / 16000, io, onProgress, clearProgress);
    const result = await asr.transcribe(audio, {
      signal: io.signal,
      onProgress,
      ...(args.task ? { task: args.task } : {}),
      ...(args.targetLanguage ? { targetLanguage: args.targetLanguage } : {}),
    });
    clearProgress();
    io.stdout(formatResult(result, args));
    const s = result.stats;
    io.stderr(
      `wnw: ${s.audioSeconds.toFixed(1)} s of audio, ${s.decodeSteps} tokens, ${s.timing.msPerToken.toFixed(1)} ms/token, ` +
        `r_GPU ${s.kv.rGpu.toFixed(3)}, ${s.traffic.mbPerStep.toFixed(3)} MB/step CPU->GPU, stopped by ${s.stoppedBy}\n`,
    );
    for (const w of s.warnings ?? []) io.stderr(`wnw: warning: ${w}\n`);
    if (result.error) {
      io.stderr(
        `wnw: ${oneLine(result.error)} (${result.text.trim() ? 'the transcript above is partial' : 'nothing was transcribed'})\n`,
      );
      return (result.error as { code?: string }).code === 'CANCELLED' ? 130 : 1;
    }
    return 0;
  } catch (e) {
    clearProgress();
    io.stderr(`wnw: ${oneLine(e)}\n`);
    if (process.env.WNW_DEBUG && e instanceof Error && e.stack) io.stderr(`${e.stack}\n`);
    return 1;
  } finally {
    asr?.dispose();
  }
}

/** The real entry point: bin/wnw.mjs imports this module and calls `main`. */
export async function main(argv = process.argv.slice(2)): Promise<number> {
  const abort = new AbortController();
  process.once('SIGINT', () => abort.abort());
  return runCli(argv, {
    // Imported here, not at the top, so `--help` and usage errors answer without loading the engine.
    load: async (o) => (await import('../index.js')).loadTranscriber(o),
    stdout: (s) => process.stdout.write(s),
    stderr: (s) => process.stderr.write(s),
    readFile: (p) => readFile(p),
    decode: async (b) => (await import('../index.js')).toMono16k(b),
    tty: Boolean(process.stderr.isTTY),
    signal: abort.signal,
  });
}
