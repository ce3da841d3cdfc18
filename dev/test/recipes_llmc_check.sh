#!/usr/bin/env bash
# The GPT-2 recipes (scripts/run_gpt2_<size>.sh -> scripts/run_gpt2.sh) against llm.c's, flag for flag, with
# no GPU: each recipe runs in its dry run (DRY_RUN=1) on 8 GPUs as llm.c's scripts launch it (mpirun -np 8;
# fake nvidia-smi and mpirun from dev/test/fake_launchers.sh), and every rank's train_gpt2cu command line
# must carry exactly llm.c's flags and values, written out below from llm.c's scripts/run_gpt2_*.sh at
# f1e2ace (numbers compared as numbers), and the build must be llm.c's (USE_CUDNN=1).
# Also: DATASET picks llm.c's other dataset names (and their shard prefix), a bad name is refused.
set -uo pipefail
cd "$(dirname "$0")/../.."
source dev/test/fake_launchers.sh
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fake_launchers "$T/bin"
export PATH="$T/bin:$PATH"
unset CUDA_VISIBLE_DEVICES DATASET DATA_DIR LAUNCHER HOSTS OUT_DIR SIZE
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# llm.c's scripts/run_gpt2_<size>.sh, the train_gpt2cu flags of its mpirun line (-i/-j/-o included)
declare -A LLMC
LLMC[124M]='-i dev/data/fineweb10B/fineweb_train_*.bin -j dev/data/fineweb10B/fineweb_val_*.bin -o log_gpt2_124M
    -v 250 -s 20000 -g 144 -h 1 -b 64 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.0006 -q 0.0 -u 700 -n 5000 -y 1 -e d12'
LLMC[350M]='-i dev/data/fineweb100B/fineweb_train_*.bin -j dev/data/fineweb100B/fineweb_val_*.bin -o log_gpt2_350M
    -v 250 -s 100000 -g 144 -h 1 -b 64 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.0003 -q 0.0 -u 700 -n 2000 -x 60000
    -y 1 -e d24'
LLMC[774M]='-i dev/data/fineweb100B/fineweb_train_*.bin -j dev/data/fineweb100B/fineweb_val_*.bin -o log_gpt2_774M
    -v 250 -s 300000 -g 144 -h 1 -b 32 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.00025 -q 0.0 -u 700 -n 4000
    -x 286102 -y 1 -e d36'
LLMC[1558M]='-i dev/data/edu_fineweb100B/edu_fineweb_train_*.bin -j dev/data/edu_fineweb100B/edu_fineweb_val_*.bin
    -o log_gpt2_1558M -v 250 -s 300000 -g 384 -h 1 -b 16 -t 1024 -d 1048576 -r 0 -z 1 -c 0.1 -k cosine -l 0.0006
    -q 0.1 -u 700 -n 2000 -x 32000 -ge 1 -y 1 -e d48'

# flag -> value of a command line given as words (the last of a repeated flag wins, as in train_gpt2cu)
to_map() {  # MAPNAME WORDS...
    local -n m=$1; shift
    m=()
    while [ $# -ge 2 ]; do m[$1]=$2; shift 2; done
    [ $# -eq 0 ] || m[__odd__]=$1
}
same_value() {  # numbers as numbers, the rest as text
    [ "$1" = "$2" ] && return 0
    [[ "$1" =~ ^-?[0-9.eE+-]+$ && "$2" =~ ^-?[0-9.eE+-]+$ ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'
}

for size in 124M 350M 774M 1558M; do
    out=$(DRY_RUN=1 NUM_GPUS=8 bash scripts/run_gpt2_$size.sh 2>"$T/err")
    lines=$(grep -c '^dry run: rank [0-9]* of 8 (from mpirun): train_gpt2cu ' <<<"$out")
    [ "$lines" = 8 ] || { bad "$size: $lines of 8 ranks launched (llm.c: mpirun -np 8)"; cat "$T/err"; echo "$out" | head -3; continue; }
    [ "$(grep -oE '^dry run: rank [0-9]+' <<<"$out" | sort -u | wc -l)" = 8 ] || bad "$size: ranks not 0..7: $(grep -oE '^dry run: rank [0-9]+' <<<"$out" | tr '\n' ' ')"
    [ "$(sed -E 's/^dry run: rank [0-9]+ of 8 //' <<<"$out" | sort -u | wc -l)" = 1 ] || bad "$size: the ranks' command lines differ"
    grep -q 'would build: make train_gpt2cu USE_CUDNN=1' "$T/err" || bad "$size: not llm.c's build (make train_gpt2cu USE_CUDNN=1): $(grep 'would build' "$T/err")"
    eval "ours=($(sed -nE 's/^dry run: rank 0 of 8 \(from mpirun\): train_gpt2cu //p' <<<"$out"))"
    declare -A O L
    to_map O "${ours[@]}"
    set -f; to_map L ${LLMC[$size]}; set +f
    for f in "${!L[@]}"; do
        if [ -z "${O[$f]+set}" ]; then bad "$size: llm.c passes $f ${L[$f]}, ours does not"
        elif ! same_value "${O[$f]}" "${L[$f]}"; then bad "$size: $f is ${O[$f]} here, ${L[$f]} in llm.c"
        fi
    done
    for f in "${!O[@]}"; do
        [ -n "${L[$f]+set}" ] || bad "$size: ours passes $f ${O[$f]}, llm.c does not"
    done
    unset O L
done

# DATASET: llm.c's four names and their shard prefixes; a directory named like one; anything else refused
for ds in fineweb10B fineweb100B edu_fineweb10B edu_fineweb100B /data/x/edu_fineweb10B; do
    prefix=fineweb; [[ "$ds" == *edu_* ]] && prefix=edu_fineweb
    dir=$ds; [[ "$ds" == */* ]] || dir=dev/data/$ds
    out=$(DRY_RUN=1 NUM_GPUS=1 DATASET=$ds bash scripts/run_gpt2_124M.sh 2>/dev/null)
    grep -qF -- "-i $dir/${prefix}_train_\\*.bin -j $dir/${prefix}_val_\\*.bin " <<<"$out" ||
        bad "DATASET=$ds: expected -i $dir/${prefix}_train_*.bin: $out"
done
err=$(DRY_RUN=1 NUM_GPUS=1 DATASET=fineweb bash scripts/run_gpt2_124M.sh 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "DATASET=fineweb: want fineweb10B, fineweb100B, edu_fineweb10B or edu_fineweb100B" <<<"$err" ||
    bad "DATASET=fineweb not refused clearly (rc $rc): $err"
err=$(DRY_RUN=1 NUM_GPUS=1 DATA_DIR=dev/data/x bash scripts/run_gpt2_124M.sh 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "DATA_DIR is no longer read: set DATASET" <<<"$err" || bad "DATA_DIR not refused (rc $rc): $err"

# one recipe source: the per-size scripts and scripts/multi_node/ only call scripts/run_gpt2.sh
for f in scripts/run_gpt2_*.sh scripts/multi_node/*.sh scripts/multi_node/*.sbatch; do
    grep -q 'run_gpt2.sh' "$f" || bad "$f does not call scripts/run_gpt2.sh"
    grep -qE -- '-l 0\.0|-d [0-9]{6}|train_gpt2cu +\\?$' "$f" && bad "$f has recipe flags or a trainer command line of its own"
done
[ $fail = 0 ] && echo "PASS: the 4 recipes carry llm.c's flags; DATASET; one recipe source"
exit $fail
