"""Stage 4: the decoder-only LM on [bos][audio][instruction][text][eos].

The encoder is frozen after its CTC stage, so its 12.5 Hz embeddings of every
training session are computed once (windows of `encoder_window_frames` from
the session start, as the runtime cuts a recording) and cached on disk; the
decoder then trains on spans of that cache at a fraction of the cost of
re-running the encoder each step.

The decoder has to find, at every transcript token, the audio it is reading:
from the LM loss alone that alignment emerges late (the CPU runs before this one
stopped at a text-only LM's loss). A few query heads (--guide-heads) therefore
get an auxiliary loss, -log of their softmax mass on the frames of the word
being transcribed (the synthesiser's word spans), the guided-attention idea of
TTS aligners. The other heads are left free, so head triage still has to find
which heads point at the audio.

Long recordings put the first transcript tokens thousands of positions after
the audio they describe, further than any training clip. Half of the batches
therefore shift the position ids of everything after the audio by a random
gap (RoPE only sees differences of position ids), so the decoder meets the
text-to-audio distances of a 10-minute recording while training on clips of
at most a few minutes. Only the gap moves: neighbouring positions stay one
apart, so the local patterns (the previous-token heads that copying rests on)
are the ones inference sees (`--spread-mode stride`, the older augmentation,
spreads every position instead). A gap only helps if some dimensions of each
head can compare content across it: at RoPE theta 1e4 and head dim 32 even the
slowest pair turns 1.8 rad over 10,000 positions, so a content match cannot
survive the distance: in two runs on label embeddings (below) that differed only
in theta, the guided heads' -log mass at steps 200-300 was 3.4-3.6 on gap batches
against 1.2-1.4 on plain ones at theta 1e4, and 1.3-1.9 against 0.9-1.1 at theta
1e6 (four pairs turn less than 0.5 rad over 10,000 positions), the default now.

Reading the audio at all is the other hurdle: on the real encoder embeddings
the CPU runs' LM loss sat at a text-only level for most of their budgets. The
label stage (caches.LabelCache) first trains the decoder on clean-ish label
embeddings, where the reading circuits appear within ~20 minutes on two cores
(LM loss 4.1 -> 1.1 nats/token between minutes 12 and 31), and the decoder
stage starts from it.
"""
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from caches import EmbeddingCache, LabelCache
from common import wer
from infer import detok, encode_windows, greedy, mel_for
from model import Decoder
from train_common import (budget_reached, dev, finite_step, kept_copy, log, lr_at, piece_spans, resume_from_kept,
                          save_ckpt, save_kept)


def parse_phases(s):
    # "steps:lo-hi:batch_s,..." e.g. "400:2-12:40,200:10-40:80"
    out = []
    for p in s.split(","):
        st, rng_, b = p.split(":")
        lo, hi = rng_.split("-")
        out.append((int(st), float(lo), float(hi), float(b)))
    return out


@torch.no_grad()
def init_embeddings_from_ctc(dec, enc, cache, vocab, head="ctc"):
    """Token t's embedding starts as the encoder's subword head's row for t (the
    CTC head, or with head="frame" the framewise one): the
    direction in which the frozen encoder's audio embeddings point where they
    carry t. Text and audio then share one space from the first step, so
    matching a transcript token to its place in the audio (what the decoder
    must learn before anything else) starts as a dot product instead of a
    learned map. Rows are scaled to the audio embeddings' rms, so neither
    stream dominates the residual."""
    w = (enc.frame_bpe if head == "frame" else enc.ctc_bpe).weight[:vocab].detach().float()
    rms = float(np.sqrt(np.mean(np.square(np.asarray(cache.emb[:4096], dtype=np.float32)))))
    dec.embed_tokens.weight.copy_(w / w.pow(2).mean(1, keepdim=True).sqrt() * rms)


