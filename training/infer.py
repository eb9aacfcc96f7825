"""Inference helpers shared by training (validation), export (fixtures) and
eval: windowed encoding exactly as the runtime does it, prompt building,
greedy decoding with a KV cache (chunked prefill)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log_mel  # noqa: E402


def mel_for(x, cfg):
    a = cfg["audio"]
    m = log_mel(x)
    T = (m.shape[1] // a["frames_per_token"]) * a["frames_per_token"]
    m = (m[:, :T] - a["mel_mean"]) / a["mel_std"]
    return m.astype(np.float32)


@torch.no_grad()
def encode_windows(enc, mel, cfg):
    """mel [n_mels, T] normalised numpy -> embeddings [T/8, D] torch; windows
    of encoder_window_frames, run independently, concatenated."""
    W = cfg["audio"]["encoder_window_frames"]
    outs = []
    for s in range(0, mel.shape[1], W):
        w = torch.from_numpy(np.ascontiguousarray(mel[:, s:s + W]))[None].to(next(enc.parameters()).device)
        outs.append(enc(w)[0])
    return torch.cat(outs, 0)


def build_prompt(n_audio, cfg):
    """prompt ids with -1 at audio positions: [bos][audio x N][instruction]."""
    return [cfg["tokens"]["bos"]] + [-1] * n_audio + list(cfg["instruction"])


def embed_prompt(dec, prompt, audio):
    dev = dec.embed_tokens.weight.device
    ids = torch.tensor([max(0, i) for i in prompt], device=dev)
    h = dec.embed_tokens(ids)
    is_audio = torch.tensor([i < 0 for i in prompt], device=dev)
    h = h.clone()
    h[is_audio] = audio
    return h[None]


@torch.no_grad()
def greedy(dec, audio, cfg, max_new=None, stop_at_eos=True, n_steps=None, chunk=1024, return_logits=False,
           stop_fn=None):
    """audio [N, D]. Returns (tokens, logits list). max_new defaults to the
    6-tokens-per-audio-second guard."""
    N = audio.shape[0]
    prompt = build_prompt(N, cfg)
    h = embed_prompt(dec, prompt, audio)
    caches = [dict(k=None, v=None) for _ in dec.layers]
    L = h.shape[1]
    logits = None
    for s in range(0, L, chunk):
        logits = dec(h[:, s:s + chunk], start_pos=s, caches=caches, logits_from=-1)
    if max_new is None:
        max_new = int(6 * N / cfg["audio"]["tokens_per_second"])
    steps = n_steps if n_steps is not None else max_new
    toks, all_logits = [], []
    pos = L
    eos = cfg["tokens"]["eos"]
    for _ in range(steps):
        lg = logits[0, -1]
        if return_logits:
            all_logits.append(lg.clone())
        t = int(torch.argmax(lg))
        toks.append(t)
        if t == eos and stop_at_eos:
            break
        if stop_fn is not None and stop_fn(toks):
            break
        e = dec.embed_tokens(torch.tensor([[t]], device=dec.embed_tokens.weight.device))
        logits = dec(e, start_pos=pos, caches=caches)
        pos += 1
    return toks, all_logits


def detok(ids, pieces, special=(0, 1, 2)):
    out = []
    for i in ids:
        if i == 2:
            break
        if i in special:
            continue
        out.append(pieces[i])
    return "".join(out).replace("\u2581", " ").strip()
