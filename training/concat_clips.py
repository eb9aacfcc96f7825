"""One long recording from consecutive calibration clips, for checking a WnW choice on
long audio without touching the test sets.

    /usr/bin/python3 training/concat_clips.py --clips calibration-data --first 17 --last 40 --out /tmp/calib-long

writes OUT/calib-long.wav (the clips in order, 0.3 s of silence after each) and
OUT/calib-long.txt (their transcripts joined), the layout `npm run eval -- --data OUT`
reads. Clips 17-40 are not among the 16 that `npm run calibrate -- --limit 16` scores
heads on, and come to about 4.6 minutes.
"""
import argparse
import json
import os
import sys
import wave

import numpy as np

from common import SR, read_wav, write_wav


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", default="calibration-data")
    ap.add_argument("--first", type=int, default=17)
    ap.add_argument("--last", type=int, default=40)
    ap.add_argument("--pause", type=float, default=0.3, help="seconds of silence after each clip")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    parts, texts = [], []
    for i in range(a.first, a.last + 1):
        stem = os.path.join(a.clips, f"calib{i:03d}")
        try:
            x, sr = read_wav(stem + ".wav")
            text = json.load(open(stem + ".json"))["text"]
        except (OSError, wave.Error, AssertionError, KeyError, ValueError) as e:
            sys.exit(f"concat_clips: cannot read {stem}.wav / .json ({e!r})")
        if sr != SR:
            sys.exit(f"concat_clips: {stem}.wav is {sr} Hz, not {SR}")
        parts += [x, np.zeros(int(a.pause * SR), np.float32)]
        texts.append(text)
    os.makedirs(a.out, exist_ok=True)
    audio = np.concatenate(parts)
    write_wav(os.path.join(a.out, "calib-long.wav"), audio)
    with open(os.path.join(a.out, "calib-long.txt"), "w") as f:
        f.write(" ".join(texts) + "\n")
    print(f"{len(texts)} clips, {len(audio) / SR:.1f} s -> {a.out}")

if __name__ == "__main__":
    main()
