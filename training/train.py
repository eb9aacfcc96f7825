"""wnw-ref: the whole pipeline from one command.

  /usr/bin/python3 training/train.py            (npm run train)

Stages (each resumable; state in --work, default training/work/):
  1. data      gen_data.py: espeak-ng/festival training sessions, test sets,
               calibration clips, fixture clips (skipped if present)
  2. tokenizer sentencepiece BPE (512) on the normalised training texts
  3. ctc       stage_ctc.py: encoder pretraining, char CTC at 25 Hz + subword
               CTC at 12.5 Hz, frequency-warped and masked mels
  4. dec       stage_dec.py: decoder-only LM on [bos][audio][instruction][text]
               [eos] over cached embeddings of the frozen encoder, curriculum of
               clip lengths (phases below)
  5. export    public/models/wnw-ref/ (config, safetensors, onnx, tokenizer,
               fixtures) -- export.py; eval -- evaluate.py
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stage_ctc import stage_ctc  # noqa: E402
from stage_dec import stage_dec  # noqa: E402
from common import load_safetensors  # noqa: E402
from train_common import Data, keep_heap, label_table, load_val, log, save_ckpt, set_dev  # noqa: E402
from gen_data import build_val  # noqa: E402

INSTRUCTION = "transcribe"


def default_cfg(vocab=512):
    return {
        "name": "wnw-ref", "vocab_size": vocab, "hidden_size": 192, "intermediate_size": 512,
        "num_layers": 4, "num_heads": 16, "num_kv_heads": 8, "head_dim": 32,
        "rope_theta": 1e6, "rms_norm_eps": 1e-5, "max_positions": 16384,
        "tokens": {"bos": 1, "eos": 2, "pad": 0}, "instruction": [],
        "audio": {"sample_rate": 16000, "n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 80,
                  "f_min": 0.0, "f_max": 8000.0, "mel_floor": 1e-6, "mel_mean": 0.0, "mel_std": 1.0,
                  "frames_per_token": 8, "tokens_per_second": 12.5, "encoder_window_frames": 3000},
    }


def stage_tokenizer(work, cfg, tiny):
    import sentencepiece as spm
    tokdir = os.path.join(work, "tok")
    os.makedirs(tokdir, exist_ok=True)
    model = os.path.join(tokdir, "sp.model")
    if not os.path.exists(model):
        idx = json.load(open(os.path.join(work, "data", "train_index.json")))
        txt = os.path.join(tokdir, "text.txt")
        with open(txt, "w") as f:
            for s in idx:
                for u in s["utts"]:
                    f.write(u[2] + "\n")
        spm.SentencePieceTrainer.train(
            input=txt, model_prefix=os.path.join(tokdir, "sp"), vocab_size=cfg["vocab_size"], model_type="bpe",
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, character_coverage=1.0, normalization_rule_name="identity",
            user_defined_symbols=[], hard_vocab_limit=not tiny, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=model)
    cfg["vocab_size"] = sp.get_piece_size()
    cfg["instruction"] = sp.encode(INSTRUCTION)
    return sp


def adopt_encoder(a, cfg):
    """--encoder-from DIR: a decoder trained on an exported model's encoder, frozen as it
    is (its mel statistics, its tokenizer, its weights as a finished CTC stage), so that
    a new decoder recipe is measured on the same ears as the model it would replace."""
    src = json.load(open(os.path.join(a.encoder_from, "config.json")))
    for k in ("mel_mean", "mel_std"):
        cfg["audio"][k] = src["audio"][k]
    tok = os.path.join(a.work, "tok", "sp.model")
    if not os.path.exists(tok):
        os.makedirs(os.path.dirname(tok), exist_ok=True)
        shutil.copy(os.path.join(a.encoder_from, "sentencepiece.model"), tok)
    ck = os.path.join(a.work, "ctc.pt")
    if not os.path.exists(ck):
        st = {k: torch.from_numpy(np.asarray(v, dtype=np.float32))
              for k, v in load_safetensors(os.path.join(a.encoder_from, "encoder.safetensors")).items()}
        save_ckpt(ck, enc=st, step=a.ctc_steps, elapsed=a.ctc_minutes * 60, ema=None, done=True)
        log(a.work, f"ctc: the encoder of {a.encoder_from}, frozen")


def do_export(a, cfg, sp, enc, dec, quick=False):
    import copy
    from export import export_all
    t = time.time()
    # export and fixtures always from float32 CPU copies
    export_all(a.out, cfg, sp, copy.deepcopy(enc).cpu().float(), copy.deepcopy(dec).cpu().float(), repo=a.repo,
               work=a.work, quick=quick)
    log(a.work, f"exported to {a.out} ({time.time() - t:.0f}s)")


def main():
    keep_heap()
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--repo", default=os.path.dirname(HERE))
    ap.add_argument("--out", default=None)
    ap.add_argument("--tiny", action="store_true", help="smoke-test sizes")
    ap.add_argument("--espeak-texts", type=int, default=3000,
                    help="training texts read by espeak voices when the data is made (0: all 9,643)")
    ap.add_argument("--ctc-steps", type=int, default=5000)
    ap.add_argument("--ctc-minutes", type=float, default=25)
    ap.add_argument("--ctc-lr", type=float, default=1.5e-3)
    ap.add_argument("--ctc-batch-s", type=float, default=32)
    ap.add_argument("--char-per-frame", type=int, default=1,
                    help="char CTC logits per 25 Hz encoder frame (2: a 50 Hz char head, the next thing to try)")
    ap.add_argument("--ctc-weight", type=float, default=0.5,
                    help="weight of the CTC losses beside the framewise ones in the encoder stage")
    ap.add_argument("--phoneme-weight", type=float, default=0.0,
                    help="weight of the framewise phoneme loss on the encoder's embeddings (0: no phoneme head)")
    ap.add_argument("--encoder-from", default="",
                    help="skip the CTC stage: use this exported model folder's encoder, mel statistics and tokenizer")
    ap.add_argument("--piece-labels", default="",
                    help="model folder: the encoder outputs the label row of its framewise head's argmax piece "
                         "(that folder's label rows, see train_common.label_table) instead of its embedding")
    ap.add_argument("--ctc-init", default="", help="warm-start the encoder from this ctc.pt (matching tensors)")
    ap.add_argument("--augment", type=int, default=1, help="1: frequency warp + SpecAugment in the CTC stage")
    ap.add_argument("--dec-lr", type=float, default=1e-3)
    ap.add_argument("--phases", default="5000:3-15:40,12500:10-45:60,7500:30-100:90",
                    help="steps:min_s-max_s:batch_audio_s,...; a phase ends at its share of the steps or of "
                         "--dec-minutes, whichever comes first")
    ap.add_argument("--dec-embed-init", default="frame", choices=["ctc", "frame", "random"],
                    help="token embeddings of a fresh decoder: the encoder's framewise subword head's rows (frame), "
                         "its subword CTC head's rows (ctc) or random")
    ap.add_argument("--dec-minutes", type=float, default=35)
    ap.add_argument("--label-minutes", type=float, default=32,
                    help="label stage before the decoder stage (0: none): the decoder first reads label "
                         "embeddings laid out from the word spans (caches.LabelCache)")
    ap.add_argument("--label-phases", default="1200:3-15:40,1200:10-45:60", help="--phases of the label stage")
    ap.add_argument("--label-lr", type=float, default=2e-3)
    ap.add_argument("--label-warmup", type=int, default=60)
    ap.add_argument("--label-noise", type=float, default=0.3, help="label stage: Gaussian noise, x embedding rms")
    ap.add_argument("--label-source", default="piece", choices=["phoneme", "piece"],
                    help="label stage: embeddings from the phoneme head's rows (espeak phoneme events) or "
                         "the framewise subword head's (word spans)")
    ap.add_argument("--label-corrupt", type=float, default=0.1, help="label stage: share of tokens given a random piece")
    ap.add_argument("--spread-mode", default="gap", choices=["gap", "stride"],
                    help="gap: shift the text's position ids after the audio; stride: spread every position "
                         "(the first decoder run of the shipped model; see stage_dec)")
    ap.add_argument("--label-init", default="",
                    help="warm-start the label stage from this checkpoint (reading.py's read.pt: a decoder that reads)")
    ap.add_argument("--dec-init", default="", help="warm-start the decoder from this dec.pt (same encoder)")
    ap.add_argument("--guide-heads", default="1:0,1:4,1:8,1:12,2:0,2:4,2:8,2:12",
                    help="layer:query_head,... whose attention is guided toward the audio of the word being "
                         "transcribed (empty: none); see stage_dec.guide_loss")
    ap.add_argument("--guide-weight", type=float, default=1.0)
    ap.add_argument("--guide-span", default="piece", choices=["word", "piece"],
                    help="frames a guided row is pulled toward: its word's, or its piece's share of the word")
    ap.add_argument("--dec-head-init", default="embed", choices=["random", "embed"],
                    help="lm_head of a fresh decoder: random, or along the token embeddings (see stage_dec)")
    ap.add_argument("--warmup", type=int, default=60, help="LR warmup steps of the encoder stage")
    ap.add_argument("--dec-warmup", type=int, default=30, help="LR warmup steps of the decoder stage")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--val-every", type=int, default=100)
    ap.add_argument("--ckpt-minutes", type=float, default=3)
    ap.add_argument("--export-every", type=float, default=20)
    ap.add_argument("--keep", default="",
                    help="also write every stage's checkpoints weights-only (f16) to this folder and resume "
                         "from them on a fresh work folder (an adopted encoder, --encoder-from, is not copied)")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--stop-after", default="", help="ctc|dec: stop after this stage")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("WNW_THREADS", "2")),
                    help="torch intra-op threads (use 1 when the cores are shared: OpenMP barriers stall)")
    ap.add_argument("--device", default="auto", help="auto|cpu|cuda")
    ap.add_argument("--loader-threads", type=int, default=1,
                    help="threads building CTC batches (8 on a GPU machine, whose steps outrun one)")
    ap.add_argument("--no-export", action="store_true",
                    help="stop after training (e.g. on a GPU machine; export where the checkpoints land)")
    ap.add_argument("--spread-positions", type=float, default=10000,
                    help="half of the decoder batches shift the text's position ids by a random gap so that "
                         "sequences reach up to this many positions (0: off)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    set_dev(torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                         ("cpu" if a.device == "auto" else a.device)))
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True  # a small model: TF32 precision is plenty
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    a.out = a.out or os.path.join(a.repo, "public", "models", "wnw-ref")
    os.makedirs(a.work, exist_ok=True)
    T0 = time.time()
    if not os.path.exists(os.path.join(a.work, "data", "train_index.json")):
        cmd = [sys.executable, os.path.join(HERE, "gen_data.py"), "--work", a.work, "--repo", a.repo]
        if a.tiny:
            cmd.append("--tiny")
        subprocess.run(cmd + ["--espeak-texts", str(a.espeak_texts)], check=True)
    cfg = default_cfg()
    stats = json.load(open(os.path.join(a.work, "data", "mel_stats.json")))
    cfg["audio"]["mel_mean"] = round(stats["mel_mean"], 6)
    cfg["audio"]["mel_std"] = round(stats["mel_std"], 6)
    if a.encoder_from:
        adopt_encoder(a, cfg)
    if a.tiny:
        cfg["vocab_size"] = 128
    sp = stage_tokenizer(a.work, cfg, a.tiny)
    log(a.work, f"tokenizer vocab {cfg['vocab_size']} instruction {cfg['instruction']}; data {stats}")
    data = Data(a.work, cfg, sp)
    val = load_val(build_val(a.work, a.tiny))
    enc = stage_ctc(a, cfg, sp, data, val)
    if a.stop_after == "ctc":
        return
    st = torch.load(os.path.join(a.work, "ctc.pt"), map_location="cpu")
    enc_tag = f"ctc step {st['step']} elapsed {st['elapsed']:.0f}"
    if a.piece_labels:
        enc.set_label_rows(label_table(a.piece_labels, cfg["vocab_size"]))
        enc_tag += f" piece labels of {os.path.abspath(a.piece_labels)}"
    if enc.label_rows is not None:
        log(a.work, f"encoder output: piece labels ({enc_tag})")
    dec = stage_dec(a, cfg, sp, data, val, enc, enc_tag,
                    lambda e, d, quick=False: None if a.no_export else do_export(a, cfg, sp, e, d, quick=quick))
    if a.no_export:
        return
    do_export(a, cfg, sp, enc, dec)
    if a.stop_after == "dec" or a.skip_eval:
        return
    subprocess.run([sys.executable, os.path.join(HERE, "evaluate.py"), "--model", a.out, "--repo", a.repo,
                    "--out", os.path.join(a.out, "eval.json")], check=True)
    log(a.work, f"pipeline done in {(time.time() - T0) / 60:.1f} min (this invocation)")


if __name__ == "__main__":
    main()
