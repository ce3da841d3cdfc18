#!/usr/bin/env bash
# dev/hf.py refuses what it cannot convert exactly: another model type or activation, LayerNorm eps, n_inner,
# attention variants, missing / misshapen / extra / NaN / inf tensors, an untied LM head, unreadable files, a
# hub name not in the (empty) local cache, bad checkpoints for export; a config.json or shard index of the
# wrong JSON type, shapes beyond the trainer's bounds (n_layer 10^9: refused at once, not allocated), NaN / inf
# weights on export, an output that is a folder, under a file or on a file system that refuses new files
# (/sys, which refuses root too). Each: exit 1, one error line, no traceback, no output, no temp file. Also:
# symlinks planted at temp names are never followed.
# Usage: dev/test/hf_bad_input_check.sh   (PYTHON=python3 by default; KEEP=1 keeps the temp dir): the "bad"
# mode of dev/test/hf_check.sh, which sets up the offline Hugging Face environment for both
exec bash "$(dirname "$0")/hf_check.sh" bad
