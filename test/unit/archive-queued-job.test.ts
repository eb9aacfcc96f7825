/**
 * A queued job as a worker receives it (src/archive/queued-job.ts): every field checked, the
 * output placed under the worker's --out and the recording under its --input-root, symlinks
 * resolved; anything else a BadJobError naming the field.
 */
import { describe, expect, it } from 'vitest';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WnwError } from '../../src/errors.js';
import { optionsHash, type RecordingJob } from '../../src/archive/job.js';
import { BadJobError, checkJobShape, checkQueuedJob, workerFolders } from '../../src/archive/queued-job.js';
import { tempDir } from '../helpers/temp.js';

/** A worker's folders in a fresh temp folder, and a job as `wnw batch --queue` writes it for them. */
function setUp() {
  const base = tempDir('wnw-queued-job-');
  const out = join(base, 'out');
  const input = join(base, 'in');
  mkdirSync(out);
  mkdirSync(input);
  const file = join(input, 'a.wav');
  writeFileSync(file, '');
  const options = { policy: 'wnw' as const, budget: 0.2 };
  const load = { kv: 'f32' as const, weights: 'f32' as const };
  const job: RecordingJob = {
    file,
    name: '2021/a',
    out,
    format: 'json',
    options,
    load,
    modelIdentity: 'model-a',
    optionsHash: optionsHash(options, 'json', load, 'model-a'),
  };
  return { base, out, input, file, job };
}

/** The job with some fields changed (undefined removes one) and its hash made again, so only those fields are wrong. */
function changed(job: RecordingJob, fields: Record<string, unknown>, rehash = true): Record<string, unknown> {
  const j: Record<string, unknown> = { ...job, ...fields };
  for (const k of Object.keys(j)) if (j[k] === undefined) delete j[k];
  if (rehash)
    j.optionsHash = optionsHash(
      j.options as RecordingJob['options'],
      j.format as RecordingJob['format'],
      j.load as RecordingJob['load'],
      j.modelIdentity as string,
    );
  return j;
}

async function refusal(p: Promise<unknown>): Promise<BadJobError> {
  const e = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(e).toBeInstanceOf(BadJobError);
  expect((e as BadJobError).code).toBe('BAD_ARGUMENT');
  return e as BadJobError;
}

