"""Training-time augmentation of normalised log-mel features.

Held-out test voices differ from the training voices mostly in formant
positions and spectral tilt, so the encoder is trained on frequency-warped
mels (a cheap stand-in for vocal-tract-length perturbation) with SpecAugment
masks on top. Both act on [n_mels, T] float32 arrays in the normalised domain,
where 0 is the corpus mean.
"""
import numpy as np


def freq_warp(m, alpha):
    """Resample the mel axis by `alpha` (>1 moves energy to lower bins)."""
    n = m.shape[0]
    src = np.clip(np.arange(n, dtype=np.float64) * alpha, 0, n - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    w = (src - lo)[:, None].astype(np.float32)
    return m[lo] * (1 - w) + m[hi] * w


def spec_augment(m, rng, freq_masks=2, freq_width=10, time_mask_frac=0.08, time_width=20):
    m = m.copy()
    n, T = m.shape
    for _ in range(freq_masks):
        w = int(rng.integers(0, freq_width + 1))
        f0 = int(rng.integers(0, max(1, n - w)))
        m[f0:f0 + w] = 0.0
    for _ in range(int(T * time_mask_frac / max(1, time_width / 2))):
        w = int(rng.integers(1, time_width + 1))
        t0 = int(rng.integers(0, max(1, T - w)))
        m[:, t0:t0 + w] = 0.0
    return m


def augment(m, rng, warp=0.12):
    return spec_augment(freq_warp(m, float(rng.uniform(1 - warp, 1 + warp))), rng)
