#!/bin/bash
# Train wnw-ref on a CUDA machine from a folder made by pack_data.py, and leave
# weights-only checkpoints (ctc.pt, dec_label.pt, dec.pt) and the logs in OUT_DIR.
#
#   bash training/gpu_train.sh PACK_DIR OUT_DIR
#
# Then, here: copy OUT_DIR/{ctc,dec_label,dec}.pt into training/work/ and run
#   /usr/bin/python3 training/train.py --ctc-minutes $CTC_MIN --label-minutes $LABEL_MIN \
#       --dec-minutes $DEC_MIN --ctc-steps 100000 --label-phases "$LABEL_PHASES" --phases "$PHASES"
# with the same budgets: both stages read as done, so it exports and evaluates.
#
# A preflight (a few steps of each stage, the largest decoder batch included)
# runs first on a copy, so a broken environment fails in a minute, not after
# the CTC stage. Budgets are wall-clock (env CTC_MIN, LABEL_MIN, DEC_MIN, TRAIN_S): each
# stage's schedule and curriculum follow its clock, so a faster GPU trains more.
set -u
PACK=$(realpath "$1"); OUT=$(realpath "$2")
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
CTC_MIN=${CTC_MIN:-2.7}; LABEL_MIN=${LABEL_MIN:-1.5}; DEC_MIN=${DEC_MIN:-2.7}; TRAIN_S=${TRAIN_S:-470}
LABEL_PHASES=${LABEL_PHASES:-4000:3-15:300,4000:10-45:600}
PHASES=${PHASES:-3000:3-15:300,6000:10-45:600,4000:30-100:900,1500:80-200:900}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
${PYTHON:-python3} -c "import torch,numpy,sentencepiece;print('torch',torch.__version__,'numpy',numpy.__version__,'cuda',torch.cuda.is_available())"
W=$(mktemp -d); P=$(mktemp -d)
cp -r "$PACK"/data "$PACK"/tok "$W"/ && cp -r "$PACK"/data "$PACK"/tok "$P"/
COMMON="--no-export --loader-threads 8 --threads 4 --device ${DEVICE:-cuda}"
S=$(date +%s)
${PYTHON:-python3} training/train.py --work "$P" $COMMON --ctc-steps 4 --ctc-batch-s 200 --label-phases 2:3-15:100 --phases "${PREFLIGHT_PHASES:-2:3-15:100,2:80-200:900}" \
  --log-every 1 --val-every 100000 > "$OUT"/preflight.out 2>&1
rc=$?; tail -n 25 "$OUT"/preflight.out; echo "preflight rc=$rc in $(( $(date +%s) - S ))s"
[ $rc -eq 0 ] || exit 3
timeout "$TRAIN_S" ${PYTHON:-python3} training/train.py --work "$W" $COMMON \
  --ctc-batch-s 480 --ctc-lr 2e-3 --ctc-steps 100000 --ctc-minutes "$CTC_MIN" \
  --label-minutes "$LABEL_MIN" --label-phases "$LABEL_PHASES" \
  --dec-lr 1e-3 --dec-minutes "$DEC_MIN" --phases "$PHASES" \
  --warmup 100 --log-every 50 --val-every 100000 --ckpt-minutes 0.75 > "$OUT"/train.out 2>&1
echo "train rc=$? at $(( $(date +%s) - S ))s"
grep -E "ctc step [0-9]*00 |label step [0-9]*00 |dec step [0-9]*00 |finished|cached|written|done" "$OUT"/train.out | tail -n 60
W="$W" OUT="$OUT" ${PYTHON:-python3} - <<'PY'
import os, torch
for n in ("ctc", "dec_label", "dec"):
    p = os.path.join(os.environ["W"], f"{n}.pt")
    if not os.path.exists(p):
        print("missing", p)
        continue
    st = torch.load(p, map_location="cpu", weights_only=False)
    st.pop("opt", None)  # 3x the weights' size; a resumed run starts a fresh optimizer
    torch.save(st, os.path.join(os.environ["OUT"], f"{n}.pt"))
    print(n, {k: v for k, v in st.items() if k not in ("enc", "dec")})
PY
cp "$W"/train.log "$OUT"/train.log
