#!/usr/bin/env bash
# Side-by-side benchmark on one GPU, in one run: train_gpt2cu (USE_CUDNN=1 and =0 builds) and the
# PyTorch reference train_gpt2.py (torch.compile, flash attention, fused AdamW) on the same shards,
# model and batch. Prints ms/step (median after warm-up), tokens/s, MFU, peak GPU memory (the
# process's own, read by nvidia-smi, the same way for every program) and ratios to PyTorch.
#
# Usage: scripts/bench.sh [-e d12] [-b 64] [-t 1024] [-n 40] [-r 1] [-ge 0] [-w 10] [--no-torch] [--only cudnn|nocudnn]
#        [--configs "R:GE R:GE ..."]   several recompute:gelu-fusion settings of train_gpt2cu in one run
#        [--cudnn torch|system|DIR]    which cuDNN the USE_CUDNN=1 build uses (make's CUDNN_HOME). Default
#                                      torch: the cuDNN wheel (nvidia-cudnn-cu*) that the benchmarked PyTorch
#                                      loads, so both sides run the same library; system when there is none
set -uo pipefail
cd "$(dirname "$0")/.."
ARGS="$*"
MODEL=d12; B=64; T=1024; STEPS=40; WARM=10; RECOMPUTE=1; GELU=0; TORCH=1; ONLY=""; CONFIGS=""; CUDNN=torch
while [ $# -gt 0 ]; do
    case "$1" in
        -e) MODEL=$2; shift 2;; -b) B=$2; shift 2;; -t) T=$2; shift 2;; -n) STEPS=$2; shift 2;;
        -r) RECOMPUTE=$2; shift 2;; -ge) GELU=$2; shift 2;; -w) WARM=$2; shift 2;; --no-torch) TORCH=0; shift;;
        --configs) CONFIGS=$2; shift 2;;
        --only) ONLY=$2; shift 2;;
        --cudnn) CUDNN=$2; shift 2;;
        *) echo "unknown argument $1"; exit 1;;
    esac
done
case "$ONLY" in ""|cudnn|nocudnn) ;; *) echo "--only $ONLY: want cudnn or nocudnn"; exit 1;; esac
# the cuDNN of the USE_CUDNN=1 build: a directory with include/cudnn.h and lib/libcudnn.so.9, or "" (system)
case "$CUDNN" in
    torch) CUDNN_HOME_DIR=$(bash dev/cudnn_wheel_dir.sh)
           [ -z "$CUDNN_HOME_DIR" ] && echo "no cuDNN wheel next to torch (python3 -c 'import nvidia.cudnn'): the USE_CUDNN=1 build uses the system cuDNN";;
    system) CUDNN_HOME_DIR="";;
    *) CUDNN_HOME_DIR=$CUDNN
       [ -f "$CUDNN_HOME_DIR/include/cudnn.h" ] || { echo "--cudnn $CUDNN: no include/cudnn.h there (want torch, system or a cuDNN dir)"; exit 1; };;
esac

TS=dev/data/tinyshakespeare
[ -f $TS/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh || exit 1
OUTDIR=${BENCH_DIR:-build/bench}
mkdir -p "$OUTDIR"
JOBS=$(nproc)

# peak memory of a process tree, sampled by nvidia-smi every 100 ms
mem_watch() {  # $1 = file
    while true; do
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null >> "$1"
        sleep 0.1
    done
}
peak_mib() { awk -F', *' '{ if ($2 > m) m = $2 } END { print m + 0 }' "$1"; }

# median of the ms column of step lines after the warm-up
median_ms() {
    grep -E '^step +[0-9]+/' "$1" | awk -v w="$WARM" '{ n++; if (n > w) { for (i = 1; i <= NF; i++) if ($(i+1) == "ms") print $i } }' |
        sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2 }'
}
mfu_of() { grep -E '^step +[0-9]+/' "$1" | tail -1 | sed -nE 's/.*\| ([0-9.]+)% bf16 MFU.*/\1/p'; }

