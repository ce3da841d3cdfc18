#!/usr/bin/env bash
# GPT-2 1558M (d48) on FineWeb, following llm.c's 1.5B run: 1M tokens per step, lr 6e-4, 700 warmup
# steps decaying to 10%, weight decay 0.1, ZeRO-1, 32k steps (~33B tokens), outlier skipping on loss
# and grad-norm spikes (-sl 5 -sg 5), HellaSwag eval. Measured on one H200 (scripts/recipes_check.sh, cuDNN
# build, one process): 64.1 GiB peak at -b 16 -r 0 (d48 = 48 layers, C 1600, 25 heads, 1.56B parameters),
# so it fits an 80 GB GPU; -z 1 on several GPUs lowers the optimizer state per GPU.
exec "$(dirname "$0")/run_gpt2.sh" gpt2_1558M -e d48 -b 16 -t 1024 -d 1048576 -r 0 -z 1 -c 0.1 -l 0.0006 -q 0.1 \
    -u 700 -x 32000 -n 2000 -v 250 -s 20000 -h 1 -sl 5 -sg 5 "$@"
