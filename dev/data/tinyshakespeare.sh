#!/usr/bin/env bash
# Tiny Shakespeare as GPT-2 token shards for the trainer's defaults, plus the decode-only tokenizer:
#   dev/data/tinyshakespeare/tiny_shakespeare_val.bin    the first 32,768 tokens
#   dev/data/tinyshakespeare/tiny_shakespeare_train.bin  the rest
#   gpt2_tokenizer.bin                                   (repo root, where the trainer looks for it)
#   dev/data/tinyshakespeare/tinyshakespeare.txt         the text (for scripts/scaling_data.sh)
# The text is one document: <|endoftext|> then the whole of tinyshakespeare.txt (338,026 tokens).
# Text: dev/data/tinyshakespeare.txt (char-rnn's corpus, kept in the repository).
# Vocabulary: dev/data/gpt2 (see dev/data/README.md).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
OUT=dev/data/tinyshakespeare

make -s gpt2tok prepare_dataset

TXT="$REPO/dev/data/tinyshakespeare.txt"
[ -f "$TXT" ] || { echo "error: $TXT is missing (it is part of the repository)" >&2; exit 1; }

./prepare_dataset shards -q --format text --out "$OUT" --name tiny_shakespeare --val-tokens 32768 "$TXT"
mv "$OUT/tiny_shakespeare_val_000000.bin" "$OUT/tiny_shakespeare_val.bin"
mv "$OUT/tiny_shakespeare_train_000001.bin" "$OUT/tiny_shakespeare_train.bin"
./gpt2tok write-bin gpt2_tokenizer.bin
cp "$TXT" "$OUT/tinyshakespeare.txt"  # beside its shards: scripts/scaling_data.sh repeats it
ls -l "$OUT"/tiny_shakespeare_*.bin gpt2_tokenizer.bin
