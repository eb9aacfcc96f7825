/**
 * `npm run eval:live -- --data DIR [--limit N] [--concat K] [--tick 2] [--max-lag 3] [--window 12]
 *                        [--policy full] [--budget 0.2] [--backend cpu] [--no-offline] [--json]`
 *
 * Live transcription against the offline one, on the same audio and the same policy: each
 * clip (or K clips joined with 0.5 s of silence, their references joined) fed to a live
 * recording 0.1 s at a time, every tick waited for (deterministic), and transcribed offline.
 * Prints the WER of each against the reference, pooled over the clips, and the commit
 * latency (median and 90th percentile over all committed words), and per minute of audio the
 * median tick time and the largest GPU KV of a tick's session. `--no-offline` skips the
 * offline run (an hour's). DIR holds NAME.wav beside NAME.txt (the test sets' layout).
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readFileSync } from 'node:fs';
import { toMono16k } from '../audio/decode.js';
import { loadTranscriber } from '../transcribe/transcriber.js';
import { listClips } from './datasets/index.js';
import { pooledWer } from './wer.js';
import { quantile } from '../quantile.js';
import type { LiveTick } from '../transcribe/live.js';
import { parseBackend, parseBudget, parsePolicy } from '../cli/args.js';

const SAMPLE_RATE = 16000;

function value(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

async function main(argv: string[]): Promise<void> {
  const data = value(argv, 'data') ?? 'public/test-sets/espeak-heldout';
  const limit = Number(value(argv, 'limit') ?? Infinity);
  const concat = Number(value(argv, 'concat') ?? 1);
  const tickSeconds = Number(value(argv, 'tick') ?? 2);
  const maxLagSeconds = Number(value(argv, 'max-lag') ?? 3);
  const windowSeconds = Number(value(argv, 'window') ?? 12);
  const withOffline = !argv.includes('--no-offline');
  const policy = parsePolicy(value(argv, 'policy') ?? 'full');
  const budget = parseBudget(value(argv, 'budget') ?? '0.2');
  const backend = parseBackend(value(argv, 'backend') ?? 'cpu');
  const clips = (await listClips(data, (s) => console.error(`eval:live: ${s}`))).slice(0, limit);
  const groups: { ids: string[]; audio: Float32Array; reference: string }[] = [];
  for (let i = 0; i < clips.length; i += concat) {
    const part = clips.slice(i, i + concat);
    const audios = await Promise.all(
      part.map(async (c) => toMono16k(new Uint8Array(readFileSync(c.wav as string)), SAMPLE_RATE)),
    );
    const gap = SAMPLE_RATE / 2;
    const audio = new Float32Array(audios.reduce((n, a) => n + a.length + gap, -gap));
    let at = 0;
    for (const a of audios) (audio.set(a, at), (at += a.length + gap));
    groups.push({ ids: part.map((c) => c.id), audio, reference: part.map((c) => c.reference).join(' ') });
  }
  const asr = await loadTranscriber({ model: 'public/models/wnw-ref', backend, policy, budget });
  const offline: { reference: string; hypothesis: string }[] = [];
  const live: { reference: string; hypothesis: string }[] = [];
  const latencies: number[] = [];
  const rows = [];
  for (const g of groups) {
    const off = withOffline ? await asr.transcribe(g.audio) : null;
    const rec = asr.live({ tickSeconds, maxLagSeconds, windowSeconds });
    const step = SAMPLE_RATE / 10;
    for (let at = 0; at < g.audio.length; at += step) await rec.append(g.audio.subarray(at, at + step));
    const done = await rec.stop();
    done.recording?.dispose();
    if (off) offline.push({ reference: g.reference, hypothesis: off.text });
    live.push({ reference: g.reference, hypothesis: done.text });
    latencies.push(...done.latencies);
    const row = {
      clip: g.ids.join('+'),
      seconds: +(g.audio.length / SAMPLE_RATE).toFixed(1),
      werOffline: off ? +pooledWer([offline.at(-1)!]).toFixed(4) : NaN,
      werLive: +pooledWer([live.at(-1)!]).toFixed(4),
      ...done.stats,
      minutes: byMinute(done.ticks),
    };
    rows.push(row);
    console.error(
      `eval:live: ${row.clip} (${row.seconds} s): WER offline ${(row.werOffline * 100).toFixed(1)} %, live ${(row.werLive * 100).toFixed(1)} %, ` +
        `latency median ${row.latencyMedianS.toFixed(2)} s, ${row.ticks} ticks, tick median ${row.tickMsMedian.toFixed(0)} ms`,
    );
  }
  asr.dispose();
  latencies.sort((a, b) => a - b);
  const summary = {
    data,
    policy,
    budget,
    tickSeconds,
    maxLagSeconds,
    windowSeconds,
    concat,
    clips: groups.length,
    werOffline: offline.length ? +pooledWer(offline).toFixed(4) : NaN,
    werLive: +pooledWer(live).toFixed(4),
    latencyMedianS: +quantile(latencies, 0.5).toFixed(3),
    latencyP90S: +quantile(latencies, 0.9).toFixed(3),
  };
  if (argv.includes('--json')) console.log(JSON.stringify({ summary, rows }));
  else
    console.log(
      `live vs offline, ${policy}${policy === 'full' ? '' : `@${budget}`}, tick ${tickSeconds} s, max lag ${maxLagSeconds} s, window ${windowSeconds} s, ` +
        `${groups.length} recordings: WER offline ${(summary.werOffline * 100).toFixed(2)} %, live ${(summary.werLive * 100).toFixed(2)} %; ` +
        `commit latency median ${summary.latencyMedianS} s, p90 ${summary.latencyP90S} s`,
    );
}

/** Per minute of audio heard: its ticks, their median and largest wall time, and the largest GPU KV of a tick's session. */
function byMinute(
  ticks: readonly LiveTick[],
): { minute: number; ticks: number; msMedian: number; msMax: number; gpuKvBytesMax: number }[] {
  const out = [];
  for (let m = 0; m * 60 < (ticks.at(-1)?.heardS ?? 0); m++) {
    const inMinute = ticks.filter((t) => t.heardS > m * 60 && t.heardS <= (m + 1) * 60);
    if (!inMinute.length) continue;
    const ms = inMinute.map((t) => t.ms).sort((a, b) => a - b);
    out.push({
      minute: m + 1,
      ticks: inMinute.length,
      msMedian: +quantile(ms, 0.5).toFixed(1),
      msMax: +ms[ms.length - 1].toFixed(1),
      gpuKvBytesMax: Math.max(...inMinute.map((t) => t.gpuKvBytes)),
    });
  }
  return out;
}

await main(process.argv.slice(2));
