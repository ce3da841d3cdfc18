#!/usr/bin/env bash
# libFuzzer harnesses (dev/fuzz/fuzz_*.cpp), one per file reader plus BPE encode/decode: built with clang
# (-fsanitize=fuzzer,address,undefined, every UBSan finding fatal) and run FUZZ_SECONDS each (default 20)
# from the seed corpus that dev/fuzz/make_seeds.py writes. Any crash, sanitizer report or timeout fails.
set -eu
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
OUT=build/fuzz
rm -rf "$OUT/corpus" && mkdir -p "$OUT/seeds" "$OUT/corpus"
python3 dev/fuzz/make_seeds.py "$OUT/seeds"
FLAGS=(-std=c++17 -O1 -g -I. -DLLMC_FATAL_THROWS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
status=0
for src in dev/fuzz/fuzz_*.cpp; do
    name=$(basename "$src" .cpp)
    seeds=${name#fuzz_}
    extra=()
    [ "$seeds" = bpe ] && extra=(llmc/gpt2_bpe.cpp -lpcre2-8 -pthread)
    echo "== $name: build"
    clang++ "${FLAGS[@]}" "$src" "${extra[@]}" -o "$OUT/$name"
    mkdir -p "$OUT/corpus/$seeds"
    echo "== $name: ${SECONDS_EACH} s"
    if ASAN_OPTIONS=detect_leaks=0 "$OUT/$name" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 \
        -close_fd_mask=2 -artifact_prefix="$OUT/$name-" "$OUT/corpus/$seeds" "$OUT/seeds/$seeds" >"$OUT/$name.log" 2>&1; then
        tail -n 2 "$OUT/$name.log"
    else
        echo "FAILED: $name (log $OUT/$name.log, artifacts $OUT/$name-*)"; tail -n 30 "$OUT/$name.log"; status=1
    fi
done
exit $status
