#!/usr/bin/env bash
# The same bits as another version of the trainer: for changes that must not change what it computes
# (refactors, comments, test code moved out). Builds this tree and OTHER (a directory holding another
# checkout, or a git revision of this repository, exported to a temporary directory), runs both
# trainers with the same flags from this repository's root, and compares
#   - every step line (loss, its z-score, norm, lr; not the timing columns), the val losses and the
#     generated samples, line for line;
#   - the checkpoints of steps 10 and 20 (model and state files) byte for byte.
# The run has two micro-steps per step (-d), so both kinds of backward run (gradients written, then
# accumulated), and samples, so generation is compared too.
# Usage: dev/test/gpu/same_bits_check.sh OTHER [make switches, e.g. PRECISION=FP32 or USE_CUDNN=1]
# (SAME_BITS_DIR: work folder, default build/same_bits_check). Prints PASS or FAIL lines; exit 0 only
# if every comparison passed.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OTHER_DIR_OR_REVISION [make switches]"; exit 1; }
OTHER=$1; shift
cd "$(dirname "$0")/../../.." || exit 1
REPO=$(pwd)
D=${SAME_BITS_DIR:-build/same_bits_check}
rm -rf "$D"; mkdir -p "$D"; D=$(cd "$D" && pwd)
if [ -d "$OTHER" ]; then
    OTHER_TREE=$(cd "$OTHER" && pwd)
else
    OTHER_TREE=$D/other_tree; mkdir -p "$OTHER_TREE"
    git archive "$OTHER" | tar -x -C "$OTHER_TREE" || { echo "FAIL: cannot export revision '$OTHER'"; exit 1; }
fi
[ -f dev/data/tinyshakespeare/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh > /dev/null || exit 1
for side in this other; do
    tree=$REPO; [ $side = other ] && tree=$OTHER_TREE
    make -C "$tree" -j"$(nproc)" train_gpt2cu "$@" > "$D/build_$side.log" 2>&1 || { echo "FAIL: build of $side"; tail "$D/build_$side.log"; exit 1; }
    cp "$tree/train_gpt2cu" "$D/train_gpt2cu_$side"
done
FLAGS=(-e d12 -b 8 -t 256 -d 4096 -x 20 -l 6e-4 -u 5 -v 10 -m 4 -s 10 -g 16 -n 10)
for side in this other; do
    "$D/train_gpt2cu_$side" "${FLAGS[@]}" -o "$D/out_$side" > "$D/run_$side.log" 2>&1 || { echo "FAIL: run of $side"; tail "$D/run_$side.log"; exit 1; }
done
status=0
# step lines without the timing columns (dev/steplog.py), then the val losses and the samples (after
# "generating:", between its two "---" lines)
numbers() {
    python3 dev/steplog.py lines --no-timing "$1"
    awk '/^generating:/ { s = 1; next }
         s > 0 && /^---$/ { s = s == 1 ? 2 : 0; next }
         s == 2 { print "sample: " $0; next }
         /^val loss / { print }' "$1"
}
numbers "$D/run_this.log" > "$D/numbers_this.txt"
numbers "$D/run_other.log" > "$D/numbers_other.txt"
steps=$(python3 dev/steplog.py count "$D/run_this.log")
if [ "$steps" -eq 20 ] && cmp -s "$D/numbers_this.txt" "$D/numbers_other.txt"; then
    echo "PASS: 20 step lines, val losses and samples identical"
else
    echo "FAIL: the printed numbers differ ($steps step lines)"; diff "$D/numbers_this.txt" "$D/numbers_other.txt" | head -20; status=1
fi
for f in model_00000010.bin state_00000010_00000.bin model_00000020.bin state_00000020_00000.bin; do
    if [ -f "$D/out_this/$f" ] && cmp -s "$D/out_this/$f" "$D/out_other/$f"; then echo "PASS: $f byte for byte"
    else echo "FAIL: $f differs or is missing"; status=1; fi
done
exit $status
