#!/usr/bin/env bash
# Data-parallel checks on a machine with several GPUs. In one run:
#   0. data: shards from Tiny Shakespeare repeated (scripts/scaling_data.sh), enough windows for 20
#      steps of every configuration below (Tiny Shakespeare's own train split holds 4 of the 8 windows
#      one step of -d 524288 -b 64 needs on one GPU)
#   1. one GPU, then mpirun -np N (N = 2 and, when present, 4), d12 B=64 T=1024 with a fixed total
#      batch -d 524288, 20 steps, for -z 0 and -z 1: losses against the one-GPU run (max |diff|),
#      tokens/s per GPU, scaling efficiency, peak memory per GPU (nvidia-smi)
#   2. the same run with N processes started with -pi tcp and with -pi fs instead of mpirun
#   3. checkpoint at step 10, a crash after step 12 (SIGKILL to mpirun and every rank), resume:
#      steps 11-20 bitwise equal to an uninterrupted run
# --one-gpu (the default on a machine with one GPU): the same script end to end with one process:
#   1. adds "1 NCCL": the NCCL path with one rank (LLMC_NCCL_SINGLE=1) under mpirun -np 1;
#   2. and 3. run with one NCCL rank. Multi-GPU numbers need N GPUs.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0). mpirun gets --allow-run-as-root only as root.
# Usage: scripts/multi_gpu_scaling.sh [--one-gpu]   (SCALE_DIR: logs; SCALE_DATA: data dir, kept between runs)
set -uo pipefail
source "$(dirname "$0")/mpi_launch.sh"
term_trappable_or_reexec "$0" "$@"
cd "$(dirname "$0")/.."
mpirun_cmd
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=${SCALE_DIR:-build/multi_gpu_scaling}
DATA=${SCALE_DATA:-dev/data/scaling}
rm -rf "$D"; mkdir -p "$D"
NGPU=$(visible_gpu_count)  # CUDA_VISIBLE_DEVICES included
[ "$NGPU" -ge 1 ] || { echo "error: no NVIDIA GPU visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES)" >&2; exit 1; }
ONE=0
[ "${1:-}" = --one-gpu ] && ONE=1
[ $# -le 1 ] && { [ $# -eq 0 ] || [ "$1" = --one-gpu ]; } || { echo "usage: $0 [--one-gpu]" >&2; exit 1; }
[ "$NGPU" -ge 2 ] || { [ $ONE -eq 1 ] || echo "note: one GPU found: running the one-GPU configurations (--one-gpu)"; ONE=1; }
make -j"$(nproc)" train_gpt2cu USE_CUDNN=${USE_CUDNN:-0} > "$D/build.log" 2>&1 || { tail -20 "$D/build.log"; exit 1; }

SHARD=5000000
need=$(bash scripts/scaling_data.sh tokens 64 1024 524288 20 $SHARD 1 2 4 8) || exit 1
bash scripts/scaling_data.sh make "$DATA" "$need" $SHARD || exit 1
bash scripts/scaling_data.sh check "$DATA" 64 1024 524288 20 1 2 4 8 || exit 1
# -sh 0: the same tokens per step at any process count (shuffling draws per-rank orders, as llm.c)
COMMON=(-e d12 -b 64 -t 1024 -d 524288 -x 20 -l 6e-4 -u 5 -v 0 -s 0 -sh 0 -i "$DATA/scaling_train_*.bin")
if [ $ONE -eq 1 ]; then
    NP=1; NS=(); ONE_ENV=(-x LLMC_NCCL_SINGLE=1)
else
    NP=2; NS=(2); [ "$NGPU" -ge 4 ] && NS+=(4); ONE_ENV=()
fi
MPI=("${MPIRUN[@]}" --bind-to none -x NCCL_NVLS_ENABLE "${ONE_ENV[@]}")
median_ms() { python3 dev/steplog.py median-ms "$1" --last 10 --lower; }
peak_mem() {  # run a command while sampling nvidia-smi; prints the largest per-GPU used memory (MiB)
    local f=$1; shift
    gpu_memory_sample "$f.mem" 0.2 &
    local w=$!
    "$@"; local rc=$?
    kill $w; wait $w 2>/dev/null
    peak_mib "$f.mem" > "$f.peak"
    return $rc
}
status=0
printf "%-18s %8s %12s %10s %10s %14s\n" run ms/step "tok/s/GPU" scaling "peak MiB" "max |dloss|"
for z in 0 1; do
    peak_mem "$D/g1_z$z" ./train_gpt2cu "${COMMON[@]}" -z $z > "$D/g1_z$z.log" 2>&1 || { echo "FAIL: 1 GPU -z $z"; tail -3 "$D/g1_z$z.log"; status=1; }
    base_ms=$(median_ms "$D/g1_z$z.log")
    runs=(g1_z$z)
    if [ $ONE -eq 1 ]; then
        peak_mem "$D/nccl1_z$z" "${MPI[@]}" -np 1 ./train_gpt2cu "${COMMON[@]}" -z $z > "$D/nccl1_z$z.log" 2>&1
        runs+=(nccl1_z$z)
    fi
    for n in "${NS[@]}"; do
        peak_mem "$D/g${n}_z$z" "${MPI[@]}" -np $n ./train_gpt2cu "${COMMON[@]}" -z $z > "$D/g${n}_z$z.log" 2>&1
        runs+=(g${n}_z$z)
    done
    for r in "${runs[@]}"; do
        f="$D/$r"; n=${r%%_*}; n=${n#g}; [ "$n" = nccl1 ] && n=1
        [ "$(python3 dev/steplog.py count "$f.log")" -eq 20 ] || { echo "FAIL: $r did not run 20 steps"; tail -3 "$f.log"; status=1; continue; }
        ms=$(median_ms "$f.log")
        dl=$(printf %.2e "$(python3 dev/steplog.py compare "$f.log" "$D/g1_z$z.log")")
        label="$n GPU -z $z"; [ "${r%%_*}" = nccl1 ] && label="1 NCCL -z $z"
        awk -v n="$n" -v label="$label" -v ms="$ms" -v b="$base_ms" -v pk="$(cat "$f.peak")" -v dl="$dl" 'BEGIN {
            printf "%-18s %8.1f %12.0f %9.1f%% %10d %14s\n", label, ms, 524288 / (ms / 1000) / n, 100 * b / (n * ms), pk, dl }'
    done
done
echo "(scaling = t1 / (N x tN): with a fixed total batch the ideal N-GPU step takes 1/N of the one-GPU step)"

# start-up without mpirun, NP processes
single=(); [ $ONE -eq 1 ] && single=(env LLMC_NCCL_SINGLE=1)
for method in tcp fs; do
    extra=(-pi $method -pn $NP -pg 8); [ $method = tcp ] && extra+=(-ps 127.0.0.1) || extra+=(-pf "$D/fs")
    mkdir -p "$D/fs"
    for ((r = 0; r < NP; r++)); do "${single[@]}" ./train_gpt2cu "${COMMON[@]}" -x 5 "${extra[@]}" -pr $r > "$D/$method.$r.log" 2>&1 & done
    wait
    if [ "$(python3 dev/steplog.py count "$D/$method.0.log" --step 5)" -ge 1 ]; then echo "PASS: -pi $method, $NP processes"; else echo "FAIL: -pi $method"; tail -3 "$D/$method".*.log; status=1; fi
done

# checkpoint at step 10, crash after step 12 (every rank killed), resume: steps 11-20 bitwise equal
"${MPI[@]}" -np $NP ./train_gpt2cu "${COMMON[@]}" -z 1 -n 10 -o "$D/ck_a" > "$D/ck_a.log" 2>&1
"${MPI[@]}" -np $NP ./train_gpt2cu "${COMMON[@]}" -z 1 -n 10 -o "$D/ck_b" > "$D/ck_b1.log" 2>&1 &
pid=$!
python3 dev/steplog.py wait "$D/ck_b1.log" 12 --pid $pid --interval 0.05
ranks=$(trainer_pids $pid)
kill_tree $pid; wait $pid 2>/dev/null
sleep 1
left=0; for p in $ranks; do st=$(ps -o stat= -p "$p" 2>/dev/null); [ -n "$st" ] && [ "${st#Z}" = "$st" ] && left=$((left + 1)); done
[ -n "$ranks" ] && [ $left -eq 0 ] && echo "PASS: crash test killed mpirun and its $(echo $ranks | wc -w) ranks" ||
    { echo "FAIL: crash test: ranks '$ranks', $left still running"; status=1; }
"${MPI[@]}" -np $NP ./train_gpt2cu "${COMMON[@]}" -z 1 -n 10 -o "$D/ck_b" -y 1 > "$D/ck_b2.log" 2>&1
strip() { python3 dev/steplog.py lines "$1" --from 11 --to 20 --no-timing; }
if [ "$(strip "$D/ck_a.log" | wc -l)" -eq 10 ] && cmp -s <(strip "$D/ck_a.log") <(strip "$D/ck_b2.log"); then
    echo "PASS: $NP-process checkpoint at step 10 + crash + resume: steps 11-20 bitwise equal"
else
    echo "FAIL: $NP-process resume"; diff <(strip "$D/ck_a.log") <(strip "$D/ck_b2.log") | head; status=1
fi
exit $status
