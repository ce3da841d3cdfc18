#!/usr/bin/env bash
# GPT-2 124M (d12) on FineWeb10B, following llm.c's 124M run: 0.5M tokens per step, lr 6e-4 with 700
# warmup steps decaying to 0, weight decay 0.1, ZeRO-1, 10B tokens (~19k steps), HellaSwag eval.
# Measured on one H200 (scripts/recipes_check.sh, cuDNN build): 24.8 GiB peak at -b 64 -r 1, so it fits a
# 40 GB GPU; -d stays 524288 whatever the GPU count.
exec "$(dirname "$0")/run_gpt2.sh" gpt2_124M -e d12 -b 64 -t 1024 -d 524288 -r 1 -z 1 -c 0.1 -l 0.0006 -q 0.0 \
    -u 700 -x 18865 -n 5000 -v 250 -s 20000 -h 1 "$@"
