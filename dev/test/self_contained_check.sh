#!/usr/bin/env bash
# The repository needs nothing beside it: no tracked file names a path above the clone (a folder next
# to it that a user's clone does not have), and the tokenizer tests pass in a fresh clone whose parent
# holds nothing else, with the vocabulary the repository carries (GPT2_VOCAB_DIR unset).
set -euo pipefail
cd "$(dirname "$0")/../.."
# "../" followed by a name, as a path out of the clone; the pattern is split so this line does not match
pattern='(^|[^.[:alnum:]_])\.\.''/(shared|data|docs)\b'
hits=$(git ls-files -z | grep -zv '^dev/data/gpt2/\|\.png$' | xargs -0 grep -nE "$pattern" || true)
if [ -n "$hits" ]; then
    echo "paths outside the repository:"; echo "$hits"; exit 1
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git clone -q . "$tmp/clone"
cd "$tmp/clone"
env -u GPT2_VOCAB_DIR make -s -j2 build/host/tests/test_gpt2_bpe
env -u GPT2_VOCAB_DIR build/host/tests/test_gpt2_bpe
ls "$tmp"  # only the clone
[ "$(ls "$tmp")" = clone ]
