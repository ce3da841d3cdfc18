#!/usr/bin/env bash
# Every GPU check in one command (a machine with an NVIDIA GPU, python3 with torch), as dev/test/run_all.sh
# is for the machine without one: first every binary the checks use is built, all builds at once (each
# switch combination has its own build dir), then the checks run one after another. Ends with "N passed,
# N failed" (a skipped check counts as neither; its reason is printed). Logs: $GPU_LOG_DIR (default
# build/gpu-logs), one NAME.log per check. Each CHECK but zero_check and kernel_lab is the script
# dev/test/gpu/CHECK.sh, which also runs alone.
#
# Usage: [GPU_LANES=1] dev/test/gpu/run_all.sh [CHECK ...]        default: all of them, in this order:
#   pytorch_reference_check  test_gpt2cu against the PyTorch reference (BF16, FP32; + cuDNN when the cuDNN
#                            frontend headers are found), two shapes
#   resume_check             SIGKILL + resume, SIGTERM checkpoint
#   bad_shard_check          a bad token id in a later shard stops the run, newest checkpoint the last good one
#   zero_check               dev/cuda/zero_check: ZeRO-1 collectives and sharded AdamW, one process
#   multi_gpu_check          the NCCL build on one GPU (tcp / fs / mpirun) bitwise equal to NO_MULTI_GPU=1
#   multi_gpu_stop_check     SIGTERM and the watchdog in the NCCL and plain builds
#   llmc_ci_check            llm.c's own GPU CI commands against our binaries
#   llmc_compare_check       ours against llm.c (needs LLMC_DIR=<karpathy/llm.c tree>, else skipped)
#   multi_gpu_ranks_check    what only several GPUs show (skipped with fewer than 2 GPUs)
#   same_bits_check          the same bits as another version (needs SAME_BITS_BASE=<a checkout or a git
#                            revision> to compare with, else skipped): for changes that must not change them
#   kernel_lab               the kernel lab, every program (make -C dev/cuda, dev/cuda/run_all.sh)
# GPU_LANES=1 runs the checks in three lanes at once (below): the same checks and count, in about half
# the time.
set -uo pipefail
cd "$(dirname "$0")/../../.."
LOG=${GPU_LOG_DIR:-build/gpu-logs}
mkdir -p "$LOG"
ALL="pytorch_reference_check resume_check bad_shard_check zero_check multi_gpu_check multi_gpu_stop_check"
ALL+=" llmc_ci_check llmc_compare_check multi_gpu_ranks_check same_bits_check kernel_lab"
CHECKS=${*:-$ALL}
for c in $CHECKS; do
    case " $ALL " in *" $c "*) ;; *) echo "unknown check '$c' (known: $ALL)"; exit 1;; esac
done
command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1 || { echo "no NVIDIA GPU here (nvidia-smi -L)"; exit 1; }
GPUS=$(nvidia-smi -L | wc -l)
CUDNN=0
python3 -c "import importlib.metadata as m; m.distribution('nvidia-cudnn-frontend')" 2> /dev/null && CUDNN=1
[ -f third_party/cudnn-frontend/include/cudnn_frontend.h ] && CUDNN=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown), $GPUS GPU(s), cuDNN frontend: $([ $CUDNN = 1 ] && echo found || echo not found)"

# The data every check reads (the shards are prepared once; the tools need PCRE2 to build them)
if [ ! -f dev/data/tinyshakespeare/tiny_shakespeare_train.bin ]; then
    bash dev/data/tinyshakespeare.sh > "$LOG/data.log" 2>&1 || { echo "Tiny Shakespeare: preparation failed ($LOG/data.log)"; exit 1; }
fi

# Builds, all at once: the make commands the checks run themselves then find their binaries up to date
has() { case " $CHECKS " in *" $1 "*) return 0;; esac; return 1; }
builds=()
if has resume_check || has bad_shard_check || has multi_gpu_check || has multi_gpu_stop_check || has multi_gpu_ranks_check ||
   has llmc_compare_check; then  # llmc_compare_check: the 124M recipe's build (USE_CUDNN=0)
    builds+=("train_gpt2cu")
fi
if has multi_gpu_check || has multi_gpu_stop_check; then builds+=("train_gpt2cu NO_MULTI_GPU=1"); fi
if has pytorch_reference_check || has llmc_ci_check; then builds+=("test_gpt2cu PRECISION=BF16 USE_CUDNN=0" "test_gpt2cu PRECISION=FP32 USE_CUDNN=0"); fi
if has pytorch_reference_check && [ $CUDNN = 1 ]; then builds+=("test_gpt2cu PRECISION=BF16 USE_CUDNN=1"); fi
if has llmc_ci_check; then builds+=("train_gpt2cu PRECISION=FP32 USE_CUDNN=0"); fi
if has llmc_compare_check; then
    builds+=("train_gpt2cu PRECISION=BF16 USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1"
             "train_gpt2cu PRECISION=FP32 USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1")
fi
# the test-hook builds (EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS: build dirs of their own)
if has multi_gpu_stop_check || has multi_gpu_ranks_check; then builds+=("train_gpt2cu EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS"); fi
if has multi_gpu_stop_check; then builds+=("train_gpt2cu NO_MULTI_GPU=1 EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS"); fi
t0=$SECONDS
k=0
for b in "${builds[@]}"; do
    # shellcheck disable=SC2086  # $b is a make command line
    make $b > "$LOG/build_$k.log" 2>&1 &
    k=$((k + 1))
