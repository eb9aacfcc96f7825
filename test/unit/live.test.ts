/**
 * Live transcription (src/transcribe/live.ts): the agreement rule, the lag rule and the
 * recording's life on a scripted host; then the reference model fed a spoken clip in
 * 0.1 s chunks, and `wnw live --simulate --json`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agreedTokens, WnwLiveRecording, type LiveHost, type LiveText } from '../../src/transcribe/live.js';
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { toMono16k } from '../../src/audio/decode.js';
import { parseLiveArgs } from '../../src/cli/args.js';
import type { TranscriptionResult } from '../../src/types.js';
import type { WnwRecording } from '../../src/transcribe/recording.js';
import { runCliCaptured } from '../helpers/cli.js';

// Token ids of a toy vocabulary: a piece starts a word where its text starts with a space.
const PIECES = ['', ' the', ' cat', ' sat', ' on', ' a', ' mat', 's', ' dog', ' ran'];
const startsWord = (id: number) => PIECES[id].startsWith(' ');

describe('agreedTokens (LocalAgreement-2 on whole words)', () => {
  it('commits the common prefix cut back to where the hypothesis starts another word', () => {
    // " the cat sat" / " the cat sat on": "sat" may still grow (" sat" + "s") in the first: whole once both go on.
    expect(agreedTokens([1, 2, 3], [1, 2, 3, 4], startsWord)).toBe(2);
    expect(agreedTokens([1, 2, 3, 4], [1, 2, 3, 4], startsWord)).toBe(3);
    // " the cats" against " the cat sat": "cat" is not agreed (one has "cats").
    expect(agreedTokens([1, 2, 7], [1, 2, 3, 4], startsWord)).toBe(1);
    expect(agreedTokens([8], [1, 2], startsWord)).toBe(0);
    expect(agreedTokens([], [1, 2], startsWord)).toBe(0);
  });
});

/** A host whose hypotheses are scripted per tick, dated one word a second from 0. */
function scriptedHost(script: number[][], calls: { heard: number; committed: number[] }[]): LiveHost {
  return {
    sampleRate: 10,
    tokenizer: {
      pieceText: (id) => PIECES[id],
      decoder: () => {
        let first = true;
        return {
          push: (id: number) => {
            const p = first ? PIECES[id].trimStart() : PIECES[id];
            first = false;
            return p;
          },
          flush: () => '',
        };
      },
    },
    replyWrappers: [],
    hypothesis: async (samples, committed) => {
      calls.push({ heard: samples.length / 10, committed: [...committed] });
      const tokens = script[Math.min(calls.length - 1, script.length - 1)];
      const first = committed.filter((id) => startsWord(id)).length;
      const words = tokens
        .filter((id) => startsWord(id))
        .map((id, i) => ({ word: PIECES[id].trim(), start: first + i, end: first + i + 1 }));
      return { text: '', tokens, words, stats: {} } as unknown as TranscriptionResult;
    },
    open: async () => ({ dispose: () => {} }) as unknown as WnwRecording,
  };
}

