"""A random-weight Voxtral-Mini-3B-2507 folder at the published decoder size, in the upstream
Hugging Face layout (config.json, bf16 shards model-0000N-of-00002.safetensors with
model.safetensors.index.json, generation_config.json, preprocessor_config.json, tekken.json
and tokenizer.json), for measuring what loading and decoding the real model costs in memory
and time without downloading it.

    python3 scripts/voxtral-full.py   (needs numpy) --out /work/bigmodel/voxtral-full-bf16

The decoder is full size (hidden 3072, 30 layers, 32 heads, 8 KV heads, head_dim 128,
intermediate 8192, vocab 131072, untied head: about 8 GB of bf16); the audio encoder is the
miniature's (training/hf/miniatures.py), since the bench measures the decoder. Tensors are
written a slice at a time (a header computed from the shapes first), so memory holds one
slice of random values, never a tensor, let alone the model. Values follow the miniatures'
scales (uniform, 1/sqrt(fan-in) matrices, norms near 1) and are seeded.
"""
import argparse
import importlib.util
import json
import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load(name: str, rel: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mini = load('wnw_miniatures', 'training/hf/miniatures.py')

# configuration_voxtral.py's text defaults (docs/real-backbones.md section 1.1).
TEXT = dict(vocab=131072, hidden=3072, ffn=8192, layers=30, heads=32, kv_heads=8, head_dim=128)
ENC = mini.ENC
# Elements per random slice (16 Mi: 64 MiB of f32 in flight).
SLICE = 1 << 24
# Upstream's shards hold at most 5 GB (save_pretrained's default max_shard_size).
MAX_SHARD = 5_000_000_000


class Spec:
    """One tensor to write: its name, dtype, shape and how its values are drawn."""

    def __init__(self, name, shape, kind='matrix', dtype='BF16', value=None):
        self.name, self.shape, self.kind, self.dtype, self.value = name, tuple(shape), kind, dtype, value
        self.count = int(np.prod(self.shape))
        self.bytes = self.count * (4 if dtype == 'F32' else 2)


def decoder_specs(c: dict) -> list:
    D, hd, F, V = c['hidden'], c['head_dim'], c['ffn'], c['vocab']
    qd, kvd = c['heads'] * hd, c['kv_heads'] * hd
    p0 = 'language_model.model.'
    out = [Spec(p0 + 'embed_tokens.weight', (V, D), 'embed')]
    for i in range(c['layers']):
        p = f'{p0}layers.{i}.'
        out += [
            Spec(p + 'input_layernorm.weight', (D,), 'norm'),
            Spec(p + 'self_attn.q_proj.weight', (qd, D)),
            Spec(p + 'self_attn.k_proj.weight', (kvd, D)),
            Spec(p + 'self_attn.v_proj.weight', (kvd, D)),
            Spec(p + 'self_attn.o_proj.weight', (D, qd)),
            Spec(p + 'post_attention_layernorm.weight', (D,), 'norm'),
            Spec(p + 'mlp.gate_proj.weight', (F, D)),
            Spec(p + 'mlp.up_proj.weight', (F, D)),
            Spec(p + 'mlp.down_proj.weight', (D, F)),
        ]
    out += [Spec(p0 + 'norm.weight', (D,), 'norm'), Spec('language_model.lm_head.weight', (V, D), 'embed')]
    return out


def encoder_specs(c: dict) -> list:
    # The miniature's Whisper tower, reusing its writer for names and shapes.
    w = mini.Weights(1)
    mini.whisper_layers(w, 'audio_tower.')
    out = [Spec(name, shape, 'bias' if name.endswith('.bias') else 'norm' if 'norm' in name else 'matrix')
           for name, _, shape, _ in w.items]
    out.append(Spec('audio_tower.embed_positions.weight', (ENC['positions'], ENC['d_model']), dtype='F32',
                    value=mini.sinusoids(ENC['positions'], ENC['d_model'])))
    out += [
        Spec('audio_tower.layer_norm.weight', (ENC['d_model'],), 'norm'),
        Spec('audio_tower.layer_norm.bias', (ENC['d_model'],), 'bias'),
        Spec('multi_modal_projector.linear_1.weight', (c['hidden'], ENC['ffn'])),
        Spec('multi_modal_projector.linear_2.weight', (c['hidden'], c['hidden'])),
    ]
    return out


def slices(spec: Spec, rng: np.random.Generator):
    """The tensor's bytes, a slice at a time."""
    if spec.value is not None:
        yield mini.tensor_bytes(np.asarray(spec.value, dtype=np.float32).reshape(spec.shape), spec.dtype)
        return
    fan_in = int(np.prod(spec.shape[1:])) if len(spec.shape) > 1 else 1
    for at in range(0, spec.count, SLICE):
        n = min(SLICE, spec.count - at)
        a = rng.random(n, dtype=np.float32) * 2 - 1
        if spec.kind == 'norm':
            a = 1 + 0.1 * a
        elif spec.kind == 'bias':
            a *= 0.5
        elif spec.kind == 'matrix':
            a *= math.sqrt(3 / fan_in)
        if spec.dtype == 'BF16':
            # Truncation to the upper 16 bits: a valid bf16 of nearly the same value, at a
            # fraction of the cost of rounding 4 billion values.
            yield (a.view(np.uint32) >> 16).astype('<u2').tobytes()
        else:
            yield mini.tensor_bytes(a, spec.dtype)


def write_shard(path: str, specs: list, rng: np.random.Generator) -> None:
    header = {'__metadata__': {'format': 'pt'}}
    off = 0
    for s in specs:
        header[s.name] = {'dtype': s.dtype, 'shape': list(s.shape), 'data_offsets': [off, off + s.bytes]}
        off += s.bytes
    hjson = json.dumps(header, separators=(',', ':'))
    hjson += ' ' * ((8 - (8 + len(hjson)) % 8) % 8)
    hb = hjson.encode('utf-8')
    with open(path, 'wb') as f:
        f.write(len(hb).to_bytes(8, 'little'))
        f.write(hb)
        for s in specs:
            written = 0
            for chunk in slices(s, rng):
                f.write(chunk)
                written += len(chunk)
            if written != s.bytes:
                raise RuntimeError(f'{s.name}: wrote {written} bytes, planned {s.bytes}')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    c = TEXT
    specs = decoder_specs(c) + encoder_specs(c)
    shards = [[]]
    size = 0
    for s in specs:
        if size > 0 and size + s.bytes > MAX_SHARD:
            shards.append([])
            size = 0
        shards[-1].append(s)
        size += s.bytes
    rng = np.random.default_rng(1)
    weight_map = {}
    for i, part in enumerate(shards):
        fname = f'model-{i + 1:05d}-of-{len(shards):05d}.safetensors'
        write_shard(os.path.join(args.out, fname), part, rng)
        for s in part:
            weight_map[s.name] = fname
        print(f'wrote {fname} ({len(part)} tensors)', flush=True)
    total = sum(s.bytes for s in specs)
    mini.write_json(os.path.join(args.out, 'model.safetensors.index.json'),
                    {'metadata': {'total_size': total}, 'weight_map': dict(sorted(weight_map.items()))})
    config = {
        'architectures': ['VoxtralForConditionalGeneration'],
        'audio_config': {
            'activation_function': 'gelu', 'attention_dropout': 0.0, 'dropout': 0.0,
            'head_dim': ENC['d_model'] // ENC['heads'], 'hidden_size': ENC['d_model'], 'initializer_range': 0.02,
            'intermediate_size': ENC['ffn'], 'layerdrop': 0.0, 'max_source_positions': ENC['positions'],
            'model_type': 'voxtral_encoder', 'num_attention_heads': ENC['heads'], 'num_hidden_layers': ENC['layers'],
            'num_key_value_heads': ENC['heads'], 'num_mel_bins': ENC['mels'], 'scale_embedding': False, 'vocab_size': 51866,
        },
        'audio_token_id': 24,
        'hidden_size': c['hidden'],
        'model_type': 'voxtral',
        'projector_hidden_act': 'gelu',
        'text_config': {
            'attention_bias': False, 'attention_dropout': 0.0, 'head_dim': c['head_dim'], 'hidden_act': 'silu',
            'hidden_size': c['hidden'], 'initializer_range': 0.02, 'intermediate_size': c['ffn'],
            'max_position_embeddings': 131072, 'mlp_bias': False, 'model_type': 'llama',
            'num_attention_heads': c['heads'], 'num_hidden_layers': c['layers'], 'num_key_value_heads': c['kv_heads'],
            'pretraining_tp': 1, 'rms_norm_eps': 1e-05, 'rope_scaling': None, 'rope_theta': 100000000.0,
            'sliding_window': None, 'use_cache': True, 'vocab_size': c['vocab'],
        },
        'torch_dtype': 'bfloat16',
        'transformers_version': '4.54.0.dev0',
        'vocab_size': c['vocab'],
    }
    mini.write_json(os.path.join(args.out, 'config.json'), config)
    mini.write_json(os.path.join(args.out, 'generation_config.json'),
                    {'bos_token_id': 1, 'eos_token_id': 2, 'pad_token_id': 11, 'transformers_version': '4.54.0.dev0'})
    mini.write_json(os.path.join(args.out, 'preprocessor_config.json'), mini.whisper_preprocessor('VoxtralProcessor'))
    tok = mini.tokenizer_module()
    if tok is None:
        raise SystemExit('training/hf/tokenizers.py not found: cannot write tekken.json')
    tok.write_voxtral_tokenizers(args.out)
    print(f'{args.out}: {total} bytes of weights in {len(shards)} shards', flush=True)


if __name__ == '__main__':
    main()
