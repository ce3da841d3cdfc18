#!/usr/bin/env bash
# Shared runner of the GPT-2 recipes (run_gpt2_124M.sh ... run_gpt2_1558M.sh): builds the trainer,
# then runs it in a resume loop. Every restart resumes from the newest complete checkpoint (-y 1),
# so a crash, a preemption (SIGTERM writes a checkpoint) or a node failure costs at most -n steps.
# A clean exit ends the loop; after MAX_RESTARTS failures in a row it gives up. It does not retry an
# error that will recur (error_recurs in scripts/mpi_launch.sh: the trainer's "error: " exit for a bad
# flag, file, data, checkpoint or a NaN loss), only crashes, kills, CUDA / NCCL errors and timeouts
# waiting for a peer. The trainer's stderr of the last attempt is kept in OUT_DIR/stderr.log.
# A SIGTERM / SIGINT to this script goes to the trainer's ranks only (scripts/mpi_launch.sh): they
# agree on a step, checkpoint and exit 0, and the loop ends. (mpirun itself would SIGKILL the ranks a
# few seconds after forwarding a SIGTERM.) Under a scheduler that signals every process of the job
# (Slurm), give the ranks the time to checkpoint: e.g. sbatch --signal=TERM@120.
# mpirun runs with --allow-run-as-root only when this script runs as root (usual in containers).
#
# Environment: NUM_GPUS (default: all GPUs of this node, via mpirun when > 1), USE_CUDNN (default 1),
#   DATA_DIR (default dev/data/fineweb10B, FineWeb-format shards fineweb_train_*.bin / fineweb_val_*.bin),
#   OUT_DIR (default log_<name>), MAX_RESTARTS (default 20). Extra arguments go to train_gpt2cu.
# Usage (from a recipe): run_gpt2.sh NAME trainer-flags...
set -uo pipefail
source "$(dirname "$0")/mpi_launch.sh"
term_trappable_or_reexec "$0" "$@"
cd "$(dirname "$0")/.."
NAME=$1; shift
USE_CUDNN=${USE_CUDNN:-1}
DATA_DIR=${DATA_DIR:-dev/data/fineweb10B}
OUT_DIR=${OUT_DIR:-log_$NAME}
MAX_RESTARTS=${MAX_RESTARTS:-20}
NUM_GPUS=${NUM_GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "$NUM_GPUS" -ge 1 ] 2>/dev/null || { echo "error: no NVIDIA GPU found (nvidia-smi -L); set NUM_GPUS" >&2; exit 1; }
ls "$DATA_DIR"/fineweb_train_*.bin > /dev/null 2>&1 || {
    echo "error: no token shards $DATA_DIR/fineweb_train_*.bin (set DATA_DIR; make shards with dev/data/prepare_dataset)" >&2
    exit 1
}
EXTRA=()
if [ ! -f dev/data/hellaswag/hellaswag_val.bin ]; then
    echo "note: dev/data/hellaswag/hellaswag_val.bin is missing (make it with: prepare_dataset eval" \
         "hellaswag_val.jsonl dev/data/hellaswag/hellaswag_val.bin); running without -h" >&2
    EXTRA=(-h 0)
fi
make -j"$(nproc)" train_gpt2cu USE_CUDNN="$USE_CUDNN" || exit 1
mkdir -p "$OUT_DIR"
export NCCL_NVLS_ENABLE=0
mpirun_cmd
LAUNCH=()
[ "$NUM_GPUS" -gt 1 ] && LAUNCH=("${MPIRUN[@]}" -np "$NUM_GPUS" --bind-to none -x NCCL_NVLS_ENABLE)
failures=0
while true; do
    run_forwarding_term "${LAUNCH[@]}" ./train_gpt2cu -i "$DATA_DIR/fineweb_train_*.bin" \
        -j "$DATA_DIR/fineweb_val_*.bin" -o "$OUT_DIR" -y 1 "$@" "${EXTRA[@]}" 2> >(tee "$OUT_DIR/stderr.log" >&2)
    rc=$?
    [ $rc -eq 0 ] && break
    if [ "$FORWARDED_SIGNAL" -eq 1 ]; then
        echo "stopped by a signal; train_gpt2cu exited with $rc" >&2
        exit $rc
    fi
    if error_recurs $rc "$OUT_DIR/stderr.log"; then
        echo "train_gpt2cu stopped on an error that a restart would repeat (message above); not retrying" >&2
        exit $rc
    fi
    failures=$((failures + 1))
    if [ $failures -ge "$MAX_RESTARTS" ]; then
        echo "giving up after $failures failed runs (last exit code $rc)" >&2
        exit $rc
    fi
    echo "train_gpt2cu exited with $rc; resuming in 10 s (failure $failures of $MAX_RESTARTS)" >&2
    sleep 10
done
[ -f "$OUT_DIR/main.log" ] && python3 dev/plot_log.py -o "$OUT_DIR/loss.png" "$OUT_DIR/main.log" || true
