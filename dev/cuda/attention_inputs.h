/*
 * Inputs shared by the attention labs (dev/cuda/attention.cu, dev/cuda/attention_crosscheck.cu), so both
 * draw the same kind of data: qkv (B,T,3,NH,HS) with q and k from 1.5 N(0,1) (softmax not flat) and v
 * from N(0,1), and dout (B,T,NH,HS) from N(0,1), all rounded to bf16, deterministic in (seed, shape).
 */
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "llmc/attention.cuh"

struct Shape {
    int B, T, NH;
};

static float normal(uint64_t* state) {  // Box-Muller
    const float u1 = std::max(random_f32(state), 1e-7f), u2 = random_f32(state);
    return sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2);
}

static void make_inputs(const Shape& s, uint64_t seed, std::vector<floatX>& qkv, std::vector<floatX>& dout) {
    uint64_t state = rng_seed(seed, (uint64_t)s.B * 1000003u + s.T * 1009u + s.NH);
    const size_t C = (size_t)s.NH * ATT_HS;
    qkv.resize((size_t)s.B * s.T * 3 * C);
    dout.resize((size_t)s.B * s.T * C);
    for (size_t i = 0; i < qkv.size(); i++) {
        const bool is_v = (i / C) % 3 == 2;
        qkv[i] = __float2bfloat16(normal(&state) * (is_v ? 1.0f : 1.5f));
    }
    for (auto& x : dout) x = __float2bfloat16(normal(&state));
}

// A device copy of a host vector (the caller frees it with cudaFreeCheck).
static floatX* upload(const std::vector<floatX>& h) {
    floatX* d = nullptr;
    cudaCheck(cudaMalloc(&d, h.size() * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    return d;
}
