/**
 * Bad Hugging Face folders fail in loadModel (before any backend exists) with a
 * ModelLoadError naming the file and, where one is at fault, the tensor. Each case is a
 * miniature folder with one file replaced; the other files are symlinks to the original.
 */
import { copyFileSync, readdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError } from '../../src/errors.js';
import { loadModel } from '../../src/model/loader.js';
import { ensureMiniatures } from '../helpers/miniatures.js';
import { tempDir } from '../helpers/temp.js';

let root = '';
beforeAll(async () => {
  root = await ensureMiniatures();
}, 120_000);

/** A copy of a miniature folder made of symlinks, except the files `edit` rewrites. */
function variant(family: string, edit: (dir: string) => void): string {
  const src = join(root, family);
  const dir = tempDir(`wnw-hfbad-${family}-`);
  for (const f of readdirSync(src)) symlinkSync(join(src, f), join(dir, f));
  edit(dir);
  return dir;
}

/** Replaces a symlink by a real file with new contents. */
function rewrite(dir: string, file: string, contents: string | Uint8Array): void {
  unlinkSync(join(dir, file));
  writeFileSync(join(dir, file), contents);
}

function editJson(dir: string, file: string, f: (j: Record<string, any>) => void): void {
  const j = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  f(j);
  rewrite(dir, file, JSON.stringify(j));
}

/** Rewrites one tensor's header entry in a shard, keeping the header's length (so offsets stay valid). */
function editHeader(
  dir: string,
  shard: string,
  tensor: string,
  f: (t: { dtype: string; shape: number[] }) => void,
): void {
  const buf = readFileSync(join(dir, shard));
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  f(header[tensor]);
  const text = JSON.stringify(header);
  expect(text.length).toBeLessThanOrEqual(n);
  const out = Buffer.from(buf);
  out.write(text.padEnd(n, ' '), 8, 'utf8');
  rewrite(dir, shard, out);
}

async function loadError(dir: string): Promise<ModelLoadError> {
  const e = await loadModel(dir).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ModelLoadError);
  expect((e as ModelLoadError).code).toBe('MODEL_LOAD');
  return e as ModelLoadError;
}

const SHARD1 = 'model-00001-of-00002.safetensors';
const SHARD2 = 'model-00002-of-00002.safetensors';

