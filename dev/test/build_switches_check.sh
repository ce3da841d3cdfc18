#!/usr/bin/env bash
# Build switches that CI can check without a GPU:
#   - EXTRA_NVCC_FLAGS (A/B builds with a tuning override): its own build dir, named by the flags, printed
#     by `make info`; the plain build keeps its dir;
#   - the cuDNN builds' attention backward (llmc/gpt2.cuh): attention.cuh's on sm_90a (LLMC_SM90A),
#     cuDNN's on other targets, and -DGPT2_CUDNN_BACKWARD=1 forces cuDNN's (preprocessed, not compiled).
set -euo pipefail
cd "$(dirname "$0")/../.."
fail=0
bad() { echo "FAIL: $*"; fail=1; }
dir_of() { make --no-print-directory -s info NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=90 "$@" | sed -nE 's/^ *build dir: //p'; }
plain=$(dir_of)
a=$(dir_of EXTRA_NVCC_FLAGS=-DGPT2_CUDNN_BACKWARD=1)
b=$(dir_of EXTRA_NVCC_FLAGS=-DLAYERNORM_BWD_COLUMNS=0)
echo "build dirs: $plain | $a | $b"
[ "$plain" = build/BF16-cudnn0-nccl0-mpi0-sm90 ] || bad "plain build dir $plain"
[[ $a == "$plain"-x* && $b == "$plain"-x* && $a != "$b" ]] || bad "EXTRA_NVCC_FLAGS builds need dirs of their own: '$a' '$b'"
info=$(make --no-print-directory -s info NO_MULTI_GPU=1 NO_USE_MPI=1 EXTRA_NVCC_FLAGS=-DFOO=1)
[[ $info == *"extra nvcc flags: -DFOO=1"* ]] || bad "make info does not print EXTRA_NVCC_FLAGS"

# the value of GPT2_CUDNN_BACKWARD for a set of defines (nvcc -E of llmc/gpt2.cuh)
backward() {
    printf '#include "llmc/gpt2.cuh"\nint gpt2_cudnn_backward_value = GPT2_CUDNN_BACKWARD;\n' > "$tmp/probe.cu"
    nvcc -E -std=c++17 -x cu -I. -DENABLE_BF16 "$@" "$tmp/probe.cu" 2>/dev/null | sed -nE 's/^int gpt2_cudnn_backward_value = (.*);$/\1/p'
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
v90=$(backward -DENABLE_CUDNN -DLLMC_SM90A); v80=$(backward -DENABLE_CUDNN); vf=$(backward -DENABLE_CUDNN -DLLMC_SM90A -DGPT2_CUDNN_BACKWARD=1)
echo "GPT2_CUDNN_BACKWARD: sm_90a $v90, other targets $v80, forced $vf"
[ "$v90" = 0 ] || bad "cuDNN build on sm_90a should take attention.cuh's backward (got '$v90')"
[ "$v80" = 1 ] || bad "cuDNN build on other targets should take cuDNN's backward (got '$v80')"
[ "$vf" = 1 ] || bad "-DGPT2_CUDNN_BACKWARD=1 should force cuDNN's backward (got '$vf')"
[ $fail = 0 ] && echo "build switches check: ok"
exit $fail
