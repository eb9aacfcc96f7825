"""Head Sensitivity of a Hugging Face speech LLM (voxtral, qwen2_audio, qwen2_5_omni).

training/head_sensitivity.py --model HF_DIR hands Hugging Face folders to `run` here. Per
calibration clip: Whisper log-mel (mel_ref.py) cut into the family's processor examples
(the rules of src/route/audio-route.ts), the folder's audio tower + projector (encoder_ref.py) ->
audio embeddings, then the decoder (decoder_ref.py) teacher-forced on
[prefix][audio][instruction][answer], cross-entropy on the answer tokens (transcript + the
model's eos), gradients w.r.t. every layer's post-RoPE keys (before repeat_kv, so one
gradient per KV head). HS(l, k) = mean over clips, answer tokens t and audio positions tau
of ||dCE_t/dK_{l,k,tau}||_2, as for the reference model.

Prompt and answer ids come from the TypeScript tokenizer and prompt builder (so the heads
are ranked on exactly the prompt the runtime decodes with): `--ids FILE` written by
`npm run calibrate -- --model HF_DIR --export-ids FILE`, or that command is run here.

Weights are read tensor by tensor from the shards (memory-mapped), converted to --dtype on
--device; only the decoder, audio tower and projector tensors are kept (Omni's talker and
token2wav are skipped).
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import decoder_ref  # noqa: E402
import encoder_ref  # noqa: E402
import mel_ref  # noqa: E402
import shards  # noqa: E402

SR = 16000
# Upstream prefixes of the tensors calibration needs, per family: decoder, audio tower, projector.
KEEP = {
    'voxtral': ('language_model.', 'audio_tower.', 'multi_modal_projector.'),
    'qwen2_audio': ('language_model.', 'audio_tower.', 'multi_modal_projector.'),
    'qwen2_5_omni': ('thinker.model.', 'thinker.lm_head.', 'thinker.audio_tower.'),
}
DTYPES = {'float64': torch.float64, 'float32': torch.float32, 'bfloat16': torch.bfloat16}


def is_hf_folder(folder):
    p = os.path.join(folder, 'config.json')
    if not os.path.exists(p):
        return False
    return json.load(open(p)).get('model_type') in KEEP


def read_weights(folder, keep, device, dtype):
    """upstream name -> tensor on device, for the names starting with one of `keep`."""
    return {k: torch.from_numpy(v).to(device=device, dtype=dtype) for k, v in shards.tensors(folder, keep, strict=True)}


class HfModel:
    """A folder's config, weights and the facts calibration needs (one load per run)."""

    def __init__(self, folder, device='cpu', dtype=torch.float32):
        self.folder, self.device, self.dtype = folder, device, dtype
        self.config = json.load(open(os.path.join(folder, 'config.json')))
        self.family = self.config['model_type']
        self.text, self.family_spec = decoder_ref.text_config(self.config)
        self.w = read_weights(folder, KEEP[self.family], device, dtype)
        pre = os.path.join(folder, 'preprocessor_config.json')
        self.n_samples = json.load(open(pre)).get('n_samples', 480000) if os.path.exists(pre) else 480000
        audio = self.config['thinker_config']['audio_config'] if self.family == 'qwen2_5_omni' else self.config['audio_config']
        self.n_mels = audio.get('num_mel_bins', 128)
        self.embed = self.w[self.family_spec[2] + 'embed_tokens.weight']
        self.lm_head = decoder_ref.lm_head(self.family_spec, self.w)

    @property
    def num_layers(self):
        return self.text['num_hidden_layers']

    @property
    def num_kv_heads(self):
        return self.text['num_key_value_heads']


