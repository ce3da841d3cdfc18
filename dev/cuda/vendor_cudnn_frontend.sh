#!/usr/bin/env bash
# Copies the cuDNN frontend headers (header-only C++ library) from the pip package nvidia-cudnn-frontend
# into third_party/cudnn-frontend/include, the first place mk/cudnn.mk looks. For machines without
# internet (the GPU machine): vendor here, then take third_party/cudnn-frontend along (keep it git-ignored).
#   usage: dev/cuda/vendor_cudnn_frontend.sh        (PYTHON=python3 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DEST=third_party/cudnn-frontend/include

# Only the package's own files under include/: pip puts them in site-packages/include, a folder other
# packages may share.
"$PYTHON" - "$DEST" <<'EOF'
import importlib.metadata as metadata, os, shutil, sys
dest = sys.argv[1]
try:
    dist = metadata.distribution("nvidia-cudnn-frontend")
except metadata.PackageNotFoundError:
    sys.exit("error: pip package nvidia-cudnn-frontend is not installed: python3 -m pip install nvidia-cudnn-frontend")
headers = [f for f in (dist.files or []) if str(f).startswith("include/")]
if not any(str(f) == "include/cudnn_frontend.h" for f in headers):
    sys.exit("error: nvidia-cudnn-frontend %s has no include/cudnn_frontend.h" % dist.version)
shutil.rmtree(dest, ignore_errors=True)
for f in headers:
    target = os.path.join(dest, str(f)[len("include/"):])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(f.locate(), target)
print("copied cuDNN frontend %s (%d files) to %s" % (dist.version, len(headers), dest))
EOF
