/**
 * The archive queue end to end: a real redis-server, `wnw batch --queue` enqueueing, two
 * `wnw worker` processes on the reference model (CPU backend), one killed with SIGKILL in the
 * middle of a job. Every recording must come out once, whole, and equal to what
 * `wnw transcribe` makes of it alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { join, relative } from 'node:path';
import { runCliCaptured } from '../helpers/cli.js';
import { killStartedClis, startCli } from '../helpers/cli-process.js';
import { startRedis, type RedisServer } from '../helpers/redis-server.js';
import { writeJoinedClips, writeShortClips } from '../helpers/short-clips.js';
import { tempDir } from '../helpers/temp.js';

let redis: RedisServer;
beforeAll(async () => void (redis = await startRedis()));
afterAll(async () => {
  killStartedClis();
  await redis?.stop();
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

/** The JSON output without its wall-clock timings, which differ from run to run. */
function withoutTimings(json: string): unknown {
  const o = JSON.parse(json) as { stats: Record<string, unknown> };
  for (const k of ['msPerToken', 'encodeMs', 'realTimeFactor']) delete o.stats[k];
  return o;
}

describe('wnw batch --queue and wnw worker', () => {
  it('two workers, one killed mid-job: all 8 recordings transcribed once, a broken one failed once with BAD_AUDIO', async () => {
    const dir = tempDir('wnw-queue-in-');
    const out = tempDir('wnw-queue-out-');
    const clips = writeShortClips(dir, 8, 4);
    writeFileSync(join(dir, 'broken.wav'), 'a text file saved with the wrong name\n');
    const queue = `redis://127.0.0.1:${redis.port}/archive-test`;

    const enqueued = await runCliCaptured(['batch', dir, '--out', out, '--queue', queue, '--backend', 'cpu']);
    expect(enqueued.code, enqueued.err).toBe(0);
    expect(enqueued.out).toMatch(/: 9 enqueued, 0 already in the queue/);
    // Enqueueing the same archive again adds nothing: the ids come from content and options.
    const again = await runCliCaptured(['batch', dir, '--out', out, '--queue', queue]);
    expect(again.out).toMatch(/: 0 enqueued, 9 already in the queue/);

    // A short lock, so the killed worker's job is back in the queue within seconds instead of 30.
    const workerArgs = [
      'worker',
      '--queue',
      queue,
      '--out',
      out,
      '--backend',
      'cpu',
      '--lock-duration',
      '3',
      '--exit-when-idle',
    ];
    const a = startCli(workerArgs);
    const b = startCli(workerArgs);
    const started = await a.waitForLine(/job \S+ clip\d: started/);
    a.child.kill('SIGKILL');
    const killedId = /job (\S+) /.exec(started)![1];
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Killed before it finished the job: this is what makes the test about a lost job.
    expect(a.err()).not.toMatch(new RegExp(`job ${killedId} \\S+: done`));
    const bExit = await b.finished(120_000);
    expect(bExit, b.err()).toEqual({ code: 0, signal: null });

    // The killed job was taken over by the other worker; every other job ran exactly once.
    const log = a.err() + b.err();
    expect(b.err()).toMatch(new RegExp(`job ${killedId} \\S+: done`));
    for (let i = 1; i <= 8; i++) {
      const runs = log.match(new RegExp(`job \\S+ clip${i}: started`, 'g')) ?? [];
      const killed = started.includes(`clip${i}:`);
      expect(runs.length, `clip${i}\n${log}`).toBe(killed ? 2 : 1);
      expect(log.match(new RegExp(`job \\S+ clip${i}: done`, 'g')) ?? [], `clip${i}`).toHaveLength(1);
    }
    expect(log.match(/job \S+ broken: started/g)).toHaveLength(1);
    expect(log).toMatch(/broken: failed: BAD_AUDIO: .* \(bad input: not retried\)/);

    // One whole output per recording and its done record; no temporary file, nothing for the broken one.
    const names = clips.map((_, i) => `clip${i + 1}`);
    expect(filesUnder(out)).toEqual(
      [...names.map((n) => `${n}.json`), ...names.map((n) => join('.wnw', `${n}.json.json`))].sort(),
    );
    for (const [i, clip] of clips.entries()) {
      const alone = await runCliCaptured(['transcribe', clip, '--backend', 'cpu', '--json']);
      expect(alone.code, alone.err).toBe(0);
      expect(withoutTimings(readFileSync(join(out, `clip${i + 1}.json`), 'utf8')), `clip${i + 1}`).toEqual(
        withoutTimings(alone.out),
      );
    }

    const status = await runCliCaptured(['batch', '--queue', queue, '--status']);
    expect(status.code, status.err).toBe(0);
    expect(status.out).toMatch(/: 8 done, 1 failed, 0 running, 0 waiting, 0 waiting to retry\n/);
    expect(status.out).toMatch(/throughput: 0\.0\d h of audio in /);
    expect(status.out).toMatch(/failed: broken \(.*broken\.wav, 1 attempt\): BAD_AUDIO: /);
  }, 240_000);

  it('a job longer than the lock keeps it (not taken for stalled); delivered again, it is answered from its done record', async () => {
    const dir = tempDir('wnw-queue-long-');
    const out = tempDir('wnw-queue-long-out-');
    // Seconds of decoding on the CPU backend against a 2 s lock renewed every second: on the
    // worker's event loop the lock would lapse and the other worker would start the job again.
    writeJoinedClips(dir, 'long.wav', 4);
    const queue = `redis://127.0.0.1:${redis.port}/archive-lock-test`;
    const enqueued = await runCliCaptured(['batch', dir, '--out', out, '--queue', queue, '--format', 'txt']);
    expect(enqueued.out, enqueued.err).toMatch(/: 1 enqueued/);
    const workerArgs = [
      'worker',
      '--queue',
      queue,
      '--out',
      out,
      '--backend',
      'cpu',
      '--lock-duration',
      '2',
      '--exit-when-idle',
    ];
    const workers = [startCli(workerArgs), startCli(workerArgs)];
    const exits = await Promise.all(workers.map((w) => w.finished(60_000)));
    const log = workers.map((w) => w.err()).join('');
    expect(exits, log).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
    expect(log.match(/job \S+ long: started/g), log).toHaveLength(1);
    const seconds = Number(/long: done, [\d.]+ s of audio in ([\d.]+) s/.exec(log)?.[1]);
    expect(seconds, log).toBeGreaterThan(2);
    expect(filesUnder(out)).toEqual([join('.wnw', 'long.txt.json'), 'long.txt']);
    const status = await runCliCaptured(['batch', '--queue', queue, '--status']);
    expect(status.out).toMatch(/: 1 done, 0 failed, 0 running, 0 waiting/);

    // Delivered again (as after a worker that died between writing and acknowledging): answered from the done record.
    const written = statSync(join(out, 'long.txt')).mtimeMs;
    const q = new Queue('archive-lock-test', { connection: { host: '127.0.0.1', port: redis.port } });
    try {
      const [job] = await q.getCompleted();
      await job.retry('completed');
    } finally {
      await q.close();
    }
    const again = startCli(workerArgs);
    expect(await again.finished(60_000), again.err()).toEqual({ code: 0, signal: null });
    expect(again.err()).toMatch(/job \S+ long: already done/);
    expect(again.err()).not.toMatch(/long: started/);
    expect(statSync(join(out, 'long.txt')).mtimeMs).toBe(written);
  }, 120_000);

  it('a queue URL without a name, or --status without --queue, is a usage error', async () => {
    const noName = await runCliCaptured(['worker', '--queue', `redis://127.0.0.1:${redis.port}`]);
    expect(noName.code).toBe(2);
    expect(noName.err).toMatch(/--queue needs the queue's name after the port/);
    const noQueue = await runCliCaptured(['batch', '--status']);
    expect(noQueue.code).toBe(2);
    expect(noQueue.err).toMatch(/--status reports on a queue: give --queue/);
    const retriesHere = await runCliCaptured(['batch', 'in', '--out', 'out', '--attempts', '2']);
    expect(retriesHere.code).toBe(2);
    expect(retriesHere.err).toMatch(/--attempts goes with --queue/);
  });
});
