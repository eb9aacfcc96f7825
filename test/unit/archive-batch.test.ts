/**
 * `wnw batch` on one machine, on the reference model (CPU backend): a run stopped with Ctrl-C
 * resumes where it stopped, and a broken recording is reported with its typed error while the
 * others are transcribed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { runCliCaptured } from '../helpers/cli.js';
import { killStartedClis, startCli } from '../helpers/cli-process.js';
import { writeJoinedClips, writeShortClips } from '../helpers/short-clips.js';
import { tempDir } from '../helpers/temp.js';

afterAll(killStartedClis);

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

const outputsOf = (names: string[], format: string) =>
  [...names.map((n) => `${n}.${format}`), ...names.map((n) => join('.wnw', `${n}.${format}.json`))].sort();

describe('wnw batch', () => {
  it('stopped by SIGINT after 3 of 8 recordings, run again: transcribes only the other 5', async () => {
    const dir = tempDir('wnw-batch-in-');
    const out = tempDir('wnw-batch-out-');
    writeShortClips(dir, 8, 4);
    // The fourth runs for seconds, so the signal lands while it is being transcribed, however busy the machine.
    writeJoinedClips(dir, 'clip4.wav', 4);
    const args = ['batch', dir, '--out', out, '--backend', 'cpu', '--format', 'txt'];
    const first = startCli(args);
    await first.waitForLine(/\[3\/8\] clip3: [\d.]+ s of audio in/);
    first.child.kill('SIGINT');
    expect(await first.finished(60_000), first.err()).toEqual({ code: 130, signal: null });
    expect(first.out()).toMatch(
      /^3 transcribed, 0 already done, 0 failed, 5 not reached \(interrupted: run the same command again/,
    );
    // The recording that was running when the signal came left nothing, not even a temporary file.
    expect(filesUnder(out)).toEqual(outputsOf(['clip1', 'clip2', 'clip3'], 'txt'));
    const before = ['clip1', 'clip2', 'clip3'].map((n) => statSync(join(out, `${n}.txt`)).mtimeMs);

    const second = await runCliCaptured(args);
    expect(second.code, second.err).toBe(0);
    expect(second.out).toMatch(/^5 transcribed, 3 already done, 0 failed; outputs in /);
    for (let i = 1; i <= 8; i++)
      expect(second.err).toMatch(
        new RegExp(`\\[${i}/8\\] clip${i}: ${i <= 3 ? 'already done' : '[\\d.]+ s of audio in'}`),
      );
    expect(['clip1', 'clip2', 'clip3'].map((n) => statSync(join(out, `${n}.txt`)).mtimeMs)).toEqual(before);
    expect(filesUnder(out)).toEqual(
      outputsOf(
        [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `clip${i}`),
        'txt',
      ),
    );
    // Other options are another output: a different budget redoes a finished recording.
    const other = await runCliCaptured(['batch', join(dir, 'clip1.wav'), ...args.slice(2), '--budget', '0.5']);
    expect(other.out, other.err).toMatch(/^1 transcribed, 0 already done/);
  }, 180_000);

  it('a broken file among good ones: the good ones transcribed, the broken one reported with BAD_AUDIO, exit 1', async () => {
    const dir = tempDir('wnw-batch-broken-');
    const out = tempDir('wnw-batch-broken-out-');
    const clips = writeShortClips(dir, 3, 3);
    writeFileSync(join(dir, 'clip2b.wav'), 'RIFF, then not a WAV file at all\n');
    const r = await runCliCaptured(['batch', dir, '--out', out, '--backend', 'cpu', '--format', 'srt']);
    expect(r.code, r.err).toBe(1);
    expect(r.out).toMatch(/^3 transcribed, 0 already done, 1 failed; outputs in /);
    expect(r.out).toMatch(new RegExp(`\\nfailed: ${join(dir, 'clip2b.wav')}: BAD_AUDIO: .+\\n$`));
    expect(r.err).toMatch(/\[3\/4\] clip2b: failed: BAD_AUDIO: /);
    expect(filesUnder(out)).toEqual(outputsOf(['clip1', 'clip2', 'clip3'], 'srt'));
    // Each output is what `wnw transcribe --format srt` prints for the recording alone.
    for (const [i, clip] of clips.entries()) {
      const alone = await runCliCaptured(['transcribe', clip, '--backend', 'cpu', '--format', 'srt']);
      expect(readFileSync(join(out, `clip${i + 1}.srt`), 'utf8'), `clip${i + 1}`).toBe(alone.out);
    }
    // Run again: the good ones are done, the broken one fails again and still says why.
    const again = await runCliCaptured(['batch', dir, '--out', out, '--backend', 'cpu', '--format', 'srt']);
    expect(again.code).toBe(1);
    expect(again.out).toMatch(/^0 transcribed, 3 already done, 1 failed;[^]*BAD_AUDIO/);
  }, 120_000);
});
