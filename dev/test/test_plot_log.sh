#!/usr/bin/env bash
# Check for dev/plot_log.py: plots two made-up main.log files and checks a PNG comes out, and that a
# missing log is a clear error. Usage: bash dev/test/test_plot_log.sh   (exit 0 = pass)
set -euo pipefail
PY=${PYTHON:-python3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/runA" "$dir/runB"
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
"$PY" dev/plot_log.py -o "$dir/out.png" "$dir/runA/main.log" "$dir/runB/main.log" > "$dir/stdout" 2> "$dir/stderr"
grep -q "min val loss" "$dir/stdout"
grep -q "malformed line" "$dir/stderr"
# PNG signature
[ "$(head -c 8 "$dir/out.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
if "$PY" dev/plot_log.py -o "$dir/x.png" "$dir/nope.log" 2> "$dir/err"; then
    echo "FAIL: missing log accepted"; exit 1
fi
grep -q "error: log file .*nope.log' does not exist" "$dir/err"
echo "test_plot_log: PASSED"
