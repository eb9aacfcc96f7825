"""Framewise phoneme accuracy of an encoder with a phoneme head (train.py
--phoneme-weight > 0), on fresh espeak sessions of calibration texts: four
training voices against four held-out ones. It separates hearing from spelling:
if held-out voices score like training voices, the acoustics carry over and the
gap in WER is the decoder's.

    /usr/bin/python3 training/phoneme_accuracy.py --ckpt training/work/ctc.pt [--data training/work/data]
"""
import argparse
import json
import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import load_fortunes  # noqa: E402
from gen_data import HELDOUT_BASES, HELDOUT_VARIANTS, TRAIN_BASES, synth_session, text_split, variants  # noqa: E402
from infer import mel_for  # noqa: E402
from model import ENC_KW, Encoder  # noqa: E402
from train_common import phoneme_inventory, phoneme_labels  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "work", "ctc.pt"), help="an encoder stage checkpoint")
    ap.add_argument("--data", default=os.path.join(HERE, "work", "data"),
                    help="the training data folder it was trained on (phoneme inventory, mel stats)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for path, what in ((a.ckpt, "--ckpt: an encoder checkpoint (training/work/ctc*.pt)"),
                       (os.path.join(a.data, "train_index.json"), "--data: the training data folder")):
        if not os.path.isfile(path):
            sys.exit(f"{path} not found; {what}")
    idx = json.load(open(os.path.join(a.data, "train_index.json")))
    ids = {p: i + 1 for i, p in enumerate(phoneme_inventory(idx))}
    stats = json.load(open(os.path.join(a.data, "mel_stats.json")))
    st = torch.load(a.ckpt, map_location="cpu")["enc"]
    sizes = Encoder.head_sizes(st)
    if not sizes["n_phonemes"]:
        sys.exit(f"{a.ckpt} has no phoneme head: train its encoder with --phoneme-weight > 0")
    if sizes["n_phonemes"] != len(ids):
        sys.exit(f"{a.ckpt} has {sizes['n_phonemes']} phonemes, {a.data} {len(ids)}: pass the --data it was trained on")
    enc = Encoder(hidden=st["out.weight"].shape[0], vocab=st["ctc_bpe.weight"].shape[0] - 1, **ENC_KW, **sizes)
    enc.load_state_dict(st)
    enc.eval()
    cfg = {"audio": {"frames_per_token": 8, "mel_mean": stats["mel_mean"], "mel_std": stats["mel_std"]}}
    texts = [t for _, t in load_fortunes() if text_split(t) == "calib"]
    train_vars, _ = variants()
    r = random.Random(3)
    groups = {"training voices": [f"{r.choice(TRAIN_BASES)}+{r.choice(train_vars)}" for _ in range(4)],
              "held-out voices": [f"{HELDOUT_BASES[i % 2]}+{HELDOUT_VARIANTS[i]}" for i in range(4)]}
    for name, voices in groups.items():
        accs = []
        for k, voice in enumerate(voices):
            x, _, _, phs = synth_session(texts[4 * k:4 * k + 4], voice, 165, 50, 50, np.random.default_rng(k))
            with torch.no_grad():
                pred = enc(torch.from_numpy(mel_for(x, cfg))[None], return_all=True)[5][0].argmax(-1).numpy()
            lab = phoneme_labels([(t, ids.get(p, 0)) for t, p in phs], len(pred))
            speech = lab > 0
            accs.append(float((pred[speech] == lab[speech]).mean()))
        print(f"{name}: {', '.join(voices)}: accuracy on speech frames "
              f"{', '.join('%.3f' % v for v in accs)} (mean {np.mean(accs):.3f})")


if __name__ == "__main__":
    main()