@torch.no_grad()
def init_head_from_embeddings(dec, logit=5.0):
    """lm_head row t starts along token t's embedding (untied afterwards), scaled so
    that a final hidden state along it scores `logit`: a head that copies an audio
    embedding into the residual then already names the piece it copied, so the
    attention path to the output does not have to be found from random weights."""
    e = dec.embed_tokens.weight.float()
    D = e.shape[1]
    dec.lm_head.weight.copy_(e / e.pow(2).mean(1, keepdim=True).sqrt() * (logit / D))


def parse_guide(s):
    """"layer:head,..." -> {layer: [query heads]}"""
    out = {}
    for p in filter(None, s.split(",")):
        l, h = p.split(":")
        out.setdefault(int(l), []).append(int(h))
    return out


def guide_rows(sp, words, ids, N, start, token_rate=12.5, span="word"):
    """[(row, lo, hi)]: the row that predicts transcript piece k and the sequence
    positions of its audio frames (span="word": its word's frames; "piece": the
    share of the word that piece_spans gives the piece), one frame of slack each
    side; empty where the clip has no word spans or they do not give `ids`."""
    if words is None:
        return []
    ps = piece_spans(sp, words)
    if [p[0] for p in ps] != list(ids):
        return []
    rows = []
    for k, (_, p0, p1, w0, w1) in enumerate(ps):
        if span == "piece":
            w0, w1 = p0, p1
        lo = max(0, int(np.floor(w0 * token_rate)) - 1)
        hi = min(N, int(np.ceil(w1 * token_rate)) + 1)
        if hi > lo:
            rows.append((start - 1 + k, 1 + lo, 1 + hi))  # audio frame j sits at position 1 + j
    return rows


def guide_loss(dec, guides, L):
    """mean -log(softmax mass of the guided heads on the target word's frames)."""
    B = len(guides)
    mask = torch.zeros(B, L, L, device=dev())
    rowm = torch.zeros(B, L, device=dev())
    for b, rows in enumerate(guides):
        for (r, lo, hi) in rows:
            mask[b, r, lo:hi] = 1.0
            rowm[b, r] = 1.0
    if float(rowm.sum()) == 0:
        return torch.zeros((), device=dev())
    tot, n = 0.0, 0
    for layer in dec.layers:
        if layer.guide_heads and layer.guided_att is not None:
            mass = (layer.guided_att * mask[:, None]).sum(-1)  # [B, heads, L]
            tot = tot + (-torch.log(mass + 1e-6) * rowm[:, None]).sum() / (rowm.sum() * mass.shape[1])
            n += 1
            layer.guided_att = None
    return tot / max(1, n)


