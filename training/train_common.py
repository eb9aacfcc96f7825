"""Shared pieces of the training stages: device, logging, training data,
batching helpers, checkpoints, validation clips."""
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch

from common import load_safetensors, read_wav
from model import CHARS
from pack_data import dequantise, load_packed

_DEV = [torch.device("cpu")]


MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295"


def keep_heap():
    """Re-run this process with glibc told to keep freed memory (once; a no-op where set).
    A decoder step on long clips allocates and frees attention tensors of tens of MB; by
    default each is mmap'd and returned to the kernel, and the page faults then cost more
    than the arithmetic (training/bench_step.py: 5.9 s user + 5.2 s system per step with
    glibc's defaults, 1.2 s + 0.8 s with these; 497k against 32k page faults)."""
    if not os.environ.get("WNW_KEEP_HEAP"):  # glibc may rewrite GLIBC_TUNABLES: mark the re-run instead
        os.environ["WNW_KEEP_HEAP"] = "1"
        os.environ["GLIBC_TUNABLES"] = MALLOC_TUNABLES
        os.execv(sys.executable, [sys.executable] + sys.argv)


def label_table(model_dir, vocab):
    """[vocab + 1, D] label rows (pieces, then silence) of an exported model: its encoder's
    `label_rows` when it outputs piece labels, else its framewise subword head's rows
    scaled to rms 1. These are what the reading gate's oracle sums and what a piece-label
    encoder emits, so a decoder trained on one reads the other."""
    w = load_safetensors(os.path.join(model_dir, "encoder.safetensors"))
    if "label_rows" in w:
        return np.asarray(w["label_rows"], dtype=np.float32)
    w = np.asarray(w["frame_bpe.weight"], dtype=np.float32)[:vocab + 1]
    return w / np.sqrt((w ** 2).mean(1, keepdims=True))


def set_dev(d):
    _DEV[0] = d


def dev():
    """the training device (set once by train.py: cuda when available)."""
    return _DEV[0]


def log(work, msg):
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    with open(os.path.join(work, "train.log"), "a") as f:
        f.write(line + "\n")


class Data:
    def __init__(self, work, cfg, sp):
        d = os.path.join(work, "data")
        self.packed = None
        if os.path.exists(os.path.join(d, "train_mel.npy")):
            self.mel = np.load(os.path.join(d, "train_mel.npy"), mmap_mode="r")
        else:  # a folder made by pack_data.py for another machine
            self.mel, self.packed = load_packed(d)
            self.dither = np.random.default_rng(7)
        self.index = json.load(open(os.path.join(d, "train_index.json")))
        self.mean = cfg["audio"]["mel_mean"]
        self.std = cfg["audio"]["mel_std"]
        self.sp = sp
        self.sessions = [s for s in self.index if s["utts"]]
        self.phonemes = phoneme_inventory(self.sessions)
        self.phoneme_ids = {p: i + 1 for i, p in enumerate(self.phonemes)}
        self.w = np.array([len(s["utts"]) for s in self.sessions], dtype=np.float64)
        self.w /= self.w.sum()

    def span(self, rng, lo_s, hi_s, weights=None):
        """consecutive utterances of one session (drawn by `weights`, default: by
        utterance count), total span in [lo_s, hi_s] where possible; returns
        (session index, first frame, frame count (a multiple of 8), text)."""
        si = int(rng.choice(len(self.sessions), p=self.w if weights is None else weights))
        s = self.sessions[si]
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
        return si, a, n, " ".join(u[2] for u in utts[i:j])

    def frames(self, si, a, n, rng=None):
        """normalised mel [80, n] of session si from frame a (edge-padded);
        rng draws the dither of packed mels (default: the Data's own)."""
        s = self.sessions[si]
        if self.packed:
            p = self.packed
            m = dequantise(self.mel[s["offset"] + a: s["offset"] + a + n], p["lo"], p["step"],
                           rng if rng is not None else self.dither)
        else:
            m = np.asarray(self.mel[:, s["offset"] + a: s["offset"] + a + n], dtype=np.float32)
        if m.shape[1] < n:
            m = np.pad(m, ((0, 0), (0, n - m.shape[1])), mode="edge")
        return (m - self.mean) / self.std

    def sample(self, rng, lo_s, hi_s):
        """(mel [80, T] float32 normalised, text, words, phonemes) of a random span;
        words as span_words gives them, phonemes as span_phonemes."""
        si, a, n, text = self.span(rng, lo_s, hi_s)
        return self.frames(si, a, n, rng), text, self.span_words(si, a, n, text), self.span_phonemes(si, a, n)

    def span_phonemes(self, si, a, n):
        """[(start_s, phoneme id)] from the span's first frame (the phoneme sounding at
        its start included, at 0), 0 = silence; None where the session has none."""
        evs = self.sessions[si].get("phonemes")
        if not evs:
            return None
        t0, t1 = a / 100.0, (a + n) / 100.0
        ids = self.phoneme_ids
        out = []
        for k, (p0, ph) in enumerate(evs):
            p1 = evs[k + 1][0] if k + 1 < len(evs) else p0 + 1.0
            if p1 > t0 and p0 < t1:
                out.append((max(0.0, p0 - t0), ids.get(ph, 0)))
        return out

    def span_words(self, si, a, n, text):
        """[(start_s, end_s, word)] from the span's first frame, or None where the session
        has no word spans (festival) or they do not spell the span's text."""
        s = self.sessions[si]
        t0, t1 = a / 100.0, (a + n) / 100.0
        ws = [(w0 - t0, w1 - t0, w) for (w0, w1, w) in s.get("words") or [] if w1 > t0 and w0 < t1]
        if not ws or " ".join(w for _, _, w in ws) != text:
            return None
        return ws


