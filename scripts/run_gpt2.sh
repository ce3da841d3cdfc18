#!/usr/bin/env bash
# The GPT-2 recipes: llm.c's scripts/run_gpt2_{124M,350M,774M,1558M}.sh (at f1e2ace), flag for flag, in
# one place (dev/test/recipes_llmc_check.sh compares them with llm.c's values), started on one node or
# several and kept running by a resume loop. scripts/run_gpt2_<size>.sh and scripts/multi_node/ call this.
#
# Usage: scripts/run_gpt2.sh 124M|350M|774M|1558M [train_gpt2cu flags]   (extra flags come last: they win)
#
# Environment:
#   DATASET    the token shards, named as llm.c's dev/data/fineweb.py writes them: fineweb10B, fineweb100B,
#              edu_fineweb10B or edu_fineweb100B, read from dev/data/<DATASET>/<prefix>_{train,val}_*.bin
#              (prefix edu_fineweb for the edu_ sets, else fineweb); or a directory elsewhere named like one
#              of them (e.g. /scratch/edu_fineweb100B). Default: the recipe's, as llm.c: 124M fineweb10B,
#              350M and 774M fineweb100B, 1558M edu_fineweb100B.
#   LAUNCHER   how the processes start (one per GPU):
#              mpi (default)  mpirun, NUM_GPUS processes on this node or over HOSTS; none for one process
#              srun-tcp       inside a Slurm allocation: srun starts SLURM_NTASKS tasks (-pr from each task's
#                             SLURM_PROCID); the NCCL id travels over TCP from MASTER_IP (default: this node's
#                             first address; every node must reach it on port 12345)
#              srun-fs        the same, the id through files in SYNC_DIR (default .nccl_sync here; it must be
#                             on a filesystem every node sees)
#   NUM_GPUS   mpi: the process count (default: the GPUs this shell sees, CUDA_VISIBLE_DEVICES included)
#   HOSTS      mpi: mpirun --host, e.g. node1:8,node2:8 (then set NUM_GPUS to the total)
#   USE_CUDNN (1, as llm.c), OUT_DIR (log_gpt2_<size>, as llm.c), MAX_RESTARTS (20)
#   DRY_RUN=1  builds and trains nothing: the launcher starts scripts/dry_run_task.sh in the trainer's place,
#              which prints each process's rank, process count and command line
#
# Differences from llm.c's scripts, none in the numbers: every visible GPU instead of a fixed mpirun -np 8
# (any count that divides -d; more processes than -d allows at the recipe's -b halve -b, with a note);
# the loop ends when the trainer exits 0 (llm.c's waits for DONE_<last step>), retries at most MAX_RESTARTS
# times in a row, and does not retry an error a restart would repeat (error_recurs in scripts/mpi_launch.sh:
# the trainer's "error: " exit for a bad flag, file, data, checkpoint or a NaN loss); the trainer's stderr of
# the last attempt is kept in OUT_DIR/stderr.log. A SIGTERM / SIGINT to this script goes to the ranks (mpirun
# would SIGKILL them a few seconds after forwarding one; srun passes it on): they agree on a step, checkpoint
# and exit 0, and the loop ends. Under Slurm, sbatch --signal=TERM@120 gives the ranks that time (the
# .sbatch scripts in scripts/multi_node/ ask for it).
set -uo pipefail
source "$(dirname "$0")/mpi_launch.sh"
term_trappable_or_reexec "$0" "$@"
cd "$(dirname "$0")/.."
die() { echo "error: $*" >&2; exit 1; }

# llm.c's recipes (their -i/-j/-o come from DATASET and OUT_DIR below)
SIZE=${1:-}
case "$SIZE" in
124M)  RECIPE_DATASET=fineweb10B
       RECIPE=(-v 250 -s 20000 -g 144 -h 1 -b 64 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.0006 -q 0.0 -u 700
               -n 5000 -y 1 -e d12) ;;
350M)  RECIPE_DATASET=fineweb100B
       RECIPE=(-v 250 -s 100000 -g 144 -h 1 -b 64 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.0003 -q 0.0 -u 700
               -n 2000 -x 60000 -y 1 -e d24) ;;