describe('checkJobShape', () => {
  it('a job as `wnw batch --queue` writes it comes back equal, optional fields included', () => {
    const { job } = setUp();
    expect(checkJobShape(job)).toEqual(job);
    const full = changed(job, {
      options: { policy: 'snapkv', budget: 1, language: 'en', task: 'translate', targetLanguage: 'de' },
      load: { kv: 'f16', weights: 'q4', audioEncoder: 'onnx', audioWeights: 'f16' },
      format: 'srt',
    });
    expect(checkJobShape(full)).toEqual(full);
    const { out: _, ...noOut } = job;
    expect(checkJobShape(noOut)).toEqual(noOut);
  });

  it('each malformed field is refused, named in the error', () => {
    const { job } = setUp();
    const cases: [Record<string, unknown> | unknown, string][] = [
      [null, 'data'],
      [[job], 'data'],
      ['{"file":"x"}', 'data'],
      [changed(job, { extra: 1 }), 'data.extra'],
      [changed(job, { file: 3 }), 'file'],
      [changed(job, { file: '' }), 'file'],
      [changed(job, { file: 'relative/a.wav' }), 'file'],
      [changed(job, { file: '/in/a\0.wav' }), 'file'],
      [changed(job, { name: undefined }), 'name'],
      [changed(job, { name: ['a'] }), 'name'],
      [changed(job, { out: 7 }), 'out'],
      [changed(job, { out: '' }), 'out'],
      [changed(job, { format: 'exe' }), 'format'],
      [changed(job, { format: undefined }), 'format'],
      [changed(job, { options: 'wnw' }), 'options'],
      [changed(job, { options: { policy: 'evil', budget: 0.2 } }), 'options.policy'],
      [changed(job, { options: { policy: 'wnw', budget: '0.2' } }), 'options.budget'],
      [changed(job, { options: { policy: 'wnw', budget: 2 } }), 'options.budget'],
      [changed(job, { options: { policy: 'wnw', budget: 0 } }), 'options.budget'],
      [changed(job, { options: { policy: 'wnw', budget: 0.2, language: 5 } }), 'options.language'],
      [changed(job, { options: { policy: 'wnw', budget: 0.2, language: 'english please' } }), 'options.language'],
      [changed(job, { options: { policy: 'wnw', budget: 0.2, task: 'summarise' } }), 'options.task'],
      [changed(job, { options: { policy: 'wnw', budget: 0.2, targetLanguage: 'de' } }), 'options.targetLanguage'],
      [
        changed(job, { options: { policy: 'wnw', budget: 0.2, task: 'translate', targetLanguage: 'none' } }),
        'options.targetLanguage',
      ],
      [changed(job, { options: { policy: 'wnw', budget: 0.2, temperature: 1 } }), 'options.temperature'],
      [changed(job, { load: { kv: 'f8', weights: 'f32' } }), 'load.kv'],
      [changed(job, { load: { kv: 'f32', weights: 'int8' } }), 'load.weights'],
      [changed(job, { load: { kv: 'f32', weights: 'f32', audioEncoder: 'whisper' } }), 'load.audioEncoder'],
      [changed(job, { load: { kv: 'f32', weights: 'f32', audioWeights: null } }), 'load.audioWeights'],
      [changed(job, { load: { kv: 'f32', weights: 'f32', path: '/x' } }), 'load.path'],
      [changed(job, { modelIdentity: '' }), 'modelIdentity'],
      [changed(job, { optionsHash: 'f'.repeat(64) }, false), 'optionsHash'],
      // Options changed after hashing: the done record would name options the output was not made with.
      [changed(job, { options: { policy: 'full', budget: 0.2 } }, false), 'optionsHash'],
    ];
    for (const [data, field] of cases) {
      let e: unknown;
      try {
        checkJobShape(data);
      } catch (x) {
        e = x;
      }
      expect(e, `${JSON.stringify(data)}`).toBeInstanceOf(BadJobError);
      expect((e as BadJobError).field, `${JSON.stringify(data)}`).toBe(field);
      expect((e as BadJobError).message).toMatch(/: (enqueue|.*wnw batch --queue)/);
    }
  });

  it('names that leave the output folder, or land in its done records, are refused', () => {
    const { job } = setUp();
    for (const name of [
      '../../x',
      '..',
      'a/../../x',
      '/etc/cron.d/x',
      '\\\\host\\share\\x',
      'C:\\x',
      'a\\..\\..\\x',
      'a//b',
      './a',
      'a/.',
      '.wnw/x',
      '',
    ]) {
      let e: unknown;
      try {
        checkJobShape(changed(job, { name }));
      } catch (x) {
        e = x;
      }
      expect(e, name).toBeInstanceOf(BadJobError);
      expect((e as BadJobError).field, name).toBe('name');
    }
    const climbs = (() => {
      try {
        checkJobShape(changed(job, { name: '../../x' }));
      } catch (e) {
        return (e as Error).message;
      }
    })();
    expect(climbs).toMatch(
      /the job's name "\.\.\/\.\.\/x" climbs out with "\.\.": it must be a path under the worker's --out/,
    );
  });
});

