import { beforeAll, describe, expect, it } from 'vitest';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { AudioError, CancelledError, ModelLoadError, PositionsExceededError, WnwError } from '../../src/errors.js';
import { pythonHasOnnx, toneWav, writeTinyModel } from '../helpers/tiny-model.js';
import { readFileSync, writeFileSync } from 'node:fs';
import type { DecodeSession, DecoderBackend, SessionOptions, StepResult } from '../../src/backend/types.js';
import { CompiledReadouts } from '../../src/backend/readouts.js';
import { anchorSum, focusOf } from '../../src/reference/focus.js';
import { segmentLength } from '../../src/model/config.js';
import { join } from 'node:path';
import { forEvaluation } from '../../src/policy/registry.js';

const hasOnnx = pythonHasOnnx();

describe.skipIf(!hasOnnx)('transcriber on a tiny random model (CPU backend)', () => {
  let dir: string;
  let asr: WnwTranscriber;
  beforeAll(async () => {
    dir = writeTinyModel();
    asr = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'wnw', budget: 0.2 });
  });

  it('transcribes under WnW at r_GPU 0.2: stats are measured, the budget holds, words are dated', async () => {
    const tokens: string[] = [];
    const steps: number[] = [];
    const r = await asr.transcribe(toneWav(20), {
      maxNewTokens: 24,
      onToken: (t) => tokens.push(t),
      onStep: (s) => steps.push(s.rGpu),
    });
    expect(r.error).toBeUndefined();
    expect(r.stats.policy).toBe('wnw');
    expect(r.stats.audioTokens).toBe(250);
    expect(r.stats.decodeSteps).toBeGreaterThan(0);
    expect(r.tokens.length).toBeLessThanOrEqual(24);
    expect(r.stats.kv.rGpuPeak).toBeLessThanOrEqual(0.2 + 1e-9);
    expect(r.stats.kv.rGpu).toBeGreaterThan(0.05);
    expect(r.stats.kv.rGpuCpu).toBeGreaterThan(r.stats.kv.rGpu);
    expect(steps.every((x) => x <= 0.2 + 1e-9)).toBe(true);
    expect(tokens.join('').trim()).toBe(r.text);
    expect(r.words.length).toBeGreaterThan(0);
    for (const w of r.words) {
      expect(w.start).toBeGreaterThanOrEqual(0);
      expect(w.end).toBeGreaterThanOrEqual(w.start);
      expect(w.end).toBeLessThanOrEqual(20 + 1e-6);
    }
  });

  it("words and the tide chart from the device's reductions (focus, segment sums) are those computed from the anchors' weights", async () => {
    const backend = (asr as unknown as { decoder: DecoderBackend }).decoder;
    const open = backend.open.bind(backend);
    const openByLayer = backend.openByLayer.bind(backend);
    // What the device is asked to export and reduce for a session's options.
    const exported = (o: SessionOptions) =>
      new CompiledReadouts(o.request, o.readouts ?? {}, o.audioLength, segmentLength(backend.config)).request;
    const asked: SessionOptions[] = [];
    const sent: SessionOptions[] = [];
    /**
     * The weights path: no device focus or segment sums, the anchors' weights read back instead
     * (an `attention` readout) and reduced on the CPU, summed in the anchors' order as the device sums them.
     */
    const fromAnchorWeights = (s: DecodeSession, o: SessionOptions, anchors: readonly number[]): DecodeSession => {
      const N = o.audioLength;
      const P = segmentLength(backend.config);
      const fill = ({ observation, ...r }: StepResult): StepResult => {
        const { attention, ...obs } = observation;
        const sum = anchorSum(
          attention!,
          anchors.map((_, i) => i),
          N,
        )!;
        const segmentSums = new Float32Array(Math.ceil(N / P));
        for (let p = 0; p < N; p++) segmentSums[Math.floor(p / P)] += sum[p];
        return { ...r, observation: { ...obs, focus: focusOf(sum), segmentSums } };
      };
      return {
        get placed() {
          return s.placed;
        },
        step: async (t) => fill(await s.step(t)),
        submit: (t) => s.submit(t),
        read: async () => fill(await s.read()),
        apply: (plan) => s.apply(plan),
        get position() {
          return s.position;
        },
        rewind: (p) => s.rewind(p),
        residency: () => s.residency(),
        residencyState: () => s.residencyState(),
        counters: () => s.counters(),
        close: (keep) => s.close(keep),
      };
    };
    const run = async (fromWeights: boolean) => {
      const spy = (o: SessionOptions) => {
        asked.push(o);
        const { focus, segmentSums, ...rest } = o.readouts ?? {};
        const s = fromWeights && focus ? { ...o, readouts: { ...rest, attention: focus } } : o;
        sent.push(s);
        const wrap = (session: DecodeSession) => (s === o ? session : fromAnchorWeights(session, o, focus!));
        return { s, wrap };
      };
      backend.open = (o) => {
        const { s, wrap } = spy(o);
        const stage = open(s);
        return {
          prefill: async (audio) => {
            const pre = await stage.prefill(audio);
            return { ...pre, place: async (plan) => wrap(await pre.place(plan)), close: () => pre.close() };
          },
          close: () => stage.close(),
        };
      };
      backend.openByLayer = (o) => {
        const { s, wrap } = spy(o);
        const stage = openByLayer(s);
        return {
          prefill: async (audio, layers) => {
            const r = await stage.prefill(audio, layers);
            return { ...r, session: wrap(r.session) };
          },
          close: () => stage.close(),
        };
      };
      const tide: Float32Array[] = [];
      const focus: number[] = [];
      const r = await asr.transcribe(toneWav(12), {
        maxNewTokens: 16,
        onStep: (st) => (tide.push(st.anchorAttention!), focus.push(st.focus)),
      });
      return { r, tide, focus };
    };
    try {
      const device = await run(false);
      const weights = await run(true);
      const anchors = asr.model.heads!.roles['0.2'].anchors;
      expect(exported(asked[0]).decodeWeights).toBe(false);
      // Word timing's focus is asked over the anchors, and the device reduces it.
      expect(asked[0].readouts?.focus).toEqual(anchors);
      expect(exported(asked[0]).decodeFocus?.heads).toBe(anchors.length);
      expect(exported(asked[0]).decodeChunks?.segmentSums).toBe(true);
      // The weights path is one: no device reduction, the anchors' weights read back.
      expect(sent[1].readouts?.attention).toEqual(anchors);
      expect(exported(sent[1]).decodeFocus).toBeUndefined();
      expect(exported(sent[1]).decodeChunks?.segmentSums).toBeFalsy();
      expect(exported(sent[1]).decodeWeights).toBe(true);
      expect(device.r.words.length).toBeGreaterThan(0);
      expect(device.r.tokens).toEqual(weights.r.tokens);
      expect(device.r.words).toEqual(weights.r.words);
      expect(device.focus).toEqual(weights.focus);
      expect(device.tide).toEqual(weights.tide);
      // Without an onStep consumer, no segment sums are read back.
      await asr.transcribe(toneWav(12), { maxNewTokens: 2 });
      expect(asked[2].readouts?.segmentSums).toBeUndefined();
      expect(exported(asked[2]).decodeChunks?.segmentSums).toBeFalsy();
    } finally {
      delete (backend as { open?: unknown }).open;
      delete (backend as { openByLayer?: unknown }).openByLayer;
    }
  });

  it('the full cache keeps everything on the GPU and decodes the same first token', async () => {
    const a = await asr.transcribe(toneWav(8), { policy: 'full', maxNewTokens: 6 });
    const b = await asr.transcribe(toneWav(8), { policy: 'wnw', budget: 0.2, maxNewTokens: 6 });
    expect(a.stats.kv.rGpu).toBe(1);
    expect(a.tokens[0]).toBe(b.tokens[0]); // both come from the same full-attention prefill
  });

  it('the full cache decodes pipelined (each token learnt a step late, the step past the stop discarded): the tokens a waiting, teacher-forced run predicts', async () => {
    const a = await asr.transcribe(toneWav(8), { policy: 'full', maxNewTokens: 12 });
    const logits: Float32Array[] = [];
    const forced = [...a.tokens, a.stats.stopToken ?? 0];
    const b = await asr.transcribe(toneWav(8), {
      policy: 'full',
      probe: { forcedTokens: forced, onLogits: (_, l) => logits.push(l) },
    });
    expect(a.tokens.length).toBeGreaterThan(1);
    expect(a.stats.decodeSteps).toBe(a.stats.stoppedBy === 'eos' ? a.tokens.length : a.tokens.length - 1);
    // Step i is fed token i and predicts token i + 1 (the stop token after the last).
    const predicted = logits.slice(0, a.stats.decodeSteps).map((l) => l.indexOf(Math.max(...l)));
    expect(predicted).toEqual(
      a.stats.stoppedBy === 'eos' ? [...a.tokens.slice(1), a.stats.stopToken] : a.tokens.slice(1),
    );
    expect(b.tokens.slice(0, a.tokens.length)).toEqual(a.tokens);
  });

  it('WnW at planLag 2 decodes pipelined, and its teacher-forced (waiting) run holds each plan a step: the same logits', async () => {
    const opts = { policy: 'wnw' as const, budget: 0.2, policyOptions: { planLag: 2 } };
    const free: Float32Array[] = [];
    const a = await asr.transcribe(toneWav(20), {
      ...opts,
      maxNewTokens: 24,
      probe: { onLogits: (_, l) => free.push(l) },
    });
    const forced: Float32Array[] = [];
    await asr.transcribe(toneWav(20), {
      ...opts,
      probe: { forcedTokens: [...a.tokens, a.stats.stopToken ?? 0], onLogits: (_, l) => forced.push(l) },
    });
    expect(a.stats.traffic.recallsPerStep).toBeGreaterThan(0); // plans moved KV mid-decode
    // The same plans at the same steps: the same logits, to the bit, at every step.
    expect(free.length).toBe(a.stats.decodeSteps);
    expect(forced.slice(0, free.length).map((l) => Array.from(l))).toEqual(free.map((l) => Array.from(l)));
  });

  it('WnW recalls before the first step what its anchors attended to in the prompt: more audio is resident at step 0', async () => {
    const residentAtStep0 = async (prefillRecall: boolean) => {
      let n = -1;
      await asr.transcribe(toneWav(20), {
        policy: 'wnw',
        budget: 0.2,
        maxNewTokens: 2,
        policyOptions: { prefillRecall },
        probe: {
          onResidency: (step, resident) => {
            if (step !== 0) return;
            n = 0;
            // 2 layers × 8 KV heads; 20 s at 12.5 tokens a second is 250 positions.
            for (let h = 0; h < 16; h++) for (let p = 0; p < 250; p++) if (resident(h, p)) n++;
          },
        },
      });
      return n;
    };
    const without = await residentAtStep0(false);
    expect(without).toBeGreaterThan(0);
    expect(await residentAtStep0(true)).toBeGreaterThan(without);
  });

  it('policy options reach the policy (ablations): one voice head leaves no tidal head to offload', async () => {
    const tidalShares: number[] = [];
    const r = await asr.transcribe(toneWav(8), {
      policy: 'wnw',
      budget: 0.2,
      maxNewTokens: 6,
      policyOptions: forEvaluation('wnw', { nVoice: 1 }),
      onStep: (s) => tidalShares.push(...(s.tidalSegments ?? [])),
    });
    expect(r.error).toBeUndefined();
    expect(r.stats.kv.rGpuCpu).toBeCloseTo(r.stats.kv.rGpu, 12); // nothing kept in CPU memory: no tidal heads
    expect(tidalShares.every((x) => x === 0)).toBe(true);
    await expect(
      asr.transcribe(toneWav(8), {
        policy: 'wnw',
        budget: 0.2,
        maxNewTokens: 2,
        policyOptions: forEvaluation('wnw', { ranking: 'nope' }),
      }),
    ).rejects.toThrow(/option "ranking"/);
  });

  it("a caller's policyOptions take the method's options only: an ablation or diagnosis there is a BAD_ARGUMENT", async () => {
    for (const policyOptions of [{ nVoice: 1 }, { ranking: 'voice' }, { fullRole: 'tidal' }] as Record<
      string,
      string | number
    >[]) {
      const key = Object.keys(policyOptions)[0];
      const run = asr.transcribe(toneWav(8), { policy: 'wnw', budget: 0.2, maxNewTokens: 2, policyOptions });
      await expect(run).rejects.toBeInstanceOf(WnwError);
      await expect(run).rejects.toMatchObject({
        code: 'BAD_ARGUMENT',
        message: expect.stringMatching(
          new RegExp(`option "${key}" is an ablation or diagnosis, for evaluation only .*wnw:${key}=VALUE`),
        ),
      });
    }
    // A JSON copy (a worker message, a config file) cannot carry one either: the run is the method's.
    const viaJson = JSON.parse(JSON.stringify(forEvaluation('wnw', { nVoice: 1, planLag: 1 })));
    expect(viaJson).toEqual({ planLag: 1 });
  });

  it('cancel returns the partial transcript with a CancelledError', async () => {
    const ac = new AbortController();
    let n = 0;
    const r = await asr.transcribe(toneWav(10), {
      signal: ac.signal,
      maxNewTokens: 50,
      onToken: () => {
        if (++n === 5) ac.abort();
      },
    });
    expect(r.error).toBeInstanceOf(CancelledError);
    expect(r.stats.stoppedBy).toBe('cancelled');
    expect(r.tokens.length).toBeGreaterThanOrEqual(5);
    expect(r.tokens.length).toBeLessThan(50);
  });

  it('bad audio fails with a typed error', async () => {
    await expect(asr.transcribe(new Uint8Array(0))).rejects.toBeInstanceOf(AudioError);
    await expect(asr.transcribe(new Float32Array(100))).rejects.toThrow(/too short/);
    await expect(asr.transcribe(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9]))).rejects.toBeInstanceOf(AudioError);
  });

  it('an unknown policy or budget is a BAD_ARGUMENT error', async () => {
    await expect(asr.transcribe(toneWav(2), { policy: 'nope' as never })).rejects.toBeInstanceOf(WnwError);
    await expect(loadTranscriber({ model: dir, backend: 'cpu', budget: 1.5 })).rejects.toThrow(/budget/);
  });

  it('a budget below what the anchors alone keep is refused before the audio is encoded, in one prefix', async () => {
    const phases: string[] = [];
    const err = await asr
      .transcribe(toneWav(2), { budget: 0.01, onProgress: (e) => phases.push(e.phase) })
      .catch((e) => e);
    expect(err).toBeInstanceOf(WnwError);
    expect(err.code).toBe('BAD_ARGUMENT');
    expect(err.message).toMatch(/^policy "wnw": budget 0.01 is below what its \d+ anchor heads alone keep/);
    expect(phases).not.toContain('encode');
  });

  it('a clip whose prompt needs more positions than the config has is CONTEXT_TOO_LONG before the encoder runs', async () => {
    const small = writeTinyModel();
    const cfg = JSON.parse(readFileSync(join(small, 'config.json'), 'utf8'));
    writeFileSync(join(small, 'config.json'), JSON.stringify({ ...cfg, max_positions: 1024 }));
    // Where the recording's length is known at load (the CLI), before any weight is read.
    const phases: string[] = [];
    const atLoad = await loadTranscriber({
      model: small,
      backend: 'cpu',
      policy: 'full',
      audioSeconds: 90,
      onProgress: (e) => phases.push(e.phase),
    }).catch((e) => e);
    expect(atLoad).toBeInstanceOf(PositionsExceededError);
    expect(phases).toEqual([]);
    const t = await loadTranscriber({ model: small, backend: 'cpu', policy: 'full' });
    try {
      // 1,024 positions less the 3-token prompt hold 1,021 audio tokens: 81.68 s at 12.5 tokens/s.
      const err = await t
        .transcribe(toneWav(90, 16000), { maxNewTokens: 2, onProgress: (e) => phases.push(e.phase) })
        .catch((e) => e);
      expect(err).toBeInstanceOf(PositionsExceededError);
      expect(err.code).toBe('CONTEXT_TOO_LONG');
      expect(err.neededPositions).toBe(1125 + 3);
      expect(err.minutesThatFit).toBeCloseTo(1021 / 12.5 / 60, 9);
      expect(err.message).toMatch(
        /config\.json: a 1\.5 min recording \(1125 audio tokens\): the prompt needs 1128 positions, the model has 1024 .*At most 1\.4 min of audio fit/,
      );
      expect(phases).not.toContain('encode');
      // Just inside the positions it runs, and the tiny model states no limit, so no warning.
      const ok = await t.transcribe(toneWav(81, 16000), { maxNewTokens: 2 });
      // 8,100 mel frames in whole groups of 8; the refusal's count (ceil) is never below this.
      expect(ok.stats.audioTokens).toBe(1012);
      expect(ok.stats.warnings).toBeUndefined();
    } finally {
      t.dispose();
    }
  });

  it('options outside what they take are a BAD_ARGUMENT naming the option, before loading or encoding', async () => {
    const phases: string[] = [];
    const err = await asr
      .transcribe(toneWav(2), { maxNewTokens: NaN, onProgress: (e) => phases.push(e.phase) })
      .catch((e) => e);
    expect(err).toBeInstanceOf(WnwError);
    expect(err.message).toBe('option maxNewTokens must be a whole number of tokens, at least 1, got NaN');
    expect(phases).toEqual([]);
    await expect(asr.transcribe(toneWav(2), { signal: {} as AbortSignal })).rejects.toThrow(
      /^option signal must be an AbortSignal, got an object$/,
    );
    await expect(asr.transcribe(toneWav(2), { probe: { forcedTokens: [1, -2] } })).rejects.toThrow(
      /^option probe\.forcedTokens must be an array of token ids \(whole numbers from 0\), got \[1, -2\]$/,
    );
    await expect(asr.transcribe(toneWav(2), { probe: { onLogits: 'log' as never } })).rejects.toThrow(
      /^option probe\.onLogits must be a function, got "log"$/,
    );
    await expect(loadTranscriber({ model: dir, backend: 'cpu', kvMaxBytes: 0 })).rejects.toThrow(
      /^option kvMaxBytes must be a whole number of bytes above 0, got 0$/,
    );
    await expect(loadTranscriber({ model: dir, backend: 'cpu', weightFormat: 'int4' as never })).rejects.toThrow(
      /^option weightFormat must be one of "f32", "f16", "q4", got "int4"$/,
    );
    await expect(loadTranscriber({ model: dir, backend: 'cpu', audioSeconds: NaN })).rejects.toThrow(
      /^option audioSeconds must be/,
    );
  });

  it('a decode never runs past the positions the prompt leaves, whatever maxNewTokens asks', async () => {
    const small = writeTinyModel();
    const cfg = JSON.parse(readFileSync(join(small, 'config.json'), 'utf8'));
    writeFileSync(join(small, 'config.json'), JSON.stringify({ ...cfg, max_positions: 64 }));
    const t = await loadTranscriber({ model: small, backend: 'cpu', policy: 'full' });
    try {
      // 2 s are 25 audio tokens; with the 3 prompt tokens, 36 positions are left to decode into.
      const r = await t.transcribe(toneWav(2, 16000), { maxNewTokens: 1_000_000 });
      expect(r.error).toBeUndefined();
      expect(r.stats.stoppedBy).toBe('length-guard');
      expect(r.tokens.length).toBe(36);
    } finally {
      t.dispose();
    }
  });

  it('a heads.json with a null score or a head without a role is a MODEL_LOAD naming heads.json at load', async () => {
    const good = JSON.parse(readFileSync(join(dir, 'heads.json'), 'utf8'));
    const broken = writeTinyModel();
    const tryHeads = async (h: unknown) => {
      writeFileSync(join(broken, 'heads.json'), JSON.stringify(h));
      return loadTranscriber({ model: broken, backend: 'cpu', policy: 'full' }).then(
        (t) => (t.dispose(), null),
        (e) => e,
      );
    };
    const nullScore = await tryHeads({
      ...good,
      voiceScore: good.voiceScore.map((x: number, i: number) => (i === 3 ? null : x)),
    });
    expect(nullScore).toBeInstanceOf(ModelLoadError);
    expect(nullScore.message).toMatch(
      /heads\.json: "voiceScore" must hold 16 finite numbers, one per KV head; run npm run calibrate/,
    );
    const key = Object.keys(good.roles)[0];
    const roles = { ...good.roles[key], fixed: good.roles[key].fixed.slice(1) };
    const uncovered = await tryHeads({ ...good, roles: { ...good.roles, [key]: roles } });
    expect(uncovered.message).toMatch(
      new RegExp(`heads\\.json: roles "${key}" must give each of the 16 KV heads exactly one role`),
    );
    expect(await tryHeads(good)).toBeNull();
  });

  it('a model whose config disagrees with its weights fails at load naming file and tensor', async () => {
    const cfg = JSON.parse(require('node:fs').readFileSync(join(dir, 'config.json'), 'utf8'));
    const bad = writeTinyModel();
    writeFileSync(join(bad, 'config.json'), JSON.stringify({ ...cfg, intermediate_size: cfg.intermediate_size + 8 }));
    const err = await loadTranscriber({ model: bad, backend: 'cpu', policy: 'full' }).catch((e) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(String(err.message)).toMatch(/decoder\.safetensors.*gate_proj/);
    const truncated = writeTinyModel();
    const fs = require('node:fs');
    const bytes = fs.readFileSync(join(truncated, 'decoder.safetensors'));
    fs.writeFileSync(join(truncated, 'decoder.safetensors'), bytes.subarray(0, bytes.length - 1000));
    await expect(loadTranscriber({ model: truncated, backend: 'cpu', policy: 'full' })).rejects.toThrow(/truncated/);
  });
});

describe.runIf(!hasOnnx)('transcriber integration', () => {
  it.skip('needs /usr/bin/python3 with onnx and numpy to build the tiny encoder (apt-get install python3-onnx)', () => {});
});
