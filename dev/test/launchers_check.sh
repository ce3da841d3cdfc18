#!/usr/bin/env bash
# The launchers' command construction, with no GPU, MPI or Slurm: scripts/run_gpt2.sh (through the recipes),
# scripts/multi_node/run_gpt2_124M_mpi.sh and the two .sbatch scripts run in their dry run (DRY_RUN=1)
# under the fake nvidia-smi / mpirun / srun of dev/test/fake_launchers.sh (and a make that refuses to
# run: a dry run builds nothing). Each started process prints the rank and process count train_gpt2cu
# would take (scripts/dry_run_task.sh); every launch must give ranks 0..N-1 of N, one each, in order.
# Also: the GPU count honours CUDA_VISIBLE_DEVICES (visible_gpu_count), mpirun gets --allow-run-as-root
# exactly when run as root, the .sbatch scripts ask for the SIGTERM their ranks need, and a SIGTERM to a
# srun launch goes to srun (run_forwarding_term --to-launcher).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
source dev/test/fake_launchers.sh
source scripts/mpi_launch.sh
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fake_launchers "$T/bin"
printf '#!/usr/bin/env bash\necho "fake make: a dry run must not build ($*)" >&2; exit 1\n' > "$T/bin/make"; chmod +x "$T/bin/make"
export PATH="$T/bin:$PATH"
unset CUDA_VISIBLE_DEVICES DATASET DATA_DIR LAUNCHER HOSTS NP NUM_GPUS OUT_DIR SIZE MASTER_IP SYNC_DIR
unset SLURM_NTASKS SLURM_NTASKS_PER_NODE SLURM_PROCID SLURM_SUBMIT_DIR OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE
fail=0
bad() { echo "FAIL: $*"; fail=1; }
pass() { echo "PASS: $*"; }

# ranks_ok NAME N OUTPUT [GREP...]: exactly N dry-run lines, line k = rank k of N; each line has every GREP
ranks_ok() {
    local name=$1 n=$2 out=$3; shift 3
    local lines got k=0 line
    lines=$(grep '^dry run: rank ' <<<"$out")
    got=$(grep -c . <<<"$lines")
    [ "$got" = "$n" ] || { bad "$name: $got processes, want $n"; echo "$out" | head -5; return; }
    while IFS= read -r line; do
        [[ "$line" == "dry run: rank $k of $n "* ]] || { bad "$name: process $k got: ${line:0:60}"; return; }
        for g in "$@"; do grep -qF -- "$g" <<<"$line" || { bad "$name: rank $k lacks '$g': $line"; return; }; done
        k=$((k + 1))
    done <<<"$lines"
    pass "$name: $n processes, ranks 0..$((n - 1)) of $n"
}

