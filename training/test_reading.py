"""Smoke tests of the reading gate (reading.py): simulated timing, oracle labels, a
few resumable training steps and the gate's WER on a decoder that is known to read.
Run with test_smoke.py (its plain runner runs these too) or with pytest.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def _sp():
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=os.path.join(REPO, "public/models/wnw-ref/sentencepiece.model"))


def test_clip_timing():
    import reading
    texts = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine"] * 20
    rng = np.random.default_rng(3)
    words, frames, text = reading.clip(texts, rng, 12.0)
    assert frames % 8 == 0 and text == " ".join(w for _, _, w in words)
    assert all(a < b for a, b, _ in words) and all(words[i][1] <= words[i + 1][0] for i in range(len(words) - 1))
    assert words[0][0] >= 0 and words[-1][1] <= frames / 100 + 0.08 and words[-1][1] <= 12.0 + 0.5
    again = reading.clip(texts, np.random.default_rng(3), 12.0)
    assert again == (words, frames, text)


def test_oracle_weights():
    import reading
    sp = _sp()
    V = 512
    words = [(0.1, 0.5, "hello"), (0.55, 1.2, "wonderful"), (1.5, 1.9, "world")]
    n = 26
    eye = np.eye(V + 1, dtype=np.float32)
    w = reading.oracle(sp, words, n, eye, V)
    assert np.allclose(w.sum(1), 1.0, atol=1e-5)
    pieces = __import__("train_common").piece_spans(sp, words)
    for (pid, p0, p1, _, _) in pieces:
        assert abs(w[:, pid].sum() - (p1 - p0) * reading.RATE) < 1e-4 or sum(p[0] == pid for p in pieces) > 1
    assert w[0, V] > 0.99 and w[-1, V] > 0.99  # silence before the first and after the last word
    table = np.random.default_rng(0).normal(size=(V + 1, 8)).astype(np.float32)
    assert np.allclose(reading.oracle(sp, words, n, table, V), w @ table, atol=1e-5)


def test_gate_reads_with_a_copying_decoder():
    """the gate's WER is 0 for a model that reads perfectly and about 1 for one that
    says nothing: a stand-in decoder that emits the pieces of the oracle clip in order."""
    import reading
    sp = _sp()
    cfg = json.load(open(os.path.join(REPO, "public/models/wnw-ref/config.json")))
    table = np.eye(513, dtype=np.float32)
    texts = reading.split_texts("test")[:50]

    class Reader(torch.nn.Module):  # greedy() calls embed_tokens, forward(h, start_pos, caches, logits_from)
        def __init__(self, truth):
            super().__init__()
            self.embed_tokens = torch.nn.Embedding(513, 513)  # as wide as the oracle rows
            self.layers = [None]
            self.k, self.truth = 0, truth

        def forward(self, h, start_pos=0, caches=None, logits_from=None):
            self.k += int(start_pos > 0)  # the prompt, then one call per emitted token
            lg = torch.zeros(1, 1, 512)
            lg[0, 0, self.truth[self.k] if self.k < len(self.truth) else cfg["tokens"]["eos"]] = 1.0
            return lg

    got = {}
    for mode in ("read", "silent"):
        rng = np.random.default_rng(10_000 * 4)
        _, _, ref = reading.clip(texts, rng, 4, start=int(rng.integers(len(texts))))
        truth = sp.encode(ref) if mode == "read" else []
        got[mode] = reading.gate(Reader(truth), cfg, sp, texts, table, 512, sets=((4, 1),), log_fn=lambda m: None)[4]
    assert got["read"] == 0.0 and got["silent"] == 1.0


def test_reading_run_resumes():
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, os.path.join(HERE, "reading.py"), "--work", d, "--keep", os.path.join(d, "keep"),
               "--layers", "1", "--guide-heads", "0:0", "--phases", "4:1-2:3", "--minutes", "5", "--gate-every", "1000", "--no-final-gate"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert os.path.exists(os.path.join(d, "keep", "read.pt"))
        os.remove(os.path.join(d, "read.pt"))  # a fresh machine: only the kept copy is there
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        log = open(os.path.join(d, "train.log")).read()
        assert "resuming from the kept checkpoint" in log and "read: done at step 4" in log
