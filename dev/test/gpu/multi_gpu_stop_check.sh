#!/usr/bin/env bash
# One-GPU checks of stopping and of the watchdog in the NCCL build:
#   1. LLMC_NCCL_SINGLE=1 -pi tcp: SIGTERM during training -> "stopping after step N", a complete
#      checkpoint of step N (DONE_N), exit 0
#   2. mpirun -np 1 through run_forwarding_term (scripts/mpi_launch.sh, as run_gpt2.sh starts it):
#      SIGTERM to the launcher -> the rank checkpoints and exits 0, and so does mpirun
#   3. LLMC_TEST_HANG_AT_STEP=5 -wt 20: the step's vote blocks; the watchdog aborts the communicator and
#      the run exits 1 within 60 s with "watchdog: step 5: the loss / stop vote (ncclAllReduce)"
#   4. the same in the NO_MULTI_GPU=1 build (no NCCL: the wait is the gradient norm's stream sync)
# Both builds are test builds (EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS): only they have the hook of check 3.
# Usage: dev/test/gpu/multi_gpu_stop_check.sh   (STOP_DIR: logs)
set -uo pipefail
source "$(dirname "$0")/../../../scripts/mpi_launch.sh"
term_trappable_or_reexec "$0" "$@"
cd "$(dirname "$0")/../../.."
mpirun_cmd
export NCCL_NVLS_ENABLE=0
D=${STOP_DIR:-build/multi_gpu_stop_check}
rm -rf "$D"; mkdir -p "$D"
[ -f dev/data/tinyshakespeare/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh > /dev/null || exit 1
J=$(nproc)
make -j"$J" train_gpt2cu NO_MULTI_GPU=1 EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS > "$D/build_single.log" 2>&1 && mkdir -p "$D/bin_single" && cp train_gpt2cu "$D/bin_single/" || { tail "$D/build_single.log"; exit 1; }
make -j"$J" train_gpt2cu EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS > "$D/build_nccl.log" 2>&1 && mkdir -p "$D/bin_nccl" && cp train_gpt2cu "$D/bin_nccl/" || { tail "$D/build_nccl.log"; exit 1; }
# the copies keep the name train_gpt2cu: run_forwarding_term finds the ranks by it (on the H200 a copy
# named bin_nccl never got the forwarded SIGTERM and ran all its steps)
COMMON=(-e d12 -b 8 -t 1024 -x 2000 -l 6e-4 -v 0 -s 0)
status=0
wait_step() {  # LOG N PID: until LOG shows step N (or the process is gone)
    python3 dev/steplog.py wait "$1" "$2" --pid "$3" --interval 0.1
}
check_stop() {  # NAME LOG RC DIR
    local n; n=$(sed -nE 's/^stopping after step ([0-9]+).*/\1/p' "$2")
    if [ "$3" -eq 0 ] && [ -n "$n" ] && [ -f "$4/DONE_$(printf %08d "$n")" ]; then
        echo "PASS: $1: SIGTERM -> checkpoint of step $n, exit 0"
    else
        echo "FAIL: $1 (exit $3, stop line '$(grep stopping "$2")')"; tail -5 "$2"; status=1
    fi
}

# 1. the single-process NCCL path, signal straight to the trainer
LLMC_NCCL_SINGLE=1 "$D/bin_nccl/train_gpt2cu" "${COMMON[@]}" -pi tcp -pn 1 -pr 0 -ps 127.0.0.1 -o "$D/single" > "$D/single.log" 2>&1 &
pid=$!
wait_step "$D/single.log" 5 $pid
kill -TERM $pid; wait $pid; rc=$?
check_stop "LLMC_NCCL_SINGLE=1" "$D/single.log" $rc "$D/single"

# 2. mpirun -np 1, SIGTERM to the launching shell (forwarded to the rank, not to mpirun)
( run_forwarding_term "${MPIRUN[@]}" -np 1 -x LLMC_NCCL_SINGLE=1 -x NCCL_NVLS_ENABLE "$D/bin_nccl/train_gpt2cu" "${COMMON[@]}" \
      -o "$D/mpi" ) > "$D/mpi.log" 2>&1 &
pid=$!
wait_step "$D/mpi.log" 5 $pid
kill -TERM $pid; wait $pid; rc=$?
check_stop "mpirun -np 1" "$D/mpi.log" $rc "$D/mpi"

# 3. and 4. a blocked wait: the watchdog ends the run
for b in nccl single; do
    env=(LLMC_TEST_HANG_AT_STEP=5); [ $b = nccl ] && env+=(LLMC_NCCL_SINGLE=1)
    t0=$SECONDS
    env "${env[@]}" timeout 300 "$D/bin_$b/train_gpt2cu" "${COMMON[@]}" -wt 20 > "$D/hang_$b.log" 2>&1; rc=$?
    took=$((SECONDS - t0))
    want="watchdog: step 5: the loss / stop vote"; [ $b = single ] && want="watchdog: step 5: the gradient norm"
    if [ $rc -eq 1 ] && grep -q "$want" "$D/hang_$b.log" && [ $took -lt 90 ]; then
        echo "PASS: $b build: blocked wait -> watchdog message, exit 1 after $took s"
    else
        echo "FAIL: $b build hang (exit $rc after $took s)"; tail -5 "$D/hang_$b.log"; status=1
    fi
done
exit $status
