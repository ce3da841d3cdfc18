#!/usr/bin/env bash
# libFuzzer harnesses (dev/fuzz/fuzz_*.cpp), one per file reader plus BPE encode/decode: built with clang
# (-fsanitize=fuzzer,address,undefined, every UBSan finding fatal) and run FUZZ_SECONDS each (default 20)
# from the seed corpus that dev/fuzz/make_seeds.py writes. Leak detection is on: a reader that refuses
# an input must free what it took (files, memory), or the harness stops with a leak report (and a slow
# leak would reach the 4 GB RSS limit in a long run). Any crash, leak, sanitizer report or timeout fails.
#   bash dev/test/fuzz_check.sh                                   CI: every harness, 20 s each
#   FUZZ_SECONDS=600 bash dev/test/fuzz_check.sh                  long run: 10 minutes each
#   FUZZ_ONLY="bpe eval_file" FUZZ_OUT=build/fuzz2 bash ...       some harnesses, own work folder (two
#                                                                 such runs can go side by side)
# Each harness prints its executions and peak RSS (libFuzzer's final stats) when it passes.
set -eu
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
ONLY=${FUZZ_ONLY:-}
OUT=${FUZZ_OUT:-build/fuzz}
export GPT2_VOCAB_DIR=${GPT2_VOCAB_DIR:-$(pwd)/dev/data/gpt2}  # fuzz_bpe's vocabulary
rm -rf "$OUT/corpus" && mkdir -p "$OUT/seeds" "$OUT/corpus"
python3 dev/fuzz/make_seeds.py "$OUT/seeds"
FLAGS=(-std=c++17 -O1 -g -I. -DLLMC_FATAL_THROWS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
status=0
for src in dev/fuzz/fuzz_*.cpp; do
    name=$(basename "$src" .cpp)
    seeds=${name#fuzz_}
    if [ -n "$ONLY" ] && [[ " $ONLY " != *" $seeds "* ]]; then continue; fi
    extra=()
    [ "$seeds" = bpe ] && extra=(llmc/gpt2_bpe.cpp -lpcre2-8 -pthread)
    echo "== $name: build"
    clang++ "${FLAGS[@]}" "$src" "${extra[@]}" -o "$OUT/$name"
    mkdir -p "$OUT/corpus/$seeds"
    echo "== $name: ${SECONDS_EACH} s"
    if ASAN_OPTIONS=detect_leaks=1 "$OUT/$name" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 \
        -detect_leaks=1 -print_final_stats=1 -close_fd_mask=2 -artifact_prefix="$OUT/$name-" \
        "$OUT/corpus/$seeds" "$OUT/seeds/$seeds" >"$OUT/$name.log" 2>&1; then
        runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)$/\1/p' "$OUT/$name.log")
        rss=$(sed -nE 's/^stat::peak_rss_mb: *([0-9]+)$/\1/p' "$OUT/$name.log")
        echo "$name: ${runs:-?} executions in ${SECONDS_EACH} s, peak RSS ${rss:-?} MB, no crash, leak or sanitizer report"
    else
        echo "FAILED: $name (log $OUT/$name.log, artifacts $OUT/$name-*)"; tail -n 30 "$OUT/$name.log"; status=1
    fi
done
exit $status
