#!/usr/bin/env bash
# The trainer compiles no test-only code: its preprocessed source holds neither the GPU test's
# debug-state reader and llm.c's tolerances (dev/test/debug_state.h) nor the LLMC_TEST_* hooks, which
# only a test build (make train_gpt2cu EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS, as dev/test/gpu/ makes it)
# compiles in. Checked in both precisions, with and without NCCL (when nccl.h is found); each absent
# name is also looked for where it must be (the test build, test_gpt2.cu), so the check cannot pass
# on a preprocessor that printed nothing. Needs nvcc, no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
test_names='LLMC_TEST_|debug_state_read|llmc_test_tolerances|DebugState'
pp() { nvcc -E -std=c++17 -I. "$@" 2>&1; }
status=0
variants=("-DENABLE_BF16" "-DENABLE_FP32")
if echo '#include <nccl.h>' | g++ -E -x c++ - > /dev/null 2>&1; then
    variants+=("-DENABLE_BF16 -DMULTI_GPU" "-DENABLE_FP32 -DMULTI_GPU")
fi
for v in "${variants[@]}"; do
    # shellcheck disable=SC2086  # $v is a list of flags
    out=$(pp $v train_gpt2.cu)
    lines=$(wc -l <<< "$out")
    hits=$(grep -oE "$test_names" <<< "$out" | sort | uniq -c | tr '\n' ' ')
    if [ "$lines" -lt 10000 ]; then
        echo "FAIL: train_gpt2.cu $v: the preprocessor gave $lines lines"; echo "$out" | tail -5; status=1
    elif [ -n "$hits" ]; then
        echo "FAIL: train_gpt2.cu $v compiles test-only code: $hits"; status=1
    else
        echo "PASS: train_gpt2.cu $v: no test-only code"
    fi
    # shellcheck disable=SC2086
    hooks=$(pp $v -DLLMC_TEST_HOOKS train_gpt2.cu | grep -cE 'LLMC_TEST_HANG_AT_STEP|LLMC_TEST_PARAM_CHECKSUM')
    if [ "$hooks" -ge 2 ]; then echo "PASS: train_gpt2.cu $v -DLLMC_TEST_HOOKS: the test hooks are in"
    else echo "FAIL: train_gpt2.cu $v -DLLMC_TEST_HOOKS: the test hooks are missing"; status=1; fi
done
if [ "$(pp -DENABLE_BF16 test_gpt2.cu | grep -cE 'debug_state_read|llmc_test_tolerances')" -ge 2 ]; then
    echo "PASS: test_gpt2.cu compiles the debug-state reader"
else
    echo "FAIL: test_gpt2.cu: no debug-state reader in its preprocessed source"; status=1
fi
exit $status
