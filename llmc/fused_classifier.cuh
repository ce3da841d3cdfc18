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
 *
 * Three passes over the row: max; e = exp(x - max), summed; dlogits from e. When dlogits are written,
 * the sum pass stores e in the row's place in shared memory, so the last pass needs no second exp (the
 * exps were the kernel's largest compute cost). bf16 builds store e as fp16 scaled by 2^15 (e <= 1):
 * relative error 2^-12 down to e ~ 2e-9, absolute ~1e-12 below, against the 2^-9 of the bf16
 * dlogits it produces; the loss is summed from the fp32 e, unchanged. fp32 builds store e exactly.
 */
#pragma once

#include <cuda_fp16.h>
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

// e (x128::size values in [0, 1]) packed into the 16 bytes of one cached vector, and back (scaled by
// 1/sum on the way out). bf16 builds: fp16 of e * 2^15; fp32 builds: e itself.
constexpr float CLASSIFIER_EXP_SCALE = 32768.0f;

// (templates, so that only the branch of the build's floatX is compiled)
template <class T = floatX>
__device__ inline Packed128<T> classifier_pack_exp(const float* e) {
    Packed128<T> out;
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
        for (int k = 0; k < Packed128<T>::size; k++) out[k] = e[k];
    } else {
        __half2* h = reinterpret_cast<__half2*>(&out);
#pragma unroll
        for (int k = 0; k < Packed128<T>::size / 2; k++) {
            h[k] = __floats2half2_rn(e[2 * k] * CLASSIFIER_EXP_SCALE, e[2 * k + 1] * CLASSIFIER_EXP_SCALE);
        }
    }
    return out;
}

// p[k] = e[k] / sum, given inv_sum = 1 / sum
template <class T = floatX>
__device__ inline void classifier_unpack_probs(const Packed128<T>& packed, float inv_sum, float* p) {
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
        for (int k = 0; k < Packed128<T>::size; k++) p[k] = packed[k] * inv_sum;
    } else {
        const __half2* h = reinterpret_cast<const __half2*>(&packed);
        const float scale = inv_sum * (1.0f / CLASSIFIER_EXP_SCALE);
#pragma unroll
        for (int k = 0; k < Packed128<T>::size / 2; k++) {
            const float2 f = __half22float2(h[k]);
            p[2 * k] = f.x * scale;
            p[2 * k + 1] = f.y * scale;
        }
    }
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
        float e[S];
#pragma unroll
        for (int k = 0; k < S; k++) {
            e[k] = expf((float)v[k] - block_max);  // 0 in the padding
            sum += e[k];
        }
        if (WriteDLogits && j < cached) row_cache[j] = classifier_pack_exp(e);  // only this thread reads it back
    }
    const float block_sum = block_reduce_sum(sum);
    const float log_norm = block_max + logf(block_sum);

    if (threadIdx.x == 0) losses[row] += log_norm - target_logit;

    if constexpr (WriteDLogits) {
        const float inv_sum = 1.0f / block_sum;
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float p[S];  // softmax; 0 in the padding
            if (j < cached) {
                classifier_unpack_probs(row_cache[j], inv_sum, p);
            } else {
                const x128 v = vec(j);
#pragma unroll
                for (int k = 0; k < S; k++) p[k] = expf((float)v[k] - log_norm);
            }
            x128 g;
#pragma unroll
            for (int k = 0; k < S; k++) g[k] = (floatX)((p[k] - (j * S + k == target ? 1.0f : 0.0f)) * dloss);
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
