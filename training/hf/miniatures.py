"""Random-weight miniatures of the three real speech-LLM families, laid out exactly as
their Hugging Face folders are: config.json with the upstream keys (sparse where the real
one is sparse), bf16 tensors under the upstream names, two safetensors shards with
model.safetensors.index.json, generation_config.json, preprocessor_config.json and the
tokenizer files. Shapes are tiny but keep the ratios that matter for the runtime:
head_dim != hidden/heads (Voxtral), GQA 4:1 like Voxtral's 32:8 and 16:2 as in Omni, MHA
(Qwen2-Audio), q/k/v biases (Qwen2), untied lm_head; vocabulary sizes and special-token ids
are the real ones. Each decoder has 8 KV heads in all: WnW at r_GPU 0.2 needs more than five
(an anchor head keeps all its audio, so with 1/N of the cache it alone must stay under 0.2).

    /usr/bin/python3 training/hf/miniatures.py --out DIR

writes DIR/voxtral, DIR/qwen2_audio and DIR/qwen2_5_omni. Seeded: the same script writes
the same bytes.

Qwen2-Audio's text_config copies the real file's sparse key list (bos/eos ids,
intermediate_size, max_position_embeddings, rope_theta, rms_norm_eps, sliding_window,
use_mrope, vocab_size, torch_dtype) and adds only the size keys a miniature must shrink:
hidden_size, num_hidden_layers, num_attention_heads and num_key_value_heads (Qwen2Config's
default of 32 KV heads would not divide 4 query heads). It still omits head_dim (derived as
hidden/heads), hidden_act, tie_word_embeddings, use_sliding_window, rope_scaling and
attention_dropout, so a loader must fill those from Qwen2Config's defaults.
"""
import argparse
import importlib.util
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Audio encoder of every miniature: Whisper-shaped, 128 mel bins and 1500 positions kept real.
ENC = dict(d_model=64, layers=2, heads=4, ffn=256, mels=128, positions=1500)


