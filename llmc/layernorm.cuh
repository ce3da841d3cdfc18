/*
 * LayerNorm (eps 1e-5) over the last dimension C, and the fused residual-add + LayerNorm.
 *
 * layernorm_forward:      out(N,C) = (inp - mean) * rstd * weight + bias          (out =, mean/rstd(N) fp32 =)
 *                         out may be nullptr: only mean/rstd are produced (recompute level 2).
 * fused_residual_forward: residual(N,C) = inp1 + inp2 (residual =), then LayerNorm of residual as above.
 * layernorm_backward:     dinp(N,C) += dL/dinp                                    (dinp +=, the residual stream)
 *                         dweight(C) += sum dout*norm, dbias(C) += sum dout       (parameter grads +=)
 *                         one pass over the rows; deterministic per-block partial sums, no atomics
 * Statistics and all arithmetic in fp32; one warp per row.
 */
#pragma once

#include "llmc/column_reduce.cuh"

constexpr float LAYERNORM_EPS = 1e-5f;

// ----------------------------------------------------------------------------
// kernels

// One warp per row. If residual_out != nullptr, the row is inp1 + inp2 and is stored there first.
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, floatX* residual_out,
                                         const floatX* inp1, const floatX* inp2, const floatX* weight,
                                         const floatX* bias, int N, int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N) return;
    const floatX* x1 = inp1 + (size_t)row * C;
    const floatX* x2 = inp2 ? inp2 + (size_t)row * C : nullptr;
    floatX* res = residual_out ? residual_out + (size_t)row * C : nullptr;

    // pass 1: (residual add and) mean. The residual is rounded to floatX before the statistics, so
    // forward and backward (which reads the stored residual) see the same numbers.
    float sum = 0.f;
    for (int c = lane * x128::size; c < C; c += WARP_SIZE * x128::size) {
        x128 a = load128(x1 + c);
        if (x2) {
            x128 b = load128(x2 + c);
            for (int k = 0; k < x128::size; k++) a[k] = (floatX)((float)a[k] + (float)b[k]);
            store128(res + c, a);
        }
        for (int k = 0; k < x128::size; k++) sum += (float)a[k];
    }
    const float m = warp_reduce_sum(sum) / C;
    const floatX* x = res ? res : x1;  // re-read (from L1) the rounded row
    float sq = 0.f;
    for (int c = lane * x128::size; c < C; c += WARP_SIZE * x128::size) {
        x128 a = load128(x + c);
        for (int k = 0; k < x128::size; k++) {
            const float d = (float)a[k] - m;
            sq += d * d;
        }
    }
    const float s = rsqrtf(warp_reduce_sum(sq) / C + LAYERNORM_EPS);
    if (out) {
        for (int c = lane * x128::size; c < C; c += WARP_SIZE * x128::size) {
            x128 a = load128(x + c);
            x128 w = load128(weight + c);
            x128 b = load128(bias + c);
            x128 o;
            for (int k = 0; k < x128::size; k++) o[k] = (floatX)(((float)a[k] - m) * s * (float)w[k] + (float)b[k]);
            store128(out + (size_t)row * C + c, o);
        }
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

// Recompute the LayerNorm output from saved statistics (recompute level 2).
__global__ void layernorm_recompute_kernel(floatX* out, const floatX* inp, const float* mean, const float* rstd,
                                           const floatX* weight, const floatX* bias, int N, int C) {
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= (size_t)N * C) return;
    const int row = idx / C;
    const int c = idx % C;
    const float m = mean[row], s = rstd[row];
    x128 a = load128(inp + idx), w = load128(weight + c), b = load128(bias + c), o;
    for (int k = 0; k < x128::size; k++) o[k] = (floatX)(((float)a[k] - m) * s * (float)w[k] + (float)b[k]);
    store128(out + idx, o);
}

