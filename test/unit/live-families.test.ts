/**
 * Live on each Hugging Face family's miniature (full cache). A live run ends with its windows
 * bounded and opens the whole audio; and a hypothesis after committed text must be what an
 * offline run of the same window gives: the family's transcription prompt (from
 * training/hf/prompts.py, the upstream rules) prefilled over the window's audio, then the
 * committed ids fed as steps, then its answer: the same tokens, logits within 1e-4.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import type { LiveResult } from '../../src/transcribe/live.js';
import { toMono16k } from '../../src/audio/decode.js';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { createPolicy } from '../../src/policy/registry.js';
import { policyLayout } from '../../src/kv/prompt.js';
import { ensureMiniatures, MINIATURE_FAMILIES } from '../helpers/miniatures.js';
import { hasJinja2 } from './tokenizer-fixtures.js';

const RATE = 16000;

/** `audio` fed to a live recording 0.1 s at a time, ticks of 1 s over windows of 2 s. */
async function fedLive(t: WnwTranscriber, audio: Float32Array): Promise<LiveResult> {
  const live = t.live({ tickSeconds: 1, windowSeconds: 2, hypothesisTokens: 6 });
  for (let at = 0; at < audio.length; at += RATE / 10) await live.append(audio.subarray(at, at + RATE / 10));
  return live.stop();
}

/** The family's transcription prompt for `n` audio tokens, from the Python reference. */
function referencePrompt(dir: string, family: string, n: number): number[] {
  const r = spawnSync(
    '/usr/bin/python3',
    [resolve('training/hf/prompts.py'), 'turns', dir, family, String(n), JSON.stringify([{ task: 'transcribe' }])],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`prompts.py turns failed: ${r.stderr}`);
  return (JSON.parse(r.stdout.trim()) as { ids: number[] }).ids;
}

describe('live on each family: a hypothesis equals the offline run of its window', () => {
  let models = '';
  let tmp = '';
  let audio: Float32Array = new Float32Array(0);
  beforeAll(async () => {
    models = await ensureMiniatures();
    tmp = mkdtempSync(join(tmpdir(), 'wnw-live-families-'));
    const wav = join(tmp, 'clip.wav');
    execFileSync('espeak-ng', ['-w', wav, 'the quick brown fox jumps over the lazy dog and runs into the woods'], {
      stdio: 'ignore',
    });
    audio = await toMono16k(new Uint8Array(readFileSync(wav)), RATE);
  }, 180_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  for (const family of MINIATURE_FAMILIES) {
    it(`${family}: a hypothesis after committed text equals the window prefilled offline and that text fed`, async () => {
      // The Qwen references render the chat template with jinja2 (python3-jinja2, which npm test installs).
      expect(hasJinja2()).toBe(true);
      const dir = join(models, family);
      const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
      try {
        // A live run ends, its windows bounded, and opens the whole audio as a recording.
        const done = await fedLive(t, audio);
        expect(done.ticks.length).toBeGreaterThan(2);
        expect(Math.max(...done.ticks.map((k) => k.windowS))).toBeLessThanOrEqual(2);
        expect(done.recording!.audioSeconds).toBeCloseTo(audio.length / RATE, 3);
        done.recording!.dispose();

        // The window's hypothesis after committed ids (the first ones an offline run answers).
        const window = audio.slice(0, 3 * RATE);
        const committed = (await t.transcribe(window, { maxNewTokens: 3 })).tokens;
        expect(committed.length).toBe(3);
        const logits: Float32Array[] = [];
        const hyp = await t
          .liveHost({ probe: { onLogits: (_, l) => void logits.push(l.slice()) } })
          .hypothesis(window, committed, 5);
        expect(hyp.error).toBeUndefined();
        expect(logits.length).toBeGreaterThan(0);

        const c = t.model.config;
        const full = createPolicy('full', { budget: 1 });
        const rec = await t.open(window);
        const N = rec.encoding.audioLength;
        const ref = referencePrompt(dir, family, N);
        const whole = { prefix: ref.slice(0, c.prefix.length), instruction: ref.slice(c.prefix.length + N) };
        expect(whole.prefix).toEqual(c.prefix);
        const be = new CpuBackend(c, t.model.weights);
        const pre = await be
          .open({
            audioLength: N,
            maxNewTokens: committed.length + logits.length + 2,
            request: full.request(policyLayout(c, N, whole)),
            prompt: whole,
            returnLogits: true,
          })
          .prefill(rec.encoding.embeddings);
        const s = await pre.place(full.prefill(pre.observation));
        let next = pre.token;
        for (const id of committed) next = (await s.step(id)).token;
        const fresh: number[] = [];
        let worst = 0;
        for (const seen of logits) {
          fresh.push(next);
          const step = await s.step(next);
          step.logits!.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - seen[j]))));
          next = step.token;
        }
        s.close();
        be.dispose();
        rec.dispose();
        expect(hyp.tokens.slice(0, fresh.length)).toEqual(fresh);
        expect(worst).toBeLessThan(1e-4);
      } finally {
        t.dispose();
      }
    }, 240_000);
  }
});
