"""The whole training pipeline on tiny data in a temp dir (data generation, tokenizer,
CTC steps, label and decoder steps, export): losses fall, the export loads (safetensors
header parses, shapes match config.json, onnx checker passes, fixtures written), packed
data trains elsewhere, and --encoder-from / --label-init / --piece-labels / --keep resume
on a fresh work folder. Run by test_smoke.py's plain runner, or by pytest."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _losses(logfile, kind):
    out = []
    for line in open(logfile):
        m = re.search(rf"{kind} step \d+ .*?loss ([0-9.]+)", line)
        if m:
            out.append(float(m.group(1)))
    return out



TINY = ["--tiny", "--ctc-steps", "8", "--ctc-batch-s", "8", "--ctc-lr", "3e-3", "--phases", "8:2-5:6",
        "--label-phases", "8:2-5:6", "--label-lr", "3e-3", "--label-warmup", "2", "--dec-warmup", "2",
        "--dec-lr", "3e-3", "--log-every", "1", "--val-every", "1000", "--warmup", "2", "--skip-eval", "--threads", "1"]


def test_pipeline_tiny_phonemes():
    """the phoneme head and phoneme label embeddings, end to end: trained, exported,
    loaded back by the Python tools."""
    from export import load_model
    with tempfile.TemporaryDirectory() as d:
        work, repo = os.path.join(d, "work"), os.path.join(d, "repo")
        os.makedirs(repo)
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--work", work, "--repo", repo, *TINY,
               "--phoneme-weight", "1", "--label-source", "phoneme"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        text = open(os.path.join(work, "train.log")).read()
        assert max(float(v) for v in re.findall(r"phoneme ([0-9.]+);", text)) > 0, "no phoneme loss"
        assert "label: phoneme label embeddings" in text
        _, enc, _, _ = load_model(os.path.join(repo, "public", "models", "wnw-ref"))
        assert enc.n_phonemes > 10


def test_pipeline_tiny():
    import struct
    from common import load_safetensors
    with tempfile.TemporaryDirectory() as d:
        work, repo = os.path.join(d, "work"), os.path.join(d, "repo")
        os.makedirs(repo)
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--work", work, "--repo", repo, *TINY]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        log = os.path.join(work, "train.log")
        for kind in ("ctc", "label", "dec"):
            ls = _losses(log, kind)
            assert len(ls) >= 6, (kind, ls)
            assert np.mean(ls[-2:]) < np.mean(ls[:2]), (kind, ls)
        # the word spans reach both stages: framewise targets and guided heads are trained on
        text = open(log).read()
        assert max(float(v) for v in re.findall(r"frame char ([0-9.]+)", text)) > 0, "no framewise loss"
        assert max(float(v) for v in re.findall(r"guide ([0-9.]+)\)", text)) > 0, "no guide loss"
        out = os.path.join(repo, "public", "models", "wnw-ref")
        cfg = json.load(open(os.path.join(out, "config.json")))
        with open(os.path.join(out, "decoder.safetensors"), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        D, V, Fd = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
        H, Hkv, hd = cfg["num_heads"], cfg["num_kv_heads"], cfg["head_dim"]
        assert cfg["num_layers"] * Hkv >= 32 and hd >= 32 and H % Hkv == 0
        exp = {"embed_tokens.weight": [V, D], "norm.weight": [D], "lm_head.weight": [V, D]}
        for l in range(cfg["num_layers"]):
            p = f"layers.{l}."
            exp.update({p + "attn_norm.weight": [D], p + "q_proj.weight": [H * hd, D], p + "k_proj.weight": [Hkv * hd, D],
                        p + "v_proj.weight": [Hkv * hd, D], p + "o_proj.weight": [D, H * hd],
                        p + "mlp_norm.weight": [D], p + "gate_proj.weight": [Fd, D], p + "up_proj.weight": [Fd, D],
                        p + "down_proj.weight": [D, Fd]})
        assert {k: v["shape"] for k, v in header.items()} == exp
        assert all(v["dtype"] == "F32" for v in header.values())
        w = load_safetensors(os.path.join(out, "decoder.safetensors"))
        assert all(np.isfinite(v).all() for v in w.values())
        import onnx
        m = onnx.load(os.path.join(out, "encoder.onnx"))
        onnx.checker.check_model(m)
        assert m.graph.input[0].name == "mel" and m.graph.output[0].name == "embeddings"
        dims = m.graph.input[0].type.tensor_type.shape.dim
        assert dims[2].dim_param, "time axis must be dynamic"
        tok = json.load(open(os.path.join(out, "tokenizer.json")))
        assert len(tok["pieces"]) == V and tok["pieces"][:3] == ["<pad>", "<s>", "</s>"]
        fx = load_safetensors(os.path.join(out, "fixtures", "clip1.safetensors"))
        assert fx["logits"].shape == (32, V) and fx["tokens"].shape == (32,) and fx["tokens"].dtype == np.int32
        assert fx["embeddings"].shape[1] == D and fx["mel"].shape[1] == 8 * fx["embeddings"].shape[0]
        assert (fx["prompt"] == -1).sum() == fx["embeddings"].shape[0]
        # the same data packed for another machine trains there (a few steps, no export)
        pack = os.path.join(d, "pack")
        r = subprocess.run([sys.executable, os.path.join(HERE, "pack_data.py"), "--work", work, "--out", pack,
                            "--jobs", "1"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert not os.path.exists(os.path.join(pack, "data", "train_mel.npy"))
        keep = os.path.join(d, "keep_pack")
        packed = cmd[:2] + ["--work", pack] + cmd[4:] + ["--ctc-steps", "2", "--phases", "2:2-5:6", "--no-export",
                                                          "--loader-threads", "2", "--char-per-frame", "2",
                                                          "--dec-embed-init", "ctc", "--keep", keep]
        r = subprocess.run(packed, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert len(_losses(os.path.join(pack, "train.log"), "dec")) == 2
        assert "token embeddings initialised from the encoder's subword ctc head" in open(os.path.join(pack, "train.log")).read()
        assert os.path.exists(os.path.join(pack, "dec.pt"))
        # the encoder stage keeps its copy too: a fresh work folder asked for one more step resumes from it
        st = torch.load(os.path.join(keep, "ctc.pt"), map_location="cpu")
        assert "opt" not in st and st["step"] == 2 and all(v.dtype == torch.float16 for v in st["enc"].values())
        os.remove(os.path.join(pack, "ctc.pt"))
        r = subprocess.run([x if x != "2" or packed[i - 1] != "--ctc-steps" else "3" for i, x in enumerate(packed)],
                           capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert f"ctc: resuming from the kept checkpoint {os.path.join(keep, 'ctc.pt')}" in open(
            os.path.join(pack, "train.log")).read()
        assert torch.load(os.path.join(keep, "ctc.pt"), map_location="cpu")["step"] == 3
        _check_encoder_from(d, cmd, work, out)


def _check_encoder_from(d, cmd, work, model):
    """--encoder-from an exported model, --label-init a decoder, --keep: the stages keep
    weights-only float16 copies, and a fresh work folder resumes from them."""
    import shutil
    work2, keep = os.path.join(d, "work2"), os.path.join(d, "keep")
    shutil.copytree(os.path.join(work, "data"), os.path.join(work2, "data"))
    again = cmd[:2] + ["--work", work2] + cmd[4:] + ["--encoder-from", model, "--keep", keep, "--no-export",
                                                      "--label-init", os.path.join(work, "dec.pt"),
                                                      "--piece-labels", model]
    r = subprocess.run(again, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = open(os.path.join(work2, "train.log")).read()
    assert f"ctc: the encoder of {model}, frozen" in text and "label: warm start from" in text
    # --piece-labels: the decoder stage reads the model's label rows, one per audio token
    from train_common import label_table
    assert "encoder output: piece labels" in text
    table = label_table(model, json.load(open(os.path.join(model, "config.json")))["vocab_size"]).astype(np.float16)
    cache = np.load(os.path.join(work2, "data", "dec_cache.npy"))
    hit = (cache[:, None, :] == table[None]).all(-1)
    assert hit.any(1).all()  # (the tiny encoder may name one piece throughout: test_piece_labels varies them)
    for name in ("dec_label.pt", "dec.pt"):
        st = torch.load(os.path.join(keep, name), map_location="cpu")
        assert "opt" not in st and st["done"] and st["step"] == 8, (name, st["step"])
        assert all(v.dtype == torch.float16 for v in st["dec"].values())
    # a fresh machine: the work folder has its data again but no checkpoints; more steps asked
    for name in ("dec_label.pt", "dec.pt", "ctc.pt"):
        os.remove(os.path.join(work2, name))
    more = [x if x != "8:2-5:6" else "10:2-5:6" for x in again]
    r = subprocess.run(more, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = open(os.path.join(work2, "train.log")).read()
    assert f"dec: resuming from the kept checkpoint {os.path.join(keep, 'dec.pt')}" in text
    assert torch.load(os.path.join(keep, "dec.pt"), map_location="cpu")["step"] == 10
