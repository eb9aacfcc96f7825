"""Stage 3: encoder pretraining on augmented mels (see augment.py).

Losses: framewise cross-entropy on labels laid out from the synthesiser's word
spans (characters at 25 Hz, subword pieces at 12.5 Hz; see
train_common.frame_labels), plus char CTC at 25 Hz and subword CTC at 12.5 Hz
(weights --ctc-weight). CTC alone spends its first thousands of steps on a
blank plateau, more than these CPUs can give; the framewise targets carry the
timing the synthesiser already knows, and CTC keeps the clips that have no
word spans (festival) in the mix. Framewise phonemes (--phoneme-weight), read
from the embeddings, come from espeak's phoneme events: exact times, and a
target that sounds alike in every voice, where English spelling does not."""
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

from augment import augment
from common import wer
from infer import mel_for
from model import CHARS, ENC_KW, Encoder
from train_common import (budget_reached, char_ids, dev, finite_step, frame_labels, kept_copy, log, lr_at, pad_mels,
                          phoneme_labels, resume_from_kept, save_ckpt, save_kept)


def collapse(ids, blank):
    """greedy CTC / framewise read-out: one token per run, blanks (silence) dropped."""
    out, prev = [], -1
    for t in ids:
        if t != prev and t != blank:
            out.append(t)
        prev = t
    return out


@torch.no_grad()
def ctc_val(enc, val, cfg, sp):
    """held-out greedy WER of the char CTC, subword CTC and framewise subword heads."""
    enc.eval()
    res = []
    V = cfg["vocab_size"]
    for (n, f, x, ref) in val:
        mel = mel_for(x, cfg)
        W = cfg["audio"]["encoder_window_frames"]
        hyp_c, hyp_b, hyp_f = [], [], []
        for s in range(0, mel.shape[1], W):
            m = torch.from_numpy(np.ascontiguousarray(mel[:, s:s + W]))[None].to(dev())
            emb, cl, bl, _, fl, _ = enc(m, return_all=True)
            hyp_c += [CHARS[t - 1] for t in collapse(cl[0].argmax(-1).tolist(), 0)]
            hyp_b += collapse(bl[0].argmax(-1).tolist(), V)
            hyp_f += collapse(fl[0].argmax(-1).tolist(), V)
        res.append((wer(ref, "".join(hyp_c))[0], wer(ref, sp.decode(hyp_b))[0], wer(ref, sp.decode(hyp_f))[0]))
    enc.train()
    return tuple(float(np.mean([r[k] for r in res])) for k in range(3))


def _clip(data, seed, hi, aug):
    r = np.random.default_rng(seed)
    while True:
        m, t, w, ph = data.sample(r, 2.0, hi)
        if t:
            return (augment(m, r) if aug else m), t, w, ph


def ctc_batch(data, rng, hi, batch_s, aug, mapper=map, per_round=1):
    """~batch_s seconds of (augmented mel, text) clips of 2..hi s. Each clip has
    its own seed from rng, so the batch is the same whichever threads build it
    (numpy releases the GIL in the array work: a GPU step is otherwise
    starved by this loop)."""
    mels, texts, words, phonemes = [], [], [], []
    tot = 0.0
    while tot < batch_s:
        seeds = rng.integers(0, 2 ** 62, size=per_round)
        for m, t, w, ph in mapper(lambda sd: _clip(data, int(sd), hi, aug), seeds):
            mels.append(m)
            texts.append(t)
            words.append(w)
            phonemes.append(ph)
            tot += m.shape[1] / 100
    return mels, texts, words, phonemes


