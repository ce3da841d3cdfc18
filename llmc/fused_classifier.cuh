/*
 * Fused classifier: softmax + cross-entropy + logit gradients in one kernel, over the real
 * vocabulary V of the padded (N, Vp) logits. Probabilities are never stored.
 *
 *   losses(N) += -log softmax(logits[n, :V])[targets[n]]        (losses +=, fp32; summed over micro-steps)
 *   logits(N,Vp) = dloss * (softmax - onehot(target))           (logits overwritten IN PLACE with dlogits
 *                                                                when write_dlogits; padded columns = 0)
 * dloss = 1 / (B*T*grad_accum_steps): the loss is a mean over every token of the optimizer step.
 * One block per row; the row is read once into shared memory (up to 110 KB of it: 56,320 bf16
 * columns; wider rows read their remainder again in each pass) and written once.
 */
#pragma once

#include <cuda_pipeline.h>
#include "llmc/cuda_common.h"

// ----------------------------------------------------------------------------
// kernels

constexpr int CLASSIFIER_BLOCK = 512;
// Bytes of the row kept in shared memory: two blocks per SM fit (2 x 110 KB of the H100/H200's
// 228 KB), and the padded GPT-2 row (50,304 bf16 = 98.3 KB) fits whole.
constexpr int CLASSIFIER_SMEM_MAX = 110 * 1024;

inline int classifier_cached_vectors(int Vp) {
    const int max_vectors = CLASSIFIER_SMEM_MAX / 16;
    const int row_vectors = Vp / x128::size;
    return row_vectors < max_vectors ? row_vectors : max_vectors;
}

// max of the 8 (bf16) or 4 (fp32) values
__device__ inline float vector_max(const x128& v) {
    float m = (float)v[0];
#pragma unroll
    for (int k = 1; k < x128::size; k++) m = fmaxf(m, (float)v[k]);
    return m;
}

// The first `cached` 16-byte vectors of the row are copied once into shared memory (cp.async, all in
// flight at once); vectors past them (vocabularies wider than 110 KB of logits) are read again from
// memory in each pass. Padded columns (>= V) are replaced by -inf as they are read, so no pass needs
// a bounds test: they add exp(-inf) = 0 to the sum and get gradient 0.
template <bool WriteDLogits>
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
    fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp, int cached) {
    extern __shared__ x128 row_cache[];  // (cached)
    constexpr int S = x128::size;
    const int row = blockIdx.x;
    floatX* x = logits + (size_t)row * Vp;
    const int target = targets[row];
    const float target_logit = (float)x[target];  // read before any thread overwrites the row
    const int vectors = Vp / S;

    for (int j = threadIdx.x; j < cached; j += blockDim.x) __pipeline_memcpy_async(row_cache + j, x + j * S, 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    // a vector of the row, the columns >= V set to -inf
    auto vec = [&](int j) {
        x128 v = j < cached ? row_cache[j] : load128cs(x + j * S);
        if ((j + 1) * S > V) {
#pragma unroll
            for (int k = 0; k < S; k++) {
                if (j * S + k >= V) v[k] = (floatX)(-INFINITY);
            }
        }
        return v;
    };
    float max_val = -INFINITY;
    for (int j = threadIdx.x; j < vectors; j += blockDim.x) max_val = fmaxf(max_val, vector_max(vec(j)));
    const float block_max = block_reduce_max(max_val);
    float sum = 0.f;
    for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
        const x128 v = vec(j);
#pragma unroll
        for (int k = 0; k < S; k++) sum += expf((float)v[k] - block_max);
    }
    const float block_sum = block_reduce_sum(sum);
    const float log_norm = block_max + logf(block_sum);

    if (threadIdx.x == 0) losses[row] += log_norm - target_logit;

    if constexpr (WriteDLogits) {
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            const x128 v = vec(j);
            x128 g;
#pragma unroll
            for (int k = 0; k < S; k++) {
                const float p = expf((float)v[k] - log_norm);  // softmax; 0 in the padding
                g[k] = (floatX)((p - (j * S + k == target ? 1.0f : 0.0f)) * dloss);
            }
            store128cs(x + j * S, g);
        }
    }
}

// ----------------------------------------------------------------------------
// launchers

// targets must be in [0, V): the data loader validates tokens before they reach the GPU.
inline void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp,
                             bool write_dlogits, cudaStream_t stream) {
    if (Vp % x128::size != 0) fatal("fused_classifier: Vp=%d must be a multiple of %d", Vp, x128::size);
    const int cached = classifier_cached_vectors(Vp);
    const size_t smem = (size_t)cached * sizeof(x128);
    if (write_dlogits) {
        allow_dynamic_smem(fused_classifier_kernel<true>, smem);
        fused_classifier_kernel<true><<<N, CLASSIFIER_BLOCK, smem, stream>>>(logits, losses, targets, dloss, V, Vp, cached);
    } else {
        allow_dynamic_smem(fused_classifier_kernel<false>, smem);
        fused_classifier_kernel<false><<<N, CLASSIFIER_BLOCK, smem, stream>>>(logits, losses, targets, dloss, V, Vp, cached);
    }
    cudaCheckLaunch();
}
