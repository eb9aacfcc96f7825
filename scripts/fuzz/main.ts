/**
 * `npm run fuzz -- [--cases 1000] [--seed 1] [--json out.json]`
 *
 * Seeded mutations of everything a user hands over (audio, model files, options, CLI
 * flags; see cases.ts), run on the CPU backend. Case i uses seed S + i, so
 * `npm run fuzz -- --seed <S+i> --cases 1` replays it alone. The cases run in a child
 * process watched from here: a case over 60 s is a hang and one that takes the process
 * past 2 GB is over-memory; either is killed, reported, and the run goes on after it.
 */
import '../../src/platform/node-host.js';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Verdict } from './cases.js';

const HANG_MS = 60_000;
const MAX_RSS = 2 * 2 ** 30;

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v < 0) {
    process.stderr.write(`fuzz: --${name} takes a whole number, got ${process.argv[i + 1]}\n`);
    process.exit(2);
  }
  return v;
}

const cases = flag('cases', 1000);
const seed = flag('seed', 1);
const jsonAt = process.argv.indexOf('--json');
const here = dirname(fileURLToPath(import.meta.url));

function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

interface Failure {
  seed: number;
  kind: string;
  what: string;
  failure: string;
}

/** Runs cases from..cases-1 in one child; resolves with the first case not finished (a hang, over-memory, a dead child) or `cases`. */
function runFrom(from: number, verdicts: Verdict[], failures: Failure[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(here, 'worker.ts'),
        '--seed',
        String(seed),
        '--from',
        String(from),
        '--to',
        String(cases),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let current = from;
    let startedAt = Date.now();
    let buffered = '';
    let stderr = '';
    let ended = false;
    const fail = (why: string) => {
      if (ended) return;
      ended = true;
      clearInterval(watch);
      failures.push({ seed: seed + current, kind: 'process', what: `case ${current}`, failure: why });
      child.kill('SIGKILL');
      resolve(current + 1);
    };
    const watch = setInterval(() => {
      const rss = rssOf(child.pid!);
      if (rss > MAX_RSS) fail(`over memory: ${(rss / 2 ** 30).toFixed(2)} GB`);
      else if (Date.now() - startedAt > HANG_MS) fail(`hang: no verdict after ${HANG_MS / 1000} s`);
    }, 250);
    child.stderr.on('data', (b) => void (stderr = (stderr + b).slice(-4000)));
    child.stdout.on('data', (b) => {
      buffered += b;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let m: Record<string, unknown>;
        try {
          m = JSON.parse(line);
        } catch {
          continue; // something the library printed
        }
        if (typeof m.start === 'number') [current, startedAt] = [m.start, Date.now()];
        else if (typeof m.unhandled === 'string') fail(`unhandled rejection: ${m.unhandled}`);
        else if (typeof m.done === 'number') {
          const v = m as unknown as Verdict & { done: number };
          verdicts.push(v);
          if (v.failure) failures.push({ seed: v.seed, kind: v.kind, what: v.what, failure: v.failure });
          if (process.stderr.isTTY)
            process.stderr.write(`\r${verdicts.length}/${cases} cases, ${failures.length} failures`);
          else if (verdicts.length % 100 === 0)
            process.stderr.write(`${verdicts.length}/${cases} cases, ${failures.length} failures\n`);
        }
      }
    });
    child.on('exit', (code) => {
      if (ended) return;
      ended = true;
      clearInterval(watch);
      const next = verdicts.length ? Math.max(...verdicts.map((v) => v.seed - seed)) + 1 : from;
      if (code !== 0 && next < cases) {
        failures.push({
          seed: seed + current,
          kind: 'process',
          what: `case ${current}`,
          failure: `the process died (exit ${code}): ${stderr.slice(-1500)}`,
        });
        resolve(current + 1);
      } else resolve(cases);
    });
  });
}

const verdicts: Verdict[] = [];
const failures: Failure[] = [];
const t0 = Date.now();
for (let from = 0; from < cases;) from = await runFrom(from, verdicts, failures);
process.stderr.write('\n');

const tally = new Map<string, number>();
for (const v of verdicts) tally.set(`${v.kind} -> ${v.outcome}`, (tally.get(`${v.kind} -> ${v.outcome}`) ?? 0) + 1);
process.stdout.write(
  `${cases} cases from seed ${seed} in ${((Date.now() - t0) / 1000).toFixed(0)} s: ${failures.length} failures\n`,
);
for (const [k, n] of [...tally].sort()) process.stdout.write(`  ${String(n).padStart(4)}  ${k}\n`);
for (const f of failures) {
  process.stdout.write(
    `\nFAIL seed ${f.seed} (${f.kind}: ${f.what})\n  ${f.failure.replace(/\n/g, '\n  ')}\n  replay: npm run fuzz -- --seed ${f.seed} --cases 1\n`,
  );
}
if (jsonAt >= 0) writeFileSync(process.argv[jsonAt + 1], JSON.stringify({ seed, cases, failures, verdicts }, null, 1));
process.exit(failures.length ? 1 : 0);
