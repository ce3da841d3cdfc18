# Fake nvidia-smi, mpirun and srun for the launcher checks (source it; bash). fake_launchers DIR writes them
# into DIR (put it first on PATH). None needs a GPU, MPI or Slurm:
#   nvidia-smi -L   lists $FAKE_GPUS GPUs (default 8), as the real one prints them
#   mpirun          takes -np N, --host H, -x VAR, --bind-to X, --allow-run-as-root, then runs the command N
#                   times, one after the other, with OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK set as Open
#                   MPI sets them; as root without --allow-run-as-root it refuses, as Open MPI does. Its own
#                   command line is appended to DIR/mpirun.args.
#   srun            runs the command $SLURM_NTASKS times with SLURM_PROCID / SLURM_LOCALID / SLURM_NODEID
#                   set as srun sets them for tasks placed node by node ($SLURM_NTASKS_PER_NODE per node)
fake_launchers() {
    local d=$1
    mkdir -p "$d"
    cat > "$d/nvidia-smi" <<'EOS'
#!/usr/bin/env bash
[ "${1:-}" = -L ] || { echo "fake nvidia-smi: only -L" >&2; exit 1; }
for ((i = 0; i < ${FAKE_GPUS:-8}; i++)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000$i)"; done
EOS
    cat > "$d/mpirun" <<'EOS'
#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/mpirun.args"
np=1; root_ok=0
while [ $# -gt 0 ]; do
    case "$1" in
        -np) np=$2; shift 2;;
        --host|-x|--bind-to) shift 2;;
        --allow-run-as-root) root_ok=1; shift;;
        -*) echo "fake mpirun: unknown option $1" >&2; exit 1;;
        *) break;;
    esac
done
if [ "$(id -u)" -eq 0 ] && [ $root_ok = 0 ]; then
    echo "mpirun has detected an attempt to run as root. Running as root is *strongly* discouraged" >&2; exit 1
fi
for ((r = 0; r < np; r++)); do
    OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$np OMPI_COMM_WORLD_LOCAL_RANK=$r "$@" || exit $?
done
EOS
    cat > "$d/srun" <<'EOS'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do case "$1" in --*) shift;; *) break;; esac; done
[ -n "${SLURM_NTASKS:-}" ] || { echo "fake srun: not in an allocation" >&2; exit 1; }
per=${SLURM_NTASKS_PER_NODE:-$SLURM_NTASKS}
for ((r = 0; r < SLURM_NTASKS; r++)); do
    SLURM_PROCID=$r SLURM_LOCALID=$((r % per)) SLURM_NODEID=$((r / per)) "$@" || exit $?
done
EOS
    chmod +x "$d/nvidia-smi" "$d/mpirun" "$d/srun"
}
