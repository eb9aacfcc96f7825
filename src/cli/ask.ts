/**
 * `wnw ask FILE "question" ["follow-up" ...]`: one recording opened once, its questions
 * asked in order in one conversation (each after the first continues it), so the audio is
 * encoded and prefilled once. The answers on stdout, or with --json each request's text,
 * the positions it reused and prefilled and its time, and the last request's stats.
 */
import type { AskArgs } from './args.js';
import { jsonOutput, loadFor, oneLine, progressDrawer, readAudio, type CliIo } from './file-run.js';
import type { Transcriber, TranscriptionResult } from '../index.js';

export { ASK_USAGE, parseAskArgs } from './args.js';

const now = () => performance.now();

export async function askCommand(args: AskArgs, io: CliIo): Promise<number> {
  const audio = await readAudio(args.file, io);
  if (!audio) return 1;
  const { onProgress, clear } = progressDrawer(io);
  let asr: Transcriber | undefined;
  const requests: {
    kind: 'ask';
    question: string;
    text: string;
    reusedPositions: number;
    prefilledPositions: number;
    ms: number;
  }[] = [];
  let last: TranscriptionResult | undefined;
  try {
    asr = await loadFor(args, audio.length / 16000, io, onProgress, clear);
    const rec = await asr.open(audio, { signal: io.signal, onProgress });
    for (const question of args.questions) {
      const t0 = now();
      const r = await rec.ask(question, { signal: io.signal, onProgress });
      clear();
      last = r;
      const p = r.stats.prompt;
      requests.push({ kind: 'ask', question, text: r.text, ...p, ms: Math.round(now() - t0) });
      if (!args.json) io.stdout(`${args.questions.length > 1 ? `> ${question}\n` : ''}${r.text}\n`);
      io.stderr(
        `wnw: ${r.stats.decodeSteps} tokens; reused ${p.reusedPositions} positions, prefilled ${p.prefilledPositions}; ${requests.at(-1)!.ms} ms\n`,
      );
      if (r.error) break;
    }
    if (args.json)
      io.stdout(
        `${JSON.stringify({ requests, stats: jsonOutput(last!, args.budget).stats, ...(last?.error ? { error: oneLine(last.error) } : {}) })}\n`,
      );
    if (last?.error) {
      io.stderr(`wnw: ${oneLine(last.error)}\n`);
      return (last.error as { code?: string }).code === 'CANCELLED' ? 130 : 1;
    }
    return 0;
  } catch (e) {
    clear();
    io.stderr(`wnw: ${oneLine(e)}\n`);
    return 1;
  } finally {
    asr?.dispose();
  }
}
