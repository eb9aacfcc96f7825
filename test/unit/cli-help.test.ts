import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, type CliIo } from '../../src/cli/main.js';
import { packageRoot, parseAskArgs, parseLiveArgs, parseTranscribeArgs } from '../../src/cli/args.js';
import { parseBatchArgs } from '../../src/cli/batch.js';
import { parseCalibrateArgs } from '../../src/cli/calibrate.js';
import { parseConvertArgs } from '../../src/cli/convert.js';
import { parseWorkerArgs } from '../../src/cli/worker.js';
import { COMMANDS, FLAGS, flagsOf, type Command } from '../../src/cli/flags.js';
import { COMMAND_SPECS } from '../../src/cli/commands.js';
import { flagLabel, usageLine } from '../../src/cli/help.js';
import { flagSections, flagTable, renderFlagSections } from '../../src/cli/flag-docs.js';

// No command here gets as far as loading a model: help and usage errors answer before it.
function io(): CliIo & { out: string; err: string } {
  const r = {
    out: '',
    err: '',
    tty: false,
    load: () => Promise.reject(new Error('no model is loaded by a help or usage test')),
    stdout: (s: string) => void (r.out += s),
    stderr: (s: string) => void (r.err += s),
    readFile: () => Promise.reject(Object.assign(new Error('no such file'), { code: 'ENOENT' })),
    decode: () => Promise.reject(new Error('nothing is decoded by a help or usage test')),
  };
  return r;
}

async function cli(...argv: string[]) {
  const t = io();
  const code = await runCli(argv, t);
  return { code, out: t.out, err: t.err };
}

const PARSERS: Record<Command, (argv: string[]) => unknown> = {
  transcribe: (a) => parseTranscribeArgs(a),
  ask: (a) => parseAskArgs(a),
  live: (a) => parseLiveArgs(a),
  batch: (a) => parseBatchArgs(a),
  worker: (a) => parseWorkerArgs(a),
  convert: (a) => parseConvertArgs(a),
  calibrate: (a) => parseCalibrateArgs(a),
};

/** The labels of the flag lines under "options:" in a help text. */
function listedFlags(help: string): string[] {
  const options = help.slice(help.indexOf('\noptions:\n') + '\noptions:\n'.length);
  return options
    .split('\n')
    .filter((l) => /^ {2}-/.test(l))
    .map((l) => l.trim().split(/ {2,}/)[0]);
}

describe('wnw COMMAND --help', () => {
  it.each(COMMANDS)('%s: --help and -h print its usage and exactly its flags on stdout, exit 0', async (command) => {
    const long = await cli(command, '--help');
    expect(long.code).toBe(0);
    expect(long.err).toBe('');
    expect(long.out.startsWith(`${usageLine(command)}\n`)).toBe(true);
    expect(long.out.startsWith(`usage: wnw ${command}`)).toBe(true);
    expect(listedFlags(long.out)).toEqual(flagsOf(command).map(flagLabel));
    expect(await cli(command, '-h')).toEqual(long);
    expect(await cli('help', command)).toEqual(long);
  });

  it('a command lists no flag it does not take', async () => {
    const convert = await cli('convert', '--help');
    expect(listedFlags(convert.out)).toEqual(['-h, --help', '--quant f32|f16|q4']);
    expect(convert.out).not.toMatch(/--policy/);
    const worker = await cli('worker', '--help');
    expect(listedFlags(worker.out)).toContain('--input-root DIR');
    expect(worker.out).not.toMatch(/--budget/);
    expect((await cli('transcribe', '--help')).out).not.toMatch(/--input-root|--simulate|--concurrency/);
  });

  it('--help wins over anything else on the line, even what would be a usage error', async () => {
    const help = (await cli('transcribe', '--help')).out;
    for (const argv of [
      ['transcribe', 'x.wav', '--budget', 'lots', '--help'],
      ['transcribe', '--frobnicate', '-h'],
      ['transcribe', '--model', '--help'],
    ]) {
      const r = await cli(...argv);
      expect([r.code, r.err, r.out]).toEqual([0, '', help]);
    }
    // After `--` it is a file's name.
    const file = await cli('transcribe', '--', '--help');
    expect(file.code).toBe(1);
    expect(file.out).toBe('');
    expect(file.err).toMatch(/cannot read .*--help: no such file/);
  });

  it('wnw --help lists every command with its one-line summary, then transcribe in full', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const r = await cli(...argv);
      expect(r.code).toBe(0);
      expect(r.err).toBe('');
      for (const c of COMMANDS)
        expect(r.out).toMatch(new RegExp(`^ {2}${c} +${escape(COMMAND_SPECS[c].summary)}$`, 'm'));
      expect(r.out).toContain((await cli('transcribe', '--help')).out);
    }
    for (const c of COMMANDS) expect(COMMAND_SPECS[c].summary).not.toMatch(/\n/);
    // Without a command it is a usage error: the same text, on stderr.
    const none = await cli();
    expect([none.code, none.out]).toEqual([2, '']);
    expect(none.err).toBe((await cli('--help')).out);
  });

  it("live's help says a tick's cost is bounded by its window, as src/transcribe/live.ts does it", async () => {
    const r = await cli('live', '--help');
    expect(r.out).not.toMatch(/prefills all the audio heard/);
    expect(r.out).toMatch(/a tick encodes and prefills the window's audio only/);
    expect(listedFlags(r.out)).toContain('--window S');
  });
});

