#!/usr/bin/env python3
"""Writes small good and bad trainer inputs into DIR for run_all.sh's "trainer without a GPU" checks:
every bad one must be refused with a message naming it before any CUDA call. Standard
library only. Layouts: docs/formats.md (token shard 20240520, model 20240326, run state 20240527, eval
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


def d1_model(path, V=50257, Vp=50304, nh=1, body=None):
    """A d1 model file (bf16, v5: L1 C64, maxT 1024), zero weights unless body is given."""
    with open(path, "wb") as f:
        f.write(header(20240326, 5, 1024, V, 1, nh, 64, Vp))
        f.write(bytes(2 * d1_num_parameters(Vp=Vp)) if body is None else body)


def patch(path, offset, fmt, value):
    """Overwrites one little-endian value (struct format fmt) at byte offset of path."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack("<" + fmt, value))


def eval_example(i, label=1):
    """One multiple-choice example (index i): a context of 2 tokens, 4 completions of 1 token."""
    e = [65535, 0, i, label, 4, 2, 10, 11, 1, 12, 1, 13, 1, 14, 1, 15]
    e[1] = 2 * len(e)
    return e


def eval_file(path, n_header, n_examples=2, longest=32, cut=0):
    """An eval file of n_examples examples whose header says n_header, its last `cut` bytes missing."""
    body = [w for i in range(n_examples) for w in eval_example(i)]
    data = header(20240522, 1, n_header, longest) + struct.pack("<%dH" % len(body), *body)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut])


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
    # the bad id in the second shard: start-up checks only the first one each loader reads
    shard(f"{d}/late_train_000000.bin", good)
    shard(f"{d}/late_train_000001.bin", bad)
    shard(f"{d}/late_val_000000.bin", good[:2048])
    shard(f"{d}/late_val_000001.bin", bad)
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
    # a working directory with a good eval file of 3 examples (each fits -t 64), and one without any
    os.makedirs(f"{d}/evalcwd/dev/data/hellaswag", exist_ok=True)
    examples = []
    for i in range(3):
        ex = [65535, 0, i, i % 4, 4, 3, 10 + i, 20 + i, 30 + i]
        for c in range(4):
            ex += [2, 100 * (c + 1) + i, 100 * (c + 1) + 50 + i]
        ex[1] = 2 * len(ex)
        examples.append(ex)
    with open(f"{d}/evalcwd/dev/data/hellaswag/hellaswag_val.bin", "wb") as f:
        f.write(header(20240522, 1, len(examples), max(2 * len(e) for e in examples)))
        for ex in examples:
            f.write(struct.pack("<%dH" % len(ex), *ex))
    os.makedirs(f"{d}/noevalcwd", exist_ok=True)
    # model files that pass the header and size checks but not the model's: a NaN weight (layer 0's
    # qkvw, element 7), a padded vocabulary that is no multiple of 8, 2^24 + 1 or no heads; a directory
    d1_model(f"{d}/model_nan.bin")
    patch(f"{d}/model_nan.bin", 1024 + 2 * (50304 * 64 + 1024 * 64 + 2 * 64 + 7), "H", 0x7FC0)
    d1_model(f"{d}/model_vp_odd.bin", Vp=50260)
    d1_model(f"{d}/model_vp_huge.bin", Vp=(1 << 24) + 1, body=b"")
    d1_model(f"{d}/model_nh0.bin", nh=0, body=b"")
    os.makedirs(f"{d}/model_dir.bin", exist_ok=True)
    os.makedirs(f"{d}/shard_dir/train_000000.bin", exist_ok=True)
    # a model of 1000 token ids (Vp 1024) and a shard it can read: GPT-2's end-of-text (50256), where
    # samples start, and the eval file's ids are outside its vocabulary
    d1_model(f"{d}/model_v1000.bin", V=1000, Vp=1024)
    shard(f"{d}/small_vocab_000000.bin", [(i * 7) % 1000 for i in range(4096)])
    # and a working directory whose tokenizer (version 2) has those 1000 ids, end-of-text 999: samples
    # start there (the tokenizer's end-of-text, as llm.c's), inside the model's vocabulary
    os.makedirs(f"{d}/cwd_tok1000", exist_ok=True)
    with open(f"{d}/cwd_tok1000/gpt2_tokenizer.bin", "wb") as f:
        f.write(header(20240328, 2, 1000, 999))
        for i in range(1000):
            name = b"<%d>" % i
            f.write(bytes([len(name)]) + name)
    # eval files (the trainer reads dev/data/hellaswag/hellaswag_val.bin of its working directory): one
    # fine, one cut by an odd number of bytes, one whose header counts an example it lacks, one whose
    # header says its longest example is -1 bytes
    ev = "dev/data/hellaswag/hellaswag_val.bin"
    eval_file(f"{d}/cwd_eval_ok/{ev}", 2)
    eval_file(f"{d}/cwd_eval_cut/{ev}", 2, cut=3)
    eval_file(f"{d}/cwd_eval_count/{ev}", 3)
    eval_file(f"{d}/cwd_eval_longest/{ev}", 2, longest=-1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_bad_inputs.py DIR")
    main(sys.argv[1])
