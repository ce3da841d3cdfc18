#!/usr/bin/env bash
# llm.c's own GPU CI (.github/workflows/ci_gpu.yml at f1e2ace), run against our binaries (GPU machine):
#  1. test_gpt2cu with the flags llm.c's CI passes: FP32 build "", -r 0, -r 2; BF16 build "", -r 0,
#     -w 0, -r 2, -b 32. Each must exit 0.
#  2. llm.c's loss check: the FP32 trainer with llm.c's command line (-b 1 -t 64 -d 256 -l 0.0001 -v 200
#     -s 200 -a 1 -x 10 -r 0 -f 0 -e gpt2_124M.bin), its output read as llm.c's dev/loss_checker_ci.py
#     reads it (the 10 lines from "step    1/10" on, the loss in columns 20-28, each must parse). llm.c's
#     expected losses belong to OpenAI's GPT-2 124M weights: with LLMC_GPT2_124M=<that model file in
#     our or llm.c's format> they are also compared (llm.c's 5% limit); the default gpt2_124M.bin is the
#     reference model pytorch_reference_check.sh trains, whose losses are only printed.
# Needs gpt2_124M.bin, gpt2_124M_bf16.bin and gpt2_124M_debug_state.bin (written by dev/test/gpu/pytorch_reference_check.sh,
# made here the same way when missing).
# Usage: dev/test/gpu/llmc_ci_check.sh        exit 1 if any check fails
set -uo pipefail
cd "$(dirname "$0")/../../.."
TS=dev/data/tinyshakespeare
W=build/llmc_ci_check
mkdir -p $W
[ -f $TS/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh || exit 1
if [ ! -f gpt2_124M_debug_state.bin ] || [ ! -f gpt2_124M.bin ] || [ ! -f gpt2_124M_bf16.bin ]; then
    python3 train_gpt2.py -i $TS/tiny_shakespeare_train.bin -e d12 -b 8 -t 1024 -l 6e-4 -u 20 \
        --pretrain_steps "${PRETRAIN:-300}" --write_tensors gpt2_124M --test_input $TS/tiny_shakespeare_val.bin || exit 1
fi
status=0
for p in FP32 BF16; do
    make -j"$(nproc)" test_gpt2cu train_gpt2cu PRECISION=$p USE_CUDNN=0 > $W/build_$p.log 2>&1 ||
        { echo "FAIL build PRECISION=$p ($W/build_$p.log)"; status=1; continue; }
    cp test_gpt2cu $W/test_gpt2cu_$p; cp train_gpt2cu $W/train_gpt2cu_$p
done
run_test() {  # PRECISION FLAGS...
    local p=$1; shift
    local log="$W/test_$p${*// /}.log"
    if "$W/test_gpt2cu_$p" "$@" > "$log" 2>&1; then echo "PASS test_gpt2cu ($p) $*"
    else echo "FAIL test_gpt2cu ($p) $* ($log)"; tail -5 "$log"; status=1; fi
}
run_test FP32
run_test FP32 -r 0
run_test FP32 -r 2
run_test BF16
run_test BF16 -r 0
run_test BF16 -w 0
run_test BF16 -r 2
run_test BF16 -b 32

# llm.c's loss checker (dev/loss_checker_ci.py), re-implemented in dev/steplog.py: the same lines, the same columns
model=${LLMC_GPT2_124M:-gpt2_124M.bin}
out=$W/train_gpt2cu_fp32_precision.txt
"$W/train_gpt2cu_FP32" -b 1 -t 64 -d 256 -l 0.0001 -v 200 -s 200 -a 1 -x 10 -r 0 -f 0 -e "$model" > "$out" 2>&1 ||
    { echo "FAIL train_gpt2cu (FP32) with llm.c's CI command line ($out)"; tail -5 "$out"; status=1; }
python3 - "$out" "${LLMC_GPT2_124M:+compare}" <<'EOF' || status=1
import sys
sys.path.insert(0, "dev")
import steplog
block = steplog.llmc_checker_lines(open(sys.argv[1]).readlines())
if block is None:
    sys.exit("FAIL loss checker: no 'step    1/10' line")
try:
    got = [steplog.llmc_checker_loss(l) for l in block]
except ValueError as e:
    sys.exit(f"FAIL loss checker: a line after 'step    1/10' is not a step line ({e}):\n" + "".join(block))
if len(got) != 10:
    sys.exit(f"FAIL loss checker: {len(got)} step lines")
print("PASS loss checker reads 10 step lines:", " ".join(f"{x:.6f}" for x in got))
if len(sys.argv) > 2 and sys.argv[2] == "compare":
    fixed = [5.270009, 4.060681, 3.320085, 2.717550, 2.181066, 1.653923, 1.168050, 0.736873, 0.401021, 0.187493]
    worst = max(abs(g - f) / f * 100 for g, f in zip(got, fixed))
    print(f"{'PASS' if worst <= 5.0 else 'FAIL'} losses within {worst:.2f}% of llm.c's (limit 5%)")
    sys.exit(0 if worst <= 5.0 else 1)
EOF
exit $status
