/**
 * The CLI's peak memory while it reads and decodes a recording, against 3× the decoded
 * PCM's f32 size (16 kHz mono). The file goes through `runCli` as `wnw transcribe FILE`
 * does; the model load that follows the decode is stopped, so a 60-minute file costs only
 * its decoding.
 *   npx tsx scripts/decode-memory.ts FILE
 *   npx tsx scripts/decode-memory.ts --make MINUTES OUT.mp3   (a speech clip looped to that
 *     length, 44.1 kHz stereo at 128 kbps, with sox; then measures it)
 */
import '../src/platform/node-host.js';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { runCli } from '../src/cli/main.js';
import { toMono16k } from '../src/index.js';

const CLIP = 'public/models/wnw-ref/fixtures/clip1.wav';
const CLIP_SECONDS = 145035 / 16000;

let file = process.argv[2];
if (file === '--make') {
  const minutes = Number(process.argv[3]);
  file = process.argv[4];
  if (!(minutes > 0) || !file) throw new Error('usage: --make MINUTES OUT.mp3');
  const repeats = Math.ceil((minutes * 60) / CLIP_SECONDS) - 1;
  execFileSync('sox', [CLIP, '-C', '128', '-r', '44100', '-c', '2', file, 'repeat', String(repeats)], {
    stdio: 'inherit',
  });
}
if (!file) throw new Error('usage: npx tsx scripts/decode-memory.ts FILE | --make MINUTES OUT.mp3');

let seconds = 0;
const started = performance.now();
await runCli(['transcribe', file], {
  load: async (o) => {
    seconds = o.audioSeconds ?? 0;
    throw new Error('stopped after decoding');
  },
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  readFile: (p) => readFile(p),
  decode: (b) => toMono16k(b),
  tty: false,
});
const ms = performance.now() - started;
const peak = process.resourceUsage().maxRSS * 1024;
const pcm = seconds * 16000 * 4;
const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
console.log(
  `${(seconds / 60).toFixed(1)} min decoded in ${(ms / 1000).toFixed(1)} s; peak RSS ${mib(peak)}; decoded PCM (f32) ${mib(pcm)}, ` +
    `3x ${mib(3 * pcm)}: ${(peak / pcm).toFixed(2)}x ${peak < 3 * pcm ? 'within' : 'OVER'} the bound`,
);