run_one() {  # name, command...
    local name=$1; shift
    local log="$OUTDIR/$name.log" mem="$OUTDIR/$name.mem"
    : > "$mem"
    mem_watch "$mem" & local watcher=$!
    "$@" > "$log" 2>&1; local rc=$?
    kill $watcher 2>/dev/null; wait $watcher 2>/dev/null
    if [ $rc -ne 0 ]; then echo "$name failed (rc $rc), see $log"; tail -5 "$log"; fi
    echo "$name $(median_ms "$log") $(peak_mib "$mem") $(mfu_of "$log")" >> "$OUTDIR/results.txt"
}

: > "$OUTDIR/results.txt"
CONFIGS=${CONFIGS:-"$RECOMPUTE:$GELU"}
COMMON="-e $MODEL -b $B -t $T -x $STEPS -v 0 -s 0 -i $TS/tiny_shakespeare_train.bin"
for cudnn in 1 0; do
    [ "$ONLY" = cudnn ] && [ $cudnn = 0 ] && continue
    [ "$ONLY" = nocudnn ] && [ $cudnn = 1 ] && continue
    impl=$([ $cudnn = 1 ] && echo "cudnn" || echo "attention.cuh")
    home=$([ $cudnn = 1 ] && echo "$CUDNN_HOME_DIR")
    make -j"$JOBS" train_gpt2cu USE_CUDNN=$cudnn CUDNN_HOME="$home" > "$OUTDIR/build_cudnn$cudnn.log" 2>&1 || { echo "build USE_CUDNN=$cudnn failed"; tail -20 "$OUTDIR/build_cudnn$cudnn.log"; continue; }
    cp train_gpt2cu "$OUTDIR/train_gpt2cu_cudnn$cudnn"
    for cfg in $CONFIGS; do
        r=${cfg%:*}; ge=${cfg#*:}
        run_one "ours-$impl-r$r-ge$ge" "$OUTDIR/train_gpt2cu_cudnn$cudnn" $COMMON -r "$r" -ge "$ge"
    done
done
if [ "$TORCH" = 1 ]; then
    run_one "pytorch-compile" python3 train_gpt2.py -e "$MODEL" -b "$B" -t "$T" -x "$STEPS" -v 0 --compile 1 \
        --flash 1 --dtype bfloat16 -i $TS/tiny_shakespeare_train.bin
fi

tokens=$((B * T))
echo
echo "scripts/bench.sh $ARGS"
echo "GPT-2 $MODEL, B=$B, T=$T, bf16, $STEPS steps, median over steps after $WARM warm-up steps"
cudnn_line=$(grep -h -m1 -E '^\| cuDNN ' "$OUTDIR"/ours-cudnn-*.log 2>/dev/null | head -1 | sed -E 's/^\| cuDNN +\| *//; s/ *\|$//')
[ -n "$cudnn_line" ] && echo "cuDNN of the USE_CUDNN=1 build: $cudnn_line${CUDNN_HOME_DIR:+, from $CUDNN_HOME_DIR}"
[ "$TORCH" = 1 ] && echo "PyTorch: $(python3 -c 'import torch; print(torch.__version__, "(cuDNN", torch.backends.cudnn.version(), "loaded with it)")' 2>/dev/null)"
printf "%-30s %10s %12s %8s %12s %10s %10s\n" program ms/step tokens/s MFU "peak GiB" "speed x" "memory x"
torch_ms=$(awk '$1 == "pytorch-compile" { print $2 }' "$OUTDIR/results.txt")
torch_mem=$(awk '$1 == "pytorch-compile" { print $3 }' "$OUTDIR/results.txt")
while read -r name ms mem mfu; do
    awk -v n="$name" -v ms="$ms" -v mem="$mem" -v mfu="$mfu" -v tok="$tokens" -v tms="${torch_ms:-nan}" -v tmem="${torch_mem:-nan}" 'BEGIN {
        tps = (ms > 0) ? tok / (ms / 1000) : 0
        sp = (tms > 0 && ms > 0) ? sprintf("%.3f", tms / ms) : "-"
        mr = (tmem > 0 && mem > 0) ? sprintf("%.2f", mem / tmem) : "-"
        printf "%-30s %10.1f %12.0f %7s%% %12.1f %10s %10s\n", n, ms, tps, (mfu == "" ? "-" : mfu), mem / 1024, sp, mr }'
done < "$OUTDIR/results.txt"
echo "(speed x = PyTorch ms / ms; memory x = peak / PyTorch peak; peak = nvidia-smi used_memory, CUDA context included)"
