/*
 * The speed settings the trainer picks when the command line leaves them out, host only:
 *   -r  recompute: the least recompute whose activations fit the GPU's free memory with room to spare.
 *       Recompute levels give bitwise-identical results (they only trade memory for time), so this
 *       choice never changes the numbers, only the speed.
 *   -ge GELU fused into the cuBLASLt epilogues (2 = forward and backward) in BF16 builds on compute
 *       capability 9.0 and newer, where it is faster; 0 elsewhere. It rounds the GELU output once from
 *       the fp32 accumulator instead of from the bf16 pre-activation, so it changes the last bits of the
 *       numbers (the README's "Differences from llm.c": llm.c's default is 0). FP32 builds keep 0: they
 *       are the numerical reference.
 * Each returns the value and a short reason for the start-up table.
 *
 *   int auto_recompute(const size_t need[3], size_t free_bytes, std::string* why)
 *       need[r] = activation bytes at -r r (gpt2_activation_bytes); free_bytes = free GPU memory after
 *       parameters, gradients and optimizer state. 2 when even -r 2 does not fit (the allocation then
 *       explains the shortfall).
 *   int auto_gelu_fusion(int cc_major, bool bf16, std::string* why)
 */
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

// Room left free beside the activations when -r is picked automatically: workspaces (cuBLASLt,
// cuDNN), the encoder backward's buffers, NCCL, allocator slack. The activation allocation itself asks
// for 512 MiB; the automatic choice keeps more, so that a setting it picks never fails later.
inline constexpr size_t AUTO_RECOMPUTE_SPARE_BYTES = 2ull << 30;

inline int auto_recompute(const size_t need[3], size_t free_bytes, std::string* why) {
    char buf[160];
    auto gib = [](size_t b) { return b / 1073741824.0; };
    for (int r = 0; r < 3; r++) {
        if (need[r] + AUTO_RECOMPUTE_SPARE_BYTES <= free_bytes) {
            snprintf(buf, sizeof buf, "auto: activations %.1f GiB of %.1f GiB free", gib(need[r]), gib(free_bytes));
            *why = buf;
            return r;
        }
    }
    snprintf(buf, sizeof buf, "auto: even -r 2 needs %.1f GiB of %.1f GiB free", gib(need[2]), gib(free_bytes));
    *why = buf;
    return 2;
}

inline int auto_gelu_fusion(int cc_major, bool bf16, std::string* why) {
    if (!bf16) {
        *why = "auto: off in FP32 builds";
        return 0;
    }
    if (cc_major >= 9) {
        *why = "auto: GELU in the cuBLASLt epilogues, sm_90+";
        return 2;
    }
    *why = "auto: off before sm_90";
    return 0;
}
