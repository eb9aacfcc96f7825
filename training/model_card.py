"""Write public/models/wnw-ref/MODEL_CARD.md from config, train.log and eval.json.

  /usr/bin/python3 training/model_card.py [--model public/models/wnw-ref] [--work training/work]
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(os.path.dirname(HERE), "public", "models", "wnw-ref"))
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--enc-work", default="",
                    help="the work folder whose train.log holds the encoder stage, when another than --work's "
                         "(an encoder trained on in one folder, the decoder in another)")
    ap.add_argument("--command", default="/usr/bin/python3 training/train.py")
    ap.add_argument("--notes", default="")
    ap.add_argument("--machine", default="2 CPU cores, torch 1.13 (Debian) with OpenBLAS, 2 threads.")
    a = ap.parse_args()
    import torch
    from model import Decoder, ENC_KW, Encoder
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    dec_n = sum(p.numel() for p in Decoder(cfg).parameters())
    from common import load_safetensors
    ew = load_safetensors(os.path.join(a.model, "encoder.safetensors"))
    enc = Encoder(hidden=cfg["hidden_size"], vocab=cfg["vocab_size"], **ENC_KW, **Encoder.head_sizes(ew))
    ph_head = (f", framewise espeak phonemes ({enc.n_phonemes} + silence) of both 25 Hz frames from each "
               "12.5 Hz embedding") if enc.n_phonemes else ""
    pieces_out = "label_rows" in ew
    out_text = (f" Output: piece labels. At each token the framewise subword head's argmax piece (of "
                f"{cfg['vocab_size']} + silence) selects its row of `label_rows` "
                f"[{cfg['vocab_size'] + 1}, {cfg['hidden_size']}] (the rows the decoder learnt to read on "
                "oracle labels, `training/reading.py`), so the decoder reads a piece sequence and nothing of "
                "the voice.") if pieces_out else ""
    heads = ("char CTC and framewise chars at 25 Hz, subword CTC at 12.5 Hz" if pieces_out else
             "char CTC and framewise chars at 25 Hz, subword CTC and framewise subword pieces at 12.5 Hz")
    enc_n = sum(p.numel() for n, p in enc.named_parameters()
                if "ctc" not in n and "frame_" not in n or (pieces_out and n.startswith("frame_bpe")))
    def read_log(work):
        p = os.path.join(work, "train.log")
        return open(p).read() if os.path.exists(p) else ""
    log = read_log(a.work)
    enc_log = read_log(a.enc_work) if a.enc_work else log
    ctc_done = re.findall(r"ctc: finished step (\d+) in ([0-9.]+) min, loss ema (\S+)", enc_log)
    # a stage closed by a resume with a lowered budget logs no EMA: take the last logged one
    ctc_emas = re.findall(r"ctc step \d+ loss \S+ \((?:frame char \S+ piece \S+; ctc )?char \S+ bpe \S+\) ema ([0-9.]+)", enc_log)
    if ctc_done and ctc_done[-1][2] == "None" and ctc_emas:
        ctc_done[-1] = (ctc_done[-1][0], ctc_done[-1][1], ctc_emas[-1])
    dec_done = re.findall(r"dec: finished step (\d+) in ([0-9.]+) min, loss ema ([0-9.]+)", log)
    label_done = re.findall(r"label: finished step (\d+) in ([0-9.]+) min, loss ema ([0-9.]+)", log)
    ctc_val = re.findall(r"ctc val step (\d+): greedy CTC WER char ([0-9.]+) subword ([0-9.]+)", enc_log)
    # validations of the shipped decoder run only (the log keeps earlier runs)
    last_start = log.rfind("] dec step 1 phase")
    dec_val = re.findall(r"dec val step (\d+): greedy WER ([0-9.]+)", log[max(0, last_start):])
    stats = json.load(open(os.path.join(a.work, "data", "mel_stats.json")))
    n_sessions = len(json.load(open(os.path.join(a.work, "data", "train_index.json"))))
    ev = {}
    if os.path.exists(os.path.join(a.model, "eval.json")):
        ev = json.load(open(os.path.join(a.model, "eval.json")))
    A = cfg["audio"]
    rows = []
    targets = {"espeak-heldout": "≤ 10 %", "flite": "≤ 25 %", "long-4min": "≤ 15 %", "long-10min": "report (stretch ≤ 20 %)"}
    for k, t in targets.items():
        if k in ev:
            e = ev[k]
            eos = sum(c["ended_at_eos"] for c in e["clips"])
            per = ", ".join("%.0f" % (100 * c["wer"]) for c in e["clips"])
            rows.append(f"| {k} | {e.get('clips_measured', len(e['clips']))} | {100 * e['wer_pooled']:.1f} % | {per} | "
                        f"{eos}/{len(e['clips'])} | {t} |")
        else:
            rows.append(f"| {k} | – | not measured | | | {t} |")
    limits = {"espeak-heldout": 0.10, "flite": 0.25, "long-4min": 0.15}
    missed = [k for k, v in limits.items() if k in ev and ev[k]["wer_pooled"] > v]
    unmeasured = [k for k in limits if k not in ev]
    if missed or unmeasured:
        status = ("it does not meet the project's accuracy targets on " + ", ".join(missed + unmeasured) +
                  " (numbers below); more training time (or a GPU: the script uses CUDA when available) "
                  "is the way to a better model.")
    else:
        status = "meets the project's accuracy targets on every measured set (numbers below)."
    card = f"""# wnw-ref — reference decoder-only speech LLM for WnW

