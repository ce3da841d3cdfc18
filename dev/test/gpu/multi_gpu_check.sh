#!/usr/bin/env bash
# One-GPU checks of the multi-GPU build. With LLMC_NCCL_SINGLE=1 the NCCL build
# runs the whole NCCL path with one process (id exchange, communicator, all-reduce / reduce-scatter /
# all-gather, each an identity with one rank). Passes when
#   - 20 steps of the NCCL build with -z 0 and with -z 1 print the same losses and norms as the
#     NO_MULTI_GPU=1 build and end in a bitwise identical checkpoint;
#   - start-up works through MPI (mpirun -np 1), TCP and a shared directory.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=${MGPU_DIR:-build/multi_gpu_check}
rm -rf "$D"; mkdir -p "$D"
J=$(nproc)
make -j"$J" train_gpt2cu NO_MULTI_GPU=1 > "$D/build_single.log" 2>&1 && cp train_gpt2cu "$D/bin_single" || { tail "$D/build_single.log"; exit 1; }
make -j"$J" train_gpt2cu > "$D/build_nccl.log" 2>&1 && cp train_gpt2cu "$D/bin_nccl" || { tail "$D/build_nccl.log"; exit 1; }
grep -E "✓|✗" "$D/build_nccl.log"
COMMON=(-e d12 -b 16 -t 1024 -x 20 -l 6e-4 -u 5 -v 0 -s 0 -n 20)
steps() { python3 dev/steplog.py lines "$1" --no-timing; }  # the timing columns differ between runs
status=0
check() {  # name log dir
    if [ "$(steps "$2" | wc -l)" -eq 20 ] && cmp -s <(steps "$D/single.log") <(steps "$2") &&
       cmp -s "$D/single/model_00000020.bin" "$3/model_00000020.bin"; then
        echo "PASS: $1: 20 steps and final checkpoint bitwise equal to NO_MULTI_GPU=1"
    else
        echo "FAIL: $1"; diff <(steps "$D/single.log") <(steps "$2") | head -6; tail -3 "$2"; status=1
    fi
}
"$D/bin_single" "${COMMON[@]}" -o "$D/single" > "$D/single.log" 2>&1 || { echo "single run failed"; tail "$D/single.log"; exit 1; }
steps "$D/single.log" | sed -n '1p;20p'
for z in 0 1; do
    LLMC_NCCL_SINGLE=1 "$D/bin_nccl" "${COMMON[@]}" -z $z -pi tcp -pn 1 -pr 0 -ps 127.0.0.1 -o "$D/tcp_z$z" > "$D/tcp_z$z.log" 2>&1
    check "NCCL build, -z $z, -pi tcp" "$D/tcp_z$z.log" "$D/tcp_z$z"
done
mkdir -p "$D/fs"
LLMC_NCCL_SINGLE=1 "$D/bin_nccl" "${COMMON[@]}" -z 1 -pi fs -pn 1 -pr 0 -pf "$D/fs" -o "$D/fs_z1" > "$D/fs_z1.log" 2>&1
check "NCCL build, -z 1, -pi fs" "$D/fs_z1.log" "$D/fs_z1"
if command -v mpirun > /dev/null; then
    source scripts/mpi_launch.sh
    mpirun_cmd   # --allow-run-as-root only as root
    "${MPIRUN[@]}" -np 1 -x LLMC_NCCL_SINGLE=1 -x NCCL_NVLS_ENABLE=0 \
        "$D/bin_nccl" "${COMMON[@]}" -z 0 -pi mpi -o "$D/mpi_z0" > "$D/mpi_z0.log" 2>&1
    check "NCCL build, -z 0, mpirun -np 1" "$D/mpi_z0.log" "$D/mpi_z0"
else
    echo "SKIP: no mpirun"
fi
exit $status
