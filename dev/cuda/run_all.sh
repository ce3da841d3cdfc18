#!/usr/bin/env bash
# Runs the built kernel-lab programs (dev/cuda/bin/*, from `make -C dev/cuda`), one after another.
# Per program: its failed checks and its timing table, then PASS/FAIL; at the end "N passed, N failed".
# Exit status 1 if any program failed (a nonzero exit, a crash, or a timeout).
#
#   dev/cuda/run_all.sh                 every program in dev/cuda/bin
#   dev/cuda/run_all.sh matmul adamw    only these
# Environment: LOG_DIR (full output per program; default dev/cuda/bin/logs), LAB_TIMEOUT (seconds per
# program, default 300), LAB_VERBOSE=1 (print whole logs), and the programs' own LAB_SEED, LAB_REPS,
# LAB_PEAK_GBS, LAB_PEAK_TFLOPS. zero_check runs only when 2+ GPUs are visible (two processes, TCP start-up).
set -u
cd "$(dirname "$0")"
LOG_DIR=${LOG_DIR:-bin/logs}
TIMEOUT=${LAB_TIMEOUT:-300}
mkdir -p "$LOG_DIR"

if [ $# -gt 0 ]; then
    programs=("$@")
else
    programs=()
    for f in bin/*; do
        [ -f "$f" ] && [ -x "$f" ] && programs+=("$(basename "$f")")
    done
fi
if [ ${#programs[@]} -eq 0 ]; then
    echo "no programs in dev/cuda/bin: build them first with make -C dev/cuda"
    echo "0 passed, 1 failed"
    exit 1
fi

num_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
passed=0; failed=0; skipped=0; failed_names=()

for name in "${programs[@]}"; do
    prog=bin/$name
    log=$LOG_DIR/$name.log
    if [ ! -x "$prog" ]; then
        echo "FAIL  $name (not built: make -C dev/cuda $name)"
        failed=$((failed + 1)); failed_names+=("$name"); continue
    fi
    echo "== $name"
    t0=$SECONDS
    if [ "$name" = zero_check ]; then
        if [ "${num_gpus:-0}" -lt 2 ]; then
            echo "SKIP  zero_check (needs 2 GPUs, $num_gpus visible)"
            skipped=$((skipped + 1)); continue
        fi
        port=$((20000 + RANDOM % 20000))
        ( timeout "$TIMEOUT" "$prog" -pn 2 -pr 1 -pi tcp -ps 127.0.0.1 -pp $port > "$log.rank1" 2>&1 ) &
        timeout "$TIMEOUT" "$prog" -pn 2 -pr 0 -pi tcp -ps 127.0.0.1 -pp $port > "$log" 2>&1
        rc=$?
        wait $! || rc=1
        cat "$log.rank1" >> "$log"
    else
        timeout "$TIMEOUT" "$prog" > "$log" 2>&1
        rc=$?
    fi
    if [ "${LAB_VERBOSE:-0}" = 1 ]; then
        sed 's/^/    /' "$log"
    else
        if grep -qE '^kernel +shape +ms' "$log"; then  # a program using common.h: failures, then its table
            grep -E '^FAIL|^      [0-9]+ of [0-9]+ over tol' "$log" | head -n 40 | sed 's/^/    /'
            sed -n '/^kernel  *shape  *ms/,$p' "$log" | sed 's/^/    /'
        else
            tail -n 15 "$log" | sed 's/^/    /'
        fi
    fi
    if [ $rc -eq 0 ]; then
        echo "PASS  $name ($((SECONDS - t0)) s)"
        passed=$((passed + 1))
    else
        why="exit $rc"; [ $rc -eq 124 ] && why="timed out after $TIMEOUT s"
        echo "FAIL  $name ($why, $((SECONDS - t0)) s; log: $log)"
        failed=$((failed + 1)); failed_names+=("$name")
    fi
done

[ $failed -gt 0 ] && echo "failed: ${failed_names[*]}"
[ $skipped -gt 0 ] && echo "skipped: $skipped"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
