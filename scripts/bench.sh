#!/usr/bin/env bash
# Side-by-side benchmark on one GPU, in one run: train_gpt2cu (USE_CUDNN=1 and =0 builds) against the
# strongest PyTorch GPT-2 a user would write (dev/torch_baseline.py: nanoGPT layout, torch.compile in
# default and max-autotune-no-cudagraphs modes, bf16 autocast, SDPA, fused AdamW, no per-step sync), on
# the same shards, model and batch. Prints ms/step (median after warm-up), tokens/s, MFU, peak GPU memory
# (the process's own, read by nvidia-smi, the same way for every program), seconds until the first step
# line, and ratios to the faster PyTorch mode.
#
# Usage: scripts/bench.sh [-e d12] [-b 64] [-t 1024] [-n 40] [-r 1] [-ge 0] [-w 10] [--no-torch] [--only cudnn|nocudnn]
#        [--configs "R:GE R:GE ..."]   several recompute:gelu-fusion settings of train_gpt2cu in one run
#        [--cudnn torch|system|DIR]    which cuDNN the USE_CUDNN=1 build uses (make's CUDNN_HOME). Default
#                                      torch: the cuDNN wheel (nvidia-cudnn-cu*) that the benchmarked PyTorch
#                                      loads, so both sides run the same library; system when there is none
#        [--torch-modes "default max-autotune-no-cudagraphs"]   torch.compile modes to run (the faster is
#                                      the baseline of the ratios)
#        [--reference]                 also run train_gpt2.py --compile 1 (our numerical reference; not the
#                                      baseline of the ratios)
#        [--sizes "d12:64 d24:32 d36:16 d48:8"]   several GPT-2 sizes (model:B) in one run, instead of -e/-b
#        [--summary]                   build and run nothing: print the table of an earlier run from
#                                      $BENCH_DIR/results.txt (give the same --sizes and -t as that run)
#        [--timeout S]                 stop any one program after S seconds (its row then reads nan; the
#                                      table is still printed)
#        [--maxbatch]                  then, for the last size, train_gpt2cu (cuDNN build, first config) at
#                                      its own start-up estimate of the largest micro-batch, and at one
#                                      more, which must stop with the out-of-memory message
set -uo pipefail
source "$(dirname "$0")/mpi_launch.sh"  # gpu_memory_sample, peak_mib
cd "$(dirname "$0")/.."
ARGS="$*"
MODEL=d12; B=64; T=1024; STEPS=40; WARM=10; RECOMPUTE=1; GELU=0; TORCH=1; ONLY=""; CONFIGS=""; CUDNN=torch
TORCH_MODES="default max-autotune-no-cudagraphs"; REFERENCE=0; SIZES=""; MAXBATCH=0; PROG_TIMEOUT=0; SUMMARY=0
while [ $# -gt 0 ]; do
    case "$1" in
        -e) MODEL=$2; shift 2;; -b) B=$2; shift 2;; -t) T=$2; shift 2;; -n) STEPS=$2; shift 2;;
        -r) RECOMPUTE=$2; shift 2;; -ge) GELU=$2; shift 2;; -w) WARM=$2; shift 2;; --no-torch) TORCH=0; shift;;
        --configs) CONFIGS=$2; shift 2;;
        --only) ONLY=$2; shift 2;;
        --cudnn) CUDNN=$2; shift 2;;
        --torch-modes) TORCH_MODES=$2; shift 2;;
        --reference) REFERENCE=1; shift;;
        --sizes) SIZES=$2; shift 2;;
        --maxbatch) MAXBATCH=1; shift;;
        --timeout) PROG_TIMEOUT=$2; shift 2;;
        --summary) SUMMARY=1; shift;;
        *) echo "unknown argument $1"; exit 1;;
    esac
done
case "$ONLY" in ""|cudnn|nocudnn) ;; *) echo "--only $ONLY: want cudnn or nocudnn"; exit 1;; esac
[[ "$PROG_TIMEOUT" =~ ^[0-9]+$ ]] || { echo "--timeout $PROG_TIMEOUT: want whole seconds (0 = no limit)"; exit 1; }
for m in $TORCH_MODES; do
    case "$m" in default|max-autotune-no-cudagraphs|none) ;; *) echo "--torch-modes: unknown mode $m (want default, max-autotune-no-cudagraphs or none)"; exit 1;; esac
