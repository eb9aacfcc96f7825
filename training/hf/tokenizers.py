"""Small tokenizer files in the real formats of the three backbones, for the miniatures,
and plain-Python reference encoders the TypeScript tokenizers are checked against.

Stdlib only; the byte-level BPE pieces (pattern compilation, merges) are in bpe.py.

  write_qwen_tokenizer(dir, vocab_size, flavour)  tokenizer.json (byte-level BPE, Qwen
      special tokens at their real ids), tokenizer_config.json, the chat template
      (chat_template.json for Qwen2.5-Omni, inside tokenizer_config.json for Qwen2-Audio).
  write_voxtral_tokenizers(dir, vocab_size)  tekken.json (v7 layout) and the
      tokenizer.json a tekken.json converts to (ids = rank + 1000, merges from ranks).

CLI:
  tokenizers.py write --out DIR
  tokenizers.py encode-tekken TEKKEN_JSON TEXT...   (one JSON id list per line)
  tokenizers.py encode-qwen TOKENIZER_JSON TEXT...
"""
import base64
import json
import os
import sys
import unicodedata

# bpe.py sits beside this file, which is also loaded by path (miniatures.py) and run as a script
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import (BYTE_CHAR, BYTE_ORDER, byte_level, compile_pattern, merges_bpe,  # noqa: E402
                 tiktoken_bpe, train_merges)

# The Tekken split pattern (tekken.json config.pattern; transformers' fix_mistral_regex).
MISTRAL_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                   r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                   r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2's Split pattern (transformers Qwen2Converter).
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

QWEN_SPECIALS = [  # id 151643 onwards, as Qwen2.5-Omni's tokenizer lists them
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_bos|>", "<|vision_eos|>",
    "<|vision_pad|>", "<|IMAGE|>", "<|VIDEO|>",
]
QWEN_FIRST_SPECIAL = 151643

# Tekken v7 control tokens with known ranks; the others are <SPECIAL_n>.
TEKKEN_SPECIALS = {
    0: "<unk>", 1: "<s>", 2: "</s>", 3: "[INST]", 4: "[/INST]", 5: "[AVAILABLE_TOOLS]",
    6: "[/AVAILABLE_TOOLS]", 7: "[TOOL_RESULTS]", 8: "[/TOOL_RESULTS]", 9: "[TOOL_CALLS]",
    10: "[IMG]", 11: "<pad>", 12: "[IMG_BREAK]", 13: "[IMG_END]", 14: "[PREFIX]", 15: "[MIDDLE]",
    16: "[SUFFIX]", 17: "[SYSTEM_PROMPT]", 18: "[/SYSTEM_PROMPT]", 19: "[TOOL_CONTENT]",
    24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 34: "[TRANSCRIBE]",
}
TEKKEN_NUM_SPECIAL = 1000

