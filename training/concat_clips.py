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

RATE = 16000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", default="calibration-data")
    ap.add_argument("--first", type=int, default=17)
    ap.add_argument("--last", type=int, default=40)
    ap.add_argument("--pause", type=float, default=0.3, help="seconds of silence after each clip")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    frames, texts = [], []
    for i in range(a.first, a.last + 1):
        stem = os.path.join(a.clips, f"calib{i:03d}")
        try:
            w = wave.open(stem + ".wav")
            text = json.load(open(stem + ".json"))["text"]
        except (OSError, wave.Error, KeyError, ValueError) as e:
            sys.exit(f"concat_clips: cannot read {stem}.wav / .json ({e})")
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            sys.exit(f"concat_clips: {stem}.wav is not 16 kHz mono PCM16")
        frames += [w.readframes(w.getnframes()), b"\0\0" * int(a.pause * RATE)]
        texts.append(text)
    os.makedirs(a.out, exist_ok=True)
    with wave.open(os.path.join(a.out, "calib-long.wav"), "wb") as o:
        o.setnchannels(1)
        o.setsampwidth(2)
        o.setframerate(RATE)
        o.writeframes(b"".join(frames))
    with open(os.path.join(a.out, "calib-long.txt"), "w") as f:
        f.write(" ".join(texts) + "\n")
    print(f"{len(texts)} clips, {sum(len(b) for b in frames) / 2 / RATE:.1f} s -> {a.out}")


if __name__ == "__main__":
    main()
