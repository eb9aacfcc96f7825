/** The CLI as a separate process (bin/wnw.mjs), its output collected as it comes, for tests that signal or kill it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export interface CliProcess {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  /** Resolves with the first stderr line matching `pattern`; rejects if the process ends first or after `ms`. */
  waitForLine: (pattern: RegExp, ms?: number) => Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** `exited`, or after `ms` the process killed and an error with its stderr: a hung process fails the test with its log. */
  finished: (ms: number) => Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();

/** Kills what startCli started and is still running: a failed test leaves no process behind. */
export function killStartedClis(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

export function startCli(args: string[]): CliProcess {
  const child = spawn(process.execPath, [join(process.cwd(), 'bin', 'wnw.mjs'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let out = '';
  let err = '';
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  const check = () => {
    const lines = err.split('\n');
    for (const w of waiters.splice(0)) {
      const line = lines.find((l) => w.pattern.test(l));
      if (line !== undefined) w.resolve(line);
      else waiters.push(w);
    }
  };
  child.stdout!.on('data', (d: Buffer) => void (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    check();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    out: () => out,
    err: () => err,
    exited,
    finished: (ms) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`still running after ${ms} ms, killed:\n${err}`));
        }, ms);
        void exited.then((r) => {
          clearTimeout(timer);
          resolve(r);
        });
      }),
    waitForLine: (pattern, ms = 60_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in ${ms} ms:\n${err}`)), ms);
        const done = (line: string) => {
          clearTimeout(timer);
          resolve(line);
        };
        waiters.push({ pattern, resolve: done });
        check();
        void exited.then(() => {
          check();
          clearTimeout(timer);
          reject(new Error(`the process ended with no line matching ${pattern}:\n${err}`));
        });
      }),
  };
}
