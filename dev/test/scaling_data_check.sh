#!/usr/bin/env bash
# Host test of scripts/scaling_data.sh (the data of scripts/multi_gpu_scaling.sh) and of the launch
# helpers in scripts/mpi_launch.sh, with a fake mpirun whose ranks are shell scripts named train_gpt2cu.
set -uo pipefail
cd "$(dirname "$0")/../.."
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "PASS: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
S=scripts/scaling_data.sh

# 1. real shards for a small configuration: TOKENS from "tokens" is enough for every P, not for more steps
need=$(bash $S tokens 4 64 4096 20 100000 1 2 4)
[ "$need" -ge $((20 * 4096)) ] && ok "tokens: $need >= 20 steps x 4096" || bad "tokens gave $need"
bash $S make "$T/d" "$need" 100000 > "$T/make.log" 2>&1 || { bad "make"; cat "$T/make.log"; }
n=$(ls "$T/d"/scaling_train_*.bin 2>/dev/null | wc -l)
[ "$n" -ge 2 ] && ok "make: $n shards" || bad "make: $n shards"
bash $S check "$T/d" 4 64 4096 20 1 2 4 && ok "check: 20 steps fit for P = 1, 2, 4" || bad "check 20 steps"
bash $S check "$T/d" 4 64 4096 2000 1 2 4 2> "$T/check.err" && bad "check passed for 2000 steps" ||
    { grep -q "too little data for 4 processes" "$T/check.err" && ok "check: 2000 steps refused, naming P" || bad "check message"; }
bash $S make "$T/d" "$need" 100000 | grep -q "already holds" && ok "make: reuses existing data" || bad "make: no reuse"

# 2. the scaling script's own configuration, with shard headers only (the check reads the token count)
cfg=(64 1024 524288 20)
grep -q "scaling_data.sh tokens ${cfg[*]} \$SHARD" scripts/multi_gpu_scaling.sh && ok "multi_gpu_scaling.sh uses ${cfg[*]}" ||
    bad "multi_gpu_scaling.sh does not ask scaling_data.sh for ${cfg[*]}"
fake() {  # DIR TOKENS SHARD: headers of the shards prepare_dataset would write
    mkdir -p "$1"; local left=$2 i=1
    while [ "$left" -gt 0 ]; do
        local n=$(( left < $3 ? left : $3 ))
        python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<256i', 20240520, 1, $n, *[0]*253))" \
            > "$1/scaling_train_$(printf %06d $i).bin"
        left=$((left - n)); i=$((i + 1))
    done
}
need=$(bash $S tokens "${cfg[@]}" 5000000 1 2 4 8)
fake "$T/f" "$need" 5000000
bash $S check "$T/f" "${cfg[@]}" 1 2 4 8 && ok "real configuration: $need tokens fit P = 1, 2, 4, 8" || bad "real configuration"
fake "$T/ts" 305257 5000000   # Tiny Shakespeare's train split, as the scaling script used before
bash $S check "$T/ts" "${cfg[@]}" 1 2> /dev/null && bad "Tiny Shakespeare alone passed" || ok "Tiny Shakespeare alone is refused"

# 3. launch helpers: a fake mpirun (ranks in their own process groups, SIGKILL 1 s after SIGTERM, as Open MPI)
source scripts/mpi_launch.sh
mkdir -p "$T/bin"
cat > "$T/bin/train_gpt2cu" <<'RANK'
#!/usr/bin/env bash
trap 'sleep 2; touch "$OUT/ckpt.$RANK"; exit 0' TERM   # a checkpoint that takes longer than mpirun waits
touch "$OUT/started.$RANK"
while true; do sleep 0.1; done
RANK
cat > "$T/bin/fakempirun" <<'MPI'
#!/usr/bin/env bash
pids=()
for r in 0 1; do RANK=$r setsid "$(dirname "$0")/train_gpt2cu" & pids+=($!); done
trap 'kill -TERM ${pids[@]}; sleep 1; kill -9 ${pids[@]}; exit 143' TERM
wait
MPI
chmod +x "$T/bin/train_gpt2cu" "$T/bin/fakempirun"
export OUT=$T
wait_started() { for _ in $(seq 100); do [ -f "$T/started.0" ] && [ -f "$T/started.1" ] && return 0; sleep 0.05; done; return 1; }

( run_forwarding_term "$T/bin/fakempirun" ) & launcher=$!
wait_started || bad "fake ranks did not start"
kill -TERM $launcher; wait $launcher; rc=$?
[ -f "$T/ckpt.0" ] && [ -f "$T/ckpt.1" ] && [ $rc -eq 0 ] && ok "SIGTERM forwarded to the ranks, not mpirun: both checkpointed, exit 0" ||
    bad "SIGTERM forwarding (rc $rc, $(ls "$T" | tr '\n' ' '))"

