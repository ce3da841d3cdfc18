#!/usr/bin/env python3
"""
GPT-2 weights between Hugging Face `transformers` and our checkpoint (docs/formats.md "Model checkpoint",
"Hugging Face GPT-2 folders").

  python3 dev/hf.py import SRC OUT.bin [--dtype fp32|bf16]     # fp32 = checkpoint v3 (default), bf16 = v5
  python3 dev/hf.py export MODEL.bin OUT_DIR [--dtype fp32|bf16]

import: SRC is a folder with config.json and model.safetensors (or model.safetensors.index.json, or
  pytorch_model.bin[.index.json]), as save_pretrained writes it, or a hub name ("gpt2",
  "openai-community/gpt2-xl") that is taken from the local Hugging Face cache only (HF_HOME /
  HF_HUB_CACHE); nothing is downloaded. Any GPT-2 shape is accepted as long as our trainer computes it
  exactly as transformers does; anything else (another model type, another activation or LayerNorm eps,
  n_inner != 4C, per-layer attention scaling, an untied LM head, missing or misshapen tensors) is refused
  with one message and exit code 1.
export: writes OUT_DIR/config.json and OUT_DIR/model.safetensors, loadable by
  transformers.GPT2LMHeadModel.from_pretrained(OUT_DIR). The tokenizer is GPT-2's
  (AutoTokenizer.from_pretrained("gpt2")). fp32 by default; bf16 keeps a v5 checkpoint's exact values
  (or rounds a v3 one to nearest even). Never fp16: trained GPT-2 activations overflow its range.

Layout differences handled here:
  - HF's attention and MLP use Conv1D, whose weights are stored (in, out); ours are nn.Linear (out, in).
  - Our wte has Vp = V rounded up to a multiple of 128 rows: rows V..Vp-1 are zero on import and dropped
    on export. lm_head is tied to wte on both sides.
  - HF's non-parameter buffers (attn.bias / attn.masked_bias in old checkpoints) are ignored.
Both directions stream one tensor at a time, so a 1.5B model needs about one copy of its weights in RAM.

Bad input never gives a traceback: one "hf.py: error:" line naming the file and the problem, exit code 1,
and nothing left behind. Shapes beyond the trainer's limits (train_gpt2.config_problem, the same bounds as
gpt2_config_problem in llmc/model_file.h) are refused before anything is allocated; NaN or inf weights are
refused both ways, naming the tensor. Every file is written to a fresh temp file in its target folder
(created with O_CREAT | O_EXCL | O_NOFOLLOW, so nothing planted there is followed or overwritten), fsynced,
and renamed over the target only when all of it is written; on any error, SIGTERM or SIGINT the temp
files, and the folders made for them, are removed.
"""
import argparse
import itertools
import json
import os
import secrets
import signal
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train_gpt2 import (GPTConfig, HEADER_INTS, MODEL_MAGIC, bf16_rne, config_problem, header,  # noqa: E402
                        num_parameters, read_model_file)

VOCAB_ALIGN = 128
GELU_TANH = ("gelu_new", "gelu_pytorch_tanh")  # both are 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
# per-layer tensors in checkpoint order: (HF name under h.{i}., is a Conv1D weight to transpose)
LAYER_TENSORS = [("ln_1.weight", False), ("ln_1.bias", False), ("attn.c_attn.weight", True),
                 ("attn.c_attn.bias", False), ("attn.c_proj.weight", True), ("attn.c_proj.bias", False),
                 ("ln_2.weight", False), ("ln_2.bias", False), ("mlp.c_fc.weight", True),
                 ("mlp.c_fc.bias", False), ("mlp.c_proj.weight", True), ("mlp.c_proj.bias", False)]
HF_BUFFERS = ("attn.bias", "attn.masked_bias", "crossattention.bias", "crossattention.masked_bias")
T0 = time.time()


