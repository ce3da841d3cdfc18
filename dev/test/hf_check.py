"""
CPU checks of dev/hf.py against transformers, no network (hf_check.sh / hf_bad_input_check.sh run it).

  python3 dev/test/hf_check.py roundtrip WORK_DIR   # HF -> ours -> HF with logits compared at every stage
  python3 dev/test/hf_check.py bad WORK_DIR         # refused inputs: exit 1, one message, no output file

Models are randomly initialised GPT2LMHeadModels with every parameter drawn at random (biases and
LayerNorm gains too, so a swapped or dropped tensor shows in the logits), saved locally.
fp32 tolerance: max |ours - HF| <= 1e-5 * max |HF logit| (what differs is only the order of fp32 sums).
bf16: the v5 file must hold exactly the round-to-nearest-even bf16 of the fp32 weights, and our logits
from it must match HF's logits with its weights rounded the same way at the fp32 tolerance; the gap to
the unrounded fp32 logits is then exactly bf16 weight rounding, printed for information.
"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
from train_gpt2 import GPT, bf16_rne, bf16_to_f32, load_flat, read_model_file  # noqa: E402

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

transformers.logging.set_verbosity_error()
torch.set_num_threads(2)
torch.set_grad_enabled(False)
HF_PY = os.path.join(ROOT, "dev", "hf.py")
REL_TOL = 1e-5
failures = []


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'}  {what}", flush=True)
    if not ok:
        failures.append(what)


def hf_py(*args, env=None, timeout=600, data_limit=None):
    """-> (exit code, stdout + stderr); exit code None when it ran past timeout seconds (then killed).
    data_limit: bytes of heap (RLIMIT_DATA) it may take, so a runaway allocation fails instead of swamping RAM."""
    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
    try:
        r = subprocess.run([sys.executable, HF_PY, *args], capture_output=True, text=True,
                           env={**os.environ, **(env or {})}, timeout=timeout,
                           preexec_fn=limit if data_limit else None)
    except subprocess.TimeoutExpired:
        return None, f"still running after {timeout} s (killed)"
    return r.returncode, r.stdout + r.stderr


def leftovers(folder):
    """Temp files (*.tmp) in folder, which a refused or finished run must not leave."""
    return sorted(f for f in os.listdir(folder) if f.endswith(".tmp")) if os.path.isdir(folder) else []


def refused(what, args, pattern, absent=(), clean=()):
    """dev/hf.py *args must exit 1 with one 'error:' line matching pattern and no traceback; no path in absent
    may exist afterwards and no folder in clean may hold a *.tmp file. Within 2 minutes and 4 GiB of heap:
    a refusal happens before anything large is allocated."""
    rc, msg = hf_py(*args, timeout=120, data_limit=4 << 30)
    errors = [line for line in msg.splitlines() if re.match(r"(hf\.py: )?error:", line)]
    left = [p for p in absent if os.path.lexists(p)] + [t for d in clean for t in leftovers(d)]
    ok = rc == 1 and re.search(pattern, msg) is not None and len(errors) == 1 and "Traceback" not in msg
    check(ok and not left, f"{args[0]} refuses {what}: rc {rc}, "
          f"{errors[-1] if errors else msg.strip()[-300:]!r}" + (f"; left behind: {left}" if left else ""))


def run_ok(*args, env=None):
    rc, out = hf_py(*args, env=env)
    if rc != 0:
        print(out)
        raise SystemExit(f"FAIL  dev/hf.py {' '.join(args)} exited {rc}")
    return out


def random_hf(seed, **shape):
    torch.manual_seed(seed)
    m = GPT2LMHeadModel(GPT2Config(**shape, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    for name, p in m.named_parameters():
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif p.dim() == 1:
            p.normal_(0.0, 0.1)
        else:
            p.normal_(0.0, 0.2 if name.endswith("wte.weight") else 0.08)
    return m.eval()


def load_hf(folder):
    kw = {"dtype": torch.float32} if int(transformers.__version__.split(".")[0]) >= 5 else \
        {"torch_dtype": torch.float32}
    return GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager", **kw).eval()


def hf_logits(model, idx):
    return model(idx).logits


def our_model(path):
    cfg, flat = read_model_file(path)
    m = GPT(cfg)
    load_flat(m, flat)
    m.set_flash(False)
    return m.eval()


def our_logits(model, idx):
    return model(idx)[0]


def rel_err(a, ref):
    return ((a - ref).abs().max() / ref.abs().max()).item()


def tokens(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.n_positions), generator=g)
    idx[0, :4] = torch.tensor([0, cfg.vocab_size - 1, cfg.vocab_size - 2, 1])  # the rows next to the padding
    return idx


def body(path):
    with open(path, "rb") as f:
        return f.read()[1024:]


def roundtrip(work, name, hf, folder, src=None):
    """folder holds hf's weights in some layout; src is what to pass to import (folder or a hub name)."""
    cfg, src = hf.config, src or folder
    print(f"--- {name}: L={cfg.n_layer} C={cfg.n_embd} NH={cfg.n_head} (head size {cfg.n_embd // cfg.n_head}) "
          f"maxT={cfg.n_positions} V={cfg.vocab_size}, from {src}")
    idx = tokens(cfg, 7)
    ref = hf_logits(hf, idx)
    tol = REL_TOL * ref.abs().max().item()
    V = cfg.vocab_size
    Vp = (V + 127) // 128 * 128

    out32 = os.path.join(work, f"{name}.bin")
    run_ok("import", src, out32)
    ours = our_model(out32)
    check((ours.cfg.num_layers, ours.cfg.num_heads, ours.cfg.channels, ours.cfg.max_seq_len, ours.cfg.vocab_size,
           ours.cfg.padded_vocab_size) == (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.n_positions, V, Vp),
          f"{name}: checkpoint header L/NH/C/maxT/V/Vp = {ours.cfg}")
    logits = our_logits(ours, idx)
    err = rel_err(logits[..., :V], ref)
    check(err <= REL_TOL, f"{name}: import fp32, our logits vs HF: max |diff| {err:.2e} of max |logit| "
                          f"{ref.abs().max().item():.3f} (tolerance {REL_TOL:.0e})")
    check(Vp == V or (ours.wte.weight[V:].abs().max().item() == 0 and logits[..., V:].abs().max().item() == 0),
          f"{name}: wte rows {V}..{Vp - 1} (padding) and their logits are zero")
    # the check above must catch a Conv1D weight that is not transposed: c_proj is square, so only the values
    # show it. Transpose it back in layer 0 of our model and the same comparison must fail.
    w = ours.h[0].attn.c_proj.weight
    w.copy_(w.t().clone())
    err_t = rel_err(our_logits(ours, idx)[..., :V], ref)
    check(err_t > 100 * REL_TOL, f"{name}: control: layer 0 c_proj left untransposed gives {err_t:.2e}, "
                                 f"far above the tolerance")

    exp32 = os.path.join(work, f"{name}_export")
    run_ok("export", out32, exp32)
    hf2 = load_hf(exp32)
    err2 = rel_err(hf_logits(hf2, idx), ref)
    check(err2 <= REL_TOL, f"{name}: export fp32, transformers logits vs the original's: {err2:.2e}")
    orig = {k: v for k, v in hf.state_dict().items() if not k.endswith(".attn.bias")}
    exported = load_file(os.path.join(exp32, "model.safetensors"))
    same = all(torch.equal(exported[k], v) for k, v in orig.items() if k != "lm_head.weight")
    check(same and set(exported) == set(orig) - {"lm_head.weight"},
          f"{name}: exported tensors bitwise equal to the original's ({len(exported)} tensors, no padding rows)")
    again = os.path.join(work, f"{name}_again.bin")
    run_ok("import", exp32, again)
    check(body(again) == body(out32), f"{name}: import of the export is bitwise the first import")

    # bf16: v5 holds RNE-rounded fp32 weights
    out16 = os.path.join(work, f"{name}_bf16.bin")
    run_ok("import", src, out16, "--dtype", "bf16")
    with open(out16, "rb") as f:
        version = int(np.frombuffer(f.read(8), np.int32)[1])
    b16 = np.frombuffer(body(out16), np.uint16)
    want = bf16_rne(np.frombuffer(body(out32), np.float32))
    check(version == 5 and np.array_equal(b16, want), f"{name}: import bf16 writes v5 = RNE bf16 of the fp32 weights")
    hf_r = random_hf(0, **{k: getattr(cfg, k) for k in ("n_layer", "n_embd", "n_head", "n_positions", "vocab_size")})
    hf_r.load_state_dict(hf.state_dict())
    for p in hf_r.parameters():
        p.copy_(p.bfloat16().float())
    ref16 = hf_logits(hf_r, idx)
    logits16 = our_logits(our_model(out16), idx)[..., :V]
    err16 = rel_err(logits16, ref16)
    check(err16 <= REL_TOL, f"{name}: import bf16, our logits vs HF with bf16-rounded weights: {err16:.2e} "
                            f"(bf16 rounding itself moves the logits by {rel_err(ref16, ref):.2e})")
    exp16 = os.path.join(work, f"{name}_export_bf16")
    run_ok("export", out16, exp16, "--dtype", "bf16")
    with safe_open(os.path.join(exp16, "model.safetensors"), framework="pt") as f:
        dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
    err16e = rel_err(hf_logits(load_hf(exp16), idx), logits16)
    check(dtypes == {"BF16"} and err16e <= REL_TOL,
          f"{name}: export bf16 of the v5 file: all tensors {dtypes}, transformers logits vs ours {err16e:.2e}")
    exp16_32 = os.path.join(work, f"{name}_export_bf16_as_fp32")
    run_ok("export", out16, exp16_32)
    e32 = load_file(os.path.join(exp16_32, "model.safetensors"))
    e16 = load_file(os.path.join(exp16, "model.safetensors"))
    check(all(e32[k].dtype == torch.float32 and torch.equal(e32[k], e16[k].float()) for k in e16),
          f"{name}: export of the v5 file in fp32 (default) holds its bf16 values exactly")


