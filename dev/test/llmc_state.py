#!/usr/bin/env python3
"""llm.c's run state file (state_%08d_%05d.bin), as llm.c's own code writes and reads it, to check that
gpt2cu and llm.c read each other's files. Standard library only. Source of every layout fact:
karpathy/llm.c at f1e2ace, train_gpt2.cu save_state/load_state and llmc/dataloader.h, llmc/rand.h.

  llmc_state.py write OUT --params N [--procs P] [--rank R] [--master 0|1] [--step S]
                          [--shuffle 0|1] [--windows W0,W1,...] [--batches K]
      writes OUT as llm.c's save_state would after K next_batch calls of its train loader on shards
      of W0, W1, ... windows (file order) at rank R of P: the loader is simulated here (MT19937 seeded
      with 42 + R; the generator is Python's own random module, set to llm.c's seeding). m[i] = 0.5i,
      v[i] = 0.001i, master[i] = -2i (float32, N each). seed_ of the raw mt19937_state is written as
      0xA5A5A5A5A5A5A5A5: llm.c never sets it, so its files hold whatever was in memory.
  llmc_state.py read FILE --params N [--procs P] [--rank R] [--master 0|1] [--windows W0,...]
                         [--continue K]
      consumes FILE exactly as llm.c's load_state does for a run with those settings and prints what
      it read as key=value lines, then bytes_read and file_size. Exit 1 where llm.c would fail: an
      assert (magic, version, process count, rank, shard count, window count: llm.c compares the
      saved window count with the first shard of its first epoch, given --windows) or a read past the
      end of the file. With --windows and --continue K it also prints the K (shard, window) pairs
      llm.c's loader reads next (next=s:w,...).
"""
import argparse
import random
import struct
import sys

MT_N = 624
MATRIX_A = 0x9908B0DF
MT_STRUCT = "<QiI624I2I"  # seed_, left_, next_, state_[624], MATRIX_A[2]: 2,520 bytes, no padding
assert struct.calcsize(MT_STRUCT) == 2520


class Mt:
    """llm.c's mt19937_state: Python's random module draws, this class keeps llm.c's left_/next_."""

    def __init__(self, seed):
        s = [seed & 0xFFFFFFFF]
        for i in range(1, MT_N):
            s.append((1812433253 * (s[-1] ^ (s[-1] >> 30)) + i) & 0xFFFFFFFF)
        self.fresh = True  # manual_seed leaves left_ = 1, next_ = 0 and the array untwisted
        self.r = random.Random()
        self.r.setstate((3, tuple(s) + (MT_N,), None))

    def u32(self):
        self.fresh = False
        return self.r.getrandbits(32)

    def pack(self, seed_field=0xA5A5A5A5A5A5A5A5):
        words = self.r.getstate()[1]
        pos = words[MT_N]
        left, nxt = (1, 0) if self.fresh else (MT_N + 1 - pos, pos)
        return struct.pack(MT_STRUCT, seed_field, left, nxt, *words[:MT_N], 0, MATRIX_A)

    @staticmethod
    def unpack(raw):
        f = struct.unpack(MT_STRUCT, raw)
        left, nxt, words, ma = f[1], f[2], list(f[3:3 + MT_N]), f[3 + MT_N:]
        if ma != (0, MATRIX_A):
            sys.exit("mt19937 state: MATRIX_A is not {0, 0x9908b0df}")
        m = Mt(0)
        if (left, nxt) == (1, 0):
            pos = MT_N
        elif 1 <= left <= MT_N and left + nxt == MT_N + 1:
            pos, m.fresh = nxt, False
        else:
            sys.exit(f"mt19937 state: left_ {left} next_ {nxt} is no state llm.c's generator reaches")
        m.r.setstate((3, tuple(words) + (pos,), None))
        return m, left, nxt


def permute(a, mt):
    """llm.c's random_permutation: in place, Fisher-Yates from the end, j = randint32 % (i + 1)."""
    for i in range(len(a) - 1, 0, -1):
        j = mt.u32() % (i + 1)
        a[i], a[j] = a[j], a[i]


class Loader:
    """llm.c's train DataLoader reduced to its indices (windows[s]: windows of shard s)."""

    def __init__(self, windows, rank, shuffle):
        self.windows, self.shuffle = windows, shuffle
        self.mt = Mt(42 + rank) if shuffle else None
        self.shard_indices = list(range(len(windows)))
        self.intra = []
        self.reset()

    def load(self):  # dataloader_load_shard_ then prepare_intra_shard_indices_
        self.num_samples = self.windows[self.shard_indices[self.shard] if self.shuffle else self.shard]
        if self.shuffle:
            self.intra = list(range(self.num_samples))
            permute(self.intra, self.mt)

    def reset(self):
        self.shard, self.sample = 0, 0
        if self.shuffle:
            permute(self.shard_indices, self.mt)
        self.load()

    def next(self):
        if self.sample >= self.num_samples:
            if self.shard == len(self.windows) - 1:
                self.reset()
            else:
                self.shard, self.sample = self.shard + 1, 0
                self.load()
        s = self.shard_indices[self.shard] if self.shuffle else self.shard
        w = self.intra[self.sample] if self.shuffle else self.sample
        self.sample += 1
        return s, w


