#!/usr/bin/env bash
# GPT-2 350M (d24) on FineWeb100B: llm.c's 350M run (60,000 steps of 524,288 tokens).
# The flags, the data (DATASET), the launch and the resume loop are scripts/run_gpt2.sh's; extra
# arguments go to train_gpt2cu after the recipe's. Peak GPU memory: scripts/recipes_check.sh measures it.
exec "$(dirname "$0")/run_gpt2.sh" 350M "$@"
