#!/usr/bin/env bash
# Prints the directory of the cuDNN pip wheel (nvidia-cudnn-cu*, the one PyTorch loads) when it has
# lib/libcudnn.so.9 and include/cudnn.h, i.e. when it can be make's CUDNN_HOME; prints nothing otherwise.
# Used by scripts/bench.sh (--cudnn torch) and dev/test/run_all.sh (the wheel build).
python3 -c "import nvidia.cudnn, os; d = list(nvidia.cudnn.__path__)[0]; print(d if os.path.exists(d + '/lib/libcudnn.so.9') and os.path.exists(d + '/include/cudnn.h') else '')" 2>/dev/null
