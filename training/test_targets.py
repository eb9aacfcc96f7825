"""Smoke tests of the training data and targets: the training sessions come out
bit-identical from build to build, espeak phoneme events and their framewise
labels, the framewise char / piece labels from word spans, the label-stage
embeddings (piece and phoneme sources) and the guided-attention rows and loss.
Run with test_smoke.py (its plain runner runs these too) or with pytest.
"""
import json
import os
import sys
import tempfile

import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def test_train_data_reproducible():
    """the same training sessions built by one worker and by two are bit-identical:
    espeak-ng carries synthesis state from call to call (so each session needs a
    fresh worker, or its audio depends on what that worker synthesised before) and
    sox dithers festival's 16-bit audio at random unless told -R."""
    import gen_data
    texts = [t for _, t in gen_data.load_fortunes() if gen_data.text_split(t) == "train"][:400]
    with tempfile.TemporaryDirectory() as d:
        for name, procs in (("one", 1), ("two", 2)):
            gen_data.build_train(os.path.join(d, name), texts, False, procs=procs, espeak_texts=60, festival_texts=6)
        mels = [np.load(os.path.join(d, n, "data", "train_mel.npy")) for n in ("one", "two")]
        index = [json.load(open(os.path.join(d, n, "data", "train_index.json"))) for n in ("one", "two")]
    assert len(index[0]) == 3 and index[0][-1]["voice"].startswith("festival")
    assert index[0] == index[1]
    assert mels[0].shape == mels[1].shape and np.array_equal(mels[0], mels[1])


def test_phoneme_labels_and_events():
    """espeak's phoneme events reach the index relative to the session, and their
    framewise targets hold each phoneme until the next event (pauses are silence)."""
    from gen_data import synth_session
    from train_common import phoneme_inventory, phoneme_labels
    x, utts, words, phs = synth_session(["young men think", "old men are fools"], "en-us", 170, 50, 50,
                                        np.random.default_rng(0))
    assert [p for _, p in phs[:3]] == ["j", "V", "N"], phs[:5]
    times = [t for t, _ in phs]
    assert times == sorted(times) and utts[1][0] <= times[-1] <= utts[1][1] + 0.01
    assert abs(phs[0][0] - utts[0][0]) < 0.002  # the first phoneme starts the utterance (times kept to ms)
    inv = phoneme_inventory([{"phonemes": phs}])
    assert "_" not in inv and "j" in inv
    lab = phoneme_labels([(0.0, 0), (0.2, 3), (0.4, 1)], 20)
    assert (lab[:5] == 0).all() and (lab[5:10] == 3).all() and (lab[10:] == 1).all()
    assert (phoneme_labels(None, 7) == -100).all()


class _FakeSp:
    """two words, each split into two pieces"""
    PIECES = {"hello": [(10, "\u2581hel"), (11, "lo")], "world": [(12, "\u2581wo"), (13, "rld")]}

    def encode(self, w):
        return [i for word in w.split() for i, _ in self.PIECES[word]]

    def id_to_piece(self, i):
        return {i: p for v in self.PIECES.values() for i, p in v}[i]


def test_frame_labels():
    """framewise targets follow the word spans: silence outside words, a word's letters
    (25 Hz) and pieces (12.5 Hz) in order inside it, nothing without spans."""
    from train_common import char_ids, frame_labels
    sp = _FakeSp()
    words = [(0.2, 0.6, "hello"), (1.0, 1.4, "world")]
    ch, bp = frame_labels(sp, words, 50, 99)
    assert ch.shape == (50,) and bp.shape == (25,)
    assert (ch[:5] == 0).all() and (ch[15:25] == 0).all() and (ch[35:] == 0).all()
    runs = [int(c) for k, c in enumerate(ch[5:15]) if k == 0 or c != ch[5 + k - 1]]
    assert runs == char_ids("helo"), runs  # the double l is one run
    assert [int(c) for k, c in enumerate(ch[25:35]) if k == 0 or c != ch[25 + k - 1]] == char_ids("world")
    seq = [int(b) for k, b in enumerate(bp) if k == 0 or b != bp[k - 1]]
    assert seq == [99, 10, 11, 99, 12, 13, 99], seq
    ch0, bp0 = frame_labels(sp, None, 50, 99)
    assert (ch0 == -100).all() and (bp0 == -100).all()