def windows_arg(text):
    return [int(x) for x in text.split(",")] if text else []


def write(a):
    windows = windows_arg(a.windows)
    if a.shuffle and not windows:
        sys.exit("--shuffle 1 needs --windows")
    loader = Loader(windows, a.rank, a.shuffle) if windows else None
    for _ in range(a.batches):
        loader.next()
    h = [0] * 256
    h[0:6] = [20240527, 1, a.procs, a.rank, a.master, a.shuffle]
    h[10] = a.step
    out = bytearray(struct.pack("<256i", *h))
    struct.pack_into("<QQ", out, 20 * 4, 0x1122334455667788, 0x99AABBCCDDEEFF00)  # model rng, last update
    if loader:
        struct.pack_into("<QQ", out, 30 * 4, loader.shard, loader.sample)
    n = a.params
    out += struct.pack(f"<{n}f", *[0.5 * i for i in range(n)])
    thousandth = struct.unpack("<f", struct.pack("<f", 0.001))[0]  # the float32 1e-3f of the tests
    out += struct.pack(f"<{n}f", *[thousandth * i for i in range(n)])
    if a.master:
        out += struct.pack(f"<{n}f", *[-2.0 * i for i in range(n)])
    if a.shuffle:
        out += struct.pack("<Q", len(windows)) + struct.pack(f"<{len(windows)}i", *loader.shard_indices)
        out += struct.pack("<Q", loader.num_samples) + struct.pack(f"<{len(loader.intra)}i", *loader.intra)
        out += loader.mt.pack()
    with open(a.file, "wb") as f:
        f.write(out)


def read(a):
    data = open(a.file, "rb").read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            sys.exit(f"llm.c's load_state reads past the end: {n} bytes at offset {pos} of {len(data)}")
        pos += n
        return data[pos - n:pos]

    h = struct.unpack("<256i", take(1024))
    for slot, want, what in ((0, 20240527, "magic"), (1, 1, "version"), (2, a.procs, "num_processes"), (3, a.rank, "process_rank")):
        if h[slot] != want:
            sys.exit(f"llm.c's assert fails: {what} {h[slot]} != {want}")
    q = lambda slot: struct.unpack_from("<Q", data, slot * 4)[0]
    file_master, shuffle = h[4], h[5]
    print(f"step={h[10]}\nuse_master_weights={file_master}\nshould_shuffle={shuffle}")
    print(f"rng_state={q(20)}\nrng_state_last_update={q(22)}\ncurrent_shard_idx={q(30)}\ncurrent_sample_idx={q(32)}")
    if file_master == 0 and a.master:
        sys.exit("llm.c: Master weights requested, but not present in state file.")
    n = a.params
    for name in ("m", "v") + (("master",) if a.master else ()):  # llm.c reads master per the run, not the file
        vals = struct.unpack(f"<{n}f", take(4 * n))
        print(f"{name}_first={vals[0]!r}\n{name}_last={vals[-1]!r}")
    loader = None
    windows = windows_arg(a.windows)
    if shuffle == 1:
        if windows:
            loader = Loader(windows, a.rank, True)  # the run's loader after dataloader_init
        (num_shards,) = struct.unpack("<Q", take(8))
        if windows and num_shards != len(windows):
            sys.exit(f"llm.c's assert fails: {num_shards} shards in the file, {len(windows)} match")
        shard_indices = list(struct.unpack(f"<{num_shards}i", take(4 * num_shards)))
        (num_samples,) = struct.unpack("<Q", take(8))
        if loader and num_samples != loader.num_samples:
            sys.exit(f"llm.c's assert fails: shard_num_samples {num_samples} != {loader.num_samples}")
        intra = list(struct.unpack(f"<{num_samples}i", take(4 * num_samples)))
        mt, left, nxt = Mt.unpack(take(2520))
        print(f"num_shards={num_shards}\nshard_indices={','.join(map(str, shard_indices))}")
        print(f"shard_num_samples={num_samples}\nintra_shard_indices={','.join(map(str, intra))}")
        print(f"mt_left={left}\nmt_next={nxt}")
        if loader:
            loader.shard_indices, loader.intra, loader.mt = shard_indices, intra, mt
    elif windows:
        loader = Loader(windows, a.rank, False)
    print(f"bytes_read={pos}\nfile_size={len(data)}")
    if loader and a.cont:
        loader.shard, loader.sample = q(30), q(32)  # dataloader_resume: loads that shard, keeps the orders
        loader.num_samples = windows[loader.shard_indices[loader.shard] if loader.shuffle else loader.shard]
        print("next=" + ",".join("%d:%d" % loader.next() for _ in range(a.cont)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("write", "read"))
    p.add_argument("file")
    p.add_argument("--params", type=int, required=True, help="floats per optimizer buffer")
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--master", type=int, default=1, choices=(0, 1))
    p.add_argument("--step", type=int, default=1)
    p.add_argument("--shuffle", type=int, default=1, choices=(0, 1))
    p.add_argument("--windows", default="")
    p.add_argument("--batches", type=int, default=0)
    p.add_argument("--continue", dest="cont", type=int, default=0)
    a = p.parse_args()
    write(a) if a.mode == "write" else read(a)


if __name__ == "__main__":
    main()
