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
import { parseTranscribeArgs, UsageError, type TranscribeArgs } from './args.js';
import { COMMANDS, type Command } from './flags.js';
import { commandHelp, topHelp, usageLine } from './help.js';
import type { Transcriber, TranscriptionResult } from '../index.js';

export { jsonOutput, oneLine, progressLine, type CliIo } from './file-run.js';

/** `wnw --help`: the commands, then transcribe's usage and flags. */
export const USAGE = topHelp();

const isCommand = (s: string | undefined): s is Command => (COMMANDS as readonly string[]).includes(s ?? '');

/** Whether argv asks for help: `--help` or `-h` before any `--` (after it, they are file names). */
function asksHelp(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    if (command === 'help' && rest.length) return runCli([rest[0], '--help'], io);
    (command ? io.stdout : io.stderr)(USAGE);
    return command ? 0 : 2;
  }
  if (!isCommand(command)) {
    io.stderr(`wnw: unknown command "${command}" (one of ${COMMANDS.join(', ')}; wnw --help says what each does)\n`);
    return 2;
  }
  // Answered before parsing: the parser would take --help for a flag it does not know, or for a value.
  if (asksHelp(rest)) {
    io.stdout(commandHelp(command));
    return 0;
  }
  if (command === 'convert') return convertCommand(rest, io);
  if (command === 'calibrate') return calibrate(rest, io);
  if (command === 'ask') return ask(rest, io);
  if (command === 'live') return live(rest, io);
  if (command === 'batch') return batch(rest, io);
  if (command === 'worker') return worker(rest, io);
  let args: TranscribeArgs;
  try {
    args = parseTranscribeArgs(rest);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(usageError('transcribe', e));
    return 2;
  }
  return transcribeFile(args, io);
}

/** What a usage error prints: the mistake, the command's usage line, and where its flags are explained. */
function usageError(command: Command, e: UsageError): string {
  return `wnw: ${e.message}\n${usageLine(command)}\n(wnw ${command} --help says what each flag does)\n`;
}

/** A subcommand: a usage error prints its usage (exit 2), a failure one line (exit 1). */
async function subcommand<A>(
  command: Command,
  argv: string[],
  io: CliIo,
  parse: (argv: string[]) => A,
  run: (args: A) => Promise<number>,
): Promise<number> {
  let args: A;
  try {
    args = parse(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(usageError(command, e));
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
  const { convertFolder, parseConvertArgs } = await import('./convert.js');
  return subcommand('convert', argv, io, parseConvertArgs, async (args) => {
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
  const { askCommand, parseAskArgs } = await import('./ask.js');
  return subcommand(
    'ask',
    argv,
    io,
    (a) => parseAskArgs(a),
    (args) => askCommand(args, io),
  );
}

/** `wnw live`: audio transcribed as it comes (src/cli/live.ts). */
async function live(argv: string[], io: CliIo): Promise<number> {
  const { liveCommand, parseLiveArgs } = await import('./live.js');
  return subcommand(
    'live',
    argv,
    io,
    (a) => parseLiveArgs(a),
    (args) => liveCommand(args, io),
  );
}

/** `wnw batch`: an archive here or through a queue (src/cli/batch.ts, docs/archives.md). */
async function batch(argv: string[], io: CliIo): Promise<number> {
  const { batchCommand, parseBatchArgs } = await import('./batch.js');
  return subcommand(
    'batch',
    argv,
    io,
    (a) => parseBatchArgs(a),
    (args) => batchCommand(args, io),
  );
}

/** `wnw worker`: a queue's jobs on this machine (src/cli/worker.ts). */
async function worker(argv: string[], io: CliIo): Promise<number> {
  const { workerCommand, parseWorkerArgs } = await import('./worker.js');
  return subcommand(
    'worker',
    argv,
    io,
    (a) => parseWorkerArgs(a),
    (args) => workerCommand(args, io),
  );
}

/** `wnw calibrate`: heads.json from the runtime alone (src/cli/calibrate.ts). */
async function calibrate(argv: string[], io: CliIo): Promise<number> {
  const { calibrateCommand, parseCalibrateArgs } = await import('./calibrate.js');
  return subcommand(
    'calibrate',
    argv,
    io,
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