def bf16_bytes(a: np.ndarray) -> bytes:
    """f32 -> bf16 with round-to-nearest-even (the upper 16 bits after rounding)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype('<u2').tobytes()


def tensor_bytes(a: np.ndarray, dtype: str) -> bytes:
    if dtype == 'BF16':
        return bf16_bytes(a)
    if dtype == 'F16':
        return np.ascontiguousarray(a, dtype='<f2').tobytes()
    if dtype == 'F32':
        return np.ascontiguousarray(a, dtype='<f4').tobytes()
    raise ValueError(dtype)


def write_safetensors(path: str, tensors: list) -> int:
    """tensors: [(name, dtype, shape, bytes)]. Returns the data bytes written."""
    header = {'__metadata__': {'format': 'pt'}}
    off = 0
    for name, dtype, shape, data in tensors:
        header[name] = {'dtype': dtype, 'shape': list(shape), 'data_offsets': [off, off + len(data)]}
        off += len(data)
    hjson = json.dumps(header, separators=(',', ':'))
    hjson += ' ' * ((8 - (8 + len(hjson)) % 8) % 8)  # safetensors pads the header to 8 bytes
    hb = hjson.encode('utf-8')
    with open(path, 'wb') as f:
        f.write(len(hb).to_bytes(8, 'little'))
        f.write(hb)
        for _, _, _, data in tensors:
            f.write(data)
    return off


def write_sharded(folder: str, tensors: list, second_from: str) -> None:
    """Two shards in module order, the second starting at tensor `second_from` (as upstream,
    the cut falls inside the decoder's layers), plus the index."""
    total = sum(len(t[3]) for t in tensors)
    cut = [t[0] for t in tensors].index(second_from)
    shards = [tensors[:cut], tensors[cut:]]
    weight_map = {}
    for i, part in enumerate(shards):
        fname = f'model-{i + 1:05d}-of-00002.safetensors'
        write_safetensors(os.path.join(folder, fname), part)
        for t in part:
            weight_map[t[0]] = fname
    index = {'metadata': {'total_size': total}, 'weight_map': dict(sorted(weight_map.items()))}
    write_json(os.path.join(folder, 'model.safetensors.index.json'), index)


def write_json(path: str, obj) -> None:
    with open(path, 'w') as f:
        json.dump(obj, f, indent=2)
        f.write('\n')


class Weights:
    """Seeded random tensors at trained-model scales (1/sqrt(fan-in) matrices, norms near 1)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.items = []

    def add(self, name: str, shape, kind: str = 'matrix', dtype: str = 'BF16', value=None):
        shape = tuple(shape)
        if value is not None:
            a = np.asarray(value, dtype=np.float32).reshape(shape)
        elif kind == 'norm':
            a = 1 + self.rng.uniform(-0.1, 0.1, shape)
        elif kind == 'bias':
            a = self.rng.uniform(-0.5, 0.5, shape)
        elif kind == 'embed':
            a = self.rng.uniform(-1, 1, shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            a = self.rng.uniform(-1, 1, shape) * math.sqrt(3 / fan_in)
        self.items.append((name, dtype, shape, tensor_bytes(a.astype(np.float32), dtype)))


def sinusoids(length: int, channels: int) -> np.ndarray:
    """Whisper's fixed position table: [sin | cos] over geometric timescales 1..10000."""
    inc = math.log(10000) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def decoder_tensors(w: Weights, prefix: str, head: str, c: dict, bias: bool) -> None:
    D, hd, F, V = c['hidden'], c['head_dim'], c['ffn'], c['vocab']
    qd, kvd = c['heads'] * hd, c['kv_heads'] * hd
    w.add(prefix + 'embed_tokens.weight', (V, D), 'embed')
    for i in range(c['layers']):
        p = f'{prefix}layers.{i}.'
        w.add(p + 'input_layernorm.weight', (D,), 'norm')
        w.add(p + 'self_attn.q_proj.weight', (qd, D))
        w.add(p + 'self_attn.k_proj.weight', (kvd, D))
        w.add(p + 'self_attn.v_proj.weight', (kvd, D))
        if bias:
            w.add(p + 'self_attn.q_proj.bias', (qd,), 'bias')
            w.add(p + 'self_attn.k_proj.bias', (kvd,), 'bias')
            w.add(p + 'self_attn.v_proj.bias', (kvd,), 'bias')
        w.add(p + 'self_attn.o_proj.weight', (D, qd))
        w.add(p + 'post_attention_layernorm.weight', (D,), 'norm')
        w.add(p + 'mlp.gate_proj.weight', (F, D))
        w.add(p + 'mlp.up_proj.weight', (F, D))
        w.add(p + 'mlp.down_proj.weight', (D, F))
    w.add(prefix + 'norm.weight', (D,), 'norm')
    w.add(head, (V, D), 'embed')


def whisper_layers(w: Weights, prefix: str) -> None:
    d, f = ENC['d_model'], ENC['ffn']
    w.add(prefix + 'conv1.weight', (d, ENC['mels'], 3))
    w.add(prefix + 'conv1.bias', (d,), 'bias')
    w.add(prefix + 'conv2.weight', (d, d, 3))
    w.add(prefix + 'conv2.bias', (d,), 'bias')
    for i in range(ENC['layers']):
        p = f'{prefix}layers.{i}.'
        for proj in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):
            w.add(p + f'self_attn.{proj}.weight', (d, d))
            if proj != 'k_proj':  # Whisper's key projection has no bias
                w.add(p + f'self_attn.{proj}.bias', (d,), 'bias')
        for norm in ('self_attn_layer_norm', 'final_layer_norm'):
            w.add(p + norm + '.weight', (d,), 'norm')
            w.add(p + norm + '.bias', (d,), 'bias')
        w.add(p + 'fc1.weight', (f, d))
        w.add(p + 'fc1.bias', (f,), 'bias')
        w.add(p + 'fc2.weight', (d, f))
        w.add(p + 'fc2.bias', (d,), 'bias')


def whisper_preprocessor(processor_class: str) -> dict:
    return {
        'chunk_length': 30, 'feature_extractor_type': 'WhisperFeatureExtractor', 'feature_size': ENC['mels'],
        'hop_length': 160, 'n_fft': 400, 'n_samples': 480000, 'nb_max_frames': 3000,
        'padding_side': 'right', 'padding_value': 0.0, 'processor_class': processor_class,
        'return_attention_mask': True, 'sampling_rate': 16000,
    }


# ---------------------------------------------------------------------------------------------
# Voxtral-Mini-3B-2507: Llama decoder (no biases, head_dim 128 != 3072/32), untied head.

VOXTRAL = dict(vocab=131072, hidden=64, ffn=160, layers=2, heads=16, kv_heads=4, head_dim=32)


def voxtral(folder: str) -> None:
    c = VOXTRAL
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
    w = Weights(1)
    decoder_tensors(w, 'language_model.model.', 'language_model.lm_head.weight', c, bias=False)
    whisper_layers(w, 'audio_tower.')
    # Kept in f32 upstream (_keep_in_fp32_modules_strict): one F32 tensor among the bf16 ones.
    w.add('audio_tower.embed_positions.weight', (ENC['positions'], ENC['d_model']), dtype='F32',
          value=sinusoids(ENC['positions'], ENC['d_model']))
    w.add('audio_tower.layer_norm.weight', (ENC['d_model'],), 'norm')
    w.add('audio_tower.layer_norm.bias', (ENC['d_model'],), 'bias')
    w.add('multi_modal_projector.linear_1.weight', (c['hidden'], ENC['ffn']))
    w.add('multi_modal_projector.linear_2.weight', (c['hidden'], c['hidden']))
    write_sharded(folder, w.items, 'language_model.model.layers.1.input_layernorm.weight')
    write_json(os.path.join(folder, 'config.json'), config)
    write_json(os.path.join(folder, 'generation_config.json'),
               {'bos_token_id': 1, 'eos_token_id': 2, 'pad_token_id': 11, 'transformers_version': '4.54.0.dev0'})
    write_json(os.path.join(folder, 'preprocessor_config.json'), whisper_preprocessor('VoxtralProcessor'))


