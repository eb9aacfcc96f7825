"""SentencePiece's own ids for the reference model's texts: the fixture the runtime's encoder
is checked against (test/unit/tokenizer-sentencepiece.test.ts).

  /usr/bin/python3 training/tokenizer_ids.py [--model public/models/wnw-ref]

Writes MODEL/fixtures/sentencepiece-ids.json: [{"text", "ids"}] for every calibration
clip's transcript and every test set's reference text.
"""
import argparse
import glob
import json
import os

import sentencepiece as spm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="public/models/wnw-ref")
    a = ap.parse_args()
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "sentencepiece.model"))
    texts = [json.load(open(f))["text"] for f in sorted(glob.glob("calibration-data/*.json")) if "words" in open(f).read()]
    texts += [open(f).read().strip() for f in sorted(glob.glob("public/test-sets/*/*.txt"))]
    out = [{"text": t, "ids": sp.encode(t)} for t in dict.fromkeys(texts)]
    path = os.path.join(a.model, "fixtures", "sentencepiece-ids.json")
    json.dump(out, open(path, "w"), indent=0)
    print("wrote", path, len(out), "texts")


if __name__ == "__main__":
    main()
