"""Byte-level BPE pieces shared by the tokenizer writers (tokenizers.py): GPT-2's byte map,
the pre-tokenizer patterns compiled for `re`, greedy merge training, and the two merge
rules the runtime's tokenizers are checked against (tiktoken's rank merge for tekken.json,
Hugging Face's merge list for tokenizer.json).

Stdlib only. The patterns use Unicode property classes (\\p{L}, ...) that `re` cannot
parse, so `compile_pattern` expands each class into explicit code-point ranges from
`unicodedata` (and \\s into the White_Space list the Rust engines use).
"""
import re
import unicodedata
from collections import Counter


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


def _merge_lowest(parts, rank_of):
    """Repeatedly join the adjacent pair with the lowest rank_of(a, b) (None: no merge)."""
    parts = list(parts)
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = rank_of(parts[i], parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def tiktoken_bpe(piece, ranks):
    """tiktoken's merge: the whole piece if it is a token, else repeatedly join the
    adjacent pair whose concatenation has the lowest rank."""
    if piece in ranks:
        return [ranks[piece]]
    return [ranks[p] for p in _merge_lowest([bytes([b]) for b in piece], lambda a, b: ranks.get(a + b))]


def merges_bpe(symbols, merge_rank):
    """Hugging Face BPE: repeatedly apply the earliest-listed merge among adjacent pairs."""
    return _merge_lowest(symbols, lambda a, b: merge_rank.get((a, b)))
