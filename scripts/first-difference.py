"""Where each free run of an eval report first leaves the full cache's transcript.

    /usr/bin/python3 scripts/first-difference.py eval/calibration/summary-mass-layer.json

prints, per policy row and budget, the share of the full cache's words that the run
repeats word for word before its first different word, per clip and pooled. WER vs
full mixes where two transcripts part with whether they fall back into step; this
separates the first.
"""
import json
import sys


def shared_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main(paths):
    for path in paths:
        report = json.load(open(path))
        rows = {}
        for clip in report["clips"]:
            full = next(r for r in clip["runs"] if r["policy"] == "full")["text"].split()
            for run in clip["runs"]:
                if run["policy"] == "full" or not full:
                    continue
                name = run["policy"] + (f" ({run['variant']})" if run.get("variant") else "")
                share = shared_prefix(run["text"].split(), full) / len(full)
                rows.setdefault((name, run["budget"]), []).append((clip["id"], share))
        for (name, budget), shares in sorted(rows.items()):
            per_clip = " ".join(f"{cid} {s:.2f}" for cid, s in shares)
            print(f"{name:32s} {budget:.2f}  mean {sum(s for _, s in shares) / len(shares):.3f}  {per_clip}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
