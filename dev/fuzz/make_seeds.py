#!/usr/bin/env python3
"""Writes a small seed corpus per reader into DIR/<harness>/ (one or two valid files each, laid out as
docs/formats.md describes), for dev/fuzz/fuzz_check.sh. Standard library only."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
import llmc_state  # noqa: E402  (llm.c's MT19937 state layout)


def header(*slots):
    return struct.pack("<256i", *(list(slots) + [0] * (256 - len(slots))))


def put(d, name, data):
    os.makedirs(os.path.dirname(f"{d}/{name}"), exist_ok=True)
    with open(f"{d}/{name}", "wb") as f:
        f.write(data)


def main(d):
    toks = [(i * 31) % 50257 for i in range(40)]
    put(d, "token_shard/valid.bin", header(20240520, 1, len(toks)) + struct.pack(f"<{len(toks)}H", *toks))
    # tiny model: maxT 8, V 10, L 1, NH 1, C 4, Vp 16 -> 16*4 + 8*4 + 4+4 + 48+12 + 16+4 + 4+4 + 64+16 + 64+4 + 4+4
    n = 16 * 4 + 8 * 4 + 4 + 4 + 48 + 12 + 16 + 4 + 4 + 4 + 64 + 16 + 64 + 4 + 4 + 4
    put(d, "model_file/fp32.bin", header(20240326, 3, 8, 10, 1, 1, 4, 16) + struct.pack(f"<{n}f", *[0.01 * i for i in range(n)]))
    put(d, "model_file/bf16.bin", header(20240326, 5, 8, 10, 1, 1, 4, 16) + bytes(2 * n))
    # debug state v2 (llm.c) for B=1, T=2 on that model: x, y, logits (B*T*V), loss, grads
    put(d, "debug_state/v2.bin", header(20240327, 2, 1, 2) + struct.pack("<4i", 1, 2, 2, 3)
        + struct.pack("<20f", *[0.0] * 20) + struct.pack("<f", 2.3) + bytes(4 * n))
    # run state as llm.c writes it (no checksum), 16-float m and v, no master weights
    put(d, "run_state/llmc.bin", header(20240527, 1, 1, 0, 0, 0, 0, 0, 0, 0, 5) + bytes(128))
    # ... shuffled, at shard position 1 window 2, for the harness's two 4-window shards: u64 n, shard
    # order, u64 m, window order, raw MT19937 state (dev/test/llmc_state.py writes it as llm.c does)
    h = bytearray(header(20240527, 1, 1, 0, 0, 1, 0, 0, 0, 0, 5))
    struct.pack_into("<QQ", h, 30 * 4, 1, 2)
    put(d, "run_state/llmc_shuffled.bin", bytes(h) + bytes(128) + struct.pack("<Q2iQ4i", 2, 1, 0, 4, 2, 0, 3, 1)
        + llmc_state.Mt(42).pack())
    # one eval example: context 2 tokens, 4 completions of 1 token
    ex = [65535, 0, 0, 1, 4, 2, 10, 11, 1, 12, 1, 13, 1, 14, 1, 15]
    ex[1] = 2 * len(ex)
    put(d, "eval_file/one.bin", header(20240522, 1, 1, 2 * len(ex)) + struct.pack(f"<{len(ex)}H", *ex))
    tok = header(20240328, 2, 3, 2) + b"".join(bytes([len(t)]) + t for t in (b"a", b"\xc3\xa9", b"<|endoftext|>"))
    put(d, "tokenizer_file/three.bin", tok)
    put(d, "bpe/text.txt", "Hello world! It's 2024: caf\u00e9 \U0001F600  spaces\n\ttabs".encode())
    put(d, "bpe/bytes.bin", bytes(range(256)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py DIR")
    main(sys.argv[1])
