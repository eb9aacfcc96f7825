"""The reading gate: can the decoder read a transcript off clean audio labels?

A speech LLM's decoder has two jobs: find, at each transcript token, the audio it
is transcribing, and turn what is there into text. The second depends on the
encoder; the first is the decoder's own, and it is what the CPU runs of
`stage_dec.py` struggled with (on label embeddings the shipped decoder still read
unseen texts at 72 % WER at 12 s). This file isolates it, with no audio at all:

- oracle audio: unseen texts (the test split of the fortunes), spoken at a
  simulated rate (`simulate`: words last in proportion to their letters at 11-16
  characters/s, short gaps between words, 0.15-0.7 s pauses between texts), and at
  each 12.5 Hz audio token the overlap-weighted sum of the label rows of the pieces
  sounding in its 80 ms (a silence row for the rest). The rows are the shipped
  encoder's framewise subword head (`frame_bpe`; `train_common.label_table`), so a
  decoder that reads these is one `stage_dec.py` can warm-start from on that encoder's
  embeddings, or read that encoder's piece labels (`train.py --piece-labels`) as they are.
- the gate (`gate`): greedy WER of a decoder on such clips of 12 s, 60 s and 4 min
  (fixed seeds, clean labels), its targets being <= 10 % and <= 20 %.
- training (`main`): `stage_dec.run_stage`, the decoder stages' resumable loop,
  on simulated training-split clips (noisy, partly corrupted labels), curriculum
  from a few words upwards.

The timing is simulated rather than synthesised so that the gate measures the
decoder alone, costs seconds to build, and needs no speech synthesiser; the
decoder stage of `train.py` (`--label-minutes 0 --dec-init`) then moves a decoder
that reads these onto the encoder's embeddings of espeak's sessions.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import load_fortunes, load_safetensors, normalise, wer  # noqa: E402
from gen_data import text_split  # noqa: E402
from infer import detok, greedy  # noqa: E402
from model import Decoder  # noqa: E402
from stage_dec import run_stage  # noqa: E402
from train_common import dev, keep_heap, label_table, log, piece_spans, set_dev  # noqa: E402

RATE = 12.5  # audio tokens per second
GATE = ((12, 24), (60, 6), (240, 2))  # (seconds, clips) of the gate


def split_texts(split):
    return [normalise(t) for (_, t) in load_fortunes() if text_split(t) == split]


def simulate(texts, rng, lead=None):
    """[(start_s, end_s, word)] of `texts` read one after another, and the end time."""
    cps = rng.uniform(11, 16)
    t = rng.uniform(0.1, 0.6) if lead is None else lead
    words = []
    for txt in texts:
        for w in txt.split():
            d = (len(w) + 1.0) / cps * rng.uniform(0.85, 1.15)
            words.append((t, t + d, w))
            t += d + rng.uniform(0.0, 0.06)
        t += rng.uniform(0.15, 0.7)
    return words, t


def clip(texts, rng, seconds, start=None):
    """A clip of about `seconds` cut at word boundaries from consecutive texts from
    `start` (random when None): (words re-timed from the clip start, frames at 100 Hz,
    transcript)."""
    i = int(rng.integers(len(texts))) if start is None else start
    chosen, n_words = [], 0
    while n_words < seconds * 3.5 + 4:
        chosen.append(texts[i % len(texts)])
        n_words += len(chosen[-1].split())
        i += 1
    words, _ = simulate(chosen, rng)
    # a window of `seconds` from a random word (the first one for short runs of text)
    first = int(rng.integers(max(1, len(words) // 4)))
    t0 = max(0.0, words[first][0] - rng.uniform(0.1, 0.4))
    keep = [w for w in words[first:] if w[1] <= t0 + seconds]
    keep = keep or [words[first]]
    t1 = keep[-1][1] + rng.uniform(0.2, 0.5)
    frames = int(round((t1 - t0) * 100)) // 8 * 8
    return [(a - t0, b - t0, w) for (a, b, w) in keep], frames, " ".join(w for _, _, w in keep)


def oracle(sp, words, n, table, silence):
    """[n, D]: at each token the overlap-weighted sum of the rows of the pieces sounding
    in its 1/RATE s, the silence row for the share where none is."""
    w = np.zeros((n, table.shape[0]), dtype=np.float32)
    for (pid, p0, p1, _, _) in piece_spans(sp, words):
        a, b = p0 * RATE, p1 * RATE
        for k in range(max(0, int(a)), min(n, int(np.ceil(b)))):
            w[k, pid] += min(b, k + 1) - max(a, k)
    w[:, silence] += np.clip(1.0 - w.sum(1), 0.0, None)
    return w @ table


def position_features(n, width, scale):
    """[n, width] sinusoids of the audio token index (periods 8 to ~8000 tokens) x scale:
    an experiment (--audio-positions) in giving the decoder absolute audio positions, so
    that it can prefer the frames just after the ones it last read over a repeat of the
    same words elsewhere. 0 (the default) adds nothing."""
    if scale <= 0:
        return 0.0
    half = width // 2
    period = 8.0 * 1000.0 ** (np.arange(half) / max(1, half - 1))
    ang = np.arange(n)[:, None] * (2 * np.pi / period)[None]
    return (np.concatenate([np.sin(ang), np.cos(ang)], 1) * scale).astype(np.float32)


class SimData:
    """The `data` of stage_dec.run_stage: each span() simulates a fresh clip."""

    def __init__(self, texts):
        self.texts = texts
        self.clips = {}
        self.sessions = []
        self.count = 0

    def span(self, rng, lo, hi, weights=None):
        self.count += 1
        if len(self.clips) > 64:  # only the batch being built is read back
            self.clips.clear()
        self.clips[self.count] = clip(self.texts, rng, rng.uniform(lo, hi))
        return self.count, 0, self.clips[self.count][1], self.clips[self.count][2]

    def span_words(self, si, a, n, text):
        return self.clips[si][0]


class OracleCache:
    """The `cache` of stage_dec.run_stage: the oracle embeddings of SimData's clips,
    with a share `corrupt` of the tokens given a random piece's row and Gaussian noise
    of `noise` x rms."""

    def __init__(self, sp, data, table, silence, noise, corrupt, positions=0.0):
        self.sp, self.data, self.table, self.silence = sp, data, table, silence
        self.positions = positions
        self.noise, self.corrupt = noise, corrupt
        self.emb = table  # run_stage's embedding init measures the rms on it
        self.rng = np.random.default_rng(1)

    def span(self, si, a, n):
        words, frames, _ = self.data.clips[si]
        x = oracle(self.sp, words, frames // 8, self.table, self.silence)
        m = self.rng.random(len(x)) < self.corrupt
        x[m] = self.table[self.rng.integers(0, len(self.table), size=int(m.sum()))]
        x += self.rng.normal(0, self.noise, size=x.shape).astype(np.float32)
        x += position_features(len(x), x.shape[1], self.positions)
        return torch.from_numpy(x).to(dev())


@torch.no_grad()
def gate(dec, cfg, sp, texts, table, silence, sets=GATE, log_fn=print, positions=0.0):
    """{seconds: pooled greedy WER} on clean oracle clips of unseen texts (fixed seeds)."""
    dec.eval()
    pieces = [sp.id_to_piece(i) for i in range(cfg["vocab_size"])]
    out = {}
    for seconds, count in sets:
        errs, n_ref, eos = 0, 0, 0
        for c in range(count):
            rng = np.random.default_rng(10_000 * seconds + c)
            words, frames, ref = clip(texts, rng, seconds, start=int(rng.integers(len(texts))))
            audio = oracle(sp, words, frames // 8, table, silence)
            audio = torch.from_numpy(audio + position_features(len(audio), audio.shape[1], positions)).to(dev())
            toks, _ = greedy(dec, audio, cfg)
            hyp = detok(toks, pieces)
            e, n = wer(ref, hyp)[1:3]
            errs, n_ref, eos = errs + e, n_ref + n, eos + int(cfg["tokens"]["eos"] in toks)
            if c == 0:
                log_fn(f"gate {seconds}s clip 0: {hyp[:120]!r} | ref {ref[:120]!r}")
        out[seconds] = errs / max(1, n_ref)
        log_fn(f"gate {seconds}s: WER {out[seconds]:.3f} over {count} clips, {n_ref} words, eos {eos}/{count}")
    dec.train()
    return out


def main():
    keep_heap()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--repo", default=os.path.dirname(HERE))
    ap.add_argument("--name", default="read", help="checkpoint work/NAME.pt, log work/train.log")
    ap.add_argument("--phases", default="1500:1-4:20,1500:2-8:30,2000:4-15:40,2000:10-45:60,2500:30-90:90")
    ap.add_argument("--minutes", type=float, default=215)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--corrupt", type=float, default=0.1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--guide-heads", default="1:0,1:4,1:8,1:12,2:0,2:4,2:8,2:12")
    ap.add_argument("--guide-weight", type=float, default=1.0)
    ap.add_argument("--spread-positions", type=float, default=10000)
    ap.add_argument("--audio-positions", type=float, default=0.0,
                    help="experiment: add sinusoids of the audio token index x this to the oracle rows")
    ap.add_argument("--init", default="", help="start from this checkpoint's weights (a new run, new schedule)")
    ap.add_argument("--gate-only", default="", help="evaluate this checkpoint (or `shipped`) and exit")
    ap.add_argument("--gate-every", type=float, default=20, help="minutes between gate runs (12 s and 60 s only)")
    ap.add_argument("--keep", default=os.path.join(HERE, "checkpoints"),
                    help="weights-only copy of the checkpoint (committed, so a fresh machine resumes)")
    ap.add_argument("--no-final-gate", action="store_true", help="skip the gate at the end of the run")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu|cuda")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    set_dev(torch.device(a.device))
    os.makedirs(a.work, exist_ok=True)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.repo, "public/models/wnw-ref/sentencepiece.model"))
    cfg = json.load(open(os.path.join(a.repo, "public/models/wnw-ref/config.json")))
    cfg["num_layers"] = a.layers
    V = cfg["vocab_size"]
    table = label_table(os.path.join(a.repo, "public", "models", "wnw-ref"), V)
    test = split_texts("test")
    say = lambda m: log(a.work, m)  # noqa: E731
    if a.gate_only:
        dec = Decoder(cfg)
        if a.gate_only == "shipped":
            st = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in load_safetensors(
                os.path.join(a.repo, "public/models/wnw-ref/decoder.safetensors")).items()}
        else:
            st = torch.load(a.gate_only, map_location="cpu")["dec"]
        dec.load_state_dict({k: v.float() for k, v in st.items()})
        dec.to(dev())
        print(json.dumps(gate(dec, cfg, sp, test, table, V, positions=a.audio_positions)))
        return
    ck = os.path.join(a.work, f"{a.name}.pt")
    data = SimData(split_texts("train"))
    cache = OracleCache(sp, data, table, V, a.noise, a.corrupt, a.audio_positions)
    enc = torch.nn.Module()
    enc.frame_bpe = torch.nn.Linear(1, V + 1)
    enc.frame_bpe.weight = torch.nn.Parameter(torch.from_numpy(table))
    a.dec_embed_init, a.dec_head_init, a.spread_mode, a.guide_span = "frame", "embed", "gap", "piece"
    a.log_every, a.val_every, a.ckpt_minutes, a.export_every = 20, 10 ** 9, 3, 0
    tag = f"read noise {a.noise} corrupt {a.corrupt} layers {a.layers}" + (
        f" positions {a.audio_positions}" if a.audio_positions else "")
    t_gate = [time.time()]

    def export(_enc, dec, quick=True):  # called at checkpoints (run_stage keeps the copy): gate now and then
        if time.time() - t_gate[0] > a.gate_every * 60:
            t_gate[0] = time.time()
            gate(dec, cfg, sp, test, table, V, sets=GATE[:2], log_fn=say, positions=a.audio_positions)

    a.export_every = 1e-9
    dec = run_stage(a, a.name, ck, cfg, sp, data, [], enc, cache, tag, a.phases, a.minutes, a.lr, a.warmup,
                    export, a.init or None)
    if not a.no_final_gate:
        say(json.dumps({"gate": gate(dec, cfg, sp, test, table, V, log_fn=say, positions=a.audio_positions)}))


if __name__ == "__main__":
    main()
