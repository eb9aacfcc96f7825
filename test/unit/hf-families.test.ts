/**
 * Family configs: the real checkpoints' config.json shapes (as documented upstream) map to
 * the real sizes with the upstream defaults filled in; the miniatures load through
 * loadModel from a path and over HTTP range requests; a Hugging Face folder is decodable
 * but not yet transcribable from audio, and says so with a typed error.
 */
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError } from '../../src/errors.js';
import { familyFor } from '../../src/model/families/registry.js';
import { statedLimitWarnings } from '../../src/model/families/limits.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { openRanged } from '../../src/model/files.js';
import { hfModelConfig } from '../../src/model/hf/config.js';
import { widenInto } from '../../src/model/hf/dtype.js';
import { HfCheckpoint } from '../../src/model/hf/checkpoint.js';
import { encodeSafeTensors } from '../../src/model/safetensors.js';
import { loadModel } from '../../src/model/loader.js';
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { ensureMiniatures } from '../helpers/miniatures.js';
import { tempDir } from '../helpers/temp.js';

let root = '';
beforeAll(async () => {
  root = await ensureMiniatures();
}, 120_000);

const family = (t: string) => familyFor(t)!;

describe('family configs', () => {
  it("Qwen2-Audio-7B-Instruct's sparse text_config gets Qwen2Config's defaults (MHA, 4096 wide)", () => {
    const real = {
      model_type: 'qwen2_audio',
      audio_token_index: 151646,
      vocab_size: 156032,
      audio_config: { model_type: 'qwen2_audio_encoder', num_mel_bins: 128 },
      text_config: {
        bos_token_id: 151643,
        eos_token_id: 151645,
        intermediate_size: 11008,
        max_position_embeddings: 8192,
        model_type: 'qwen2',
        rms_norm_eps: 1e-5,
        rope_theta: 10000,
        sliding_window: 32768,
        torch_dtype: 'bfloat16',
        use_mrope: false,
        vocab_size: 156032,
      },
    };
    const { config: c, defaulted } = hfModelConfig(family('qwen2_audio'), real, 'config.json');
    expect([c.hiddenSize, c.numLayers, c.numHeads, c.numKvHeads, c.headDim, c.intermediateSize]).toEqual([
      4096, 32, 32, 32, 128, 11008,
    ]);
    expect([c.vocabSize, c.ropeTheta, c.rmsNormEps, c.maxPositions, c.attentionBias]).toEqual([
      156032,
      10000,
      1e-5,
      8192,
      true,
    ]);
    expect(defaulted).toEqual(
      expect.arrayContaining([
        'hidden_size',
        'num_hidden_layers',
        'num_attention_heads',
        'num_key_value_heads',
        'head_dim',
        'hidden_act',
      ]),
    );
    expect(c.stopTokens).toEqual([151645, 151643]);
    expect(c.audio.tokensPerSecond).toBe(25);
  });

  it('Voxtral-Mini-3B: head_dim 128 while hidden/heads is 96; 12.5 audio tokens per second', () => {
    const real = {
      model_type: 'voxtral',
      audio_token_id: 24,
      hidden_size: 3072,
      vocab_size: 131072,
      audio_config: { model_type: 'voxtral_encoder', num_mel_bins: 128 },
      text_config: {
        model_type: 'llama',
        head_dim: 128,
        hidden_size: 3072,
        num_attention_heads: 32,
        num_key_value_heads: 8,
        rope_theta: 1e8,
      },
    };
    const { config: c } = hfModelConfig(family('voxtral'), real, 'config.json');
    expect([c.hiddenSize, c.numLayers, c.numHeads, c.numKvHeads, c.headDim, c.intermediateSize]).toEqual([
      3072, 30, 32, 8, 128, 8192,
    ]);
    expect([c.vocabSize, c.ropeTheta, c.rmsNormEps, c.attentionBias]).toEqual([131072, 1e8, 1e-5, false]);
    expect(c.stopTokens).toEqual([2]);
    expect([c.audio.tokensPerSecond, c.audio.framesPerToken, c.audio.encoderWindowFrames]).toEqual([12.5, 8, 3000]);
  });

  it("Voxtral's record states 30 min for transcription and 40 for understanding; a recording past them carries a warning", () => {
    expect(voxtral.statedLimits).toEqual([
      { minutes: 30, task: 'transcription' },
      { minutes: 40, task: 'audio understanding' },
    ]);
    expect(statedLimitWarnings(voxtral, 30 * 60)).toEqual([]);
    const [w31, ...rest] = statedLimitWarnings(voxtral, 31 * 60);
    expect(rest).toEqual([]);
    expect(w31).toMatch(
      /^the recording \(31\.0 min\) is past the stated 30 min transcription limit of mistralai\/Voxtral-Mini-3B-2507/,
    );
    expect(statedLimitWarnings(voxtral, 45 * 60)[0]).toMatch(
      /past the stated 30 min transcription and 40 min audio understanding limits/,
    );
    // A family that states no limit, and our own folders (no family), never warn.
    expect(statedLimitWarnings(qwen25Omni, 120 * 60)).toEqual([]);
    expect(statedLimitWarnings(undefined, 120 * 60)).toEqual([]);
  });

  it('Qwen2.5-Omni-3B: rope_parameters (v5) and rope_theta give the same theta; GQA 16:2; 2 s encoder windows', () => {
    const text = {
      hidden_size: 2048,
      intermediate_size: 11008,
      num_hidden_layers: 36,
      num_attention_heads: 16,
      num_key_value_heads: 2,
      vocab_size: 151936,
    };
    const cfg = (t: object) => ({
      model_type: 'qwen2_5_omni',
      thinker_config: { audio_config: { n_window: 100 }, text_config: { ...text, ...t } },
    });
    const v5 = hfModelConfig(
      family('qwen2_5_omni'),
      cfg({ rope_parameters: { rope_type: 'default', rope_theta: 1e6, mrope_section: [16, 24, 24] } }),
      'config.json',
    ).config;
    const v4 = hfModelConfig(
      family('qwen2_5_omni'),
      cfg({ rope_theta: 1e6, rope_scaling: { type: 'mrope', mrope_section: [16, 24, 24] } }),
      'config.json',
    ).config;
    expect(v5).toEqual(v4);
    expect([
      v5.ropeTheta,
      v5.headDim,
      v5.numHeads / v5.numKvHeads,
      v5.audio.encoderWindowFrames,
      v5.audio.tokensPerSecond,
    ]).toEqual([1e6, 128, 8, 200, 25]);
  });

  it("Qwen2.5-Omni's bos/eos/pad and stop ids come from thinker_config.text_config, thinker_config, then generation_config", () => {
    const text = {
      hidden_size: 64,
      intermediate_size: 128,
      num_hidden_layers: 1,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: 400,
    };
    const cfg = (t: object, th: object) => ({
      model_type: 'qwen2_5_omni',
      thinker_config: {
        audio_token_index: 393,
        audio_config: { n_window: 100 },
        text_config: { ...text, ...t },
        ...th,
      },
    });
    const omni = family('qwen2_5_omni');
    const thinkerOnly = hfModelConfig(omni, cfg({}, { eos_token_id: 391, pad_token_id: 390 }), 'config.json').config;
    expect([thinkerOnly.tokens, thinkerOnly.stopTokens]).toEqual([{ bos: 390, eos: 391, pad: 390 }, [391, 390]]);
    const textFirst = hfModelConfig(
      omni,
      cfg({ bos_token_id: 389, eos_token_id: 392 }, { eos_token_id: 391, pad_token_id: 390 }),
      'config.json',
    ).config;
    expect(textFirst.tokens).toEqual({ bos: 389, eos: 392, pad: 390 });
    const generation = hfModelConfig(omni, cfg({}, {}), 'config.json', {
      bos_token_id: 388,
      eos_token_id: [391, 390],
      pad_token_id: 390,
    }).config;
    expect([generation.tokens, generation.stopTokens]).toEqual([{ bos: 388, eos: 391, pad: 390 }, [391, 390]]);
    // Only a folder that states none of them gets the released ids, which this vocabulary cannot hold.
    expect(() => hfModelConfig(omni, cfg({}, {}), 'config.json')).toThrow(
      /token id 15164[35] is outside the vocabulary/,
    );
  });

  it('an Omni miniature whose special tokens sit at other ids loads and stops at its own <|im_end|>', async () => {
    const { symlinkSync, readdirSync, writeFileSync } = await import('node:fs');
    const src = join(root, 'qwen2_5_omni');
    const dir = tempDir('wnw-omni-ids-');
    const moved: Record<string, number> = { '<|endoftext|>': 151901, '<|im_end|>': 151900 };
    const edited: Record<string, (j: Record<string, any>) => void> = {
      'tokenizer.json': (j) => {
        for (const t of j.added_tokens) t.id = moved[t.content] ?? t.id;
      },
      'tokenizer_config.json': (j) => {
        const dec = j.added_tokens_decoder as Record<string, { content: string }>;
        j.added_tokens_decoder = Object.fromEntries(
          Object.entries(dec).map(([id, t]) => [String(moved[t.content] ?? id), t]),
        );
      },
      'config.json': (j) => Object.assign(j.thinker_config, { eos_token_id: 151900, pad_token_id: 151901 }),
      'generation_config.json': (j) => Object.assign(j, { eos_token_id: [151900, 151901], pad_token_id: 151901 }),
    };
    for (const f of readdirSync(src)) {
      if (!edited[f]) symlinkSync(join(src, f), join(dir, f));
      else {
        const j = JSON.parse(readFileSync(join(src, f), 'utf8'));
        edited[f](j);
        writeFileSync(join(dir, f), JSON.stringify(j));
      }
    }
    const m = await loadModel(dir);
    expect([m.config.tokens.eos, m.config.tokens.pad]).toEqual([151900, 151901]);
    expect(m.config.stopTokens).toEqual([151900, 151901]);
    expect(m.config.instruction).toContain(151900); // <|im_end|> closes the user turn
    expect(m.config.instruction).not.toContain(151645);
    const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
    try {
      const n = 25;
      const enc = {
        embeddings: new Float32Array(n * t.model.config.hiddenSize),
        audioLength: n,
        audioSeconds: 1,
        encodeMs: 0,
        encoderBytes: 0,
      };
      // The run ends at the folder's <|im_end|>, not at the released id.
      const r = await t.decodeEncoded(enc, { probe: { forcedTokens: [40, 151645, 41, 151900, 42] } });
      expect(r.tokens).toEqual([40, 151645, 41]);
    } finally {
      t.dispose();
    }
  }, 60_000);

  it('the miniatures fill the keys their sparse configs omit', async () => {
    const qa = JSON.parse(readFileSync(join(root, 'qwen2_audio', 'config.json'), 'utf8'));
    const info = hfModelConfig(family('qwen2_audio'), qa, 'config.json');
    expect(info.defaulted).toEqual(expect.arrayContaining(['head_dim', 'hidden_act', 'tie_word_embeddings']));
    expect(info.config.headDim).toBe(16);
    expect(info.audioTokenId).toBe(151646);
  });
});

