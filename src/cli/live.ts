/**
 * `wnw live`: audio transcribed as it comes, from 16 kHz mono s16le PCM on stdin, or a file
 * fed as if spoken (`--simulate FILE`): each tick's hypothesis, the words two agree on
 * printed as they are committed (src/transcribe/live.ts). Without --speed a simulation
 * waits for every tick (the same text on any machine); with it the file is fed at that many
 * times real time and the ticks keep up as they can. --json prints the text and the
 * latencies at the end.
 */
import type { Readable } from 'node:stream';
import type { LiveArgs } from './args.js';
import { loadFor, oneLine, progressDrawer, readAudio, type CliIo } from './file-run.js';
import { WnwTranscriber } from '../transcribe/transcriber.js';
import type { WnwLiveRecording } from '../transcribe/live.js';

export { LIVE_USAGE, parseLiveArgs } from './args.js';

const SAMPLE_RATE = 16000;
/** What a simulation feeds at once: a microphone's buffer. */
const CHUNK_SECONDS = 0.1;

export async function liveCommand(args: LiveArgs, io: CliIo, stdin: Readable = process.stdin): Promise<number> {
  const file = args.simulate !== undefined ? await readAudio(args.simulate, io) : undefined;
  if (file === null) return 1;
  const { onProgress, clear } = progressDrawer(io);
  let asr: WnwTranscriber | undefined;
  try {
    const loaded = await loadFor(args, file ? file.length / SAMPLE_RATE : 3600, io, onProgress, clear);
    if (!(loaded instanceof WnwTranscriber)) throw new Error('live runs on a transcriber in this process');
    asr = loaded;
    let printed = '';
    const live = asr.live({
      tickSeconds: args.tickSeconds,
      ...(args.windowSeconds !== undefined ? { windowSeconds: args.windowSeconds } : {}),
      policy: args.policy,
      budget: args.budget,
      ...(args.language !== undefined ? { language: args.language } : {}),
      onText: ({ committed }) => {
        // Only what is new: committed text only grows.
        if (!args.json && committed.length > printed.length) io.stdout(committed.slice(printed.length));
        printed = committed;
      },
    });
    if (file) await feedFile(live, file, args.speed, io.signal);
    else await feedStdin(live, stdin, io.signal);
    const done = await live.stop();
    done.recording?.dispose();
    if (done.recordingError)
      io.stderr(
        `wnw live: the text is kept, but the audio could not be opened for questions: ${done.recordingError.message}\n`,
      );
    if (args.json) io.stdout(`${JSON.stringify({ text: done.text, stats: done.stats })}\n`);
    else io.stdout(`${done.text.slice(printed.length)}\n`);
    const s = done.stats;
    io.stderr(
      `wnw: ${s.audioSeconds.toFixed(1)} s heard, ${s.ticks} ticks; commit latency median ${s.latencyMedianS.toFixed(2)} s, ` +
        `p90 ${s.latencyP90S.toFixed(2)} s\n`,
    );
    return 0;
  } catch (e) {
    clear();
    io.stderr(`wnw: ${oneLine(e)}\n`);
    return 1;
  } finally {
    asr?.dispose();
  }
}

async function feedFile(live: WnwLiveRecording, audio: Float32Array, speed: number | undefined, signal?: AbortSignal) {
  const step = Math.round(CHUNK_SECONDS * SAMPLE_RATE);
  const t0 = performance.now();
  for (let at = 0; at < audio.length && !signal?.aborted; at += step) {
    const chunk = audio.subarray(at, Math.min(audio.length, at + step));
    if (speed === undefined) {
      await live.append(chunk);
      continue;
    }
    // Paced: the chunk is due when the audio before it has been "spoken" at that speed.
    const due = ((at / SAMPLE_RATE) * 1000) / speed - (performance.now() - t0);
    if (due > 0) await new Promise((r) => setTimeout(r, due));
    void live.append(chunk);
  }
}

async function feedStdin(live: WnwLiveRecording, stdin: Readable, signal?: AbortSignal) {
  let carry: Uint8Array = new Uint8Array(0);
  for await (const buf of stdin as AsyncIterable<Uint8Array>) {
    if (signal?.aborted) break;
    const bytes = new Uint8Array(carry.length + buf.length);
    bytes.set(carry);
    bytes.set(buf, carry.length);
    const n = bytes.length >> 1;
    carry = bytes.slice(n * 2);
    const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
    const samples = new Float32Array(n);
    for (let i = 0; i < n; i++) samples[i] = view.getInt16(i * 2, true) / 32768;
    void live.append(samples);
  }
}
