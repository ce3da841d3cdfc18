/*
 * Fused classifier: softmax + cross-entropy + logit gradients in one kernel, over the real
 * vocabulary V of the padded (N, Vp) logits. Probabilities are never stored.
 *
 *   losses(N) += -log softmax(logits[n, :V])[targets[n]]        (losses +=, fp32; summed over micro-steps)
 *   logits(N,Vp) = dloss * (softmax - onehot(target))           (logits overwritten IN PLACE with dlogits
 *                                                                when write_dlogits; padded columns = 0)
 * dloss = 1 / (B*T*grad_accum_steps): the loss is a mean over every token of the optimizer step.
 * One block per row; the row is read twice (statistics, then gradients) and written once.
 */
#pragma once

#include "llmc/cuda_common.h"

// ----------------------------------------------------------------------------
// kernels

template <bool WriteDLogits>
__global__ void __launch_bounds__(1024) fused_classifier_kernel(floatX* logits, float* losses, const int* targets,
                                                                float dloss, int V, int Vp) {
    const int row = blockIdx.x;
    floatX* x = logits + (size_t)row * Vp;
    const int target = targets[row];
    const float target_logit = (float)x[target];  // read before any thread overwrites the row

    // online max / sum of exp over the real vocabulary, 8 values per thread per step
    float max_val = -INFINITY, sum = 0.f;
    for (int i = threadIdx.x * x128::size; i < V; i += blockDim.x * x128::size) {
        x128 v = load128(x + i);  // Vp >= V and Vp % 8 == 0, so the load stays in the row
        for (int k = 0; k < x128::size && i + k < V; k++) {
            const float f = (float)v[k];
            if (f > max_val) {
                sum *= expf(max_val - f);
                max_val = f;
            }
            sum += expf(f - max_val);
        }
    }
    // combine (max, sum) pairs across the block
    const float block_max = block_reduce_max(max_val);
    sum = (max_val == -INFINITY) ? 0.f : sum * expf(max_val - block_max);
    const float block_sum = block_reduce_sum(sum);
    const float log_sum = logf(block_sum);

    if (threadIdx.x == 0) losses[row] += block_max + log_sum - target_logit;

    if constexpr (WriteDLogits) {
        const float inv_sum = 1.0f / block_sum;
        for (int i = threadIdx.x * x128::size; i < Vp; i += blockDim.x * x128::size) {
            x128 v = load128cs(x + i);
            x128 g;
            for (int k = 0; k < x128::size; k++) {
                const int col = i + k;
                float grad = 0.f;
                if (col < V) {
                    const float p = expf((float)v[k] - block_max) * inv_sum;
                    grad = (p - (col == target ? 1.0f : 0.0f)) * dloss;
                }
                g[k] = (floatX)grad;
            }
            store128cs(x + i, g);
        }
    }
}

// ----------------------------------------------------------------------------
// launchers

// targets must be in [0, V): the data loader validates tokens before they reach the GPU.
inline void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp,
                             bool write_dlogits, cudaStream_t stream) {
    if (Vp % x128::size != 0) fatal("fused_classifier: Vp=%d must be a multiple of %d", Vp, x128::size);
    const int block = 1024;
    if (write_dlogits) {
        fused_classifier_kernel<true><<<N, block, 0, stream>>>(logits, losses, targets, dloss, V, Vp);
    } else {
        fused_classifier_kernel<false><<<N, block, 0, stream>>>(logits, losses, targets, dloss, V, Vp);
    }
    cudaCheckLaunch();
}
