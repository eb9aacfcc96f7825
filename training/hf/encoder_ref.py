"""PyTorch (float64) reference of the Whisper-family audio encoders and projectors of Voxtral,
Qwen2-Audio and Qwen2.5-Omni, written from the semantics of transformers' modeling_voxtral.py,
modeling_qwen2_audio.py and modeling_qwen2_5_omni.py (audio encoder + projector only). Reads a
Hugging Face folder (config.json and its safetensors shards, e.g. training/hf/miniatures.py's).

  encoder_ref.py --jobs jobs.json [--models DIR]
      jobs.json: [{"family": F, "model": FOLDER (default DIR/F), "out": out.f64,
                   "examples": [{"path": mel.f32, "frames": T, "valid": L}, ...]}, ...].
      F is voxtral, qwen2_audio or qwen2_5_omni. Each example is one processor example,
      mel-major float32 [num_mel_bins, T] with L frames of audio. Writes a job's audio tokens,
      in order, as float64 [tokens, width] to its "out"; prints {F: [tokens, width]} as JSON.
"""
import argparse
import json
import math
import os

import numpy as np
import torch

import shards

torch.set_num_threads(1)
DT = torch.float64


def load_folder(folder):
    w = {k: torch.from_numpy(v.astype(np.float64)) for k, v in shards.tensors(folder)}
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    return cfg, w


# ---------------------------------------------------------------- building blocks
def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def linear(x, w, b=None):
    y = x @ w.T
    return y + b if b is not None else y


def sinusoids(length, channels, max_timescale=10000, like=None):
    inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=DT))
    t = torch.arange(length, dtype=DT)[:, None] * inv[None, :]
    out = torch.cat([torch.sin(t), torch.cos(t)], dim=1)
    return out if like is None else out.to(like)


def attend(q, k, v, mask):
    s = q @ k.transpose(1, 2)
    if mask is not None:
        s = s + mask
    return torch.softmax(s, dim=-1) @ v


def encoder_layer(h, W, p, heads, mask=None, blocks=None):
    """Whisper pre-LN layer: h [S, d]; mask [S, S] additive or None; blocks: [(start, end)]
    of a block-diagonal mask (cu_seqlens), attended block by block (same numbers, less memory)."""
    S, d = h.shape
    hd = d // heads
    r = h
    x = layer_norm(h, W[p + "self_attn_layer_norm.weight"], W[p + "self_attn_layer_norm.bias"])
    q = linear(x, W[p + "self_attn.q_proj.weight"], W[p + "self_attn.q_proj.bias"]) * hd ** -0.5
    k = linear(x, W[p + "self_attn.k_proj.weight"])  # k_proj has no bias
    v = linear(x, W[p + "self_attn.v_proj.weight"], W[p + "self_attn.v_proj.bias"])
    q, k, v = (t.view(S, heads, hd).transpose(0, 1) for t in (q, k, v))
    if blocks is None:
        a = attend(q, k, v, mask)
    else:
        a = torch.cat([attend(q[:, b:e], k[:, b:e], v[:, b:e], None) for b, e in blocks], dim=1)
    a = a.transpose(0, 1).reshape(S, d)
    h = r + linear(a, W[p + "self_attn.out_proj.weight"], W[p + "self_attn.out_proj.bias"])
    r = h
    x = layer_norm(h, W[p + "final_layer_norm.weight"], W[p + "final_layer_norm.bias"])
    x = linear(gelu(linear(x, W[p + "fc1.weight"], W[p + "fc1.bias"])), W[p + "fc2.weight"], W[p + "fc2.bias"])
    return r + x


def conv(x, W, pre, stride):
    return torch.nn.functional.conv1d(x, W[pre + ".weight"], W[pre + ".bias"], stride=stride, padding=1)


def n_layers(ac):
    return ac.get("encoder_layers", ac.get("num_hidden_layers"))


# ---------------------------------------------------------------- families
def voxtral(cfg, W, mel):
    """VoxtralForConditionalGeneration.get_audio_features: [nMels, 3000·n] -> tokens."""
    ac = cfg["audio_config"]
    heads = ac["num_attention_heads"]
    pre = "audio_tower."
    chunks = mel.reshape(mel.shape[0], -1, 3000).transpose(0, 1)  # processor's reshape
    outs = []
    for c in chunks:
        x = gelu(conv(c[None], W, pre + "conv1", 1))
        x = gelu(conv(x, W, pre + "conv2", 2))[0].T  # [1500, d]
        x = x + W[pre + "embed_positions.weight"][: x.shape[0]]
        for i in range(n_layers(ac)):
            x = encoder_layer(x, W, f"{pre}layers.{i}.", heads, None)
        outs.append(layer_norm(x, W[pre + "layer_norm.weight"], W[pre + "layer_norm.bias"]))
    h = torch.stack(outs).reshape(-1, ac["intermediate_size"])  # 4 consecutive frames per row
    h = gelu(linear(h, W["multi_modal_projector.linear_1.weight"]))
    return linear(h, W["multi_modal_projector.linear_2.weight"])


