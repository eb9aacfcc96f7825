"""Shared pieces of the wnw-ref training pipeline: text normalisation, the mel
front-end (the exact spec the TypeScript side reimplements), espeak-ng synthesis
with word events (ctypes), resampling, and a dependency-free safetensors writer.
"""
import ctypes
import json
import os
import re
import struct

import numpy as np

SR = 16000
N_FFT = 512
WIN = 400
HOP = 160
N_MELS = 80
F_MIN = 0.0
F_MAX = 8000.0
MEL_FLOOR = 1e-6

# --------------------------------------------------------------------------- text

_ABBREV = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|vs|etc|Inc|Ltd|Co|Gen|Capt|Lt|Sgt|Rev|Mt|No|Vol|Ph|e\.g|i\.e)\.", re.I)


def normalise(text):
    """Transcript normalisation used everywhere (training targets, references,
    hypotheses): lower-case, hyphens/slashes to spaces, keep letters and the
    apostrophe, drop every other character, collapse spaces."""
    t = text.lower().replace("\u2019", "'")
    t = re.sub(r"[-/_]", " ", t)
    t = re.sub(r"[^a-z' ]", " ", t)
    # apostrophes only inside words (don't, o'clock), not quotes
    t = re.sub(r"(?<![a-z])'|'(?![a-z])", " ", t)
    return " ".join(t.split())


def speakable(text):
    """Keep texts whose spoken form matches their written words: no digits, no
    abbreviations, no all-caps acronyms (espeak spells those), no odd symbols."""
    if re.search(r"[0-9@#$%^&*+=<>|\\{}\[\]~`_]", text):
        return False
    if _ABBREV.search(text):
        return False
    if re.search(r"\b[A-Z]{2,}\b", text):
        return False
    if re.search(r"[A-Za-z]\.[A-Za-z]", text):
        return False
    if re.search(r"[^\x20-\x7e]", text):
        return False
    return True


def load_fortunes(root="/usr/share/games/fortunes"):
    """All fortune texts (plain files without extension), cleaned, speakable."""
    out = []
    for name in sorted(os.listdir(root)):
        p = os.path.join(root, name)
        if "." in name or not os.path.isfile(p) or name in ("art", "ascii-art"):
            continue
        try:
            raw = open(p, encoding="latin-1").read()
        except Exception:
            continue
        for chunk in raw.split("\n%\n"):
            lines = [l for l in chunk.split("\n") if l.strip()]
            # drop attribution lines ("-- Someone")
            lines = [l for l in lines if not l.strip().startswith("--")]
            txt = " ".join(l.strip() for l in lines)
            txt = re.sub(r"\s+", " ", txt).strip()
            if not txt or not speakable(txt):
                continue
            n = len(normalise(txt).split())
            if n < 4 or n > 120:
                continue
            out.append((name, txt))
    return out


# --------------------------------------------------------------------------- mel


