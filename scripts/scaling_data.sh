#!/usr/bin/env bash
# Token shards large enough for every configuration of scripts/multi_gpu_scaling.sh, made from one
# text (default: Tiny Shakespeare) repeated, and a check that a shard set holds enough windows.
#
#   scaling_data.sh make DIR TOKENS [SHARD_SIZE] [TEXT]
#       DIR/scaling_train_*.bin (no val shard), at least TOKENS tokens in shards of SHARD_SIZE
#       (default 5000000): the text is given to prepare_dataset as many times as needed, each copy one
#       document (preceded by <|endoftext|>). Skipped when DIR already holds TOKENS tokens.
#   scaling_data.sh tokens B T D STEPS SHARD_SIZE P...
#       prints a TOKENS that gives every process count P enough windows for STEPS steps of total
#       batch D: rank r reads floor((n - 1) / (P*B*T)) windows of each shard of n tokens (the tail of
#       every shard is lost), and a step needs D / (P*B*T) windows per rank.
#   scaling_data.sh check DIR B T D STEPS P...
#       exit 0 when DIR/scaling_train_*.bin give every P enough windows, else 1 with a line naming P.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

shard_tokens() { od -An -t d4 -j 8 -N 4 "$1" | tr -d ' '; }   # header slot 2: token count

total_tokens() {
    local t=0 f
    for f in "$1"/scaling_train_*.bin; do [ -f "$f" ] && t=$((t + $(shard_tokens "$f"))); done
    echo $t
}

cmd=${1:-}; shift || true
case "$cmd" in
make)
    [ $# -ge 2 ] || { echo "usage: scaling_data.sh make DIR TOKENS [SHARD_SIZE] [TEXT]" >&2; exit 1; }
    dir=$1 tokens=$2 shard=${3:-5000000} text=${4:-$REPO/dev/data/tinyshakespeare.txt}
    if [ -d "$dir" ] && [ "$(total_tokens "$dir")" -ge "$tokens" ]; then
        echo "scaling data: $dir already holds $(total_tokens "$dir") tokens (>= $tokens)"; exit 0
    fi
    [ -f "$text" ] || text=$REPO/dev/data/tinyshakespeare/tinyshakespeare.txt
    [ -f "$text" ] || { echo "error: no text to repeat (run dev/data/tinyshakespeare.sh, or pass TEXT)" >&2; exit 1; }
    [ -x "$REPO/prepare_dataset" ] && [ -x "$REPO/gpt2tok" ] || make -s -C "$REPO" prepare_dataset gpt2tok
    n=$("$REPO/gpt2tok" count "$text" | sed -nE 's/.*: ([0-9]+) tokens,.*/\1/p')
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "error: gpt2tok count gave no token count for $text" >&2; exit 1; }
    per_copy=$((n + 1))   # + <|endoftext|>
    copies=$(( (tokens + per_copy - 1) / per_copy ))
    [ $copies -le 2000 ] || { echo "error: $copies copies of $text: use a larger text" >&2; exit 1; }
    rm -rf "$dir"; mkdir -p "$dir"
    args=(); for ((i = 0; i < copies; i++)); do args+=("$text"); done
    "$REPO/prepare_dataset" shards -q --format text --val-tokens 0 --shard-size "$shard" --out "$dir" \
        --name scaling "${args[@]}"
    echo "scaling data: $copies copies of $(basename "$text") ($per_copy tokens each), $(total_tokens "$dir") tokens" \
         "in $(ls "$dir"/scaling_train_*.bin | wc -l) shards in $dir"
    ;;
tokens)
    [ $# -ge 6 ] || { echo "usage: scaling_data.sh tokens B T D STEPS SHARD_SIZE P..." >&2; exit 1; }
    B=$1 T=$2 D=$3 STEPS=$4 S=$5; shift 5
    need=0
    for P in "$@"; do
        win=$((P * B * T)); per_rank=$((STEPS * D / win))      # windows each rank reads
        per_shard=$(((S - 1) / win))                           # windows per rank in a full shard
        [ $per_shard -ge 1 ] || { echo "error: shard size $S is below one window of P*B*T = $win tokens" >&2; exit 1; }
        shards=$(((per_rank + per_shard - 1) / per_shard))
        t=$((shards * S)); [ $t -gt $need ] && need=$t
    done
    echo $need
    ;;
check)
    [ $# -ge 6 ] || { echo "usage: scaling_data.sh check DIR B T D STEPS P..." >&2; exit 1; }
    dir=$1 B=$2 T=$3 D=$4 STEPS=$5; shift 5
    ls "$dir"/scaling_train_*.bin > /dev/null 2>&1 || { echo "error: no $dir/scaling_train_*.bin" >&2; exit 1; }
    status=0
    for P in "$@"; do
        win=$((P * B * T)); have=0
        for f in "$dir"/scaling_train_*.bin; do have=$((have + ($(shard_tokens "$f") - 1) / win)); done
        want=$((STEPS * D / win))
        if [ $have -lt $want ]; then
            echo "too little data for $P processes: $have windows of $win tokens per rank, $STEPS steps need $want" >&2
            status=1
        fi
    done
    exit $status
    ;;
*)
    echo "usage: scaling_data.sh make|tokens|check ... (see the header of this script)" >&2; exit 1 ;;
esac
