#!/usr/bin/env bash
# CPU check of the PyTorch reference and of llmc/model_file.h against the files it writes:
#  1. makes a small token shard pair (train/val) with a skewed token distribution,
#  2. trains a tiny GPT-2 (custom:L2,C128,NH2, T=64) a few steps and checks the step/val lines,
#  3. trains the same steps again and writes checkpoint v3 + v5 + debug state, and the debug state in
#     llm.c's version 2 layout too (the losses of 1. and 3. must be identical: the reference is
#     deterministic for a seed),
#  4. runs build/host/tests/test_model_file with REFERENCE_DIR pointing at those files.
# Usage: dev/test/reference_check.sh   (from anywhere; PYTHON=python3 by default; KEEP=1 keeps the temp dir)
# Takes about a minute on 2 CPU cores. Exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/reference_check.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
fail() { echo "reference_check: FAILED: $*" >&2; exit 1; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

echo "--- building the host test"
make -s build/host/tests/test_model_file >/dev/null

echo "--- token shards"
"$PYTHON" - "$WORK" <<'EOF'
import sys, numpy as np
# Zipf-like draws from 1024 ids: learnable enough that 10 steps on one batch cut the loss by a third
rng = np.random.default_rng(1234)
ids = rng.choice(50257, size=1024, replace=False)
p = 1.0 / np.arange(1, 1025); p /= p.sum()
for name, n in (("train", 8192), ("val", 2048)):
    toks = ids[rng.choice(1024, size=n, p=p)].astype(np.uint16)
    toks[0] = 50256
    h = np.zeros(256, np.int32); h[:3] = (20240520, 1, n)
    with open(f"{sys.argv[1]}/shard_{name}_000000.bin", "wb") as f:
        f.write(h.tobytes()); f.write(toks.tobytes())
EOF

COMMON=(-i "$WORK/shard_train_*.bin" -j "$WORK/shard_val_*.bin" --model custom:L2,C128,NH2 -b 4 -t 64 -d 512 -l 1e-3 -u 2
        -q 0.1 -c 0.1 -v 2 -m 2 --device cpu --seed 7)

echo "--- 1. train custom:L2,C128,NH2 for 4 steps"
"$PYTHON" train_gpt2.py "${COMMON[@]}" -x 4 -o "$WORK/log" | tee "$WORK/train.txt"
[ "$("$PYTHON" dev/steplog.py count "$WORK/train.txt" --exact --from 1 --to 4)" = 4 ] ||
    fail "expected 4 step lines in llm.c's format"
[ "$(grep -cE '^val loss [0-9]+\.[0-9]{6}$' "$WORK/train.txt")" = 3 ] || fail "expected val loss at steps 0, 2, 4"
# llm.c's numbering: update k+1 is "s:k trl", so 4 steps log s:0 .. s:3
grep -qE '^s:0 trl:[0-9.]+ lr:[0-9.]+ norm:[0-9.]+$' "$WORK/log/main.log" || fail "main.log lacks the train line s:0 (first update)"
grep -qE '^s:3 trl:[0-9.]+ lr:[0-9.]+ norm:[0-9.]+$' "$WORK/log/main.log" || fail "main.log lacks the train line of step 3"
! grep -qE '^s:4 trl:' "$WORK/log/main.log" || fail "main.log has a train line s:4 in a 4-step run"
grep -qE '^s:4 tel:[0-9.]+$' "$WORK/log/main.log" || fail "main.log lacks the last val line"

echo "--- 2. same 4 steps, then write the reference files"
"$PYTHON" train_gpt2.py "${COMMON[@]}" --pretrain_steps 4 --write_tensors "$WORK/ref/gpt2_d2" --test_lr 3e-3 --write_llmc_v2 1 \
    | tee "$WORK/write.txt"
losses() { "$PYTHON" dev/steplog.py lines "$1" --no-timing && grep -E '^val' "$1"; }
diff <(losses "$WORK/train.txt") <(losses "$WORK/write.txt") || fail "same seed, different losses: not deterministic"
grep -q "loss drop over 10 steps" "$WORK/write.txt" || fail "writer did not report the loss drop"

echo "--- 3. C++ reader on the files train_gpt2.py wrote"
REFERENCE_DIR="$WORK/ref" build/host/tests/test_model_file || fail "test_model_file"
echo "reference_check: OK"