def dec_batch(dec, cfg, sp, data, cache, rng, lo, hi, batch_s, spread, guide_w=0.0, spread_mode="gap",
              guide_span="word"):
    bos, eos = cfg["tokens"]["bos"], cfg["tokens"]["eos"]
    instr = cfg["instruction"]
    seqs, tgts, guides, starts = [], [], [], []
    tot = 0.0
    while tot < batch_s:
        si, a, n, text = data.span(rng, lo, hi, getattr(cache, "weights", None))
        if not text:
            continue
        tot += n / 100
        audio = cache.span(si, a, n)
        ids = sp.encode(text)
        N = audio.shape[0]
        pre = torch.tensor([bos], device=dev())
        post = torch.tensor(instr + ids + [eos], device=dev())
        h = torch.cat([dec.embed_tokens(pre), audio, dec.embed_tokens(post)], 0)
        tg = torch.full((h.shape[0],), -100, dtype=torch.long, device=dev())
        # position p predicts token p+1; targets = transcript tokens + eos
        start = 1 + N + len(instr)
        tg[start - 1: start - 1 + len(ids) + 1] = torch.tensor(ids + [eos], device=dev())
        seqs.append(h)
        tgts.append(tg)
        starts.append(1 + N)
        guides.append(guide_rows(sp, data.span_words(si, a, n, text), ids, N, start,
                                 cfg["audio"]["tokens_per_second"], guide_span) if guide_w > 0 else [])
    L = max(s.shape[0] for s in seqs)
    hb = torch.zeros(len(seqs), L, seqs[0].shape[1], device=dev())
    tb = torch.full((len(seqs), L), -100, dtype=torch.long, device=dev())
    for i, (h, tg) in enumerate(zip(seqs, tgts)):
        hb[i, :h.shape[0]] = h
        tb[i, :tg.shape[0]] = tg
    positions = torch.arange(L, device=dev(), dtype=torch.float32)[None].repeat(len(seqs), 1)
    gap = 0.0
    if spread_mode == "stride" and spread > 0 and rng.random() < 0.5:
        # the first shipped decoder run's augmentation (kept to reproduce it): every position
        # spread by a stride, capped at 4 so RoPE's fast dimensions keep something local
        positions *= float(rng.uniform(1.0, min(4.0, max(1.0, spread / L))))
        gap = float(positions[0, 1])  # logged as the stride
    elif spread_mode == "gap" and spread > L and rng.random() < 0.5:
        gap = float(rng.uniform(0, spread - L))
        for b, s0 in enumerate(starts):
            positions[b, s0:] += gap
    logits = dec(hb, positions=positions)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tb.reshape(-1), ignore_index=-100)
    g = guide_loss(dec, guides, L) if guide_w > 0 else torch.zeros((), device=dev())
    return loss + guide_w * g, float(loss), float(g), L, len(seqs), gap


@torch.no_grad()
def dec_val(enc, dec, val, cfg, pieces, max_clips=1):
    enc.eval()
    dec.eval()
    ws = []
    hyp = ""
    for (n, f, x, ref) in val[:max_clips]:
        audio = encode_windows(enc, mel_for(x, cfg), cfg)
        toks, _ = greedy(dec, audio, cfg)
        hyp = detok(toks, pieces)
        ws.append(wer(ref, hyp)[0])
    dec.train()
    return float(np.mean(ws)), hyp


def stage_dec(a, cfg, sp, data, val, enc, enc_tag, export):
    """The label stage (--label-minutes > 0: the decoder first learns to read label
    embeddings, see LabelCache), then the decoder stage proper on the frozen encoder's
    cached embeddings, warm-started from the label stage. --label-init starts the label
    stage itself from a decoder that already reads (reading.py's checkpoint)."""
    enc.requires_grad_(False)
    cache = EmbeddingCache(a.work, cfg, data, enc, enc_tag)
    init = a.dec_init
    if a.label_minutes > 0 and not init:
        labels = LabelCache(a.work, cfg, sp, data, enc, cache, enc_tag, a.label_noise, a.label_corrupt, a.label_source)
        init = os.path.join(a.work, "dec_label.pt")
        run_stage(a, "label", init, cfg, sp, data, [], enc, labels, enc_tag + " labels", a.label_phases,
                  a.label_minutes, a.label_lr, a.label_warmup, None, getattr(a, "label_init", "") or None)
    return run_stage(a, "dec", os.path.join(a.work, "dec.pt"), cfg, sp, data, val, enc, cache, enc_tag, a.phases,
                     a.dec_minutes, a.dec_lr, a.dec_warmup, export, init)


