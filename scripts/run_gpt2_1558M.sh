#!/usr/bin/env bash
# GPT-2 1558M (d48) on FineWeb-Edu 100B: llm.c's 1.5B run (32,000 steps of 1,048,576 tokens).
# The flags, the data (DATASET), the launch and the resume loop are scripts/run_gpt2.sh's; extra
# arguments go to train_gpt2cu after the recipe's. Peak GPU memory: scripts/recipes_check.sh measures it.
exec "$(dirname "$0")/run_gpt2.sh" 1558M "$@"
