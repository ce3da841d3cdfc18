#!/usr/bin/env bash
# dev/hf.py both ways on the CPU, no network: random small GPT2LMHeadModels (head size 32 at C=64 with the
# GPT-2 vocabulary; C=200 with 5 heads and V=1000, sharded) saved as safetensors and as an old-style
# pytorch_model.bin -> import (fp32 and bf16) -> train_gpt2.py's model gives transformers' logits -> export
# -> transformers gives them again; plus a hub name found in a local cache. See dev/test/hf_check.py.
# Usage: dev/test/hf_check.sh [roundtrip|bad]   (PYTHON=python3 by default; KEEP=1 keeps the temp dir). About a
# minute. dev/test/hf_bad_input_check.sh runs the "bad" mode (the refusals) as a check of its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:-roundtrip}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hf_check_$MODE.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
export HF_HOME="$WORK/hf_home" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
unset HF_HUB_CACHE
"${PYTHON:-python3}" dev/test/hf_check.py "$MODE" "$WORK"
