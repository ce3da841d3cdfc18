#!/usr/bin/env bash
# GPT-2 1558M (d48) on FineWeb, following llm.c's 1.5B run: 1M tokens per step, lr 6e-4, 700 warmup
# steps decaying to 10%, weight decay 0.1, ZeRO-1, 32k steps (~33B tokens), outlier skipping on loss
# and grad-norm spikes (-sl 5 -sg 5), HellaSwag eval. B=16 with -r 0 fits an 80 GB GPU.
exec "$(dirname "$0")/run_gpt2.sh" gpt2_1558M -e d48 -b 16 -t 1024 -d 1048576 -r 0 -z 1 -c 0.1 -l 0.0006 -q 0.1 \
    -u 700 -x 32000 -n 2000 -v 250 -s 20000 -h 1 -sl 5 -sg 5 "$@"
