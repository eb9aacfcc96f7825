"""The audio a decoder stage trains on, cached on disk in work/data: the frozen
encoder's outputs of every training session (EmbeddingCache), or label embeddings
laid out from the synthesiser's word spans or phoneme events in their place
(LabelCache, the label stage)."""
import json
import os
import time

import numpy as np
import torch

from infer import encode_windows
from train_common import dev, frame_labels, log, phoneme_labels


class EmbeddingCache:
    """float16 encoder embeddings of every training session, on disk."""

    def __init__(self, work, cfg, data, enc, tag):
        def fill(out):
            enc.eval()
            for si, s in enumerate(data.sessions):
                n = (s["frames"] // self.fpt) * self.fpt
                emb = encode_windows(enc, data.frames(si, 0, n), cfg)
                out[self.offsets[si]:self.offsets[si + 1]] = emb.cpu().numpy().astype(np.float16)
            return f"dec: cached encoder embeddings of {len(data.sessions)} sessions ({self.offsets[-1]} tokens)"

        self._load(work, "dec_cache.npy", cfg, data, tag, cfg["hidden_size"], fill)

    def _load(self, work, name, cfg, data, tag, width, fill):
        """the cache file `name` of work/data ([tokens, width] float16), rebuilt by
        fill(memmap) -> log line unless its json sidecar carries `tag`."""
        path = os.path.join(work, "data", name)
        self.fpt = cfg["audio"]["frames_per_token"]
        self.offsets = np.cumsum([0] + [s["frames"] // self.fpt for s in data.sessions])
        if not (os.path.exists(path + ".json") and json.load(open(path + ".json")).get("tag") == tag):
            t0 = time.time()
            out = np.lib.format.open_memmap(path + ".tmp", mode="w+", dtype=np.float16,
                                            shape=(int(self.offsets[-1]), width))
            msg = fill(out)
            out.flush()
            del out
            os.replace(path + ".tmp", path)
            json.dump({"tag": tag}, open(path + ".json", "w"))
            log(work, f"{msg} in {time.time() - t0:.0f}s")
        self.emb = np.load(path, mmap_mode="r")

    def span(self, si, a, n):
        s0 = self.offsets[si] + a // self.fpt
        s1 = min(self.offsets[si + 1], s0 + n // self.fpt)
        return torch.from_numpy(np.asarray(self.emb[s0:s1], dtype=np.float32)).to(dev())


class LabelCache(EmbeddingCache):
    """Label embeddings in the place of the encoder's, for the label stage: at each
    12.5 Hz audio token, with `source` "phoneme" (an encoder with a phoneme head), the
    sum of the phoneme head's rows for the phonemes of its two 25 Hz frames (espeak's
    phoneme events, train_common.phoneme_labels); with "piece", the framewise subword
    head's row for the piece the synthesiser's word spans put there
    (train_common.frame_labels; its silence row between words). Each is scaled to
    the encoder embeddings' rms, with a share `corrupt` of the frames (tokens) given
    a random phoneme (piece) and Gaussian noise of `noise` x rms (drawn once per
    session, in session order, seed 0). Phoneme labels are what the real embeddings
    carry in every voice (the encoder's phoneme head is about as right on held-out
    voices as on training ones, where its spelling heads are not), so the decoder
    learns to spell from sounds, not to copy pieces. On these a decoder finds the
    reading circuits (where is the next piece, copy it out) in minutes, where on the
    noisy real embeddings the LM loss sat at a text-only level for the CPU runs'
    whole budgets; the decoder stage then adapts them to the real encoder. Only
    sessions with word spans (not festival) are sampled (`weights`)."""

    def __init__(self, work, cfg, sp, data, enc, real, enc_tag, noise, corrupt, source="phoneme"):
        V = cfg["vocab_size"]
        rate = cfg["audio"]["tokens_per_second"]
        if source == "phoneme" and enc.frame_ph is None:
            raise ValueError("--label-source phoneme needs an encoder with a phoneme head (--phoneme-weight > 0)")
        key = "phonemes" if source == "phoneme" else "words"
        self.weights = np.array([len(s["utts"]) if s.get(key) else 0 for s in data.sessions], dtype=np.float64)
        self.weights /= self.weights.sum()
        if source == "phoneme":
            P = enc.n_phonemes + 1
            wp = enc.frame_ph.weight.detach().float().cpu().numpy()
            w = (wp[:P, None, :] + wp[None, P:, :]).reshape(P * P, -1)  # row p1 * P + p2
            ids = {p: i + 1 for i, p in enumerate(data.phonemes)}
        else:
            w = enc.frame_bpe.weight.detach().float().cpu().numpy()

        def labels(s, n, rng):
            if source == "piece":
                lab = frame_labels(sp, [tuple(x) for x in s["words"]], 2 * n, V, rate)[1][:n].copy()
                m = rng.random(len(lab)) < corrupt
                lab[m] = rng.integers(0, V + 1, size=int(m.sum()))
                return lab
            ph = phoneme_labels([(t, ids.get(p, 0)) for t, p in s["phonemes"]], 2 * n, 2 * rate)
            m = rng.random(len(ph)) < corrupt
            ph[m] = rng.integers(0, P, size=int(m.sum()))
            return ph[0::2] * P + ph[1::2]

        def fill(out):
            rms = float(np.sqrt(np.mean(np.square(np.asarray(real.emb[:4096], dtype=np.float32)))))
            table = w / np.sqrt((w ** 2).mean(1, keepdims=True)) * rms
            rng = np.random.default_rng(0)
            for si, s in enumerate(data.sessions):
                n = s["frames"] // self.fpt
                if not s.get(key):
                    out[self.offsets[si]:self.offsets[si + 1]] = 0
                    continue
                out[self.offsets[si]:self.offsets[si + 1]] = table[labels(s, n, rng)] + rng.normal(
                    0, noise * rms, size=(n, w.shape[1]))
            return f"label: {source} label embeddings of {int((self.weights > 0).sum())} sessions written"

        self._load(work, "label_cache.npy", cfg, data, f"{enc_tag} {source} noise {noise} corrupt {corrupt}",
                   w.shape[1], fill)