def examples(family, x, n):
    """The processor examples of samples x as (padded samples, valid mel frames): the
    feature-extractor rules of src/route/audio-route.ts."""
    def one(piece, **pad):
        padded = mel_ref.pad_like_processor(piece, **pad)
        kept = min(len(piece), pad.get('truncate') or len(piece))
        return padded, min(len(padded) // mel_ref.HOP, math.ceil(kept / mel_ref.HOP))
    if family == 'voxtral':  # the whole recording, zero-padded to a multiple of 30 s
        return [one(x, pad_multiple=n)]
    if family == 'qwen2_audio':  # consecutive 30 s clips, each padded to 30 s
        return [one(x[s:s + n], truncate=n, pad_length=n) for s in range(0, len(x), n)]
    return [one(x, pad_length=n)]  # Omni: padded to 30 s, never truncated; padding dropped by the encoder


@torch.no_grad()
def audio_embeddings(m, samples):
    """[N, hidden] audio embeddings of 16 kHz samples (no gradient: HS needs only the keys')."""
    parts = []
    for padded, valid in examples(m.family, np.asarray(samples, dtype=np.float64), m.n_samples):
        if valid < 1:
            continue
        mel = torch.from_numpy(mel_ref.whisper_log_mel(padded, m.n_mels)).to(device=m.device, dtype=m.dtype)
        if m.family == 'voxtral':
            out = encoder_ref.voxtral(m.config, m.w, mel)
        elif m.family == 'qwen2_audio':
            out = encoder_ref.qwen2_audio(m.config, m.w, mel, valid)
        else:
            out = encoder_ref.qwen2_5_omni(m.config, m.w, mel, valid)
        if out.shape[0] > 0:  # a last example too short for one token adds none (as the runtime)
            parts.append(out)
    if not parts:
        raise ValueError(f'the clip is too short for the audio encoder ({len(samples) / SR:.3f} s)')
    return torch.cat(parts)


def answer_rows(m, audio, prefix, instruction, answer, key_hook=None):
    """Final-normed hidden states [len(answer), hidden] at the positions that predict the
    answer tokens, teacher-forced after the prompt."""
    ids = lambda xs: torch.tensor(xs, dtype=torch.long, device=m.device)  # noqa: E731
    x = torch.cat([m.embed[ids(prefix)], audio.to(m.dtype), m.embed[ids(instruction)], m.embed[ids(answer[:-1])]])
    h = decoder_ref.decode(m.text, m.family_spec, m.w, x, key_hook)
    start = len(prefix) + audio.shape[0] + len(instruction)
    return h[start - 1:start - 1 + len(answer)]


def answer_ce(m, audio, prefix, instruction, answer, key_hook=None):
    """Per-token cross-entropy [len(answer)] of the answer (autograd all the way)."""
    logits = answer_rows(m, audio, prefix, instruction, answer, key_hook) @ m.lm_head.T
    return F.cross_entropy(logits.float() if m.dtype == torch.bfloat16 else logits,
                           torch.tensor(answer, device=m.device), reduction='none')


@torch.no_grad()
def row_gradients(m, rows, answer):
    """CE_t and dCE_t/d rows_t [T, hidden], in closed form: (softmax(logits_t) - onehot(y_t)) lm_head.
    CE_t depends on row t only, so the per-token backward starts at the rows, not at a
    [tokens, tokens, vocab] batch of logit gradients (131k vocabularies)."""
    logits = (rows @ m.lm_head.T).double()
    y = torch.tensor(answer, device=m.device)
    ce = torch.logsumexp(logits, -1) - logits.gather(1, y[:, None])[:, 0]
    p = torch.softmax(logits, -1)
    p[torch.arange(len(answer), device=m.device), y] -= 1
    return ce, (p.to(m.dtype) @ m.lm_head)


def leaf_keys(store):
    """A key_hook that adds a zero leaf to each layer's keys, kept in `store`: the gradient
    w.r.t. it is dCE/dK with every path from K onwards, later layers' keys included.
    (Making K itself a detached leaf would cut the paths through later layers' keys but
    not their queries and values; the finite-difference test catches that.)"""
    def hook(layer, k):
        store[layer] = torch.zeros_like(k, requires_grad=True)
        return k + store[layer]
    return hook


def clip_sensitivity(m, audio, prefix, instruction, answer, batch=1, pooled=False):
    """(sum over answer tokens of the mean over audio positions of ||dCE_t/dK||_2 [L, KV],
    number of answer tokens, CE per token). `batch` tokens share one batched backward
    (one-hot incoming gradients); pooled: one backward of the mean CE, counted as one token."""
    keys = {}
    rows = answer_rows(m, audio, prefix, instruction, answer, leaf_keys(keys))
    ce, g = row_gradients(m, rows.detach(), answer)
    ks = [keys[l] for l in range(m.num_layers)]
    a0, a1 = len(prefix), len(prefix) + audio.shape[0]
    total = torch.zeros(m.num_layers, m.num_kv_heads, dtype=torch.float64)
    if pooled:
        for l, k in enumerate(torch.autograd.grad(rows, ks, grad_outputs=g / len(answer))):
            total[l] += k[:, a0:a1].double().norm(dim=-1).mean(-1).cpu()
        return total.numpy(), 1, ce
    T = len(answer)
    for t0 in range(0, T, batch):
        t1 = min(T, t0 + batch)
        for l, k in enumerate(key_gradients(rows, ks, g, t0, t1, retain=t1 < T)):  # k [b, KV, n, head_dim]
            total[l] += k[:, :, a0:a1].double().norm(dim=-1).mean(-1).sum(0).cpu()
    return total.numpy(), T, ce


def key_gradients(rows, ks, g, t0, t1, retain=True):
    """dCE_t/dK for t in [t0, t1): per layer [t1 - t0, KV, n, head_dim]. One token: a plain
    backward; more: one batched backward (vmap) with one-hot incoming gradients. On CPU
    (torch 1.13) the batched form measured slower: 32 tokens of a miniature took 6 s one by
    one, 26-31 s batched."""
    if t1 - t0 == 1:
        G = torch.zeros_like(g)
        G[t0] = g[t0]
        return [k[None] for k in torch.autograd.grad(rows, ks, grad_outputs=G, retain_graph=retain)]
    G = torch.zeros(t1 - t0, *g.shape, dtype=g.dtype, device=g.device)
    G[torch.arange(t1 - t0), torch.arange(t0, t1)] = g[t0:t1]
    return torch.autograd.grad(rows, ks, grad_outputs=G, is_grads_batched=True, retain_graph=retain)


def export_ids(model, clips, limit, language):
    """Prompt and answer ids from the TypeScript side (npm run calibrate -- --export-ids)."""
    out = os.path.join(tempfile.mkdtemp(prefix='wnw-ids-'), 'ids.json')
    cmd = ['npx', 'tsx', os.path.join(ROOT, 'src/calibrate/main.ts'), '--model', model, '--clips', clips, '--export-ids', out]
    if limit:
        cmd += ['--limit', str(limit)]
    if language:
        cmd += ['--language', language]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return out


def read_clip(path):
    sys.path.insert(0, os.path.dirname(HERE))
    from common import read_wav  # training/common.py (the reference model's reader)
    x, sr = read_wav(path)
    if sr != SR:
        raise ValueError(f'{path}: {sr} Hz; calibration clips must be 16 kHz mono WAV (resample them first)')
    return x


def run(a):
    """head_sensitivity.py's arguments: model, clips, out, limit, pooled, batch, device, dtype, ids, language, threads."""
    device = a.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    if device == 'cpu':  # the reference modules pin one thread for the tests; a calibration run wants the machine
        torch.set_num_threads(getattr(a, 'threads', None) or os.cpu_count() or 1)
    dtype = DTYPES[a.dtype or 'float32']
    ids_file = a.ids or export_ids(a.model, a.clips, a.limit, a.language)
    ids = json.load(open(ids_file))
    m = HfModel(a.model, device, dtype)
    if ids.get('model_type') not in (None, m.family):
        raise ValueError(f'{ids_file}: ids were exported for {ids["model_type"]}, the folder is {m.family}')
    clips = ids['clips'][:a.limit] if a.limit else ids['clips']
    total = np.zeros((m.num_layers, m.num_kv_heads))
    count, t0 = 0, time.time()
    for i, clip in enumerate(clips):
        wav = clip['wav'] if os.path.isabs(clip['wav']) else os.path.join(ROOT, clip['wav'])
        audio = audio_embeddings(m, read_clip(wav))
        s, n, ce = clip_sensitivity(m, audio, ids['prefix'], ids['instruction'], clip['answer'], a.batch or 1, a.pooled)
        total += s
        count += n
        print(f'[{i + 1}/{len(clips)} {time.time() - t0:.0f} s] {clip["id"]}: N={audio.shape[0]} '
              f'answer tokens={len(clip["answer"])} mean CE {float(ce.mean()):.3f} ({device}, {a.dtype or "float32"})', flush=True)
    hs = (total / max(1, count)).reshape(-1)
    if not np.isfinite(hs).all():
        raise ValueError('head sensitivity is not finite (try --dtype float32 or float64)')
    return {'num_layers': m.num_layers, 'num_kv_heads': m.num_kv_heads, 'head_sensitivity': [float(v) for v in hs],
            'clips': len(clips), 'mode': 'pooled' if a.pooled else 'per-token', 'model_type': m.family,
            'device': device, 'dtype': str(dtype).replace('torch.', '')}
