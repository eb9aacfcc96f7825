"""Float64 numpy reference of the Whisper log-mel front-end (transformers' WhisperFeatureExtractor
semantics: SequenceFeatureExtractor.pad, audio_utils.spectrogram and mel_filter_bank with Slaney
scale and norm), written out directly so nothing but numpy is needed.

  mel_ref.py --samples in.f32 --out out.f64 [--mels 128] [--truncate N] [--pad-length N]
             [--pad-multiple N]

in.f32 holds raw little-endian float32 mono samples at 16 kHz; out.f64 receives the features as
float64 [mels, frames] (mel-major), preceded by nothing; frames = len(out) / mels.
"""
import argparse
import sys

import numpy as np

SR, N_FFT, HOP = 16000, 400, 160


def hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    lin = 3.0 * f / 200.0
    log = 15.0 + np.log(np.maximum(f, 1e-30) / 1000.0) * (27.0 / np.log(6.4))
    return np.where(f >= 1000.0, log, lin)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    lin = 200.0 * m / 3.0
    log = 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0))
    return np.where(m >= 15.0, log, lin)


def slaney_filters(n_mels, n_fft=N_FFT, sr=SR, fmin=0.0, fmax=8000.0):
    """[bins, n_mels], triangles between Slaney-mel-spaced edges, scaled by 2 / band width."""
    bins = n_fft // 2 + 1
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fft_freqs = np.linspace(0, sr // 2, bins)
    diff = np.diff(edges)
    slopes = edges[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    fb = np.maximum(0.0, np.minimum(down, up))
    return fb * (2.0 / (edges[2:n_mels + 2] - edges[:n_mels]))[None, :]


def pad_like_processor(x, truncate=None, pad_length=None, pad_multiple=None):
    if truncate is not None:
        x = x[:truncate]
    target = max(len(x), pad_length or 0)
    if pad_multiple:
        target = -(-target // pad_multiple) * pad_multiple
    return np.concatenate([x, np.zeros(target - len(x), dtype=x.dtype)])


def whisper_log_mel(x, n_mels=128):
    """x: float waveform (already padded). Returns float64 [n_mels, len(x) // HOP]."""
    x = np.pad(np.asarray(x, dtype=np.float64), (N_FFT // 2, N_FFT // 2), mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    n_frames = 1 + (len(x) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    spec = np.abs(np.fft.rfft(x[idx] * window[None, :], axis=1)) ** 2  # [frames, bins]
    mel = np.maximum(1e-10, slaney_filters(n_mels).T @ spec.T)  # [mels, frames]
    log_spec = np.log10(mel)[:, :-1]
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mels", type=int, default=128)
    ap.add_argument("--truncate", type=int)
    ap.add_argument("--pad-length", type=int)
    ap.add_argument("--pad-multiple", type=int)
    a = ap.parse_args()
    x = np.fromfile(a.samples, dtype="<f4")
    x = pad_like_processor(x, a.truncate, a.pad_length, a.pad_multiple)
    feats = whisper_log_mel(x, a.mels)
    feats.astype("<f8").tofile(a.out)
    print(f"mel_ref: {feats.shape[0]} x {feats.shape[1]}", file=sys.stderr)


if __name__ == "__main__":
    main()
