#!/usr/bin/env bash
# Tiny Shakespeare as GPT-2 token shards for the trainer's defaults, plus the decode-only tokenizer:
#   dev/data/tinyshakespeare/tiny_shakespeare_val.bin    the first 32,768 tokens
#   dev/data/tinyshakespeare/tiny_shakespeare_train.bin  the rest
#   gpt2_tokenizer.bin                                   (repo root, where the trainer looks for it)
#   dev/data/tinyshakespeare/tinyshakespeare.txt         the text (for scripts/scaling_data.sh)
# The text is one document: <|endoftext|> then the whole of tinyshakespeare.txt (338,026 tokens).
# Text: ../shared/data/tinyshakespeare.txt next to the repo if present, else downloaded (char-rnn).
# Vocabulary: see dev/data/README.md (GPT2_VOCAB_DIR, ../shared/data/gpt2, or downloaded).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
OUT=dev/data/tinyshakespeare
URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt

make -s gpt2tok prepare_dataset

TXT="$REPO/../shared/data/tinyshakespeare.txt"
if [ ! -f "$TXT" ]; then
    TXT="$OUT/tinyshakespeare.txt"
    if [ ! -f "$TXT" ]; then
        mkdir -p "$OUT"
        echo "downloading $URL"
        curl -fsSL --retry 2 -o "$TXT.tmp" "$URL" || {
            echo "error: no ../shared/data/tinyshakespeare.txt and the download failed; put the text at $TXT" >&2
            exit 1
        }
        mv "$TXT.tmp" "$TXT"
    fi
fi

./prepare_dataset shards -q --format text --out "$OUT" --name tiny_shakespeare --val-tokens 32768 "$TXT"
mv "$OUT/tiny_shakespeare_val_000000.bin" "$OUT/tiny_shakespeare_val.bin"
mv "$OUT/tiny_shakespeare_train_000001.bin" "$OUT/tiny_shakespeare_train.bin"
./gpt2tok write-bin gpt2_tokenizer.bin
# keep the text beside its shards: scripts/scaling_data.sh repeats it, also on machines (the GPU one)
# that get this folder but not ../shared
[ "$TXT" = "$OUT/tinyshakespeare.txt" ] || cp "$TXT" "$OUT/tinyshakespeare.txt"
ls -l "$OUT"/tiny_shakespeare_*.bin gpt2_tokenizer.bin