# The Qwen chat templates, restated (src/model/text/templates.ts holds the same text): a
# default system turn, audio parts as the bos/placeholder/eos triple (Qwen2-Audio numbers
# them and ends the line), text parts verbatim, then the assistant header.
def _turns(audio_part, audio_test):
    return ("{% set audio_count = namespace(value=0) %}{% for message in messages %}"
            "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
            "<|im_start|>{{ message['role'] }}\n"
            "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
            "{% else %}{% for part in message['content'] %}"
            "{% if " + audio_test + " %}{% set audio_count.value = audio_count.value + 1 %}" + audio_part +
            "{% elif 'text' in part %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


OMNI_TEMPLATE = _turns("{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}<|audio_bos|><|AUDIO|><|audio_eos|>",
                       "part['type'] == 'audio' or 'audio' in part or 'audio_url' in part")
QWEN2_AUDIO_TEMPLATE = _turns("Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n",
                              "'audio' in part or 'audio_url' in part or part['type'] == 'audio'")

CORPUS = """\
You are a helpful assistant. You are a speech recognition model.
Transcribe the English audio into text without any punctuation marks.
Detect the language and recognize the speech: lang:en
The lecture begins with a question about memory. How much of the recording does the model
need to keep while it writes the transcript? The answer depends on the attention heads:
some of them look at the audio all the time, others only now and then. When the speaker
pauses, the transcript waits; when the speaker starts again, the model listens again.
We tested the system on long recordings of talks, meetings and interviews, and the words
came out in the right order with the right timing. The café served crème brûlée and
naïve coffee to the students, who paid 3 euros and 50 cents, or €3.50, at 10:45 on
Tuesday. Don't worry, it's fine: they'll say what they've heard, and we'd write it down.
Speech, text, tokens, heads, layers, segments, chunks, windows: these are the parts.
"""


# --------------------------------------------------------------------------- Qwen

def _added(id_, content):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def qwen_tokenizer_json(vocab_size):
    pat = compile_pattern(QWEN_PATTERN)
    pieces = pat.findall(unicodedata.normalize("NFC", CORPUS))
    merges = train_merges(pieces, vocab_size - 256)
    vocab = {BYTE_CHAR[b]: i for i, b in enumerate(BYTE_ORDER)}
    merge_strs = []
    for a, b in merges:
        tok = byte_level(a + b)
        if tok not in vocab:
            vocab[tok] = len(vocab)
        merge_strs.append(byte_level(a) + " " + byte_level(b))
    split = {"type": "Split", "pattern": {"Regex": QWEN_PATTERN}, "behavior": "Isolated", "invert": False}
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(QWEN_FIRST_SPECIAL + i, s) for i, s in enumerate(QWEN_SPECIALS)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, bl]},
        "post_processor": dict(bl),
        "decoder": dict(bl),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merge_strs},
    }


def write_qwen_tokenizer(out_dir, vocab_size=512, flavour="qwen2_5_omni"):
    """flavour: 'qwen2_5_omni' (chat_template.json, audio_* token fields) or 'qwen2_audio'
    (the template inside tokenizer_config.json)."""
    assert flavour in ("qwen2_5_omni", "qwen2_audio"), flavour
    os.makedirs(out_dir, exist_ok=True)
    tok = qwen_tokenizer_json(vocab_size)
    config = {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in tok["added_tokens"]},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"],
        "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 32768, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    if flavour == "qwen2_5_omni":
        config.update({"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>"})
        _dump(os.path.join(out_dir, "chat_template.json"), {"chat_template": OMNI_TEMPLATE})
    else:
        config["chat_template"] = QWEN2_AUDIO_TEMPLATE
    _dump(os.path.join(out_dir, "tokenizer.json"), tok)
    _dump(os.path.join(out_dir, "tokenizer_config.json"), config)


def encode_qwen(tokenizer_json, text):
    """Reference encoding of plain text (no special-token strings) with a Qwen tokenizer.json."""
    model = tokenizer_json["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    rank = {m: i for i, m in enumerate(merges)}
    pat = compile_pattern(tokenizer_json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"])
    ids = []
    for piece in pat.findall(unicodedata.normalize("NFC", text)):
        ids += [model["vocab"][s] for s in merges_bpe(byte_level(piece.encode("utf-8")), rank)]
    return ids


# ------------------------------------------------------------------------ Voxtral

def _filler(n):
    """n distinct 6-byte tokens over bytes F8..FF, which UTF-8 text never contains, so
    they pad the vocabulary to its real size without changing any encoding."""
    out, k = [], 0
    while len(out) < n:
        digits, x = [], k
        for _ in range(6):
            digits.append(0xF8 + (x & 7))
            x >>= 3
        out.append(bytes(digits))
        k += 1
    return out


def tekken_json(vocab_size=131072, n_merges=300):
    pat = compile_pattern(MISTRAL_PATTERN)
    pieces = pat.findall(CORPUS)
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    for a, b in train_merges(pieces, n_merges):
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    inner = vocab_size - TEKKEN_NUM_SPECIAL
    assert inner >= len(tokens), (vocab_size, len(tokens))
    tokens += _filler(inner - len(tokens))
    # Real files list more ranks than the model uses; these would change the encoding of
    # corpus words if the loader forgot to truncate the vocabulary at vocab_size - 1000.
    ranks = {t: i for i, t in enumerate(tokens)}
    extra = []
    for p in sorted(set(pieces)):
        parts = tiktoken_bpe(p.encode("utf-8"), ranks)
        if len(parts) >= 2 and len(extra) < 16:
            t = tokens[parts[0]] + tokens[parts[1]]
            if t not in seen and t not in extra:
                extra.append(t)
    tokens += extra

    def info(rank, t):
        try:
            s = t.decode("utf-8")
        except UnicodeDecodeError:
            s = None
        return {"rank": rank, "token_bytes": base64.b64encode(t).decode("ascii"), "token_str": s}

    return {
        "config": {"pattern": MISTRAL_PATTERN, "num_vocab_tokens": len(tokens), "default_vocab_size": vocab_size,
                   "default_num_special_tokens": TEKKEN_NUM_SPECIAL, "version": "v7"},
        "vocab": [info(i, t) for i, t in enumerate(tokens)],
        "special_tokens": [{"rank": r, "token_str": TEKKEN_SPECIALS.get(r, "<SPECIAL_%d>" % r), "is_control": True}
                           for r in range(TEKKEN_NUM_SPECIAL)],
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}},
    }