# ---------------------------------------------------------------------------------------------
# Qwen2-Audio-7B-Instruct: Qwen2 decoder (q/k/v biases, MHA), sparse text_config, untied head.

QWEN2_AUDIO = dict(vocab=156032, hidden=64, ffn=176, layers=2, heads=4, kv_heads=4, head_dim=16)


def qwen2_audio(folder: str) -> None:
    c = QWEN2_AUDIO
    config = {
        'architectures': ['Qwen2AudioForConditionalGeneration'],
        'audio_config': {
            'd_model': ENC['d_model'], 'encoder_attention_heads': ENC['heads'], 'encoder_ffn_dim': ENC['ffn'],
            'encoder_layers': ENC['layers'], 'max_source_positions': ENC['positions'], 'model_type': 'qwen2_audio_encoder',
            'num_mel_bins': ENC['mels'],
        },
        'audio_token_index': 151646,
        'ignore_index': -100,
        'model_type': 'qwen2_audio',
        'text_config': {
            # The real file's keys ...
            'bos_token_id': 151643, 'eos_token_id': 151645, 'intermediate_size': c['ffn'],
            'max_position_embeddings': 8192, 'model_type': 'qwen2', 'rms_norm_eps': 1e-05, 'rope_theta': 10000,
            'sliding_window': 32768, 'torch_dtype': 'bfloat16', 'use_mrope': False, 'vocab_size': c['vocab'],
            # ... plus the sizes a miniature must shrink (see the module docstring).
            'hidden_size': c['hidden'], 'num_hidden_layers': c['layers'],
            'num_attention_heads': c['heads'], 'num_key_value_heads': c['kv_heads'],
        },
        'torch_dtype': 'bfloat16',
        'transformers_version': '4.45.0.dev0',
        'vocab_size': c['vocab'],
    }
    w = Weights(2)
    decoder_tensors(w, 'language_model.model.', 'language_model.lm_head.weight', c, bias=True)
    whisper_layers(w, 'audio_tower.')
    w.add('audio_tower.embed_positions.weight', (ENC['positions'], ENC['d_model']),
          value=sinusoids(ENC['positions'], ENC['d_model']))
    w.add('audio_tower.layer_norm.weight', (ENC['d_model'],), 'norm')
    w.add('audio_tower.layer_norm.bias', (ENC['d_model'],), 'bias')
    w.add('multi_modal_projector.linear.weight', (c['hidden'], ENC['d_model']))
    w.add('multi_modal_projector.linear.bias', (c['hidden'],), 'bias')
    write_sharded(folder, w.items, 'language_model.model.layers.1.input_layernorm.weight')
    write_json(os.path.join(folder, 'config.json'), config)
    write_json(os.path.join(folder, 'generation_config.json'), {
        'bos_token_id': 151643, 'chat_format': 'chatml', 'do_sample': True, 'eos_token_id': [151643, 151645],
        'pad_token_id': 151643, 'transformers_version': '4.45.0.dev0',
    })
    write_json(os.path.join(folder, 'preprocessor_config.json'), whisper_preprocessor('Qwen2AudioProcessor'))


# ---------------------------------------------------------------------------------------------
# Qwen2.5-Omni-3B: the thinker's Qwen2 decoder (biases, GQA 16:2, head_dim = hidden/heads, so
# 8 here and mrope_section scaled to sum to 4), rope_parameters
# (transformers v5 spelling), thinker.* names, plus talker/token2wav/visual tensors to skip.

OMNI = dict(vocab=151936, hidden=128, ffn=256, layers=4, heads=16, kv_heads=2, head_dim=8)


