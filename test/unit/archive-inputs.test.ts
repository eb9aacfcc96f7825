/** What `wnw batch` reads its recordings from, the queue URL, and the hash that names finished outputs. */
import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { archiveInputs } from '../../src/archive/inputs.js';
import { optionsHash, type LoadSettings, type RecordingOptions } from '../../src/archive/job.js';
import { archiveProgressLine } from '../../src/archive/progress.js';
import { parseQueueUrl } from '../../src/archive/queue-url.js';
import { UsageError } from '../../src/cli/args.js';
import { tempDir } from '../helpers/temp.js';

describe('archiveInputs', () => {
  it('folders (audio files only, subfolders kept in the names), files and manifests, each recording once', () => {
    const dir = tempDir('wnw-inputs-');
    mkdirSync(join(dir, 'a', '2021'), { recursive: true });
    for (const f of ['a/x.wav', 'a/2021/y.mp3', 'a/notes.txt', 'a/.hidden.wav', 'z.flac', 'w.ogg'])
      writeFileSync(join(dir, f), '');
    writeFileSync(join(dir, 'list.txt'), '# recordings\nz.flac\n\nw.ogg\n');
    writeFileSync(
      join(dir, 'm.jsonl'),
      '{"file": "a/x.wav", "out": "renamed/x"}\n{"file": "/elsewhere/q.wav", "language": "fr", "budget": 0.5}\n',
    );
    const inputs = archiveInputs(['a', 'list.txt', 'm.jsonl'], dir);
    expect(inputs.map((i) => [i.file, i.name, i.options])).toEqual([
      [join(dir, 'a', '2021', 'y.mp3'), '2021/y', {}],
      [join(dir, 'a', 'x.wav'), 'x', {}],
      [join(dir, 'z.flac'), 'z', {}],
      [join(dir, 'w.ogg'), 'w', {}],
      // a/x.wav came first from the folder; the manifest's second line is a new recording.
      ['/elsewhere/q.wav', 'q', { language: 'fr', budget: 0.5 }],
    ]);
  });

  it('mistakes are usage errors naming the input and line', () => {
    const dir = tempDir('wnw-inputs-bad-');
    mkdirSync(join(dir, 'one'));
    mkdirSync(join(dir, 'two'));
    writeFileSync(join(dir, 'one', 'talk.wav'), '');
    writeFileSync(join(dir, 'two', 'talk.wav'), '');
    writeFileSync(join(dir, 'bad.jsonl'), '{"file": "x.wav"}\n{"file": "y.wav", "budget": 2}\n');
    writeFileSync(join(dir, 'keys.jsonl'), '{"file": "x.wav", "speed": 2}\n');
    const cases: [string[], RegExp][] = [
      [['missing'], /missing: no such file or folder/],
      [['one/talk.wav', 'two/talk.wav'], /would both be written as "talk"/],
      [['bad.jsonl'], /bad\.jsonl:2: budget must be a number in \(0, 1\]/],
      [['keys.jsonl'], /keys\.jsonl:1: unknown key speed/],
    ];
    for (const [paths, message] of cases) {
      expect(() => archiveInputs(paths, dir)).toThrow(UsageError);
      expect(() => archiveInputs(paths, dir)).toThrow(message);
    }
  });
});

describe('optionsHash', () => {
  const options: RecordingOptions = { policy: 'wnw', budget: 0.2 };
  const load: LoadSettings = { kv: 'f32', weights: 'f32' };
  it('the same for the same options however ordered, different when anything that changes the output does', () => {
    const h = optionsHash(options, 'json', load, 'model-a');
    expect(optionsHash({ budget: 0.2, policy: 'wnw' }, 'json', { weights: 'f32', kv: 'f32' }, 'model-a')).toBe(h);
    expect(optionsHash({ ...options, language: undefined }, 'json', load, 'model-a')).toBe(h);
    for (const other of [
      optionsHash({ ...options, budget: 0.3 }, 'json', load, 'model-a'),
      optionsHash({ ...options, language: 'en' }, 'json', load, 'model-a'),
      optionsHash(options, 'srt', load, 'model-a'),
      optionsHash(options, 'json', { ...load, kv: 'f16' }, 'model-a'),
      optionsHash(options, 'json', load, 'model-b'),
    ])
      expect(other).not.toBe(h);
  });
});

describe('parseQueueUrl', () => {
  it('host, port, credentials and the queue name; the password is not shown', () => {
    const a = parseQueueUrl('redis://user:s%3Acret@redis.lab:6380/lectures-2021');
    expect(a.name).toBe('lectures-2021');
    expect(a.shown).toBe('redis://redis.lab:6380/lectures-2021');
    expect(a.connection).toMatchObject({ host: 'redis.lab', port: 6380, username: 'user', password: 's:cret' });
    expect(parseQueueUrl('redis://localhost/q').connection).toMatchObject({ port: 6379 });
    for (const bad of ['localhost:6379/q', 'http://h:1/q', 'redis://h:1', 'redis://h:1/a:b'])
      expect(() => parseQueueUrl(bad), bad).toThrow(UsageError);
  });
});

describe('archiveProgressLine', () => {
  it('files, hours of audio, the rate and an ETA from the transcribed files', () => {
    const line = archiveProgressLine({
      total: 10,
      transcribed: 4,
      skipped: 2,
      failed: 1,
      audioSeconds: 4 * 1800,
      seconds: 400,
    });
    expect(line).toBe('files 7/10 (2 already done, 1 failed), audio 2.00 h at 18.0 h/h, ETA 0:05:00');
  });
});