describe('LiveRecording', () => {
  it('commits what two hypotheses agree on, then the rest at stop; committed text only grows', async () => {
    const calls: { heard: number; committed: number[] }[] = [];
    const texts: LiveText[] = [];
    const host = scriptedHost(
      [
        [1, 2], // " the cat"
        [1, 2, 3], // " the cat sat": " the" agreed (" cat" ended the one before: it might have gone on)
        [2, 3, 4], // after " the": " cat sat on": " cat" agreed
        [3, 4, 5, 6], // after " the cat": " sat on a mat", the last hypothesis, committed whole
      ],
      calls,
    );
    const live = new WnwLiveRecording(host, { tickSeconds: 1, maxLagSeconds: 100, onText: (t) => texts.push(t) });
    for (let i = 0; i < 3; i++) await live.append(new Float32Array(10));
    const done = await live.stop();
    expect(calls.map((c) => c.heard)).toEqual([1, 2, 3, 3]);
    expect(calls.map((c) => c.committed)).toEqual([[], [], [1], [1, 2]]);
    expect(done.tokens).toEqual([1, 2, 3, 4, 5, 6]);
    expect(done.text).toBe('the cat sat on a mat');
    expect(texts.map((t) => t.committed)).toEqual(['', 'the', 'the cat', 'the cat sat on a mat']);
    expect(texts[2].tentative).toBe('sat on');
    texts.forEach((t, i) => i && expect(t.committed.startsWith(texts[i - 1].committed)).toBe(true));
    expect(done.stats.ticks).toBe(4);
  });

  it('commits a word the hypotheses keep changing once it is maxLag behind the audio', async () => {
    const calls: { heard: number; committed: number[] }[] = [];
    // Every hypothesis spells the first word differently: agreement never comes.
    const host = scriptedHost(
      [
        [1, 2, 3],
        [8, 2, 3],
        [1, 2, 3],
        [8, 2, 3],
      ],
      calls,
    );
    const live = new WnwLiveRecording(host, { tickSeconds: 1, maxLagSeconds: 2 });
    for (let i = 0; i < 4; i++) await live.append(new Float32Array(10));
    // At 3 s heard, the first word (ending at 1 s) is 2 s behind: committed as tick 3 has it.
    expect(calls[3].committed).toEqual([1]);
    const done = await live.stop();
    expect(done.stats.latencyWords).toBeGreaterThan(0);
  });

  it('refuses bad options and calls after stop, and a failed tick fails stop', async () => {
    const host = scriptedHost([[1]], []);
    expect(() => new WnwLiveRecording(host, { tickSeconds: 0 })).toThrow(/tickSeconds must be a positive/);
    expect(() => new WnwLiveRecording(host, { hypothesisTokens: 1.5 })).toThrow(/hypothesisTokens must be a positive/);
    expect(() => new WnwLiveRecording(host, { maxLagSeconds: -1 })).toThrow(/maxLagSeconds must be a positive/);
    const live = new WnwLiveRecording(host, { tickSeconds: 1 });
    await expect(live.append([0, 0] as unknown as Float32Array)).rejects.toThrow(/Float32Array/);
    await live.stop();
    await expect(live.append(new Float32Array(1))).rejects.toThrow(/stopped/);
    await expect(live.stop()).rejects.toThrow(/stopped already/);
    // Audio the model cannot hold as one recording: stop keeps the text and says why there is no recording.
    const tooLong = new WnwLiveRecording({
      ...host,
      open: () => Promise.reject(new Error('CONTEXT_TOO_LONG: 64.9 min')),
    });
    await tooLong.append(new Float32Array(10));
    const kept = await tooLong.stop();
    expect(kept.text).toBe('the');
    expect(kept.recording).toBeNull();
    expect(kept.recordingError?.message).toMatch(/CONTEXT_TOO_LONG/);
    const failing = new WnwLiveRecording({ ...host, hypothesis: () => Promise.reject(new Error('device lost')) });
    await failing.append(new Float32Array(20));
    await expect(failing.stop()).rejects.toThrow(/device lost/);
  });
});

describe('the moving window', () => {
  // A talk of 40 words, word j spoken over [j, j + 0.7) s, and a longer pause after every fifth.
  const RATE = 10;
  const N = 40;
  const startOf = (j: number) => j + 0.3 * Math.floor(j / 5);
  const spokenEnd = (j: number) => startOf(j) + 0.7;
  const pieces = ['', ...Array.from({ length: N }, (_, j) => ` w${j}`)];

  /**
   * Each sample holds its own index, so the host knows where its window starts in the talk.
   * It checks that the text it is given starts with the window's first word (the model
   * transcribes from the start of its audio), and answers the words spoken after that text.
   */
  function talkHost(calls: { from: number; heard: number; committed: number[]; aligned: boolean }[]): LiveHost {
    return {
      sampleRate: RATE,
      tokenizer: {
        pieceText: (id) => pieces[id],
        decoder: () => ({ push: (id: number) => pieces[id], flush: () => '' }),
      },
      replyWrappers: [],
      hypothesis: async (samples, committed) => {
        const from = samples[0] / RATE;
        const heard = from + samples.length / RATE;
        // The first word whose speech starts in the window (a cut inside a word's speech is a misalignment).
        const first = Array.from({ length: N }, (_, j) => j).find((j) => startOf(j) >= from - 1e-9) ?? N;
        const aligned = committed.every((id, i) => id === first + i + 1);
        calls.push({ from, heard, committed: [...committed], aligned });
        const next = first + committed.length;
        const said = Array.from({ length: N }, (_, j) => j).filter((j) => j >= next && spokenEnd(j) <= heard);
        const tokens = said.map((j) => j + 1);
        const words = said.map((j) => ({ word: `w${j}`, start: startOf(j) - from, end: spokenEnd(j) - from }));
        return { text: '', tokens, words, stats: {} } as unknown as TranscriptionResult;
      },
      open: async () => ({ dispose: () => {} }) as unknown as WnwRecording,
    };
  }

  it('keeps each hypothesis within windowSeconds, its text starting at its audio, and loses no word', async () => {
    const calls: { from: number; heard: number; committed: number[]; aligned: boolean }[] = [];
    const live = new WnwLiveRecording(talkHost(calls), { tickSeconds: 1, windowSeconds: 8, maxLagSeconds: 2 });
    const seconds = Math.ceil(spokenEnd(N - 1)) + 1;
    for (let s = 0; s < seconds; s++) await live.append(Float32Array.from({ length: RATE }, (_, i) => s * RATE + i));
    const done = await live.stop();
    expect(done.tokens).toEqual(Array.from({ length: N }, (_, j) => j + 1));
    expect(calls.every((c) => c.aligned)).toBe(true);
    // Every word dated in the talk's time, whichever window dated it.
    expect(done.words.map((w) => [w.word, +w.start.toFixed(6), +w.end.toFixed(6)])).toEqual(
      Array.from({ length: N }, (_, j) => [`w${j}`, +startOf(j).toFixed(6), +spokenEnd(j).toFixed(6)]),
    );
    // The window moved (the talk is 5 times longer than it), and never held more than 8 s.
    expect(calls.at(-1)!.from).toBeGreaterThan(seconds - 8 - 1);
    expect(Math.max(...calls.map((c) => c.heard - c.from))).toBeLessThanOrEqual(8);
    expect(done.stats.windowSecondsMax).toBeLessThanOrEqual(8);
    // The text a hypothesis follows is bounded with the window, not the talk.
    expect(Math.max(...calls.map((c) => c.committed.length))).toBeLessThanOrEqual(8);
    // It moves between words, into the silence before one (rounded to a sample).
    const moved = [...new Set(calls.map((c) => c.from))].filter((f) => f > 0);
    expect(moved.length).toBeGreaterThan(2);
    const silences = Array.from({ length: N - 1 }, (_, j) => [spokenEnd(j), startOf(j + 1)]);
    for (const f of moved) expect(silences.some(([a, b]) => f >= a - 0.05 && f <= b + 0.05)).toBe(true);
  });
});