def die(msg):
    print(f"hf.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def say(msg):
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


def on_signal(signum, frame):
    print(f"hf.py: error: stopped by {signal.Signals(signum).name}; nothing written", file=sys.stderr)
    sys.exit(1)  # SystemExit unwinds through Output, which removes its temp files


def not_a_folder(path):
    """die() unless path can become a file: a folder there (or a symlink to one) would be replaced."""
    if os.path.isdir(path):
        die(f"'{path}' is a folder; name the file to write")


class Output:
    """Files that appear complete or not at all. write() streams each into a temp file with a unique name
    in the target's folder, opened O_CREAT | O_EXCL | O_NOFOLLOW (a file or symlink already at that name is
    never opened), and fsyncs it; commit() renames them over their targets and fsyncs the folders. Leaving
    the `with` block without commit() (an error, die(), SIGTERM / SIGINT) removes the temp files and the
    folders this object created."""

    def __init__(self):
        self.temps = []  # (temp path, final path)
        self.made = []   # folders created here, outermost first

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        for tmp, _ in self.temps:
            try:
                os.remove(tmp)
            except OSError:
                pass
        for d in reversed(self.made):
            try:
                os.rmdir(d)
            except OSError:
                pass
        return False

    def folder(self, path):
        """Creates path and its missing parents (removed again on failure); die() if that is impossible."""
        path = os.path.abspath(path)
        missing = []
        while not os.path.isdir(path):
            if os.path.lexists(path):
                die(f"'{path}' exists and is not a folder")
            missing.append(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except OSError as e:
                die(f"'{d}': cannot create the folder ({e.strerror})")
            self.made.append(d)

    def write(self, path, chunks):
        """chunks: numpy arrays (or bytes), written in order."""
        self.folder(os.path.dirname(os.path.abspath(path)))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = None
        for _ in range(100):
            tmp = f"{path}.{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(tmp, flags, 0o666)
                break
            except FileExistsError:
                continue
            except OSError as e:
                die(f"'{path}': cannot create a file next to it ({e.strerror})")
        if fd is None:
            die(f"'{path}': no free temp name next to it")
        self.temps.append((tmp, path))
        try:
            with os.fdopen(fd, "wb") as f:
                for c in chunks:
                    f.write(c if isinstance(c, bytes) else memoryview(np.ascontiguousarray(c)).cast("B"))
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            die(f"'{path}': write failed ({e.strerror or e})")

    def commit(self):
        folders = []
        for tmp, path in self.temps:
            try:
                os.replace(tmp, path)
            except OSError as e:
                die(f"'{path}': cannot replace it ({e.strerror})")
            folders.append(os.path.dirname(os.path.abspath(path)))
        self.temps, self.made = [], []
        for d in dict.fromkeys(folders):  # the renames themselves reach the disk
            try:
                fd = os.open(d, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError:
                pass  # some file systems cannot fsync a folder; the data itself is synced


def finite_problem(a, bf16):
    """'' when every value of a (fp32) is finite, and stays finite rounded to bf16 if bf16; else the problem."""
    if not np.isfinite(a).all():
        return "holds NaN or inf"
    if bf16 and ((bf16_rne(a) & np.uint16(0x7FFF)) == np.uint16(0x7F80)).any():
        return "holds values beyond bf16's range (they round to inf)"
    return ""


def hf_shapes(cfg):
    """HF name (without 'transformer.') -> expected shape, in checkpoint order; Conv1D weights as (in, out)."""
    C, L = cfg.channels, cfg.num_layers
    per_layer = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
                 "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
                 "ln_2.weight": (C,), "ln_2.bias": (C,), "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,),
                 "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,)}
    shapes = {"wte.weight": (cfg.vocab_size, C), "wpe.weight": (cfg.max_seq_len, C)}
    for name, _ in LAYER_TENSORS:
        for i in range(L):
            shapes[f"h.{i}.{name}"] = per_layer[name]
    shapes["ln_f.weight"] = (C,)
    shapes["ln_f.bias"] = (C,)
    return shapes


# ------------------------------------------------------------------------------------------------
# import

def resolve_source(src):
    """A local folder, or a hub name found in the local Hugging Face cache -> the folder's path."""
    if os.path.isdir(src):
        return src
    if os.path.exists(src):
        die(f"'{src}' is a file; pass the folder that holds config.json and the weights")
    if src.startswith((".", "/", "~")) or src.count("/") > 1:
        die(f"'{src}': no such folder")
    os.environ["HF_HUB_OFFLINE"] = "1"  # read before huggingface_hub is imported: never a network call
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError:
        die(f"'{src}' is not a folder, and hub names need the huggingface_hub package (pip install transformers)")
    # the hub moved the original checkpoints under openai-community/; a cache may hold either name
    names = [src] + ([f"openai-community/{src}"] if "/" not in src else [])
    for name in names:
        try:
            return snapshot_download(name, local_files_only=True)
        except Exception:  # not cached, or not a valid repo name: both mean "not here"
            continue
    die(f"'{src}' is not a local folder and not in the local Hugging Face cache ({constants.HF_HUB_CACHE}); "
        f"nothing is downloaded: fetch it first (e.g. `hf download {src}`) or pass a save_pretrained folder")


def read_config(folder):
    path = os.path.join(folder, "config.json")
    try:
        with open(path) as f:
            c = json.load(f)
    except FileNotFoundError:
        die(f"'{folder}' has no config.json (not a transformers model folder)")
    except (OSError, ValueError) as e:
        die(f"'{path}': cannot read it as JSON ({e})")

    def bad(what):
        die(f"'{path}': {what}; our trainer computes GPT-2 exactly as transformers does only without it")

    if not isinstance(c, dict):
        die(f"'{path}': holds a JSON {type(c).__name__}, not an object of config fields")
    if c.get("model_type") != "gpt2":
        die(f"'{path}': model_type is {c.get('model_type')!r}, not 'gpt2': only GPT-2 models can be imported")
    fields = {"vocab_size": 50257, "n_positions": c.get("n_ctx", 1024), "n_embd": 768, "n_layer": 12, "n_head": 12}
    got = {k: c.get(k, default) for k, default in fields.items()}
    for k, v in got.items():
        if type(v) is not int:  # not bool, not float: a config writes whole numbers
            die(f"'{path}': {k} is {v!r}; vocab_size / n_positions / n_embd / n_layer / n_head must be integers")
    V, maxT, C, L, NH = got.values()
    Vp = (V + VOCAB_ALIGN - 1) // VOCAB_ALIGN * VOCAB_ALIGN
    cfg = GPTConfig(maxT, V, Vp, L, NH, C)
    problem = config_problem(cfg)  # the trainer's bounds, checked before any size is computed from them
    if problem:
        die(f"'{path}': implausible shape ({problem}): vocab_size={V} n_positions={maxT} n_embd={C} n_layer={L} "
            f"n_head={NH}; the trainer takes 1 <= n_layer <= 1024, n_embd <= 65536, n_positions <= 2^20, "
            f"vocab_size <= 2^24")
    if c.get("n_inner") not in (None, 4 * C):
        bad(f"n_inner is {c['n_inner']}, not 4 * n_embd = {4 * C}")
    if c.get("activation_function", "gelu_new") not in GELU_TANH:
        bad(f"activation_function is {c['activation_function']!r}, not the tanh GELU ({' / '.join(GELU_TANH)})")
    if c.get("layer_norm_epsilon", 1e-5) != 1e-5:
        bad(f"layer_norm_epsilon is {c['layer_norm_epsilon']}, not 1e-5")
    if not c.get("scale_attn_weights", True):
        bad("scale_attn_weights is false (no 1/sqrt(head size) scaling)")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if c.get(flag, False):
            bad(f"{flag} is true")
    return cfg, bool(c.get("tie_word_embeddings", True))


def weight_files(folder):
    """The weight files of a save_pretrained folder: safetensors preferred, single file or sharded."""
    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if os.path.isfile(os.path.join(folder, single)):
            return [os.path.join(folder, single)]
        ipath = os.path.join(folder, index)
        if os.path.isfile(ipath):
            try:
                with open(ipath) as f:
                    index_json = json.load(f)
            except (OSError, ValueError) as e:
                die(f"'{ipath}': not a valid shard index ({e})")
            wmap = index_json.get("weight_map") if isinstance(index_json, dict) else None
            if not isinstance(wmap, dict) or not wmap:
                die(f"'{ipath}': not a valid shard index (no \"weight_map\" object of tensor name -> file name)")
            for name, shard in wmap.items():
                if not isinstance(shard, str) or shard in ("", ".", "..") or os.path.basename(shard) != shard:
                    die(f"'{ipath}': not a valid shard index (weight_map[{name!r}] is {shard!r}, not a file name "
                        f"in this folder)")
            return [os.path.join(folder, s) for s in sorted(set(wmap.values()))]
    die(f"'{folder}' has no model.safetensors or pytorch_model.bin")


class HFTensors:
    """name -> torch tensor over all weight files, read lazily from safetensors; names lose 'transformer.'."""

    def __init__(self, files):
        self.where = {}  # short name -> (file, full name)
        self.loaded = {}  # pytorch_model.bin files: the whole state dict (mmapped where torch can)
        for path in files:
            if not os.path.isfile(path):
                die(f"'{path}': missing (named by the shard index)")
            if path.endswith(".safetensors"):
                from safetensors import safe_open
                try:
                    with safe_open(path, framework="pt") as f:
                        names = list(f.keys())
                except Exception as e:
                    die(f"'{path}': not a readable safetensors file ({e})")
            else:
                try:
                    try:
                        sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
                    except (RuntimeError, TypeError):  # legacy (non-zip) files cannot be mmapped; torch < 2.1 has no mmap
                        sd = torch.load(path, map_location="cpu", weights_only=True)
                except Exception as e:
                    die(f"'{path}': not a readable PyTorch state dict ({e})")
                if not isinstance(sd, dict):
                    die(f"'{path}': holds a {type(sd).__name__}, not a state dict")
                self.loaded[path] = sd
                names = list(sd.keys())
            for full in names:
                short = full[len("transformer."):] if full.startswith("transformer.") else full
                self.where[short] = (path, full)

    def get(self, short):
        path, full = self.where[short]
        if path in self.loaded:
            t = self.loaded[path][full]
            if not isinstance(t, torch.Tensor):
                die(f"'{path}': {full} is a {type(t).__name__}, not a tensor")
        else:
            from safetensors import safe_open
            try:
                with safe_open(path, framework="pt") as f:
                    t = f.get_tensor(full)
            except Exception as e:
                die(f"'{path}': cannot read tensor {full} ({e})")
        if not t.is_floating_point():
            die(f"'{path}': tensor {full} has dtype {t.dtype}, not a floating-point type")
        return t


def check_tensors(tensors, cfg, tied, src):
    shapes = hf_shapes(cfg)
    missing = [n for n in shapes if n not in tensors.where]
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        die(f"'{src}': missing tensor{'s' if len(missing) > 1 else ''} {', '.join(missing[:3])}{more} "
            f"for n_layer={cfg.num_layers}")
    for n, want in shapes.items():
        got = tuple(tensors.get(n).shape)
        if got != want:
            die(f"'{src}': tensor {n} has shape {got}, a GPT-2 with n_embd={cfg.channels} "
                f"vocab_size={cfg.vocab_size} n_positions={cfg.max_seq_len} needs {want}")
    ignored = []
    for n in tensors.where:
        if n in shapes or n.endswith(HF_BUFFERS):
            continue
        if n == "lm_head.weight":
            if not torch.equal(tensors.get(n).float(), tensors.get("wte.weight").float()):
                die(f"'{src}': lm_head.weight differs from wte.weight; our model ties them "
                    f"(tie_word_embeddings={str(tied).lower()})")
            continue
        if n.startswith(("h.", "wte.", "wpe.", "ln_f.")):
            die(f"'{src}': unexpected tensor {n} for a GPT-2 with n_layer={cfg.num_layers}")
        ignored.append(n)
    if not tied and "lm_head.weight" not in tensors.where:
        die(f"'{src}': tie_word_embeddings is false but there is no lm_head.weight")
    if ignored:
        say(f"ignoring {len(ignored)} tensors outside GPT-2's language model: {', '.join(ignored[:4])}"
            + (" ..." if len(ignored) > 4 else ""))


def checkpoint_chunks(tensors, cfg, version, src):
    """The 16 checkpoint tensors in order, each as an fp32 (v3) or bf16-bits (v5) numpy array."""
    slots = [("wte", ["wte.weight"], False), ("wpe", ["wpe.weight"], False)]
    ours = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
            "fcprojb"]
    for our, (name, conv) in zip(ours, LAYER_TENSORS):
        slots.append((our, [f"h.{i}.{name}" for i in range(cfg.num_layers)], conv))
    slots += [("lnfw", ["ln_f.weight"], False), ("lnfb", ["ln_f.bias"], False)]
    for our, names, conv in slots:
        parts = []
        for n in names:
            t = tensors.get(n).float()  # fp16 / bf16 sources widen exactly
            problem = finite_problem(t.numpy(), version == 5)
            if problem:
                die(f"'{src}': tensor {n} {problem}")
            parts.append((t.t() if conv else t).contiguous().reshape(-1))  # Conv1D (in, out) -> (out, in)
        if our == "wte":  # padded rows V..Vp-1 are zero
            parts.append(torch.zeros((cfg.padded_vocab_size - cfg.vocab_size) * cfg.channels))
        flat = torch.cat(parts).numpy()
        del parts
        n = len(names)
        say(f"  {our:9s} {n if n > 1 else ''}{' layers' if n > 1 else ''} {flat.size:,} values"
            + (" (transposed from Conv1D)" if conv else ""))
        yield flat if version == 3 else bf16_rne(flat)


def cmd_import(args):
    version = 3 if args.dtype == "fp32" else 5
    not_a_folder(args.out)
    folder = resolve_source(args.src)
    say(f"reading {folder}")
    cfg, tied = read_config(folder)
    files = weight_files(folder)
    tensors = HFTensors(files)
    check_tensors(tensors, cfg, tied, folder)
    n = num_parameters(cfg)
    say(f"GPT-2 L={cfg.num_layers} NH={cfg.num_heads} C={cfg.channels} maxT={cfg.max_seq_len} "
        f"V={cfg.vocab_size} (Vp={cfg.padded_vocab_size}): {n:,} parameters with padding, "
        f"from {', '.join(os.path.basename(f) for f in files)}")
    say(f"writing {args.out} (checkpoint v{version}, {args.dtype}, {(1024 + n * (4 if version == 3 else 2)) / 2**20:,.1f} MiB)")
    h = header(MODEL_MAGIC, version, cfg.max_seq_len, cfg.vocab_size, cfg.num_layers, cfg.num_heads,
               cfg.channels, cfg.padded_vocab_size)
    with Output() as out:  # a NaN found while streaming leaves nothing behind
        out.write(args.out, itertools.chain([h], checkpoint_chunks(tensors, cfg, version, folder)))
        out.commit()
    say(f"done: {args.out}")


# ------------------------------------------------------------------------------------------------
# export

def safetensors_chunks(named_arrays, total_bytes_by_name, metadata):
    """A safetensors file, tensor by tensor: 8-byte header length, JSON header, raw little-endian data.
    named_arrays yields (name, numpy array); total_bytes_by_name gives (name, dtype tag, shape, nbytes) ahead
    of time, in the same order, for the header."""
    hdr, offset = {"__metadata__": metadata}, 0
    for name, tag, shape, nbytes in total_bytes_by_name:
        hdr[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(hdr, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data starts 8-byte aligned, as the safetensors writer does
    yield np.uint64(len(blob)).tobytes() + blob
    yield from (a for _, a in named_arrays)


def read_checkpoint(path):
    """-> (version, GPTConfig, fp32 array). The header is checked against the trainer's bounds before the
    body is read; read_model_file then checks the size and reads it."""
    try:
        with open(path, "rb") as f:
            h = np.frombuffer(f.read(HEADER_INTS * 4), dtype=np.int32)
    except OSError as e:
        die(f"'{path}': cannot read it ({e.strerror})")
    if h.size == HEADER_INTS and h[0] == MODEL_MAGIC and h[1] in (3, 5):
        cfg = GPTConfig(*(int(h[i]) for i in (2, 3, 7, 4, 5, 6)))
        problem = config_problem(cfg)
        if problem:
            die(f"'{path}': implausible model header ({problem}): L={cfg.num_layers} NH={cfg.num_heads} "
                f"C={cfg.channels} maxT={cfg.max_seq_len} V={cfg.vocab_size} Vp={cfg.padded_vocab_size}")
    try:
        cfg, flat = read_model_file(path)  # validates magic, version, header and size
    except OSError as e:
        die(f"'{path}': cannot read it ({e.strerror})")
    return int(h[1]), cfg, flat


def cmd_export(args):
    if not os.path.isfile(args.model):
        die(f"'{args.model}': no such file")
    if os.path.lexists(args.out_dir) and not os.path.isdir(args.out_dir):
        die(f"'{args.out_dir}' exists and is not a folder")
    st = os.path.join(args.out_dir, "model.safetensors")
    config_path = os.path.join(args.out_dir, "config.json")
    not_a_folder(st)
    not_a_folder(config_path)
    say(f"reading {args.model}")
    version, cfg, flat = read_checkpoint(args.model)
    V, Vp, C, L = cfg.vocab_size, cfg.padded_vocab_size, cfg.channels, cfg.num_layers
    say(f"checkpoint v{version}: L={L} NH={cfg.num_heads} C={C} maxT={cfg.max_seq_len} V={V} (Vp={Vp}), "
        f"{flat.size:,} parameters")

    # the 16 tensors as views of flat, in checkpoint order
    sizes = [Vp * C, cfg.max_seq_len * C] + [L * s for s in (C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C,
                                                             4 * C, 4 * C * C, C)] + [C, C]
    ends = np.cumsum(sizes)
    views = [flat[e - s:e] for s, e in zip(sizes, ends)]
    ours = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
            "fcprojb"]
    ours_shape = {"attn.c_attn.weight": (3 * C, C), "attn.c_proj.weight": (C, C), "mlp.c_fc.weight": (4 * C, C),
                  "mlp.c_proj.weight": (C, 4 * C)}
    # (HF name, our name, getter)
    plan = [("transformer.wte.weight", "wte", lambda: views[0][:V * C].reshape(V, C)),  # padded rows dropped
            ("transformer.wpe.weight", "wpe", lambda: views[1].reshape(cfg.max_seq_len, C))]
    for k, (name, conv) in enumerate(LAYER_TENSORS):
        per = sizes[2 + k] // L
        for i in range(L):
            def get(v=views[2 + k], i=i, per=per, name=name, conv=conv):
                a = v[i * per:(i + 1) * per]
                return a.reshape(ours_shape[name]).T if conv else a  # ours (out, in) -> Conv1D (in, out)
            plan.append((f"transformer.h.{i}.{name}", f"{ours[k]} layer {i}", get))
    plan += [("transformer.ln_f.weight", "lnfw", lambda: views[14]),
             ("transformer.ln_f.bias", "lnfb", lambda: views[15])]

    bf16 = args.dtype == "bf16"
    for n, our, get in plan:  # before anything is written
        problem = finite_problem(get(), bf16)
        if problem:
            die(f"'{args.model}': tensor {our} ({n}) {problem}; not exported")
    shapes = {"transformer." + n: s for n, s in hf_shapes(cfg).items()}
    tag, width = ("BF16", 2) if bf16 else ("F32", 4)
    index = [(n, tag, shapes[n], int(np.prod(shapes[n])) * width) for n, _, _ in plan]
    padded = views[0][V * C:]
    if padded.size and np.any(padded != 0):
        say(f"note: wte rows {V}..{Vp - 1} are not zero; they are padding and are dropped")

    def arrays():
        last = 0
        for j, (n, _, get) in enumerate(plan):
            a = np.ascontiguousarray(get(), dtype=np.float32)
            yield n, (bf16_rne(a) if bf16 else a)
            pct = 100 * (j + 1) // len(plan)
            if pct >= last + 10 or j + 1 == len(plan):
                say(f"  {j + 1}/{len(plan)} tensors ({pct}%)")
                last = pct

    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": V, "n_positions": cfg.max_seq_len, "n_embd": C, "n_layer": L, "n_head": cfg.num_heads,
        "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True, "use_cache": True,
        "bos_token_id": min(50256, V - 1), "eos_token_id": min(50256, V - 1),
        "dtype": "bfloat16" if bf16 else "float32",
    }
    with Output() as out:  # both files appear together, or neither (nor a folder made for them)
        out.folder(args.out_dir)
        say(f"writing {st} ({args.dtype}, {sum(i[3] for i in index) / 2**20:,.1f} MiB)")
        out.write(st, safetensors_chunks(arrays(), index, {"format": "pt"}))
        out.write(config_path, [json.dumps(config, indent=2).encode() + b"\n"])
        out.commit()
    say(f"done: {args.out_dir} (load with transformers.GPT2LMHeadModel.from_pretrained)")


class Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error exits 1 like every other refusal (argparse's default is 2)
        self.print_usage(sys.stderr)
        die(message)


def main():
    p = Parser(description="GPT-2 weights between Hugging Face transformers and our checkpoints")
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("import", help="HF folder or cached hub name -> checkpoint .bin")
    pi.add_argument("src", help="save_pretrained folder, or a hub name already in the local HF cache")
    pi.add_argument("out", help="checkpoint to write (OUT.bin)")
    pi.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="fp32 = v3 (default), bf16 = v5")
    pe = sub.add_parser("export", help="checkpoint .bin -> folder with config.json + model.safetensors")
    pe.add_argument("model", help="checkpoint v3 or v5 (e.g. a run's model_00005000.bin)")
    pe.add_argument("out_dir", help="folder to write")
    pe.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                    help="fp32 (default) or bf16; never fp16 (GPT-2's activations overflow it)")
    args = p.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    torch.set_grad_enabled(False)
    cmd_import(args) if args.cmd == "import" else cmd_export(args)


if __name__ == "__main__":
    main()
