/**
 * `npm run bench -- --page-memory --model DIR [--cache] [--run-seconds 20] [--clip-seconds 5] [--calibrate N]`:
 * loads a model folder in headless Chromium (SwiftShader, the flags of playwright.config.ts)
 * on the WebGPU backend and prints the resident memory of Chromium's renderer and GPU
 * processes (VmRSS, and VmHWM, the peak so far, from /proc/<pid>/status): after the load,
 * then every few seconds while a short clip is transcribed, or with `--calibrate N` while
 * the transcriber triages its heads on the first N clips of calibration-data/ (to the end
 * of the triage, however long: `--run-seconds` bounds a transcription only). What a page keeps of uploaded
 * weights shows in the renderer; what the device holds, in the GPU process. Chromium
 * resets VmHWM now and then (its own peak metrics), so the largest RSS sampled per
 * process is printed at the end too.
 *
 * The folder is served by vite (`/@fs/`, Range requests answered) to the harness page
 * e2e/harness/page-memory.html. The policy is WnW where the folder has heads.json, else the
 * full cache. `--cache`: the browser's weight cache is used, in a profile on disk (a
 * private context's OPFS is small and in memory): a first load fills it and is released,
 * the measured load reads from it; default off, so the weights come from the folder.
 * Linux only (/proc).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ProcessMemory {
  pid: number;
  type: string;
  rssMiB: number;
  hwmMiB: number;
}

function arg(argv: string[], name: string, dflt: string): string {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : dflt;
}

/** A number field of /proc/<pid>/status (VmRSS in KiB, PPid), or null once the process is gone. */
function statusField(pid: number, field: string): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Every live descendant of `root` (by PPid), from /proc. */
export function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const pp = statusField(Number(d), 'PPid');
    if (pp !== null) parent.set(Number(d), pp);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) if (pp === p) (out.push(c), walk(c));
  };
  walk(root);
  return out;
}

/** Chromium's renderer and GPU processes under `root`, with their resident memory. */
export function chromiumMemory(root: number): ProcessMemory[] {
  const out: ProcessMemory[] = [];
  for (const pid of descendants(root)) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    const type = /--type=(renderer|gpu-process)/.exec(cmd)?.[1];
    if (!type) continue;
    const rss = statusField(pid, 'VmRSS');
    const hwm = statusField(pid, 'VmHWM');
    if (rss === null || hwm === null) continue;
    out.push({ pid, type, rssMiB: rss / 1024, hwmMiB: hwm / 1024 });
  }
  return out;
}

/** The largest RSS each process showed in any sample. */
const largest = new Map<number, ProcessMemory>();

function sample(root: number): ProcessMemory[] {
  const procs = chromiumMemory(root);
  for (const p of procs) if ((largest.get(p.pid)?.rssMiB ?? -1) < p.rssMiB) largest.set(p.pid, p);
  return procs;
}

const mib = (x: number) => `${(x / 1024).toFixed(2)} GiB`;

function line(label: string, procs: ProcessMemory[], peaks = true): string {
  // Every renderer is listed, largest first: the page's is the largest (Chromium may keep a spare one).
  const show = (t: string) => {
    const ps = procs.filter((p) => p.type === t).sort((a, b) => b.rssMiB - a.rssMiB);
    const one = (p: ProcessMemory) => `${mib(p.rssMiB)} (${peaks ? `peak ${mib(p.hwmMiB)}, ` : ''}pid ${p.pid})`;
    return ps.length ? ps.map(one).join(' + ') : 'absent';
  };
  return `${label.padEnd(22)} renderer ${show('renderer')}   gpu-process ${show('gpu-process')}`;
}

