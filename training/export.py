"""Export wnw-ref for the TypeScript runtime: config.json, decoder.safetensors,
encoder.onnx (opset 17, dynamic time), tokenizer.json, golden fixtures.
Also loads a model back from an export directory (load_model) so eval and
head_sensitivity work from the shipped files only.

  /usr/bin/python3 training/export.py --model public/models/wnw-ref --out DIR \
      [--encoder CKPT] [--decoder CKPT] [--piece-labels MODEL_DIR]
re-exports a folder with training checkpoints' weights in the place of its own."""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import load_safetensors, read_wav, save_safetensors  # noqa: E402
from infer import build_prompt, detok, encode_windows, greedy, mel_for  # noqa: E402
from model import Decoder, EncoderExport  # noqa: E402


def decoder_tensors(dec):
    out = {}
    for k, v in dec.state_dict().items():
        out[k] = v.detach().float().cpu().numpy().astype(np.float32)
    return out


def export_onnx(enc, path, cfg):
    enc.eval()
    m = EncoderExport(enc)
    x = torch.randn(1, cfg["audio"]["n_mels"], 800)
    torch.onnx.export(m, (x,), path, opset_version=17, input_names=["mel"], output_names=["embeddings"],
                      dynamic_axes={"mel": {2: "T"}, "embeddings": {1: "N"}}, do_constant_folding=True)
    import onnx
    mo = onnx.load(path)
    onnx.checker.check_model(mo)
    return mo


def onnx_reference_run(path, mel):
    """Evaluate the ONNX graph with onnx's reference evaluator when present
    (onnx >= 1.13); returns None if unavailable."""
    try:
        from onnx.reference import ReferenceEvaluator
    except Exception:
        return None
    sess = ReferenceEvaluator(path)
    return sess.run(None, {"mel": mel})[0]


def make_fixture(fx_dir, n, enc, dec, cfg, pieces):
    wav = os.path.join(fx_dir, f"clip{n}.wav")
    if not os.path.exists(wav):
        return None
    x, sr = read_wav(wav)
    ref = open(os.path.join(fx_dir, f"clip{n}.txt")).read().strip()
    mel = mel_for(x, cfg)
    audio = encode_windows(enc, mel, cfg)
    with torch.no_grad():
        toks, logits = greedy(dec, audio, cfg, n_steps=32, stop_at_eos=False, return_logits=True)
    prompt = build_prompt(audio.shape[0], cfg)
    save_safetensors(os.path.join(fx_dir, f"clip{n}.safetensors"), {
        "mel": mel.astype(np.float32),
        "embeddings": audio.numpy().astype(np.float32),
        "prompt": np.array(prompt, dtype=np.int32),
        "logits": torch.stack(logits).numpy().astype(np.float32),
        "tokens": np.array(toks, dtype=np.int32),
    })
    info = {"wav": f"clip{n}.wav", "text": ref, "greedy_text": detok(toks, pieces), "audio_tokens": int(audio.shape[0]),
            "mel_frames": int(mel.shape[1]), "samples": int(len(x)),
            "prompt_dtype": "I32 (-1 marks audio positions)", "tokens_dtype": "I32",
            "decode": "greedy argmax in float32 on CPU, 32 steps, continuing past eos (no stop at eos); "
                      "logits[s] are the logits that produced tokens[s] (step 0 = after the last prompt position)"}
    json.dump(info, open(os.path.join(fx_dir, f"clip{n}.json"), "w"), indent=1)
    return info


def export_all(out, cfg, sp, enc, dec, repo=None, work=None, quick=False):
    os.makedirs(out, exist_ok=True)
    enc.eval()
    dec.eval()
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    save_safetensors(os.path.join(out, "decoder.safetensors"), decoder_tensors(dec))
    onnx_path = os.path.join(out, "encoder.onnx")
    export_onnx(enc, onnx_path, cfg)
    pieces = [sp.id_to_piece(i) for i in range(cfg["vocab_size"])]
    tok = {"type": "sentencepiece", "model": "bpe", "pieces": pieces, "bos": 1, "eos": 2, "pad": 0,
           "unk": sp.unk_id(),
           "normalisation": "lower-case; hyphens and slashes to spaces; keep letters a-z and in-word "
                            "apostrophes; drop all other characters; collapse spaces"}
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"))
    if work and os.path.exists(os.path.join(work, "tok", "sp.model")):
        import shutil
        shutil.copy(os.path.join(work, "tok", "sp.model"), os.path.join(out, "sentencepiece.model"))
    # PyTorch weights of the same encoder (for the Python tools: eval, head sensitivity)
    save_safetensors(os.path.join(out, "encoder.safetensors"),
                     {k: v.detach().float().cpu().numpy().astype(np.float32) for k, v in enc.state_dict().items()})
    fx = os.path.join(out, "fixtures")
    infos = []
    if os.path.isdir(fx):
        for n in (1, 2):
            infos.append(make_fixture(fx, n, enc, dec, cfg, pieces))
    # check: onnx vs torch on fixture 1 mel (reference evaluator, if available and not quick)
    if not quick and os.path.exists(os.path.join(fx, "clip1.safetensors")):
        f = load_safetensors(os.path.join(fx, "clip1.safetensors"))
        mel = f["mel"][:, :800][None]
        ref = enc(torch.from_numpy(mel)).detach().numpy()
        got = onnx_reference_run(onnx_path, mel)
        if got is not None:
            print("onnx reference-evaluator max abs diff vs torch:", float(np.abs(got - ref).max()))
    enc.train()
    dec.train()
    return infos