describe('dtype widening', () => {
  it('bf16 is the upper half of an f32; f16 covers normals, subnormals and infinities', () => {
    const f32 = new Float32Array([1.5, -3.25e-5, 65504, 1e30]);
    const bf16 = new Uint16Array(new Uint32Array(f32.buffer).map((u) => u >>> 16));
    const out = new Float32Array(6);
    widenInto('BF16', new Uint8Array(bf16.buffer), out, 1);
    expect(Array.from(out.subarray(1, 5))).toEqual(
      Array.from(f32).map(
        (x) =>
          new Float32Array(new Uint32Array([new Uint32Array(new Float32Array([x]).buffer)[0] & 0xffff0000]).buffer)[0],
      ),
    );
    // 1, -2, 0.5, 65504 (largest), 2^-24 (smallest subnormal), -inf
    const f16 = new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0xfc00]);
    widenInto('F16', new Uint8Array(f16.buffer), out, 0);
    expect(Array.from(out)).toEqual([1, -2, 0.5, 65504, 2 ** -24, -Infinity]);
    widenInto('F32', new Uint8Array(f32.buffer), out, 2);
    expect(Array.from(out.subarray(2))).toEqual(Array.from(f32));
  });
});

describe('checkpoint without an index', () => {
  it('a single model.safetensors is read as one shard', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'wnw-hfsingle-'));
    try {
      const a = Float32Array.from({ length: 12 }, (_, i) => i - 5.5);
      writeFileSync(
        join(dir, 'model.safetensors'),
        new Uint8Array(
          encodeSafeTensors({
            'x.weight': { data: a, shape: [3, 4] },
            'y.bias': { data: new Float32Array([7]), shape: [1] },
          }),
        ),
      );
      const ck = await HfCheckpoint.open(dir);
      expect([...ck.tensors.keys()].sort()).toEqual(['x.weight', 'y.bias']);
      expect(ck.listing).toBe(join(dir, 'model.safetensors'));
      expect(Array.from(await ck.f32('x.weight', [3, 4]))).toEqual(Array.from(a));
      expect(() => ck.check('x.weight', [4, 3])).toThrow(ModelLoadError);
      await ck.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('loading a Hugging Face folder', () => {
  it('the model is decodable, its audio route is the family audio tower, and the ONNX encoder bytes are a typed error', async () => {
    const dir = join(root, 'voxtral');
    const m = await loadModel(dir);
    expect(m.family?.modelType).toBe('voxtral');
    expect(m.encoder).toEqual({
      kind: 'hf-audio-tower',
      base: dir,
      modelType: 'voxtral',
      prefixes: ['audio_tower.', 'multi_modal_projector.'],
    });
    expect(m.text?.format).toBe('tekken');
    // <s>[INST][BEGIN_AUDIO] | audio | [/INST][TRANSCRIBE], ids from tekken.json.
    expect([m.config.prefix, m.config.instruction]).toEqual([
      [1, 3, 25],
      [4, 34],
    ]);
    // With a language: [/INST] lang:en [TRANSCRIBE], the text encoded by tekken.json.
    const en = await loadModel(dir, undefined, { language: 'en' });
    expect(m.text!.encode('lang:en').length).toBeGreaterThan(0);
    expect([en.config.prefix, en.config.instruction]).toEqual([
      [1, 3, 25],
      [4, ...m.text!.encode('lang:en'), 34],
    ]);
    expect(() => m.encoderBytes).toThrow(ModelLoadError);
    expect(() => m.encoderBytes).toThrow(/audio tower/);
    // WnW needs calibrated heads: a folder without heads.json says so instead of falling back.
    await expect(loadTranscriber({ model: dir, backend: 'cpu', policy: 'wnw' })).rejects.toThrow(/calibrate/);
  }, 60_000);

  it('an untied lm_head absent from the folder falls back to the embedding only when the config ties them', async () => {
    const { symlinkSync, readdirSync, mkdtempSync, rmSync, writeFileSync, unlinkSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const src = join(root, 'qwen2_5_omni');
    const make = (tie: boolean) => {
      const dir = mkdtempSync(join(tmpdir(), 'wnw-hftie-'));
      for (const f of readdirSync(src)) symlinkSync(join(src, f), join(dir, f));
      const index = JSON.parse(readFileSync(join(src, 'model.safetensors.index.json'), 'utf8'));
      delete index.weight_map['thinker.lm_head.weight'];
      unlinkSync(join(dir, 'model.safetensors.index.json'));
      writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
      const cfg = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8'));
      cfg.thinker_config.text_config.tie_word_embeddings = tie;
      unlinkSync(join(dir, 'config.json'));
      writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
      return dir;
    };
    const tied = make(true);
    const untied = make(false);
    try {
      const m = await loadModel(tied);
      expect(m.weights.lmHead).toBe(m.weights.embed);
      const e = await loadModel(untied).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ModelLoadError);
      expect((e as ModelLoadError).tensor).toBe('thinker.lm_head.weight');
    } finally {
      rmSync(tied, { recursive: true, force: true });
      rmSync(untied, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('ranged reads over HTTP', () => {
  let server: Server;
  let url = '';
  let ignoreRange = false;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const file = join(root, decodeURIComponent(new URL(req.url!, 'http://x').pathname));
      let size: number;
      try {
        size = statSync(file).size;
      } catch {
        res.writeHead(404).end();
        return;
      }
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (m && !ignoreRange) {
        const [a, b] = [Number(m[1]), Math.min(Number(m[2]), size - 1)];
        res.writeHead(206, { 'content-range': `bytes ${a}-${b}/${size}`, 'content-length': b - a + 1 });
        if (req.method === 'HEAD') res.end();
        else createReadStream(file, { start: a, end: b }).pipe(res);
      } else {
        res.writeHead(200, { 'content-length': size });
        if (req.method === 'HEAD') res.end();
        else createReadStream(file).pipe(res);
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('a folder URL loads the same decoder as the path, tensor by tensor with Range requests', async () => {
    const a = await loadModel(join(root, 'voxtral'));
    const b = await loadModel(`${url}/voxtral`);
    expect(b.config).toEqual({ ...a.config, name: b.config.name });
    // Byte comparison: deep equality over millions of elements is too slow.
    const same = (x: Float32Array, y: Float32Array) =>
      Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
    expect(same(b.weights.layers[1].down, a.weights.layers[1].down)).toBe(true);
    expect(same(b.weights.lmHead, a.weights.lmHead)).toBe(true);
    expect(same(b.weights.lmHead, a.weights.embed)).toBe(false);
  }, 60_000);

  it('a server that ignores Range still yields exactly the asked bytes', async () => {
    ignoreRange = true;
    try {
      const f = await openRanged(`${url}/qwen2_audio/model-00001-of-00002.safetensors`);
      const local = readFileSync(join(root, 'qwen2_audio', 'model-00001-of-00002.safetensors'));
      expect(f.size).toBe(local.byteLength);
      const got = await f.read(1_000_003, 70_001);
      expect(Buffer.from(got).equals(local.subarray(1_000_003, 1_070_004))).toBe(true);
    } finally {
      ignoreRange = false;
    }
  });

  it('a missing shard URL is a ModelLoadError naming it', async () => {
    await expect(openRanged(`${url}/voxtral/nope.safetensors`)).rejects.toThrow(/nope\.safetensors.*HTTP 404/);
  });
});