done
# the lab's programs (zero_check among them when NCCL is found), or only zero_check
if has kernel_lab; then { make -C dev/cuda all > "$LOG/build_kernel_lab.log" 2>&1 & }
elif has zero_check; then { make -C dev/cuda zero_check > "$LOG/build_zero_check.log" 2>&1 & }
fi
wait
echo "builds: ${#builds[@]} switch combinations in $((SECONDS - t0)) s"

passed=0; failed=0; failed_names=()

# GPU_LANES=1: the checks in three lanes at the same time after the builds above, each lane over its own
# copy of the tree (its own ./train_gpt2cu and ./test_gpt2cu, which the checks copy into place), each
# lane this script again with GPU_LANES=0: about half the time of one lane, for pass / fail only (no
# check here times anything against a limit tighter than what sharing the GPU costs). The kernel lab
# (it times kernels) and multi_gpu_ranks_check (every GPU) run after the lanes.
if [ "${GPU_LANES:-0}" = 1 ]; then
    LANES=("resume_check bad_shard_check multi_gpu_check multi_gpu_stop_check"
           "pytorch_reference_check llmc_ci_check zero_check same_bits_check"
           "llmc_compare_check")
    ROOT=$(pwd); ABSLOG=$(cd "$LOG" && pwd)
    [ -n "${LLMC_DIR:-}" ] && [ -d "$LLMC_DIR" ] && LLMC_DIR=$(cd "$LLMC_DIR" && pwd) && export LLMC_DIR
    [ -n "${SAME_BITS_BASE:-}" ] && [ -d "$SAME_BITS_BASE" ] && SAME_BITS_BASE=$(cd "$SAME_BITS_BASE" && pwd) &&
        export SAME_BITS_BASE
    t0=$SECONDS
    for i in 0 1 2; do
        mine=""
        for c in ${LANES[$i]}; do has "$c" && mine+=" $c"; done
        [ -n "$mine" ] || continue
        tree=$ROOT
        if [ "$i" -gt 0 ]; then  # a copy of the tree with its builds, times kept (make finds them up to date)
            tree=$ROOT/build/lanes/lane$i; rm -rf "$tree"; mkdir -p "$tree"
            tar -C "$ROOT" -cf - --exclude=./build/lanes . | tar -C "$tree" -xf -
        fi
        # shellcheck disable=SC2086  # $mine is a list of check names
        ( cd "$tree" && GPU_LANES=0 GPU_LOG_DIR="$ABSLOG/lane$i" bash dev/test/gpu/run_all.sh $mine > "$ABSLOG/lane$i.out" 2>&1 ) &
    done
    wait
    for i in 0 1 2; do
        [ -f "$ABSLOG/lane$i.out" ] || continue
        echo "--- lane $i: $(grep -E '^(PASS|FAIL|SKIP) ' "$ABSLOG/lane$i.out" | awk '{print $2}' | tr '\n' ' ')"
        grep -vE '^(NVIDIA|commit |builds:|[0-9]+ passed, [0-9]+ failed$)|^$' "$ABSLOG/lane$i.out"
        line=$(tail -n 1 "$ABSLOG/lane$i.out")
        if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
            passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2]))
        else
            failed=$((failed + 1)); failed_names+=("lane$i (ended without its count: $ABSLOG/lane$i.out)")
        fi
        while read -r name; do failed_names+=("$name"); done < <(grep -E '^FAIL ' "$ABSLOG/lane$i.out" | awk '{print $2}')
    done
    echo "lanes: $((SECONDS - t0)) s"
    rest=""
    for c in kernel_lab multi_gpu_ranks_check; do has "$c" && rest+=" $c"; done
    CHECKS=$rest
fi

run() {  # NAME CMD...
    local name=$1; shift
    local t=$SECONDS
    if "$@" > "$LOG/$name.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS  $name ($((SECONDS - t)) s)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL  $name ($((SECONDS - t)) s)"
        tail -n 30 "$LOG/$name.log" | sed 's/^/    /'
    fi
    grep -E "^(PASS|FAIL|SKIP|===)" "$LOG/$name.log" | sed 's/^/    /' | head -40
}
for c in $CHECKS; do
    case $c in
        pytorch_reference_check) run "$c" env CUDNN=$CUDNN bash dev/test/gpu/pytorch_reference_check.sh;;
        zero_check) run zero_check env LLMC_NCCL_SINGLE=1 dev/cuda/bin/zero_check;;
        kernel_lab) run kernel_lab env LOG_DIR="$(cd "$LOG" && pwd)/kernel_lab" bash dev/cuda/run_all.sh;;
        llmc_compare_check)
            if [ -z "${LLMC_DIR:-}" ]; then echo "SKIP  $c (set LLMC_DIR to a karpathy/llm.c tree)"; continue; fi
            run "$c" bash dev/test/gpu/llmc_compare_check.sh;;
        same_bits_check)
            if [ -z "${SAME_BITS_BASE:-}" ]; then echo "SKIP  $c (set SAME_BITS_BASE to a checkout or revision)"; continue; fi
            run "$c" bash dev/test/gpu/same_bits_check.sh "$SAME_BITS_BASE";;
        multi_gpu_ranks_check)
            if [ "$GPUS" -lt 2 ]; then echo "SKIP  $c (needs 2 or more GPUs, this machine has $GPUS)"; continue; fi
            run "$c" bash dev/test/gpu/multi_gpu_ranks_check.sh;;
        *) run "$c" bash "dev/test/gpu/$c.sh";;
    esac
done
echo
[ ${#failed_names[@]} -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
