/*
 * Peak throughput and MFU, host only (no CUDA): what the step line's "% bf16 MFU" is computed from.
 *
 *   gpu_peak_bf16(name, major, minor, sm_count, clock_khz) -> GpuPeak {flops, source}
 *       dense bf16 tensor-core peak. Known parts come from the vendors' datasheets (H100 SXM and
 *       H200: 989.4 TFLOP/s; llm.c's table lacks the H200 and prints -100%). Unknown parts get an
 *       estimate from SM count x clock x dense bf16 FLOPs per SM per clock of the architecture
 *       (Hopper 4096, A100 2048, other Ampere/Ada 512, Blackwell 8192), marked "(estimated)"; only
 *       pre-Ampere GPUs or an unknown clock give 0, and then MFU prints as 0.0, never negative.
 *   gpt2_flops_per_token(N, L, C, T) = 6 N + 6 L C T   (N = parameters including padding)
 *   mfu_percent(flops_per_token, tokens_per_s, num_gpus, peak_flops)
 */
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

struct GpuPeak {
    double flops = 0.0;   // dense bf16 FLOP/s; 0 = unknown
    std::string source;   // shown in the start-up table
};

inline GpuPeak gpu_peak_bf16(const char* name, int major, int minor, int sm_count, int clock_khz) {
    struct Known { const char* name_part; double tflops; };
    // The first match wins: variants before the plain name ("H100 PCIe" before "H100").
    static const Known known[] = {
        {"H200", 989.4},     {"H100 PCIe", 756.0}, {"H100", 989.4},     {"H800", 989.4},
        {"B200", 2250.0},    {"A100", 312.0},      {"A800", 312.0},     {"L40S", 362.05},
        {"RTX 4090", 165.2}, {"RTX 3090", 71.0},   {"A6000", 154.8},
    };
    GpuPeak p;
    char buf[96];
    for (const Known& k : known) {
        if (strstr(name, k.name_part) != nullptr) {
            p.flops = k.tflops * 1e12;
            snprintf(buf, sizeof(buf), "%.1f (%s datasheet)", k.tflops, k.name_part);
            p.source = buf;
            return p;
        }
    }
    double per_sm_clock = 0.0;  // dense bf16 FLOPs per SM per clock, fp32 accumulation
    if (major == 8 && minor == 0) per_sm_clock = 2048;
    else if (major == 8) per_sm_clock = 512;
    else if (major == 9) per_sm_clock = 4096;
    else if (major >= 10) per_sm_clock = 8192;
    p.flops = per_sm_clock * sm_count * (double)clock_khz * 1e3;
    if (p.flops > 0) snprintf(buf, sizeof(buf), "%.1f (estimated from SMs x clock)", p.flops / 1e12);
    else snprintf(buf, sizeof(buf), "unknown (MFU printed as 0)");
    p.source = buf;
    return p;
}

inline double gpt2_flops_per_token(double num_parameters, int num_layers, int channels, int T) {
    return 6.0 * num_parameters + 6.0 * num_layers * channels * (double)T;
}

inline double mfu_percent(double flops_per_token, double tokens_per_s, int num_gpus, double peak_flops) {
    if (peak_flops <= 0.0 || num_gpus < 1) return 0.0;
    return 100.0 * flops_per_token * tokens_per_s / num_gpus / peak_flops;
}