def piece_spans(sp, words):
    """Per transcript piece of `words` [(start_s, end_s, word)]: (id, start_s, end_s,
    word_start_s, word_end_s). A word's span is split among its pieces in proportion
    to their letters: the synthesiser gives word times only."""
    out = []
    for (w0, w1, w) in words:
        ids = sp.encode(w)
        lens = [max(1, len(sp.id_to_piece(i).replace("\u2581", ""))) for i in ids]
        tot, acc = float(sum(lens)), 0
        for i, ln in zip(ids, lens):
            out.append((i, w0 + (w1 - w0) * acc / tot, w0 + (w1 - w0) * (acc + ln) / tot, w0, w1))
            acc += ln
    return out


def frame_labels(sp, words, n25, silence_bpe, token_rate=12.5):
    """Framewise targets of a clip of n25 frames at 25 Hz: char ids at 25 Hz (0 =
    silence) and piece ids at 12.5 Hz (silence_bpe between words); all -100 (ignored)
    without word spans."""
    ch = np.full(n25, -100 if words is None else 0, dtype=np.int64)
    bp = np.full(n25 // 2, -100 if words is None else silence_bpe, dtype=np.int64)
    if words is None:
        return ch, bp
    for (w0, w1, w) in words:
        # the char head runs at twice the audio token rate (before frame pairs are stacked)
        r2 = 2 * token_rate
        f0, f1 = int(round(w0 * r2)), max(int(round(w0 * r2)) + 1, int(round(w1 * r2)))
        ids = char_ids(w)
        for k in range(max(0, f0), min(n25, f1)):
            ch[k] = ids[min(len(ids) - 1, (k - f0) * len(ids) // (f1 - f0))]
    for (i, p0, p1, _, _) in piece_spans(sp, words):
        f0 = int(round(p0 * token_rate))
        f1 = max(f0 + 1, int(round(p1 * token_rate)))
        bp[max(0, f0):min(len(bp), f1)] = i
    return ch, bp


def phoneme_inventory(sessions):
    """sorted espeak phoneme mnemonics of the training sessions; pauses ("_", "_:", ...)
    are silence (class 0), so phoneme i of the list is class i + 1."""
    return sorted({ph for s in sessions for (_, ph) in s.get("phonemes") or [] if not ph.startswith("_")})


def phoneme_labels(phonemes, n25, rate=25.0):
    """framewise phoneme classes at 25 Hz from span_phonemes' events (each holds until
    the next one); all -100 (ignored) without events."""
    out = np.full(n25, -100 if phonemes is None else 0, dtype=np.int64)
    for k, (p0, c) in enumerate(phonemes or []):
        f0 = int(round(p0 * rate))
        f1 = int(round(phonemes[k + 1][0] * rate)) if k + 1 < len(phonemes) else n25
        out[max(0, f0):min(n25, max(f1, f0 + 1))] = c
    return out


def char_ids(text):
    return [CHARS.index(c) + 1 for c in text if c in CHARS]


def pad_mels(mels):
    T = max(m.shape[1] for m in mels)
    out = np.zeros((len(mels), mels[0].shape[0], T), dtype=np.float32)
    for i, m in enumerate(mels):
        out[i, :, :m.shape[1]] = m
    return torch.from_numpy(out).to(dev()), torch.tensor([m.shape[1] for m in mels]).to(dev())


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


def save_ckpt(path, **kw):
    tmp = path + ".tmp"
    torch.save(kw, tmp)
    os.replace(tmp, path)


def kept_copy(a, ck):
    """--keep DIR: where checkpoint `ck`'s weights-only copy lives (None without --keep)."""
    return os.path.join(a.keep, os.path.basename(ck)) if getattr(a, "keep", "") else None


def resume_from_kept(work, name, ck, kept):
    """a work folder without `ck` (a fresh machine) starts from the committed copy."""
    if kept and not os.path.exists(ck) and os.path.exists(kept):
        shutil.copy(kept, ck)
        log(work, f"{name}: resuming from the kept checkpoint {kept}")


def save_kept(kept, key, module, **st):
    """`module`'s weights only, in float16 (no optimizer state): small enough to commit, so a
    fresh machine resumes from it (step, clock and loss EMA kept; AdamW starts afresh)."""
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    save_ckpt(kept, **{key: {k: v.detach().half().cpu() for k, v in module.state_dict().items()}}, **st)


def budget_reached(st, steps, minutes):
    """a checkpoint marked done resumes when the budgets were raised since."""
    return bool(st.get("done")) and (st["step"] >= steps or st["elapsed"] >= minutes * 60)


def load_val(val_dir, limit=2):
    """(set, file, samples, reference) of the validation clips (gen_data.build_val)."""
    out = []
    for f in sorted(os.listdir(val_dir)):
        if f.endswith(".wav") and len(out) < limit:
            x, sr = read_wav(os.path.join(val_dir, f))
            ref = open(os.path.join(val_dir, f[:-4] + ".txt")).read().strip()
            out.append(("val", f, x, ref))
    return out