def load_model(model_dir, work=None):
    """Decoder from safetensors + config; encoder from the training state saved
    next to the export (the ONNX file is for the runtime)."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    dec = Decoder(cfg)
    w = load_safetensors(os.path.join(model_dir, "decoder.safetensors"))
    dec.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
    from model import ENC_KW, Encoder
    ew = load_safetensors(os.path.join(model_dir, "encoder.safetensors"))
    enc = Encoder(hidden=cfg["hidden_size"], vocab=cfg["vocab_size"], **ENC_KW, **Encoder.head_sizes(ew))
    enc.load_state_dict({k: torch.from_numpy(v) for k, v in ew.items()})
    enc.eval()
    tok = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    dec.eval()
    return cfg, enc, dec, tok["pieces"]


def checkpoint_weights(path, part):
    """The `part` ("enc" or "dec") weights of a training checkpoint, or an exit that names the
    file and says which checkpoint holds them (torch's own errors name neither)."""
    which = {"enc": "an encoder checkpoint (ctc.pt or a kept enc copy)",
             "dec": "a decoder checkpoint (dec.pt, read.pt or a kept dec copy)"}[part]
    if not os.path.isfile(path):
        sys.exit(f"{path}: no such file; expected {which}")
    try:
        st = torch.load(path, map_location="cpu")
    except Exception as e:  # a truncated file, or not a torch checkpoint at all
        sys.exit(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e}); expected {which}")
    if not isinstance(st, dict) or part not in st:
        keys = sorted(st) if isinstance(st, dict) else type(st).__name__
        sys.exit(f"{path}: holds no '{part}' weights (it has {keys}); expected {which}")
    return {k: v.float() for k, v in st[part].items()}


def load_checked(module, st, path):
    try:
        module.load_state_dict(st)
    except RuntimeError as e:  # another width, depth or head set than the model folder's
        sys.exit(f"{path}: its weights do not fit the model folder's {type(module).__name__} "
                 f"(a checkpoint of another configuration?): {str(e).splitlines()[0]} ...")


def add_checkpoint_args(ap):
    """--encoder / --decoder / --piece-labels, as swap_weights reads them (export.py, evaluate.py)."""
    ap.add_argument("--encoder", default="", help="encoder weights from this training checkpoint")
    ap.add_argument("--decoder", default="", help="decoder weights from this training checkpoint")
    ap.add_argument("--piece-labels", default="", help="model folder whose label rows the encoder outputs")


def swap_weights(enc, dec, cfg, a):
    """a.encoder / a.decoder: a training checkpoint's weights (ctc.pt, dec.pt or a kept
    copy) in the place of a loaded folder's; a.piece_labels: the encoder outputs that
    folder's label rows (train_common.label_table), as `train.py --piece-labels` does."""
    if a.encoder:
        st = checkpoint_weights(a.encoder, "enc")
        if enc.label_rows is not None and "label_rows" not in st:  # the folder's piece-label output stays
            st["label_rows"] = enc.label_rows
        if "label_rows" in st and enc.label_rows is None:
            enc.set_label_rows(st["label_rows"])
        load_checked(enc, st, a.encoder)
    if a.decoder:
        load_checked(dec, checkpoint_weights(a.decoder, "dec"), a.decoder)
    if a.piece_labels:
        from train_common import label_table
        enc.set_label_rows(label_table(a.piece_labels, cfg["vocab_size"]))
    enc.eval()
    dec.eval()


def main():
    ap = argparse.ArgumentParser(description="re-export a model folder, with training checkpoints' weights in "
                                             "the place of its own (config, tokenizer and fixture clips stay)")
    ap.add_argument("--model", required=True, help="the folder to start from")
    ap.add_argument("--out", required=True, help="where to write (may be --model itself)")
    add_checkpoint_args(ap)
    a = ap.parse_args()
    import shutil
    import sentencepiece as spm
    cfg, enc, dec, _ = load_model(a.model)
    swap_weights(enc, dec, cfg, a)
    os.makedirs(os.path.join(a.out, "fixtures"), exist_ok=True)
    if os.path.abspath(a.out) != os.path.abspath(a.model):
        shutil.copy(os.path.join(a.model, "sentencepiece.model"), a.out)
        src = os.path.join(a.model, "fixtures")
        for f in sorted(os.listdir(src)) if os.path.isdir(src) else []:
            if f.endswith((".wav", ".txt")):
                shutil.copy(os.path.join(src, f), os.path.join(a.out, "fixtures", f))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "sentencepiece.model"))
    for info in export_all(a.out, cfg, sp, enc, dec):
        if info:
            print(f"fixture {info['wav']}: {info['greedy_text'][:100]!r}")


if __name__ == "__main__":
    main()
