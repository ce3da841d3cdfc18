#!/usr/bin/env bash
# The project's test command (README, CI). On a fresh machine without a GPU it installs what it
# needs, builds every binary in every supported switch combination, runs every test that needs no
# GPU, and ends with "N passed, N failed". GPU tests (test_gpt2cu, dev/cuda checks) run on a GPU
# machine: see README "Tests".
set -u
cd "$(dirname "$0")/../.."
REPO=$(pwd)
LOG_DIR=${LOG_DIR:-build/test-logs}
mkdir -p "$LOG_DIR"
passed=0; failed=0; failed_names=()

# run NAME CMD...: one counted check; output in $LOG_DIR/NAME.log, tail shown on failure
run() {
    local name=$1; shift
    local log="$LOG_DIR/$name.log"
    local t0=$SECONDS
    if "$@" >"$log" 2>&1; then
        passed=$((passed + 1)); echo "PASS  $name ($((SECONDS - t0)) s)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL  $name ($((SECONDS - t0)) s)"; tail -n 40 "$log" | sed 's/^/    /'
    fi
}
# expect_fail NAME PATTERN CMD...: the command must fail and print PATTERN
expect_fail() {
    local name=$1 pattern=$2; shift 2
    local log="$LOG_DIR/$name.log"
    if "$@" >"$log" 2>&1; then
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL  $name (succeeded but should have failed)"
    elif grep -q -- "$pattern" "$log"; then
        passed=$((passed + 1)); echo "PASS  $name (failed as expected)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL  $name (no '$pattern' in output)"; tail -n 20 "$log" | sed 's/^/    /'
    fi
}

echo "== dependencies"
bash dev/test/install_deps.sh || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }
export GPT2_VOCAB_DIR=${GPT2_VOCAB_DIR:-$REPO/dev/data/gpt2}