// LayerNorm backward in one pass over the rows. Warp per row:
//   dinp += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),  dnorm = dout * weight
// and the parameter gradients' per-block partial sums: each warp accumulates dout * norm and dout for
// its rows into its own shared-memory copy of (C) floats, each lane only ever touching its own
// channels (no atomics); the block then adds its warps' copies in a fixed order and writes
// partial_dw / partial_db (gridDim.x, C). column_finish_kernel adds the blocks in order.
__global__ void layernorm_backward_kernel(floatX* dinp, float* partial_dw, float* partial_db, const floatX* dout,
                                          const floatX* inp, const floatX* weight, const float* mean,
                                          const float* rstd, int N, int C) {
    extern __shared__ float smem[];  // (warps, 2, C): dw then db per warp
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    float* my_dw = smem + (size_t)warp * 2 * C;
    float* my_db = my_dw + C;
    // zero this warp's copy; lanes then accumulate only into their own channels, so a warp barrier suffices
    for (int c = lane; c < 2 * C; c += WARP_SIZE) my_dw[c] = 0.0f;
    __syncwarp();
    const int rows_per_block = ceil_div(N, gridDim.x);
    const int row_begin = blockIdx.x * rows_per_block;
    const int row_end = min(N, row_begin + rows_per_block);
    for (int row = row_begin + warp; row < row_end; row += num_warps) {
        const size_t off = (size_t)row * C;
        const float m = mean[row], s = rstd[row];
        float sum_dnorm = 0.f, sum_dnorm_norm = 0.f;
        for (int c = lane * x128::size; c < C; c += WARP_SIZE * x128::size) {
            x128 d = load128(dout + off + c), x = load128(inp + off + c), w = load128(weight + c);
            for (int k = 0; k < x128::size; k++) {
                const float norm = ((float)x[k] - m) * s;
                const float dn = (float)d[k] * (float)w[k];
                sum_dnorm += dn;
                sum_dnorm_norm += dn * norm;
                my_dw[c + k] += (float)d[k] * norm;
                my_db[c + k] += (float)d[k];
            }
        }
        const float mean_dnorm = warp_reduce_sum(sum_dnorm) / C;
        const float mean_dnorm_norm = warp_reduce_sum(sum_dnorm_norm) / C;
        for (int c = lane * x128::size; c < C; c += WARP_SIZE * x128::size) {
            x128 d = load128(dout + off + c), x = load128(inp + off + c), w = load128(weight + c);
            x128 g = load128(dinp + off + c);
            for (int k = 0; k < x128::size; k++) {
                const float norm = ((float)x[k] - m) * s;
                const float dn = (float)d[k] * (float)w[k];
                g[k] = (floatX)((float)g[k] + s * (dn - mean_dnorm - norm * mean_dnorm_norm));
            }
            store128(dinp + off + c, g);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float dw = 0.f, db = 0.f;
        for (int w = 0; w < num_warps; w++) {  // fixed order: deterministic
            dw += smem[(size_t)w * 2 * C + c];
            db += smem[(size_t)w * 2 * C + C + c];
        }
        partial_dw[(size_t)blockIdx.x * C + c] = dw;
        partial_db[(size_t)blockIdx.x * C + c] = db;
    }
}

// ----------------------------------------------------------------------------
// launchers

constexpr int LAYERNORM_BLOCK = 256;  // 8 rows per block

inline void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C, cudaStream_t stream) {
    if (C % x128::size != 0) fatal("layernorm: C=%d must be a multiple of %d", C, x128::size);
    const int rows_per_block = LAYERNORM_BLOCK / WARP_SIZE;
    layernorm_forward_kernel<<<ceil_div(N, rows_per_block), LAYERNORM_BLOCK, 0, stream>>>(
        out, mean, rstd, nullptr, inp, nullptr, weight, bias, N, C);
    cudaCheckLaunch();
}

inline void fused_residual_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* inp1,
                                   const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C,
                                   cudaStream_t stream) {
    if (C % x128::size != 0) fatal("layernorm: C=%d must be a multiple of %d", C, x128::size);
    const int rows_per_block = LAYERNORM_BLOCK / WARP_SIZE;
    layernorm_forward_kernel<<<ceil_div(N, rows_per_block), LAYERNORM_BLOCK, 0, stream>>>(
        out, mean, rstd, residual, inp1, inp2, weight, bias, N, C);
    cudaCheckLaunch();
}

inline void layernorm_recompute(floatX* out, const floatX* inp, const float* mean, const float* rstd,
                                const floatX* weight, const floatX* bias, int N, int C, cudaStream_t stream) {
    const int block = 256;
    layernorm_recompute_kernel<<<ceil_div((long)N * C, (long)block * x128::size), block, 0, stream>>>(
        out, inp, mean, rstd, weight, bias, N, C);
    cudaCheckLaunch();
}

// Shape of the backward's grid: blocks of LAYERNORM_BWD_WARPS warps, about two blocks per SM (a
// function of N and the SM count only, so results are reproducible on a given GPU).
constexpr int LAYERNORM_BWD_WARPS = 8;  // 4 and 16 gave no gain in the lab; shared memory = 64 C bytes

inline int layernorm_backward_blocks(int N) {
    const int blocks = 2 * device_props().multiProcessorCount;
    const int max_blocks = ceil_div(N, LAYERNORM_BWD_WARPS);  // at least one row per warp
    return blocks < max_blocks ? blocks : max_blocks;
}

inline size_t layernorm_backward_scratch_floats(int N, int C) { return (size_t)2 * layernorm_backward_blocks(N) * C; }

// scratch: layernorm_backward_scratch_floats(N, C) floats.
inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                               const floatX* inp, const floatX* weight, const float* mean, const float* rstd,
                               int N, int C, cudaStream_t stream) {
    if (C % x128::size != 0) fatal("layernorm_backward: C=%d must be a multiple of %d", C, x128::size);
    const int blocks = layernorm_backward_blocks(N);
    const size_t smem = (size_t)LAYERNORM_BWD_WARPS * 2 * C * sizeof(float);
    static size_t smem_enabled = 48 * 1024;  // the default limit; raised once for wide models
    if (smem > smem_enabled) {
        cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        smem_enabled = smem;
    }
    float* partial_dw = scratch;
    float* partial_db = scratch + (size_t)blocks * C;
    layernorm_backward_kernel<<<blocks, LAYERNORM_BWD_WARPS * WARP_SIZE, smem, stream>>>(
        dinp, partial_dw, partial_db, dout, inp, weight, mean, rstd, N, C);
    cudaCheckLaunch();
    column_finish(dweight, partial_dw, blocks, C, stream);
    column_finish(dbias, partial_db, blocks, C, stream);
}
