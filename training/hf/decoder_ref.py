"""Reference forward of the decoders of the three Hugging Face families (Voxtral's Llama,
Qwen2-Audio's and Qwen2.5-Omni's Qwen2), written from the upstream modeling code's
semantics and reading the folder's safetensors directly (bf16/f16 widened; the maths in
float64 so the runtime's f32 result is compared against the exact one):

  x = inputs_embeds
  per layer:  h = RMSNorm(x) (x * rsqrt(mean(x^2) + eps) * w)
              q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)       biases: Qwen2 only
              rotate-half RoPE with theta: x*cos + rotate_half(x)*sin, rotate_half = [-x2, x1]
              (Omni: M-RoPE with mrope_section, three position streams; for audio and
              text all three streams are the same positions)
              GQA: query head h reads KV head h // (heads / kv_heads) (repeat_kv)
              softmax(q k^T / sqrt(head_dim) + causal mask) v, then o_proj (no bias)
              x += attn;  x += down(silu(gate(RMSNorm(x))) * up(RMSNorm(x)))
  logits = lm_head(RMSNorm_final(x))  (lm_head falls back to embed_tokens when tied/absent)

  decoder_ref.py --model DIR --inputs inputs.json --out logits.bin
  decoder_ref.py --batch jobs.json     (a list of {"model", "inputs", "out"}: one interpreter start)

inputs.json: {"prefix": [ids], "audio": [N*hidden floats] (row-major), "audio_rows": N,
"instruction": [ids], "suffix": [ids]}; the prompt rows are embed(prefix), the audio
embeddings, embed(instruction), embed(suffix). Writes f32 logits [positions, vocab]
row-major to --out and prints {"positions", "vocab"} as JSON.
"""
import argparse
import json
import math
import os

import numpy as np
import torch

import shards

torch.set_num_threads(1)

# Upstream config defaults for keys a sparse text config omits.
QWEN2_DEFAULTS = dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=32, rms_norm_eps=1e-6, rope_theta=10000.0,
                      tie_word_embeddings=False)
VOXTRAL_DEFAULTS = dict(vocab_size=131072, hidden_size=3072, intermediate_size=8192, num_hidden_layers=30,
                        num_attention_heads=32, num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=1e8, head_dim=128,
                        tie_word_embeddings=False)
OMNI_DEFAULTS = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                     num_attention_heads=28, num_key_value_heads=4, rms_norm_eps=1e-6, rope_theta=1e6,
                     tie_word_embeddings=False)

FAMILIES = {
    # model_type: (text config path, defaults, decoder prefix, lm_head, q/k/v biases)
    'voxtral': (('text_config',), VOXTRAL_DEFAULTS, 'language_model.model.', 'language_model.lm_head.weight', False),
    'qwen2_audio': (('text_config',), QWEN2_DEFAULTS, 'language_model.model.', 'language_model.lm_head.weight', True),
    'qwen2_5_omni': (('thinker_config', 'text_config'), OMNI_DEFAULTS, 'thinker.model.', 'thinker.lm_head.weight', True),
}


def read_checkpoint(folder):
    """name -> float64 tensor, for every tensor of every shard named by the index."""
    return {k: torch.from_numpy(v.astype(np.float64)) for k, v in shards.tensors(folder)}


def text_config(config):
    family = FAMILIES[config['model_type']]
    c = config
    for key in family[0]:
        c = c[key]
    d = dict(family[1])
    d.update({k: v for k, v in c.items() if v is not None})
    rope = c.get('rope_parameters') or c.get('rope_scaling') or {}
    d['rope_theta'] = rope.get('rope_theta', d['rope_theta'])
    d['mrope_section'] = rope.get('mrope_section')
    d.setdefault('head_dim', d['hidden_size'] // d['num_attention_heads'])
    return d, family


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rope_cos_sin(n, head_dim, theta, mrope_section):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if mrope_section is None:
        freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos(), emb.sin()
    # M-RoPE: temporal/height/width position streams; for audio and text all three are
    # the same positions 0..n-1. Section i of the (doubled) rotary dims takes stream i % 3.
    pos = torch.arange(n, dtype=torch.float64)[None, :].expand(3, n)
    freqs = pos[:, :, None] * inv[None, None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    sections = list(mrope_section) * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(emb.cos().split(sections, dim=-1))], dim=-1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(emb.sin().split(sections, dim=-1))], dim=-1)
    return cos, sin


