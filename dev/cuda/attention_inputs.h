/*
 * Inputs and output buffers shared by the attention labs (dev/cuda/attention.cu,
 * dev/cuda/attention_crosscheck.cu), so both draw the same kind of data: qkv (B,T,3,NH,HS) with q and k from 1.5 N(0,1) (softmax not flat) and v
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

// One implementation's outputs on the device: out (B,T,NH,HS), dinp (B,T,3,NH,HS), lse and the backward's
// row-term scratch (B,NH,T). Allocated poisoned: 0xFF bytes are NaN in bf16 and fp32, so an element a
// launcher leaves unwritten fails the finite checks.
struct AttentionBuffers {
    floatX *out = nullptr, *dinp = nullptr;
    float *lse = nullptr, *scratch = nullptr;
    size_t n_out = 0, n_dinp = 0, n_lse = 0, n_scratch = 0;

    explicit AttentionBuffers(const Shape& s) {
        n_out = (size_t)s.B * s.T * s.NH * ATT_HS;
        n_dinp = 3 * n_out;
        n_lse = (size_t)s.B * s.NH * s.T;
        cudaCheck(cudaMalloc(&out, n_out * sizeof(floatX)));
        cudaCheck(cudaMalloc(&dinp, n_dinp * sizeof(floatX)));
        cudaCheck(cudaMalloc(&lse, n_lse * sizeof(float)));
        n_scratch = attention_backward_scratch_floats(s.B, s.T, s.NH);
        cudaCheck(cudaMalloc(&scratch, n_scratch * sizeof(float)));
        poison();
    }
    AttentionBuffers(const AttentionBuffers&) = delete;
    AttentionBuffers& operator=(const AttentionBuffers&) = delete;
    void poison() {
        cudaCheck(cudaMemset(out, 0xFF, n_out * sizeof(floatX)));
        cudaCheck(cudaMemset(dinp, 0xFF, n_dinp * sizeof(floatX)));
        cudaCheck(cudaMemset(lse, 0xFF, n_lse * sizeof(float)));
        cudaCheck(cudaMemset(scratch, 0xFF, n_scratch * sizeof(float)));
    }
    ~AttentionBuffers() {
        cudaFreeCheck(&out);
        cudaFreeCheck(&dinp);
        cudaFreeCheck(&lse);
        cudaFreeCheck(&scratch);
    }
};