def tekken_to_tokenizer_json(tekken):
    """What converting tekken.json yields: specials as added tokens at their ranks, every
    used rank at id rank + 1000, merges for each token's splits into two tokens, ordered by
    the token's rank (so Hugging Face BPE reproduces tiktoken's lowest-rank-first merging)."""
    cfg = tekken["config"]
    n_special = cfg["default_num_special_tokens"]
    toks = [base64.b64decode(v["token_bytes"]) for v in tekken["vocab"][:cfg["default_vocab_size"] - n_special]]
    rank = {t: i for i, t in enumerate(toks)}
    vocab = {s["token_str"]: s["rank"] for s in tekken["special_tokens"]}
    merges = []
    for r, t in enumerate(toks):
        vocab[byte_level(t)] = r + n_special
        splits = [(rank[t[:k]], rank[t[k:]], t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in rank and t[k:] in rank]
        merges += [[byte_level(a), byte_level(b)] for _, _, a, b in sorted(splits)]
    split = {"type": "Split", "pattern": {"Regex": cfg["pattern"]}, "behavior": "Isolated", "invert": False}
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(s["rank"], s["token_str"]) for s in tekken["special_tokens"]],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, bl]},
        "post_processor": dict(bl),
        "decoder": dict(bl),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }


def write_voxtral_tokenizers(out_dir, vocab_size=131072):
    os.makedirs(out_dir, exist_ok=True)
    tekken = tekken_json(vocab_size)
    _dump(os.path.join(out_dir, "tekken.json"), tekken)
    _dump(os.path.join(out_dir, "tokenizer.json"), tekken_to_tokenizer_json(tekken))
    _dump(os.path.join(out_dir, "tokenizer_config.json"), {
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "clean_up_tokenization_spaces": False, "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast",
    })


def encode_tekken(tekken, text):
    """Reference Tekkenizer.encode(text, bos=False, eos=False)."""
    cfg = tekken["config"]
    n_special = cfg["default_num_special_tokens"]
    used = tekken["vocab"][:cfg["default_vocab_size"] - n_special]
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in used}
    pat = compile_pattern(cfg["pattern"])
    return [r + n_special for p in pat.findall(text) for r in tiktoken_bpe(p.encode("utf-8"), ranks)]


def _dump(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


def main(argv):
    if argv[:1] == ["write"] and len(argv) == 3 and argv[1] == "--out":
        out = argv[2]
        write_qwen_tokenizer(os.path.join(out, "qwen2_5_omni"), flavour="qwen2_5_omni")
        write_qwen_tokenizer(os.path.join(out, "qwen2_audio"), flavour="qwen2_audio")
        write_voxtral_tokenizers(os.path.join(out, "voxtral"))
        return 0
    if argv[:1] in (["encode-tekken"], ["encode-qwen"]) and len(argv) >= 3:
        with open(argv[1], encoding="utf-8") as f:
            data = json.load(f)
        enc = encode_tekken if argv[0] == "encode-tekken" else encode_qwen
        for text in argv[2:]:
            print(json.dumps(enc(data, text)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
