#!/usr/bin/env bash
# The model descriptor table is written twice, in llmc/model_file.h (the trainer) and in train_gpt2.py
# (the reference): this checks that both make the same model of every descriptor, valid or not (same
# shape and parameter count, same "not a descriptor" answer for paths, same error message, exit 1), and
# that the GPT-2 sizes have the parameter counts GPT-2 has with the padded vocabulary; the GPT-3 widths are
# llm.c's (gpt3_set_hyperparameters), head count = C / head size, maxT 2048.
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
# llm.c's GPT-3 widths (c5140 is in its table but its head size does not divide it), and near misses
descs += [f"gpt3:c{n}" for n in (384, 768, 1024, 1536, 2048, 2560, 4096, 5140, 12288, 0, 512, 5120, 999999)]
descs += ["gpt3:", "gpt3:c", "gpt3:c0768", "gpt3:d12", "gpt3:c768x", "gpt3:C768", "gpt3:c1234567", "gpt3c768",
          "gpt3:c768.bin"]
expected_params = {"d12": 124475904, "d24": 354871296, "d36": 774090240, "d48": 1557686400}
# llm.c's gpt3_set_hyperparameters (f1e2ace): C -> depth, head size; NH = C / head size; maxT 2048
expected_gpt3 = {"gpt3:c384": (6, 6), "gpt3:c768": (12, 12), "gpt3:c1024": (24, 16), "gpt3:c1536": (24, 16),
                 "gpt3:c2048": (24, 16), "gpt3:c2560": (32, 32), "gpt3:c4096": (32, 32), "gpt3:c12288": (96, 96)}
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
        py = (f"{d} L={cfg.num_layers} C={cfg.channels} NH={cfg.num_heads} maxT={cfg.max_seq_len} "
              f"params={ref.num_parameters(cfg)}")
    py += f" rc={rc}"
    if cpp != py:
        bad += 1
        print(f"MISMATCH {d!r}:\n  C++:    {cpp}\n  Python: {py}")
    if d in expected_params and f"params={expected_params[d]} " not in cpp + " ":
        bad += 1
        print(f"WRONG SIZE {d}: {cpp}, want {expected_params[d]:,} parameters")
    if d in expected_gpt3:
        L, NH = expected_gpt3[d]
        want = f"{d} L={L} C={d[6:]} NH={NH} maxT=2048 "
        if not cpp.startswith(want):
            bad += 1
            print(f"WRONG GPT-3 SHAPE {d}: {cpp}, want {want}")
    if d == "gpt3:c5140" and not cpp.endswith("rc=1"):
        bad += 1
        print(f"gpt3:c5140 must be refused (head size 128 does not divide 5140): {cpp}")
valid = sum(1 for d in descs if "params=" in subprocess.run(["build/host/tools/model_config", d],
            capture_output=True, text=True).stdout)
print(f"{len(descs)} descriptors compared ({valid} valid), {bad} mismatches")
sys.exit(1 if bad else 0)
PY
