#!/usr/bin/env bash
# dev/hf.py refuses what it cannot convert exactly: another model type or activation, LayerNorm eps, n_inner,
# attention variants, missing / misshapen / extra / NaN tensors, an untied LM head, unreadable files, a hub
# name not in the (empty) local cache, bad checkpoints for export. Each: exit 1, one message, no output file.
# Usage: dev/test/hf_bad_input_check.sh   (PYTHON=python3 by default; KEEP=1 keeps the temp dir)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hf_bad_input_check.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
export HF_HOME="$WORK/hf_home" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
unset HF_HUB_CACHE
"${PYTHON:-python3}" dev/test/hf_check.py bad "$WORK"
