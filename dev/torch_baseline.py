"""
The speed baseline: GPT-2 as a competent PyTorch user writes it for speed (nanoGPT's layout), so that
scripts/bench.sh compares train_gpt2cu with the strongest PyTorch, not with our numerical reference
(train_gpt2.py, which copies padded logits and syncs every step for its printouts).

What makes it fast, all standard PyTorch 2.x: torch.compile (default mode, or max-autotune-no-cudagraphs);
bf16 autocast; scaled_dot_product_attention (PyTorch picks the backend, or --sdpa forces one); fused
AdamW; TF32 matmuls; cross-entropy straight on the (B*T, Vp) logits of the padded vocabulary (no masked
copy; the padded columns only join the softmax, as in nanoGPT); gradient clipping at 1.0 without a host
sync; no host sync anywhere inside the timed steps (losses and step times are read after the last step,
step times from CUDA events recorded between steps).

  python3 dev/torch_baseline.py -e d12 -b 64 -t 1024 -n 40 -i dev/data/tinyshakespeare/tiny_shakespeare_train.bin
      [--compile default|max-autotune-no-cudagraphs|none] [--sdpa auto|flash|cudnn|efficient|math]

Prints one line per step in train_gpt2cu's step-line format (ms of that step, MFU against the H100/H200
dense bf16 peak of 989 TFLOP/s, the same FLOP count as train_gpt2cu), then the peak memory PyTorch
allocated. Model shapes come from train_gpt2.py's descriptor table (dN, custom:...).
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train_gpt2 import config_from_descriptor, die, num_parameters  # noqa: E402  (the one descriptor table)

PEAK_BF16_FLOPS = 989e12  # H100 SXM / H200 dense bf16, as train_gpt2cu's MFU


class Attention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.nh = NH
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = Attention(C, NH)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.channels
        self.wte = nn.Embedding(cfg.padded_vocab_size, C)
        self.wpe = nn.Embedding(cfg.max_seq_len, C)
        self.h = nn.ModuleList(Block(C, cfg.num_heads) for _ in range(cfg.num_layers))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, cfg.padded_vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg.num_layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def main():
    p = argparse.ArgumentParser(description="GPT-2 in PyTorch, written for speed (the bench baseline)")
    p.add_argument("-e", "--model", default="d12")
    p.add_argument("-b", "--batch_size", type=int, default=64)
    p.add_argument("-t", "--sequence_length", type=int, default=1024)
    p.add_argument("-n", "--steps", type=int, default=40)
    p.add_argument("-i", "--input_bin", default="dev/data/tinyshakespeare/tiny_shakespeare_train.bin")
    p.add_argument("--compile", default="default", choices=["default", "max-autotune-no-cudagraphs", "none"])
    p.add_argument("--sdpa", default="auto", choices=["auto", "flash", "cudnn", "efficient", "math"])
    p.add_argument("--seed", type=int, default=1337)
    args = p.parse_args()
    cfg = config_from_descriptor(args.model)
    if cfg is None:
        die(f"-e {args.model}: want a descriptor (dN or custom:L<n>,C<n>,NH<n>)")
    B, T = args.batch_size, args.sequence_length
    if not 1 <= T <= cfg.max_seq_len or B < 1:
        die(f"-b {B} -t {T}: want B >= 1 and 1 <= T <= {cfg.max_seq_len}")

    # tokens: the shard's body (header of 256 int32), on the GPU once; step s reads window s (wrapping)
    if not os.path.isfile(args.input_bin):
        die(f"-i {args.input_bin}: no such file (run dev/data/tinyshakespeare.sh)")
    header = np.fromfile(args.input_bin, dtype=np.int32, count=256)
    if header.size < 256 or header[0] != 20240520:
        die(f"-i {args.input_bin}: not a token shard (magic 20240520)")
    tokens = np.fromfile(args.input_bin, dtype=np.uint16, offset=1024)
    if tokens.size < B * T + 1:
        die(f"-i {args.input_bin}: {tokens.size} tokens, one batch needs {B * T + 1}")
    if not torch.cuda.is_available():
        die("dev/torch_baseline.py needs a CUDA GPU")
    device = torch.device("cuda")
    tokens = torch.from_numpy(tokens.astype(np.int64)).to(device)
    windows = (tokens.numel() - 1) // (B * T)

    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = GPT(cfg).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)

    if args.compile.startswith("max-autotune") and "TORCHINDUCTOR_AUTOTUNE_IN_SUBPROC" not in os.environ:
        # Benchmark the autotune's GEMM candidates in a subprocess. In-process (the default), one Triton
        # candidate for a logits-sized GEMM (65536 x 50304 at d12 B=64) hit an illegal memory access on
        # torch 2.11 / triton 3.6 (H100, 2026-12), which poisons the CUDA context and kills the run; in a
        # subprocess the failing candidate is dropped and the others compete as usual.
        import torch._inductor.config as inductor_config
        inductor_config.autotune_in_subproc = True
    cmodel = model if args.compile == "none" else torch.compile(model, mode=args.compile)

    def step_fn(x, y):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = cmodel(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # a tensor: no sync
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach(), norm

    sdpa_ctx = None
    if args.sdpa != "auto":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        sdpa_ctx = sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[args.sdpa])
        sdpa_ctx.__enter__()

    n = num_parameters(cfg)
    print(f"torch {torch.__version__}, GPT-2 {args.model}: L={cfg.num_layers} C={cfg.channels} NH={cfg.num_heads}, "
          f"{n:,} parameters, B={B} T={T}, compile={args.compile}, sdpa={args.sdpa}", flush=True)
    t0 = time.time()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    losses, norms = [], []
    events[0].record()
    for s in range(args.steps):
        w = (s % windows) * B * T
        buf = tokens[w:w + B * T + 1]
        loss, norm = step_fn(buf[:-1].view(B, T), buf[1:].view(B, T))
        losses.append(loss)
        norms.append(norm)
        events[s + 1].record()
        if s == 0:
            torch.cuda.synchronize()  # compile time: excluded from the timing by the warm-up anyway
            print(f"first step (compilation included) done after {time.time() - t0:.1f} s", flush=True)
    torch.cuda.synchronize()
    flops_per_token = 6 * n + 6 * cfg.num_layers * cfg.channels * T
    for s in range(args.steps):
        ms = events[s].elapsed_time(events[s + 1])
        tps = B * T / (ms / 1000)
        mfu = 100 * flops_per_token * tps / PEAK_BF16_FLOPS
        print(f"step {s + 1:4d}/{args.steps} | loss {losses[s].item():7.6f} (+0.00z)| norm {norms[s].item():6.4f} (+0.00z)| "
              f"lr 6.00e-04 | {ms:.2f} ms | {mfu:.1f}% bf16 MFU | {tps:.0f} tok/s")
    print(f"peak memory allocated by PyTorch: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
