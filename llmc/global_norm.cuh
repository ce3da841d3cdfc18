/*
 * Global L2 norm of the gradients, for clipping at 1.0.
 *
 *   partials(GLOBAL_NORM_BLOCKS) = per-block sums of g^2     (=, fp32 scratch)
 *   out(1) = sum of partials (+ any extra partials, e.g. other ranks' under ZeRO-1)   (=)
 * Deterministic: a fixed grid whose blocks stride over the buffer in a fixed pattern, then one block
 * adds the partials in order. The norm itself is sqrt(out), taken on the host.
 */
#pragma once

#include "llmc/cuda_common.h"

constexpr int GLOBAL_NORM_BLOCKS = 512;
constexpr int GLOBAL_NORM_THREADS = 512;

// ----------------------------------------------------------------------------
// kernels

__global__ void global_norm_partials_kernel(float* partials, const floatX* grads, size_t n) {
    float sum = 0.f;
    // 128-bit loads for the bulk, scalar tail
    const size_t n_vec = n / x128::size;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x) {
        x128 g = load128cs(grads + i * x128::size);
        for (int k = 0; k < x128::size; k++) sum += (float)g[k] * (float)g[k];
    }
    for (size_t i = n_vec * x128::size + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        sum += (float)grads[i] * (float)grads[i];
    }
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void global_norm_finish_kernel(float* out, const float* partials, int num_partials) {
    float sum = 0.f;
    for (int i = threadIdx.x; i < num_partials; i += blockDim.x) sum += partials[i];
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) *out = sum;
}

// ----------------------------------------------------------------------------
// launchers

// out: 1 float (sum of squares). partials: GLOBAL_NORM_BLOCKS floats. grads must be 16-byte aligned.
inline void global_norm_squared(float* out, float* partials, const floatX* grads, size_t n, cudaStream_t stream) {
    global_norm_partials_kernel<<<GLOBAL_NORM_BLOCKS, GLOBAL_NORM_THREADS, 0, stream>>>(partials, grads, n);
    cudaCheckLaunch();
    global_norm_finish_kernel<<<1, 1024, 0, stream>>>(out, partials, GLOBAL_NORM_BLOCKS);
    cudaCheckLaunch();
}
