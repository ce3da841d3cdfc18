#!/usr/bin/env bash
# GPT-2 350M (d24) on FineWeb, following llm.c's 350M run: 0.5M tokens per step, lr 3e-4, 700 warmup
# steps decaying to 0, weight decay 0.1, ZeRO-1, ~31B tokens (60k steps), HellaSwag eval. d24 = 24 layers,
# C 1024, 16 heads (355M parameters); measured on one H200 (scripts/recipes_check.sh, cuDNN build): 28.8 GiB
# peak at -b 32 -r 1.
exec "$(dirname "$0")/run_gpt2.sh" gpt2_350M -e d24 -b 32 -t 1024 -d 524288 -r 1 -z 1 -c 0.1 -l 0.0003 -q 0.0 \
    -u 700 -x 60000 -n 5000 -v 250 -s 20000 -h 1 "$@"
