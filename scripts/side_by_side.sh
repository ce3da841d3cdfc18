#!/usr/bin/env bash
# train_gpt2cu and the PyTorch reference (train_gpt2.py), side by side over a real run: the same initial
# checkpoint (random GPT-2 init written by train_gpt2.py), the same data in the same order (Tiny
# Shakespeare, sequential windows, no shuffling), the same schedule; val loss every 50 steps on the same
# val windows. Writes both main.log files, a PNG with both curves (dev/plot_log.py), and prints the
# largest |difference in val loss|.
#
# Usage: scripts/side_by_side.sh [MODEL=d12] [STEPS=1000] [LR=6e-4]      (GPU machine with python3 + torch)
#   e.g. scripts/side_by_side.sh d12 1000 6e-4;  scripts/side_by_side.sh d48 300 2e-4
# Environment: B (8), T (1024), USE_CUDNN (0), CUDNN_HOME (as make), SBS_OUT (runs/side_by_side/MODEL),
#   BIN (a prebuilt train_gpt2cu; default: build one)
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-d12}; STEPS=${2:-1000}; LR=${3:-6e-4}
B=${B:-8}; T=${T:-1024}; EVERY=50
SBS_OUT=${SBS_OUT:-runs/side_by_side/$MODEL}
TS=dev/data/tinyshakespeare
[ -f $TS/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh || exit 1
mkdir -p "$SBS_OUT"
BIN=${BIN:-}
if [ -z "$BIN" ]; then
    make -j"$(nproc)" train_gpt2cu USE_CUDNN="${USE_CUDNN:-0}" > "$SBS_OUT/build.log" 2>&1 || { tail -20 "$SBS_OUT/build.log"; exit 1; }
    BIN=./train_gpt2cu
fi
# every val pass reads the same windows in both programs: all of the val split's whole windows (Tiny
# Shakespeare's 32,768 val tokens hold 3 windows of 8 x 1024 + 1)
VAL_TOKENS=$(python3 -c "import numpy as np; print(int(np.fromfile('$TS/tiny_shakespeare_val.bin', np.int32, 3)[2]))")
VAL_BATCHES=$(( (VAL_TOKENS - 1) / (B * T) ))
[ "$VAL_BATCHES" -ge 1 ] || { echo "the val split is smaller than one window of B*T+1 tokens"; exit 1; }

echo "=== initial checkpoint ($MODEL, seed 1337)"
python3 - "$MODEL" "$SBS_OUT/init.bin" <<'EOF' || exit 1
import sys, numpy as np, torch
sys.path.insert(0, ".")
import train_gpt2 as ref
cfg = ref.config_from_descriptor(sys.argv[1])
torch.manual_seed(1337)
model = ref.GPT(cfg)
model.init_weights()
ref.write_model_file(sys.argv[2], cfg, np.concatenate(ref.gather_flat(model)), 3)
print(f"wrote {sys.argv[2]}: {ref.num_parameters(cfg):,} parameters")
EOF
SCHED=(-l "$LR" -u $((STEPS / 10)) -q 0.1 -c 0.1 -x "$STEPS" -v "$EVERY" -m "$VAL_BATCHES" -b "$B" -t "$T")
DATA=(-i $TS/tiny_shakespeare_train.bin -j $TS/tiny_shakespeare_val.bin)

echo "=== train_gpt2cu"
rm -rf "$SBS_OUT/train_gpt2cu"
# -sh 0: file order, as train_gpt2.py reads it
"$BIN" -e "$SBS_OUT/init.bin" "${DATA[@]}" "${SCHED[@]}" -sh 0 -s 0 -o "$SBS_OUT/train_gpt2cu" > "$SBS_OUT/train_gpt2cu.txt" 2>&1 ||
    { tail -20 "$SBS_OUT/train_gpt2cu.txt"; exit 1; }
python3 dev/steplog.py lines "$SBS_OUT/train_gpt2cu.txt" --step 1 --step "$STEPS"
echo "=== train_gpt2.py (bf16 autocast, torch.compile)"
rm -rf "$SBS_OUT/train_gpt2.py"
python3 train_gpt2.py --init_from "$SBS_OUT/init.bin" "${DATA[@]}" "${SCHED[@]}" --compile 1 --dtype bfloat16 \
    -o "$SBS_OUT/train_gpt2.py" > "$SBS_OUT/train_gpt2.py.txt" 2>&1 || { tail -20 "$SBS_OUT/train_gpt2.py.txt"; exit 1; }
python3 dev/steplog.py lines "$SBS_OUT/train_gpt2.py.txt" --step 1 --step "$STEPS"

python3 dev/plot_log.py -o "$SBS_OUT/curves.png" "$SBS_OUT/train_gpt2cu/main.log" "$SBS_OUT/train_gpt2.py/main.log" || exit 1
python3 - "$SBS_OUT" "$MODEL" <<'EOF'
import sys
def val(path):
    out = {}
    for line in open(path):
        f = dict(kv.split(":", 1) for kv in line.split() if ":" in kv)
        if "tel" in f:
            out[int(f["s"])] = float(f["tel"])
    return out
a, b = val(f"{sys.argv[1]}/train_gpt2cu/main.log"), val(f"{sys.argv[1]}/train_gpt2.py/main.log")
steps = sorted(set(a) & set(b))
if not steps:
    sys.exit("no common val steps")
print(f"{'step':>6} {'train_gpt2cu':>13} {'train_gpt2.py':>13} {'diff':>9}")
for s in steps:
    print(f"{s:6d} {a[s]:13.4f} {b[s]:13.4f} {a[s] - b[s]:+9.4f}")
worst = max(steps, key=lambda s: abs(a[s] - b[s]))
print(f"{sys.argv[2]}: largest |val loss difference| {abs(a[worst] - b[worst]):.4f} at step {worst} "
      f"({len(steps)} val points); final val loss {a[steps[-1]]:.4f} vs {b[steps[-1]]:.4f}")
EOF
