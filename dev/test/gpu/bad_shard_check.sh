#!/usr/bin/env bash
# A bad token id in a later shard, met mid-run, on a GPU. Start-up checks only the first shard the
# loader reads; every later shard is checked (in the background) before the loader hands out any of
# its windows. Data: 5 train shards of 5 windows of B*T = 4*64 tokens each, shard 2 (the 3rd) with id
# 50300 at position 700; -d 768 = 3 micro-batches per step, checkpoints every step (-n 1).
#   A  -sh 0 (file order): shard 2 starts at micro-batch 10 = step 3, micro-step 1. The run must stop
#      there, exit 1 with one line naming the shard, position and value; the newest checkpoint is
#      step 3 (written before that step; nothing after it), the last step line "step 3/".
#   B  -y 1 from A's checkpoint: stops at the same place, writes no checkpoint.
#   C  shuffled (the default): llm.c's order (dev/test/llmc_state.py's loader) first reaches shard 2 at
#      micro-batch 20 = step 6, micro-step 2: stops there, newest checkpoint step 6, last step line 6.
# Usage: dev/test/gpu/bad_shard_check.sh [extra trainer flags]
set -uo pipefail
cd "$(dirname "$0")/../../.."
D=${BAD_SHARD_DIR:-build/bad_shard_check}
rm -rf "$D"; mkdir -p "$D/data"
make -j"$(nproc)" train_gpt2cu > "$D/build.log" 2>&1 || { tail -20 "$D/build.log"; exit 1; }
python3 - "$D/data" <<'EOF'
import struct, sys
d = sys.argv[1]
def shard(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))
n = 5 * 256 + 1  # 5 windows of 4*64 tokens (+1 for the last target)
for s in range(5):
    t = [(s * 7919 + i * 104729) % 50257 for i in range(n)]
    if s == 2:
        t[700] = 50300
    shard(f"{d}/train_{s:06d}.bin", t)
shard(f"{d}/val_000000.bin", [(i * 31) % 50257 for i in range(2049)])
EOF
COMMON=(-e custom:L2,C128,NH2 -b 4 -t 64 -d 768 -x 20 -v 0 -s 0 -n 1 -nk 0
        -i "$D/data/train_*.bin" -j "$D/data/val_*.bin" "$@")
MSG="-i: token shard '$D/data/train_000002.bin' has token id 50300 at position 700"
newest() { ls "$1" | sed -nE 's/^DONE_0*([0-9]+)$/\1/p' | sort -n | tail -1; }
last_step() { python3 dev/steplog.py last "$1" step; }
status=0
check() {  # NAME LOG RC WANT_NEWEST_CHECKPOINT DIR
    local name=$1 log=$2 rc=$3 want=$4 dir=$5
    local got; got=$(newest "$dir")
    if [ "$rc" -eq 1 ] && grep -qF -- "$MSG" "$log" && [ "$(grep -c 'has token id' "$log")" -eq 1 ] &&
        [ "$got" = "$want" ]; then
        echo "PASS: $name: exit 1, '$(grep -F -- "$MSG" "$log" | head -c 120)...', newest checkpoint step $got"
    else
        echo "FAIL: $name: exit $rc, newest checkpoint '$got' (want $want)"; tail -5 "$log"; status=1
    fi
}

./train_gpt2cu "${COMMON[@]}" -sh 0 -o "$D/a" > "$D/a.log" 2>&1; rc=$?
check "A (-sh 0)" "$D/a.log" $rc 3 "$D/a"
[ "$(last_step "$D/a.log")" = 3 ] || { echo "FAIL: A's last step line is '$(last_step "$D/a.log")', want 3"; status=1; }

./train_gpt2cu "${COMMON[@]}" -sh 0 -o "$D/a" -y 1 > "$D/b.log" 2>&1; rc=$?
check "B (-y 1 from A)" "$D/b.log" $rc 3 "$D/a"
grep -q "resume: loaded step 3" "$D/b.log" || { echo "FAIL: B did not resume from step 3"; status=1; }

want=$(cd dev/test && python3 -c "
import llmc_state as m
loader, k = m.Loader([5] * 5, 0, True), 0
while loader.next()[0] != 2: k += 1
print(k // 3)")
./train_gpt2cu "${COMMON[@]}" -o "$D/c" > "$D/c.log" 2>&1; rc=$?
check "C (shuffled)" "$D/c.log" $rc "$want" "$D/c"
[ "$(last_step "$D/c.log")" = "$want" ] || { echo "FAIL: C's last step line is '$(last_step "$D/c.log")', want $want"; status=1; }
exit $status
