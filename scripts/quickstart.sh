#!/usr/bin/env bash
# The main job: prepare Tiny Shakespeare (local copy when offline), build, train GPT-2 124M (d12) from
# scratch with val loss and samples, then plot the log to runs/quickstart/loss.png.
# Re-running resumes from the newest checkpoint (-y 1), so an interrupted run loses at most 100 steps.
# Environment: USE_CUDNN=0|1 (default 0), STEPS (default 300), RUN_DIR (default runs/quickstart).
set -euo pipefail
cd "$(dirname "$0")/.."
USE_CUDNN=${USE_CUDNN:-0}
STEPS=${STEPS:-300}
RUN_DIR=${RUN_DIR:-runs/quickstart}

echo "== 1/4 data: Tiny Shakespeare -> dev/data/tinyshakespeare/"
if [ -f dev/data/tinyshakespeare/tiny_shakespeare_train.bin ] && [ -f gpt2_tokenizer.bin ]; then
    echo "already prepared"
else
    bash dev/data/tinyshakespeare.sh
fi

if ! nvidia-smi -L > /dev/null 2>&1; then
    echo "error: no NVIDIA GPU found (nvidia-smi failed). The data is ready in dev/data/tinyshakespeare/;" >&2
    echo "       run this script again on a machine with a CUDA GPU (compute capability 8.0 or newer)." >&2
    exit 1
fi

echo "== 2/4 build (USE_CUDNN=$USE_CUDNN)"
make -j"$(nproc)" train_gpt2cu USE_CUDNN="$USE_CUDNN"

echo "== 3/4 train d12 for $STEPS steps, log and checkpoints in $RUN_DIR"
mkdir -p "$RUN_DIR"
# 8 x 1024 tokens per step; val loss on all 4 val batches every 25 steps; a sample every 100 steps
./train_gpt2cu -e d12 -b 8 -t 1024 -x "$STEPS" -l 6e-4 -u 20 -k cosine -q 0.1 -c 0.1 \
    -v 25 -m 4 -s 100 -g 128 -n 100 -nk 2 -o "$RUN_DIR" -y 1

echo "== 4/4 plot"
python3 dev/plot_log.py -o "$RUN_DIR/loss.png" "$RUN_DIR/main.log"
echo "wrote $RUN_DIR/loss.png"