describe('usage errors', () => {
  it.each(COMMANDS)('%s: an unknown flag, with or without a value, is named; exit 2 with the usage line', async (c) => {
    for (const argv of [
      [c, '--frobnicate'],
      [c, '--frobnicate', 'x'],
      [c, '--frobnicate=x'],
    ]) {
      const r = await cli(...argv);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err).toBe(
        `wnw: unknown option --frobnicate\n${usageLine(c)}\n(wnw ${c} --help says what each flag does)\n`,
      );
    }
  });

  it('a flag without its value, and a bad value, exit 2 naming it', async () => {
    for (const [argv, message] of [
      [['transcribe', 'x.wav', '--budget'], '--budget needs a value'],
      [['ask', 'x.wav', 'q?', '--model'], '--model needs a value'],
      [['live', '--tick', '--json'], '--tick needs a value'],
      [['batch', 'in', '--out'], '--out needs a value'],
      [['worker', '--queue'], '--queue needs a value'],
      [['convert', 'a', 'b', '--quant'], '--quant needs a value'],
      [['calibrate', '--model'], '--model needs a value'],
      [['transcribe', 'x.wav', '--kv', 'f8'], 'kv must be one of f32, f16, got "f8"'],
      [['ask', 'x.wav', 'q?', '--budget', '2'], 'budget must be a number in (0, 1], got "2"'],
      [['live', '--simulate', 'x.wav', '--tick', '0'], '--tick takes a positive number, got "0"'],
      [['batch', 'in', '--out', 'o', '--format', 'docx'], '--format must be one of txt, json, srt, vtt, got "docx"'],
      [
        ['worker', '--queue', 'redis://h:6379/q', '--out', '.', '--concurrency', '0'],
        '--concurrency takes a whole number from 1 to 64, got "0"',
      ],
      [['convert', 'a', 'b', '--quant', 'q8'], 'weights must be one of f32, f16, q4, got "q8"'],
      [['calibrate', '--model', 'm', '--limit', '0'], '--limit must be a positive integer, got "0"'],
    ] as const) {
      const r = await cli(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.out).toBe('');
      expect(r.err.split('\n')[0]).toBe(`wnw: ${message}`);
      expect(r.err.split('\n')[1]).toBe(usageLine(argv[0]).split('\n')[0]);
    }
  });

  it('an unknown command lists the commands', async () => {
    const r = await cli('translate', 'x.wav');
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `wnw: unknown command "translate" (one of ${COMMANDS.join(', ')}; wnw --help says what each does)\n`,
    );
  });
});