Trained from scratch on this project's machines by `training/`.
**Status: {status}**

## Architecture
- Audio front-end: 16 kHz mono → log-mel, 80 bins, 100 frames/s (n_fft 512, Hann(400)
  periodic, hop 160, reflect padding 200, HTK mel 0–8 kHz, no area norm, ln(mel + 1e-6)),
  normalised with global mel_mean {A['mel_mean']} / mel_std {A['mel_std']} (measured on the
  training audio). T is cut to a multiple of 8 frames (N = floor(frames / 8) audio tokens).
- Encoder (`encoder.onnx`, {enc_n / 1e6:.2f} M parameters without the training-only heads): two stride-2
  Conv1d (80→{ENC_KW['d']}, SiLU) to 25 Hz; {ENC_KW['layers']} blocks (pre-RMSNorm,
  {ENC_KW['heads']}-head full self-attention within the window, depthwise conv k=15 + SiLU,
  SwiGLU {ENC_KW['f']}); RMSNorm; stack frame pairs → 12.5 Hz; 1 block; RMSNorm; linear to
  hidden {cfg['hidden_size']}.{out_text} Windows of {A['encoder_window_frames']} mel frames (30 s) are
  encoded independently (attention only inside a window); trained on windows of varying
  length. Training-only heads: {heads}{ph_head}.
- Decoder (`decoder.safetensors`, {dec_n / 1e6:.2f} M parameters): Llama-style,
  {cfg['num_layers']} layers, hidden {cfg['hidden_size']}, {cfg['num_heads']} query heads /
  {cfg['num_kv_heads']} KV heads (GQA ratio {cfg['num_heads'] // cfg['num_kv_heads']}), head dim
  {cfg['head_dim']} ({cfg['num_layers'] * cfg['num_kv_heads']} KV heads in total), SwiGLU
  {cfg['intermediate_size']}, RMSNorm eps {cfg['rms_norm_eps']}, RoPE rotate-half theta
  {cfg['rope_theta']}, untied lm_head, no biases. Sequence
  `[bos][audio × N][instruction][transcript][eos]`, RoPE position = index.
- Tokenizer: sentencepiece BPE, {cfg['vocab_size']} pieces (`tokenizer.json`;
  `sentencepiece.model` is the same model for Python). Instruction = "transcribe" =
  {cfg['instruction']}. Transcripts: lower-case, letters and in-word apostrophes only.
- Files: `config.json`, `decoder.safetensors`, `encoder.onnx` (opset 17, input `mel`
  [1, 80, T] dynamic, output `embeddings` [1, T/8, {cfg['hidden_size']}]),
  `encoder.safetensors` (PyTorch weights of the same encoder, for the Python tools),
  `tokenizer.json`, `sentencepiece.model`, `fixtures/` (clip1 = espeak held-out voice,
  clip2 = flite slt; see the json files), `eval.json`.

## Data
espeak-ng (6 training accents × ~90 variants, rate 130–190, pitch/range random) and
festival kal_diphone (speed-perturbed) reading Debian `fortunes` texts, with gain and
noise augmentation: {stats['hours']:.2f} h of training audio in {n_sessions} long-form sessions. Held-out espeak voices
(base voices en-us-nyc, en-gb-x-gbcwmd × 10 held-out variants) and flite voices (never
trained on) for testing; texts split by hash into train / calibration / test. Details in
`training/README.md`.

## Training
Command (resumable; state in `{os.path.relpath(a.work, os.path.dirname(HERE))}/`):

```
{a.command}
```

- Encoder stage (framewise + CTC losses): {('%s steps in %s min (loss EMA %.3f)' % (ctc_done[-1][0], ctc_done[-1][1], float(ctc_done[-1][2]))) if ctc_done else 'n/a'};
  last held-out greedy CTC WER (char / subword):
  {('step %s: %s / %s' % ctc_val[-1]) if ctc_val else 'n/a'}.
- Label stage (decoder on label embeddings, see `training/README.md`): {('%s steps in %s min (loss EMA %.3f nats/token)' % (label_done[-1][0], label_done[-1][1], float(label_done[-1][2]))) if label_done else 'not in this log (see below)'}.
- Decoder stage (encoder frozen, its embeddings cached):
  {('%s steps in %s min (loss EMA %.3f nats/token)' % (dec_done[-1][0], dec_done[-1][1], float(dec_done[-1][2]))) if dec_done else 'n/a'};
  validation greedy WER during training: {', '.join('step %s: %s' % v for v in dec_val) or 'n/a'}.
- Machine: {a.machine}
{a.notes}

## Held-out results (Python eval: `training/evaluate.py`, full cache, greedy, stop at eos or 6 tokens per audio second, method-doc WER with 1.2× truncation)

| set | clips | WER (pooled) | per-clip WER % | ended at eos | target |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Command: `/usr/bin/python3 training/evaluate.py --model public/models/wnw-ref --out public/models/wnw-ref/eval.json`
"""
    open(os.path.join(a.model, "MODEL_CARD.md"), "w").write(card)
    print(card)


if __name__ == "__main__":
    main()
