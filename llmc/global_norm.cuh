/*
 * Global L2 norm of the gradients, for clipping at 1.0.
 *
 *   partials(GLOBAL_NORM_BLOCKS) = per-block sums of g^2     (=, fp32 scratch)
 *   out(1) = sum of partials                                 (=)
 * Deterministic: a fixed grid whose blocks stride over the buffer in a fixed pattern, then one block
 * adds the partials in order. The norm itself is sqrt(out), taken on the host. Under ZeRO-1 out is
 * this rank's part only; llmc/gpt2.cuh (gpt2_grad_norm) adds the ranks' parts with an NCCL all-reduce.
 *
 *   global_norm_squared(out, partials, grads, n): over grads[0, n).
 *   global_norm_squared_spans(out, partials, grads, spans): over the concatenation of the spans
 *     grads[offset, offset + size) (a ZeRO-1 rank's chunks, llmc/zero_shards.h), read as if they were one
 *     buffer of spans.total elements: the same threads add the same elements in the same order as
 *     global_norm_squared over a buffer holding that concatenation, so when the spans tile [0, n) in
 *     order (one process) the result is bitwise that of global_norm_squared(grads, n). 128-bit loads
 *     when every span starts and ends on a 16-byte boundary, else scalar loads.
 *     The span table lives on the GPU: global_norm_spans_upload once, global_norm_spans_free at the end.
 */
#pragma once

#include <algorithm>
#include <vector>

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

struct GlobalNormSpan {
    size_t offset;  // first element in grads
    size_t size;    // elements
};

// Unit u (W elements) of the concatenation lies in span c when start <= u < start + spans[c].size / W;
// each thread walks the table forward as its u grows: one pass over the table per thread.
template <bool VEC>
__global__ void global_norm_spans_partials_kernel(float* partials, const floatX* grads, const GlobalNormSpan* spans,
                                                  size_t total) {
    constexpr size_t W = VEC ? x128::size : 1;  // elements per load
    float sum = 0.f;
    int c = 0;
    size_t start = 0;
    for (size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x; u < total / W; u += (size_t)gridDim.x * blockDim.x) {
        while (u >= start + spans[c].size / W) {
            start += spans[c].size / W;
            c++;
        }
        const floatX* p = grads + spans[c].offset + (u - start) * W;
        if constexpr (VEC) {
            x128 g = load128cs(p);
            for (int k = 0; k < x128::size; k++) sum += (float)g[k] * (float)g[k];
        } else {
            sum += (float)*p * (float)*p;
        }
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

struct GlobalNormSpans {
    GlobalNormSpan* device = nullptr;  // the table
    size_t total = 0;                  // elements over all spans
    bool vec = false;                  // every span offset and size a multiple of x128::size
};

inline GlobalNormSpans global_norm_spans_upload(const std::vector<GlobalNormSpan>& spans) {
    GlobalNormSpans s;
    s.vec = true;
    for (const GlobalNormSpan& sp : spans) {
        s.total += sp.size;
        s.vec = s.vec && sp.offset % x128::size == 0 && sp.size % x128::size == 0;
    }
    cudaCheck(cudaMalloc(&s.device, std::max<size_t>(spans.size(), 1) * sizeof(GlobalNormSpan)));
    cudaCheck(cudaMemcpy(s.device, spans.data(), spans.size() * sizeof(GlobalNormSpan), cudaMemcpyHostToDevice));
    return s;
}

inline void global_norm_spans_free(GlobalNormSpans* s) {
    cudaFreeCheck(&s->device);
    *s = GlobalNormSpans();
}

// out: 1 float (sum of squares). partials: GLOBAL_NORM_BLOCKS floats. grads must be 16-byte aligned.
inline void global_norm_squared_spans(float* out, float* partials, const floatX* grads, const GlobalNormSpans& spans,
                                      cudaStream_t stream) {
    if (spans.vec) {
        global_norm_spans_partials_kernel<true><<<GLOBAL_NORM_BLOCKS, GLOBAL_NORM_THREADS, 0, stream>>>(
            partials, grads, spans.device, spans.total);
    } else {
        global_norm_spans_partials_kernel<false><<<GLOBAL_NORM_BLOCKS, GLOBAL_NORM_THREADS, 0, stream>>>(
            partials, grads, spans.device, spans.total);
    }
    cudaCheckLaunch();
    global_norm_finish_kernel<<<1, 1024, 0, stream>>>(out, partials, GLOBAL_NORM_BLOCKS);
    cudaCheckLaunch();
}
