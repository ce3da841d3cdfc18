#!/usr/bin/env bash
# Tiny Shakespeare as GPT-2 token shards for the trainer's defaults, plus the decode-only tokenizer:
#   DIR/tiny_shakespeare_val.bin    the first 32,768 tokens
#   DIR/tiny_shakespeare_train.bin  the rest (305,260 tokens)
#   DIR/tinyshakespeare.txt         the text (for scripts/scaling_data.sh)
#   gpt2_tokenizer.bin              (repo root, where the trainer looks for it)
# DIR is the first argument, default dev/data/tinyshakespeare.
# The shards are byte for byte those of llm.c's dev/data/tinyshakespeare.py: the text is split on blank
# lines ("\n\n"), every section is a document (<|endoftext|> first) that keeps its "\n\n", except the
# last section (dev/test/tinyshakespeare_check.sh compares with tiktoken).
# Text: dev/data/tinyshakespeare.txt (char-rnn's corpus, kept in the repository).
# Vocabulary: dev/data/gpt2 (see dev/data/README.md).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
OUT=${1:-dev/data/tinyshakespeare}

make -s gpt2tok prepare_dataset

TXT="$REPO/dev/data/tinyshakespeare.txt"
[ -f "$TXT" ] || { echo "error: $TXT is missing (it is part of the repository)" >&2; exit 1; }

./prepare_dataset shards -q --format text --separator '\n\n' --keep-separator --unnumbered --val-tokens 32768 \
    --out "$OUT" --name tiny_shakespeare "$TXT"
./gpt2tok write-bin gpt2_tokenizer.bin
cp "$TXT" "$OUT/tinyshakespeare.txt"  # beside its shards: scripts/scaling_data.sh repeats it
ls -l "$OUT"/tiny_shakespeare_*.bin gpt2_tokenizer.bin
