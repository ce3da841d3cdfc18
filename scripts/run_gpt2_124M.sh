#!/usr/bin/env bash
# GPT-2 124M (d12) on FineWeb10B: llm.c's 124M run (18,865 steps of 524,288 tokens, one epoch).
# The flags, the data (DATASET), the launch and the resume loop are scripts/run_gpt2.sh's; extra
# arguments go to train_gpt2cu after the recipe's. Peak GPU memory: scripts/recipes_check.sh measures it.
exec "$(dirname "$0")/run_gpt2.sh" 124M "$@"