# the same, from a shell that inherited SIGTERM as ignored (as on the GPU machine): the launcher must
# re-run itself with SIGTERM at its default, or the trap is silently not set and nothing is forwarded
rm -f "$T"/started.* "$T"/ckpt.*
cat > "$T/launcher.sh" <<'L'
source scripts/mpi_launch.sh
term_trappable_or_reexec "$0" "$@"
run_forwarding_term "$T/bin/fakempirun"
L
export T
( trap '' TERM; exec bash "$T/launcher.sh" ) 2> "$T/launcher.err" & launcher=$!
wait_started || bad "fake ranks did not start (TERM ignored on entry)"
kill -TERM $launcher
for _ in $(seq 100); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
kill -0 $launcher 2>/dev/null && { kill_tree $launcher; echo "the launcher ignored SIGTERM for 10 s" >> "$T/launcher.err"; }
wait $launcher; rc=$?
[ -f "$T/ckpt.0" ] && [ -f "$T/ckpt.1" ] && [ $rc -eq 0 ] && grep -q "inherited SIGTERM as ignored" "$T/launcher.err" &&
    ok "SIGTERM ignored on entry: the launcher re-ran itself and forwarded it" ||
    bad "SIGTERM ignored on entry (rc $rc, $(ls "$T" | tr '\n' ' '), $(cat "$T/launcher.err"))"

rm -f "$T"/started.* "$T"/ckpt.*
setsid "$T/bin/fakempirun" & mpi=$!   # its own process group, as the old crash test started mpirun
wait_started || bad "fake ranks did not start"
rpids=$(trainer_pids $mpi)
[ "$(echo $rpids | wc -w)" -eq 2 ] && ok "trainer_pids finds the 2 ranks" || bad "trainer_pids found: $rpids"
# a renamed trainer binary (the stop check once ran a copy named bin_nccl): found only when named
[ -z "$(LLMC_TRAINER_NAME=bin_nccl trainer_pids $mpi)" ] && ok "trainer_pids: another name does not match train_gpt2cu" ||
    bad "LLMC_TRAINER_NAME=bin_nccl matched train_gpt2cu"
grep -qE 'run_forwarding_term.*"\$D/bin_[a-z$]+" ' dev/test/gpu/multi_gpu_stop_check.sh scripts/multi_gpu_scaling.sh &&
    bad "a GPU check starts a trainer copy not named train_gpt2cu under run_forwarding_term" ||
    ok "the GPU checks run their trainer copies under the name train_gpt2cu"
alive() {  # processes among the pids that still run (a zombie is dead: a container's init may not reap it)
    local n=0 p st
    for p in "$@"; do st=$(ps -o stat= -p "$p" 2>/dev/null); [ -n "$st" ] && [ "${st#Z}" = "$st" ] && n=$((n + 1)); done
    echo $n
}
kill -9 -- -$mpi 2>/dev/null   # the old crash test: mpirun's group only
wait $mpi 2>/dev/null; sleep 0.3
[ "$(alive $rpids)" -eq 2 ] && ok "(killing mpirun's process group leaves the ranks running)" || bad "expected 2 survivors"
kill -9 $rpids 2>/dev/null
rm -f "$T"/started.*
"$T/bin/fakempirun" & mpi=$!
wait_started
rpids=$(trainer_pids $mpi)
kill_tree $mpi; wait $mpi 2>/dev/null
sleep 0.3
[ -n "$rpids" ] && [ "$(alive $rpids $mpi)" -eq 0 ] && ok "kill_tree kills mpirun and every rank" || { bad "kill_tree left ranks"; kill -9 $rpids; }

printf 'error: flag -b expects an integer, got abc\n' > "$T/e1"
printf 'rank 1: something\nerror: rank 0: timed out after 600.0 s waiting on 10.0.0.1:12345\n' > "$T/e2"
printf 'watchdog: step 7: the loss / stop vote (ncclAllReduce) did not finish within 1200 s\n' > "$T/e3"
printf '[CUDA error] out of memory\n' > "$T/e4"
error_recurs 1 "$T/e1" && ! error_recurs 1 "$T/e2" && ! error_recurs 1 "$T/e3" && ! error_recurs 1 "$T/e4" &&
    ! error_recurs 137 "$T/e1" && ok "error_recurs: a fatal() error recurs; timeouts, library errors, kills do not" ||
    bad "error_recurs"

mpirun_cmd
if [ "$(id -u)" -eq 0 ]; then [ "${MPIRUN[*]}" = "mpirun --allow-run-as-root" ]; else [ "${MPIRUN[*]}" = mpirun ]; fi &&
    ok "mpirun_cmd: ${MPIRUN[*]}" || bad "mpirun_cmd: ${MPIRUN[*]}"
echo "$fails failed"
[ $fails -eq 0 ]
