# The shell functions the scripts share (source it; bash only): starting train_gpt2cu under mpirun or
# srun, the GPUs a program sees, their memory. (A log's step lines: dev/steplog.py.)
#   mpirun_cmd                  prints nothing; sets the array MPIRUN: mpirun, plus --allow-run-as-root
#                               only when running as root (Open MPI refuses root without it)
#   visible_gpu_count           the GPUs a CUDA program started here sees: nvidia-smi -L's GPUs, narrowed by
#                               CUDA_VISIBLE_DEVICES when it is set (indices or GPU-/MIG- UUIDs; as CUDA,
#                               the list ends at the first entry that names no device; set but empty: 0)
#   gpu_memory_sample FILE SECONDS [--apps]
#                               until killed (start it in the background), every SECONDS appends the used
#                               memory of each GPU (MiB, nvidia-smi), one line each; --apps: of each process
#                               on a GPU instead, "pid, MiB" lines
#   peak_mib FILE               the largest MiB in such a FILE (its last column), 0 when it is empty
#   descendants PID             every process below PID (children, grandchildren, ...), one per line
#   trainer_pids PID            those descendants that are train_gpt2cu processes (the ranks): the
#                               program name is matched, LLMC_TRAINER_NAME to match another name
#   kill_tree PID               SIGKILL to PID and every descendant (a crash of the whole job: Open
#                               MPI puts each rank in its own process group, so kill -- -PGID misses them)
#   run_forwarding_term [--to-launcher] CMD...
#                               runs CMD in its own session and waits for it. A SIGTERM / SIGINT to
#                               this shell goes to the ranks only (trainer_pids), not to mpirun: Open
#                               MPI's mpirun answers SIGTERM with SIGTERM to the ranks and SIGKILL a
#                               few seconds later, before a large checkpoint is written. The ranks
#                               agree to stop, checkpoint and exit 0; mpirun then exits with them.
#                               --to-launcher: to CMD itself instead (srun, whose ranks are not its
#                               descendants; srun passes the signal on to every task).
#                               Returns CMD's exit code; sets FORWARDED_SIGNAL=1 when it forwarded one.
#   term_trappable_or_reexec SCRIPT ARGS...
#                               call first thing in a script that forwards SIGTERM (before any cd): when
#                               the script's shell inherited SIGTERM as ignored, bash cannot trap it (a
#                               trap is silently not set), so run_forwarding_term would never forward it;
#                               then the script runs itself again with SIGTERM at its default
#                               (env --default-signal, coreutils >= 9). Seen on the GPU machine: the
#                               mpirun -np 1 stop check ran all its steps and never saw the SIGTERM.
#   error_recurs RC LOG         true when exit code RC with the trainer's stderr in LOG is an error a
#                               restart would repeat: exit 1 with an "error: " line (fatal(): a flag, a
#                               file, the data, a NaN loss), unless the error is about waiting for a
#                               peer ("timed out", the watchdog's "did not finish within"). CUDA / NCCL
#                               library errors ("[CUDA error]"), crashes and kills count as transient.

mpirun_cmd() {
    MPIRUN=(mpirun)
    [ "$(id -u)" -eq 0 ] && MPIRUN+=(--allow-run-as-root)
    return 0
}

visible_gpu_count() {
    local all n=0 e
    all=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    if [ -z "${CUDA_VISIBLE_DEVICES+set}" ]; then echo "$all"; return 0; fi
    local IFS=,
    for e in $CUDA_VISIBLE_DEVICES; do
        e=${e// /}
        if [[ "$e" =~ ^[0-9]+$ ]] && [ "$e" -lt "$all" ]; then n=$((n + 1))
        elif [[ "$e" =~ ^(GPU|MIG)- ]]; then n=$((n + 1))
        else break
        fi
    done
    echo "$n"
}

gpu_memory_sample() {
    local query=--query-gpu=memory.used
    [ "${3:-}" = --apps ] && query=--query-compute-apps=pid,used_memory
    while true; do
        nvidia-smi "$query" --format=csv,noheader,nounits >> "$1" 2>/dev/null
        sleep "$2"
    done
}

peak_mib() { awk -F', *' '{ if ($NF + 0 > m) m = $NF + 0 } END { print m + 0 }' "$1"; }

descendants() {
    local kid
    for kid in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$kid"
        descendants "$kid"
    done
}

trainer_pids() {  # by the program's name in its first two words (a script run through env shows as bash)
    local p name=${LLMC_TRAINER_NAME:-train_gpt2cu}
    for p in $(descendants "$1"); do
        ps -o args= -p "$p" 2>/dev/null | awk -v name="$name" '{ for (i = 1; i <= 2 && i <= NF; i++) { n = split($i, a, "/"); if (a[n] == name) f = 1 } }
                                            END { exit !f }' && echo "$p"
    done
    return 0
}

kill_tree() {
    local pids
    pids="$1 $(descendants "$1")"
    kill -STOP $pids 2>/dev/null   # nobody respawns or exits cleanly while the list is killed
    kill -9 $pids 2>/dev/null
    return 0
}

term_trappable_or_reexec() {
    local ign
    ign=$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status 2>/dev/null)
    [ -n "$ign" ] && (( (16#$ign >> 14) & 1 )) || return 0   # bit 14 = signal 15
    if [ -n "${LLMC_TERM_REEXEC:-}" ]; then
        echo "warning: SIGTERM is still ignored after re-running $1: it will not be forwarded to the ranks" >&2
        return 0
    fi
    echo "note: this shell inherited SIGTERM as ignored (bash cannot trap it then): running $1 again with SIGTERM at its default" >&2
    LLMC_TERM_REEXEC=1 exec env --default-signal=TERM bash "$@"
}

error_recurs() {
    [ "$1" -eq 1 ] || return 1
    grep -q '^error: ' "$2" 2>/dev/null || return 1
    ! grep -qE 'timed out|did not finish within' "$2"
}

run_forwarding_term() {
    local pid rc to_launcher=0
    [ "${1:-}" = --to-launcher ] && { to_launcher=1; shift; }
    FORWARDED_SIGNAL=0
    setsid "$@" &
    pid=$!
    if [ $to_launcher = 1 ]; then
        trap 'FORWARDED_SIGNAL=1; echo "forwarding SIGTERM to the launcher, pid $pid" >&2; kill -TERM $pid 2>/dev/null' TERM INT
    else
        trap 'FORWARDED_SIGNAL=1; echo "forwarding SIGTERM to the ranks of pid $pid: $(trainer_pids $pid | tr "\n" " ")" >&2; kill -TERM $(trainer_pids $pid) 2>/dev/null' TERM INT
    fi
    while true; do
        wait "$pid"; rc=$?
        kill -0 "$pid" 2>/dev/null || break   # wait returned for a trapped signal: keep waiting
    done
    wait "$pid"; rc=$?   # CMD's own status (the last wait may have been cut short by the trap as CMD exited)
    trap - TERM INT
    return $rc
}
