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
 * relative error at most 2^-11 down to e ~ 2e-9, absolute ~1e-12 below, against the 2^-9 of the bf16
 * dlogits it produces; the loss is summed from the fp32 values. fp32 builds store e * 2^15 exactly.
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

// max of the 8 (bf16) or 4 (fp32) values. bf16: pairwise on packed bf16x2 (4 instructions per vector
// instead of 8 conversions and 7 float maxes; the max of bf16 values is exact in either).
__device__ inline float vector_max(const x128& v) {
    if constexpr (kFloatXIsBF16) {
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
        const __nv_bfloat162 m = __hmax2(__hmax2(p[0], p[1]), __hmax2(p[2], p[3]));
        return fmaxf(__low2float(m), __high2float(m));
    } else {
        float m = (float)v[0];
#pragma unroll
        for (int k = 1; k < x128::size; k++) m = fmaxf(m, (float)v[k]);
        return m;
    }
}

// The sum pass works with e' = 2^15 * exp(x - max) = exp2(x * log2(e) - (max * log2(e) - 15)): one FMA
// and one ex2 per value. e' in [0, 2^15] is what the row cache keeps (fp16 in bf16 builds, see the top
// of the file). The dlogits pass multiplies it by dloss / sum(e'): one multiply per value, the one-hot
// only in the target's vector. About half the instructions per value of scaling e on the way in and
// out and subtracting a one-hot everywhere (dev/cuda/PERF.md row 16).
constexpr float CLASSIFIER_EXP_SHIFT = 15.0f;  // log2 of the scale of e'

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
        for (int k = 0; k < Packed128<T>::size / 2; k++) h[k] = __floats2half2_rn(e[2 * k], e[2 * k + 1]);
    }
    return out;
}

// g[k] = e'[k] * scale
template <class T = floatX>
__device__ inline void classifier_unpack_scaled(const Packed128<T>& packed, float scale, float* g) {
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
        for (int k = 0; k < Packed128<T>::size; k++) g[k] = packed[k] * scale;
    } else {
        const __half2* h = reinterpret_cast<const __half2*>(&packed);
#pragma unroll
        for (int k = 0; k < Packed128<T>::size / 2; k++) {
            const float2 f = __half22float2(h[k]);
            g[2 * k] = f.x * scale;
            g[2 * k + 1] = f.y * scale;
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
    // e' of a vector (0 in the padding)
    constexpr float LOG2E = 1.4426950408889634f;
    auto exp_scaled = [&](const x128& v, float offset, float* e) {
#pragma unroll
        for (int k = 0; k < S; k++) e[k] = exp2f(fmaf((float)v[k], LOG2E, offset));
    };
    float max_val = -INFINITY;
    for (int j = threadIdx.x; j < vectors; j += blockDim.x) max_val = fmaxf(max_val, vector_max(vec(j)));
    const float block_max = block_reduce_max(max_val);
    const float offset = CLASSIFIER_EXP_SHIFT - block_max * LOG2E;
    float sum = 0.f;
    for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
        float e[S];
        exp_scaled(vec(j), offset, e);
#pragma unroll
        for (int k = 0; k < S; k++) sum += e[k];
        if (WriteDLogits && j < cached) row_cache[j] = classifier_pack_exp(e);  // only this thread reads it back
    }
    const float block_sum = block_reduce_sum(sum);  // sum of e' = 2^15 * sum of e
    const float log_norm = block_max + logf(block_sum) - CLASSIFIER_EXP_SHIFT * 0.6931471805599453f;

    if (threadIdx.x == 0) losses[row] += log_norm - target_logit;

    if constexpr (WriteDLogits) {
        const float scale = dloss / block_sum;  // dloss * softmax = scale * e'
        const int target_vector = target / S;
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float g[S];  // dloss * softmax; 0 in the padding
            if (j < cached) {
                classifier_unpack_scaled(row_cache[j], scale, g);
            } else {
                exp_scaled(vec(j), offset, g);
#pragma unroll
                for (int k = 0; k < S; k++) g[k] *= scale;
            }
            if (j == target_vector) {  // the one-hot: one vector per row, one column of it
#pragma unroll
                for (int k = 0; k < S; k++) {
                    if (j * S + k == target) g[k] -= dloss;
                }
            }
            x128 out;
#pragma unroll
            for (int k = 0; k < S; k++) out[k] = (floatX)g[k];
            store128cs(x + j * S, out);
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
