/** The CLI run in-process on real files (the CPU backends), its stdout and stderr captured. */
import { readFile } from 'node:fs/promises';
import { runCli } from '../../src/cli/main.js';
import { toMono16k } from '../../src/audio/decode.js';

export async function runCliCaptured(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = { out: '', err: '' };
  const code = await runCli(argv, {
    load: async (o) => (await import('../../src/index.js')).loadTranscriber(o),
    stdout: (s) => void (r.out += s),
    stderr: (s) => void (r.err += s),
    readFile: async (p) => new Uint8Array(await readFile(p)),
    decode: (b) => toMono16k(b),
    tty: false,
  });
  return { code, ...r };
}
