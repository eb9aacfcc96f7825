"""wnw-ref model: windowed audio encoder (mel 100 fps -> 12.5 embeddings/s) and
a Llama-style decoder-only LM (RMSNorm, RoPE rotate-half, GQA, SwiGLU, no
biases, untied lm_head). Attention is written by hand (torch 1.13 has no
scaled_dot_product_attention); runs on torch 1.13 CPU and 2.x CUDA.
No GELU anywhere (Debian torch 1.13's exact GELU is broken)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CHARS = " abcdefghijklmnopqrstuvwxyz'"  # CTC char vocab; id 0 = blank, char i -> i + 1
ENC_KW = dict(n_mels=80, d=128, layers=4, heads=4, f=320, top_layers=1)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# ----------------------------------------------------------------------------- encoder


class EncBlock(nn.Module):
    def __init__(self, d, heads, f, conv_k=15):
        super().__init__()
        self.heads = heads
        self.n1 = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.n2 = RMSNorm(d)
        self.dw = nn.Conv1d(d, d, conv_k, padding=conv_k // 2, groups=d, bias=False)
        self.pw = nn.Linear(d, d, bias=False)
        self.n3 = RMSNorm(d)
        self.ff = SwiGLU(d, f)

    def forward(self, x, keep=None, bias=None):
        # x [B, T, d]; keep [B, T, 1] (1 valid, 0 padding) or None; bias [B, 1, 1, T] additive key mask
        B, _, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.n1(x)).reshape(B, -1, 3, h, d // h).permute(2, 0, 3, 1, 4)
        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d // h))
        if bias is not None:
            att = att + bias
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, -1, d)
        x = self._m(x + self.o(y), keep)
        c = self.dw(self.n2(x).transpose(1, 2)).transpose(1, 2)
        x = self._m(x + self.pw(F.silu(c)), keep)
        x = self._m(x + self.ff(self.n3(x)), keep)
        return x

    @staticmethod
    def _m(x, keep):
        return x if keep is None else x * keep


class Encoder(nn.Module):
    """mel [B, 80, T] (T multiple of 8) -> 25 Hz features (char CTC) -> stacked
    pairs -> 12.5 Hz embeddings [B, T/8, hidden] (+ subword CTC head)."""

    def __init__(self, n_mels=80, d=192, layers=6, heads=4, f=512, hidden=192, vocab=512, top_layers=1,
                 char_per_frame=1, n_phonemes=0, piece_labels=False):
        super().__init__()
        # char CTC logits per 25 Hz frame: 2 gives a 50 Hz char head, since fast speech (12-17
        # characters/s) leaves a 25 Hz char CTC almost no blank frames
        self.char_per_frame = char_per_frame
        self.conv1 = nn.Conv1d(n_mels, d, 3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.blocks = nn.ModuleList([EncBlock(d, heads, f) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.ctc_char = nn.Linear(d, char_per_frame * (len(CHARS) + 1))
        self.stack = nn.Linear(2 * d, d, bias=False)
        self.top = nn.ModuleList([EncBlock(d, heads, f, conv_k=7) for _ in range(top_layers)])
        self.top_norm = RMSNorm(d)
        self.out = nn.Linear(d, hidden, bias=False)
        self.ctc_bpe = nn.Linear(hidden, vocab + 1)  # blank = vocab
        # framewise heads (training only), trained on labels laid out from the synthesiser's
        # word spans: characters at 25 Hz (0 = silence), subword pieces at 12.5 Hz
        # (vocab = silence). Unlike CTC they have no blank plateau to climb out of.
        self.frame_char = nn.Linear(d, len(CHARS) + 1)
        self.frame_bpe = nn.Linear(hidden, vocab + 1)
        # framewise phonemes from the embeddings, both 25 Hz frames of each 12.5 Hz token
        # (0 = silence; espeak's phoneme events give exact times): it makes the embeddings
        # the decoder reads carry what was said rather than how the voice sounds
        self.n_phonemes = n_phonemes
        self.frame_ph = nn.Linear(hidden, 2 * (n_phonemes + 1)) if n_phonemes else None
        # piece labels: the output is the label row of the framewise subword head's argmax
        # piece at each token instead of the embedding itself. The decoder then reads a
        # sequence of pieces, which carries what was said and nothing of the voice: a
        # decoder trained on oracle labels (reading.py) reads it as it is, and one trained
        # on the training voices cannot fit their timbre (set_label_rows)
        if piece_labels:
            self.register_buffer("label_rows", torch.zeros(vocab + 1, hidden))
        else:
            self.label_rows = None

    def set_label_rows(self, rows):
        """rows [vocab + 1, hidden]: from now on forward() returns piece labels."""
        rows = torch.as_tensor(rows, dtype=torch.float32, device=self.out.weight.device)
        if self.label_rows is None:
            del self.label_rows
            self.register_buffer("label_rows", rows.clone())
        else:
            self.label_rows.copy_(rows)

    def forward_base(self, mel, lengths=None):
        """-> 25 Hz features x [B, T/4, d], char logits [B, T/4 * char_per_frame, 29], keep4 (or None)."""
        B = mel.shape[0]
        keep4 = bias4 = None
        x = F.silu(self.conv1(mel))
        if lengths is not None:
            keep2 = (torch.arange(x.shape[2], device=mel.device)[None, :] < (lengths // 2)[:, None]).to(mel.dtype)
            x = x * keep2[:, None, :]
        x = F.silu(self.conv2(x)).transpose(1, 2).contiguous()
        if lengths is not None:
            T4 = x.shape[1]
            keep4 = (torch.arange(T4, device=mel.device)[None, :] < (lengths // 4)[:, None]).to(mel.dtype)[..., None]
            bias4 = (1.0 - keep4.transpose(1, 2)[:, None]) * -1e9
            x = x * keep4
        for blk in self.blocks:
            x = blk(x, keep4, bias4)
        x = self.norm(x)
        return x, self.ctc_char(x).reshape(B, -1, len(CHARS) + 1), keep4

    def forward_top(self, x, keep4=None):
        B, _, d = x.shape
        x2 = x.reshape(B, -1, 2 * d)
        keep8 = bias8 = None
        y = self.stack(x2)
        if keep4 is not None:
            keep8 = keep4[:, 1::2]
            bias8 = (1.0 - keep8.transpose(1, 2)[:, None]) * -1e9
            y = y * keep8
        for blk in self.top:
            y = blk(y, keep8, bias8)
        return self.out(self.top_norm(y))

    def forward(self, mel, lengths=None, return_all=False):
        """return_all: (emb, char CTC logits, subword CTC logits, framewise char logits at
        25 Hz, framewise subword logits at 12.5 Hz, framewise phoneme logits at 25 Hz or
        None)."""
        x, char_logits, keep4 = self.forward_base(mel, lengths)
        emb = self.forward_top(x, keep4)
        if return_all:
            ph = None
            if self.frame_ph is not None:
                ph = self.frame_ph(emb).reshape(emb.shape[0], -1, self.n_phonemes + 1)
            return emb, char_logits, self.ctc_bpe(emb), self.frame_char(x), self.frame_bpe(emb), ph
        if self.label_rows is not None:
            return self.label_rows[self.frame_bpe(emb).argmax(-1)]
        return emb

    @staticmethod
    def head_sizes(state):
        """constructor arguments that a saved state's training heads imply."""
        n = state["frame_ph.weight"].shape[0] // 2 - 1 if "frame_ph.weight" in state else 0
        return dict(char_per_frame=state["ctc_char.weight"].shape[0] // (len(CHARS) + 1), n_phonemes=n,
                    piece_labels="label_rows" in state)


