#!/usr/bin/env bash
# Crash-and-resume check on a GPU. Three runs of the same 60 steps:
#   A  uninterrupted, checkpoints every 20 steps
#   B  killed with SIGKILL during step ~45, then resumed with -y 1 (from step 40)
#   C  sent SIGTERM during step ~10: must write a checkpoint and exit 0
# Passes when steps 41-60 of B's resumed run print exactly the losses and norms of A, C leaves a
# complete checkpoint, and links planted in A's -o at temporary names are never written through. The data is shuffled (the default, llm.c's shuffle), so the data loader's orders and
# MT19937 state go through the state file too.
# Usage: dev/test/gpu/resume_check.sh [extra trainer flags]
set -uo pipefail
cd "$(dirname "$0")/../../.."
D=${RESUME_DIR:-build/resume_check}
rm -rf "$D"; mkdir -p "$D"
make -j"$(nproc)" train_gpt2cu > "$D/build.log" 2>&1 || { tail -20 "$D/build.log"; exit 1; }
COMMON=(-e d12 -b 16 -t 1024 -x 60 -l 6e-4 -u 10 -q 0.1 -v 0 -s 0 -n 20 "$@")

# links planted at the temporary names earlier builds wrote through (<file>.tmp) and at main.log: run A
# must leave the file they point to alone (llmc/utils.h AtomicFile) and replace the main.log link
mkdir -p "$D/a" && echo victim > "$D/victim.txt"
for f in model_00000020.bin.tmp state_00000020_00000.bin.tmp DONE_00000020.tmp main.log.tmp main.log; do
    ln -s "$(cd "$D" && pwd)/victim.txt" "$D/a/$f"
done
./train_gpt2cu "${COMMON[@]}" -o "$D/a" > "$D/a.log" 2>&1 || { echo "run A failed"; tail "$D/a.log"; exit 1; }

./train_gpt2cu "${COMMON[@]}" -o "$D/b" > "$D/b1.log" 2>&1 &
pid=$!
python3 dev/steplog.py wait "$D/b1.log" 45 --pid $pid --interval 0.02
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
echo "B killed after: $(python3 dev/steplog.py last "$D/b1.log" | cut -c1-40)"
ls "$D/b"
./train_gpt2cu "${COMMON[@]}" -o "$D/b" -y 1 > "$D/b2.log" 2>&1 || { echo "resume of B failed"; tail "$D/b2.log"; exit 1; }
grep -E "resume:" "$D/b2.log"

status=0
python3 dev/steplog.py lines "$D/a.log" --from 41 --to 60 --no-timing > "$D/a_41_60.txt"
python3 dev/steplog.py lines "$D/b2.log" --from 41 --to 60 --no-timing > "$D/b_41_60.txt"
if [ "$(wc -l < "$D/a_41_60.txt")" -eq 20 ] && cmp -s "$D/a_41_60.txt" "$D/b_41_60.txt"; then
    echo "PASS: steps 41-60 after SIGKILL + resume equal the uninterrupted run (20 lines)"
else
    echo "FAIL: steps 41-60 differ"; diff "$D/a_41_60.txt" "$D/b_41_60.txt" | head; status=1
fi
if cmp -s "$D/a/model_00000060.bin" "$D/b/model_00000060.bin"; then
    echo "PASS: final checkpoints are bitwise identical"
else
    echo "FAIL: final checkpoints differ"; status=1
fi
paste -d'\n' <(head -3 "$D/a_41_60.txt") <(head -3 "$D/b_41_60.txt")
if [ "$(cat "$D/victim.txt")" = victim ] && [ -f "$D/a/main.log" ] && [ ! -L "$D/a/main.log" ] &&
    [ "$(ls "$D/a" | grep -c '\.tmp')" -eq 4 ]; then
    echo "PASS: no write through a planted link; no temporary file left but the 4 planted links"
else
    echo "FAIL: a planted link was written through or temporary files were left:"; ls -l "$D/a"; status=1
fi

./train_gpt2cu "${COMMON[@]}" -n 0 -o "$D/c" > "$D/c.log" 2>&1 &
pid=$!
python3 dev/steplog.py wait "$D/c.log" 10 --pid $pid --interval 0.02
kill -TERM $pid; wait $pid; rc=$?
latest=$(ls "$D/c" | sed -nE 's/^DONE_0*([0-9]+)$/\1/p' | sort -n | tail -1)
if [ $rc -eq 0 ] && [ -n "$latest" ] && grep -q "^stopping after step $latest: SIGINT/SIGTERM" "$D/c.log"; then
    echo "PASS: SIGTERM -> checkpoint of step $latest written, exit code 0"
else
    echo "FAIL: SIGTERM run: exit $rc, DONE step '${latest}'"; tail -5 "$D/c.log"; status=1
fi
exit $status