export async function pageMemoryMain(argv: string[], log: (s: string) => void): Promise<void> {
  const modelArg = arg(argv, 'model', '');
  if (!modelArg) throw new Error('--page-memory needs --model DIR (a model folder)');
  const model = resolve(modelArg);
  if (!existsSync(`${model}/config.json`)) throw new Error(`${model} holds no config.json: not a model folder`);
  const cache = argv.includes('--cache');
  const runSeconds = Number(arg(argv, 'run-seconds', '20'));
  const clipSeconds = Number(arg(argv, 'clip-seconds', '5'));
  const calibrate = Number(arg(argv, 'calibrate', '0'));
  const exe = process.env.WNW_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(exe)) throw new Error(`no Chromium at ${exe} (set WNW_CHROMIUM)`);
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const { createServer } = await import('vite');
  const { chromium } = await import('playwright-core');
  const { chromiumArgs } = await import('../../playwright.config.js');
  const server = await createServer({
    root,
    server: { port: 5312, strictPort: false, host: '127.0.0.1', hmr: false, watch: null, fs: { allow: [root, model] } },
    logLevel: 'error',
  });
  await server.listen();
  const url = server.resolvedUrls?.local[0] ?? 'http://127.0.0.1:5312/';
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const profile = cache ? mkdtempSync(`${tmpdir()}/wnw-page-memory-`) : null;
  const context = profile
    ? await chromium.launchPersistentContext(profile, { executablePath: exe, args: chromiumArgs })
    : await (await chromium.launch({ executablePath: exe, args: chromiumArgs })).newContext();
  try {
    const page = await context.newPage();
    page.on('console', (m) => m.type() === 'error' && log(`page: ${m.text()}`));
    page.on('crash', () => log('page: the renderer crashed'));
    await page.goto(new URL('e2e/harness/page-memory.html', url).href);
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
      timeout: 120_000,
    });
    const pm = 'wnwPageMemory';
    log(`page-memory: ${model} (${cache ? 'weight cache on' : 'weight cache off'}), WebGPU on SwiftShader in ${exe}`);
    const policy = existsSync(`${model}/heads.json`) ? 'wnw' : 'full';
    if (cache) {
      log('filling the weight cache (a first load, then released)');
      await page.evaluate(
        ([k, req]) => (window as unknown as Record<string, { fill(r: unknown): Promise<unknown> }>)[k].fill(req),
        [pm, { model: `/@fs${model}`, cache, policy }] as const,
      );
    }
    log(line('before load', sample(process.pid)));
    let loading = true;
    const loaded = page.evaluate(
      ([k, req]) => (window as unknown as Record<string, { load(r: unknown): Promise<unknown> }>)[k].load(req),
      [pm, { model: `/@fs${model}`, cache, policy }] as const,
    );
    // Sampled while it loads, so the peak of the load shows beside what stays.
    const sampler = (async () => {
      for (let t = 0; loading; t++) {
        await new Promise((r) => setTimeout(r, 5000));
        if (loading) log(line(`loading, ${(t + 1) * 5} s`, sample(process.pid)));
      }
    })();
    const r = (await loaded.finally(() => (loading = false))) as { seconds: number; events: string[] };
    await sampler;
    for (const e of r.events) log(`  ${e}`);
    log(line(`after load (${r.seconds.toFixed(0)} s)`, sample(process.pid)));
    await page.evaluate(
      ([k, req]) => (window as unknown as Record<string, { start(r: unknown): void }>)[k].start(req),
      [pm, { seconds: clipSeconds, maxNewTokens: 8, calibrate }] as const,
    );
    const running = () =>
      page.evaluate((k) => (window as unknown as Record<string, { running(): boolean }>)[k].running(), pm);
    for (let t = 5; calibrate ? await running() : t <= runSeconds; t += 5) {
      await new Promise((res) => setTimeout(res, 5000));
      log(line(`${calibrate ? 'triage' : 'running'}, ${t} s`, sample(process.pid)));
    }
    const end = (await page.evaluate(
      (k) => (window as unknown as Record<string, { stop(): Promise<unknown> }>)[k].stop(),
      pm,
    )) as { how: string; events: string[] };
    for (const e of end.events.slice(-5)) log(`  ${e}`);
    log(`run ${end.how}`);
    log(line('at the end', sample(process.pid)));
    log(line('largest sampled RSS', [...largest.values()], false));
  } finally {
    await context.close();
    await context.browser()?.close();
    await server.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  }
}