class EncoderExport(nn.Module):
    def __init__(self, enc):
        super().__init__()
        self.enc = enc

    def forward(self, mel):
        return self.enc(mel)


# ----------------------------------------------------------------------------- decoder


def rope_cos_sin(positions, head_dim, theta, device=None, dtype=torch.float32):
    half = head_dim // 2
    freq = theta ** (-torch.arange(0, half, dtype=torch.float64, device=device) * 2.0 / head_dim)
    ang = positions.to(torch.float64)[..., None] * freq  # positions [L] or [B, L]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def apply_rope(x, cos, sin):
    # x [B, H, L, hd]; cos/sin [L, hd/2]; rotate-half convention
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class DecLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, H, Hkv, hd, Fd = cfg["hidden_size"], cfg["num_heads"], cfg["num_kv_heads"], cfg["head_dim"], cfg[
            "intermediate_size"]
        self.H, self.Hkv, self.hd = H, Hkv, hd
        self.attn_norm = RMSNorm(D, cfg["rms_norm_eps"])
        self.q_proj = nn.Linear(D, H * hd, bias=False)
        self.k_proj = nn.Linear(D, Hkv * hd, bias=False)
        self.v_proj = nn.Linear(D, Hkv * hd, bias=False)
        self.o_proj = nn.Linear(H * hd, D, bias=False)
        self.mlp_norm = RMSNorm(D, cfg["rms_norm_eps"])
        self.gate_proj = nn.Linear(D, Fd, bias=False)
        self.up_proj = nn.Linear(D, Fd, bias=False)
        self.down_proj = nn.Linear(Fd, D, bias=False)
        # training only: query heads whose softmax weights forward() keeps in `guided_att`
        self.guide_heads = None
        self.guided_att = None

    def forward(self, h, cos, sin, mask, cache=None, key_hook=None, value_hook=None):
        B, L, _ = h.shape
        x = self.attn_norm(h)
        q = self.q_proj(x).view(B, L, self.H, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, L, self.Hkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, L, self.Hkv, self.hd).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        if key_hook is not None:
            k = key_hook(k)
        if value_hook is not None:
            v = value_hook(v)
        if cache is not None:
            if cache.get("k") is not None:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        g = self.H // self.Hkv
        # GQA without copying K/V: query head j = kv_head * g + i uses KV head j // g
        q5 = q.reshape(B, self.Hkv, g, L, self.hd)
        att = torch.matmul(q5, k[:, :, None].transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        if mask is not None:
            att = att + mask
        att = torch.softmax(att, dim=-1)
        if self.guide_heads and self.training:
            self.guided_att = att.reshape(B, self.H, L, -1)[:, self.guide_heads]
        y = torch.matmul(att, v[:, :, None]).reshape(B, self.H, L, self.hd)
        y = y.transpose(1, 2).reshape(B, L, self.H * self.hd)
        h = h + self.o_proj(y)
        x = self.mlp_norm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([DecLayer(cfg) for _ in range(cfg["num_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        nn.init.normal_(self.embed_tokens.weight, std=0.02)

    def forward(self, h, start_pos=0, caches=None, key_hook=None, logits_from=None, positions=None, value_hook=None):
        """h [B, L, D] input embeddings (audio already spliced in).
        Returns logits for positions logits_from: (or all). `positions` [L] or
        [B, L] (training only) replaces the position ids start_pos.. of RoPE."""
        B, L, _ = h.shape
        need = start_pos + L
        if positions is not None:
            cos, sin = rope_cos_sin(positions, self.cfg["head_dim"], self.cfg["rope_theta"], h.device, h.dtype)
            if positions.dim() == 2:  # per-sequence position ids [B, L]: broadcast over heads
                cos, sin = cos[:, None], sin[:, None]
        else:
            tab = getattr(self, "_rope_tab", None)
            if tab is None or tab[0].shape[0] < need or tab[0].device != h.device or tab[0].dtype != h.dtype:
                n = max(need, 4096)
                tab = rope_cos_sin(torch.arange(n, device=h.device), self.cfg["head_dim"], self.cfg["rope_theta"],
                                   h.device, h.dtype)
                self._rope_tab = tab
            cos, sin = tab[0][start_pos:need], tab[1][start_pos:need]
        past = start_pos
        mask = None
        if L > 1:
            mask = torch.full((L, past + L), float("-inf"), device=h.device, dtype=h.dtype)
            mask = torch.triu(mask, diagonal=past + 1)
        for i, layer in enumerate(self.layers):
            h = layer(h, cos, sin, mask, cache=None if caches is None else caches[i],
                      key_hook=None if key_hook is None else (lambda k, i=i: key_hook(i, k)),
                      value_hook=value_hook)
        h = self.norm(h)
        if logits_from is not None:
            h = h[:, logits_from:]
        return self.lm_head(h)