describe('the flag table', () => {
  const names = [...new Set(FLAGS.map((f) => f.name))];

  it('no command has two rows of one flag, and every row has a one-line description', () => {
    for (const c of COMMANDS) {
      const rows = flagsOf(c).map((f) => f.name);
      expect(new Set(rows).size, c).toBe(rows.length);
    }
    for (const f of FLAGS) {
      expect(f.commands.length, f.name).toBeGreaterThan(0);
      expect(f.description, f.name).toMatch(/^[^\n]+$/);
    }
  });

  it.each(COMMANDS)("%s's parser takes exactly the table's flags for it, switches as switches", (command) => {
    const unknown = (argv: string[]) => {
      try {
        PARSERS[command](argv);
        return null;
      } catch (e) {
        return (e as Error).message;
      }
    };
    for (const name of [...names, 'frobnicate']) {
      if (name === 'help') continue; // answered by runCli before any parser (above)
      const row = flagsOf(command).find((f) => f.name === name);
      const error = unknown([row && row.value === undefined ? `--${name}` : `--${name}=x`]);
      if (!row) expect(error, `${command} --${name}`).toBe(`unknown option --${name}`);
      else {
        expect(error ?? '', `${command} --${name}`).not.toMatch(/unknown option/);
        // A switch takes no value: the word after it is not swallowed as one.
        if (row.value === undefined) expect(error ?? '', `${command} --${name}`).not.toMatch(/needs a value/);
        else expect(unknown([`--${name}`]), `${command} --${name}`).toBe(`--${name} needs a value`);
      }
    }
  });

  it('every flag the CLI reads is in the table', () => {
    const dir = join(packageRoot(), 'src', 'cli');
    const read = new Set<string>();
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(dir, file), 'utf8');
      for (const m of text.matchAll(/flags\.(?:get|has)\('([\w-]+)'\)/g)) read.add(m[1]);
    }
    // The scan sees the parsers' reads (so it can fail): these are read in args.ts and batch.ts.
    for (const n of ['budget', 'simulate', 'attempts', 'lock-duration']) expect(read).toContain(n);
    for (const n of read) expect(names, `--${n}`).toContain(n);
  });

  it("the defaults it shows are the parsers' own", () => {
    const t = parseTranscribeArgs(['x.wav']);
    const shown = (command: Command, name: string) => flagsOf(command).find((f) => f.name === name)?.default;
    expect([t.policy, t.budget, t.backend, t.kv, t.format]).toEqual(
      ['policy', 'budget', 'backend', 'kv', 'format'].map((n) => {
        const d = shown('transcribe', n)!;
        return n === 'budget' ? Number(d) : d;
      }),
    );
    expect(String(parseLiveArgs([]).tickSeconds)).toBe(shown('live', 'tick'));
    const b = parseBatchArgs(['in', '--out', 'o', '--queue', 'redis://h:6379/q']);
    expect([b.format, String(b.attempts), String(b.backoffSeconds)]).toEqual([
      shown('batch', 'format'),
      shown('batch', 'attempts'),
      shown('batch', 'backoff'),
    ]);
    const w = parseWorkerArgs(['--queue', 'redis://h:6379/q', '--out', '.']);
    expect([String(w.concurrency), String(w.lockSeconds), w.backend]).toEqual([
      shown('worker', 'concurrency'),
      shown('worker', 'lock-duration'),
      shown('worker', 'backend'),
    ]);
    expect(parseConvertArgs(['a', 'b']).format).toBe(shown('convert', 'quant'));
    expect(parseCalibrateArgs(['--model', 'm'], '/x').clips).toBe(`/x/${shown('calibrate', 'clips')}`);
  });
});

describe("docs/usage.md's flag tables", () => {
  const doc = readFileSync(join(packageRoot(), 'docs', 'usage.md'), 'utf8');

  it('hold one table per command', () => {
    expect(flagSections(doc)).toEqual([...COMMANDS]);
  });

  it('are what the table renders now (npx tsx scripts/cli-docs.ts rewrites them)', () => {
    expect(renderFlagSections(doc)).toBe(doc);
    for (const c of COMMANDS) expect(doc).toContain(`<!-- cli-flags:${c} -->\n${flagTable(c)}\n<!-- /cli-flags -->`);
  });

  it("render each of a command's flags as a row, a pipe in a value escaped", () => {
    const rows = flagTable('convert').split('\n');
    expect(rows).toEqual([
      '| Flag | Value | Default | What it does |',
      '| --- | --- | --- | --- |',
      "| `-h, --help` |  |  | print the command's usage and flags, and exit |",
      "| `--quant` | `f32\\|f16\\|q4` | q4 | the format the decoder's weights are packed in |",
    ]);
    expect(() => renderFlagSections('<!-- cli-flags:nope -->\n<!-- /cli-flags -->')).toThrow(/names no wnw command/);
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
