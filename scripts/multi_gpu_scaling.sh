#!/usr/bin/env bash
# Data-parallel checks on a machine with several GPUs (the multi-GPU run issue). In one run:
#   1. one GPU, then mpirun -np N (N = 2 and, when present, 4), d12 B=64 T=1024 with a fixed total
#      batch -d 524288, 20 steps, for -z 0 and -z 1: losses against the one-GPU run (max |diff|),
#      tokens/s per GPU, scaling efficiency, peak memory per GPU (nvidia-smi)
#   2. the same 2-process run started with -pi tcp and with -pi fs instead of mpirun
#   3. checkpoint at step 10 with 2 processes, resume, steps 11-20 bitwise equal
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Usage: scripts/multi_gpu_scaling.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
D=${SCALE_DIR:-build/multi_gpu_scaling}
rm -rf "$D"; mkdir -p "$D"
NGPU=$(nvidia-smi -L | wc -l)
[ "$NGPU" -ge 2 ] || { echo "error: needs at least 2 GPUs, found $NGPU" >&2; exit 1; }
[ -f dev/data/tinyshakespeare/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh || exit 1
make -j"$(nproc)" train_gpt2cu USE_CUDNN=${USE_CUDNN:-0} > "$D/build.log" 2>&1 || { tail -20 "$D/build.log"; exit 1; }
COMMON=(-e d12 -b 64 -t 1024 -d 524288 -x 20 -l 6e-4 -u 5 -v 0 -s 0 -i dev/data/tinyshakespeare/tiny_shakespeare_train.bin)
losses() { grep -E '^step +[0-9]+/' "$1" | sed -E 's/.*\| loss ([0-9.]+) .*/\1/'; }
median_ms() { grep -E '^step +[0-9]+/' "$1" | tail -n 10 | sed -E 's/.*\| ([0-9.]+) ms .*/\1/' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
peak_mem() {  # run a command while sampling nvidia-smi; prints the largest per-GPU used memory (MiB)
    local f=$1; shift
    ( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> "$f.mem"; sleep 0.2; done ) &
    local w=$!
    "$@"; local rc=$?
    kill $w; wait $w 2>/dev/null
    awk '$1 > m { m = $1 } END { print m + 0 }' "$f.mem" > "$f.peak"
    return $rc
}
printf "%-18s %8s %12s %10s %10s %14s\n" run ms/step "tok/s/GPU" scaling "peak MiB" "max |dloss|"
for z in 0 1; do
    peak_mem "$D/g1_z$z" ./train_gpt2cu "${COMMON[@]}" -z $z > "$D/g1_z$z.log" 2>&1
    base_ms=$(median_ms "$D/g1_z$z.log")
    for n in 2 4; do
        [ "$n" -le "$NGPU" ] || continue
        peak_mem "$D/g${n}_z$z" mpirun -np $n --bind-to none -x NCCL_NVLS_ENABLE ./train_gpt2cu "${COMMON[@]}" -z $z \
            > "$D/g${n}_z$z.log" 2>&1
    done
    for n in 1 2 4; do
        f="$D/g${n}_z$z"; [ -f "$f.log" ] || continue
        ms=$(median_ms "$f.log")
        dl=$(paste <(losses "$D/g1_z$z.log") <(losses "$f.log") | awk '{d=$1-$2; if (d<0) d=-d; if (d>m) m=d} END {printf "%.2e", m}')
        awk -v n="$n" -v z="$z" -v ms="$ms" -v b="$base_ms" -v pk="$(cat "$f.peak")" -v dl="$dl" 'BEGIN {
            printf "%-18s %8.1f %12.0f %9.1f%% %10d %14s\n", n " GPU -z " z, ms, 524288 / (ms / 1000) / n, 100 * b / (n * ms), pk, dl }'
    done
done
echo "(scaling = t1 / (N x tN): with a fixed total batch the ideal N-GPU step takes 1/N of the one-GPU step)"

# start-up without mpirun, 2 processes
for method in tcp fs; do
    extra=(-pi $method -pn 2 -pg 8); [ $method = tcp ] && extra+=(-ps 127.0.0.1) || extra+=(-pf "$D/fs")
    mkdir -p "$D/fs"
    for r in 0 1; do ./train_gpt2cu "${COMMON[@]}" -x 5 "${extra[@]}" -pr $r > "$D/$method.$r.log" 2>&1 & done
    wait
    if grep -qE '^step +5/' "$D/$method.0.log"; then echo "PASS: -pi $method, 2 processes"; else echo "FAIL: -pi $method"; tail -3 "$D/$method.0.log" "$D/$method.1.log"; fi
done

# checkpoint at step 10 with 2 processes, resume, steps 11-20 bitwise equal
mpirun -np 2 --bind-to none ./train_gpt2cu "${COMMON[@]}" -z 1 -n 10 -o "$D/ck_a" > "$D/ck_a.log" 2>&1
setsid mpirun -np 2 --bind-to none ./train_gpt2cu "${COMMON[@]}" -z 1 -n 10 -o "$D/ck_b" > "$D/ck_b1.log" 2>&1 &
pid=$!
until grep -qE '^step +12/' "$D/ck_b1.log" 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null   # the whole process group: a crash after step 12
mpirun -np 2 --bind-to none ./train_gpt2cu "${COMMON[@]}" -z 1 -n 10 -o "$D/ck_b" -y 1 > "$D/ck_b2.log" 2>&1
strip() { grep -E '^step +(1[1-9]|20)/' "$1" | sed -E 's/\| [0-9.]+ ms.*//'; }
if [ "$(strip "$D/ck_a.log" | wc -l)" -eq 10 ] && cmp -s <(strip "$D/ck_a.log") <(strip "$D/ck_b2.log"); then
    echo "PASS: 2-process checkpoint at step 10 + resume: steps 11-20 bitwise equal"
else
    echo "FAIL: 2-process resume"; diff <(strip "$D/ck_a.log") <(strip "$D/ck_b2.log") | head
fi
