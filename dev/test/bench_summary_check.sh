#!/usr/bin/env bash
# scripts/bench.sh --summary on a made-up run directory (no GPU): the ratios use the faster torch.compile
# mode that has a result, a program stopped by --timeout (ms nan, no MFU, no step line) keeps its columns
# and gets no ratio, and nothing is built or run.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
# name model B ms peak-MiB MFU first-s, as run_one writes them
cat > "$dir/results.txt" <<'R'
d48-ours-attention.cuh-r0-ge2 d48 8 174.39 44868 46.1 5.4
d48-torch-default d48 8 202.6 47280 40.5 94.1
d48-torch-max-autotune-no-cudagraphs d48 8 nan 46666 - -
R
echo "torch 2.11.0+cu130, GPT-2 d48: L=48 C=1600 NH=25, 1,557,686,400 parameters, B=8" > "$dir/d48-torch-default.log"
out=$(BENCH_DIR="$dir" bash scripts/bench.sh --summary --sizes d48:8)
echo "$out"
fail() { echo "FAIL: $1"; exit 1; }
row() { grep -E "^$1 " <<< "$out" || fail "no row $1"; }
read -r -a ours <<< "$(row d48-ours-attention.cuh-r0-ge2)"
[ "${ours[2]}" = 1557686400 ] || fail "params ${ours[2]} (want 1557686400 from the torch log)"
[ "${ours[3]}" = 174.4 ] || fail "ms ${ours[3]}"
[ "${ours[4]}" = 46975 ] || fail "tokens/s ${ours[4]} (want 8*1024/0.17439 s = 46975)"
[ "${ours[8]}" = 1.162 ] || fail "speed x ${ours[8]} (want 202.6 / 174.39 = 1.162, against the mode with a result)"
[ "${ours[9]}" = 0.95 ] || fail "memory x ${ours[9]} (want 44868 / 47280 = 0.95)"
read -r -a stopped <<< "$(row d48-torch-max-autotune-no-cudagraphs)"
[ "${#stopped[@]}" = 10 ] || fail "the stopped program's row has ${#stopped[@]} columns, want 10"
[ "${stopped[3]}" = nan ] && [ "${stopped[5]}" = "-%" ] && [ "${stopped[7]}" = - ] && [ "${stopped[8]}" = - ] &&
    [ "${stopped[9]}" = - ] || fail "the stopped program's row: ${stopped[*]} (want nan ms, -% MFU, no first s, no ratios)"
grep -q "^PyTorch: 2.11.0+cu130$" <<< "$out" || fail "PyTorch version not taken from the run's log"
[ -z "$(ls "$dir" | grep -v -e results.txt -e d48-torch-default.log)" ] || fail "--summary wrote files: $(ls "$dir")"
BENCH_DIR="$dir/none" bash scripts/bench.sh --summary > "$dir/err" 2>&1 && fail "--summary without results.txt succeeded"
grep -q "no $dir/none/results.txt" "$dir/err" || fail "--summary without results.txt: $(cat "$dir/err")"
echo "PASS"