def old_layout_bin(hf, folder):
    """pytorch_model.bin as the original hub GPT-2 files have it: GPT2Model names (no 'transformer.'), the
    attn.bias / attn.masked_bias buffers, and here also the tied lm_head.weight."""
    os.makedirs(folder, exist_ok=True)
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v.clone()
          for k, v in hf.state_dict().items()}
    T = hf.config.n_positions
    for i in range(hf.config.n_layer):
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(sd, os.path.join(folder, "pytorch_model.bin"))
    hf.config.to_json_file(os.path.join(folder, "config.json"))


def fake_cache(hub_root, repo, src_folder):
    """The huggingface_hub cache layout for repo, with src_folder's files as its main snapshot."""
    d = os.path.join(hub_root, "models--" + repo.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    os.makedirs(os.path.join(d, "refs"), exist_ok=True)
    with open(os.path.join(d, "refs", "main"), "w") as f:
        f.write(commit)
    shutil.copytree(src_folder, os.path.join(d, "snapshots", commit))


def mode_roundtrip(work):
    a = random_hf(1, n_layer=2, n_embd=64, n_head=2, n_positions=64, vocab_size=50257)
    a.save_pretrained(os.path.join(work, "hf_a"))
    roundtrip(work, "a_safetensors", a, os.path.join(work, "hf_a"))
    old_layout_bin(a, os.path.join(work, "hf_a_bin"))
    roundtrip(work, "a_pytorch_bin", a, os.path.join(work, "hf_a_bin"))
    # C not a multiple of 128, an odd head count, a small vocabulary; sharded safetensors
    b = random_hf(2, n_layer=3, n_embd=200, n_head=5, n_positions=48, vocab_size=1000)
    b.save_pretrained(os.path.join(work, "hf_b"), max_shard_size="2MB")
    check(os.path.isfile(os.path.join(work, "hf_b", "model.safetensors.index.json")), "b: saved as shards")
    roundtrip(work, "b_sharded", b, os.path.join(work, "hf_b"))
    # a hub name resolved from the local cache only (HF_HOME points at an otherwise empty dir)
    fake_cache(os.path.join(os.environ["HF_HOME"], "hub"), "testorg/tiny-gpt2", os.path.join(work, "hf_a"))
    cached = os.path.join(work, "cached.bin")
    run_ok("import", "testorg/tiny-gpt2", cached)
    check(body(cached) == body(os.path.join(work, "a_safetensors.bin")),
          "hub name from the local cache: same checkpoint as from the folder")


def mode_bad(work):
    good = os.path.join(work, "good")
    m = random_hf(3, n_layer=2, n_embd=64, n_head=2, n_positions=32, vocab_size=500)
    m.save_pretrained(good)
    C = 64
    cases = []

    def variant(name, config=None, tensors=None, files=None):
        d = os.path.join(work, name)
        shutil.copytree(good, d)
        if config:
            with open(os.path.join(d, "config.json")) as f:
                c = json.load(f)
            c.update(config)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(c, f)
        if tensors:
            sd = load_file(os.path.join(d, "model.safetensors"))
            tensors(sd)
            save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        if files:
            files(d)
        return d

    def truncate(path):
        def f(d):
            p = os.path.join(d, path)
            with open(p, "r+b") as fh:
                fh.truncate(os.path.getsize(p) // 2)
        return f

    def drop(key):
        return lambda sd: sd.pop(key)

    def put(key, value):
        return lambda sd: sd.__setitem__(key, value)

    cases += [
        ("not GPT-2", variant("neo", config={"model_type": "gpt_neo"}), "model_type is 'gpt_neo', not 'gpt2'"),
        ("relu", variant("relu", config={"activation_function": "relu"}), "activation_function is 'relu'"),
        ("exact gelu", variant("gelu", config={"activation_function": "gelu"}), "activation_function is 'gelu'"),
        ("LayerNorm eps", variant("eps", config={"layer_norm_epsilon": 1e-6}), "layer_norm_epsilon is 1e-06"),
        ("n_inner", variant("inner", config={"n_inner": 3 * C}), "n_inner is 192, not 4 \\* n_embd = 256"),
        ("layer-idx scaling", variant("lidx", config={"scale_attn_by_inverse_layer_idx": True}),
         "scale_attn_by_inverse_layer_idx is true"),
        ("upcast attention", variant("upcast", config={"reorder_and_upcast_attn": True}),
         "reorder_and_upcast_attn is true"),
        ("head count", variant("heads", config={"n_head": 3}), "implausible shape"),
        ("missing tensor", variant("missing", tensors=drop("transformer.h.1.mlp.c_fc.bias")),
         "missing tensor h.1.mlp.c_fc.bias"),
        ("Conv1D weight stored (out, in)",
         variant("shape", tensors=put("transformer.h.0.attn.c_attn.weight", torch.zeros(3 * C, C))),
         "tensor h.0.attn.c_attn.weight has shape \\(192, 64\\).* needs \\(64, 192\\)"),
        ("vocab shorter than config", variant("vocab", config={"vocab_size": 512}),
         "tensor wte.weight has shape \\(500, 64\\)"),
        ("layers beyond n_layer", variant("layers", config={"n_layer": 1}), "unexpected tensor h.1."),
        ("untied LM head", variant("untied", config={"tie_word_embeddings": False},
                                   tensors=put("lm_head.weight", torch.randn(500, C))),
         "lm_head.weight differs from wte.weight"),
        ("NaN weight", variant("nan", tensors=put("transformer.h.1.ln_2.bias", torch.full((C,), float("nan")))),
         "tensor h.1.ln_2.bias holds NaN or inf"),
        ("truncated safetensors", variant("trunc", files=truncate("model.safetensors")),
         "not a readable safetensors file"),
        ("no weights", variant("noweights", files=lambda d: os.remove(os.path.join(d, "model.safetensors"))),
         "has no model.safetensors or pytorch_model.bin"),
        ("no config", variant("noconfig", files=lambda d: os.remove(os.path.join(d, "config.json"))),
         "has no config.json"),
        ("config not JSON", variant("badjson", files=lambda d: open(os.path.join(d, "config.json"), "w").write("{")),
         "cannot read it as JSON"),
        ("uncached hub name", "openai-community/gpt2-xl", "not in the local Hugging Face cache"),
        ("uncached short hub name", "gpt2", "not in the local Hugging Face cache"),
        ("no such folder", os.path.join(work, "nonexistent"), "no such folder"),
    ]
    # config.json and shard indexes of the wrong JSON type; shapes beyond the trainer's bounds
    def write(name, text):
        return lambda d: open(os.path.join(d, name), "w").write(text)

    def sharded(weight_map):
        """the weights as one shard named by model.safetensors.index.json, weight_map(tensor names) its map"""
        def f(d):
            os.rename(os.path.join(d, "model.safetensors"), os.path.join(d, "model-00001-of-00001.safetensors"))
            names = list(load_file(os.path.join(d, "model-00001-of-00001.safetensors")))
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as fh:
                json.dump(weight_map(names), fh)
        return f

    shard = "model-00001-of-00001.safetensors"
    cases += [
        ("config a JSON list", variant("cfglist", files=write("config.json", "[1, 2]")), "holds a JSON list"),
        ("config a JSON string", variant("cfgstr", files=write("config.json", '"gpt2"')), "holds a JSON str"),
        ("n_head true", variant("headbool", config={"n_head": True}), "n_head is True;.* must be integers"),
        ("n_layer 10^9", variant("huge", config={"n_layer": 10 ** 9}),
         "implausible shape \\(num_layers L=1000000000 is outside \\[1, 1024\\]\\)"),
        ("n_embd 2^17", variant("wide", config={"n_embd": 1 << 17, "n_head": 1}),
         "implausible shape \\(channels C=131072 is outside \\[1, 65536\\]\\)"),
        ("index weight_map values lists", variant("idxlist", files=sharded(lambda ns: {
            "metadata": {}, "weight_map": {n: [shard] for n in ns}})), "weight_map\\[.*\\] is \\[.*not a file name"),
        ("index weight_map mixed types", variant("idxmixed", files=sharded(lambda ns: {
            "weight_map": {n: (shard if k else 3) for k, n in enumerate(ns)}})), "is 3, not a file name"),
        ("index a JSON list", variant("idxarray", files=sharded(lambda ns: [shard])), "no \"weight_map\" object"),
        ("index naming a file outside the folder", variant("idxout", files=sharded(lambda ns: {
            "weight_map": {n: f"../good/model.safetensors" for n in ns}})), "not a file name in this folder"),
        ("inf weight", variant("inf", tensors=put("transformer.h.0.attn.c_attn.weight", torch.full((C, 3 * C),
                                                                                                  float("-inf")))),
         "tensor h.0.attn.c_attn.weight holds NaN or inf"),
    ]
    out = os.path.join(work, "out.bin")
    for what, src, pattern in cases:
        if os.path.lexists(out):
            os.remove(out)  # an earlier case that was wrongly accepted
        refused(what, ("import", src, out), pattern, absent=[out], clean=[work])

    big = variant("big", tensors=put("transformer.h.1.mlp.c_proj.bias", torch.full((C,), 3.4e38)))
    run_ok("import", big, out)  # fp32 holds it
    os.remove(out)
    refused("fp32 weight beyond bf16's range, --dtype bf16", ("import", big, out, "--dtype", "bf16"),
            "tensor h.1.mlp.c_proj.bias holds values beyond bf16's range", absent=[out], clean=[work])

    # where the output cannot go: a folder, a read-only or unwritable place, under a file
    outdir = os.path.join(work, "outdir")
    os.mkdir(outdir)
    refused("OUT an existing folder", ("import", good, outdir), f"'{re.escape(outdir)}' is a folder",
            clean=[work, outdir])
    check(os.listdir(outdir) == [], "OUT an existing folder: the folder is left as it was (empty)")
    a_file = os.path.join(work, "a_file")
    open(a_file, "w").write("x")
    refused("OUT under a file", ("import", good, os.path.join(a_file, "out.bin")), "exists and is not a folder",
            clean=[work])
    deep = os.path.join(work, "new1", "new2", "out.bin")
    refused("a NaN weight, OUT in folders to be made", ("import", os.path.join(work, "nan"), deep),
            "holds NaN or inf", absent=[os.path.join(work, "new1")])
    refused_on_sys("OUT on a file system that refuses new files (/sys)", ("import", good, "/sys/hf_check_out.bin"),
                   "cannot create a file next to it")
    ro = os.path.join(work, "readonly")
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    if os.geteuid() != 0:
        refused("OUT in a mode 0555 folder", ("import", good, os.path.join(ro, "out.bin")),
                "cannot create a file next to it|Permission denied", clean=[ro])
    else:
        print("skip  OUT in a mode 0555 folder: root writes there anyway (the /sys case is the unwritable one)")

    # a symlink planted at the old fixed temp name is not followed; the output replaces no symlink
    victim = os.path.join(work, "victim")
    open(victim, "w").write("victim")
    sym_out = os.path.join(work, "sym.bin")
    os.symlink(victim, sym_out + ".tmp")
    run_ok("import", good, sym_out)
    check(open(victim, "rb").read() == b"victim" and not os.path.islink(sym_out) and
          body(sym_out) == body(write_good_ckpt(work, good)),
          "import with a symlink planted at OUT.tmp: the symlink's target is untouched, OUT is a new file")
    if os.path.lexists(sym_out + ".tmp"):
        os.remove(sym_out + ".tmp")
    check(leftovers(work) == [], f"no temp files after a successful import: {leftovers(work)}")
    exclusive_temp_check(work)

    # export: bad checkpoint files
    ckpt = write_good_ckpt(work, good)
    data = open(ckpt, "rb").read()
    bad_magic, truncated = os.path.join(work, "bad_magic.bin"), os.path.join(work, "truncated.bin")
    open(bad_magic, "wb").write(b"\x00\x01\x02\x03" + data[4:])
    open(truncated, "wb").write(data[:len(data) - 100])
    huge = os.path.join(work, "huge.bin")
    h = np.frombuffer(data[:1024], np.int32).copy()
    h[4] = 10 ** 9  # num_layers
    open(huge, "wb").write(h.tobytes() + data[1024:])

    def poisoned(name, offset, value):  # ckpt with one value at this fp32 index set
        path = os.path.join(work, name)
        flat = np.frombuffer(data[1024:], np.float32).copy()
        flat[offset] = value
        open(path, "wb").write(data[:1024] + flat.tobytes())
        return path

    cfg, _ = read_model_file(ckpt)
    Vp, C_, L = cfg.padded_vocab_size, cfg.channels, cfg.num_layers
    fcw_layer1 = Vp * C_ + cfg.max_seq_len * C_ + L * (C_ + C_ + 3 * C_ * C_ + 3 * C_ + C_ * C_ + C_ + C_ + C_) \
        + 4 * C_ * C_ + 5  # the 6th value of layer 1's fcw
    nan_ckpt = poisoned("nan.bin", fcw_layer1, np.nan)
    inf_ckpt = poisoned("inf.bin", 7, np.inf)  # wte row 0
    big_ckpt = poisoned("big.bin", len(flat_of(data)) - 1, 3.4e38)  # lnfb's last value
    exports = os.path.join(work, "exports")  # where the refused exports would go: nothing may appear there
    os.mkdir(exports)
    e = [os.path.join(exports, f"e{i}") for i in range(12)]
    for what, args, pattern in [
        ("bad magic", (bad_magic, e[1]), "is not a model file \\(bad magic"),
        ("truncated file", (truncated, e[2]), "bytes but its header implies"),
        ("missing file", (os.path.join(work, "nope.bin"), e[3]), "no such file"),
        ("fp16", (ckpt, e[4], "--dtype", "fp16"), "invalid choice: 'fp16'"),
        ("num_layers 10^9 in the header", (huge, e[5]), "implausible model header \\(num_layers L=1000000000 is outside|implies"),
        ("a NaN weight", (nan_ckpt, e[6]),
         "tensor fcw layer 1 \\(transformer.h.1.mlp.c_fc.weight\\) holds NaN or inf; not exported"),
        ("an inf weight", (inf_ckpt, e[7]), "tensor wte \\(transformer.wte.weight\\) holds NaN or inf"),
        ("a weight beyond bf16's range, --dtype bf16", (big_ckpt, e[8], "--dtype", "bf16"),
         "tensor lnfb \\(transformer.ln_f.bias\\) holds values beyond bf16's range"),
    ]:
        refused(what, ("export", *args), pattern, absent=[args[1]], clean=[exports])
    refused("output is a file", ("export", ckpt, a_file), "exists and is not a folder", clean=[exports])
    check(open(a_file, "rb").read() == b"x", "export onto a file leaves the file as it was")
    run_ok("export", big_ckpt, e[9])  # fp32 holds it

    refused_on_sys("OUT_DIR where no folder can be made (/sys)", ("export", ckpt, "/sys/hf_check_export"),
                   "cannot create the folder")
    for name in ("model.safetensors", "config.json"):  # the other file must not appear either
        d = os.path.join(work, f"ex_{name}")
        os.makedirs(os.path.join(d, name))
        refused(f"OUT_DIR/{name} a folder", ("export", ckpt, d), f"{re.escape(name)}' is a folder", clean=[d])
        check(os.listdir(d) == [name], f"export with OUT_DIR/{name} a folder writes nothing: {os.listdir(d)}")

    # symlinks planted at the old fixed temp names are not followed
    d = os.path.join(work, "ex_sym")
    os.mkdir(d)
    for name in ("model.safetensors", "config.json"):
        os.symlink(victim, os.path.join(d, name + ".tmp"))
    run_ok("export", ckpt, d)
    check(open(victim, "rb").read() == b"victim" and
          all(os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))
              for n in ("model.safetensors", "config.json")) and load_hf(d) is not None,
          "export with symlinks planted at model.safetensors.tmp / config.json.tmp: their target is untouched")
    for name in ("model.safetensors", "config.json"):
        if os.path.lexists(os.path.join(d, name + ".tmp")):
            os.remove(os.path.join(d, name + ".tmp"))
    check(leftovers(d) == [], f"no temp files after a successful export: {leftovers(d)}")