def frame_targets(sp, words, phonemes, T, V, token_rate):
    """[B, T/4] char, [B, T/8] piece and [B, T/4] phoneme targets of a batch padded to
    T mel frames."""
    ch = np.full((len(words), T // 4), -100, dtype=np.int64)
    bp = np.full((len(words), T // 8), -100, dtype=np.int64)
    ph = np.full((len(words), T // 4), -100, dtype=np.int64)
    for i, (w, p) in enumerate(zip(words, phonemes)):
        ch[i], bp[i] = frame_labels(sp, w, T // 4, V, token_rate)
        ph[i] = phoneme_labels(p, T // 4, 2 * token_rate)
    return tuple(torch.from_numpy(t).to(dev()) for t in (ch, bp, ph))


def stage_ctc(a, cfg, sp, data, val):
    ck = os.path.join(a.work, "ctc.pt")
    enc = Encoder(hidden=cfg["hidden_size"], vocab=cfg["vocab_size"], char_per_frame=a.char_per_frame,
                  n_phonemes=len(data.phonemes) if a.phoneme_weight > 0 else 0, **ENC_KW).to(dev())
    opt = torch.optim.AdamW(enc.parameters(), lr=a.ctc_lr, betas=(0.9, 0.98), weight_decay=0.01)
    step, elapsed, ema = 0, 0.0, None
    if not os.path.exists(ck) and a.ctc_init:
        # warm start from another run's encoder: every tensor whose shape matches (a changed
        # char head, e.g. --char-per-frame 2, starts afresh); optimizer and schedule start anew
        src = torch.load(a.ctc_init, map_location=dev())["enc"]
        own = enc.state_dict()
        same = {k: v for k, v in src.items() if k in own and own[k].shape == v.shape}
        enc.load_state_dict(same, strict=False)
        log(a.work, f"ctc: warm start from {a.ctc_init}: {len(same)}/{len(own)} tensors "
                    f"(fresh: {sorted(set(own) - set(same))})")
    kept = kept_copy(a, ck)
    resume_from_kept(a.work, "ctc", ck, kept)
    if os.path.exists(ck):
        st = torch.load(ck, map_location=dev())
        if "label_rows" in st["enc"]:  # an adopted encoder that outputs piece labels
            enc.set_label_rows(st["enc"]["label_rows"])
        enc.load_state_dict(st["enc"])
        if "opt" in st:  # weights-only checkpoints (brought back from another machine) have none
            opt.load_state_dict(st["opt"])
        # the loss EMA travels with the checkpoint, so a resumed stage reports it
        step, elapsed, ema = st["step"], st["elapsed"], st.get("ema")
        if budget_reached(st, a.ctc_steps, a.ctc_minutes):
            log(a.work, f"ctc: done at step {step} ({elapsed / 60:.1f} min)")
            return enc
    rng = np.random.default_rng(1000 + step)
    t0 = time.time() - elapsed
    V = cfg["vocab_size"]

    def save(done=False):
        st = dict(step=step, elapsed=time.time() - t0, ema=ema, done=done)
        save_ckpt(ck, enc=enc.state_dict(), opt=opt.state_dict(), **st)
        if kept:
            save_kept(kept, "enc", enc, **st)

    last_ck = time.time()
    pool = ThreadPoolExecutor(a.loader_threads) if a.loader_threads > 1 else None
    mapper = pool.map if pool else map
    while step < a.ctc_steps and (time.time() - t0) < a.ctc_minutes * 60:
        # batch: ~a.ctc_batch_s seconds of audio, clips 2-30 s (longer later)
        prog = max(step / a.ctc_steps, (time.time() - t0) / (a.ctc_minutes * 60))
        hi = 8 + 14 * min(1.0, prog / 0.6)
        mels, texts, words, phonemes = ctc_batch(data, rng, hi, a.ctc_batch_s, a.augment, mapper,
                                                 max(1, a.loader_threads))
        mel, lens = pad_mels(mels)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.ctc_lr, a.warmup, prog)
        emb, cl, bl, fc, fb, fp = enc(mel, lens, return_all=True)
        # padding frames past a clip's end: silence beyond its own length is masked below
        tc, tb, tp = frame_targets(sp, words, phonemes, mel.shape[2], V, cfg["audio"]["tokens_per_second"])
        for i, ln in enumerate(lens.tolist()):
            tc[i, ln // 4:] = -100
            tb[i, ln // 8:] = -100
            tp[i, ln // 4:] = -100
        loss_fp = torch.zeros((), device=dev())
        if fp is not None and bool((tp >= 0).any()):
            loss_fp = F.cross_entropy(fp.reshape(-1, fp.shape[-1]), tp.reshape(-1), ignore_index=-100)
        loss_fc = F.cross_entropy(fc.reshape(-1, fc.shape[-1]), tc.reshape(-1), ignore_index=-100)
        loss_fb = F.cross_entropy(fb.reshape(-1, fb.shape[-1]), tb.reshape(-1), ignore_index=-100)
        if not bool((tc >= 0).any()):  # a batch without word spans (all festival)
            loss_fc = loss_fb = torch.zeros((), device=dev())
        lp = F.log_softmax(cl, -1).transpose(0, 1)
        ct = [torch.tensor(char_ids(t)) for t in texts]
        loss_c = F.ctc_loss(lp, torch.cat(ct).to(dev()), lens // 4 * enc.char_per_frame, torch.tensor([len(c) for c in ct]).to(dev()), blank=0,
                            reduction="mean", zero_infinity=True)
        lpb = F.log_softmax(bl, -1).transpose(0, 1)
        bt = [torch.tensor(sp.encode(t)) for t in texts]
        loss_b = F.ctc_loss(lpb, torch.cat(bt).to(dev()), lens // 8, torch.tensor([len(c) for c in bt]).to(dev()), blank=V,
                            reduction="mean", zero_infinity=True)
        loss = loss_fc + loss_fb + a.phoneme_weight * loss_fp + a.ctc_weight * (loss_c + 0.5 * loss_b)
        ok, gn = finite_step(list(enc.parameters()), loss, opt)
        step += 1
        if ok:
            ema = float(loss) if ema is None else 0.95 * ema + 0.05 * float(loss)
        if step % a.log_every == 0 or step == 1:
            log(a.work, f"ctc step {step} loss {float(loss):.3f} (frame char {float(loss_fc):.3f} piece "
                        f"{float(loss_fb):.3f} phoneme {float(loss_fp):.3f}; ctc char {float(loss_c):.3f} bpe {float(loss_b):.3f}) "
                        f"ema {ema if ema is None else round(ema, 3)} gn {gn:.2f} ok {ok} "
                        f"batch {len(mels)}x{mel.shape[2]} t {(time.time() - t0) / 60:.1f}m")
        if step % a.val_every == 0 and val:
            cw, bw, fw = ctc_val(enc, val, cfg, sp)
            log(a.work, f"ctc val step {step}: greedy CTC WER char {cw:.3f} subword {bw:.3f}; framewise pieces {fw:.3f}")
        if time.time() - last_ck > a.ckpt_minutes * 60:
            save()
            last_ck = time.time()
    if pool:
        pool.shutdown()
    save(done=True)
    log(a.work, f"ctc: finished step {step} in {(time.time() - t0) / 60:.1f} min, loss ema {ema}")
    return enc


