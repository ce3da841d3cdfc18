#!/usr/bin/env bash
# dev/steplog.py, the one reader of step lines, on the lines the trainer's own code prints: a small
# program built here from llmc/step_line.h prints a made-up run (autotune notes before step 1, "+nanz"
# while the outlier windows fill, a "skipping update" notice before step 7, val / sample lines between
# steps); dev/test/steplog_check.py reads it, and lines in llm.c's printf format, through the functions
# and the command line. Usage: dev/test/steplog_check.sh   (exit 0 = pass)
set -euo pipefail
cd "$(dirname "$0")/../.."
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
g++ -std=c++17 -I. -x c++ -o "$T/step_lines" - <<'EOF'
#include <cstdio>
#include <limits>
#include "llmc/step_line.h"
// values the check recomputes: exact in binary, so every printed digit is known
int main() {
    const int n = 12;
    for (int s = 1; s <= n; s++) {
        const float z = s < 4 ? std::numeric_limits<float>::quiet_NaN() : 0.75f * (s % 3 - 1);
        if (s == 7) printf("skipping update due to loss z-score of %f\n", 3.5);  // as llmc/train_step.cuh
        const StepLine line{s, n, 5.0f - 0.25f * s, z, 1.0f + 0.125f * s, z, 6e-4f, 100.0f + s, 40.5, 500000.0f};
        fputs(step_output(line, s == 1 ? "autotune: 12 matmul shapes, 3 steps of 1 ms" : "").c_str(), stdout);
        if (s % 4 == 0) printf("val loss %f\ngenerating:\n---\nstep by step\n---\n", 4.0);
    }
    printf("stopping after step %d: SIGINT/SIGTERM\n", n);
}
EOF
"$T/step_lines" > "$T/trainer.log"
STEPLOG_TRAINER_LOG="$T/trainer.log" "${PYTHON:-python3}" dev/test/steplog_check.py
