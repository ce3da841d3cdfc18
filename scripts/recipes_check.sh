#!/usr/bin/env bash
# Runs each GPT-2 recipe (scripts/run_gpt2_{124M,350M,774M,1558M}.sh) for 20 steps on this machine's
# GPUs, with Tiny Shakespeare in place of FineWeb: the recipe's model, micro-batch, recompute and
# ZeRO flags as written, one micro-batch per step (-d B*T*GPUs instead of the recipe's 0.5M-1M tokens,
# so a check takes seconds), and prints each recipe's exit code, last step line and peak GPU memory
# (nvidia-smi, all processes). The recipes' flags themselves are compared with llm.c's, without a GPU,
# by dev/test/recipes_llmc_check.sh.
# Usage: scripts/recipes_check.sh [124M 350M 774M 1558M]      (GPU machine)
set -uo pipefail
source "$(dirname "$0")/mpi_launch.sh"
cd "$(dirname "$0")/.."
SIZES=${*:-"124M 350M 774M 1558M"}
TS=dev/data/tinyshakespeare
[ -f $TS/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh || exit 1
WORK=${WORK:-build/recipes_check}
DATA=$WORK/data/fineweb10B   # DATASET as a directory named like llm.c's set
rm -rf "$WORK"; mkdir -p "$DATA"
NUM_GPUS=${NUM_GPUS:-$(visible_gpu_count)}
export NUM_GPUS
# FineWeb-named shards: Tiny Shakespeare repeated 8 times (enough windows at B=64 for train and val)
python3 - "$TS" "$DATA" <<'EOF' || exit 1
import sys, numpy as np
src, dst = sys.argv[1], sys.argv[2]
for split, name in (("train", "fineweb_train_000001.bin"), ("val", "fineweb_val_000000.bin")):
    tok = np.fromfile(f"{src}/tiny_shakespeare_{split}.bin", np.uint16, offset=1024)
    tok = np.tile(tok, 8)
    h = np.zeros(256, np.int32); h[:3] = (20240520, 1, tok.size)
    with open(f"{dst}/{name}", "wb") as f:
        f.write(h.tobytes()); f.write(tok.tobytes())
EOF
printf "%-8s %-5s %-80s %s\n" recipe exit "last step line" "peak GiB (nvidia-smi)"
for s in $SIZES; do
    recipe=scripts/run_gpt2_$s.sh
    [ -x "$recipe" ] || { echo "$s: no $recipe"; continue; }
    # the recipe's -b, as its dry run shows it (rank 0's command line)
    b=$(DRY_RUN=1 DATASET="$DATA" "$recipe" 2>/dev/null | sed -nE 's/^dry run: rank 0 of .* -b ([0-9]+) .*/\1/p' | head -1)
    log="$WORK/$s.log" mem="$WORK/$s.mem"
    : > "$mem"
    gpu_memory_sample "$mem" 0.2 &
    watcher=$!
    DATASET="$DATA" OUT_DIR="$WORK/out_$s" MAX_RESTARTS=1 "$recipe" -x 20 -d $((b * 1024 * NUM_GPUS)) -s 0 > "$log" 2>&1
    rc=$?
    kill $watcher 2>/dev/null; wait $watcher 2>/dev/null
    peak=$(awk -v m="$(peak_mib "$mem")" 'BEGIN { printf "%.1f", m / 1024 }')
    printf "%-8s %-5s %-80s %s\n" "$s" "$rc" "$(python3 dev/steplog.py last "$log" | cut -c1-80)" "$peak"
    [ "$rc" -ne 0 ] && tail -5 "$log" | sed 's/^/    /'
    rm -rf "$WORK/out_$s"  # the final checkpoint of 1558M is ~22 GB
done
