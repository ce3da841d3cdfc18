#!/usr/bin/env bash
# llmc/attention.cuh has two tensor-core paths picked at compile time: wgmma for the sm_90a target
# (GPU_COMPUTE_CAPABILITY=90, mk/arch.mk adds -DLLMC_SM90A) and mma.sync for every other target. CI
# has no GPU, so this checks what can be checked without one, from the PTX and ptxas of each target:
#   - mk/arch.mk maps 90 to sm_90a + LLMC_SM90A and 80 / 89 / 100 to their plain targets;
#   - sm_90a: the forward and both backward kernels that the launcher runs issue wgmma and no mma.sync;
#   - other targets: those kernels issue mma.sync, and the wgmma kernels are only a trap (never launched);
#   - neither target spills registers in a tensor-core kernel (a spill there costs the step ~10%).
# Numerical correctness of both paths is dev/cuda/attention.cu's job, on the GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

arch_flags() {  # the ARCH_FLAGS that mk/arch.mk gives for a compute capability
    printf 'SHELL := /bin/bash\ninclude mk/arch.mk\nall:\n\t@echo $(ARCH_FLAGS)\n' > "$tmp/arch.mk"
    make --no-print-directory -s -f "$tmp/arch.mk" GPU_COMPUTE_CAPABILITY="$1"
}
f90=$(arch_flags 90)
[[ $f90 == *"arch=compute_90a,code=sm_90a"* && $f90 == *"-DLLMC_SM90A"* ]] || bad "90 -> '$f90' (want sm_90a + LLMC_SM90A)"
for cc in 80 89 100; do
    f=$(arch_flags $cc)
    [[ $f == "-gencode arch=compute_$cc,code=sm_$cc" ]] || bad "$cc -> '$f' (want the plain sm_$cc target)"
done

printf '#include "llmc/attention.cuh"\n' > "$tmp/att.cu"
# count INSTR in the PTX of kernel NAME (an .entry block runs to the next .entry)
count() {
    awk -v want="$2" -v instr="$3" '
        /^\.(visible )?\.?entry/ { name = $3; sub(/\(.*/, "", name) }
        index($0, instr) && index(name, want) { n++ }
        END { print n + 0 }' "$1"
}
run_kernels="attention_forward_tc_kernel attention_backward_dkv_wgmma_kernel attention_backward_dq_wgmma_kernel"
for target in 90a 80; do
    defs="-DENABLE_BF16"
    [ $target = 90a ] && defs="$defs -DLLMC_SM90A"
    ptx="$tmp/att_$target.ptx"
    nvcc -std=c++17 -ptx -arch=compute_$target $defs -I. "$tmp/att.cu" -o "$ptx"
    for k in attention_forward_tc_kernel attention_backward_dkv_tc_kernel attention_backward_dq_tc_kernel \
             attention_backward_dkv_wgmma_kernel attention_backward_dq_wgmma_kernel; do
        w=$(count "$ptx" "$k" wgmma.mma_async); m=$(count "$ptx" "$k" mma.sync.aligned); t=$(count "$ptx" "$k" trap)
        echo "compute_$target $k: wgmma $w, mma.sync $m, trap $t"
        if [ $target = 90a ]; then
            case " $run_kernels " in
                *" $k "*) { [ "$w" -gt 0 ] && [ "$m" -eq 0 ]; } || bad "$k on sm_90a should be wgmma only" ;;
            esac
        else
            case $k in
                *_wgmma_*) { [ "$w" -eq 0 ] && [ "$t" -gt 0 ]; } || bad "$k on compute_80 should be a trap" ;;
                *) { [ "$m" -gt 0 ] && [ "$w" -eq 0 ]; } || bad "$k on compute_80 should be mma.sync only" ;;
            esac
        fi
    done
    code=sm_${target}
    nvcc -std=c++17 -cubin -arch=$code $defs -I. -Xptxas -v,-warn-spills "$tmp/att.cu" -o "$tmp/att_$target.cubin" \
        > "$tmp/ptxas_$target.log" 2>&1
    # ptxas -v: "Compiling entry function 'NAME'" then "Used N registers, ..." for each kernel
    awk '/Compiling entry function/ { n = $0; sub(/.*function \047/, "", n); sub(/\047.*/, "", n) }
         /Used [0-9]+ registers/ && (n ~ /_tc_|_wgmma_/) { sub(/.*ptxas info *: */, ""); print "  " n ", " code ": " $0 }' code=$code \
        "$tmp/ptxas_$target.log"
    if grep -E "spill|Registers are spilled" "$tmp/ptxas_$target.log" | grep -E "_tc_|_wgmma_" | grep -v " 0 bytes spill"; then
        bad "a tensor-core attention kernel spills on $code"
    fi
done
[ $fail = 0 ] && echo "attention arch check: ok"
exit $fail