def flat_of(data):
    return np.frombuffer(data[1024:], np.float32)


def write_good_ckpt(work, good):
    path = os.path.join(work, "good.bin")
    if not os.path.exists(path):
        run_ok("import", good, path)
    return path


def unwritable_as_anyone(path):
    """True when path cannot be created even by root (sysfs refuses new files: EACCES, or EROFS read-only)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError:
        return True
    os.remove(path)
    return False


def refused_on_sys(what, args, pattern):
    """refused() with the output path args[-1] under /sys, which must refuse new files even to root; a
    machine where it does not fails the check's setup."""
    path = args[-1]
    if unwritable_as_anyone(path):
        refused(what, args, pattern, absent=[path])
    else:
        check(False, f"setup: {path} could be created (the check needs /sys to refuse new files)")


def exclusive_temp_check(work):
    """Output.write creates its temp file exclusively and never through a symlink: with the random part of
    the name forced, a symlink planted at the first name is skipped and its target left alone."""
    import importlib.util
    sys.dont_write_bytecode = True  # no dev/__pycache__ from this import
    spec = importlib.util.spec_from_file_location("hf", HF_PY)
    hf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hf)
    victim = os.path.join(work, "victim2")
    open(victim, "w").write("victim")
    target = os.path.join(work, "excl.bin")
    os.symlink(victim, target + ".aaaa.tmp")
    names = iter(["aaaa", "bbbb"])
    real = hf.secrets.token_hex if hasattr(hf, "secrets") else None
    used = None
    try:
        hf.secrets.token_hex = lambda n: next(names)
        with hf.Output() as out:
            out.write(target, [b"new"])
            used = out.temps[0][0]
            out.commit()
    except Exception as e:  # SystemExit (a die()) is not caught: that is a failure too
        print(f"  {type(e).__name__}: {e}")
    finally:
        if real:
            hf.secrets.token_hex = real
    check(open(victim, "rb").read() == b"victim" and os.path.isfile(target) and open(target, "rb").read() == b"new" and
          used == target + ".bbbb.tmp" and os.path.islink(target + ".aaaa.tmp"),
          f"Output.write: a symlink at the first temp name is not followed; it used {used}")
    os.remove(target + ".aaaa.tmp")

    # interrupted mid-write (as SIGINT / SIGTERM or a failing tensor would): no temp file, no output, and
    # the folders made for it are gone
    deep = os.path.join(work, "int1", "int2", "out.bin")

    def chunks():
        yield b"partial"
        raise KeyboardInterrupt
    try:
        with hf.Output() as out:
            out.write(deep, chunks())
            out.commit()
    except KeyboardInterrupt:
        pass
    check(not os.path.lexists(os.path.join(work, "int1")) and leftovers(work) == [],
          "Output.write interrupted mid-file: no temp file, no output, no folder left")


if __name__ == "__main__":
    mode, work = sys.argv[1], sys.argv[2]
    {"roundtrip": mode_roundtrip, "bad": mode_bad}[mode](work)
    print(f"hf_check {mode}: {'OK' if not failures else f'{len(failures)} FAILED'}")
    sys.exit(1 if failures else 0)