def mel_filterbank():
    def hz2mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel2hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    pts = mel2hz(np.linspace(hz2mel(F_MIN), hz2mel(F_MAX), N_MELS + 2))
    freqs = np.arange(N_FFT // 2 + 1) * SR / N_FFT
    fb = np.zeros((N_MELS, N_FFT // 2 + 1), dtype=np.float64)
    for m in range(N_MELS):
        lo, c, hi = pts[m], pts[m + 1], pts[m + 2]
        rise = (freqs - lo) / (c - lo)
        fall = (hi - freqs) / (hi - c)
        fb[m] = np.maximum(0.0, np.minimum(rise, fall))
    return fb


_FB = mel_filterbank()
_WINDOW = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WIN) / WIN)


def log_mel(x):
    """float32 mono 16 kHz samples -> [n_mels, T] ln(mel + floor), T = n // hop.
    Frame t covers samples [t*hop - win/2, t*hop + win/2) of the reflect-padded
    signal; periodic Hann(400) zero-padded to 512; power spectrum; HTK mel."""
    x = np.asarray(x, dtype=np.float64)
    T = len(x) // HOP
    pad = WIN // 2
    xp = np.pad(x, (pad, pad), mode="reflect")
    idx = np.arange(WIN)[None, :] + HOP * np.arange(T)[:, None]
    out = np.empty((N_MELS, T), dtype=np.float32)
    step = 4096
    for s in range(0, T, step):
        fr = xp[idx[s:s + step]] * _WINDOW
        spec = np.fft.rfft(fr, n=N_FFT, axis=1)
        pw = spec.real ** 2 + spec.imag ** 2
        out[:, s:s + step] = np.log(pw @ _FB.T + MEL_FLOOR).T
    return out


def resample(x, sr_in, sr_out=SR):
    """Band-limited FFT resampling of a whole clip (input zero-padded to a
    length whose FFT sizes factor into small primes, then trimmed)."""
    if sr_in == sr_out:
        return np.asarray(x, dtype=np.float32)
    from math import gcd
    g = gcd(int(sr_in), int(sr_out))
    p, q = sr_out // g, sr_in // g  # n_out/n_in = p/q
    n = len(x)
    m = 1
    while q * m < n:
        m *= 2
    n_in, n_out = q * m, p * m
    X = np.fft.rfft(np.pad(np.asarray(x, dtype=np.float64), (0, n_in - n)))
    nb = n_out // 2 + 1
    Y = np.zeros(nb, dtype=np.complex128)
    k = min(nb, len(X))
    Y[:k] = X[:k]
    y = np.fft.irfft(Y, n=n_out) * (n_out / n_in)
    return y[:int(round(n * p / q))].astype(np.float32)


def sox_resample(x, sr_in, sr_out=SR):
    """Resample with sox (fast C); float32 in, float32 out."""
    import subprocess
    if sr_in == sr_out:
        return np.asarray(x, dtype=np.float32)
    r = subprocess.run(["sox", "-R", "-t", "raw", "-r", str(sr_in), "-e", "floating-point", "-b", "32", "-c", "1", "-",
                        "-t", "raw", "-r", str(sr_out), "-e", "floating-point", "-b", "32", "-c", "1", "-"],
                       input=np.asarray(x, dtype="<f4").tobytes(), capture_output=True, check=True)
    return np.frombuffer(r.stdout, dtype="<f4").copy()


def log_mel_fast(x):
    """Same as log_mel in float32 with torch (bulk training data only)."""
    import torch
    x = torch.as_tensor(np.asarray(x, dtype=np.float32))
    T = len(x) // HOP
    xp = torch.nn.functional.pad(x[None, None], (WIN // 2, WIN // 2), mode="reflect")[0, 0]
    fr = xp.unfold(0, WIN, HOP)[:T] * torch.as_tensor(_WINDOW, dtype=torch.float32)
    spec = torch.fft.rfft(fr, n=N_FFT, dim=1)
    pw = spec.real ** 2 + spec.imag ** 2
    return torch.log(pw @ torch.as_tensor(_FB.T, dtype=torch.float32) + MEL_FLOOR).T.contiguous().numpy()


def read_wav(path):
    import wave
    with wave.open(path, "rb") as w:
        sr = w.getframerate()
        n = w.getnframes()
        ch = w.getnchannels()
        sw = w.getsampwidth()
        data = w.readframes(n)
    assert sw == 2, path
    x = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    if ch > 1:
        x = x.reshape(-1, ch).mean(1)
    return x, sr


def write_wav(path, x, sr=SR):
    import wave
    y = np.clip(np.round(np.asarray(x) * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(y.tobytes())


def pcm16_roundtrip(x):
    return (np.clip(np.round(np.asarray(x) * 32768.0), -32768, 32767).astype(np.int16).astype(np.float32) / 32768.0)


# --------------------------------------------------------------------------- espeak


class _EvId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint), ("text_position", ctypes.c_int),
                ("length", ctypes.c_int), ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _EvId)]


_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


class Espeak:
    """espeak-ng through its C library: samples plus word events (ms); the phoneme
    events of the last synth() are in `phonemes` [(ms, mnemonic)]."""

    def __init__(self):
        self.lib = ctypes.CDLL("libespeak-ng.so.1")
        self.lib.espeak_Initialize.restype = ctypes.c_int
        # AUDIO_OUTPUT_SYNCHRONOUS; espeakINITIALIZE_PHONEME_EVENTS (the audio is the same)
        self.sr = self.lib.espeak_Initialize(2, 0, None, 1)
        self._chunks = []
        self._events = []
        self.phonemes = []

        def cb(wav, n, ev):
            if n > 0 and wav:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            i = 0
            while ev[i].type != 0:
                e = ev[i]
                if e.type == 1:  # espeakEVENT_WORD
                    self._events.append((e.text_position, e.length, e.audio_position))
                elif e.type == 7:  # espeakEVENT_PHONEME
                    self.phonemes.append((e.audio_position, bytes(e.id.string).split(b"\0")[0].decode("ascii", "replace")))
                i += 1
            return 0

        self._cb = _CB(cb)
        self.lib.espeak_SetSynthCallback(self._cb)
        self.lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                          ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]

    def synth(self, text, voice, rate=170, pitch=50, prange=50, wordgap=0):
        self._chunks, self._events, self.phonemes = [], [], []
        self.lib.espeak_SetVoiceByName(voice.encode())
        self.lib.espeak_SetParameter(1, int(rate), 0)
        self.lib.espeak_SetParameter(3, int(pitch), 0)
        self.lib.espeak_SetParameter(4, int(prange), 0)
        self.lib.espeak_SetParameter(7, int(wordgap), 0)
        b = text.encode("utf-8") + b"\0"
        self.lib.espeak_Synth(b, len(b), 0, 1, 0, 1, None, None)  # POS_CHARACTER, espeakCHARS_UTF8
        self.lib.espeak_Synchronize()
        x = np.concatenate(self._chunks).astype(np.float32) / 32768.0 if self._chunks else np.zeros(1, np.float32)
        return x, self.sr, list(self._events)


def espeak_words(text, events, dur_s, x16=None, sr=16000):
    """Map espeak word events to normalised words with (start, end) seconds.
    Every whitespace word of the text that normalises to something gets a span.
    Words with their own espeak WORD event: start = event audio position,
    confidence 1.0. Words espeak merged into a neighbour (no event, e.g. "the"
    in "with the possible") share the interval up to the next event, split in
    proportion to character count, confidence 0.5. end = next word's start,
    pulled back over trailing silence (envelope < 2 % of the clip peak)."""
    spans = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", text)]
    start = [None] * len(spans)
    for (tp, ln, ms) in events:
        pos = tp - 1
        for i, (a, b, w) in enumerate(spans):
            if a <= pos < b:
                if start[i] is None:
                    start[i] = ms / 1000.0
                break
    items = []  # (norm word, start, conf, span idx)
    for i, (a, b, w) in enumerate(spans):
        nw = normalise(w)
        if not nw:
            continue
        items.append([nw, start[i], 1.0 if start[i] is not None else 0.5])
    # interpolate missing starts
    n = len(items)
    i = 0
    while i < n:
        if items[i][1] is None:
            j = i
            while j < n and items[j][1] is None:
                j += 1
            prev_t = items[i - 1][1] if i > 0 else 0.0
            prev_len = len(items[i - 1][0]) if i > 0 else 0
            next_t = items[j][1] if j < n else dur_s
            lens = [prev_len] + [len(items[k][0]) for k in range(i, j)]
            tot = float(sum(lens)) or 1.0
            acc = prev_len
            for k in range(i, j):
                items[k][1] = prev_t + (next_t - prev_t) * acc / tot
                acc += len(items[k][0])
            i = j
        else:
            i += 1
    env = None
    hop = sr // 100
    if x16 is not None and len(x16) >= hop:
        fr = len(x16) // hop
        env = np.abs(x16[:fr * hop]).reshape(fr, hop).max(1)
        thr = 0.02 * (env.max() + 1e-9)
    out = []
    for i, (w, st, conf) in enumerate(items):
        end = items[i + 1][1] if i + 1 < n else dur_s
        if env is not None:
            a, b = int(st * 100), min(int(end * 100), len(env))
            while b - 1 > a + 1 and env[b - 1] < thr:
                b -= 1
            end = max(st + 0.02, b / 100.0)
        for piece in w.split():
            out.append({"word": piece, "start": round(st, 3), "end": round(end, 3), "confidence": conf})
    return out


# --------------------------------------------------------------------------- safetensors


def save_safetensors(path, tensors):
    """tensors: dict name -> numpy array (float32 -> F32, int32 -> I32)."""
    header = {}
    blobs = []
    off = 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype == np.float32:
            dt = "F32"
        elif arr.dtype == np.int32:
            dt = "I32"
        else:
            raise ValueError(f"{name}: dtype {arr.dtype}")
        b = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "I32": "<i4"}[h["dtype"]]
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(h["shape"]).copy()
    return out


# --------------------------------------------------------------------------- metric


def wer(ref, hyp):
    """Method-doc WER: lower-case, strip punctuation except apostrophe and
    period, truncate hypothesis to 1.2x reference length (words), then word
    edit distance / reference words."""
    def norm(s):
        s = s.lower()
        s = re.sub(r"[^a-z0-9'. ]", " ", s)
        return s.split()
    r, h = norm(ref), norm(hyp)
    h = h[:int(1.2 * len(r))]
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            cur = d[j]
            d[j] = min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
            prev = cur
    return d[len(h)] / max(1, len(r)), d[len(h)], len(r)
