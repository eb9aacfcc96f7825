"""Synthesise the wnw-ref data: training sessions (espeak-ng + festival, with
noise/gain augmentation), held-out test sets (espeak-ng held-out voices and
texts; flite voices), calibration clips (training voices, calibration texts,
word spans), demo sample and fixture clips.

Usage: gen_data.py --work training/work [--repo .] [--tiny]
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (SR, Espeak, sox_resample, espeak_words, load_fortunes, log_mel, log_mel_fast, normalise, pcm16_roundtrip, read_wav,
                    resample, write_wav)

TRAIN_BASES = ["en", "en-us", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp", "en-029"]
HELDOUT_BASES = ["en-us-nyc", "en-gb-x-gbcwmd"]
EXCLUDED_VARIANTS = {"whisper", "whisperf", "Demonic", "croak", "UniRobot", "anikaRobot", "RicishayMax",
                     "RicishayMax2", "RicishayMax3", "Tweaky", "Mr serious", "Storm", "klatt5", "klatt6", "Gene2",
                     "Diogo", "Henrique", "Mario", "Michael", "kaukovalta"}
HELDOUT_VARIANTS = ["m7", "f4", "klatt3", "Annie", "benjamin", "iven3", "linda", "norbert", "max", "edward2"]
FLITE_VOICES = ["kal", "awb", "rms", "slt"]
VDIR = "/usr/lib/x86_64-linux-gnu/espeak-ng-data/voices/!v"


def variants():
    vs = sorted(v for v in os.listdir(VDIR) if v not in EXCLUDED_VARIANTS and " " not in v)
    return [v for v in vs if v not in HELDOUT_VARIANTS], [v for v in HELDOUT_VARIANTS if v in vs]


def text_split(txt):
    h = int(hashlib.md5(txt.encode()).hexdigest(), 16) % 100
    return "test" if h < 7 else ("calib" if h < 11 else "train")


def augment(x, rng, noise=True):
    """Random gain; with p=0.75 additive white or low-passed (moving-average)
    noise at 8-40 dB SNR."""
    x = x / (np.abs(x).max() + 1e-6) * rng.uniform(0.25, 0.95)
    if noise and rng.random() < 0.75:
        snr = rng.uniform(8, 40)
        n = rng.standard_normal(len(x)).astype(np.float32)
        k = int(rng.integers(1, 9))
        if k > 1:
            n = np.convolve(n, np.ones(k, np.float32) / k, mode="same")
        p_sig = np.mean(x ** 2) + 1e-9
        n = n / (np.sqrt(np.mean(n ** 2)) + 1e-9) * np.sqrt(p_sig / 10 ** (snr / 10))
        x = x + n
        x = x / max(1.0, np.abs(x).max() / 0.99)
    return x.astype(np.float32)


_ES = None


def es():
    global _ES
    if _ES is None:
        _ES = Espeak()
    return _ES


def synth_session(texts, voice, rate, pitch, prange, rng, gaps=(0.15, 0.7)):
    """Concatenate utterances of one voice (at espeak's rate, then one sox
    resample to 16 kHz); returns samples, utterance spans [(start_s, end_s,
    text)], words and phonemes [start_s, mnemonic] with global times."""
    e = es()
    parts, utts, words, phonemes = [], [], [], []
    t = 0.0
    sr = e.sr
    for txt in texts:
        x, sr, ev = e.synth(txt, voice, rate=rate, pitch=pitch, prange=prange)
        nz = np.nonzero(np.abs(x) > 0.003)[0]
        if len(nz) == 0:
            continue
        a0 = max(0, nz[0] - sr // 100)
        b0 = min(len(x), nz[-1] + sr // 20)
        x = x[a0:b0]
        ws = espeak_words(txt, [(tp, ln, ms - a0 * 1000.0 / sr) for (tp, ln, ms) in ev], len(x) / sr, x, sr=sr)
        g = np.zeros(int(rng.uniform(*gaps) * sr), np.float32)
        parts.append(g)
        t += len(g) / sr
        parts.append(x)
        utts.append((t, t + len(x) / sr, normalise(txt)))
        for w in ws:
            words.append({**w, "start": round(max(0.0, w["start"]) + t, 3), "end": round(w["end"] + t, 3)})
        evs = [(ms / 1000.0 - a0 / sr, ph) for (ms, ph) in e.phonemes]
        for k, (p0, ph) in enumerate(evs):
            # a phoneme that began in the trimmed lead-in sounds from the cut on
            if p0 < len(x) / sr and (k + 1 == len(evs) or evs[k + 1][0] > 0.0):
                phonemes.append([round(max(0.0, p0) + t, 3), ph])
        # the trimmed tail after the last phoneme event is silence
        phonemes.append([round(t + len(x) / sr, 3), "_"])
        t += len(x) / sr
    parts.append(np.zeros(int(0.3 * sr), np.float32))
    return sox_resample(np.concatenate(parts), sr), utts, words, phonemes


def synth_until(pool, voice, rate, pitch, prange, rng, min_s, max_s, gaps=(0.15, 0.7)):
    """Pop texts from pool (synthesising each alone to measure it) until the
    session lasts >= min_s without exceeding max_s; then synthesise the chosen
    texts as one session."""
    e = es()
    chosen, dur, tries = [], 0.3, 0
    while dur < min_s and pool and tries < 200:
        t = pool.pop(0)
        x, sr, _ = e.synth(t, voice, rate=rate, pitch=pitch, prange=prange)
        d = len(x) / sr + sum(gaps) / 2
        if dur + d > max_s:
            pool.append(t)
            tries += 1
            continue
        chosen.append(t)
        dur += d
    return synth_session(chosen, voice, rate, pitch, prange, rng, gaps=gaps)[:3]


def flite_until(pool, voice, rng, min_s, max_s):
    chosen, dur, tries = [], 0.3, 0
    while dur < min_s and pool and tries < 200:
        t = pool.pop(0)
        d = len(t.split()) / 2.9 + 0.6
        if dur + d > max_s:
            pool.append(t)
            tries += 1
            continue
        chosen.append(t)
        dur += d
    return flite_session(chosen, voice, rng)


def utterance_session(texts, synth, gap_s, rng):
    """One session of utterances, each `synth(text, tmpdir, i)` (16 kHz float32) trimmed to
    its voiced part, after a silence drawn from `gap_s` (seconds); utterances with no voice
    are left out."""
    parts, utts = [], []
    t = 0.0
    with tempfile.TemporaryDirectory() as td:
        for i, txt in enumerate(texts):
            x16 = synth(txt, td, i)
            nz = np.nonzero(np.abs(x16) > 0.003)[0]
            if len(nz) == 0:
                continue
            x16 = x16[max(0, nz[0] - 160):nz[-1] + 800]
            g = np.zeros(int(rng.uniform(*gap_s) * SR), np.float32)
            parts += [g, x16]
            t += len(g) / SR
            utts.append((t, t + len(x16) / SR, normalise(txt)))
            t += len(x16) / SR
    parts.append(np.zeros(int(0.3 * SR), np.float32))
    return np.concatenate(parts), utts


def flite_session(texts, voice, rng):
    def synth(txt, td, i):
        p = os.path.join(td, f"{i}.wav")
        subprocess.run(["flite", "-voice", voice, "-t", txt, "-o", p], check=True)
        return resample(*read_wav(p))
    return utterance_session(texts, synth, (0.2, 0.6), rng)


def festival_session(texts, rng):
    def synth(txt, td, i):
        p = os.path.join(td, f"{i}.wav")
        q = os.path.join(td, f"{i}s.wav")
        subprocess.run(["text2wave", "-o", p], input=txt.encode(), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        sp = rng.uniform(0.88, 1.15)
        # -R: sox seeds its dither (16-bit output) with a fixed number, so reruns match
        subprocess.run(["sox", "-R", p, "-r", "16000", q, "speed", f"{sp:.3f}"], check=True)
        return resample(*read_wav(q))
    return utterance_session(texts, synth, (0.15, 0.7), rng)


def _train_job(args):
    import torch
    torch.set_num_threads(1)
    sid, texts, kind, seed, train_vars = args
    rng = np.random.default_rng(seed)
    r = random.Random(seed)
    if kind == "festival":
        x, utts = festival_session(texts, rng)
        voice = "festival:kal_diphone"
        words, phonemes = [], []
    else:
        voice = f"{r.choice(TRAIN_BASES)}+{r.choice(train_vars)}"
        x, utts, words, phonemes = synth_session(texts, voice, rate=r.randint(130, 190), pitch=r.randint(25, 75),
                                       prange=r.randint(30, 80), rng=rng)
    x = pcm16_roundtrip(augment(x, rng))
    mel = log_mel_fast(x)
    return sid, voice, mel.astype(np.float16), utts, [[w["start"], w["end"], w["word"]] for w in words], phonemes


def group(texts, size):
    return [texts[i:i + size] for i in range(0, len(texts), size)]


def build_train(work, train_texts, tiny, procs=2, espeak_texts=3000, festival_texts=60):
    out = os.path.join(work, "data")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, "train_index.json")):
        print("train data exists")
        return
    train_vars, _ = variants()
    rng = random.Random(0)
    texts = list(train_texts)
    # sessions keep text order (same fortune file -> related topics)
    n_fest = 3 if tiny else festival_texts
    fest = [t for i, t in enumerate(texts) if i % 12 == 5][:n_fest]
    fest_set = set(fest)
    esp = [t for t in texts if t not in fest_set]
    esp = esp[:30] if tiny else (esp[:espeak_texts] if espeak_texts else esp)  # 3000: ~5.8 h
    jobs = []
    for i, g in enumerate(group(esp, 30)):
        jobs.append((len(jobs), g, "espeak", 1000 + i, train_vars))
    for i, g in enumerate(group(fest, 25)):
        jobs.append((len(jobs), g, "festival", 5000 + i, train_vars))
    t0 = time.time()
    mels, index = [], []
    off = 0
    # One fresh worker per session: espeak-ng carries synthesis state from one call to the
    # next (the same text in the same voice comes out a few samples different), so a worker
    # reused across sessions would make a session's audio depend on which sessions that
    # worker happened to synthesise before it, and the data would differ from run to run.
    with Pool(procs, maxtasksperchild=1) as pool:
        for k, (sid, voice, mel, utts, words, phonemes) in enumerate(pool.imap(_train_job, jobs)):
            mels.append(mel)
            index.append({"session": sid, "voice": voice, "offset": off, "frames": mel.shape[1],
                          "utts": [[round(a, 3), round(b, 3), t] for (a, b, t) in utts],
                          # word spans (espeak word events; festival sessions have none): the
                          # frame-level and attention-guide targets of training
                          "words": words,
                          # espeak phoneme events [start_s, mnemonic] (none for festival): the
                          # encoder's framewise phoneme targets
                          "phonemes": phonemes})
            off += mel.shape[1]
            if k % 20 == 0:
                print(f"  session {k}/{len(jobs)} {time.time() - t0:.0f}s", flush=True)
    allmel = np.concatenate(mels, axis=1)
    np.save(os.path.join(out, "train_mel.npy"), allmel)
    sub = allmel[:, ::7].astype(np.float32)
    stats = {"mel_mean": float(sub.mean()), "mel_std": float(sub.std()), "hours": allmel.shape[1] / 100 / 3600}
    json.dump(stats, open(os.path.join(out, "mel_stats.json"), "w"))
    json.dump(index, open(os.path.join(out, "train_index.json"), "w"))
    print(f"train data: {len(index)} sessions, {stats['hours']:.2f} h, {time.time() - t0:.0f}s", stats)


def take_texts(pool, min_s, max_s, wps=2.6):
    """Pop texts from pool until estimated duration >= min_s (not above max_s)."""
    out, dur = [], 0.0
    while pool and dur < min_s:
        t = pool[0]
        d = len(t.split()) / wps + 0.4
        if dur + d > max_s and out:
            pool.append(pool.pop(0))
            if all(len(x.split()) / wps + dur > max_s for x in pool[:20]):
                break
            continue
        out.append(pool.pop(0))
        dur += d
    return out


def peak_pcm16(x):
    """A clip as the test and calibration sets store it: peak 0.8, through 16-bit PCM."""
    return pcm16_roundtrip(x / (np.abs(x).max() + 1e-6) * 0.8)


def write_clip(d, name, x, utts):
    """`name`.wav (peak_pcm16 of x) and `name`.txt (the utterances' text) in d; returns (x, text)."""
    os.makedirs(d, exist_ok=True)
    x = peak_pcm16(x)
    write_wav(os.path.join(d, name + ".wav"), x)
    ref = " ".join(u[2] for u in utts)
    open(os.path.join(d, name + ".txt"), "w").write(ref + "\n")
    return x, ref


def build_tests(repo, test_texts, calib_texts, tiny):
    train_vars, held_vars = variants()
    r = random.Random(7)
    rng = np.random.default_rng(7)
    pool = list(test_texts)
    r.shuffle(pool)
    pt = os.path.join(repo, "public", "test-sets")
    manifest = []

    def held_voice(i):
        return f"{HELDOUT_BASES[i % len(HELDOUT_BASES)]}+{held_vars[i % len(held_vars)]}"

    def espeak_clip(dirname, name, i, lo, hi, voice=None, rate=None):
        voice = voice or held_voice(i)
        rate = rate or r.randint(140, 180)
        x, utts, words = synth_until(pool, voice, rate, r.randint(35, 65), r.randint(40, 70), rng, lo, hi)
        x, ref = write_clip(dirname, name, x, utts)
        manifest.append({"file": os.path.relpath(os.path.join(dirname, name + ".wav"), repo), "voice": voice,
                         "rate": rate, "seconds": round(len(x) / SR, 2), "words": len(ref.split())})
        return x, ref, words

    sc = 0.1 if tiny else 1.0
    for i in range(1 if tiny else 4):
        espeak_clip(os.path.join(pt, "espeak-heldout"), f"espeak{i + 1}", i, 61 * sc, 68 * sc)
    for i, v in enumerate(FLITE_VOICES[:1] if tiny else FLITE_VOICES):
        x, utts = flite_until(pool, v, rng, 61 * sc, 70 * sc)
        x, ref = write_clip(os.path.join(pt, "flite"), f"flite_{v}", x, utts)
        manifest.append({"file": f"public/test-sets/flite/flite_{v}.wav", "voice": "flite:" + v,
                         "seconds": round(len(x) / SR, 2), "words": len(ref.split())})
    if not tiny:
        for i in range(2):
            espeak_clip(os.path.join(pt, "long-4min"), f"long4_{i + 1}", i + 5, 238, 250)
        espeak_clip(os.path.join(pt, "long-10min"), "long10_1", 7, 600, 615)
        espeak_clip(os.path.join(repo, "public", "samples"), "sample1", 3, 28, 34)
    # fixtures: clip1 espeak held-out 8-12 s, clip2 flite 8-12 s
    fx = os.path.join(repo, "public", "models", "wnw-ref", "fixtures")
    os.makedirs(fx, exist_ok=True)
    x, ref, _ = espeak_clip(fx, "clip1", 2, 8, 11)
    manifest.pop()
    x, utts = flite_until(pool, "slt", rng, 8, 12)
    write_clip(fx, "clip2", x, utts)
    json.dump(manifest, open(os.path.join(pt, "manifest.json"), "w"), indent=1)

    # calibration: training voices, calibration texts, 10-14 s, word spans
    cd = os.path.join(repo, "calibration-data")
    os.makedirs(cd, exist_ok=True)
    cpool = list(calib_texts)
    r.shuffle(cpool)
    n_cal = 2 if tiny else 50
    cman = []
    for i in range(n_cal):
        voice = f"{r.choice(TRAIN_BASES)}+{r.choice(train_vars)}"
        rate = r.randint(140, 185)
        x, utts, words = synth_until(cpool, voice, rate, r.randint(30, 70), r.randint(40, 70), rng, 10.0, 12.5,
                                     gaps=(0.2, 0.4))
        x = peak_pcm16(x)
        name = f"calib{i + 1:03d}"
        write_wav(os.path.join(cd, name + ".wav"), x)
        text = " ".join(u[2] for u in utts)
        json.dump({"text": text, "words": words, "voice": voice, "rate": rate},
                  open(os.path.join(cd, name + ".json"), "w"), indent=1)
        cman.append({"name": name, "voice": voice, "seconds": round(len(x) / SR, 2)})
    json.dump(cman, open(os.path.join(cd, "manifest.json"), "w"), indent=1)


def build_val(work, tiny=False):
    """data/val: the training's validation clips, held-out voices reading calibration texts
    (never test texts), so the progress gates of the CTC and decoder stages read no clip of
    a test set. Two clips of about a minute (seconds with --tiny); built once."""
    d = os.path.join(work, "data", "val")
    if os.path.exists(os.path.join(d, "done")):
        return d
    os.makedirs(d, exist_ok=True)
    _, held_vars = variants()
    r = random.Random(11)
    rng = np.random.default_rng(11)
    pool = [t for _, t in load_fortunes() if text_split(t) == "calib"]
    r.shuffle(pool)
    sc = 0.1 if tiny else 1.0
    for i in range(2):
        voice = f"{HELDOUT_BASES[i % len(HELDOUT_BASES)]}+{held_vars[-1 - i]}"
        x, utts, _ = synth_until(pool, voice, r.randint(140, 180), r.randint(35, 65), r.randint(40, 70), rng,
                                 61 * sc, 68 * sc)
        write_clip(d, f"val{i + 1}", x, utts)
    open(os.path.join(d, "done"), "w").write("ok")
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="training/work")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--espeak-texts", type=int, default=3000, help="training texts for espeak sessions (0: all)")
    a = ap.parse_args()
    texts = load_fortunes()
    split = {"train": [], "test": [], "calib": []}
    for _, t in texts:
        split[text_split(t)].append(t)
    if a.tiny:
        split = {k: v[:{"train": 240, "test": 80, "calib": 30}[k]] for k, v in split.items()}
    os.makedirs(a.work, exist_ok=True)
    print({k: len(v) for k, v in split.items()})
    if not a.skip_tests and not os.path.exists(os.path.join(a.work, "tests_done")):
        build_tests(a.repo, split["test"], split["calib"], a.tiny)
        open(os.path.join(a.work, "tests_done"), "w").write("ok")
        print("test sets written")
    build_train(a.work, split["train"], a.tiny, espeak_texts=a.espeak_texts)


if __name__ == "__main__":
    main()