describe('live on the reference model', () => {
  let tmp = '';
  let wav = '';
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'wnw-live-'));
    wav = join(tmp, 'clip.wav');
    execFileSync('espeak-ng', ['-w', wav, 'the quick brown fox jumps over the lazy dog and runs away'], {
      stdio: 'ignore',
    });
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('fed in 0.1 s chunks: committed text grows, stop commits the last hypothesis and opens the recording', async () => {
    const asr = await loadTranscriber({ model: 'public/models/wnw-ref', backend: 'cpu', policy: 'full' });
    try {
      const audio = await toMono16k(new Uint8Array(readFileSync(wav)), 16000);
      const texts: LiveText[] = [];
      const live = asr.live({ tickSeconds: 1, onText: (t) => texts.push(t) });
      for (let at = 0; at < audio.length; at += 1600) await live.append(audio.subarray(at, at + 1600));
      const done = await live.stop();
      expect(texts.length).toBe(done.stats.ticks);
      expect(done.stats.ticks).toBe(Math.floor(audio.length / 16000) + 1);
      texts.forEach((t, i) => i && expect(t.committed.startsWith(texts[i - 1].committed)).toBe(true));
      expect(texts.at(-1)!.committed).toBe(done.text);
      expect(done.text.split(' ').length).toBeGreaterThan(4);
      expect(done.stats.latencyWords).toBeGreaterThan(0);
      expect(done.stats.latencyP90S).toBeGreaterThanOrEqual(done.stats.latencyMedianS);
      // The recording it opens answers a transcription of the whole audio.
      const again = await done.recording!.transcribe({ maxNewTokens: 5 });
      expect(again.error).toBeUndefined();
      expect(again.stats.audioSeconds).toBeCloseTo(audio.length / 16000, 3);
      done.recording!.dispose();
    } finally {
      asr.dispose();
    }
  }, 120_000);

  it('wnw live --simulate --json prints the text and the latencies', async () => {
    const r = await runCliCaptured(['live', '--simulate', wav, '--backend', 'cpu', '--policy', 'full', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out) as { text: string; stats: Record<string, number> };
    expect(out.text.length).toBeGreaterThan(0);
    for (const k of ['ticks', 'latencyMedianS', 'latencyP90S', 'tickMsMedian', 'audioSeconds'])
      expect(Number.isFinite(out.stats[k])).toBe(true);
    expect(r.err).toMatch(/ticks; commit latency median/);
  }, 120_000);

  it('wnw live refuses options it does not take', () => {
    expect(() => parseLiveArgs(['--speed', '2'])).toThrow(/--speed goes with --simulate/);
    expect(() => parseLiveArgs(['--simulate', 'a.wav', '--tick', '0'])).toThrow(/--tick takes a positive number/);
    expect(() => parseLiveArgs(['a.wav'])).toThrow(/a file goes after --simulate/);
    expect(() => parseLiveArgs(['--simulate', 'a.wav', '--window', '3'])).toThrow(
      /--window must be at least twice --tick/,
    );
    expect(parseLiveArgs(['--simulate', 'a.wav']).tickSeconds).toBe(2);
    expect(parseLiveArgs(['--simulate', 'a.wav', '--window', '30']).windowSeconds).toBe(30);
  });
});
