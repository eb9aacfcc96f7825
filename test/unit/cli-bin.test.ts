import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// Runs the real bin through node, as `npx wnw` does from a fresh clone: checks that tsx
// loads the TS sources and that failures before the model loads are one line and non-zero.
const bin = fileURLToPath(new URL('../../bin/wnw.mjs', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });

describe('bin/wnw.mjs', () => {
  it('prints usage with --help', () => {
    const r = run('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/usage: wnw transcribe FILE \[/);
  });

  it('answers --help after a subcommand with its usage and flags, exit 0', () => {
    const r = run('transcribe', '--help');
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^usage: wnw transcribe FILE \[/);
    expect(r.stdout).toMatch(/^ {2}--budget R +target r_GPU/m);
  });

  it('exits non-zero with one line for a missing file', () => {
    const r = run('transcribe', '/nonexistent/clip.wav');
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual(['wnw: cannot read /nonexistent/clip.wav: no such file']);
  });

  it('exits non-zero with one line for a file that is not audio', () => {
    const r = run('transcribe', fileURLToPath(new URL('../../package.json', import.meta.url)));
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^wnw: .*package\.json: Not an audio format wnw reads/);
  });

  it('exits 2 on a usage error', () => {
    const r = run('transcribe', 'x.wav', '--budget', 'lots');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/budget must be a number/);
  });
});
