"""Small tokenizer files in the real formats of the three backbones, for the miniatures,
and plain-Python reference encoders the TypeScript tokenizers are checked against.

Stdlib only. The pre-tokenizer patterns use Unicode property classes (\\p{L}, ...) that
`re` cannot parse, so `compile_pattern` expands each class into explicit code-point
ranges from `unicodedata` (and \\s into the White_Space list the Rust engines use).

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
import re
import sys
import unicodedata
from collections import Counter

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


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    # The order of ids 0..255 in GPT-2/Qwen vocabularies: printable bytes first.
    order = keep + [b for b in range(256) if b not in keep]
    return out, order


BYTE_CHAR, BYTE_ORDER = bytes_to_unicode()


def byte_level(b):
    return "".join(BYTE_CHAR[x] for x in b)


# ----------------------------------------------------------------- Unicode classes for `re`

WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
               (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]
_RANGES = {}


def _category_ranges():
    if _RANGES:
        return _RANGES
    cur, start = None, 0
    for cp in range(0x110001):
        cat = unicodedata.category(chr(cp)) if cp <= 0x10FFFF else None
        if cat != cur:
            if cur is not None:
                _RANGES.setdefault(cur, []).append((start, cp - 1))
            cur, start = cat, cp
    return _RANGES


def _esc(cp):
    return "\\U%08x" % cp


def _class_body(ranges):
    return "".join(_esc(a) if a == b else _esc(a) + "-" + _esc(b) for a, b in ranges)


def _prop(name):
    cats = _category_ranges()
    groups = {"L": ["Lu", "Ll", "Lt", "Lm", "Lo"], "M": ["Mn", "Mc", "Me"], "N": ["Nd", "Nl", "No"]}
    names = groups.get(name, [name])
    return "".join(_class_body(cats.get(c, [])) for c in names)


def compile_pattern(pattern):
    """The pattern with \\p{X}, \\s and \\S expanded for `re` (same matches as Rust/tiktoken)."""
    ws = _class_body(WHITE_SPACE)
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            m = re.match(r"\\p\{(\w+)\}", pattern[i:])
            if m:
                body = _prop(m.group(1))
                out.append(body if in_class else "[" + body + "]")
                i += len(m.group(0))
                continue
            nxt = pattern[i + 1]
            if nxt == "s":
                out.append(ws if in_class else "[" + ws + "]")
            elif nxt == "S":
                assert not in_class, "\\S inside a class is not needed by these patterns"
                out.append("[^" + ws + "]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return re.compile("".join(out))


# ----------------------------------------------------------------------------- BPE

def train_merges(pieces, n_merges):
    """Greedy byte-pair training: the most frequent adjacent pair first (ties: smallest bytes)."""
    words = Counter(tuple(bytes([b]) for b in p.encode("utf-8")) for p in pieces)
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], tuple(-x for x in kv[0][0] + b"\0" + kv[0][1])))[0]
        merges.append(best)
        merged = Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def tiktoken_bpe(piece, ranks):
    """tiktoken's merge: the whole piece if it is a token, else repeatedly join the
    adjacent pair whose concatenation has the lowest rank."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]


def merges_bpe(symbols, merge_rank):
    """Hugging Face BPE: repeatedly apply the earliest-listed merge among adjacent pairs."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best = None
        for i in range(len(symbols) - 1):
            r = merge_rank.get((symbols[i], symbols[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
    return symbols


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
