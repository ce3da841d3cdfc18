#!/usr/bin/env python3
"""Writes small good and bad trainer inputs into DIR for run_all.sh's "trainer without a GPU" checks
(issue 21): every bad one must be refused with a message naming it before any CUDA call. Standard
library only. Layouts: formats.md (token shard 20240520, model 20240326, run state 20240527, eval
20240522, tokenizer 20240328)."""
import os
import struct
import sys


def header(*slots):
    h = list(slots) + [0] * (256 - len(slots))
    return struct.pack("<256i", *h)


def shard(path, tokens, magic=20240520, count=None):
    with open(path, "wb") as f:
        f.write(header(magic, 1, len(tokens) if count is None else count))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def d1_num_parameters(maxT=1024, Vp=50304, L=1, C=64):
    return Vp * C + maxT * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C


def main(d):
    os.makedirs(d, exist_ok=True)
    good = [(i * 7919) % 50257 for i in range(4096)]
    shard(f"{d}/good_train_000000.bin", good)
    shard(f"{d}/good_val_000000.bin", good[:2048])
    shard(f"{d}/magic.bin", good, magic=20240326)
    shard(f"{d}/lies.bin", good, count=5000)          # header says more tokens than the file holds
    bad = list(good)
    bad[3000] = 50300                                 # one id past the vocabulary, deep in the shard
    shard(f"{d}/badid.bin", bad)
    # a d1 model file (bf16, v5) with its last bytes missing
    n = d1_num_parameters()
    with open(f"{d}/model_trunc.bin", "wb") as f:
        f.write(header(20240326, 5, 1024, 50257, 1, 1, 64, 50304))
        f.write(bytes(2 * n - 10))
    # -y 1: a complete-looking checkpoint of a d1 model whose run state is only a header
    os.makedirs(f"{d}/resume", exist_ok=True)
    with open(f"{d}/resume/model_00000010.bin", "wb") as f:
        f.write(header(20240326, 5, 1024, 50257, 1, 1, 64, 50304))
        f.write(bytes(2 * n))
    with open(f"{d}/resume/state_00000010_00000.bin", "wb") as f:
        f.write(header(20240527, 1, 1, 0, 0, 0, 2))
    open(f"{d}/resume/DONE_00000010", "wb").close()
    # -y 1: what a checkpoint killed while writing leaves (no DONE)
    os.makedirs(f"{d}/leftover", exist_ok=True)
    for name in ("model_00000020.bin.tmp", "state_00000020_00000.bin.tmp", "DONE_00000020.tmp.0a1b2c3d"):
        with open(f"{d}/leftover/{name}", "wb") as f:
            f.write(b"partial")
    # a working directory whose eval file and tokenizer (fixed relative paths) are broken
    os.makedirs(f"{d}/cwd/dev/data/hellaswag", exist_ok=True)
    with open(f"{d}/cwd/dev/data/hellaswag/hellaswag_val.bin", "wb") as f:
        f.write(header(12345, 1, 1))
    with open(f"{d}/cwd/gpt2_tokenizer.bin", "wb") as f:
        f.write(header(20240526, 2, 50257, 50256))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_bad_inputs.py DIR")
    main(sys.argv[1])
