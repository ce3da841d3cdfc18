/*
 * Deterministic column reductions over a (N, OC) row-major matrix:
 *   bias_backward:  dbias(OC) += sum_r dout[r, :]                                      (+=)
 *   column_finish:  out(OC) += sum over chunks of partial(chunks, OC), in chunk order    (+=)
 *                   (also the last step of the LayerNorm parameter gradients)
 *
 * No atomics: (1) a grid of (column block, row chunk) blocks writes fp32 partial sums to scratch
 * (num_row_chunks, OC); (2) one thread per column adds the partials in chunk order and accumulates
 * into the floatX gradient. The number of row chunks depends only on the shape and the SM count, so
 * results are bitwise reproducible on a given GPU.
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

// Partial sums of dout over a chunk of rows: partial(blockIdx.y, columns of this block).
__global__ void column_partial_sums_kernel(float* partial, const floatX* dout, int N, int OC) {
    __shared__ float smem[COLUMN_REDUCE_WARPS][COLUMN_REDUCE_COLS];
    const int warp = threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    const int col0 = blockIdx.x * COLUMN_REDUCE_COLS + lane * x128::size;
    const int rows_per_chunk = ceil_div(N, gridDim.y);
    const int row_begin = blockIdx.y * rows_per_chunk;
    const int row_end = min(N, row_begin + rows_per_chunk);

    float sum[x128::size] = {};
    if (col0 < OC) {
#pragma unroll 4  // several 16-byte loads in flight per warp: one alone leaves the memory system idle
        for (int r = row_begin + warp; r < row_end; r += COLUMN_REDUCE_WARPS) {
            x128 d = load128(dout + (size_t)r * OC + col0);
            for (int k = 0; k < x128::size; k++) sum[k] += (float)d[k];
        }
    }
    for (int k = 0; k < x128::size; k++) smem[warp][lane * x128::size + k] = sum[k];
    __syncthreads();
    // fixed-order sum over warps, one column per thread
    for (int c = threadIdx.x; c < COLUMN_REDUCE_COLS; c += blockDim.x) {
        const int col = blockIdx.x * COLUMN_REDUCE_COLS + c;
        if (col >= OC) continue;
        float total = 0.f;
        for (int w = 0; w < COLUMN_REDUCE_WARPS; w++) total += smem[w][c];
        partial[(size_t)blockIdx.y * OC + col] = total;
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

// out(OC) += sum over the `chunks` rows of partial (chunks, OC), in row order.
inline void column_finish(floatX* out, const float* partial, int chunks, int OC, cudaStream_t stream) {
    column_finish_kernel<<<ceil_div(OC, 256), 256, 0, stream>>>(out, partial, chunks, OC);
    cudaCheckLaunch();
}

inline size_t column_reduce_scratch_floats(int N, int OC) {
    return (size_t)column_reduce_row_chunks(N, OC) * OC;
}

// dbias(OC) += column sums of dout(N, OC). scratch: column_reduce_scratch_floats(N, OC) floats.
inline void bias_backward(floatX* dbias, const floatX* dout, float* scratch, int N, int OC, cudaStream_t stream) {
    if (OC % x128::size != 0) fatal("bias_backward: OC=%d must be a multiple of %d", OC, x128::size);
    const int chunks = column_reduce_row_chunks(N, OC);
    dim3 grid(ceil_div(OC, COLUMN_REDUCE_COLS), chunks);
    column_partial_sums_kernel<<<grid, COLUMN_REDUCE_WARPS * WARP_SIZE, 0, stream>>>(scratch, dout, N, OC);
    cudaCheckLaunch();
    column_finish(dbias, scratch, chunks, OC, stream);
}
