/*
 * GELU, tanh approximation (GPT-2): gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 *
 * gelu_forward:  out(N) = gelu(inp)                       (out =)
 * gelu_backward: dinp(N) = dout * gelu'(inp)              (dinp =; may alias dout: in-place)
 * Used when GELU is not fused into the matmul epilogue (-ge 0), and to recompute the GELU output in
 * the backward pass (-r >= 1).
 */
#pragma once

#include "llmc/cuda_common.h"

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2/pi)

// ----------------------------------------------------------------------------
// kernels

__device__ inline float gelu_scalar(float x) {
    const float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}

__device__ inline float gelu_grad_scalar(float x) {
    const float cube = 0.044715f * x * x * x;
    const float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
    const float tanh_out = tanhf(tanh_arg);
    const float sech2 = 1.0f - tanh_out * tanh_out;
    return 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, size_t N) {
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= N) return;
    x128 x = load128cs(inp + idx), o;
    for (int k = 0; k < x128::size; k++) o[k] = (floatX)gelu_scalar((float)x[k]);
    store128(out + idx, o);
}

__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, size_t N) {
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= N) return;
    x128 x = load128cs(inp + idx), d = load128(dout + idx), o;
    for (int k = 0; k < x128::size; k++) o[k] = (floatX)((float)d[k] * gelu_grad_scalar((float)x[k]));
    store128(dinp + idx, o);
}

// ----------------------------------------------------------------------------
// launchers

inline void gelu_forward(floatX* out, const floatX* inp, size_t N, cudaStream_t stream) {
    if (N % x128::size != 0) fatal("gelu_forward: N=%zu must be a multiple of %d", N, x128::size);
    const int block = 512;
    gelu_forward_kernel<<<ceil_div(N, (long)block * x128::size), block, 0, stream>>>(out, inp, N);
    cudaCheckLaunch();
}

inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t N, cudaStream_t stream) {
    if (N % x128::size != 0) fatal("gelu_backward: N=%zu must be a multiple of %d", N, x128::size);
    const int block = 512;
    gelu_backward_kernel<<<ceil_div(N, (long)block * x128::size), block, 0, stream>>>(dinp, inp, dout, N);
    cudaCheckLaunch();
}
