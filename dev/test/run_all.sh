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
    # without the Reference.* tests (run_host_tests.sh): reference_check.sh runs them below
    out=$(bash dev/test/run_host_tests.sh build/host/tests/test_* 2>&1); echo "$out" > "$LOG_DIR/host-tests.log"
    p=$(echo "$out" | sed -nE 's/^host tests: ([0-9]+) passed, ([0-9]+) failed$/\1/p')
    f=$(echo "$out" | sed -nE 's/^host tests: ([0-9]+) passed, ([0-9]+) failed$/\2/p')
    echo "$out" | grep -E "FAILED|host tests:" | sed 's/^/    /'
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
fi
# every shell check is dev/test/NAME_check.sh (dev/test/layout_check.sh fails on a script named otherwise)
for t in dev/test/*_check.sh; do
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
    # the GEMM survey takes other model shapes from its environment, checked before any CUDA call
    expect_fail lab-matmul-algos-bad-channels "MATMUL_ALGOS_C=12 must be a multiple of 8" \
        env MATMUL_ALGOS_C=12 dev/cuda/bin/matmul_algos
    expect_fail lab-matmul-algos-bad-layers "MATMUL_ALGOS_L='0' must be a positive number" \
        env MATMUL_ALGOS_L=0 dev/cuda/bin/matmul_algos
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
expect_fail trainer-steps-below-minus-one "flag -x must be in \\[-1, 2147483647\\] (-1: one epoch, 0: no update), got -2" \
    ./train_gpt2cu -e d12 -x -2
expect_fail trainer-gpt3-c5140-refused "head size 128, which does not divide it" ./train_gpt2cu -e gpt3:c5140
expect_fail trainer-bad-descriptor "unknown model descriptor; valid: d6, d12, d24, d36, d48" ./train_gpt2cu -e d13
expect_fail trainer-head-size "head size C/NH = 96/3 is not 64" ./train_gpt2cu -e custom:L2,C96,NH3
# every input and flag is checked before the first CUDA call: each bad one gets its own
# message here, on a machine without a GPU, instead of a CUDA error
bad=$(cd "$LOG_DIR" && pwd)/bad-inputs
rm -rf "$bad" && python3 dev/test/make_bad_inputs.py "$bad"
tr_ok=(./train_gpt2cu -e custom:L1,C64,NH1 -b 4 -t 64 -i "$bad/good_train_*.bin" -j "$bad/good_val_*.bin")
expect_fail trainer-valid-inputs-no-gpu "no CUDA GPU found" "${tr_ok[@]}"
expect_fail trainer-shard-bad-magic "magic.bin' has bad magic" "${tr_ok[@]}" -i "$bad/magic.bin"
expect_fail trainer-shard-header-lies "lies.bin' is 9216 bytes but its header says 5000 tokens" "${tr_ok[@]}" -i "$bad/lies.bin"
expect_fail trainer-shard-bad-id "-i: token shard '.*badid.bin' has token id 50300 at position 3000" "${tr_ok[@]}" -i "$bad/badid.bin"
expect_fail trainer-val-shard-bad-id "-j: token shard '.*badid.bin' has token id 50300" "${tr_ok[@]}" -j "$bad/badid.bin"
# start-up checks the token ids of the first shard each loader reads only (-sh 0: file order), so its
# time does not grow with the data; a later shard's ids are checked when the loader reaches it
# (llmc/dataloader.h; on a GPU: dev/test/gpu/bad_shard_check.sh)
expect_fail trainer-later-shard-bad-id-not-at-start-up "no CUDA GPU found" "${tr_ok[@]}" -i "$bad/late_train_*.bin" -sh 0
expect_fail trainer-later-val-shard-bad-id-not-at-start-up "no CUDA GPU found" "${tr_ok[@]}" -j "$bad/late_val_*.bin"
# a step of more windows than the data holds (32 of 4*64 tokens; -i has 15) goes on into the next
# epoch, as llm.c's loader does
expect_fail trainer-step-longer-than-epoch "no CUDA GPU found" "${tr_ok[@]}" -d 8192
# and -x -1 (one epoch = floor(tokens / -d), as llm.c) is then 0 steps, which the trainer points out
run trainer-step-longer-than-epoch-warns grep -q "warning: -x -1 .* is 0 steps" "$LOG_DIR/trainer-step-longer-than-epoch.log"
expect_fail trainer-d-not-divisible "-d 100 is not divisible by B\*T\*processes" "${tr_ok[@]}" -d 100
expect_fail trainer-d-negative "flag -d must be a positive number of tokens" "${tr_ok[@]}" -d -5
expect_fail trainer-bad-schedule "unknown learning rate schedule 'bogus'" "${tr_ok[@]}" -k bogus
# -h 1 as llm.c: -b >= 4 (rows past the last whole example are padding), and no eval file is a note, not an error
in_dir() { local dir=$1; shift; (cd "$dir" && "$@"); }
tr_abs=("$REPO/train_gpt2cu" "${tr_ok[@]:1}")
expect_fail trainer-eval-b3 "-h 1 needs -b >= 4" in_dir "$bad/evalcwd" "${tr_abs[@]}" -h 1 -b 3
expect_fail trainer-eval-b6 "no CUDA GPU found" in_dir "$bad/evalcwd" "${tr_abs[@]}" -h 1 -b 6
expect_fail trainer-eval-missing "no CUDA GPU found" in_dir "$bad/noevalcwd" "${tr_abs[@]}" -h 1 -b 3
run trainer-eval-missing-note grep -q "^note: -h 1 but no eval file dev/data/hellaswag/hellaswag_val.bin: training without" \
    "$LOG_DIR/trainer-eval-missing.log"
# test_gpt2cu takes the flags llm.c's GPU CI passes it (-r 0, -r 2, -w 0, -b 32; .github/workflows/ci_gpu.yml
# there) and -ge: each gets as far as the model file (none in this directory); a bad value is refused
for f in "-r 0" "-r 2" "-w 0" "-b 32" "-ge 2"; do
    expect_fail "test_gpt2cu-llmc-flag${f// /}" "cannot open 'gpt2_124M" in_dir "$bad/noevalcwd" "$REPO/test_gpt2cu" $f
done
expect_fail test_gpt2cu-bad-recompute "flag -r must be an integer in \[0, 2\], got '3'" "$REPO/test_gpt2cu" -r 3
expect_fail trainer-output-not-writable "-o: cannot write files in '/proc'" "${tr_ok[@]}" -o /proc
expect_fail trainer-bad-checkpoint "model_trunc.bin' is 6671222 bytes but its header says" "${tr_ok[@]}" -e "$bad/model_trunc.bin"
expect_fail trainer-bad-run-state "state_00000010_00000.bin' is truncated" "${tr_ok[@]}" -y 1 -o "$bad/resume"
# ZeRO-1 works at any process count: where P does not divide every tensor (here wpe's 65536 elements by 3)
# the padded layout is used (dev/test/test_zero_shards.cpp checks both layouts); the run reaches the GPU
expect_fail trainer-zero1-indivisible "no CUDA GPU found" "${tr_ok[@]}" -z 1 -pi tcp -pn 3 -pr 0 -ps 127.0.0.1
expect_fail trainer-pn-too-large "flag -pn must be in \\[1, 65536\\], got 70000" "${tr_ok[@]}" -pi tcp -pn 70000 -pr 0 -ps 127.0.0.1
expect_fail trainer-zero1-divisible-reaches-gpu "no CUDA GPU found" "${tr_ok[@]}" -z 1 -pi tcp -pn 4 -pr 1 -ps 127.0.0.1 -d 1024
expect_fail trainer-overfit-shuffle "-a 1 .* cannot shuffle" "${tr_ok[@]}" -a 1 -sh 1
expect_fail trainer-overfit-unshuffled "no CUDA GPU found" "${tr_ok[@]}" -a 1  # -a 1 turns the default shuffle off
# a run state as llm.c writes it (dev/test/llmc_state.py) resumes, shuffled (the default: the
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
# flag values: exactly an integer / a decimal number, inside what the code represents, each refusal
# naming the real problem
expect_fail trainer-int-blank "flag -b expects an integer, got ' 7'" "${tr_ok[@]}" -b " 7"
expect_fail trainer-int-empty "flag -u expects an integer, got ''" "${tr_ok[@]}" -u ""
expect_fail trainer-int-too-large "flag -d must be a positive number of tokens up to 2147483647 (or -1 for B\*T\*processes), got 2147483648" \
    "${tr_ok[@]}" -d 2147483648
expect_fail trainer-int-range-steps "flag -x must be in \[-1, 2147483647\] (-1: one epoch, 0: no update), got 99999999999" \
    "${tr_ok[@]}" -x 99999999999
expect_fail trainer-seed-negative "flag -seed must be in \[0, 9223372036854775807\], got -1" "${tr_ok[@]}" -seed -1
expect_fail trainer-float-trailing-blank "flag -l expects a decimal number (like 3e-4 or 0.1), got '3e-4 '" "${tr_ok[@]}" -l "3e-4 "
expect_fail trainer-float-hex "flag -q expects a decimal number (like 3e-4 or 0.1), got '0x1p-1'" "${tr_ok[@]}" -q 0x1p-1
expect_fail trainer-float-nan "flag -l expects a finite number, got 'nan'" "${tr_ok[@]}" -l nan
expect_fail trainer-float-tiny "flag -l: 1e-50 is below the smallest normal float (1.17549e-38)" "${tr_ok[@]}" -l 1e-50
expect_fail trainer-float-huge "flag -sg: 1e39 is beyond the largest float (3.40282e+38)" "${tr_ok[@]}" -sg 1e39
expect_fail trainer-weight-decay-negative "flag -c must be >= 0 (weight decay), got -1" "${tr_ok[@]}" -c -1
# a negative -sl / -sg is on (llm.c skips every update whose z-score exceeds it), not refused
expect_fail trainer-skip-z-negative-reaches-gpu "no CUDA GPU found" "${tr_ok[@]}" -sl -2 -sg -0.5
# -wt from about 9.22e9 s up overflowed the watchdog's nanosecond deadline: it fired on the first wait
expect_fail trainer-watchdog-too-long "flag -wt must be in \[0, 1000000000\] seconds (0 = no limit), got 1e10" \
    "${tr_ok[@]}" -wt 1e10
expect_fail trainer-watchdog-longest-reaches-gpu "no CUDA GPU found" "${tr_ok[@]}" -wt 1e9
# what -pi tcp / fs need, before the GPU and the id exchange
expect_fail trainer-tcp-without-ps "-pi tcp needs -ps <rank 0's IP address or host name>" "${tr_ok[@]}" -pi tcp
expect_fail trainer-ps-not-an-address "-ps '999.1.1.1' is neither an IPv4 address (like 10.0.0.1), an IPv6 address, nor a host name" \
    "${tr_ok[@]}" -pi tcp -ps 999.1.1.1
expect_fail trainer-fs-without-pf "-pi fs needs -pf <a directory every process sees>" "${tr_ok[@]}" -pi fs
expect_fail trainer-pf-missing "-pf '$bad/no_such_dir': No such file or directory (it must be an existing directory)" \
    "${tr_ok[@]}" -pi fs -pf "$bad/no_such_dir"
expect_fail trainer-ps-ipv6-reaches-gpu "no CUDA GPU found" "${tr_ok[@]}" -pi tcp -ps ::1
# model files and shapes: every header field and every weight checked before the GPU
expect_fail trainer-model-nan "model file '.*model_nan.bin' holds nan at element 7 of layer 0's qkvw (parameter 3285127 of 3335104)" \
    "${tr_ok[@]}" -e "$bad/model_nan.bin"
expect_fail trainer-model-vp-not-multiple-of-8 "model_vp_odd.bin' has a bad header: padded_vocab_size Vp=50260 is not a multiple of 8" \
    "${tr_ok[@]}" -e "$bad/model_vp_odd.bin"
expect_fail trainer-model-vp-huge "model_vp_huge.bin' has a bad header: padded_vocab_size Vp=16777217 is outside \[50257, 16777216\]" \
    "${tr_ok[@]}" -e "$bad/model_vp_huge.bin"
expect_fail trainer-model-no-heads "model_nh0.bin' has a bad header: num_heads NH=0 is outside \[1, 64\]" \
    "${tr_ok[@]}" -e "$bad/model_nh0.bin"
expect_fail trainer-model-is-a-directory "model file '.*model_dir.bin' is a directory, not a regular file" "${tr_ok[@]}" -e "$bad/model_dir.bin"
expect_fail trainer-shard-is-a-directory "token shard '.*train_000000.bin' is a directory, not a regular file" \
    "${tr_ok[@]}" -i "$bad/shard_dir/train_*.bin"
expect_fail trainer-custom-zero-layers "-e custom:L0,C64,NH1: num_layers L=0 is outside \[1, 1024\]" "${tr_ok[@]}" -e custom:L0,C64,NH1
# a model of 1000 token ids: samples start at GPT-2's end-of-text 50256, the eval file holds GPT-2 ids
sv=(-e "$bad/model_v1000.bin" -i "$bad/small_vocab_*.bin" -j "" -b 4 -t 64)
expect_fail trainer-sample-start-outside-vocab "samples start after GPT-2's end-of-text token 50256, outside the model's vocabulary of 1000 ids" \
    ./train_gpt2cu "${sv[@]}"
expect_fail trainer-small-vocab-reaches-gpu "no CUDA GPU found" ./train_gpt2cu "${sv[@]}" -s 0
# with a tokenizer of those 1000 ids in the working directory, samples start after its end-of-text (999)
expect_fail trainer-sample-start-from-tokenizer "no CUDA GPU found" \
    bash -c 'cd "$1/cwd_tok1000" && "$2" -e "$1/model_v1000.bin" -i "$1/small_vocab_*.bin" -j "" -b 4 -t 64' _ "$bad" "$REPO/train_gpt2cu"
expect_fail trainer-eval-ids-outside-vocab "-h 1: eval file 'dev/data/hellaswag/hellaswag_val.bin' holds GPT-2 token ids up to 50256" \
    bash -c 'cd "$1/cwd_eval_ok" && "$2" -e "$1/model_v1000.bin" -i "$1/small_vocab_*.bin" -j "" -b 4 -t 64 -s 0 -h 1' _ "$bad" "$REPO/train_gpt2cu"
# eval files: cut by an odd number of bytes, one example short of its header, a negative longest example
ev_run() { bash -c 'cd "$1" && "$2" -e custom:L1,C64,NH1 -b 4 -t 64 -i "$3/good_train_*.bin" -j "$3/good_val_*.bin" -h 1' _ "$1" "$REPO/train_gpt2cu" "$bad"; }
expect_fail trainer-eval-ok-reaches-gpu "no CUDA GPU found" ev_run "$bad/cwd_eval_ok"
expect_fail trainer-eval-odd-cut "eval file 'dev/data/hellaswag/hellaswag_val.bin' is truncated inside example 1 (the file ends 61 bytes after its header)" \
    ev_run "$bad/cwd_eval_cut"
expect_fail trainer-eval-count "eval file 'dev/data/hellaswag/hellaswag_val.bin' ends after 2 examples, but its header says 3: truncated" \
    ev_run "$bad/cwd_eval_count"
expect_fail trainer-eval-longest-negative "eval file 'dev/data/hellaswag/hellaswag_val.bin' says its longest example is -1 bytes" \
    ev_run "$bad/cwd_eval_longest"
# checkpoints to resume from: values of the state file (llm.c's has no checksum), the DONE marker and
# the files it vouches for, all named before the GPU
n1=$(cd dev/test && python3 -c "import make_bad_inputs as m; print(m.d1_num_parameters())")
state_patch() {  # DIR BYTE-OFFSET-IN-BODY FORMAT VALUE: one value of DIR's state file of step 10
    python3 -c 'import sys; sys.path.insert(0, "dev/test"); import make_bad_inputs as m
m.patch(sys.argv[1], 1024 + int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))' "$1/state_00000010_00000.bin" "$2" "$3" "$4"
}
llmc_ckpt "$bad/state_m_nan" --windows 15 --batches 20 && state_patch "$bad/state_m_nan" 20 f nan
expect_fail trainer-state-m-nan "state_00000010_00000.bin' holds nan in its AdamW m at element 5 of 3335104" \
    "${tr_ok[@]}" -y 1 -o "$bad/state_m_nan"
llmc_ckpt "$bad/state_v_negative" --windows 15 --batches 20 && state_patch "$bad/state_v_negative" $((4 * n1 + 8)) f -1
expect_fail trainer-state-v-negative "state_00000010_00000.bin' holds -1 in its AdamW v at element 2 of 3335104" \
    "${tr_ok[@]}" -y 1 -o "$bad/state_v_negative"
llmc_ckpt "$bad/state_master_inf" --windows 15 --batches 20 && state_patch "$bad/state_master_inf" $((8 * n1)) f inf
expect_fail trainer-state-master-inf "state_00000010_00000.bin' holds inf in its fp32 master weights at element 0" \
    "${tr_ok[@]}" -y 1 -o "$bad/state_master_inf"
llmc_ckpt "$bad/done_dir" --windows 15 --batches 20 && rm "$bad/done_dir/DONE_00000010" && mkdir "$bad/done_dir/DONE_00000010"
expect_fail trainer-done-is-a-directory "DONE_00000010' is a directory, not the empty file that marks the checkpoint of step 10 complete" \
    "${tr_ok[@]}" -y 1 -o "$bad/done_dir"
llmc_ckpt "$bad/done_link" --windows 15 --batches 20 && rm "$bad/done_link/DONE_00000010" && ln -s "$bad/gone" "$bad/done_link/DONE_00000010"
expect_fail trainer-done-dangling-link "DONE_00000010' is a link to '.*gone', which does not exist" "${tr_ok[@]}" -y 1 -o "$bad/done_link"
llmc_ckpt "$bad/done_no_model" --windows 15 --batches 20 && rm "$bad/done_no_model/model_00000010.bin"
expect_fail trainer-done-without-model "the checkpoint of step 10 is incomplete: '.*DONE_00000010' marks it complete, but '.*model_00000010.bin' is missing" \
    ./train_gpt2cu -b 4 -t 64 -i "$bad/good_train_*.bin" -j "$bad/good_val_*.bin" -y 1 -o "$bad/done_no_model"
llmc_ckpt "$bad/done_no_state" --windows 15 --batches 20 && rm "$bad/done_no_state/state_00000010_00000.bin"
expect_fail trainer-done-without-state "the checkpoint of step 10 is incomplete: .* but '.*state_00000010_00000.bin' is missing" \
    "${tr_ok[@]}" -y 1 -o "$bad/done_no_state"
# an unshuffled state file as llm.c writes it records only its position: one beyond this run's data is
# refused (here -b 8 halves the windows), one inside it resumes with a warning saying what is unchecked
expect_fail trainer-resume-llmc-unshuffled-beyond "saved data position is window 5 of shard '.*good_train_000000.bin', which has only 3 windows" \
    "${tr_ok[@]}" -y 1 -o "$bad/llmc_unshuffled" -sh 0 -b 16
run trainer-resume-llmc-unshuffled-warns grep -q "records only its data position, shard 0 window 5, not the shard count or windows" \
    "$LOG_DIR/trainer-resume-llmc-unshuffled.log"
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
