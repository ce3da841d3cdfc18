"""
PyTorch reference for dev/cuda/attention_crosscheck.cu: reads its --dump files (DIR/shape_<i>.bin, layout
in that file's top comment), recomputes causal self-attention from the same bf16 qkv and dout, and compares
both dumped implementations (attention.cuh, cudnn) against it: out, lse, dq, dk, dv.

Reference: q, k, v (B, NH, T, HS) widened exactly from bf16 to fp32. T <= 256: the explicit formula
softmax(q k^T / sqrt(HS) + causal mask) v in float64 (autograd for the backward); larger T:
torch.nn.functional.scaled_dot_product_attention(is_causal=True) in fp32 with TF32 off, and lse as the
fp32 logsumexp of the masked scaled scores. The backward uses the dumped dout.

Prints one row per (shape, impl, tensor): rel L2 = ||impl - ref|| / ||ref|| and max abs difference.
Exit 1 if any rel L2 >= 1e-2 or any value is not finite, or if a file is missing or malformed.

Usage: python3 dev/cuda/attention_crosscheck.py DIR     (torch on CUDA; falls back to the CPU)
"""
import glob
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

MAGIC = 20240611
VERSION = 1
HEADER_INTS = 256
IMPL_NAMES = ["attention.cuh", "cudnn"]
REL_TOL = 1e-2
EXACT_MAX_T = 256  # up to here the reference is the explicit formula in float64


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_dump(path):
    """Returns (B, T, NH, HS), qkv fp32 (B,T,3,NH,HS), dout fp32 (B,T,NH,HS), [per impl: (out, lse, dinp)]."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_INTS * 4), dtype="<i4")
        if header.size != HEADER_INTS:
            fail(f"{path}: shorter than its {HEADER_INTS * 4}-byte header")
        if header[0] != MAGIC:
            fail(f"{path}: magic {header[0]}, expected {MAGIC} (not an attention_crosscheck dump)")
        if header[1] != VERSION:
            fail(f"{path}: version {header[1]}, this script reads version {VERSION}")
        B, T, NH, HS, n_impl = (int(x) for x in header[2:7])
        if min(B, T, NH, HS) <= 0 or n_impl != len(IMPL_NAMES):
            fail(f"{path}: bad header B={B} T={T} NH={NH} HS={HS} implementations={n_impl}")
        n_qkv, n_out, n_lse = B * T * 3 * NH * HS, B * T * NH * HS, B * NH * T
        expected = HEADER_INTS * 4 + 2 * (n_qkv + n_out) + n_impl * 4 * (n_out + n_lse + n_qkv)
        if size != expected:
            fail(f"{path}: {size} bytes, expected {expected} for B={B} T={T} NH={NH} HS={HS} (truncated?)")

        def take(n, dtype):
            return np.frombuffer(f.read(n * np.dtype(dtype).itemsize), dtype=dtype)

        qkv = bf16_bits_to_f32(take(n_qkv, "<u2")).reshape(B, T, 3, NH, HS)
        dout = bf16_bits_to_f32(take(n_out, "<u2")).reshape(B, T, NH, HS)
        impls = []
        for _ in range(n_impl):
            out = take(n_out, "<f4").reshape(B, T, NH, HS)
            lse = take(n_lse, "<f4").reshape(B, NH, T)
            dinp = take(n_qkv, "<f4").reshape(B, T, 3, NH, HS)
            impls.append((out, lse, dinp))
    return (B, T, NH, HS), qkv, dout, impls


def reference(qkv, dout, device):
    """out (B,T,NH,HS), lse (B,NH,T), dq/dk/dv (B,T,NH,HS), as float64 numpy arrays."""
    B, T, _, NH, HS = qkv.shape
    exact = T <= EXACT_MAX_T
    dtype = torch.float64 if exact else torch.float32
    scale = 1.0 / math.sqrt(HS)
    x = torch.from_numpy(qkv.copy()).to(device=device, dtype=dtype).permute(2, 0, 3, 1, 4)  # (3, B, NH, T, HS)
    q, k, v = (x[i].contiguous().requires_grad_(True) for i in range(3))
    go = torch.from_numpy(dout.copy()).to(device=device, dtype=dtype).permute(0, 2, 1, 3).contiguous()
    mask = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    if exact:
        scores = (q @ k.transpose(-1, -2)) * scale
        scores = scores.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        out = torch.softmax(scores, dim=-1) @ v
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with torch.no_grad():  # per batch element: the (NH, T, T) scores only
            lse = torch.stack([torch.logsumexp((q[b] @ k[b].transpose(-1, -2) * scale).masked_fill(~mask, float("-inf")),
                                               dim=-1) for b in range(B)])
    out.backward(go)

    def bthd(t):  # (B, NH, T, HS) -> (B, T, NH, HS)
        return t.detach().permute(0, 2, 1, 3).double().cpu().numpy()

    return dict(out=bthd(out), lse=lse.detach().double().cpu().numpy(), dq=bthd(q.grad), dk=bthd(k.grad),
                dv=bthd(v.grad)), ("float64 explicit" if exact else "fp32 sdpa, TF32 off")


def compare(got, ref):
    got = got.astype(np.float64)
    finite = bool(np.isfinite(got).all() and np.isfinite(ref).all())
    if not finite:
        return float("nan"), float("nan"), False
    diff = got - ref
    rel = float(np.linalg.norm(diff) / max(np.linalg.norm(ref), 1e-30))
    return rel, float(np.abs(diff).max()), rel < REL_TOL


def main():
    if len(sys.argv) != 2:
        fail("usage: python3 dev/cuda/attention_crosscheck.py DIR   (DIR = the --dump dir of attention_crosscheck)")
    directory = sys.argv[1]
    if not os.path.isdir(directory):
        fail(f"'{directory}' is not a directory (run dev/cuda/bin/attention_crosscheck --dump {directory} first)")
    indexed = [(m, p) for p in glob.glob(os.path.join(directory, "shape_*.bin"))
               if (m := re.fullmatch(r"shape_(\d+)\.bin", os.path.basename(p)))]
    paths = [p for m, p in sorted(indexed, key=lambda mp: int(mp[0].group(1)))]
    if not paths:
        fail(f"no shape_<i>.bin files in '{directory}'")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} on {device}"
          + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else "") + f", {len(paths)} file(s)")
    print(f"{'shape (B,T,NH,HS)':<20} {'impl':<14} {'tensor':<6} {'rel L2':>10} {'max abs':>10}")
    failures = 0
    rows = 0
    for path in paths:
        (B, T, NH, HS), qkv, dout, impls = read_dump(path)
        ref, kind = reference(qkv, dout, device)
        shape = f"({B},{T},{NH},{HS})"
        for name, (out, lse, dinp) in zip(IMPL_NAMES, impls):
            got = dict(out=out, lse=lse, dq=dinp[:, :, 0], dk=dinp[:, :, 1], dv=dinp[:, :, 2])
            for tensor in ("out", "lse", "dq", "dk", "dv"):
                rel, max_abs, ok = compare(got[tensor], ref[tensor])
                failures += not ok
                rows += 1
                status = "ok" if ok else ("FAIL (not finite)" if math.isnan(rel) else "FAIL")
                print(f"{shape:<20} {name:<14} {tensor:<6} {rel:>10.3e} {max_abs:>10.3e}  {status}")
        print(f"{'':<20} reference: {kind}  ({os.path.basename(path)})")
    print(f"{'FAIL' if failures else 'PASS'}: {failures} of {rows} comparisons failed (rel L2 < {REL_TOL:g} vs torch)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
