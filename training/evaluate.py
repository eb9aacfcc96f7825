"""Held-out evaluation of an exported wnw-ref: full cache, greedy, stop at eos
or 6 tokens per audio second, method-doc WER (lower-case, strip punctuation
except apostrophe and period, truncate hypothesis to 1.2x reference words).

  /usr/bin/python3 training/evaluate.py --model public/models/wnw-ref \
      [--sets espeak-heldout,flite,long-4min,long-10min | --dir DIR] [--limit N] [--out FILE.json]
      [--encoder CKPT] [--decoder CKPT] [--piece-labels MODEL_DIR]

--encoder / --decoder put a training checkpoint's weights (work/ctc.pt, work/dec.pt or a
kept copy in training/checkpoints) in the place of the folder's, so a checkpoint is
measured without an export; --piece-labels makes the encoder output that folder's label
rows (train_common.label_table), as `train.py --piece-labels` does.
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
from common import read_wav, wer  # noqa: E402
from export import add_checkpoint_args, load_model, swap_weights  # noqa: E402
from infer import detok, encode_windows, greedy, mel_for  # noqa: E402


def reference(stem):
    """the transcript of clip `stem`: STEM.txt, or the `text` of STEM.json (calibration clips)."""
    if os.path.exists(stem + ".txt"):
        return open(stem + ".txt").read().strip()
    if os.path.exists(stem + ".json"):
        text = json.load(open(stem + ".json")).get("text")
        if isinstance(text, str):
            return text.strip()
    sys.exit(f"evaluate: {stem}.wav has no reference ({stem}.txt, or {stem}.json with a \"text\")")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="public/models/wnw-ref")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--work", default=None)
    ap.add_argument("--sets", default="espeak-heldout,flite,long-4min,long-10min")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dir", default=None,
                    help="evaluate this folder instead of the test sets: NAME.wav + NAME.txt, or NAME.json "
                         "with a `text` (calibration-data)")
    ap.add_argument("--limit", type=int, default=0)
    add_checkpoint_args(ap)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("WNW_THREADS", "2")),
                    help="torch threads (1 while training runs on the other core)")
    ap.add_argument("--full-decode", action="store_true", help="decode to eos/guard even past the 1.2x truncation")
    a = ap.parse_args()
    if a.dir and not os.path.isdir(a.dir):
        sys.exit(f"evaluate: --dir {a.dir} is not a folder (expected NAME.wav + NAME.txt or NAME.json clips)")
    sets = [(os.path.basename(os.path.normpath(a.dir)), a.dir)] if a.dir else \
        [(n, os.path.join(a.repo, "public", "test-sets", n)) for n in a.sets.split(",")]
    # every clip's reference is read before any decoding, so a clip without one ends the run
    # at once instead of after the (long) clips before it
    plan = []
    for name, d in sets:
        if not os.path.isdir(d):
            continue
        files = sorted(f for f in os.listdir(d) if f.endswith(".wav"))
        if a.limit:
            files = files[:a.limit]
        plan.append((name, d, [(f, reference(os.path.join(d, f[:-4]))) for f in files]))
    torch.set_num_threads(a.threads)
    cfg, enc, dec, pieces = load_model(a.model, a.work)
    swap_weights(enc, dec, cfg, a)
    results = {}
    for name, d, clips_in in plan:
        errs = refs = 0
        clips = []
        for f, ref in clips_in:
            t = time.time()
            x, sr = read_wav(os.path.join(d, f))
            mel = mel_for(x, cfg)
            audio = encode_windows(enc, mel, cfg)
            # Exact shortcut: the metric truncates the hypothesis to 1.2x the reference words, so once
            # the hypothesis has more words than that (+1 for a possibly unfinished word) further
            # tokens cannot change the WER; decoding stops there (reported as truncated_early).
            keep = int(1.2 * len(ref.split())) + 2
            stop = None if a.full_decode else (lambda tk: len(tk) % 16 == 0 and len(detok(tk, pieces).split()) > keep)
            with torch.no_grad():
                toks, _ = greedy(dec, audio, cfg, stop_fn=stop)
            hyp = detok(toks, pieces)
            w, e, n = wer(ref, hyp)
            errs += e
            refs += n
            ended = bool(toks and toks[-1] == cfg["tokens"]["eos"])
            guard = int(6 * audio.shape[0] / cfg["audio"]["tokens_per_second"])
            early = (not ended) and len(toks) < guard
            clips.append({"file": f, "seconds": round(len(x) / 16000, 1), "wer": round(w, 4), "ref_words": n,
                          "hyp_words": len(hyp.split()), "ended_at_eos": ended, "tokens": len(toks),
                          "truncated_early": early, "guard_tokens": guard,
                          "decode_s": round(time.time() - t, 1), "hyp": hyp})
            print(f"{name}/{f}: {len(x) / 16000:.0f}s WER {w:.3f} eos {ended} ({time.time() - t:.0f}s) | {hyp[:100]}",
                  flush=True)
        results[name] = {"wer_pooled": round(errs / max(1, refs), 4),
                         "wer_mean": round(float(np.mean([c["wer"] for c in clips])), 4), "clips": clips}
        print(f"== {name}: pooled WER {errs / max(1, refs):.4f}", flush=True)
    if a.out:
        json.dump(results, open(a.out, "w"), indent=1)
    print(json.dumps({k: v["wer_pooled"] for k, v in results.items()}))


if __name__ == "__main__":
    main()
