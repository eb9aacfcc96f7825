/**
 * A queue worker trusts no job: a real redis-server with a password, jobs written straight to
 * the queue that climb out of --out, name another folder or read a recording outside
 * --input-root, beside one that `wnw batch --queue` enqueued. The bad ones fail once with
 * BAD_ARGUMENT and leave nothing anywhere; the good one is transcribed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join, relative } from 'node:path';
import { Queue } from 'bullmq';
import type { RecordingJob } from '../../src/archive/job.js';
import { runCliCaptured } from '../helpers/cli.js';
import { killStartedClis, startCli } from '../helpers/cli-process.js';
import { startRedis, type RedisServer } from '../helpers/redis-server.js';
import { writeShortClips } from '../helpers/short-clips.js';
import { tempDir } from '../helpers/temp.js';

// Characters a URL must escape, so the test also covers how the password is read from it.
const PASSWORD = 'p@ss:w%rd/1';
let redis: RedisServer;
beforeAll(async () => void (redis = await startRedis({ password: PASSWORD })));
afterAll(async () => {
  killStartedClis();
  await redis?.stop();
});

const url = (name: string, user = '') =>
  `redis://${user}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${redis.port}/${name}`;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('wnw worker and jobs it must not run', () => {
  it('bad jobs fail once with BAD_ARGUMENT and write nothing outside --out; the enqueued job is transcribed', async () => {
    const base = tempDir('wnw-untrusted-');
    const input = join(base, 'in');
    const out = join(base, 'out');
    mkdirSync(input);
    mkdirSync(out);
    const [clip] = writeShortClips(input, 1, 2);
    // A real recording outside the input root: only the root stands between it and a transcript.
    copyFileSync(clip, join(base, 'outside.wav'));
    const escape = `wnw-escape-${randomBytes(6).toString('hex')}`;

    const enqueued = await runCliCaptured([
      'batch',
      input,
      '--out',
      out,
      '--queue',
      url('untrusted'),
      '--format',
      'txt',
    ]);
    expect(enqueued.code, enqueued.err).toBe(0);
    expect(enqueued.out).toMatch(/: 1 enqueued/);

    const q = new Queue('untrusted', { connection: { host: '127.0.0.1', port: redis.port, password: PASSWORD } });
    try {
      const [good] = await q.getWaiting();
      const job = good.data as RecordingJob;
      // Retries allowed, as for any job: a bad one must not use them.
      const opts = { attempts: 3, backoff: { type: 'fixed', delay: 100 } };
      await q.add('climb', { ...job, name: `../../${escape}` }, opts);
      await q.add('absolute-out', { ...job, name: 'abs', out: join(base, 'elsewhere') }, opts);
      await q.add('outside-root', { ...job, name: 'outside', file: join(base, 'outside.wav') }, opts);
      await q.add('malformed', { ...job, name: 'malformed', options: { ...job.options, budget: 'all' } }, opts);
      // No data at all, under a name that would clear a terminal and start a log line of its own.
      await q.add('no-data\n\u001b[2J', null, opts);

      const worker = startCli([
        'worker',
        '--queue',
        url('untrusted', 'default'),
        '--out',
        out,
        '--input-root',
        input,
        '--backend',
        'cpu',
        '--lock-duration',
        '5',
        '--exit-when-idle',
      ]);
      expect(await worker.finished(120_000), worker.err()).toEqual({ code: 0, signal: null });
      const log = worker.err();
      expect(log).toMatch(/job \S+ clip1: done/);
      const refusals: [string, RegExp][] = [
        ['climb', /the job's name "\.\.\/\.\.\/wnw-escape-\w+" climbs out with "\.\."/],
        ['absolute-out', /the job's out ".*elsewhere" is outside this worker's --out /],
        ['outside-root', /the job's file .*outside\.wav is outside this worker's --input-root /],
        ['malformed', /the job's options\.budget must be a number in \(0, 1\], got "all"/],
        ['no-data\\\\u000a\\\\u001b\\[2J', /the job's data is not an object \(got null\)/],
      ];
      for (const [name, why] of refusals) {
        const line = new RegExp(`job \\S+ ${name}: failed: BAD_ARGUMENT: ${why.source}.* \\(bad input: not retried\\)`);
        expect(log, name).toMatch(line);
      }

      // Failed once each, with the typed error in the job, whatever attempts they were given.
      const failed = await q.getFailed();
      expect(failed.map((j) => j.name).sort()).toEqual([
        'absolute-out',
        'climb',
        'malformed',
        'no-data\n\u001b[2J',
        'outside-root',
      ]);
      for (const j of failed) {
        expect(j.attemptsMade, j.name).toBe(1);
        expect(j.failedReason, j.name).toMatch(/^BAD_ARGUMENT: the job's /);
      }
      expect(await q.getCompletedCount()).toBe(1);
    } finally {
      await q.close();
    }

    // The transcript and its record, and nothing else anywhere: not beside --out, not above it.
    expect(filesUnder(base)).toEqual(
      [join('in', 'clip1.wav'), join('out', '.wnw', 'clip1.txt.json'), join('out', 'clip1.txt'), 'outside.wav'].sort(),
    );
    expect(existsSync(join(out, '..', '..', `${escape}.txt`))).toBe(false);

    const status = await runCliCaptured(['batch', '--queue', url('untrusted'), '--status']);
    expect(status.code, status.err).toBe(0);
    expect(status.out).not.toMatch(/\u001b/);
    expect(status.out).toMatch(
      /failed: no-data\\u000a\\u001b\[2J \(\?, 1 attempt\): BAD_ARGUMENT: the job's data is not an object/,
    );
    expect(status.out).toMatch(/: 1 done, 5 failed, 0 running, 0 waiting, 0 waiting to retry\n/);
    expect(status.out).toMatch(/failed: climb \(.*, 1 attempt\): BAD_ARGUMENT: /);
  }, 180_000);

  it('a wrong password is refused by name, without being shown', async () => {
    const wrong = await runCliCaptured([
      'batch',
      '--queue',
      `redis://:not-it@127.0.0.1:${redis.port}/untrusted`,
      '--status',
    ]);
    expect(wrong.code).not.toBe(0);
    expect(wrong.err).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+\/untrusted: WRONGPASS/);
    expect(wrong.err).not.toMatch(/not-it/);
  });

  it('a worker needs --out, and --out and --input-root must be folders', async () => {
    const noOut = await runCliCaptured(['worker', '--queue', url('untrusted')]);
    expect(noOut.code).toBe(2);
    expect(noOut.err).toMatch(/missing --out DIR, the folder the outputs go to/);
    const dir = tempDir('wnw-untrusted-flags-');
    const noRoot = await runCliCaptured([
      'worker',
      '--queue',
      url('untrusted'),
      '--out',
      dir,
      '--input-root',
      join(dir, 'none'),
    ]);
    expect(noRoot.code).toBe(2);
    expect(noRoot.err).toMatch(/--input-root .*none: no such folder: create it, or mount the shared folder there/);
  });
});
