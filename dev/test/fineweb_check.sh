#!/usr/bin/env bash
# dev/data/fineweb.py against llm.c's fineweb.py procedure on small parquet files (dev/test/fineweb_check.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s prepare_dataset
python3 dev/test/fineweb_check.py
