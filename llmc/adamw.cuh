/*
 * AdamW update with fp32 optimizer state (m, v) and optional fp32 master weights.
 *
 *   g = grad * grad_scale                        (grad_scale implements clipping to global norm 1.0)
 *   m = beta1 m + (1-beta1) g;  v = beta2 v + (1-beta2) g^2                    (m, v updated in place)
 *   p = p - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)             (params =, master =)
 * with m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t). When master weights are kept, p comes from
 * and goes to the fp32 master copy and the floatX parameter is its rounding; in bf16 that rounding is
 * stochastic (seeded per tensor and step), so resuming from the seed reproduces it bit for bit.
 * One launch per parameter tensor (weight decay differs between tensors), or under ZeRO-1 per chunk of
 * a tensor (llmc/zero_shards.h), with position0 the chunk's place in its tensor.
 */
#pragma once

#include "llmc/cuda_common.h"

// ----------------------------------------------------------------------------
// kernels

__global__ void adamw_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                             uint32_t position0, float lr, float beta1, float beta2, float beta1_correction, float beta2_correction,
                             float eps, float weight_decay, float grad_scale, uint32_t seed) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float g = (float)grads[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / beta1_correction;
    const float v_hat = vi / beta2_correction;
    const float old = master ? master[i] : (float)params[i];
    const float updated = old - lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * old);
    stochastic_round(updated, &params[i], position0 + (uint32_t)i, seed);
    if (master) master[i] = updated;
}

// master = float(params): done once, before the first update (or when resuming without master state)
__global__ void copy_to_fp32_kernel(float* dst, const floatX* src, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = (float)src[i];
}

// params = round(master), positions 0..n-1. No caller in the trainer (a resumed run reads its exact
// parameters from the checkpoint); dev/cuda/adamw.cu rounds through it to check the rounding is unbiased.
__global__ void round_from_fp32_kernel(floatX* dst, const float* src, size_t n, uint32_t seed) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) stochastic_round(src[i], &dst[i], (uint32_t)i, seed);
}

// ----------------------------------------------------------------------------
// launchers

struct AdamWParams {
    float lr;
    float beta1 = 0.9f;
    float beta2 = 0.95f;
    float eps = 1e-8f;
    float weight_decay;
    float grad_scale;  // min(1, max_norm / norm)
    int t;             // step number, 1-based
};

// position0: index of params[0] within its tensor (the rounding position), for shards.
inline void adamw_update(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                         uint32_t position0, const AdamWParams& p, uint32_t seed, cudaStream_t stream) {
    if (n == 0) return;
    const float beta1_correction = 1.0f - powf(p.beta1, (float)p.t);
    const float beta2_correction = 1.0f - powf(p.beta2, (float)p.t);
    const int block = 512;
    adamw_kernel<<<ceil_div(n, block), block, 0, stream>>>(params, master, grads, m, v, n, position0, p.lr, p.beta1, p.beta2,
                                                           beta1_correction, beta2_correction, p.eps,
                                                           p.weight_decay, p.grad_scale, seed);
    cudaCheckLaunch();
}

inline void copy_to_fp32(float* dst, const floatX* src, size_t n, cudaStream_t stream) {
    copy_to_fp32_kernel<<<ceil_div(n, 512), 512, 0, stream>>>(dst, src, n);
    cudaCheckLaunch();
}

inline void round_from_fp32(floatX* dst, const float* src, size_t n, uint32_t seed, cudaStream_t stream) {
    round_from_fp32_kernel<<<ceil_div(n, 512), 512, 0, stream>>>(dst, src, n, seed);
    cudaCheckLaunch();
}