# 1. GPUs visible to this shell: nvidia-smi -L narrowed by CUDA_VISIBLE_DEVICES (as CUDA)
check_count() {  # WANT [CUDA_VISIBLE_DEVICES value | -unset]
    local want=$1 got
    if [ "$2" = -unset ]; then got=$(unset CUDA_VISIBLE_DEVICES; visible_gpu_count)
    else got=$(CUDA_VISIBLE_DEVICES=$2 visible_gpu_count); fi
    [ "$got" = "$want" ] || bad "visible_gpu_count with CUDA_VISIBLE_DEVICES '$2' (8 GPUs): $got, want $want"
}
check_count 8 -unset
check_count 2 "2,3"
check_count 1 "7"
check_count 0 ""
check_count 0 "-1"
check_count 1 "0,8,1"          # CUDA stops at the first entry that names no device
check_count 2 "GPU-00000000-0000-0000-0000-000000000003,5"
check_count 0 "NoDevFiles"
[ $fail = 0 ] && pass "visible_gpu_count follows CUDA_VISIBLE_DEVICES"
for f in scripts/*.sh; do
    [ "$f" = scripts/mpi_launch.sh ] && continue
    grep -n 'nvidia-smi -L[^"]*| *wc' "$f" && bad "$f counts GPUs with nvidia-smi -L alone (use visible_gpu_count)"
done

# 2. the recipes on this node (LAUNCHER=mpi): as many processes as visible GPUs
rm -f "$T/bin/mpirun.args"
out=$(CUDA_VISIBLE_DEVICES=2,3 DRY_RUN=1 bash scripts/run_gpt2_124M.sh 2>"$T/err")
ranks_ok "run_gpt2_124M.sh, CUDA_VISIBLE_DEVICES=2,3 of 8 GPUs" 2 "$out" "(from mpirun)" "-e d12"
if [ "$(id -u)" -eq 0 ]; then grep -q -- '--allow-run-as-root' "$T/bin/mpirun.args" || bad "as root, mpirun without --allow-run-as-root"
else grep -q -- '--allow-run-as-root' "$T/bin/mpirun.args" && bad "not root, but mpirun got --allow-run-as-root"; fi
rm -f "$T/bin/mpirun.args"
out=$(FAKE_GPUS=1 DRY_RUN=1 bash scripts/run_gpt2_350M.sh 2>"$T/err")
ranks_ok "run_gpt2_350M.sh, one GPU" 1 "$out" "(from mpirun)" "-e d24"
[ -f "$T/bin/mpirun.args" ] && bad "one process started through mpirun: $(cat "$T/bin/mpirun.args")"
err=$(CUDA_VISIBLE_DEVICES='' DRY_RUN=1 bash scripts/run_gpt2_124M.sh 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "no NVIDIA GPU visible" <<<"$err" && pass "CUDA_VISIBLE_DEVICES= : no GPU, refused" ||
    bad "CUDA_VISIBLE_DEVICES= (no GPU): rc $rc, $err"

# 3. multi-node mpirun: 16 processes over two hosts; -b halves so that -d 524288 stays divisible
rm -f "$T/bin/mpirun.args"
out=$(HOSTS=node1:8,node2:8 NP=16 DRY_RUN=1 bash scripts/multi_node/run_gpt2_124M_mpi.sh 2>"$T/err")
ranks_ok "multi_node/run_gpt2_124M_mpi.sh HOSTS=node1:8,node2:8 NP=16" 16 "$out" "(from mpirun)" "-b 32 " "-d 524288 "
grep -q -- '-np 16 .*--host node1:8,node2:8' "$T/bin/mpirun.args" || bad "mpirun not given -np 16 --host node1:8,node2:8: $(cat "$T/bin/mpirun.args")"
grep -q "note: -b 64 x -t 1024 x 16 processes is more than -d 524288 tokens per step: -b 32" "$T/err" || bad "no note on -b 32"

# 4. Slurm: the batch script (run here as sbatch would run it) launches srun; each task's -pr is its own
# SLURM_PROCID, expanded by the task (an expansion in the batch shell would make every task rank 0)
slurm_env=(SLURM_SUBMIT_DIR="$REPO" SLURM_JOB_ID=77 SLURM_NTASKS=16 SLURM_NTASKS_PER_NODE=8 SLURM_NNODES=2)
out=$(env "${slurm_env[@]}" MASTER_IP=10.0.0.1 DRY_RUN=1 bash scripts/multi_node/run_gpt2_124M_slurm_tcp.sbatch 2>"$T/err")
ranks_ok "multi_node/run_gpt2_124M_slurm_tcp.sbatch, 2 nodes x 8 tasks" 16 "$out" "(from -pr/-pn)" "-pn 16 " "-pg 8 " "-pi tcp -ps 10.0.0.1" "-b 32 "
out=$(env "${slurm_env[@]}" SYNC_DIR="$T/sync" DRY_RUN=1 bash scripts/multi_node/run_gpt2_124M_slurm_fs.sbatch 2>"$T/err")
ranks_ok "multi_node/run_gpt2_124M_slurm_fs.sbatch, 2 nodes x 8 tasks" 16 "$out" "(from -pr/-pn)" "-pn 16 " "-pg 8 " "-pi fs -pf $T/sync"
err=$(LAUNCHER=srun-fs DRY_RUN=1 bash scripts/run_gpt2_124M.sh 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "LAUNCHER=srun-fs runs inside a Slurm allocation" <<<"$err" || bad "srun outside an allocation: rc $rc, $err"
for f in scripts/multi_node/*.sbatch; do
    # the ranks must get the SIGTERM (they checkpoint and exit 0, which ends the batch shell's loop):
    # no B:, which would signal the batch shell only
    grep -qE '^#SBATCH --signal=TERM@[0-9]+$' "$f" || bad "$f: no '#SBATCH --signal=TERM@<seconds>' for its ranks"
done

# 5. a SIGTERM to a script running srun reaches srun (which passes it to every task); under mpirun it
# reaches the ranks, not mpirun (scaling_data_check.sh checks that one)
cat > "$T/launcher" <<EOF
#!/usr/bin/env bash
trap 'echo got TERM > "$T/launcher.term"; exit 0' TERM
touch "$T/launcher.started"
sleep 10 & wait \$!
EOF
chmod +x "$T/launcher"
( run_forwarding_term --to-launcher "$T/launcher"; echo "rc $? forwarded $FORWARDED_SIGNAL" > "$T/rft.out" ) & shell=$!
for _ in $(seq 50); do [ -f "$T/launcher.started" ] && break; sleep 0.1; done
sleep 0.2
kill -TERM $shell
wait $shell
[ -f "$T/launcher.term" ] && grep -q "rc 0 forwarded 1" "$T/rft.out" && pass "run_forwarding_term --to-launcher: SIGTERM reached the launcher" ||
    bad "run_forwarding_term --to-launcher: $(cat "$T/rft.out" 2>/dev/null), launcher saw TERM: $([ -f "$T/launcher.term" ] && echo yes || echo no)"

[ $fail = 0 ] && echo "all launcher checks passed"
exit $fail
