#!/usr/bin/env python3
"""
GPT-2 weights between Hugging Face `transformers` and our checkpoint (formats.md "Model checkpoint").

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
"""
import argparse
import itertools
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train_gpt2 import (GPTConfig, MODEL_MAGIC, bf16_rne, header, num_parameters,  # noqa: E402
                        read_model_file, write_atomic)

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

    if c.get("model_type") != "gpt2":
        die(f"'{path}': model_type is {c.get('model_type')!r}, not 'gpt2': only GPT-2 models can be imported")
    try:
        V, maxT = int(c.get("vocab_size", 50257)), int(c.get("n_positions", c.get("n_ctx", 1024)))
        C, L, NH = int(c.get("n_embd", 768)), int(c.get("n_layer", 12)), int(c.get("n_head", 12))
    except (TypeError, ValueError):
        die(f"'{path}': vocab_size / n_positions / n_embd / n_layer / n_head must be integers")
    if min(V, maxT, C, L, NH) < 1 or C % NH:
        die(f"'{path}': implausible shape vocab_size={V} n_positions={maxT} n_embd={C} n_layer={L} n_head={NH}")
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
    Vp = (V + VOCAB_ALIGN - 1) // VOCAB_ALIGN * VOCAB_ALIGN
    return GPTConfig(maxT, V, Vp, L, NH, C), bool(c.get("tie_word_embeddings", True))


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
                    shards = sorted(set(json.load(f)["weight_map"].values()))
            except (OSError, ValueError, KeyError, AttributeError) as e:
                die(f"'{ipath}': not a valid shard index ({e})")
            return [os.path.join(folder, s) for s in shards]
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
            if not torch.isfinite(t).all():
                die(f"'{src}': tensor {n} holds NaN or inf")
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
    try:
        write_atomic(args.out, itertools.chain([h], checkpoint_chunks(tensors, cfg, version, folder)))
    except SystemExit:  # a NaN found while streaming: leave no partial file behind
        if os.path.exists(args.out + ".tmp"):
            os.remove(args.out + ".tmp")
        raise
    say(f"done: {args.out}")


# ------------------------------------------------------------------------------------------------
# export

def write_safetensors(path, named_arrays, total_bytes_by_name, metadata):
    """safetensors file written tensor by tensor: 8-byte header length, JSON header, raw little-endian data.
    named_arrays yields (name, numpy array); total_bytes_by_name gives (name, dtype tag, shape, nbytes) ahead
    of time, in the same order, for the header."""
    hdr, offset = {"__metadata__": metadata}, 0
    for name, tag, shape, nbytes in total_bytes_by_name:
        hdr[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(hdr, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data starts 8-byte aligned, as the safetensors writer does

    def chunks():
        yield np.frombuffer(np.uint64(len(blob)).tobytes() + blob, dtype=np.uint8)
        yield from (a for _, a in named_arrays)
    write_atomic(path, chunks())


def cmd_export(args):
    if not os.path.isfile(args.model):
        die(f"'{args.model}': no such file")
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        die(f"'{args.out_dir}' exists and is not a folder")
    with open(args.model, "rb") as f:
        version = int(np.frombuffer(f.read(8).ljust(8, b"\0"), dtype=np.int32)[1])
    say(f"reading {args.model}")
    cfg, flat = read_model_file(args.model)  # validates magic, version, header and size
    V, Vp, C, L = cfg.vocab_size, cfg.padded_vocab_size, cfg.channels, cfg.num_layers
    say(f"checkpoint v{version}: L={L} NH={cfg.num_heads} C={C} maxT={cfg.max_seq_len} V={V} (Vp={Vp}), "
        f"{flat.size:,} parameters")

    # the 16 tensors as views of flat, in checkpoint order
    sizes = [Vp * C, cfg.max_seq_len * C] + [L * s for s in (C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C,
                                                             4 * C, 4 * C * C, C)] + [C, C]
    ends = np.cumsum(sizes)
    views = [flat[e - s:e] for s, e in zip(sizes, ends)]
    ours_shape = {"attn.c_attn.weight": (3 * C, C), "attn.c_proj.weight": (C, C), "mlp.c_fc.weight": (4 * C, C),
                  "mlp.c_proj.weight": (C, 4 * C)}
    plan = [("transformer.wte.weight", lambda: views[0][:V * C].reshape(V, C)),  # padded rows dropped
            ("transformer.wpe.weight", lambda: views[1].reshape(cfg.max_seq_len, C))]
    for k, (name, conv) in enumerate(LAYER_TENSORS):
        per = sizes[2 + k] // L
        for i in range(L):
            def get(v=views[2 + k], i=i, per=per, name=name, conv=conv):
                a = v[i * per:(i + 1) * per]
                return a.reshape(ours_shape[name]).T if conv else a  # ours (out, in) -> Conv1D (in, out)
            plan.append((f"transformer.h.{i}.{name}", get))
    plan += [("transformer.ln_f.weight", lambda: views[14]), ("transformer.ln_f.bias", lambda: views[15])]

    shapes = {"transformer." + n: s for n, s in hf_shapes(cfg).items()}
    tag, width = ("F32", 4) if args.dtype == "fp32" else ("BF16", 2)
    index = [(n, tag, shapes[n], int(np.prod(shapes[n])) * width) for n, _ in plan]
    padded = views[0][V * C:]
    if padded.size and np.any(padded != 0):
        say(f"note: wte rows {V}..{Vp - 1} are not zero; they are padding and are dropped")

    def arrays():
        last = 0
        for j, (n, get) in enumerate(plan):
            a = np.ascontiguousarray(get(), dtype=np.float32)
            yield n, (a if args.dtype == "fp32" else bf16_rne(a))
            pct = 100 * (j + 1) // len(plan)
            if pct >= last + 10 or j + 1 == len(plan):
                say(f"  {j + 1}/{len(plan)} tensors ({pct}%)")
                last = pct

    os.makedirs(args.out_dir, exist_ok=True)
    st = os.path.join(args.out_dir, "model.safetensors")
    say(f"writing {st} ({args.dtype}, {sum(i[3] for i in index) / 2**20:,.1f} MiB)")
    write_safetensors(st, arrays(), index, {"format": "pt"})
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": V, "n_positions": cfg.max_seq_len, "n_embd": C, "n_layer": L, "n_head": cfg.num_heads,
        "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True, "use_cache": True,
        "bos_token_id": min(50256, V - 1), "eos_token_id": min(50256, V - 1),
        "dtype": "float32" if args.dtype == "fp32" else "bfloat16",
    }
    write_atomic(os.path.join(args.out_dir, "config.json"),
                 [np.frombuffer(json.dumps(config, indent=2).encode() + b"\n", dtype=np.uint8)])
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
    torch.set_grad_enabled(False)
    cmd_import(args) if args.cmd == "import" else cmd_export(args)


if __name__ == "__main__":
    main()