def forward(folder, inputs):
    config = json.load(open(os.path.join(folder, 'config.json')))
    c, family = text_config(config)
    w = read_checkpoint(folder)
    embed = w[family[2] + 'embed_tokens.weight']
    audio = torch.tensor(inputs['audio'], dtype=torch.float64).reshape(inputs['audio_rows'], c['hidden_size'])
    rows = [embed[inputs['prefix']], audio, embed[inputs['instruction']], embed[inputs.get('suffix', [])]]
    x = decode(c, family, w, torch.cat(rows, dim=0))
    return x @ lm_head(family, w).T


def lm_head(family, w):
    """lm_head falls back to embed_tokens when tied or absent."""
    return w.get(family[3], w[family[2] + 'embed_tokens.weight'])


def decode(c, family, w, x, key_hook=None):
    """The decoder stack on input embeddings x [n, hidden] (weights w: upstream name ->
    tensor, all of x's dtype and device); returns the final-normed hidden states [n, hidden].
    key_hook(layer, k) sees each layer's post-RoPE keys [kv_heads, n, head_dim] before
    repeat_kv and returns the keys attention uses (Head Sensitivity makes them leaves)."""
    _, _, prefix, _, bias = family
    n = x.shape[0]
    H, KV, hd = c['num_attention_heads'], c['num_key_value_heads'], c['head_dim']
    eps = c['rms_norm_eps']
    cos, sin = (t.to(x) for t in rope_cos_sin(n, hd, c['rope_theta'], c['mrope_section']))
    mask = torch.full((n, n), float('-inf'), dtype=torch.float64).triu(1).to(x)
    for l in range(c['num_hidden_layers']):
        p = f'{prefix}layers.{l}.'
        h = rms_norm(x, w[p + 'input_layernorm.weight'], eps)

        def proj(name):
            y = h @ w[p + f'self_attn.{name}.weight'].T
            return y + w[p + f'self_attn.{name}.bias'] if bias else y

        q = proj('q_proj').view(n, H, hd).transpose(0, 1)
        k = proj('k_proj').view(n, KV, hd).transpose(0, 1)
        v = proj('v_proj').view(n, KV, hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if key_hook is not None:
            k = key_hook(l, k)
        k = k.repeat_interleave(H // KV, dim=0)  # repeat_kv: KV head j serves query heads j*g .. j*g+g-1
        v = v.repeat_interleave(H // KV, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, dim=-1) @ v
        x = x + att.transpose(0, 1).reshape(n, H * hd) @ w[p + 'self_attn.o_proj.weight'].T
        h = rms_norm(x, w[p + 'post_attention_layernorm.weight'], eps)
        gate = h @ w[p + 'mlp.gate_proj.weight'].T
        up = h @ w[p + 'mlp.up_proj.weight'].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + 'mlp.down_proj.weight'].T
    return rms_norm(x, w[prefix + 'norm.weight'], eps)


def main():
    ap = argparse.ArgumentParser(description='Reference decoder forward of a Hugging Face speech-LLM folder')
    ap.add_argument('--model')
    ap.add_argument('--inputs')
    ap.add_argument('--out')
    ap.add_argument('--batch')
    args = ap.parse_args()
    jobs = json.load(open(args.batch)) if args.batch else [{'model': args.model, 'inputs': args.inputs, 'out': args.out}]
    for job in jobs:
        logits = forward(job['model'], json.load(open(job['inputs'])))
        logits.to(torch.float32).numpy().astype('<f4').tofile(job['out'])
        print(json.dumps({'positions': logits.shape[0], 'vocab': logits.shape[1]}))


if __name__ == '__main__':
    main()
