#!/usr/bin/env bash
# GPT-2 124M (llm.c's recipe, scripts/run_gpt2.sh), one process per GPU started by OpenMPI's mpirun (-pi mpi).
#   one node, 8 GPUs:   scripts/multi_node/run_gpt2_124M_mpi.sh
#   two nodes:          HOSTS=node1:8,node2:8 NP=16 scripts/multi_node/run_gpt2_124M_mpi.sh
# NP: total processes (default: the GPUs this node shows); SIZE: another recipe (350M, 774M, 1558M); DATASET,
# OUT_DIR, DRY_RUN and the rest as in scripts/run_gpt2.sh. Extra arguments go to train_gpt2cu.
# Builds with MPI (make prints "✓ OpenMPI start-up"); across nodes, mpirun needs passwordless ssh and the
# repo at the same path on every node. Rank and GPU come from MPI: -pn/-pr/-pg are not needed here.
# mpirun gets --allow-run-as-root only when this runs as root (scripts/mpi_launch.sh).
set -euo pipefail

# export NCCL_DEBUG=INFO                      # print transports and topology at start-up
# export NCCL_SOCKET_IFNAME=eth0              # interface for NCCL's sockets (and bootstrap)
# export NCCL_IB_DISABLE=0                    # use InfiniBand between nodes when present
# export NCCL_NET_GDR_LEVEL=2                 # GPUDirect RDMA when NIC and GPU share a PCIe switch
# export NCCL_P2P_LEVEL=PXB                   # GPU peer-to-peer up to a PCIe switch hop
# (OpenMPI forwards only variables named with -x: add -x for each one you enable, in scripts/run_gpt2.sh.)

[ -n "${NP:-}" ] && export NUM_GPUS=$NP
LAUNCHER=mpi exec "$(dirname "$0")/../run_gpt2.sh" "${SIZE:-124M}" "$@"
