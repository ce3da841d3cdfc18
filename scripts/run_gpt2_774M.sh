#!/usr/bin/env bash
# GPT-2 774M (d36) on FineWeb, following llm.c's 774M run: 1M tokens per step, lr 2.5e-4, 700 warmup
# steps decaying to 0, weight decay 0.1, ZeRO-1, ~150B tokens (143k steps), HellaSwag eval. d36 = 36
# layers, C 1280, 20 heads (774M parameters); measured on one H200 (scripts/recipes_check.sh, cuDNN build):
# 51.4 GiB peak at -b 32 -r 1, so it fits an 80 GB GPU.
exec "$(dirname "$0")/run_gpt2.sh" gpt2_774M -e d36 -b 32 -t 1024 -d 1048576 -r 1 -z 1 -c 0.1 -l 0.00025 -q 0.0 \
    -u 700 -x 143000 -n 4000 -v 250 -s 20000 -h 1 "$@"
