#!/usr/bin/env bash
# dev/hf.py refuses what it cannot convert exactly: another model type or activation, LayerNorm eps, n_inner,
# attention variants, missing / misshapen / extra / NaN tensors, an untied LM head, unreadable files, a hub
# name not in the (empty) local cache, bad checkpoints for export. Each: exit 1, one message, no output file.
# Usage: dev/test/hf_bad_input_check.sh   (PYTHON=python3 by default; KEEP=1 keeps the temp dir): the "bad"
# mode of dev/test/hf_check.sh, which sets up the offline Hugging Face environment for both
exec bash "$(dirname "$0")/hf_check.sh" bad