echo "== host tools and tests"
run host-build make -j2 host
if [ -x build/host/tests/test_model_file ] || ls build/host/tests/test_* >/dev/null 2>&1; then
    # Reference.* tests need files written by train_gpt2.py: reference_check.sh runs them below
    out=$(GTEST_FILTER=-Reference.* bash dev/test/run_host_tests.sh build/host/tests/test_* 2>&1); echo "$out" > "$LOG_DIR/host-tests.log"
    p=$(echo "$out" | sed -nE 's/^host tests: ([0-9]+) passed, ([0-9]+) failed$/\1/p')
    f=$(echo "$out" | sed -nE 's/^host tests: ([0-9]+) passed, ([0-9]+) failed$/\2/p')
    echo "$out" | grep -E "FAILED|host tests:" | sed 's/^/    /'
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
fi
for t in dev/test/*_check.sh dev/test/test_*.sh; do
    [ -f "$t" ] || continue
    run "$(basename "$t" .sh)" bash "$t"
done

echo "== GPU binaries, every supported switch combination (compile and link only: no GPU here)"
# (precision, cuDNN, NO_MULTI_GPU, NO_USE_MPI)
for combo in "BF16 0 0 0" "BF16 0 0 1" "BF16 0 1 1" "FP32 0 0 0" "FP32 0 0 1" "FP32 0 1 1" \
             "BF16 1 0 0" "BF16 1 1 1"; do
    set -- $combo
    name="build-${1}-cudnn${2}-nomultigpu${3}-nompi${4}"
    run "$name" make train_gpt2cu test_gpt2cu PRECISION=$1 USE_CUDNN=$2 NO_MULTI_GPU=$3 NO_USE_MPI=$4 GPU_COMPUTE_CAPABILITY=90
done
# GPU_COMPUTE_CAPABILITY=90 is sm_90a (attention.cuh on wgmma); any other target compiles the mma.sync
# attention path instead: one such build (Ampere), so that path keeps compiling
run build-BF16-sm80 make train_gpt2cu test_gpt2cu PRECISION=BF16 USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=80
# a cuDNN outside the system dirs (CUDNN_HOME): PyTorch's pip wheel, as scripts/bench.sh builds on the GPU
# machine; its own build dir, linked with an rpath to the wheel's lib/
wheel=$(bash dev/cudnn_wheel_dir.sh)
run build-BF16-cudnn1-cudnnhome-wheel make train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1 CUDNN_HOME="$wheel" GPU_COMPUTE_CAPABILITY=90
run cudnnhome-rpath bash -c "[ -n '$wheel' ] && readelf -d train_gpt2cu | grep -E '(RPATH|RUNPATH)' | grep -qF '$wheel/lib' &&
    ls build | grep -q -- '-cudnnhome'"
expect_fail build-FP32-cudnn1-refused "cuDNN fused attention is half precision only" make train_gpt2cu PRECISION=FP32 USE_CUDNN=1
expect_fail build-bad-precision "PRECISION must be BF16 or FP32" make train_gpt2cu PRECISION=FP16
expect_fail build-mpi-without-nccl "needs NCCL" make train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=0
if [ -f dev/cuda/Makefile ]; then
    run build-dev-cuda make -C dev/cuda -j2 all
    # the cuDNN labs link the root build's cudnn_att.o (the BF16 cuDNN builds above made it)
    run build-dev-cuda-cudnn make -C dev/cuda -j2 all USE_CUDNN=1
fi

echo "== trainer without a GPU: clear message, exit 1"
make train_gpt2cu PRECISION=BF16 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 >/dev/null 2>&1
expect_fail trainer-bad-flag "unknown flag -zz" ./train_gpt2cu -zz 1
expect_fail trainer-bad-int "expects an integer" ./train_gpt2cu -b abc
expect_fail trainer-bad-range "flag -ma must be in \[0, 1\], got 2" ./train_gpt2cu -ma 2
expect_fail trainer-no-data "matches no files" ./train_gpt2cu -e d12 -i /nonexistent/shard_*.bin
# -e defaults to llm.c's gpt2_124M_bf16.bin; without it, a message pointing to -e d12 and to dev/hf.py import
expect_fail trainer-default-init-missing "python3 dev/hf.py import gpt2 gpt2_124M.bin" \
    bash -c 'd=$(mktemp -d) && cd "$d" && "$0"; rc=$?; rm -rf "$d"; exit $rc' "$REPO/train_gpt2cu"
expect_fail trainer-steps-below-minus-one "flag -x must be >= -1" ./train_gpt2cu -e d12 -x -2
expect_fail trainer-gpt3-c5140-refused "head size 128, which does not divide it" ./train_gpt2cu -e gpt3:c5140
expect_fail trainer-bad-descriptor "unknown model descriptor; valid: d6, d12, d24, d36, d48" ./train_gpt2cu -e d13
expect_fail trainer-head-size "head size C/NH = 96/3 is not 64" ./train_gpt2cu -e custom:L2,C96,NH3
# every input and flag is checked before the first CUDA call (issue 21): each bad one gets its own
# message here, on a machine without a GPU, instead of a CUDA error
bad=$(cd "$LOG_DIR" && pwd)/bad-inputs
rm -rf "$bad" && python3 dev/test/make_bad_inputs.py "$bad"
tr_ok=(./train_gpt2cu -e custom:L1,C64,NH1 -b 4 -t 64 -i "$bad/good_train_*.bin" -j "$bad/good_val_*.bin")
expect_fail trainer-valid-inputs-no-gpu "no CUDA GPU found" "${tr_ok[@]}"
expect_fail trainer-shard-bad-magic "magic.bin' has bad magic" "${tr_ok[@]}" -i "$bad/magic.bin"
expect_fail trainer-shard-header-lies "lies.bin' is 9216 bytes but its header says 5000 tokens" "${tr_ok[@]}" -i "$bad/lies.bin"
expect_fail trainer-shard-bad-id "-i: token shard '.*badid.bin' has token id 50300 at position 3000" "${tr_ok[@]}" -i "$bad/badid.bin"
expect_fail trainer-val-shard-bad-id "-j: token shard '.*badid.bin' has token id 50300" "${tr_ok[@]}" -j "$bad/badid.bin"
expect_fail trainer-d-not-divisible "-d 100 is not divisible by B\*T\*processes" "${tr_ok[@]}" -d 100
expect_fail trainer-d-negative "flag -d must be a positive number of tokens" "${tr_ok[@]}" -d -5
expect_fail trainer-bad-schedule "unknown learning rate schedule 'bogus'" "${tr_ok[@]}" -k bogus
expect_fail trainer-eval-b3 "-h 1 needs -b to be a multiple of 4" "${tr_ok[@]}" -h 1 -b 3
expect_fail trainer-output-not-writable "-o: cannot write files in '/proc'" "${tr_ok[@]}" -o /proc
expect_fail trainer-bad-checkpoint "model_trunc.bin' is 6671222 bytes but its header says" "${tr_ok[@]}" -e "$bad/model_trunc.bin"
expect_fail trainer-bad-run-state "state_00000010_00000.bin' is truncated" "${tr_ok[@]}" -y 1 -o "$bad/resume"
# ZeRO-1 in llm.c's layout needs every tensor of every layer divisible by the process count (dev/test/
# test_zero_shards.cpp checks the chunk map itself); refused before CUDA, naming the tensor and P
expect_fail trainer-zero1-indivisible "-z 1 with 3 processes .*tensor wpe has 65536 elements, not divisible by the 3 processes" \
    "${tr_ok[@]}" -z 1 -pi tcp -pn 3 -pr 0 -ps 127.0.0.1
expect_fail trainer-pn-too-large "flag -pn must be in \\[1, 65536\\], got 70000" "${tr_ok[@]}" -pi tcp -pn 70000 -pr 0 -ps 127.0.0.1
expect_fail trainer-zero1-divisible-reaches-gpu "no CUDA GPU found" "${tr_ok[@]}" -z 1 -pi tcp -pn 4 -pr 1 -ps 127.0.0.1 -d 1024
expect_fail trainer-overfit-shuffle "-a 1 .* cannot shuffle" "${tr_ok[@]}" -a 1 -sh 1
expect_fail trainer-overfit-unshuffled "no CUDA GPU found" "${tr_ok[@]}" -a 1  # -a 1 turns the default shuffle off
# issue 23: a run state as llm.c writes it (dev/test/llmc_state.py) resumes, shuffled (the default: the
# trainer gets to its first CUDA call) or not (with -sh 0); a shuffle setting or window count (the -i
# shard has 15 windows of 4*64 tokens) other than the run's is refused, naming the difference
llmc_ckpt() {  # DIR llmc_state.py-write-flags...: $bad/resume's model and DONE, llm.c's state file of step 10
    local d=$1; shift
    local n; n=$(cd dev/test && python3 -c "import make_bad_inputs as m; print(m.d1_num_parameters())")
    rm -rf "$d" && mkdir -p "$d" && cp "$bad/resume/model_00000010.bin" "$bad/resume/DONE_00000010" "$d/" &&
        python3 dev/test/llmc_state.py write "$d/state_00000010_00000.bin" --params "$n" --step 10 "$@"
}
llmc_ckpt "$bad/llmc_shuffled" --windows 15 --batches 20
expect_fail trainer-resume-llmc-shuffled "has no checksum (as llm.c writes them)" "${tr_ok[@]}" -y 1 -o "$bad/llmc_shuffled"
run trainer-resume-llmc-shuffled-read grep -q "no CUDA GPU found" "$LOG_DIR/trainer-resume-llmc-shuffled.log"
llmc_ckpt "$bad/llmc_unshuffled" --shuffle 0 --windows 15 --batches 20
expect_fail trainer-resume-llmc-unshuffled "no CUDA GPU found" "${tr_ok[@]}" -y 1 -o "$bad/llmc_unshuffled" -sh 0
expect_fail trainer-resume-llmc-shuffle-differs "written without data shuffling but this run has it on" \
    "${tr_ok[@]}" -y 1 -o "$bad/llmc_unshuffled"
llmc_ckpt "$bad/llmc_windows" --windows 7 --batches 3
expect_fail trainer-resume-llmc-windows-differ "saved window order has 7 windows, but shard '.*good_train_000000.bin' has 15" \
    "${tr_ok[@]}" -y 1 -o "$bad/llmc_windows"
expect_fail trainer-bad-eval-file "eval file 'dev/data/hellaswag/hellaswag_val.bin' has bad magic" \
    bash -c 'cd "$1/cwd" && "$2" -e custom:L1,C64,NH1 -b 4 -t 64 -i "$1/good_train_*.bin" -j "$1/good_val_*.bin" -h 1' _ "$bad" "$REPO/train_gpt2cu"
expect_fail trainer-bad-tokenizer "tokenizer file 'gpt2_tokenizer.bin' has bad magic" \
    bash -c 'cd "$1/cwd" && "$2" -e custom:L1,C64,NH1 -b 4 -t 64 -i "$1/good_train_*.bin" -j "$1/good_val_*.bin"' _ "$bad" "$REPO/train_gpt2cu"
expect_fail trainer-resume-removes-tmp "removed '.*state_00000020_00000.bin.tmp', left by an interrupted checkpoint" \
    "${tr_ok[@]}" -y 1 -o "$bad/leftover"
run trainer-resume-tmp-gone bash -c "[ -z \"\$(ls '$bad/leftover')\" ]"
# a FIFO as any input (-i, -j, -e, the eval file, the tokenizer, a state or DONE file of -y 1) is refused
# by name before the first CUDA call; earlier builds blocked forever in open(), before any message
# (timeout 10: a hang fails the check)
ff="$bad/fifo"; rm -rf "$ff" && mkdir -p "$ff/evalcwd/dev/data/hellaswag" "$ff/tokcwd" "$ff/state" "$ff/done" &&
    mkfifo "$ff/shard.bin" "$ff/model.bin" "$ff/evalcwd/dev/data/hellaswag/hellaswag_val.bin" "$ff/tokcwd/gpt2_tokenizer.bin" &&
    cp "$bad/resume/model_00000010.bin" "$bad/resume/DONE_00000010" "$ff/state/" && mkfifo "$ff/state/state_00000010_00000.bin" &&
    cp "$bad/resume/model_00000010.bin" "$bad/resume/state_00000010_00000.bin" "$ff/done/" && mkfifo "$ff/done/DONE_00000010"
fifo_refused="is a FIFO (named pipe), not a regular file"
expect_fail trainer-fifo-train "shard.bin' $fifo_refused" timeout 10 "${tr_ok[@]}" -i "$ff/shard.bin"
expect_fail trainer-fifo-val "shard.bin' $fifo_refused" timeout 10 "${tr_ok[@]}" -j "$ff/shard.bin"
expect_fail trainer-fifo-init "model.bin' $fifo_refused" timeout 10 "${tr_ok[@]}" -e "$ff/model.bin"
expect_fail trainer-fifo-eval "hellaswag_val.bin' $fifo_refused" timeout 10 \
    bash -c 'cd "$1/evalcwd" && "$2" -e custom:L1,C64,NH1 -b 4 -t 64 -i "$3/good_train_*.bin" -j "$3/good_val_*.bin" -h 1' _ "$ff" "$REPO/train_gpt2cu" "$bad"
expect_fail trainer-fifo-tokenizer "gpt2_tokenizer.bin' $fifo_refused" timeout 10 \
    bash -c 'cd "$1/tokcwd" && "$2" -e custom:L1,C64,NH1 -b 4 -t 64 -i "$3/good_train_*.bin" -j "$3/good_val_*.bin"' _ "$ff" "$REPO/train_gpt2cu" "$bad"
expect_fail trainer-fifo-state "state_00000010_00000.bin' $fifo_refused" timeout 10 "${tr_ok[@]}" -y 1 -o "$ff/state"
expect_fail trainer-fifo-done "DONE_00000010' $fifo_refused" timeout 10 "${tr_ok[@]}" -y 1 -o "$ff/done"
# -y 1 refuses a state file of another step under this step's name (a copy, a rename): it holds its step
st="$bad/state-step"; rm -rf "$st" && mkdir -p "$st" && cp "$bad/resume/model_00000010.bin" "$st/model_00000020.bin" &&
    touch "$st/DONE_00000020" && python3 dev/test/llmc_state.py write "$st/state_00000020_00000.bin" \
    --params "$(cd dev/test && python3 -c "import make_bad_inputs as m; print(m.d1_num_parameters())")" --step 10 --shuffle 0
expect_fail trainer-resume-state-of-another-step "state_00000020_00000.bin' holds step 10, but it is resumed as step 20" \
    "${tr_ok[@]}" -y 1 -o "$st" -sh 0
# writers never follow a link planted at their temporary name (earlier builds wrote OUT.tmp through it)
lk="$bad/links"; rm -rf "$lk" && mkdir -p "$lk/out" && echo victim > "$lk/victim.txt" &&
    ln -s "$lk/victim.txt" "$lk/out/hs.bin.tmp" && ln -s "$lk/victim.txt" "$lk/out/tok.bin.tmp" &&
    echo '{"ctx": "A man", "endings": ["a","b","c","d"], "label": 1}' > "$lk/hs.jsonl"
run prepare-dataset-eval-writes-through-no-link bash -c '"$1/prepare_dataset" eval "$2/hs.jsonl" "$2/out/hs.bin" &&
    [ "$(cat "$2/victim.txt")" = victim ] && [ -f "$2/out/hs.bin" ] && [ ! -L "$2/out/hs.bin" ]' _ "$REPO" "$lk"
run gpt2tok-write-bin-writes-through-no-link bash -c '"$1/gpt2tok" write-bin "$2/out/tok.bin" &&
    [ "$(cat "$2/victim.txt")" = victim ] && [ -f "$2/out/tok.bin" ] && [ ! -L "$2/out/tok.bin" ]' _ "$REPO" "$lk"
# the master-weight block of a state file (llmc/checkpoint.h): a BF16 run with -w 0 refuses one; an FP32
# run, whose parameters are the fp32 weights (llm.c's FP32 build writes the block), reads one with any -w
# (this one only up to the body it lacks)
mb="$bad/master-block"; rm -rf "$mb" && cp -r "$bad/resume" "$mb"
python3 -c 'import sys; sys.path.insert(0, "dev/test"); import make_bad_inputs as m
open(sys.argv[1], "wb").write(m.header(20240527, 1, 1, 0, 1))' "$mb/state_00000010_00000.bin"
expect_fail trainer-master-block-bf16-w0 "state_00000010_00000.bin' holds fp32 master weights but this run keeps none (-w 0)" \
    "${tr_ok[@]}" -y 1 -o "$mb" -w 0
make train_gpt2cu PRECISION=FP32 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 >/dev/null 2>&1 && cp train_gpt2cu "$bad/train_gpt2cu_fp32"
make train_gpt2cu PRECISION=BF16 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 >/dev/null 2>&1
expect_fail trainer-master-block-fp32-w0 "state_00000010_00000.bin' is truncated: 1024 bytes" \
    "$bad/train_gpt2cu_fp32" "${tr_ok[@]:1}" -y 1 -o "$mb" -w 0
# the README's main job: prepares Tiny Shakespeare, then stops with a clear message (no GPU here)
expect_fail quickstart-without-gpu "no NVIDIA GPU found" bash scripts/quickstart.sh
run quickstart-prepared-data test -s dev/data/tinyshakespeare/tiny_shakespeare_train.bin -a -s gpt2_tokenizer.bin
# llm.c's flag values are accepted, up to the first CUDA call (no GPU here): -x 0 (no update),
# -m -1 (whole val split), -lg -1 (off), a GPT-3 descriptor with its maxT 2048
expect_fail trainer-llmc-flag-values "CUDA" ./train_gpt2cu -e gpt3:c768 -t 2048 -x 0 -m -1 -lg -1
# the benchmark's arguments are checked before anything is built or run
expect_fail bench-bad-argument "unknown argument --bogus" bash scripts/bench.sh --bogus
expect_fail bench-bad-cudnn-dir "no include/cudnn.h there" bash scripts/bench.sh --cudnn /nonexistent
expect_fail bench-bad-only "want cudnn or nocudnn" bash scripts/bench.sh --only cudnnn
expect_fail bench-bad-sizes "is not model:B" bash scripts/bench.sh --sizes "d12:64 d48"
expect_fail bench-bad-torch-mode "unknown mode reduce-overhead" bash scripts/bench.sh --torch-modes reduce-overhead
expect_fail bench-bad-timeout "want whole seconds" bash scripts/bench.sh --timeout 5m
expect_fail torch-baseline-bad-model "unknown model descriptor; valid: d6, d12" python3 dev/torch_baseline.py -e d13

echo
[ ${#failed_names[@]} -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
