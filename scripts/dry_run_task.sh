#!/usr/bin/env bash
# Stands in for train_gpt2cu when scripts/run_gpt2.sh runs with DRY_RUN=1: prints one line, the rank and
# process count this process would train as, then its command line (each argument quoted for a shell):
#   dry run: rank R of N (from mpirun | from -pr/-pn): train_gpt2cu ARGS...
# As train_gpt2cu takes them: with -pi mpi (the default) from mpirun's environment (OMPI_COMM_WORLD_RANK /
# _SIZE, else PMI_RANK / PMI_SIZE, else rank 0 of 1), with -pi tcp / fs from -pr / -pn.
args=("$@")
pi=mpi; pr=0; pn=1
for ((i = 0; i + 1 < ${#args[@]}; i += 2)); do
    case "${args[i]}" in -pi) pi=${args[i+1]};; -pr) pr=${args[i+1]};; -pn) pn=${args[i+1]};; esac
done
if [ "$pi" = mpi ]; then
    rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; size=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}; from=mpirun
else
    rank=$pr; size=$pn; from=-pr/-pn
fi
line="dry run: rank $rank of $size (from $from): train_gpt2cu"
for a in "$@"; do line+=" $(printf '%q' "$a")"; done
echo "$line"