def qwen2_audio(cfg, W, mel, valid):
    """Qwen2AudioForConditionalGeneration: one 30 s clip [nMels, 3000] with `valid` mel frames."""
    ac = cfg["audio_config"]
    heads = ac["encoder_attention_heads"]
    pre = "audio_tower."
    feat_len = (valid - 1) // 2 + 1
    n_tok = (feat_len - 2) // 2 + 1
    x = gelu(conv(mel[None], W, pre + "conv1", 1))
    x = gelu(conv(x, W, pre + "conv2", 2))[0].T
    x = x + W[pre + "embed_positions.weight"][: x.shape[0]]
    S = x.shape[0]
    mask = torch.zeros(S, S, dtype=x.dtype, device=x.device)
    mask[:, feat_len:] = float("-inf")  # padded frames are masked as keys
    for i in range(n_layers(ac)):
        x = encoder_layer(x, W, f"{pre}layers.{i}.", heads, mask)
    x = torch.nn.functional.avg_pool1d(x.T[None], 2, 2)[0].T
    x = layer_norm(x, W[pre + "layer_norm.weight"], W[pre + "layer_norm.bias"])
    x = linear(x, W["multi_modal_projector.linear.weight"], W["multi_modal_projector.linear.bias"])
    return x[:n_tok]


def qwen2_5_omni(cfg, W, mel, valid):
    """Qwen2_5OmniAudioEncoder.forward on one audio's valid frames."""
    ac = cfg["thinker_config"]["audio_config"]
    heads = ac["encoder_attention_heads"]
    nw2 = ac["n_window"] * 2
    pre = "thinker.audio_tower."
    feats = mel[:, :valid]
    lens = [nw2] * (valid // nw2) + ([valid % nw2] if valid % nw2 else [])
    chunks = feats.split(lens, dim=1)
    padded = torch.zeros(len(chunks), feats.shape[0], max(lens), dtype=mel.dtype, device=mel.device)
    pmask = torch.zeros(len(chunks), 1, max(lens), dtype=mel.dtype, device=mel.device)
    for i, c in enumerate(chunks):
        padded[i, :, : c.shape[1]] = c
        pmask[i, :, : c.shape[1]] = 1
    after = [(n - 1) // 2 + 1 for n in lens]
    x = gelu(conv(padded, W, pre + "conv1", 1)) * pmask
    x = gelu(conv(x, W, pre + "conv2", 2)).transpose(1, 2)
    x = x + sinusoids(ac["max_source_positions"], x.shape[2], like=x)[: x.shape[1]][None]
    x = torch.cat([x[i, :n] for i, n in enumerate(after)])
    cu = np.cumsum([0] + after)  # cu_seqlens: attention is block-diagonal, one block per window
    blocks = list(zip(cu[:-1].tolist(), cu[1:].tolist()))
    for i in range(n_layers(ac)):
        x = encoder_layer(x, W, f"{pre}layers.{i}.", heads, blocks=blocks)
    x = torch.nn.functional.avg_pool1d(x.T[None], 2, 2)[0].T
    x = layer_norm(x, W[pre + "ln_post.weight"], W[pre + "ln_post.bias"])
    return linear(x, W[pre + "proj.weight"], W[pre + "proj.bias"])


def run(folder, family, exs, out):
    cfg, W = load_folder(folder)
    toks = []
    with torch.no_grad():
        for e in exs:
            a = np.fromfile(e["path"], dtype="<f4").astype(np.float64)
            mel = torch.from_numpy(a.reshape(-1, e["frames"]))
            if family == "voxtral":
                toks.append(voxtral(cfg, W, mel))
            elif family == "qwen2_audio":
                toks.append(qwen2_audio(cfg, W, mel, e["valid"]))
            elif family == "qwen2_5_omni":
                toks.append(qwen2_5_omni(cfg, W, mel, e["valid"]))
            else:
                raise SystemExit(f"unknown family {family}")
    y = torch.cat(toks)
    y.numpy().astype("<f8").tofile(out)
    return [y.shape[0], y.shape[1]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--models", help="folder holding <family>/ model folders")
    a = ap.parse_args()
    with open(a.jobs) as f:
        todo = json.load(f)
    shapes = {j["family"]: run(j.get("model") or os.path.join(a.models, j["family"]), j["family"], j["examples"], j["out"])
              for j in todo}
    print(json.dumps(shapes))


if __name__ == "__main__":
    main()