describe('Hugging Face folders: bad input is a typed MODEL_LOAD error naming file and tensor', () => {
  it('a missing shard', async () => {
    const dir = variant('voxtral', (d) => unlinkSync(join(d, SHARD2)));
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, SHARD2));
    expect(e.tensor).toMatch(/^(language_model|audio_tower|multi_modal_projector)\./);
    expect(e.message).toMatch(/missing.*download/);
  });

  it('a truncated shard', async () => {
    const dir = variant('qwen2_audio', (d) => {
      const buf = readFileSync(join(root, 'qwen2_audio', SHARD2));
      rewrite(d, SHARD2, buf.subarray(0, buf.byteLength - 1000));
    });
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, SHARD2));
    expect(e.tensor).toBeTruthy();
    expect(e.message).toMatch(/truncated/);
  });

  it('a shard cut inside its header', async () => {
    const dir = variant('voxtral', (d) =>
      rewrite(d, SHARD1, readFileSync(join(root, 'voxtral', SHARD1)).subarray(0, 100)),
    );
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, SHARD1));
    expect(e.message).toMatch(/truncated/);
  });

  it('a tensor of the wrong shape', async () => {
    const name = 'thinker.model.layers.0.self_attn.k_proj.weight'; // [kv_heads * head_dim, hidden] = [16, 128]
    const dir = variant('qwen2_5_omni', (d) => editHeader(d, SHARD1, name, (t) => t.shape.reverse()));
    const e = await loadError(dir);
    expect([e.file, e.tensor]).toEqual([join(dir, SHARD1), name]);
    expect(e.message).toContain('shape [128,16] does not match config.json, which implies [16,128]');
  });

  it('a tensor of an unreadable dtype', async () => {
    const name = 'language_model.model.layers.0.input_layernorm.weight';
    const dir = variant('voxtral', (d) => editHeader(d, SHARD1, name, (t) => (t.dtype = 'I16')));
    const e = await loadError(dir);
    expect([e.file, e.tensor]).toEqual([join(dir, SHARD1), name]);
    expect(e.message).toMatch(/dtype I16 cannot be read as weights/);
  });

  it('a config whose sizes disagree with the weights', async () => {
    const dir = variant('qwen2_audio', (d) =>
      editJson(d, 'config.json', (j) => (j.text_config.intermediate_size = 200)),
    );
    const e = await loadError(dir);
    expect(e.tensor).toBe('language_model.model.layers.0.mlp.gate_proj.weight');
    expect(e.file).toBe(join(dir, SHARD1));
    expect(e.message).toContain('shape [176,64] does not match config.json, which implies [200,64]');
  });

  it('a config with fewer layers than the weights', async () => {
    const dir = variant('voxtral', (d) => editJson(d, 'config.json', (j) => (j.text_config.num_hidden_layers = 1)));
    const e = await loadError(dir);
    expect(e.tensor).toMatch(/^language_model\.model\.layers\.1\./);
    expect(e.message).toMatch(/config\.json does not describe it/);
  });

  it('a config with more layers than the weights', async () => {
    const dir = variant('qwen2_5_omni', (d) =>
      editJson(d, 'config.json', (j) => (j.thinker_config.text_config.num_hidden_layers = 5)),
    );
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, 'model.safetensors.index.json'));
    expect(e.tensor).toBe('thinker.model.layers.4.input_layernorm.weight');
    expect(e.message).toMatch(/missing/);
  });

  it('an index that places a tensor in a shard which lacks it', async () => {
    const dir = variant('voxtral', (d) =>
      editJson(d, 'model.safetensors.index.json', (j) => (j.weight_map['language_model.model.norm.weight'] = SHARD1)),
    );
    const e = await loadError(dir);
    expect([e.file, e.tensor]).toEqual([join(dir, SHARD1), 'language_model.model.norm.weight']);
  });

  it("a tokenizer whose audio placeholder is not the config's, and a folder without a tokenizer", async () => {
    const other = variant('qwen2_audio', (d) => editJson(d, 'config.json', (j) => (j.audio_token_index = 151640)));
    const e = await loadError(other);
    expect(e.file).toBe(join(other, 'tokenizer.json'));
    expect(e.message).toMatch(/audio placeholder is id 151646 but config.json says 151640/);
    const none = variant('qwen2_5_omni', (d) => unlinkSync(join(d, 'tokenizer.json')));
    expect((await loadError(none)).file).toBe(join(none, 'tokenizer.json'));
  });

  it('an unknown model_type', async () => {
    const dir = variant('qwen2_audio', (d) => editJson(d, 'config.json', (j) => (j.model_type = 'whisper')));
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, 'config.json'));
    expect(e.message).toMatch(/"whisper" is not supported.*voxtral.*qwen2_audio.*qwen2_5_omni/);
  });

  it('an unsupported RoPE scaling or activation', async () => {
    const rope = variant('qwen2_5_omni', (d) =>
      editJson(d, 'config.json', (j) => (j.thinker_config.text_config.rope_parameters.rope_type = 'yarn')),
    );
    expect((await loadError(rope)).message).toMatch(/RoPE scaling "yarn" is not supported/);
    const act = variant('voxtral', (d) => editJson(d, 'config.json', (j) => (j.text_config.hidden_act = 'gelu')));
    expect((await loadError(act)).message).toMatch(/hidden_act "gelu" is not supported/);
  });

  it("Mistral's native consolidated.safetensors + params.json: names the Hugging Face files to use", async () => {
    const dir = tempDir('wnw-hfbad-mistral-');
    writeFileSync(
      join(dir, 'params.json'),
      JSON.stringify({ dim: 3072, n_layers: 30, head_dim: 128, n_heads: 32, n_kv_heads: 8 }),
    );
    copyFileSync(join(root, 'voxtral', SHARD2), join(dir, 'consolidated.safetensors'));
    const e = await loadError(dir);
    expect(e.file).toBe(join(dir, 'params.json'));
    expect(e.message).toContain('mistralai/Voxtral-Mini-3B-2507');
    expect(e.message).toMatch(/interleaved-pair RoPE/);
    expect(e.message).toMatch(/config\.json/);
  });
});