describe('checkQueuedJob', () => {
  it("outputs: the worker's --out, a sub-folder of it named relatively or absolutely; nothing outside", async () => {
    const { base, out, job } = setUp();
    const folders = await workerFolders(out);
    expect(await checkQueuedJob(job, folders)).toEqual(job);
    const { out: _, ...noOut } = job;
    expect((await checkQueuedJob(noOut, folders)).out).toBe(out);
    expect((await checkQueuedJob({ ...job, out: 'part-2' }, folders)).out).toBe(join(out, 'part-2'));
    expect((await checkQueuedJob({ ...job, out: join(out, 'x', 'y') }, folders)).out).toBe(join(out, 'x', 'y'));
    expect((await checkQueuedJob({ ...job, out: `${out}/x/../y` }, folders)).out).toBe(join(out, 'y'));

    for (const bad of [base, '/', join(base, 'elsewhere'), `${out}/../elsewhere`, `${out}-2`]) {
      const e = await refusal(checkQueuedJob({ ...job, out: bad }, folders));
      expect(e.field, bad).toBe('out');
      expect(e.message).toMatch(/is outside this worker's --out .*: start the worker with --out set to the folder/);
    }
    for (const bad of ['../x', 'a/../../x', '.', '.wnw', '.wnw/x', join(out, '.wnw')])
      expect((await refusal(checkQueuedJob({ ...job, out: bad }, folders))).field).toBe('out');
  });

  it('a folder under --out that links outside is refused; --out itself may be a link', async () => {
    const { base, out, job } = setUp();
    mkdirSync(join(base, 'elsewhere'));
    symlinkSync(join(base, 'elsewhere'), join(out, 'link'));
    const folders = await workerFolders(out);
    const e = await refusal(checkQueuedJob({ ...job, name: 'link/x' }, folders));
    expect(e.field).toBe('out');
    expect(e.message).toMatch(/goes through .*elsewhere, outside this worker's --out .* \(a symlink\)/);
    expect((await refusal(checkQueuedJob({ ...job, out: join(out, 'link') }, folders))).field).toBe('out');
    expect((await refusal(checkQueuedJob({ ...job, out: 'link/deeper' }, folders))).field).toBe('out');

    // The shared folder reached through a link: jobs enqueued with either path write under it.
    symlinkSync(out, join(base, 'out-link'));
    const viaLink = await workerFolders(join(base, 'out-link'));
    expect((await checkQueuedJob(job, viaLink)).out).toBe(out);
    expect((await checkQueuedJob({ ...job, out: join(base, 'out-link') }, viaLink)).out).toBe(join(base, 'out-link'));
  });

  it('with an input root: the recording by its real path, inside the root; outside, or missing, refused', async () => {
    const { base, out, input, file, job } = setUp();
    writeFileSync(join(base, 'secret.wav'), '');
    symlinkSync(join(base, 'secret.wav'), join(input, 'innocent.wav'));
    symlinkSync(file, join(base, 'link-in.wav'));
    const folders = await workerFolders(out, input);

    expect((await checkQueuedJob(job, folders)).file).toBe(file);
    // A link from outside to a recording inside reads that recording.
    expect((await checkQueuedJob({ ...job, file: join(base, 'link-in.wav') }, folders)).file).toBe(file);
    for (const bad of [
      join(base, 'secret.wav'),
      join(input, 'innocent.wav'),
      `${input}/../secret.wav`,
      '/etc/passwd',
    ]) {
      const e = await refusal(checkQueuedJob({ ...job, file: bad }, folders));
      expect(e.field, bad).toBe('file');
      expect(e.message).toMatch(/is outside this worker's --input-root .*: enqueue recordings from under it/);
    }
    const missing = await refusal(checkQueuedJob({ ...job, file: join(input, 'gone.wav') }, folders));
    expect(missing.message).toMatch(/cannot read .*gone\.wav: no such file/);

    // Without an input root the path is the job's, read (or not) by the transcription.
    expect((await checkQueuedJob({ ...job, file: join(base, 'secret.wav') }, await workerFolders(out))).file).toBe(
      join(base, 'secret.wav'),
    );
  });

  it("a worker's folders must exist", async () => {
    const { base, out } = setUp();
    for (const [o, root] of [
      [join(base, 'none'), undefined],
      [out, join(base, 'none')],
    ] as const) {
      const e = await workerFolders(o, root).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(e).toBeInstanceOf(WnwError);
      expect((e as Error).message).toMatch(/: no such folder: create it, or mount the shared folder there/);
    }
  });
});