def run_stage(a, name, ck, cfg, sp, data, val, enc, cache, tag, phases_s, minutes, lr, warmup, export, init):
    """One resumable decoder training run on `cache` (checkpoint `ck` tied to `tag`): a fresh
    decoder, or `init`'s weights when given, with a fresh optimizer and schedule. With
    `a.keep` set, every checkpoint is also written weights-only in float16 to a.keep/, and a
    run whose work folder lacks `ck` resumes from that copy (step, clock and loss EMA kept;
    AdamW's moments start afresh)."""
    dec = Decoder(cfg).to(dev())
    opt = torch.optim.AdamW(dec.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    step, elapsed, ema = 0, 0.0, None
    phases = parse_phases(phases_s)
    total = sum(p[0] for p in phases)
    pieces = [sp.id_to_piece(i) for i in range(cfg["vocab_size"])]
    kept = kept_copy(a, ck)
    resume_from_kept(a.work, name, ck, kept)
    if not os.path.exists(ck) and init:
        dec.load_state_dict(torch.load(init, map_location=dev())["dec"])
        log(a.work, f"{name}: warm start from {init}")
    if os.path.exists(ck):
        st = torch.load(ck, map_location=dev())
        if st.get("enc_tag") == tag:
            dec.load_state_dict(st["dec"])
            if "opt" in st:  # weights-only checkpoints have none
                opt.load_state_dict(st["opt"])
            step, elapsed, ema = st["step"], st["elapsed"], st.get("ema")
            if budget_reached(st, total, minutes):
                log(a.work, f"{name}: done at step {step}")
                return dec
        else:
            log(a.work, f"{name}: checkpoint belongs to another encoder; starting afresh")
    if step == 0 and not init and a.dec_embed_init in ("ctc", "frame"):
        init_embeddings_from_ctc(dec, enc, cache, cfg["vocab_size"], a.dec_embed_init)
        log(a.work, f"{name}: token embeddings initialised from the encoder's subword {a.dec_embed_init} head")
        if a.dec_head_init == "embed":
            init_head_from_embeddings(dec)
            log(a.work, f"{name}: lm_head initialised from the token embeddings")
    for l, heads in parse_guide(a.guide_heads).items():
        dec.layers[l].guide_heads = heads
    t0 = time.time() - elapsed
    rng = np.random.default_rng(2000 + step)
    last_ck = last_export = tok_t = time.time()
    tok_count = 0

    def save(done=False):
        st = dict(step=step, elapsed=time.time() - t0, enc_tag=tag, ema=ema, done=done)
        save_ckpt(ck, dec=dec.state_dict(), opt=opt.state_dict(), **st)
        if kept:
            save_kept(kept, "dec", dec, **st)

    while step < total and (time.time() - t0) < minutes * 60:
        prog = max(step / total, (time.time() - t0) / (minutes * 60))
        acc = 0
        for (n, lo, hi, bs) in phases:
            acc += n / total
            if prog < acc:
                break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, lr, warmup, prog)
        loss, lce, lg, L, B, gap = dec_batch(dec, cfg, sp, data, cache, rng, lo, hi, bs, a.spread_positions,
                                             a.guide_weight, a.spread_mode, a.guide_span)
        ok, gn = finite_step(list(dec.parameters()), loss, opt)
        step += 1
        tok_count += B * L
        if ok:
            ema = lce if ema is None else 0.95 * ema + 0.05 * lce  # the LM loss, nats/token
        if step % a.log_every == 0 or step == 1:
            log(a.work, f"{name} step {step} phase {lo:.0f}-{hi:.0f}s loss {float(loss):.3f} (lm {lce:.3f} guide "
                        f"{lg:.3f}) ema {ema if ema is None else round(ema, 3)} gn {gn:.2f} ok {ok} B {B} L {L} "
                        f"{a.spread_mode} {gap:.2f} pos/s {tok_count / (time.time() - tok_t):.0f} "
                        f"t {(time.time() - t0) / 60:.1f}m")
            tok_count, tok_t = 0, time.time()
        if step % a.val_every == 0 and val:
            w, hyp = dec_val(enc, dec, val, cfg, pieces)
            log(a.work, f"{name} val step {step}: greedy WER {w:.3f} | {hyp[:160]}")
        if time.time() - last_ck > a.ckpt_minutes * 60:
            save()
            last_ck = time.time()
            if export and a.export_every and time.time() - last_export > a.export_every * 60:
                export(enc, dec, quick=True)
                last_export = time.time()
    save(done=True)
    log(a.work, f"{name}: finished step {step} in {(time.time() - t0) / 60:.1f} min, loss ema {ema}")
    return dec
