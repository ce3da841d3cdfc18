/*
 * Deterministic column reductions over a (N, OC) row-major matrix, the shared core of every
 * parameter-gradient reduction over the batch that is not a matmul:
 *   bias gradient:        dbias(OC) += sum_r dout[r, :]                          (+=)
 *   LayerNorm gradients:  dw(C) += sum_r dout[r,:] * norm[r,:],  db(C) += sum_r dout[r,:]   (+=)
 *
 * Two launches, no atomics: (1) a grid of (column block, row chunk) blocks writes fp32 partial sums
 * to scratch (num_row_chunks, OC); (2) one thread per column adds the partials in chunk order and
 * accumulates into the floatX gradient. The number of row chunks depends only on the shape and the
 * SM count, so results are bitwise reproducible on a given GPU.
 */
#pragma once

#include "llmc/cuda_common.h"

constexpr int COLUMN_REDUCE_WARPS = 8;                      // warps per block, each takes rows in turn
constexpr int COLUMN_REDUCE_COLS = WARP_SIZE * x128::size;  // columns per block: 256 in bf16, 128 in fp32

// How the partial-sum grid is shaped; the caller sizes its scratch with column_reduce_scratch_floats.
inline int column_reduce_row_chunks(int N, int OC) {
    const int col_blocks = ceil_div(OC, COLUMN_REDUCE_COLS);
    int chunks = ceil_div(2L * device_props().multiProcessorCount, col_blocks);
    chunks = chunks < 1 ? 1 : chunks;
    const int max_chunks = ceil_div(N, COLUMN_REDUCE_WARPS);  // at least one row per warp
    return chunks > max_chunks ? max_chunks : chunks;
}

// ----------------------------------------------------------------------------
// kernels

// Partial sums of dout (and, when WithNorm, of dout * (inp - mean) * rstd) over a chunk of rows.
template <bool WithNorm>
__global__ void column_partial_sums_kernel(float* partial_db, float* partial_dw, const floatX* dout,
                                           const floatX* inp, const float* mean, const float* rstd,
                                           int N, int OC) {
    __shared__ float smem_db[COLUMN_REDUCE_WARPS][COLUMN_REDUCE_COLS];
    __shared__ float smem_dw[WithNorm ? COLUMN_REDUCE_WARPS : 1][COLUMN_REDUCE_COLS];
    const int warp = threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    const int col0 = blockIdx.x * COLUMN_REDUCE_COLS + lane * x128::size;
    const int rows_per_chunk = ceil_div(N, gridDim.y);
    const int row_begin = blockIdx.y * rows_per_chunk;
    const int row_end = min(N, row_begin + rows_per_chunk);

    float db[x128::size] = {};
    float dw[x128::size] = {};
    if (col0 < OC) {
        for (int r = row_begin + warp; r < row_end; r += COLUMN_REDUCE_WARPS) {
            x128 d = load128(dout + (size_t)r * OC + col0);
            for (int k = 0; k < x128::size; k++) db[k] += (float)d[k];
            if constexpr (WithNorm) {
                x128 x = load128(inp + (size_t)r * OC + col0);
                const float m = mean[r], s = rstd[r];
                for (int k = 0; k < x128::size; k++) dw[k] += (float)d[k] * (((float)x[k] - m) * s);
            }
        }
    }
    for (int k = 0; k < x128::size; k++) {
        smem_db[warp][lane * x128::size + k] = db[k];
        if constexpr (WithNorm) smem_dw[warp][lane * x128::size + k] = dw[k];
    }
    __syncthreads();
    // fixed-order sum over warps, one column per thread
    for (int c = threadIdx.x; c < COLUMN_REDUCE_COLS; c += blockDim.x) {
        const int col = blockIdx.x * COLUMN_REDUCE_COLS + c;
        if (col >= OC) continue;
        float sb = 0.f, sw = 0.f;
        for (int w = 0; w < COLUMN_REDUCE_WARPS; w++) {
            sb += smem_db[w][c];
            if constexpr (WithNorm) sw += smem_dw[w][c];
        }
        partial_db[(size_t)blockIdx.y * OC + col] = sb;
        if constexpr (WithNorm) partial_dw[(size_t)blockIdx.y * OC + col] = sw;
    }
}

__global__ void column_finish_kernel(floatX* out, const float* partial, int chunks, int OC) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= OC) return;
    float sum = 0.f;
    for (int i = 0; i < chunks; i++) sum += partial[(size_t)i * OC + col];
    out[col] = (floatX)((float)out[col] + sum);
}

// ----------------------------------------------------------------------------
// launchers

inline size_t column_reduce_scratch_floats(int N, int OC) {
    return (size_t)2 * column_reduce_row_chunks(N, OC) * OC;
}

// dbias(OC) += column sums of dout(N, OC). scratch: column_reduce_scratch_floats(N, OC) floats.
inline void bias_backward(floatX* dbias, const floatX* dout, float* scratch, int N, int OC, cudaStream_t stream) {
    if (OC % x128::size != 0) fatal("bias_backward: OC=%d must be a multiple of %d", OC, x128::size);
    const int chunks = column_reduce_row_chunks(N, OC);
    dim3 grid(ceil_div(OC, COLUMN_REDUCE_COLS), chunks);
    column_partial_sums_kernel<false><<<grid, COLUMN_REDUCE_WARPS * WARP_SIZE, 0, stream>>>(
        scratch, nullptr, dout, nullptr, nullptr, nullptr, N, OC);
    cudaCheckLaunch();
    column_finish_kernel<<<ceil_div(OC, 256), 256, 0, stream>>>(dbias, scratch, chunks, OC);
    cudaCheckLaunch();
}

// LayerNorm parameter gradients: dweight += sum dout*norm, dbias += sum dout, norm recomputed
// from inp, mean, rstd.
inline void layernorm_param_backward(floatX* dweight, floatX* dbias, const floatX* dout, const floatX* inp,
                                     const float* mean, const float* rstd, float* scratch, int N, int C,
                                     cudaStream_t stream) {
    if (C % x128::size != 0) fatal("layernorm_backward: C=%d must be a multiple of %d", C, x128::size);
    const int chunks = column_reduce_row_chunks(N, C);
    float* partial_db = scratch;
    float* partial_dw = scratch + (size_t)chunks * C;
    dim3 grid(ceil_div(C, COLUMN_REDUCE_COLS), chunks);
    column_partial_sums_kernel<true><<<grid, COLUMN_REDUCE_WARPS * WARP_SIZE, 0, stream>>>(
        partial_db, partial_dw, dout, inp, mean, rstd, N, C);
    cudaCheckLaunch();
    column_finish_kernel<<<ceil_div(C, 256), 256, 0, stream>>>(dbias, partial_db, chunks, C);
    cudaCheckLaunch();
    column_finish_kernel<<<ceil_div(C, 256), 256, 0, stream>>>(dweight, partial_dw, chunks, C);
    cudaCheckLaunch();
}
