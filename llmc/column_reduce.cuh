/*
 * Deterministic column reductions over a (N, OC) row-major matrix:
 *   bias_backward:  dbias(OC) += sum_r dout[r, :]                                      (+=)
 *   column_finish:  out(OC) += sum over chunks of partial(chunks, OC), fixed order       (+=, or = when
 *                   told not to accumulate: the first micro-step's parameter gradients)
 *                   (also the last step of the LayerNorm parameter gradients)
 *
 * No atomics: (1) a grid of (column block, row chunk) blocks writes fp32 partial sums to scratch
 * (num_row_chunks, OC); (2) column_finish adds the partials in a fixed order and accumulates into
 * the floatX gradient. The number of row chunks depends only on the shape and the SM count, so
 * results are bitwise reproducible on a given GPU.
 */
#pragma once

#include "llmc/cuda_common.h"
#include "llmc/gpu_context.cuh"

constexpr int COLUMN_REDUCE_WARPS = 8;                      // warps per block, each takes rows in turn
constexpr int COLUMN_REDUCE_COLS = WARP_SIZE * x128::size;  // columns per block: 256 in bf16, 128 in fp32

// How the partial-sum grid is shaped; the caller sizes its scratch with column_reduce_scratch_floats.
inline int column_reduce_row_chunks(const GpuContext& ctx, int N, int OC) {
    const int col_blocks = ceil_div(OC, COLUMN_REDUCE_COLS);
    int chunks = ceil_div(2L * ctx.props.multiProcessorCount, col_blocks);
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

// out[a](OC) += sum over chunks of partial(a, chunks, OC), for a = blockIdx.y. Block (32 columns, 8
// row groups): group g adds chunks g, g + 8, ... in order, then the 8 group sums are added in group
// order (a fixed order: deterministic). Eight chunks of a column are read at once: faster than one
// thread per column reading them one after another, one launch per output (dev/cuda/PERF.md row 13).
// Issuing 16 of a group's loads before adding them (same order, same bits) measured no faster (PERF.md,
// the "tried, removed" row of column_finish).
constexpr int COLUMN_FINISH_GROUPS = 8;
constexpr int COLUMN_FINISH_MAX_OUTPUTS = 3;
struct ColumnFinishOutputs {
    floatX* out[COLUMN_FINISH_MAX_OUTPUTS];
};

__global__ void column_finish_kernel(ColumnFinishOutputs outs, const float* partial, int chunks, int OC,
                                     bool accumulate) {
    __shared__ float group_sums[COLUMN_FINISH_GROUPS][WARP_SIZE];
    const int col = blockIdx.x * WARP_SIZE + threadIdx.x;
    const float* p = partial + (size_t)blockIdx.y * chunks * OC;
    float sum = 0.f;
    if (col < OC) {
        for (int i = threadIdx.y; i < chunks; i += COLUMN_FINISH_GROUPS) sum += p[(size_t)i * OC + col];
    }
    group_sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y != 0 || col >= OC) return;
    float total = 0.f;
    for (int g = 0; g < COLUMN_FINISH_GROUPS; g++) total += group_sums[g][threadIdx.x];
    floatX* out = outs.out[blockIdx.y];
    out[col] = accumulate ? (floatX)((float)out[col] + total) : (floatX)total;
}

// ----------------------------------------------------------------------------
// launchers

// outs[a](OC) += the sum over chunks of partial (a, chunks, OC), for a < n_outputs; one launch.
// accumulate = false: outs[a] = the sum (outs not read).
inline void column_finish(floatX* const* outs, int n_outputs, const float* partial, int chunks, int OC,
                          cudaStream_t stream, bool accumulate = true) {
    if (n_outputs < 1 || n_outputs > COLUMN_FINISH_MAX_OUTPUTS) fatal("column_finish: %d outputs", n_outputs);
    ColumnFinishOutputs o{};
    for (int a = 0; a < n_outputs; a++) o.out[a] = outs[a];
    column_finish_kernel<<<dim3(ceil_div(OC, WARP_SIZE), n_outputs), dim3(WARP_SIZE, COLUMN_FINISH_GROUPS), 0,
                           stream>>>(o, partial, chunks, OC, accumulate);
    cudaCheckLaunch();
}

inline size_t column_reduce_scratch_floats(const GpuContext& ctx, int N, int OC) {
    return (size_t)column_reduce_row_chunks(ctx, N, OC) * OC;
}

// dbias(OC) += (accumulate) or = column sums of dout(N, OC). scratch: column_reduce_scratch_floats(ctx, N, OC) floats.
inline void bias_backward(const GpuContext& ctx, floatX* dbias, const floatX* dout, float* scratch, int N, int OC,
                          cudaStream_t stream, bool accumulate = true) {
    if (OC % x128::size != 0) fatal("bias_backward: OC=%d must be a multiple of %d", OC, x128::size);
    const int chunks = column_reduce_row_chunks(ctx, N, OC);
    dim3 grid(ceil_div(OC, COLUMN_REDUCE_COLS), chunks);
    column_partial_sums_kernel<<<grid, COLUMN_REDUCE_WARPS * WARP_SIZE, 0, stream>>>(scratch, dout, N, OC);
    cudaCheckLaunch();
    column_finish(&dbias, 1, scratch, chunks, OC, stream, accumulate);
}
