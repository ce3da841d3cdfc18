#!/usr/bin/env bash
# Installs what building and testing need on a Debian machine with the CUDA toolkit (CI, dev boxes).
# Idempotent: skips what is already there.
set -eu
need_apt=()
# clang + libclang-rt-dev: libFuzzer and the sanitizer runtimes for dev/test/fuzz_check.sh
for pkg in libpcre2-dev nlohmann-json3-dev libgtest-dev libopenmpi-dev openmpi-bin clang libclang-rt-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
PY=${PYTHON:-python3}
missing_py=()
$PY -c "import torch" 2>/dev/null || missing_py+=(torch)
$PY -c "import numpy" 2>/dev/null || missing_py+=(numpy)
$PY -c "import matplotlib" 2>/dev/null || missing_py+=(matplotlib)
$PY -c "import tiktoken" 2>/dev/null || missing_py+=(tiktoken)
$PY -c "import transformers" 2>/dev/null || missing_py+=(transformers)  # dev/hf.py and its checks
$PY -c "import safetensors" 2>/dev/null || missing_py+=(safetensors)
$PY -c "import pyarrow" 2>/dev/null || missing_py+=(pyarrow)                  # dev/data/fineweb.py: parquet
$PY -c "import huggingface_hub" 2>/dev/null || missing_py+=(huggingface_hub)  # dev/data/fineweb.py: download
$PY -m pip show nvidia-cudnn-frontend >/dev/null 2>&1 || missing_py+=(nvidia-cudnn-frontend)
if [ ${#missing_py[@]} -gt 0 ]; then
    echo "pip install ${missing_py[*]}"
    $PY -m pip install -q "${missing_py[@]}" 2>&1 | grep -v "Running pip as the 'root' user" || true
fi
echo "dependencies ready"