done
SIZES=${SIZES:-"$MODEL:$B"}
for s in $SIZES; do
    [[ "$s" =~ ^[^:]+:[1-9][0-9]*$ ]] || { echo "--sizes: '$s' is not model:B (e.g. d48:8)"; exit 1; }
done
# the cuDNN of the USE_CUDNN=1 build: a directory with include/cudnn.h and lib/libcudnn.so.9, or "" (system)
case "$CUDNN" in
    torch) CUDNN_HOME_DIR=$(bash dev/cudnn_wheel_dir.sh)
           [ -z "$CUDNN_HOME_DIR" ] && echo "no cuDNN wheel next to torch (python3 -c 'import nvidia.cudnn'): the USE_CUDNN=1 build uses the system cuDNN";;
    system) CUDNN_HOME_DIR="";;
    *) CUDNN_HOME_DIR=$CUDNN
       [ -f "$CUDNN_HOME_DIR/include/cudnn.h" ] || { echo "--cudnn $CUDNN: no include/cudnn.h there (want torch, system or a cuDNN dir)"; exit 1; };;
esac

TS=dev/data/tinyshakespeare
[ "$SUMMARY" = 1 ] || [ -f $TS/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh || exit 1
OUTDIR=${BENCH_DIR:-build/bench}
[ "$SUMMARY" = 1 ] || mkdir -p "$OUTDIR"
JOBS=$(nproc)

# median of the ms column of step lines after the warm-up; the last step line's MFU
median_ms() { python3 dev/steplog.py median-ms "$1" --skip "$WARM"; }
mfu_of() { python3 dev/steplog.py last "$1" mfu; }

# run_one NAME MODEL B COMMAND...: the log gets each line's arrival time (seconds since the start) in
# $OUTDIR/NAME.times; "first" = seconds until the first step line (start-up, data, init, first step)
run_one() {
    local name=$1 model=$2 b=$3; shift 3
    local log="$OUTDIR/$name.log" mem="$OUTDIR/$name.mem" times="$OUTDIR/$name.times"
    : > "$mem"
    gpu_memory_sample "$mem" 0.1 --apps & local watcher=$!  # the process's own memory, every 100 ms
    local t0=$EPOCHREALTIME
    PYTHONUNBUFFERED=1 timeout "$PROG_TIMEOUT" "$@" 2>&1 | while IFS= read -r line; do
        printf '%s\n' "$line" >> "$log.tmp"
        printf '%s %s\n' "$EPOCHREALTIME" "${line:0:12}" >> "$times.tmp"
    done
    local rc=${PIPESTATUS[0]}
    mv "$log.tmp" "$log"
    awk -v t0="$t0" '{ $1 = sprintf("%.1f", $1 - t0); print }' "$times.tmp" > "$times"; rm -f "$times.tmp"
    kill $watcher 2>/dev/null; wait $watcher 2>/dev/null
    if [ "$rc" -eq 124 ] && [ "$PROG_TIMEOUT" -gt 0 ]; then echo "$name stopped after --timeout $PROG_TIMEOUT s, see $log"
    elif [ "$rc" -ne 0 ]; then echo "$name failed (rc $rc), see $log"; tail -5 "$log"; fi
    local first; first=$(awk '$2 == "step" { print $1; exit }' "$times")
    local ms; ms=$(median_ms "$log"); [ "$rc" -eq 124 ] && [ "$PROG_TIMEOUT" -gt 0 ] && ms=nan  # partial: not a result
    local mfu; mfu=$(mfu_of "$log")  # "-" when empty, so that a run without step lines keeps its columns
    echo "$name $model $b $ms $(peak_mib "$mem") ${mfu:--} ${first:--}" >> "$OUTDIR/results.txt"
}

if [ "$SUMMARY" = 1 ]; then
    [ -f "$OUTDIR/results.txt" ] || { echo "--summary: no $OUTDIR/results.txt (set BENCH_DIR to an earlier run's directory)"; exit 1; }
else
    : > "$OUTDIR/results.txt"
    rm -f "$OUTDIR"/*.log.tmp "$OUTDIR"/*.times.tmp
    CONFIGS=${CONFIGS:-"$RECOMPUTE:$GELU"}
    for cudnn in 1 0; do
        [ "$ONLY" = cudnn ] && [ $cudnn = 0 ] && continue
        [ "$ONLY" = nocudnn ] && [ $cudnn = 1 ] && continue
        home=$([ $cudnn = 1 ] && echo "$CUDNN_HOME_DIR")
        make -j"$JOBS" train_gpt2cu USE_CUDNN=$cudnn CUDNN_HOME="$home" > "$OUTDIR/build_cudnn$cudnn.log" 2>&1 || { echo "build USE_CUDNN=$cudnn failed"; tail -20 "$OUTDIR/build_cudnn$cudnn.log"; continue; }
        cp train_gpt2cu "$OUTDIR/train_gpt2cu_cudnn$cudnn"
    done
    for size in $SIZES; do
        model=${size%:*}; b=${size#*:}
        COMMON="-e $model -b $b -t $T -x $STEPS -v 0 -s 0 -i $TS/tiny_shakespeare_train.bin"
        for cudnn in 1 0; do
            [ -x "$OUTDIR/train_gpt2cu_cudnn$cudnn" ] || continue
            [ "$ONLY" = cudnn ] && [ $cudnn = 0 ] && continue
            [ "$ONLY" = nocudnn ] && [ $cudnn = 1 ] && continue
            impl=$([ $cudnn = 1 ] && echo "cudnn" || echo "attention.cuh")
            for cfg in $CONFIGS; do
                r=${cfg%:*}; ge=${cfg#*:}
                run_one "$model-ours-$impl-r$r-ge$ge" "$model" "$b" "$OUTDIR/train_gpt2cu_cudnn$cudnn" $COMMON -r "$r" -ge "$ge"
            done
        done
        if [ "$TORCH" = 1 ]; then
            for mode in $TORCH_MODES; do
                run_one "$model-torch-$mode" "$model" "$b" python3 dev/torch_baseline.py -e "$model" -b "$b" -t "$T" -n "$STEPS" \
                    --compile "$mode" -i $TS/tiny_shakespeare_train.bin
            done
        fi
        if [ "$REFERENCE" = 1 ]; then
            run_one "$model-train_gpt2.py" "$model" "$b" python3 train_gpt2.py -e "$model" -b "$b" -t "$T" -x "$STEPS" -v 0 \
                --compile 1 --flash 1 --dtype bfloat16 -i $TS/tiny_shakespeare_train.bin
        fi
    done
fi

echo
echo "scripts/bench.sh $ARGS"
echo "GPT-2 $SIZES (model:B), T=$T, bf16, $STEPS steps, median over steps after $WARM warm-up steps"
cudnn_line=$(grep -h -m1 -E '^\| cuDNN ' "$OUTDIR"/*-ours-cudnn-*.log 2>/dev/null | head -1 | sed -E 's/^\| cuDNN +\| *//; s/ *\|$//')
[ "$SUMMARY" = 1 ] && CUDNN_HOME_DIR=""  # this machine's, not necessarily the run's
[ -n "$cudnn_line" ] && echo "cuDNN of the USE_CUDNN=1 build: $cudnn_line${CUDNN_HOME_DIR:+, from $CUDNN_HOME_DIR}"
engine_line=$(grep -h -m1 -E '^\| attention ' "$OUTDIR"/*-ours-attention.cuh-*.log 2>/dev/null | head -1 | sed -E 's/^\| attention +\| *//; s/ *\|$//')
[ -n "$engine_line" ] && echo "attention of the USE_CUDNN=0 build: $engine_line"
if [ "$SUMMARY" = 1 ]; then
    torch_line=$(grep -h -m1 -oE '^torch [^,]+' "$OUTDIR"/*-torch-*.log 2>/dev/null | head -1)
    [ -n "$torch_line" ] && echo "PyTorch: ${torch_line#torch }"
elif [ "$TORCH" = 1 ]; then echo "PyTorch: $(python3 -c 'import torch; print(torch.__version__, "(cuDNN", torch.backends.cudnn.version(), "loaded with it)")' 2>/dev/null)"
fi
printf "%-44s %5s %14s %10s %10s %7s %9s %8s %8s %8s\n" program B params ms/step tokens/s MFU "peak GiB" "first s" "speed x" "memory x"
for size in $SIZES; do
    model=${size%:*}
    # the baseline: the faster torch.compile mode of this size
    best=$(awk -v m="$model" '$2 == m && $1 ~ /-torch-/ && $4 != "nan" { print $4, $5 }' "$OUTDIR/results.txt" | sort -g | head -1)
    tms=${best% *}; tmem=${best#* }
    params=$(grep -h -m1 -E '^\| num_parameters ' "$OUTDIR/$model"-ours-*.log 2>/dev/null | head -1 | awk -F'|' '{ gsub(/ /, "", $3); print $3 }')
    [ -z "$params" ] && params=$(grep -h -m1 -oE '[0-9,]+ parameters' "$OUTDIR/$model"-torch-*.log 2>/dev/null | head -1 | tr -d ', parmetrs')
    while read -r name m b ms mem mfu first; do
        [ "$m" = "$model" ] || continue
        awk -v n="$name" -v b="$b" -v p="${params:-0}" -v ms="$ms" -v mem="$mem" -v mfu="$mfu" -v first="$first" -v T="$T" \
            -v tms="${tms:-nan}" -v tmem="${tmem:-nan}" 'BEGIN {
            ok = (ms != "nan" && ms > 0)  # nan: no step lines (failed, or stopped by --timeout)
            tps = ok ? b * T / (ms / 1000) : 0
            sp = (ok && tms != "nan" && tms > 0) ? sprintf("%.3f", tms / ms) : "-"
            mr = (ok && tmem > 0 && mem > 0) ? sprintf("%.2f", mem / tmem) : "-"
            printf "%-44s %5d %14s %10.1f %10.0f %6s%% %9.1f %8s %8s %8s\n", n, b, p, ms, tps, (mfu == "" || mfu == "-" ? "-" : mfu), mem / 1024, first, sp, mr }'
    done < "$OUTDIR/results.txt"
done
echo "(speed x = the faster torch.compile mode's ms / ms; memory x = peak / that mode's peak; peak = nvidia-smi"
echo " used_memory, CUDA context included; first s = seconds from launch until the first step line)"

if [ "$MAXBATCH" = 1 ]; then
    size=${SIZES##* }; model=${size%:*}
    cfg=${CONFIGS%% *}; r=${cfg%:*}; ge=${cfg#*:}
    bin=$OUTDIR/train_gpt2cu_cudnn1; [ -x "$bin" ] || bin=$OUTDIR/train_gpt2cu_cudnn0
    log=$(ls "$OUTDIR/$model"-ours-*-r$r-ge$ge.log 2>/dev/null | head -1)
    est=$(sed -nE 's/.*estimated max micro-batch at T=[0-9]+ with -r [0-9]+: ([0-9]+).*/\1/p' "$log" | head -1)
    if [ -z "$est" ]; then
        echo "max batch: no start-up estimate in $log"
    else
        echo
        echo "max batch of $model at T=$T, -r $r -ge $ge ($(basename "$bin")): start-up estimate B=$est"
        for bb in "$est" $((est + 1)); do
            "$bin" -e "$model" -b "$bb" -t "$T" -x 3 -v 0 -s 0 -r "$r" -ge "$ge" -i $TS/tiny_shakespeare_train.bin > "$OUTDIR/maxbatch_$bb.log" 2>&1
            rc=$?
            steps=$(python3 dev/steplog.py count "$OUTDIR/maxbatch_$bb.log")
            oom=$(grep -m1 -oE 'activations for -b [0-9]+ .*GPU memory is free' "$OUTDIR/maxbatch_$bb.log")
            echo "  -b $bb: exit $rc, $steps step lines${oom:+, \"$oom\"}"
            [ "$rc" -ne 0 ] && [ -z "$oom" ] && tail -3 "$OUTDIR/maxbatch_$bb.log" | sed 's/^/    /'
        done
    fi
fi
