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
spreads every position instead). Neither is enough yet: in the runs recorded
in the model card the guided heads' -log mass was 0.7-1.7 on plain batches
but 2.3-3.6 on gap batches and 2.4-5.5 at strides >= 3, i.e. the alignment
leans on RoPE distances that a long recording does not keep.
"""
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from common import wer
from infer import detok, encode_windows, greedy, mel_for
from model import Decoder
from train_common import budget_reached, dev, finite_step, log, lr_at, piece_spans, save_ckpt


def parse_phases(s):
    # "steps:lo-hi:batch_s,..." e.g. "400:2-12:40,200:10-40:80"
    out = []
    for p in s.split(","):
        st, rng_, b = p.split(":")
        lo, hi = rng_.split("-")
        out.append((int(st), float(lo), float(hi), float(b)))
    return out


class EmbeddingCache:
    """float16 encoder embeddings of every training session, on disk."""

    def __init__(self, work, cfg, data, enc, tag):
        path = os.path.join(work, "data", "dec_cache.npy")
        meta = path + ".json"
        fpt = cfg["audio"]["frames_per_token"]
        self.offsets = np.cumsum([0] + [s["frames"] // fpt for s in data.sessions])
        if not (os.path.exists(meta) and json.load(open(meta)).get("tag") == tag):
            t0 = time.time()
            out = np.lib.format.open_memmap(path + ".tmp", mode="w+", dtype=np.float16,
                                            shape=(int(self.offsets[-1]), cfg["hidden_size"]))
            enc.eval()
            for si, s in enumerate(data.sessions):
                n = (s["frames"] // fpt) * fpt
                emb = encode_windows(enc, data.frames(si, 0, n), cfg)
                out[self.offsets[si]:self.offsets[si + 1]] = emb.cpu().numpy().astype(np.float16)
            out.flush()
            del out
            os.replace(path + ".tmp", path)
            json.dump({"tag": tag}, open(meta, "w"))
            log(work, f"dec: cached encoder embeddings of {len(data.sessions)} sessions "
                      f"({self.offsets[-1]} tokens) in {time.time() - t0:.0f}s")
        self.emb = np.load(path, mmap_mode="r")
        self.fpt = fpt

    def span(self, si, a, n):
        s0 = self.offsets[si] + a // self.fpt
        s1 = min(self.offsets[si + 1], s0 + n // self.fpt)
        return torch.from_numpy(np.asarray(self.emb[s0:s1], dtype=np.float32)).to(dev())


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


def parse_guide(s):
    """"layer:head,..." -> {layer: [query heads]}"""
    out = {}
    for p in filter(None, s.split(",")):
        l, h = p.split(":")
        out.setdefault(int(l), []).append(int(h))
    return out


def guide_rows(sp, words, ids, N, start, token_rate=12.5):
    """[(row, lo, hi)]: the row that predicts transcript piece k and the sequence
    positions of its word's audio frames (one frame of slack each side); empty
    where the clip has no word spans or they do not give `ids`."""
    if words is None:
        return []
    ps = piece_spans(sp, words)
    if [p[0] for p in ps] != list(ids):
        return []
    rows = []
    for k, (_, _, _, w0, w1) in enumerate(ps):
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


def dec_batch(dec, cfg, sp, data, cache, rng, lo, hi, batch_s, spread, guide_w=0.0, spread_mode="gap"):
    bos, eos = cfg["tokens"]["bos"], cfg["tokens"]["eos"]
    instr = cfg["instruction"]
    seqs, tgts, guides, starts = [], [], [], []
    tot = 0.0
    while tot < batch_s:
        si, a, n, text = data.span(rng, lo, hi)
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
                                 cfg["audio"]["tokens_per_second"]) if guide_w > 0 else [])
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
    ck = os.path.join(a.work, "dec.pt")
    dec = Decoder(cfg).to(dev())
    opt = torch.optim.AdamW(dec.parameters(), lr=a.dec_lr, betas=(0.9, 0.98), weight_decay=0.01)
    step, elapsed, ema = 0, 0.0, None
    phases = parse_phases(a.phases)
    total = sum(p[0] for p in phases)
    pieces = [sp.id_to_piece(i) for i in range(cfg["vocab_size"])]
    if not os.path.exists(ck) and a.dec_init:
        # warm start from another run's decoder (same encoder); optimizer and schedule start anew
        dec.load_state_dict(torch.load(a.dec_init, map_location=dev())["dec"])
        log(a.work, f"dec: warm start from {a.dec_init}")
    if os.path.exists(ck):
        st = torch.load(ck, map_location=dev())
        if st.get("enc_tag") == enc_tag:
            dec.load_state_dict(st["dec"])
            if "opt" in st:  # weights-only checkpoints have none
                opt.load_state_dict(st["opt"])
            step, elapsed, ema = st["step"], st["elapsed"], st.get("ema")
            if budget_reached(st, total, a.dec_minutes):
                log(a.work, f"dec: done at step {step}")
                return dec
        else:
            log(a.work, "dec: checkpoint belongs to another encoder; starting afresh")
    enc.requires_grad_(False)
    cache = EmbeddingCache(a.work, cfg, data, enc, enc_tag)
    if step == 0 and not a.dec_init and a.dec_embed_init in ("ctc", "frame"):
        init_embeddings_from_ctc(dec, enc, cache, cfg["vocab_size"], a.dec_embed_init)
        log(a.work, f"dec: token embeddings initialised from the encoder's subword {a.dec_embed_init} head")
    for l, heads in parse_guide(a.guide_heads).items():
        dec.layers[l].guide_heads = heads
    t0 = time.time() - elapsed
    rng = np.random.default_rng(2000 + step)
    last_ck = last_export = tok_t = time.time()
    tok_count = 0

    def save(done=False):
        save_ckpt(ck, dec=dec.state_dict(), opt=opt.state_dict(), step=step, elapsed=time.time() - t0,
                  enc_tag=enc_tag, ema=ema, done=done)

    while step < total and (time.time() - t0) < a.dec_minutes * 60:
        prog = max(step / total, (time.time() - t0) / (a.dec_minutes * 60))
        acc = 0
        for (n, lo, hi, bs) in phases:
            acc += n / total
            if prog < acc:
                break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.dec_lr, a.warmup, prog)
        loss, lce, lg, L, B, gap = dec_batch(dec, cfg, sp, data, cache, rng, lo, hi, bs, a.spread_positions,
                                                a.guide_weight, a.spread_mode)
        ok, gn = finite_step(list(dec.parameters()), loss, opt)
        step += 1
        tok_count += B * L
        if ok:
            ema = lce if ema is None else 0.95 * ema + 0.05 * lce  # the LM loss, nats/token
        if step % a.log_every == 0 or step == 1:
            log(a.work, f"dec step {step} phase {lo:.0f}-{hi:.0f}s loss {float(loss):.3f} (lm {lce:.3f} guide {lg:.3f}) "
                        f"ema {ema if ema is None else round(ema, 3)} gn {gn:.2f} ok {ok} B {B} L {L} "
                        f"{a.spread_mode} {gap:.2f} pos/s {tok_count / (time.time() - tok_t):.0f} "
                        f"t {(time.time() - t0) / 60:.1f}m")
            tok_count, tok_t = 0, time.time()
        if step % a.val_every == 0 and val:
            w, hyp = dec_val(enc, dec, val, cfg, pieces)
            log(a.work, f"dec val step {step}: greedy WER {w:.3f} | {hyp[:160]}")
        if time.time() - last_ck > a.ckpt_minutes * 60:
            save()
            last_ck = time.time()
            if a.export_every and time.time() - last_export > a.export_every * 60:
                export(enc, dec, quick=True)
                last_export = time.time()
    save(done=True)
    log(a.work, f"dec: finished step {step} in {(time.time() - t0) / 60:.1f} min, loss ema {ema}")
    return dec
