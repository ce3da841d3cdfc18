#!/usr/bin/env bash
# The host tests once more, built with AddressSanitizer + UndefinedBehaviorSanitizer (every UBSan finding
# fatal) into build/host-asan. Reference.* tests need train_gpt2.py's files and are left out, as in run_all.sh.
set -eu
cd "$(dirname "$0")/../.."
OUT=build/host-asan
mkdir -p "$OUT/llmc" "$OUT/tests"
FLAGS=(-std=c++17 -O1 -g -I. -pthread -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
objs=()
for src in llmc/*.cpp; do
    [ "$src" = llmc/cudnn_att.cpp ] && continue
    obj=$OUT/llmc/$(basename "$src" .cpp).o
    g++ "${FLAGS[@]}" -c "$src" -o "$obj"
    objs+=("$obj")
done
rm -f "$OUT/libllmc.a" && ar rcs "$OUT/libllmc.a" "${objs[@]}"  # as the Makefile: each test links what it calls
status=0
for src in dev/test/test_*.cpp; do
    name=$(basename "$src" .cpp)
    g++ "${FLAGS[@]}" "$src" "$OUT/libllmc.a" -lgtest -lgtest_main -lpcre2-8 -o "$OUT/tests/$name"
    if ASAN_OPTIONS=detect_leaks=1 GTEST_FILTER=-Reference.* "$OUT/tests/$name" >"$OUT/tests/$name.log" 2>&1; then
        echo "PASS  $name"
    else
        echo "FAIL  $name"; tail -n 30 "$OUT/tests/$name.log"; status=1
    fi
done
exit $status