774M)  RECIPE_DATASET=fineweb100B
       RECIPE=(-v 250 -s 300000 -g 144 -h 1 -b 32 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.00025 -q 0.0 -u 700
               -n 4000 -x 286102 -y 1 -e d36) ;;
1558M) RECIPE_DATASET=edu_fineweb100B
       RECIPE=(-v 250 -s 300000 -g 384 -h 1 -b 16 -t 1024 -d 1048576 -r 0 -z 1 -c 0.1 -k cosine -l 0.0006 -q 0.1
               -u 700 -n 2000 -x 32000 -ge 1 -y 1 -e d48) ;;
*) die "usage: scripts/run_gpt2.sh 124M|350M|774M|1558M [train_gpt2cu flags]" ;;
esac
shift
[ -z "${DATA_DIR:-}" ] || die "DATA_DIR is no longer read: set DATASET (fineweb10B, fineweb100B, edu_fineweb10B, edu_fineweb100B, or a directory named like one)"
DRY_RUN=${DRY_RUN:-0}

# data: DATASET = llm.c's dataset name, or a directory named like one
DATASET=${DATASET:-$RECIPE_DATASET}
name=${DATASET%/}; name=${name##*/}
case "$name" in
fineweb10B|fineweb100B) PREFIX=fineweb ;;
edu_fineweb10B|edu_fineweb100B) PREFIX=edu_fineweb ;;
*) die "DATASET=$DATASET: want fineweb10B, fineweb100B, edu_fineweb10B or edu_fineweb100B (the names llm.c's dev/data/fineweb.py gives), or a directory named like one of them" ;;
esac
if [[ "$DATASET" == */* ]]; then DATA=${DATASET%/}; else DATA=dev/data/$DATASET; fi
if ! compgen -G "$DATA/${PREFIX}_train_*.bin" > /dev/null; then
    msg="no token shards $DATA/${PREFIX}_train_*.bin (llm.c's dev/data/fineweb.py writes them, or dev/data/prepare_dataset)"
    [ "$DRY_RUN" = 1 ] && echo "note: $msg" >&2 || die "$msg"
fi
OUT_DIR=${OUT_DIR:-log_gpt2_$SIZE}
MAX_RESTARTS=${MAX_RESTARTS:-20}
USE_CUDNN=${USE_CUDNN:-1}
export NCCL_NVLS_ENABLE=0   # never NVLink SHARP / multicast (the trainer forces it too)

# processes
LAUNCHER=${LAUNCHER:-mpi}
LAUNCH=(); PROC_FLAGS=(); FORWARD=(); BUILD_MPI=()
case "$LAUNCHER" in
mpi)
    HOSTS=${HOSTS:-}
    [ -n "$HOSTS" ] && [ -z "${NUM_GPUS:-}" ] && die "HOSTS=$HOSTS: set NUM_GPUS to the total number of processes"
    NUM_GPUS=${NUM_GPUS:-$(visible_gpu_count)}
    [[ "$NUM_GPUS" =~ ^[1-9][0-9]*$ ]] || die "no NVIDIA GPU visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES); set NUM_GPUS (got '$NUM_GPUS')"
    NP=$NUM_GPUS
    if [ "$NP" -gt 1 ] || [ -n "$HOSTS" ]; then
        mpirun_cmd
        LAUNCH=("${MPIRUN[@]}" -np "$NP" --bind-to none -x NCCL_NVLS_ENABLE)
        # other nodes: this shell's PATH and libraries (Open MPI forwards only variables named with -x)
        [ -n "$HOSTS" ] && LAUNCH+=(--host "$HOSTS" -x PATH ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH})
        BUILD_MPI=(NO_USE_MPI=0)
    fi ;;
srun-tcp|srun-fs)
    [ -n "${SLURM_NTASKS:-}" ] || die "LAUNCHER=$LAUNCHER runs inside a Slurm allocation (sbatch): SLURM_NTASKS is not set"
    [[ "${SLURM_NTASKS_PER_NODE:-}" =~ ^[1-9][0-9]*$ ]] ||
        die "LAUNCHER=$LAUNCHER needs --ntasks-per-node (one task per GPU): SLURM_NTASKS_PER_NODE is '${SLURM_NTASKS_PER_NODE:-}'"
    NP=$SLURM_NTASKS
    # -pr is each task's own SLURM_PROCID: expanded by the task's shell, not by this one
    LAUNCH=(srun --kill-on-bad-exit=1 bash -c 'exec "$@" -pr "$SLURM_PROCID"' task)
    PROC_FLAGS=(-pn "$NP" -pg "$SLURM_NTASKS_PER_NODE")
    if [ "$LAUNCHER" = srun-tcp ]; then
        MASTER_IP=${MASTER_IP:-$(hostname -I 2>/dev/null | awk '{ print $1 }')}
        case "$MASTER_IP" in ""|127.*) die "set MASTER_IP to rank 0's address on the cluster network (this script runs on rank 0's node)";; esac
        PROC_FLAGS+=(-pi tcp -ps "$MASTER_IP")
    else
        SYNC_DIR=${SYNC_DIR:-$PWD/.nccl_sync}
        [ "$DRY_RUN" = 1 ] || mkdir -p "$SYNC_DIR" || die "cannot make SYNC_DIR=$SYNC_DIR"
        PROC_FLAGS+=(-pi fs -pf "$SYNC_DIR")
    fi
    FORWARD=(--to-launcher)
    BUILD_MPI=(NO_USE_MPI=1) ;;
*) die "LAUNCHER=$LAUNCHER: want mpi, srun-tcp or srun-fs" ;;
esac

# -d stays llm.c's; with more processes than it allows at the recipe's micro-batch, a smaller -b
for ((i = 0; i < ${#RECIPE[@]}; i += 2)); do
    case "${RECIPE[i]}" in -b) bi=$((i + 1));; -t) T=${RECIPE[i+1]};; -d) D=${RECIPE[i+1]};; esac
done
B=${RECIPE[bi]}
while [ $((D % (B * T * NP))) -ne 0 ] && [ "$B" -gt 1 ]; do B=$((B / 2)); done
[ $((D % (B * T * NP))) -eq 0 ] || die "-d $D tokens per step cannot be split over $NP processes at -t $T (use a process count that divides $((D / T)))"
if [ "$B" != "${RECIPE[bi]}" ]; then
    echo "note: -b ${RECIPE[bi]} x -t $T x $NP processes is more than -d $D tokens per step: -b $B" >&2
    RECIPE[bi]=$B
fi

TRAINER=./train_gpt2cu
if [ "$DRY_RUN" = 1 ]; then
    TRAINER=scripts/dry_run_task.sh
    echo "dry run: would build: make train_gpt2cu USE_CUDNN=$USE_CUDNN ${BUILD_MPI[*]}" >&2
else
    make -j"$(nproc)" train_gpt2cu USE_CUDNN="$USE_CUDNN" "${BUILD_MPI[@]}" || exit 1
    mkdir -p "$OUT_DIR"
fi
STDERR_LOG=$OUT_DIR/stderr.log
[ "$DRY_RUN" = 1 ] && STDERR_LOG=/dev/null
CMD=("$TRAINER" -i "$DATA/${PREFIX}_train_*.bin" -j "$DATA/${PREFIX}_val_*.bin" -o "$OUT_DIR" "${RECIPE[@]}"
     "${PROC_FLAGS[@]}" "$@")
failures=0
while true; do
    run_forwarding_term "${FORWARD[@]}" "${LAUNCH[@]}" "${CMD[@]}" 2> >(tee "$STDERR_LOG" >&2)
    rc=$?
    [ $rc -eq 0 ] && break
    if [ "$FORWARDED_SIGNAL" -eq 1 ]; then
        echo "stopped by a signal; train_gpt2cu exited with $rc" >&2
        exit $rc
    fi
    if error_recurs $rc "$STDERR_LOG"; then
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
[ "$DRY_RUN" = 1 ] && exit 0
[ -f "$OUT_DIR/main.log" ] && python3 dev/plot_log.py -o "$OUT_DIR/loss.png" "$OUT_DIR/main.log" || true
