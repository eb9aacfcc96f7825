"""wnw-ref: the whole pipeline from one command.

  /usr/bin/python3 training/train.py            (npm run train)

Stages (each resumable; state in --work, default training/work/):
  1. data      gen_data.py: espeak-ng/festival training sessions, test sets,
               calibration clips, fixture clips (skipped if present)
  2. tokenizer sentencepiece BPE (512) on the normalised training texts
  3. ctc       encoder pretraining: char CTC at 25 Hz + subword CTC at 12.5 Hz
  4. dec       decoder-only LM on [bos][audio][instruction][text][eos], curriculum
               of clip lengths (phases below); encoder base frozen, its 12.5 Hz
               top block + projection trained jointly (+ auxiliary subword CTC)
  5. export    public/models/wnw-ref/ (config, safetensors, onnx, tokenizer,
               fixtures) -- export.py; eval -- evaluate.py
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import normalise, read_wav, wer  # noqa: E402
from infer import detok, encode_windows, greedy, mel_for  # noqa: E402
from model import CHARS, Decoder, Encoder  # noqa: E402

INSTRUCTION = "transcribe"
DEV = torch.device("cpu")  # set in main(): cuda when available (--device auto)


def default_cfg(vocab=512):
    return {
        "name": "wnw-ref", "vocab_size": vocab, "hidden_size": 192, "intermediate_size": 512,
        "num_layers": 4, "num_heads": 16, "num_kv_heads": 8, "head_dim": 32,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "max_positions": 16384,
        "tokens": {"bos": 1, "eos": 2, "pad": 0}, "instruction": [],
        "audio": {"sample_rate": 16000, "n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 80,
                  "f_min": 0.0, "f_max": 8000.0, "mel_floor": 1e-6, "mel_mean": 0.0, "mel_std": 1.0,
                  "frames_per_token": 8, "tokens_per_second": 12.5, "encoder_window_frames": 3000},
    }


ENC_KW = dict(n_mels=80, d=128, layers=4, heads=4, f=320, top_layers=1)


def log(work, msg):
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    with open(os.path.join(work, "train.log"), "a") as f:
        f.write(line + "\n")


# ----------------------------------------------------------------------------- data


class Data:
    def __init__(self, work, cfg, sp):
        d = os.path.join(work, "data")
        self.mel = np.load(os.path.join(d, "train_mel.npy"), mmap_mode="r")
        self.index = json.load(open(os.path.join(d, "train_index.json")))
        self.mean = cfg["audio"]["mel_mean"]
        self.std = cfg["audio"]["mel_std"]
        self.sp = sp
        self.sessions = [s for s in self.index if s["utts"]]
        self.w = np.array([len(s["utts"]) for s in self.sessions], dtype=np.float64)
        self.w /= self.w.sum()

    def sample(self, rng, lo_s, hi_s):
        """consecutive utterances of one session, total span in [lo_s, hi_s]
        where possible; returns (mel [80, T] float32 normalised, text)."""
        s = self.sessions[rng.choice(len(self.sessions), p=self.w)]
        utts = s["utts"]
        target = rng.uniform(lo_s, hi_s)
        i = rng.integers(len(utts))
        j = i + 1
        while j < len(utts) and utts[j][1] - utts[i][0] <= target:
            j += 1
        # extend backwards if short
        while i > 0 and utts[j - 1][1] - utts[i - 1][0] <= target and utts[j - 1][1] - utts[i][0] < lo_s:
            i -= 1
        a = max(0, int((utts[i][0] - 0.12) * 100))
        if i > 0:
            a = max(a, int(utts[i - 1][1] * 100) + 2)
        b = int((utts[j - 1][1] + 0.12) * 100)
        if j < len(utts):
            b = min(b, int(utts[j][0] * 100) - 2)
        b = min(b, s["frames"])
        n = ((b - a) // 8) * 8
        if n < 16:
            n = 16
        m = np.asarray(self.mel[:, s["offset"] + a: s["offset"] + a + n], dtype=np.float32)
        if m.shape[1] < n:
            m = np.pad(m, ((0, 0), (0, n - m.shape[1])), mode="edge")
        m = (m - self.mean) / self.std
        text = " ".join(u[2] for u in utts[i:j])
        return m, text


def char_ids(text):
    return [CHARS.index(c) + 1 for c in text if c in CHARS]


def pad_mels(mels):
    T = max(m.shape[1] for m in mels)
    out = np.zeros((len(mels), mels[0].shape[0], T), dtype=np.float32)
    for i, m in enumerate(mels):
        out[i, :, :m.shape[1]] = m
    return torch.from_numpy(out).to(DEV), torch.tensor([m.shape[1] for m in mels]).to(DEV)


def finite_step(model_params, loss, opt, clip=1.0):
    if not torch.isfinite(loss):
        opt.zero_grad(set_to_none=True)
        return False, float("nan")
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model_params, clip)
    if not torch.isfinite(gn):
        opt.zero_grad(set_to_none=True)
        return False, float(gn)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return True, float(gn)


def lr_at(step, base, warm, p, floor=0.1):
    """linear warmup over `warm` steps, then cosine to floor*base over progress
    p in [0, 1] (p = max(step fraction, wall-clock fraction) of the stage)."""
    if step < warm:
        return base * (step + 1) / warm
    p = min(1.0, max(0.0, p))
    return base * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


# ----------------------------------------------------------------------------- validation


def load_val(repo, cfg, names=("espeak-heldout",), limit=2):
    out = []
    for n in names:
        d = os.path.join(repo, "public", "test-sets", n)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d))[::-1]:
            if f.endswith(".wav") and len([o for o in out if o[0] == n]) < limit:
                x, sr = read_wav(os.path.join(d, f))
                ref = open(os.path.join(d, f[:-4] + ".txt")).read().strip()
                out.append((n, f, x, ref))
    return out


@torch.no_grad()
def ctc_val(enc, val, cfg, sp):
    enc.eval()
    res = []
    for (n, f, x, ref) in val:
        mel = mel_for(x, cfg)
        W = cfg["audio"]["encoder_window_frames"]
        hyp_c, hyp_b = [], []
        for s in range(0, mel.shape[1], W):
            m = torch.from_numpy(np.ascontiguousarray(mel[:, s:s + W]))[None].to(DEV)
            emb, cl, bl = enc(m, return_all=True)
            p = cl[0].argmax(-1).tolist()
            prev = 0
            for t in p:
                if t != prev and t != 0:
                    hyp_c.append(CHARS[t - 1])
                prev = t
            p = bl[0].argmax(-1).tolist()
            prev = -1
            V = cfg["vocab_size"]
            for t in p:
                if t != prev and t != V:
                    hyp_b.append(t)
                prev = t
        res.append((wer(ref, "".join(hyp_c))[0], wer(ref, sp.decode(hyp_b))[0]))
    enc.train()
    return np.mean([r[0] for r in res]), np.mean([r[1] for r in res])


@torch.no_grad()
def dec_val(enc, dec, val, cfg, pieces, max_clips=1):
    enc.eval()
    dec.eval()
    ws = []
    hyp = ""
    for (n, f, x, ref) in val[:max_clips]:
        mel = mel_for(x, cfg)
        audio = encode_windows(enc, mel, cfg)
        toks, _ = greedy(dec, audio, cfg)
        hyp = detok(toks, pieces)
        ws.append(wer(ref, hyp)[0])
    enc.train()
    dec.train()
    return float(np.mean(ws)), hyp


# ----------------------------------------------------------------------------- stages


def stage_tokenizer(work, cfg, tiny):
    import sentencepiece as spm
    tokdir = os.path.join(work, "tok")
    os.makedirs(tokdir, exist_ok=True)
    model = os.path.join(tokdir, "sp.model")
    if not os.path.exists(model):
        idx = json.load(open(os.path.join(work, "data", "train_index.json")))
        txt = os.path.join(tokdir, "text.txt")
        with open(txt, "w") as f:
            for s in idx:
                for u in s["utts"]:
                    f.write(u[2] + "\n")
        spm.SentencePieceTrainer.train(
            input=txt, model_prefix=os.path.join(tokdir, "sp"), vocab_size=cfg["vocab_size"], model_type="bpe",
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, character_coverage=1.0, normalization_rule_name="identity",
            user_defined_symbols=[], hard_vocab_limit=not tiny, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=model)
    cfg["vocab_size"] = sp.get_piece_size()
    cfg["instruction"] = sp.encode(INSTRUCTION)
    return sp


def save_ckpt(path, **kw):
    tmp = path + ".tmp"
    torch.save(kw, tmp)
    os.replace(tmp, path)


def stage_ctc(a, cfg, sp, data, val):
    ck = os.path.join(a.work, "ctc.pt")
    enc = Encoder(hidden=cfg["hidden_size"], vocab=cfg["vocab_size"], **ENC_KW).to(DEV)
    opt = torch.optim.AdamW(enc.parameters(), lr=a.ctc_lr, betas=(0.9, 0.98), weight_decay=0.01)
    step, elapsed = 0, 0.0
    if os.path.exists(ck):
        st = torch.load(ck, map_location=DEV)
        enc.load_state_dict(st["enc"])
        opt.load_state_dict(st["opt"])
        step, elapsed = st["step"], st["elapsed"]
        if st.get("done"):
            log(a.work, f"ctc: done at step {step} ({elapsed / 60:.1f} min)")
            return enc
    rng = np.random.default_rng(1000 + step)
    t0 = time.time() - elapsed
    ema = None
    V = cfg["vocab_size"]
    last_ck = time.time()
    while step < a.ctc_steps and (time.time() - t0) < a.ctc_minutes * 60:
        # batch: ~a.ctc_batch_s seconds of audio, clips 2-30 s (longer later)
        prog = max(step / a.ctc_steps, (time.time() - t0) / (a.ctc_minutes * 60))
        hi = 8 + 14 * min(1.0, prog / 0.6)
        mels, texts = [], []
        tot = 0.0
        while tot < a.ctc_batch_s:
            m, t = data.sample(rng, 2.0, hi)
            if not t:
                continue
            mels.append(m)
            texts.append(t)
            tot += m.shape[1] / 100
        mel, lens = pad_mels(mels)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.ctc_lr, a.warmup, prog)
        emb, cl, bl = enc(mel, lens, return_all=True)
        lp = F.log_softmax(cl, -1).transpose(0, 1)
        ct = [torch.tensor(char_ids(t)) for t in texts]
        loss_c = F.ctc_loss(lp, torch.cat(ct).to(DEV), lens // 4, torch.tensor([len(c) for c in ct]).to(DEV), blank=0,
                            reduction="mean", zero_infinity=True)
        lpb = F.log_softmax(bl, -1).transpose(0, 1)
        bt = [torch.tensor(sp.encode(t)) for t in texts]
        loss_b = F.ctc_loss(lpb, torch.cat(bt).to(DEV), lens // 8, torch.tensor([len(c) for c in bt]).to(DEV), blank=V,
                            reduction="mean", zero_infinity=True)
        loss = loss_c + 0.5 * loss_b
        ok, gn = finite_step(list(enc.parameters()), loss, opt)
        step += 1
        if ok:
            ema = float(loss) if ema is None else 0.95 * ema + 0.05 * float(loss)
        if step % a.log_every == 0 or step == 1:
            log(a.work, f"ctc step {step} loss {float(loss):.3f} (char {float(loss_c):.3f} bpe {float(loss_b):.3f}) "
                        f"ema {ema if ema is None else round(ema, 3)} gn {gn:.2f} ok {ok} "
                        f"batch {len(mels)}x{mel.shape[2]} t {(time.time() - t0) / 60:.1f}m")
        if step % a.val_every == 0 and val:
            cw, bw = ctc_val(enc, val, cfg, sp)
            log(a.work, f"ctc val step {step}: greedy CTC WER char {cw:.3f} subword {bw:.3f}")
        if time.time() - last_ck > a.ckpt_minutes * 60:
            save_ckpt(ck, enc=enc.state_dict(), opt=opt.state_dict(), step=step, elapsed=time.time() - t0)
            last_ck = time.time()
    save_ckpt(ck, enc=enc.state_dict(), opt=opt.state_dict(), step=step, elapsed=time.time() - t0, done=True)
    log(a.work, f"ctc: finished step {step} in {(time.time() - t0) / 60:.1f} min, loss ema {ema}")
    return enc


def parse_phases(s):
    # "steps:lo-hi:batch_s,..." e.g. "400:2-12:40,200:10-40:80"
    out = []
    for p in s.split(","):
        st, rng_, b = p.split(":")
        lo, hi = rng_.split("-")
        out.append((int(st), float(lo), float(hi), float(b)))
    return out


def dec_batch(enc, dec, cfg, sp, data, rng, lo, hi, batch_s, train_top=True, train_base=False):
    W = cfg["audio"]["encoder_window_frames"]
    mels, texts = [], []
    tot = 0.0
    while tot < batch_s:
        m, t = data.sample(rng, lo, hi)
        if not t:
            continue
        mels.append(m)
        texts.append(t)
        tot += m.shape[1] / 100
    # windows exactly as the runtime cuts them
    wins, owner = [], []
    for i, m in enumerate(mels):
        for s in range(0, m.shape[1], W):
            wins.append(m[:, s:s + W])
            owner.append(i)
    wm, wl = pad_mels(wins)
    if train_base:
        x, char_logits, keep4 = enc.forward_base(wm, wl)
    else:
        with torch.no_grad():
            x, char_logits, keep4 = enc.forward_base(wm, wl)
    emb_w = enc.forward_top(x, keep4) if train_top else enc.forward_top(x, keep4).detach()
    # aux subword CTC on window embeddings
    V = cfg["vocab_size"]
    per = [[] for _ in mels]
    for wi, i in enumerate(owner):
        per[i].append(emb_w[wi, : int(wl[wi]) // 8])
    audio = [torch.cat(p, 0) for p in per]
    bos, eos = cfg["tokens"]["bos"], cfg["tokens"]["eos"]
    instr = cfg["instruction"]
    seqs, tgts = [], []
    for i, t in enumerate(texts):
        ids = sp.encode(t)
        N = audio[i].shape[0]
        pre = torch.tensor([bos], device=DEV)
        post = torch.tensor(instr + ids + [eos], device=DEV)
        h = torch.cat([dec.embed_tokens(pre), audio[i], dec.embed_tokens(post)], 0)
        tg = torch.full((h.shape[0],), -100, dtype=torch.long, device=DEV)
        # position p predicts token p+1; targets = transcript tokens + eos
        start = 1 + N + len(instr)
        tg[start - 1: start - 1 + len(ids) + 1] = torch.tensor(ids + [eos], device=DEV)
        seqs.append(h)
        tgts.append(tg)
    L = max(s.shape[0] for s in seqs)
    D = seqs[0].shape[1]
    hb = torch.zeros(len(seqs), L, D, device=DEV)
    tb = torch.full((len(seqs), L), -100, dtype=torch.long, device=DEV)
    for i, (h, tg) in enumerate(zip(seqs, tgts)):
        hb[i, :h.shape[0]] = h
        tb[i, :tg.shape[0]] = tg
    logits = dec(hb)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tb.reshape(-1), ignore_index=-100)
    aux = torch.zeros((), device=DEV)
    if train_top:
        lpb = F.log_softmax(enc.ctc_bpe(emb_w), -1).transpose(0, 1)
        # per-window targets unknown -> aux CTC only on single-window clips
        sel = [wi for wi, i in enumerate(owner) if owner.count(i) == 1]
        if sel:
            bt = [torch.tensor(sp.encode(texts[owner[wi]])) for wi in sel]
            aux = F.ctc_loss(lpb[:, sel], torch.cat(bt).to(DEV), wl[sel] // 8, torch.tensor([len(b) for b in bt]).to(DEV),
                             blank=V,
                             reduction="mean", zero_infinity=True)
            if train_base:
                lpc = F.log_softmax(char_logits, -1).transpose(0, 1)
                ct = [torch.tensor(char_ids(texts[owner[wi]])) for wi in sel]
                aux = aux + F.ctc_loss(lpc[:, sel], torch.cat(ct).to(DEV), wl[sel] // 4,
                                       torch.tensor([len(c) for c in ct]).to(DEV), blank=0, reduction="mean",
                                       zero_infinity=True)
    ntok = int((tb != -100).sum())
    return loss, aux, ntok, L, len(seqs)


def stage_dec(a, cfg, sp, data, val, enc):
    ck = os.path.join(a.work, "dec.pt")
    dec = Decoder(cfg).to(DEV)
    top_params = list(enc.stack.parameters()) + list(enc.top.parameters()) + list(enc.top_norm.parameters()) + \
        list(enc.out.parameters()) + list(enc.ctc_bpe.parameters())
    if a.enc_joint:  # whole encoder trained jointly (char + subword CTC kept as auxiliary losses)
        top_params = list(enc.parameters())
    opt = torch.optim.AdamW([{"params": list(dec.parameters()), "lr": a.dec_lr, "base": a.dec_lr},
                             {"params": top_params, "lr": a.dec_lr * a.enc_lr_scale, "base": a.dec_lr * a.enc_lr_scale}],
                            betas=(0.9, 0.98), weight_decay=0.01)
    step, elapsed = 0, 0.0
    phases = parse_phases(a.phases)
    total = sum(p[0] for p in phases)
    pieces = [sp.id_to_piece(i) for i in range(cfg["vocab_size"])]
    if os.path.exists(ck):
        st = torch.load(ck, map_location=DEV)
        dec.load_state_dict(st["dec"])
        enc.load_state_dict(st["enc"])
        opt.load_state_dict(st["opt"])
        step, elapsed = st["step"], st["elapsed"]
        if st.get("done"):
            log(a.work, f"dec: done at step {step}")
            return dec
    t0 = time.time() - elapsed
    rng = np.random.default_rng(2000 + step)
    ema = None
    last_ck = time.time()
    last_export = time.time()
    tok_count, tok_t = 0, time.time()
    params = list(dec.parameters()) + top_params
    while step < total and (time.time() - t0) < a.dec_minutes * 60:
        prog = max(step / total, (time.time() - t0) / (a.dec_minutes * 60))
        acc = 0
        for (n, lo, hi, bs) in phases:
            acc += n / total
            if prog < acc:
                break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, g["base"], a.warmup, prog)
        loss, aux, ntok, L, B = dec_batch(enc, dec, cfg, sp, data, rng, lo, hi, bs, train_base=a.enc_joint)
        ok, gn = finite_step(params, loss + 0.3 * aux, opt)
        step += 1
        tok_count += B * L
        if ok:
            ema = float(loss) if ema is None else 0.95 * ema + 0.05 * float(loss)
        if step % a.log_every == 0 or step == 1:
            log(a.work, f"dec step {step} phase {lo:.0f}-{hi:.0f}s loss {float(loss):.3f} aux {float(aux):.3f} "
                        f"ema {ema if ema is None else round(ema, 3)} gn {gn:.2f} ok {ok} B {B} L {L} "
                        f"pos/s {tok_count / (time.time() - tok_t):.0f} t {(time.time() - t0) / 60:.1f}m")
            tok_count, tok_t = 0, time.time()
        if step % a.val_every == 0 and val:
            w, hyp = dec_val(enc, dec, val, cfg, pieces)
            log(a.work, f"dec val step {step}: greedy WER {w:.3f} | {hyp[:160]}")
        if time.time() - last_ck > a.ckpt_minutes * 60:
            save_ckpt(ck, dec=dec.state_dict(), enc=enc.state_dict(), opt=opt.state_dict(), step=step,
                      elapsed=time.time() - t0)
            last_ck = time.time()
            if a.export_every and time.time() - last_export > a.export_every * 60:
                do_export(a, cfg, sp, enc, dec, quick=True)
                last_export = time.time()
    save_ckpt(ck, dec=dec.state_dict(), enc=enc.state_dict(), opt=opt.state_dict(), step=step,
              elapsed=time.time() - t0, done=True)
    log(a.work, f"dec: finished step {step} in {(time.time() - t0) / 60:.1f} min, loss ema {ema}")
    return dec


def do_export(a, cfg, sp, enc, dec, quick=False):
    import copy
    from export import export_all
    t = time.time()
    # export and fixtures always from float32 CPU copies
    export_all(a.out, cfg, sp, copy.deepcopy(enc).cpu().float(), copy.deepcopy(dec).cpu().float(), repo=a.repo,
               work=a.work, quick=quick)
    log(a.work, f"exported to {a.out} ({time.time() - t:.0f}s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--repo", default=os.path.dirname(HERE))
    ap.add_argument("--out", default=None)
    ap.add_argument("--tiny", action="store_true", help="smoke-test sizes")
    ap.add_argument("--ctc-steps", type=int, default=1000)
    ap.add_argument("--ctc-minutes", type=float, default=32)
    ap.add_argument("--ctc-lr", type=float, default=1.5e-3)
    ap.add_argument("--ctc-batch-s", type=float, default=60)
    ap.add_argument("--dec-lr", type=float, default=1e-3)
    ap.add_argument("--phases", default="400:2-10:30,200:6-30:60,100:20-70:90,30:50-130:130",
                    help="steps:min_s-max_s:batch_audio_s,...; a phase ends at its share of the steps or of "
                         "--dec-minutes, whichever comes first")
    ap.add_argument("--dec-minutes", type=float, default=55)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--val-every", type=int, default=100)
    ap.add_argument("--ckpt-minutes", type=float, default=3)
    ap.add_argument("--export-every", type=float, default=20)
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--stop-after", default="", help="ctc|dec: stop after this stage")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("WNW_THREADS", "2")),
                    help="torch intra-op threads (use 1 when the cores are shared: OpenMP barriers stall)")
    ap.add_argument("--device", default="auto", help="auto|cpu|cuda")
    ap.add_argument("--enc-joint", type=int, default=1, help="1: train the whole encoder in the decoder stage")
    ap.add_argument("--enc-lr-scale", type=float, default=0.5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    global DEV
    DEV = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                       ("cpu" if a.device == "auto" else a.device))
    torch.manual_seed(0)
    a.out = a.out or os.path.join(a.repo, "public", "models", "wnw-ref")
    os.makedirs(a.work, exist_ok=True)
    T0 = time.time()
    if not os.path.exists(os.path.join(a.work, "data", "train_index.json")):
        cmd = [sys.executable, os.path.join(HERE, "gen_data.py"), "--work", a.work, "--repo", a.repo]
        if a.tiny:
            cmd.append("--tiny")
        subprocess.run(cmd, check=True)
    cfg = default_cfg()
    stats = json.load(open(os.path.join(a.work, "data", "mel_stats.json")))
    cfg["audio"]["mel_mean"] = round(stats["mel_mean"], 6)
    cfg["audio"]["mel_std"] = round(stats["mel_std"], 6)
    if a.tiny:
        cfg["vocab_size"] = 128
    sp = stage_tokenizer(a.work, cfg, a.tiny)
    log(a.work, f"tokenizer vocab {cfg['vocab_size']} instruction {cfg['instruction']}; data {stats}")
    data = Data(a.work, cfg, sp)
    val = load_val(a.repo, cfg)
    enc = stage_ctc(a, cfg, sp, data, val)
    if a.stop_after == "ctc":
        return
    dec = stage_dec(a, cfg, sp, data, val, enc)
    do_export(a, cfg, sp, enc, dec)
    if a.stop_after == "dec" or a.skip_eval:
        return
    subprocess.run([sys.executable, os.path.join(HERE, "evaluate.py"), "--model", a.out, "--repo", a.repo,
                    "--out", os.path.join(a.out, "eval.json")], check=True)
    log(a.work, f"pipeline done in {(time.time() - T0) / 60:.1f} min (this invocation)")


if __name__ == "__main__":
    main()
