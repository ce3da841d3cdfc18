#!/usr/bin/env bash
# The model descriptor table is written twice, in llmc/model_file.h (the trainer) and in train_gpt2.py
# (the reference): this checks that both make the same model of every descriptor, valid or not (same
# shape and parameter count, same "not a descriptor" answer for paths, same error message, exit 1), and
# that the GPT-2 sizes have the parameter counts GPT-2 has with the padded vocabulary.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s build/host/tools/model_config >/dev/null
${PYTHON:-python3} - <<'PY'
import contextlib, io, subprocess, sys
sys.path.insert(0, ".")
import train_gpt2 as ref

descs = [f"d{n}" for n in range(0, 101)] + [f"gpt2:d{n}" for n in (0, 2, 6, 12, 24, 36, 48, 60, 72, 84, 85)]
descs += ["gpt2:", "gpt2:x12", "gpt2:d12.bin", "d1000", "d0012", "d99999999999", "D12", "d12 ",
          "model.bin", "d12.bin", "dir/d12", "d", "", "./d12", "gpt2_124M_bf16.bin",
          "custom:L2,C1600,NH25", "custom:L2,C128,NH2", "custom:L1,C64,NH2", "custom:L3,C100,NH3",
          "custom:L0,C64,NH1", "custom:L2,C64", "custom:L2,C64,NH", "custom:L2,C64,NH2,", "custom:",
          "custom:L2,C70000,NH1", "custom:L2000,C64,NH1", "custom:L2,C64,NH2x", "custom:l2,c64,nh2"]
expected_params = {"d12": 124475904, "d24": 354871296, "d36": 774090240, "d48": 1557686400}
bad = 0
for d in descs:
    p = subprocess.run(["build/host/tools/model_config", d], capture_output=True, text=True)
    cpp = (p.stdout + p.stderr).rstrip() + f" rc={p.returncode}"
    err = io.StringIO()
    rc = 0
    with contextlib.redirect_stderr(err):
        try:
            cfg = ref.config_from_descriptor(d)
        except SystemExit as e:
            cfg, rc = None, e.code
    if rc:
        py = err.getvalue().rstrip()
    elif cfg is None:
        py = f"{d} not-a-descriptor"
    else:
        py = f"{d} L={cfg.num_layers} C={cfg.channels} NH={cfg.num_heads} params={ref.num_parameters(cfg)}"
    py += f" rc={rc}"
    if cpp != py:
        bad += 1
        print(f"MISMATCH {d!r}:\n  C++:    {cpp}\n  Python: {py}")
    if d in expected_params and f"params={expected_params[d]} " not in cpp + " ":
        bad += 1
        print(f"WRONG SIZE {d}: {cpp}, want {expected_params[d]:,} parameters")
valid = sum(1 for d in descs if "params=" in subprocess.run(["build/host/tools/model_config", d],
            capture_output=True, text=True).stdout)
print(f"{len(descs)} descriptors compared ({valid} valid), {bad} mismatches")
sys.exit(1 if bad else 0)
PY
