"""Head Sensitivity (WnW calibration, keys only).

  /usr/bin/python3 training/head_sensitivity.py --model public/models/wnw-ref \
      --clips calibration-data --out FILE.json

For each calibration clip: teacher-forced forward over
[bos][audio][instruction][transcript][eos], cross-entropy (mean) on the answer
tokens (transcript + eos), gradient w.r.t. every layer's post-RoPE keys.
HS(l,k) = mean over clips, answer tokens and audio positions tau of
||dCE_t/dK_{l,k,tau}||_2, where CE_t is the cross-entropy of answer token t.
Per-token gradients are exact: one backward per answer token, --batch of them
at a time through a batched backward (one-hot incoming gradients; the same
numbers; on a 12 s calibration clip here the gradients took 17 s one by one,
15 s at 16, 11.5 s at 64, whose memory grows with batch x clip length^2).
Use --pooled to take the gradient of the clip's mean CE instead (one backward
per clip; cheaper approximation). --answer-path detaches every layer's values
as well as its keys: the gradient then flows only along the answer rows'
queries, attention outputs and MLPs, the quantity the runtime's triage computes
(src/calibrate/answer-path.ts; our own folders only).
Output: {"num_layers", "num_kv_heads", "head_sensitivity": [L*Hkv floats,
head = layer*num_kv_heads + kv_head], "clips", "mode"}.

A Hugging Face folder (config.json model_type voxtral, qwen2_audio or qwen2_5_omni) runs
through training/hf/sensitivity.py: the same HS, with the folder's audio tower and decoder
in PyTorch, on CUDA when present:

  /usr/bin/python3 training/head_sensitivity.py --model HF_DIR --clips calibration-data \
      --out hs.json [--device cuda|cpu] [--dtype float32|bfloat16|float64] [--ids IDS.json]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import read_wav  # noqa: E402
from export import load_model  # noqa: E402
from infer import encode_windows, mel_for  # noqa: E402


def tokenize(text, pieces):
    """Greedy longest-match BPE-free fallback is not exact; use sentencepiece
    model if available via the shipped pieces: encode with sentencepiece-like
    segmentation by re-training-free lookup (longest match over pieces)."""
    vocab = {p: i for i, p in enumerate(pieces)}
    ids = []
    for w in text.split():
        s = "\u2581" + w
        i = 0
        while i < len(s):
            for j in range(len(s), i, -1):
                if s[i:j] in vocab and j - i >= 1:
                    ids.append(vocab[s[i:j]])
                    i = j
                    break
            else:
                ids.append(3)
                i += 1
    return ids


def per_token_norms(ce, ks, N, batch, keep_graph=False):
    """sum over answer tokens t of mean over audio positions of ||dCE_t/dK||_2,
    [L, Hkv]. `batch` tokens share one batched backward (one-hot incoming
    gradients through vmap); 1 is a plain backward per token."""
    T, L = ce.shape[0], len(ks)
    out = np.zeros((L, ks[0].shape[1]))
    eye = torch.eye(T)
    for t0 in range(0, T, batch):
        t1 = min(T, t0 + batch)
        last = t1 == T and not keep_graph
        if batch == 1:
            grads = [g[None] for g in torch.autograd.grad(ce[t0], ks, retain_graph=not last)]
        else:
            grads = torch.autograd.grad(ce, ks, grad_outputs=eye[t0:t1], is_grads_batched=True,
                                        retain_graph=not last)
        for li, g in enumerate(grads):
            # g [b, 1, Hkv, S, hd]; audio positions 1..N
            out[li] += g[:, 0, :, 1:1 + N].norm(dim=-1).mean(-1).sum(0).numpy()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="public/models/wnw-ref")
    ap.add_argument("--clips", default="calibration-data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--pooled", action="store_true")
    ap.add_argument("--answer-path", action="store_true",
                    help="values detached too: the runtime's answer-path estimate (our own folders)")
    ap.add_argument("--batch", type=int, default=None,
                    help="answer tokens per batched backward (1: one backward each; default 16, Hugging Face folders 1)")
    ap.add_argument("--sp-model", default=None, help="default: MODEL/sentencepiece.model")
    ap.add_argument("--device", choices=["cuda", "cpu"], help="Hugging Face folders: default cuda when present")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float64"], help="Hugging Face folders (default float32)")
    ap.add_argument("--ids", help="Hugging Face folders: prompt and answer ids from "
                    "`npm run calibrate -- --model DIR --export-ids FILE` (default: run it)")
    ap.add_argument("--language", help="Hugging Face folders: the prompt's language code (e.g. en)")
    ap.add_argument("--threads", type=int, help="Hugging Face folders on the CPU: torch threads (default: all cores)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, "hf"))
    from sensitivity import is_hf_folder, run as run_hf
    if is_hf_folder(a.model):
        if a.answer_path:
            ap.error("--answer-path reads our own folders (the reference model); a Hugging Face folder takes the gradient")
        result = run_hf(a)
        json.dump(result, open(a.out, "w"), indent=1)
        print("wrote", a.out)
        return
    torch.set_num_threads(2)
    cfg, enc, dec, pieces = load_model(a.model)
    enc_sp = None
    a.sp_model = a.sp_model or os.path.join(a.model, "sentencepiece.model")
    if os.path.exists(a.sp_model):
        import sentencepiece as spm
        enc_sp = spm.SentencePieceProcessor(model_file=a.sp_model)
    L, Hkv = cfg["num_layers"], cfg["num_kv_heads"]
    names = sorted(f[:-4] for f in os.listdir(a.clips) if f.endswith(".wav"))
    if a.limit:
        names = names[:a.limit]
    total = np.zeros((L, Hkv))
    count = 0
    for p in dec.parameters():
        p.requires_grad_(False)
    for n in names:
        x, sr = read_wav(os.path.join(a.clips, n + ".wav"))
        meta = json.load(open(os.path.join(a.clips, n + ".json")))
        mel = mel_for(x, cfg)
        audio = encode_windows(enc, mel, cfg)
        N = audio.shape[0]
        ids = enc_sp.encode(meta["text"]) if enc_sp else tokenize(meta["text"], pieces)
        instr = cfg["instruction"]
        eos = cfg["tokens"]["eos"]
        pre = torch.tensor([cfg["tokens"]["bos"]])
        post = torch.tensor(instr + ids + [eos])
        h = torch.cat([dec.embed_tokens(pre), audio, dec.embed_tokens(post)], 0)[None]
        keys = {}

        def hook(i, k):
            k = k.detach().requires_grad_(True)
            keys[i] = k
            return k

        logits = dec(h, key_hook=hook, value_hook=(lambda v: v.detach()) if a.answer_path else None)[0]
        start = 1 + N + len(instr)
        tg = torch.tensor(ids + [eos])
        lg = logits[start - 1:start - 1 + len(tg)]
        ce = F.cross_entropy(lg, tg, reduction="none")
        ks = [keys[i] for i in range(L)]
        if a.pooled:
            grads = torch.autograd.grad(ce.mean(), ks)
            for li, g in enumerate(grads):
                # g [1, Hkv, S, hd]; audio positions 1..N
                total[li] += g[0, :, 1:1 + N].norm(dim=-1).mean(-1).numpy()
            count += 1
        else:
            total += per_token_norms(ce, ks, N, a.batch or 16)
            count += len(tg)
        print(f"{n}: N={N} answer tokens={len(tg)} mean CE {float(ce.mean()):.3f}", flush=True)
    hs = (total / max(1, count)).reshape(-1)
    json.dump({"num_layers": L, "num_kv_heads": Hkv, "head_sensitivity": [float(v) for v in hs],
               "clips": len(names), "mode": ("pooled" if a.pooled else "per-token") + (", answer-path" if a.answer_path else "")},
              open(a.out, "w"), indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
