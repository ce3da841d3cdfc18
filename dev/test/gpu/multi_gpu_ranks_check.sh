#!/usr/bin/env bash
# shellcheck disable=SC2046  # $(tcp P R) is meant to split into its flags
# Multi-GPU checklist: what only several GPUs of one node can show. NEEDS >= 2 GPUs (case 3: >= 3);
# cases that need more GPUs than the machine has print SKIP. Hand-started ranks (-pi tcp / fs), one per
# GPU, on tiny Shakespeare. Usage:
#   dev/test/gpu/multi_gpu_ranks_check.sh        (CHECKLIST_DIR: logs, default build/multi_gpu_ranks_check;
#                                                 MGPU_PORT: first TCP port, default 29400)
# Each case prints PASS or FAIL lines; the exit code is 0 only if none failed.
#   1. resume with a stale -o (2 GPUs): rank 1's -o holds an old checkpoint (step 140: full outlier
#      windows), rank 0's none. -y 1 -sl 3 -sg 3 -z 1 -e d12: both ranks start fresh, 20 steps, exit 0
#      (before: rank 1 kept its windows, alone skipped step 1, and its missing all-gather hung the run).
#      Then without -e (rank 1 takes its init from its stale checkpoint, rank 0 from the default init
#      file) -z 0: both end with the same parameter checksum (LLMC_TEST_PARAM_CHECKSUM).
#   2. llm.c's multi-rank state files (2 GPUs): a 2-rank -z 0 checkpoint whose state files are made
#      llm.c's (no checksum, no outlier windows, a different rounding RNG per rank) resumes for 5 steps:
#      both ranks end with the same parameter checksum (before: each rounded with its own RNG).
#   3. -z 1 at P = 3 with d48 (3 GPUs; the padded layout): the note, 6 steps whose losses agree with
#      -z 0 to 1e-3, state files marked slot 9 = 2 and all of one size; resuming step 3 gives steps 4-6
#      bit for bit.
#   4. a failing rank (2 GPUs): rank 1 stops on an error after the NCCL start-up (its activations do not
#      fit: d36 at -b 140 -r 0): both exit 1 within 90 s of the start (d36's random init included), rank 0
#      printing "peer failure: rank 0 stops because rank 1 failed: activations ..."; -pi fs likewise;
#      rank 1 killed (SIGKILL) mid-run: rank 0 exits 1 within 30 s ("rank 1 ended without a message").
#   5. the watchdog's abort (2 GPUs): rank 1's vote blocks (LLMC_TEST_HANG_AT_STEP=5 on rank 1 only),
#      -wt 20: both exit 1 (never a crash) within 60 s, five times.
# The trainer is a test build (EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS): only it has the LLMC_TEST_* hooks.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
export NCCL_NVLS_ENABLE=0
D=${CHECKLIST_DIR:-build/multi_gpu_ranks_check}
D=$(mkdir -p "$D" && cd "$D" && pwd)
rm -rf "${D:?}"/*
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
PORT=${MGPU_PORT:-29400}
echo "GPUs: $NGPU"
[ "$NGPU" -ge 2 ] || { echo "SKIP: every case needs at least 2 GPUs"; exit 0; }
[ -f dev/data/tinyshakespeare/tiny_shakespeare_train.bin ] || bash dev/data/tinyshakespeare.sh > /dev/null || exit 1
DATA=(-i "$PWD/dev/data/tinyshakespeare/tiny_shakespeare_train.bin" -j "$PWD/dev/data/tinyshakespeare/tiny_shakespeare_val.bin")
make -j"$(nproc)" train_gpt2cu EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS > "$D/build.log" 2>&1 && mkdir -p "$D/bin" && cp train_gpt2cu "$D/bin/" || { tail "$D/build.log"; exit 1; }
BIN=$D/bin/train_gpt2cu
SMALL=(-b 4 -t 256 -l 6e-4 -u 10 -v 0 -s 0 "${DATA[@]}")
status=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; status=1; }

# ranks NAME P: runs rank_cmd R (defined by the case) for R < P in parallel, logs NAME.rR.log; sets RC[R]
# and TOOK (seconds until the last rank ended). Each case's ranks get a fresh TCP port.
ranks() {
    local name=$1 P=$2 r t0=$SECONDS pids=()
    PORT=$((PORT + 1))
    for ((r = 0; r < P; r++)); do
        rank_cmd "$r" > "$D/$name.r$r.log" 2>&1 &
        pids+=($!)
    done
    RC=()
    for ((r = 0; r < P; r++)); do wait "${pids[$r]}"; RC[$r]=$?; done
    TOOK=$((SECONDS - t0))
}
tcp() { echo -pi tcp -ps 127.0.0.1 -pp "$PORT" -pn "$1" -pr "$2" -pg "$NGPU"; }
steps() { python3 dev/steplog.py lines "$1" --no-timing; }  # the timing columns differ between runs
checksum() { sed -nE 's/^rank [0-9]+: parameter checksum ([0-9a-f]+)$/\1/p' "$1"; }

# ---------------------------------------------------------------------------------------------------
# 1. resume with a stale -o
S=$D/stale
mkdir -p "$S/empty0" "$S/init" "$S/cwd"
for z in 1 0; do  # the stale checkpoints (a state file is read for the run's -z)
    rank_cmd() { timeout 900 "$BIN" -e d12 "${SMALL[@]}" -x 140 -n 140 -z $z -o "$S/old_z$z" $(tcp 2 "$1"); }
    ranks stale-old-z$z 2
done
if [ -f "$S/old_z1/DONE_00000140" ] && [ -f "$S/old_z0/DONE_00000140" ]; then
    rank_cmd() {
        local o=$S/empty0; [ "$1" -eq 1 ] && o=$S/old_z1
        timeout 600 "$BIN" -e d12 "${SMALL[@]}" -x 20 -y 1 -sl 3 -sg 3 -z 1 -wt 120 -o "$o" $(tcp 2 "$1")
    }
    ranks stale-z1 2
    if [ "${RC[0]}" -eq 0 ] && [ "${RC[1]}" -eq 0 ] && [ "$(steps "$D/stale-z1.r0.log" | wc -l)" -eq 20 ] &&
       grep -q "rank 1 saw step 140 as the newest checkpoint; taking rank 0's fresh start" "$D/stale-z1.r1.log" &&
       ! grep -q "skipping update" "$D/stale-z1.r0.log"; then
        pass "1. stale -o, -z 1 -sl 3 -sg 3: rank 1 started fresh with rank 0, 20 steps, both exit 0 ($TOOK s)"
    else
        fail "1. stale -o, -z 1 (exit ${RC[0]} / ${RC[1]} after $TOOK s)"; tail -3 "$D/stale-z1.r0.log" "$D/stale-z1.r1.log"
    fi
    # without -e: rank 0 inits from ./gpt2_124M_bf16.bin (another model), rank 1 from its stale step 140
    "$BIN" -e d12 "${SMALL[@]}" -x 1 -n 1 -seed 7 -o "$S/init" > "$D/stale-init.log" 2>&1
    cp "$S/init/model_00000001.bin" "$S/cwd/gpt2_124M_bf16.bin"
    rank_cmd() {
        local o=$S/empty0; [ "$1" -eq 1 ] && o=$S/old_z0
        (cd "$S/cwd" && LLMC_TEST_PARAM_CHECKSUM=1 timeout 600 "$BIN" "${SMALL[@]}" -x 10 -y 1 -z 0 -wt 120 -o "$o" \
             $(tcp 2 "$1"))
    }
    ranks stale-noe 2
    c0=$(checksum "$D/stale-noe.r0.log"); c1=$(checksum "$D/stale-noe.r1.log")
    if [ "${RC[0]}" -eq 0 ] && [ "${RC[1]}" -eq 0 ] && [ -n "$c0" ] && [ "$c0" = "$c1" ]; then
        pass "1. stale -o without -e, -z 0: rank 0's initial weights on both, parameter checksums equal ($c0)"
    else
        fail "1. stale -o without -e (exit ${RC[0]} / ${RC[1]}, checksums '$c0' / '$c1')"
        tail -3 "$D/stale-noe.r0.log" "$D/stale-noe.r1.log"
    fi
else
    fail "1. could not make the stale checkpoints"; tail -3 "$D/stale-old-z1.r0.log" "$D/stale-old-z0.r0.log"
fi

# ---------------------------------------------------------------------------------------------------
# 2. llm.c's multi-rank state files: one rounding RNG per rank
L=$D/llmc_rng
mkdir -p "$L"
rank_cmd() { timeout 600 "$BIN" -e d12 "${SMALL[@]}" -x 10 -n 10 -z 0 -o "$L" $(tcp 2 "$1"); }
ranks llmc-write 2
python3 - "$L" <<'EOF' > "$D/llmc-convert.log" 2>&1
# our state files -> llm.c's: header slots of ours cleared (no checksum), outlier windows dropped,
# and the RNG of rank r moved as llm.c's 13371337 + r seeding would make it differ
import struct, sys
for r in (0, 1):
    p = f"{sys.argv[1]}/state_00000010_{r:05d}.bin"
    b = bytearray(open(p, "rb").read())
    h = list(struct.unpack_from("<256i", b))
    windows = h[7] == 1
    for slot in (6, 7, 8, 9, 34, 35, 40, 41, 42, 43):
        h[slot] = 0
    struct.pack_into("<256i", b, 0, *h)
    for slot in (20, 22):
        v = struct.unpack_from("<Q", b, 4 * slot)[0]
        struct.pack_into("<Q", b, 4 * slot, (v + 7919 * r) % (1 << 64))
    if windows:
        del b[len(b) - 2 * (8 + 8 * 128):]
    open(p, "wb").write(b)
    print(p, "converted")
EOF
rank_cmd() { LLMC_TEST_PARAM_CHECKSUM=1 timeout 600 "$BIN" -e d12 "${SMALL[@]}" -x 15 -y 1 -z 0 -o "$L" $(tcp 2 "$1"); }
ranks llmc-resume 2
c0=$(checksum "$D/llmc-resume.r0.log"); c1=$(checksum "$D/llmc-resume.r1.log")
if [ "${RC[0]}" -eq 0 ] && [ "${RC[1]}" -eq 0 ] && grep -q "has no checksum (as llm.c writes them)" "$D/llmc-resume.r1.log" &&
   [ "$(steps "$D/llmc-resume.r0.log" | wc -l)" -eq 5 ] && [ -n "$c0" ] && [ "$c0" = "$c1" ]; then
    pass "2. llm.c-style state files with one RNG per rank: 5 resumed steps, parameter checksums equal ($c0)"
else
    fail "2. llm.c-style resume (exit ${RC[0]} / ${RC[1]}, checksums '$c0' / '$c1')"; cat "$D/llmc-convert.log"
    tail -3 "$D/llmc-resume.r0.log" "$D/llmc-resume.r1.log"
fi

# ---------------------------------------------------------------------------------------------------
# 3. -z 1 at P = 3 with d48: the padded layout
if [ "$NGPU" -ge 3 ]; then
    Z=$D/zero1_p3
    BIG=(-e d48 -b 4 -t 1024 -l 1e-4 -v 0 -s 0 "${DATA[@]}")
    rank_cmd() { timeout 1200 "$BIN" "${BIG[@]}" -x 6 -n 3 -z 1 -o "$Z/z1" $(tcp 3 "$1"); }
    ranks p3-z1 3
    rc_z1="${RC[*]}"
    rank_cmd() { timeout 1200 "$BIN" "${BIG[@]}" -x 6 -z 0 $(tcp 3 "$1"); }
    ranks p3-z0 3
    rc_z0="${RC[*]}"
    close=$(python3 - "$D/p3-z1.r0.log" "$D/p3-z0.r0.log" <<'EOF'
import sys
sys.path.insert(0, "dev")
import steplog
loss = lambda p: [s.loss for s in steplog.read(p)]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
print("yes" if len(a) == 6 and len(b) == 6 and all(abs(x - y) <= 1e-3 * abs(y) for x, y in zip(a, b)) else f"no {a} {b}")
EOF
)
    marks=$(python3 - "$Z/z1" <<'EOF'
import glob, os, struct, sys
files = sorted(glob.glob(f"{sys.argv[1]}/state_00000006_*.bin"))
slots = {struct.unpack_from("<i", open(f, "rb").read(40), 36)[0] for f in files}
bodies = {struct.unpack_from("<Q", open(f, "rb").read(1024), 42 * 4)[0] for f in files}
print("yes" if len(files) == 3 and slots == {2} and len(bodies) == 1 else f"no {files} slot9={slots} bodies={bodies}")
EOF
)
    mkdir -p "$Z/resume"
    cp "$Z/z1/"*_00000003* "$Z/resume/"
    rank_cmd() { timeout 1200 "$BIN" "${BIG[@]}" -x 6 -y 1 -z 1 -o "$Z/resume" $(tcp 3 "$1"); }
    ranks p3-resume 3
    rc_resume="${RC[*]}"
    if [ "$rc_z1" = "0 0 0" ] && [ "$rc_z0" = "0 0 0" ] && [ "$rc_resume" = "0 0 0" ] && [ "$close" = yes ] &&
       [ "$marks" = yes ] && grep -q "the padded layout" "$D/p3-z1.r0.log" &&
       cmp -s <(steps "$D/p3-z1.r0.log" | sed -n '4,6p') <(steps "$D/p3-resume.r0.log"); then
        pass "3. -z 1, d48, P = 3 (padded layout): losses as -z 0, slot 9 = 2, resume from step 3 bitwise"
    else
        fail "3. -z 1 d48 P = 3 (exit z1 '$rc_z1', z0 '$rc_z0', resume '$rc_resume'; losses agree: $close; marks: $marks)"
        tail -3 "$D/p3-z1.r0.log" "$D/p3-resume.r0.log"
    fi
else
    echo "SKIP: 3. -z 1 at P = 3 needs 3 GPUs"
fi

# ---------------------------------------------------------------------------------------------------
# 4. a failing rank
for pi in tcp fs; do
    mkdir -p "$D/fs"
    rank_cmd() {
        local b=4; [ "$1" -eq 1 ] && b=140  # d36 at 140 x 1024 without recompute: ~200 GB of activations
        local start; read -ra start <<< "$(tcp 2 "$1")"
        [ $pi = fs ] && start=(-pi fs -pf "$D/fs" -pn 2 -pr "$1" -pg "$NGPU")
        timeout 300 "$BIN" -e d36 -b $b -t 1024 -r 0 -x 20 -v 0 -s 0 -wt 120 "${DATA[@]}" "${start[@]}"
    }
    ranks fail-$pi 2
    if [ "${RC[0]}" -eq 1 ] && [ "${RC[1]}" -eq 1 ] && [ $TOOK -lt 90 ] && grep -q "^error: activations for -b 140" "$D/fail-$pi.r1.log" &&
       grep -q "peer failure: rank 0 stops because rank 1 failed: activations for -b 140" "$D/fail-$pi.r0.log"; then
        pass "4. -pi $pi: rank 1 failed after the NCCL start-up; both exit 1 after $TOOK s, rank 0 names rank 1's error"
    else
        fail "4. -pi $pi failing rank (exit ${RC[0]} / ${RC[1]} after $TOOK s)"; tail -3 "$D/fail-$pi.r0.log" "$D/fail-$pi.r1.log"
    fi
done
PORT=$((PORT + 1))
"$BIN" -e d12 "${SMALL[@]}" -x 5000 -wt 60 $(tcp 2 0) > "$D/kill.r0.log" 2>&1 &
p0=$!
"$BIN" -e d12 "${SMALL[@]}" -x 5000 -wt 60 $(tcp 2 1) > "$D/kill.r1.log" 2>&1 &
p1=$!
python3 dev/steplog.py wait "$D/kill.r0.log" 20 --pid $p0 --interval 0.2
t0=$SECONDS
kill -KILL $p1
wait $p0; rc0=$?
wait $p1 2>/dev/null
took=$((SECONDS - t0))
if [ $rc0 -eq 1 ] && [ $took -lt 30 ] && grep -q "peer failure: rank 0 stops because rank 1 ended without a message" "$D/kill.r0.log"; then
    pass "4. rank 1 killed mid-run: rank 0 exits 1 after $took s, naming it"
else
    fail "4. killed rank (rank 0 exit $rc0 after $took s)"; tail -3 "$D/kill.r0.log"
fi

# ---------------------------------------------------------------------------------------------------
# 5. the watchdog's abort while the other rank waits in the same collective, five times
bad5=0
for i in 1 2 3 4 5; do
    rank_cmd() {
        local env=(); [ "$1" -eq 1 ] && env=(LLMC_TEST_HANG_AT_STEP=5)
        env "${env[@]}" timeout 300 "$BIN" -e d12 "${SMALL[@]}" -x 100 -wt 20 $(tcp 2 "$1")
    }
    ranks watchdog-$i 2
    if ! { [ "${RC[0]}" -eq 1 ] && [ "${RC[1]}" -eq 1 ] && [ $TOOK -lt 60 ] &&
           grep -q "watchdog: step 5: the loss / stop vote" "$D/watchdog-$i.r1.log"; }; then
        bad5=$((bad5 + 1)); echo "  round $i: exit ${RC[0]} / ${RC[1]} after $TOOK s"; tail -2 "$D/watchdog-$i.r0.log"
    fi
done
[ $bad5 -eq 0 ] && pass "5. watchdog abort with a blocked peer: both ranks exit 1 within 60 s, 5 of 5 rounds" ||
    fail "5. watchdog abort: $bad5 of 5 rounds wrong (a crash shows as exit 134 / 139)"
exit $status