def qwen2_5_omni(folder: str) -> None:
    c = OMNI
    text_config = {
        'attention_dropout': 0.0, 'hidden_act': 'silu', 'hidden_size': c['hidden'], 'init_std': 0.02,
        'intermediate_size': c['ffn'], 'max_position_embeddings': 32768, 'max_window_layers': 28,
        'model_type': 'qwen2_5_omni_text', 'num_attention_heads': c['heads'], 'num_hidden_layers': c['layers'],
        'num_key_value_heads': c['kv_heads'], 'rms_norm_eps': 1e-06,
        'rope_parameters': {'mrope_section': [1, 1, 2], 'rope_theta': 1000000.0, 'rope_type': 'default'},
        'sliding_window': 32768, 'tie_word_embeddings': False, 'use_cache': True, 'use_sliding_window': False,
        'vocab_size': c['vocab'],
    }
    thinker_config = {
        'audio_config': {
            'activation_function': 'gelu', 'd_model': ENC['d_model'], 'encoder_attention_heads': ENC['heads'],
            'encoder_ffn_dim': ENC['ffn'], 'encoder_layers': ENC['layers'], 'max_source_positions': ENC['positions'],
            'model_type': 'qwen2_5_omni_audio_encoder', 'n_window': 100, 'num_mel_bins': ENC['mels'],
            'output_dim': c['hidden'], 'scale_embedding': False,
        },
        'audio_end_token_id': 151648, 'audio_start_token_id': 151647, 'audio_token_index': 151646,
        'bos_token': 151644, 'eos_token_id': 151645, 'image_token_index': 151655, 'model_type': 'qwen2_5_omni_thinker',
        'pad_token_id': 151643, 'position_id_per_seconds': 25, 'seconds_per_chunk': 2, 'text_config': text_config,
        'user_token_id': 872, 'video_token_index': 151656,
        'vision_config': {'depth': 1, 'hidden_size': 32, 'model_type': 'qwen2_5_omni_vision_encoder', 'out_hidden_size': c['hidden']},
    }
    config = {
        'architectures': ['Qwen2_5OmniModel'],
        'enable_audio_output': True,
        'enable_talker': True,
        'model_type': 'qwen2_5_omni',
        'talker_config': {'hidden_size': 32, 'model_type': 'qwen2_5_omni_talker', 'num_hidden_layers': 1, 'vocab_size': 64},
        'thinker_config': thinker_config,
        'token2wav_config': {'model_type': 'qwen2_5_omni_token2wav'},
        'torch_dtype': 'bfloat16',
        'transformers_version': '5.0.0',
    }
    w = Weights(3)
    decoder_tensors(w, 'thinker.model.', 'thinker.lm_head.weight', c, bias=True)
    whisper_layers(w, 'thinker.audio_tower.')  # no embed_positions: Omni computes its sinusoids
    w.add('thinker.audio_tower.ln_post.weight', (ENC['d_model'],), 'norm')
    w.add('thinker.audio_tower.ln_post.bias', (ENC['d_model'],), 'bias')
    w.add('thinker.audio_tower.proj.weight', (c['hidden'], ENC['d_model']))
    w.add('thinker.audio_tower.proj.bias', (c['hidden'],), 'bias')
    w.add('thinker.audio_tower.audio_bos_eos_token.weight', (2, c['hidden']), 'embed')
    # Parts the runtime never loads: vision tower, speech generator and vocoder.
    w.add('thinker.visual.patch_embed.proj.weight', (32, 3, 2, 14, 14))
    w.add('thinker.visual.merger.mlp.0.weight', (c['hidden'], 32))
    w.add('talker.model.embed_tokens.weight', (64, 32), 'embed')
    w.add('talker.thinker_to_talker_proj.weight', (32, c['hidden']))
    w.add('talker.codec_head.weight', (64, 32))
    w.add('token2wav.code2wav_dit_model.input_embed.proj.weight', (32, 64))
    w.add('token2wav.code2wav_bigvgan_model.conv_pre.weight', (16, 8, 7))
    write_sharded(folder, w.items, 'thinker.model.layers.1.input_layernorm.weight')
    write_json(os.path.join(folder, 'config.json'), config)
    write_json(os.path.join(folder, 'generation_config.json'), {
        'bos_token_id': 151644, 'eos_token_id': [151645, 151643], 'pad_token_id': 151643,
        'transformers_version': '5.0.0',
    })
    write_json(os.path.join(folder, 'preprocessor_config.json'), whisper_preprocessor('Qwen2_5OmniProcessor'))


def tokenizer_module():
    """The tokenizer writers (training/hf/tokenizers.py), when present."""
    path = os.path.join(HERE, 'tokenizers.py')
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location('wnw_hf_tokenizers', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    tok = tokenizer_module()
    writers = {'voxtral': voxtral, 'qwen2_audio': qwen2_audio, 'qwen2_5_omni': qwen2_5_omni}
    for name, write in writers.items():
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        write(folder)
        if tok is None:
            continue
        if name == 'voxtral':
            tok.write_voxtral_tokenizers(folder)
        else:
            # A small byte-level BPE (512 entries before the specials, which keep their real ids).
            tok.write_qwen_tokenizer(folder, 512, flavour=name)
    if tok is None:
        print('training/hf/tokenizers.py not found: the miniatures have no tokenizer files', file=sys.stderr)


if __name__ == '__main__':
    main()
