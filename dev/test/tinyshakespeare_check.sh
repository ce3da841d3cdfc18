#!/usr/bin/env bash
# dev/data/tinyshakespeare.sh writes the shards llm.c's dev/data/tinyshakespeare.py writes, byte for
# byte: compared with dev/test/llmc_data_reference.py (llm.c's procedure with tiktoken).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bash dev/data/tinyshakespeare.sh "$tmp/ours" > /dev/null
python3 dev/test/llmc_data_reference.py tinyshakespeare dev/data/tinyshakespeare.txt "$tmp/ref"
status=0
for split in val train; do
    f=tiny_shakespeare_$split.bin
    n=$(od -An -t d4 -j 8 -N 4 "$tmp/ours/$f" | tr -d ' ')
    if cmp "$tmp/ours/$f" "$tmp/ref/$f"; then
        echo "$f: $n tokens, $(stat -c %s "$tmp/ours/$f") bytes, identical to llm.c's"
    else
        echo "FAIL: $f differs from llm.c's (ours: $n tokens, $(stat -c %s "$tmp/ours/$f") bytes;" \
             "llm.c's: $(stat -c %s "$tmp/ref/$f") bytes)"
        status=1
    fi
done
exit $status
