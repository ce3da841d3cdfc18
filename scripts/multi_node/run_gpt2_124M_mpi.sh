#!/usr/bin/env bash
# GPT-2 124M on FineWeb-10B, one process per GPU, started by OpenMPI's mpirun (-pi mpi).
#   one node, 8 GPUs:   scripts/multi_node/run_gpt2_124M_mpi.sh
#   two nodes:          HOSTS=node1:8,node2:8 NP=16 scripts/multi_node/run_gpt2_124M_mpi.sh
# Needs a build with MPI (make prints "✓ OpenMPI start-up") and, across nodes, passwordless ssh and the
# repo at the same path on every node. Rank and GPU come from MPI: -pn/-pr/-pg are not needed here.
set -euo pipefail
cd "$(dirname "$0")/../.."

NP=${NP:-8}                                   # total processes = total GPUs
HOSTS=${HOSTS:-}                              # e.g. node1:8,node2:8 (empty: this machine only)
DATA=${DATA:-dev/data/fineweb10B}             # token shards; fineweb_val_* is shard 0
OUT=${OUT:-log_gpt2_124M}
# -b: 64 per GPU, less when 524288 tokens per step would otherwise be exceeded (524288 = B*1024*NP*accum)
MICRO_BATCH=${MICRO_BATCH:-$(( 512 / NP < 64 ? 512 / NP : 64 ))}

export NCCL_NVLS_ENABLE=0                     # never NVLink SHARP / multicast (the trainer forces it too)
# export NCCL_DEBUG=INFO                      # print transports and topology at start-up
# export NCCL_SOCKET_IFNAME=eth0              # interface for NCCL's sockets (and bootstrap)
# export NCCL_IB_DISABLE=0                    # use InfiniBand between nodes when present
# export NCCL_NET_GDR_LEVEL=2                 # GPUDirect RDMA when NIC and GPU share a PCIe switch
# export NCCL_P2P_LEVEL=PXB                   # GPU peer-to-peer up to a PCIe switch hop
# (OpenMPI forwards only variables named with -x: add -x for each one you enable.)

make train_gpt2cu NO_USE_MPI=0

mpirun -np "$NP" ${HOSTS:+--host "$HOSTS"} --bind-to none \
    -x NCCL_NVLS_ENABLE -x PATH -x LD_LIBRARY_PATH \
    ./train_gpt2cu \
    -i "$DATA/fineweb_train_*.bin" -j "$DATA/fineweb_val_*.bin" -o "$OUT" -e d12 \
    -b "$MICRO_BATCH" -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.0006 -q 0.0 -u 700 \
    -n 5000 -v 250 -s 20000 -h 1 -x 18865 \
    -pi mpi
