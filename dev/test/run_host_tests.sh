#!/usr/bin/env bash
# Runs GoogleTest binaries given as arguments and prints "N passed, N failed" over all their tests.
# Usage: run_host_tests.sh build/host/tests/test_a build/host/tests/test_b ...
# The Reference.* tests are left out unless GTEST_FILTER says otherwise: they read the files that
# train_gpt2.py writes, and dev/test/reference_check.sh runs them with those.
set -u
export GTEST_FILTER=${GTEST_FILTER:--Reference.*}
passed=0; failed=0
for t in "$@"; do
    echo "=== $t"
    out=$("$t" 2>&1); rc=$?
    echo "$out" | grep -E '^\[  (FAILED|PASSED|SKIPPED)|^\[==========\]|error|Failure' | head -50
    p=$(echo "$out" | sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?.*/\1/p' | tail -1)
    f=$(echo "$out" | sed -nE 's/^\[  FAILED  \] ([0-9]+) tests?, listed below.*/\1/p' | tail -1)
    p=${p:-0}; f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "$out" | tail -20; fi   # crashed before summary
    passed=$((passed + p)); failed=$((failed + f))
done
echo "host tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