def test_label_cache():
    """label embeddings: the framewise subword head's row (rms-scaled) of the piece the word
    spans put at each token, silence between words; sessions without spans never drawn;
    noise and corruption as asked."""
    from types import SimpleNamespace
    from caches import LabelCache
    from train_common import frame_labels
    sp = _FakeSp()
    V, D, n = 20, 6, 25
    words = [[0.2, 0.6, "hello"], [1.0, 1.4, "world"]]
    data = SimpleNamespace(sessions=[dict(frames=8 * n, utts=[[0, 1, "hello world"]], words=words),
                                     dict(frames=8 * n, utts=[[0, 1, "x"]])])
    cfg = {"vocab_size": V, "audio": {"frames_per_token": 8, "tokens_per_second": 12.5}}
    torch.manual_seed(0)
    enc = SimpleNamespace(frame_bpe=torch.nn.Linear(D, V + 1))
    real = SimpleNamespace(emb=np.full((4096, D), 2.0, dtype=np.float16))
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "data"))
        lc = LabelCache(d, cfg, sp, data, enc, real, "t", 0.0, 0.0, source="piece")
        lab = frame_labels(sp, [tuple(w) for w in words], 2 * n, V)[1]
        w = enc.frame_bpe.weight.detach().numpy()
        want = w[lab] / np.sqrt((w[lab] ** 2).mean(1, keepdims=True)) * 2.0
        got = lc.span(0, 0, 8 * n).numpy()
        assert np.allclose(got, want, atol=2e-2), np.abs(got - want).max()
        assert list(lc.weights) == [1.0, 0.0]
        noisy = LabelCache(d, cfg, sp, data, enc, real, "t", 0.5, 0.2, source="piece").span(0, 0, 8 * n).numpy()
        resid = noisy - want
        assert 0.5 < float(resid.std()) < 2.0, resid.std()  # noise of 0.5 x rms 2, plus corrupted rows
        with pytest.raises(ValueError, match="phoneme head"):
            LabelCache(d, cfg, sp, data, SimpleNamespace(frame_bpe=enc.frame_bpe, frame_ph=None), real, "t", 0, 0)


def test_label_cache_phonemes():
    """phoneme label embeddings: at each token the sum of the phoneme head's rows for its
    two 25 Hz frames (first frame from the first half of the head), rms-scaled; sessions
    without phoneme events never drawn."""
    from types import SimpleNamespace
    from caches import LabelCache
    D, n, P = 6, 10, 3  # two phonemes + silence
    phs = [[0.0, "_"], [0.12, "a"], [0.2, "b"], [0.5, "_"]]
    data = SimpleNamespace(phonemes=["a", "b"], sessions=[dict(frames=8 * n, utts=[[0, 1, "x"]], phonemes=phs),
                                                         dict(frames=8 * n, utts=[[0, 1, "y"]])])
    cfg = {"vocab_size": 16, "audio": {"frames_per_token": 8, "tokens_per_second": 12.5}}
    torch.manual_seed(0)
    enc = SimpleNamespace(frame_ph=torch.nn.Linear(D, 2 * P), n_phonemes=P - 1)
    real = SimpleNamespace(emb=np.full((4096, D), 2.0, dtype=np.float16))
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "data"))
        lc = LabelCache(d, cfg, None, data, enc, real, "t", 0.0, 0.0)
        w = enc.frame_ph.weight.detach().numpy()
        frames = [0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0]  # 25 Hz, 40 ms each
        want = np.stack([w[frames[2 * t]] + w[P + frames[2 * t + 1]] for t in range(n)])
        want = want / np.sqrt((want ** 2).mean(1, keepdims=True)) * 2.0
        got = lc.span(0, 0, 8 * n).numpy()
        assert np.allclose(got, want, atol=2e-2), np.abs(got - want).max()
        assert list(lc.weights) == [1.0, 0.0]


def test_guide_rows_and_loss():
    """guide rows point each transcript piece's row at its word's audio frames; the
    guide loss is what it says (-log mass) and training on it moves the mass there."""
    from model import Decoder
    from stage_dec import guide_loss, guide_rows
    from train import default_cfg
    sp = _FakeSp()
    words = [(0.2, 0.6, "hello"), (1.0, 1.4, "world")]
    N, start = 25, 1 + 25 + 2
    rows = guide_rows(sp, words, [10, 11, 12, 13], N, start)
    assert [r[0] for r in rows] == [start - 1, start, start + 1, start + 2]
    assert rows[0][1:] == rows[1][1:] == (1 + 1, 1 + 9) and rows[2][1:] == (1 + 11, 1 + 19), rows
    assert guide_rows(sp, words, [10, 11, 12], N, start) == []  # ids that the spans do not give
    torch.manual_seed(0)
    cfg = default_cfg(vocab=40)
    cfg.update(hidden_size=32, intermediate_size=48, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8)
    dec = Decoder(cfg)
    dec.layers[1].guide_heads = [0, 2]
    L = start + 5
    h = torch.randn(1, L, 32)
    opt = torch.optim.Adam(dec.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        dec(h)
        att = dec.layers[1].guided_att.detach()
        g = guide_loss(dec, [rows], L)
        want = -torch.log(torch.stack([att[0, :, r, lo:hi].sum(-1) for r, lo, hi in rows]) + 1e-6).mean()
        assert abs(float(g) - float(want)) < 1e-4
        losses.append(float(g))
        opt.zero_grad()
        g.backward()
        opt.step()
    assert losses[-1] < 0.5 * losses[0], losses
