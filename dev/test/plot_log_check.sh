#!/usr/bin/env bash
# Check for dev/plot_log.py: plots made-up main.log files and checks a PNG comes out with exactly the
# panels that have data (--describe lists the figure's axes): all four for train + val + eval lines, two
# runs in each; loss / lr / norm without eval (a run without -h 1); one loss panel for a val-only log; and
# that a missing log or one with no data is a clear error. Usage: bash dev/test/plot_log_check.sh (exit 0 = pass)
set -euo pipefail
PY=${PYTHON:-python3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/runA" "$dir/runB" "$dir/noeval" "$dir/valonly" "$dir/empty"
for run in runA runB; do
    awk 'BEGIN {
        for (s = 0; s <= 40; s++) {
            if (s % 10 == 0) printf "s:%d tel:%.4f\n", s, 5 - 0.05 * s
            if (s % 20 == 0) printf "s:%d eval:%.4f\n", s, 0.25 + 0.002 * s
            printf "s:%d trl:%.4f lr:%.6f norm:%.2f\n", s, 5.1 - 0.05 * s, 1e-4 * (s % 9 + 1), 1 + 0.1 * (s % 7)
        }
        print "garbage line"
        print "s:41 trl:notanumber"
    }' > "$dir/$run/main.log"
done
grep -v eval "$dir/runA/main.log" > "$dir/noeval/main.log"
grep tel "$dir/runA/main.log" > "$dir/valonly/main.log"
printf 'garbage line\nanother\n' > "$dir/empty/main.log"

# panels NAME LOG... : the figure's panels and line labels as "title=label|label;title=..."
panels() {
    local name=$1; shift
    "$PY" dev/plot_log.py --describe -o "$dir/$name.png" "$@" > "$dir/$name.out" 2> "$dir/$name.err"
    [ "$(head -c 8 "$dir/$name.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]  # PNG signature
    tail -1 "$dir/$name.out" | "$PY" -c '
import json, sys
print(";".join(p["title"] + "=" + "|".join(p["lines"]) for p in json.load(sys.stdin)))'
}
expect() {  # expect WHAT GOT WANT
    if [ "$2" != "$3" ]; then echo "FAIL: $1: got '$2', want '$3'"; exit 1; fi
    echo "ok    $1: $2"
}

got=$(panels both "$dir/runA/main.log" "$dir/runB/main.log")
expect "train + val + eval, two runs: four panels" "$got" \
    "loss=runA train|runA val|runB train|runB val;learning rate=runA|runB;grad norm=runA|runB;eval accuracy=runA|runB"
grep -q "min val loss" "$dir/both.out"
grep -q "wrote .*both.png: 4 panels (loss, learning rate, grad norm, eval accuracy)" "$dir/both.out"
grep -q "malformed line" "$dir/both.err"

got=$(panels noeval "$dir/noeval/main.log")
expect "no eval lines: no eval panel" "$got" "loss=noeval train|noeval val;learning rate=noeval;grad norm=noeval"

got=$(panels valonly "$dir/valonly/main.log")
expect "val loss only: one panel" "$got" "loss=valonly val"
grep -q "wrote .*valonly.png: 1 panel (loss)" "$dir/valonly.out"

got=$(panels mixed "$dir/valonly/main.log" "$dir/noeval/main.log")
expect "a val-only log beside a full one: the panels of either" "$got" \
    "loss=valonly val|noeval train|noeval val;learning rate=noeval;grad norm=noeval"

if "$PY" dev/plot_log.py -o "$dir/x.png" "$dir/empty/main.log" 2> "$dir/err"; then
    echo "FAIL: a log without data accepted"; exit 1
fi
grep -q "error: no train, val or eval lines" "$dir/err"
[ ! -e "$dir/x.png" ] || { echo "FAIL: a log without data wrote a PNG"; exit 1; }
if "$PY" dev/plot_log.py -o "$dir/x.png" "$dir/nope.log" 2> "$dir/err"; then
    echo "FAIL: missing log accepted"; exit 1
fi
grep -q "error: log file .*nope.log' does not exist" "$dir/err"
echo "plot_log_check: PASSED"
