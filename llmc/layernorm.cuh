/*
 * LayerNorm (eps 1e-5) over the last dimension C. (The residual add before it rides in the epilogue of
 * the projection GEMM that produces the residual stream: llmc/matmul.cuh.)
 *
 * layernorm_forward:      out(N,C) = (inp - mean) * rstd * weight + bias          (out =, mean/rstd(N) fp32 =)
 *                         out may be nullptr: only mean/rstd are produced (the lab, dev/cuda/layernorm.cu,
 *                         checks that path; the model always writes out, one buffer at recompute level 2).
 * layernorm_backward:     dinp(N,C) += dL/dinp                                    (dinp +=, the residual stream)
 *                         dweight(C) += sum dout*norm, dbias(C) += sum dout       (parameter grads +=, or =)
 *                         dinp_colsum(C) += sum of the updated dinp rows          (optional, +=: the bias
 *                         gradient of the matmul whose output was added to this residual)
 *                         one pass over the rows; deterministic per-block partial sums, no atomics
 * Statistics and all arithmetic in fp32. Forward: one warp per row. Backward: for C up to 256 vectors of
 * x128::size (2048 in BF16 builds: every GPT-2 width; 1024 in FP32 builds, so there C = 1280 and 1600
 * take the other kernel) a block per row group, each thread owning one vector of channels
 * (layernorm_backward_columns_kernel); wider rows one warp per row with per-warp shared-memory
 * accumulators (layernorm_backward_kernel). The rule: layernorm_backward_uses_columns.
 */
#pragma once

#include "llmc/column_reduce.cuh"

constexpr float LAYERNORM_EPS = 1e-5f;

// ----------------------------------------------------------------------------
// kernels

// Row r of an output with row stride out_ld > C is followed by out_ld - C padding columns written as
// (1, 0, ..., 0): the ones column through which the next matmul's weight-gradient GEMM also yields
// its bias gradient (llmc/matmul.cuh, MATMUL_BIAS_PAD).
// Written by threads first, first + step, ... of the row.
__device__ inline void layernorm_write_ones_column(floatX* out_row, int C, int out_ld, int first, int step) {
    for (int p = first; p < out_ld - C; p += step) out_row[C + p] = (floatX)(p == 0 ? 1.0f : 0.0f);
}

// One warp per row; lane l handles the 8-element vectors l, l + 32, l + 64, ... of it.
// VPL > 0: the row is held in registers, VPL vectors per lane (C <= VPL * 256), all loads issued
// before any arithmetic; VPL == 0: any C, the row re-read for each pass. Same summation order both
// ways. out: row stride out_ld (>= C; padding as layernorm_write_ones_column).
template <int VPL>
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                         const floatX* weight, const floatX* bias, int N, int C, int out_ld) {
    constexpr int V = x128::size;
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N) return;
    const floatX* x = inp + (size_t)row * C;
    constexpr int R = VPL > 0 ? VPL : 1;
    x128 v[R];
    if constexpr (VPL > 0) {
#pragma unroll
        for (int i = 0; i < VPL; i++) {
            const int c = (i * WARP_SIZE + lane) * V;
            if (c < C) v[i] = load128cs(x + c);
        }
    }
    // the i-th vector of this lane, from registers or re-read
    auto vec = [&](int i, int c) -> x128 {
        if constexpr (VPL > 0) return v[i];
        else return load128(x + c);
    };
    float sum = 0.f;
#pragma unroll
    for (int i = 0, c = lane * V; c < C && (VPL == 0 || i < VPL); i++, c += WARP_SIZE * V) {
        const x128 a = vec(i, c);
        for (int k = 0; k < V; k++) sum += (float)a[k];
    }
    const float m = warp_reduce_sum(sum) / C;
    float sq = 0.f;
#pragma unroll
    for (int i = 0, c = lane * V; c < C && (VPL == 0 || i < VPL); i++, c += WARP_SIZE * V) {
        const x128 a = vec(i, c);
        for (int k = 0; k < V; k++) {
            const float d = (float)a[k] - m;
            sq += d * d;
        }
    }
    const float s = rsqrtf(warp_reduce_sum(sq) / C + LAYERNORM_EPS);
    if (out) {
#pragma unroll
        for (int i = 0, c = lane * V; c < C && (VPL == 0 || i < VPL); i++, c += WARP_SIZE * V) {
            const x128 a = vec(i, c);
            const x128 w = load128(weight + c);
            const x128 b = load128(bias + c);
            x128 o;
            for (int k = 0; k < V; k++) o[k] = (floatX)(((float)a[k] - m) * s * (float)w[k] + (float)b[k]);
            store128(out + (size_t)row * out_ld + c, o);
        }
        layernorm_write_ones_column(out + (size_t)row * out_ld, C, out_ld, lane, WARP_SIZE);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

// Recompute the LayerNorm output from saved statistics (recompute level 2).
__global__ void layernorm_recompute_kernel(floatX* out, const floatX* inp, const float* mean, const float* rstd,
                                           const floatX* weight, const floatX* bias, int N, int C, int out_ld) {
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= (size_t)N * C) return;
    const int row = idx / C;
    const int c = idx % C;
    const float m = mean[row], s = rstd[row];
    x128 a = load128(inp + idx), w = load128(weight + c), b = load128(bias + c), o;
    for (int k = 0; k < x128::size; k++) o[k] = (floatX)(((float)a[k] - m) * s * (float)w[k] + (float)b[k]);
    floatX* out_row = out + (size_t)row * out_ld;
    store128(out_row + c, o);
    if (c == 0) layernorm_write_ones_column(out_row, C, out_ld, 0, 1);  // the row's first thread
}

#ifndef LAYERNORM_BWD_ROWS_PER_WARP  // rows per warp in flight; -D override for lab sweeps
#define LAYERNORM_BWD_ROWS_PER_WARP 4
#endif

// The backward's per-element arithmetic, one definition for both kernels below:
//   norm = (x - mean) * rstd, dnorm = dout * weight,
//   dinp += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
struct LayerNormBwdTerms {
    float n, dn;  // norm, dnorm
};
__device__ __forceinline__ LayerNormBwdTerms layernorm_bwd_terms(float x, float dout, float weight, float mean,
                                                                 float rstd) {
    return {(x - mean) * rstd, dout * weight};
}
__device__ __forceinline__ float layernorm_bwd_dinp(float dinp, float rstd, LayerNormBwdTerms t, float mean_dn,
                                                    float mean_dnn) {
    return dinp + rstd * (t.dn - mean_dn - t.n * mean_dnn);
}

// LayerNorm backward in one pass over the rows. Warp per row (R of them at a time):
//   dinp += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),  dnorm = dout * weight
// and per-block partial sums of the column sums: dweight (dout * norm), dbias (dout) and, when
// SumDinp, the updated dinp itself (the bias gradient of the matmul whose output was added to this
// residual). Each warp accumulates its rows into its own shared-memory copy, and each lane only ever
// touches its own channels, so no atomics are needed. The copy is stored transposed, channel
// c = (j*32 + lane)*V + k at [(j*V + k)*32 + lane] (V = x128::size), so the 32 lanes of a warp hit 32
// different banks (the row-major layout made every accumulator update an 8-way bank conflict). The
// block then adds its warps' copies in a fixed order into partials (NACC, gridDim.x, C);
// column_finish adds the blocks in a fixed order (one launch for all of them). Any C: the rows'
// vectors are loaded per 256-channel step and dout / inp read again in the second pass (from L2,
// mostly). Taken where the column-owner kernel below is not (layernorm_backward_uses_columns: C above
// 2048 in BF16 builds, above 1024 in FP32 builds) and for A/B builds with -DLAYERNORM_BWD_COLUMNS=0. (A
// row-in-registers variant of it for C <= 2048, PERF.md row 24, was replaced by the column-owner kernel.)

template <bool SumDinp>
__global__ void layernorm_backward_kernel(floatX* dinp, float* partials, const floatX* dout, const floatX* inp,
                                          const floatX* weight, const float* mean, const float* rstd, int N, int C,
                                          int slots) {
    constexpr int NACC = SumDinp ? 3 : 2;
    constexpr int V = x128::size;
    constexpr int R = LAYERNORM_BWD_ROWS_PER_WARP;
    extern __shared__ float smem[];  // (warps, NACC, slots)
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    float* acc = smem + (size_t)warp * NACC * slots;
    // slot i belongs to lane i % 32 (slots is a multiple of 32): each lane zeroes its own
    for (int i = lane; i < NACC * slots; i += WARP_SIZE) acc[i] = 0.0f;
    __syncwarp();
    float* acc_dw = acc;
    float* acc_db = acc + slots;
    float* acc_dr = acc + 2 * slots;  // only when SumDinp
    const int rows_per_block = ceil_div(N, gridDim.x);
    const int row_begin = blockIdx.x * rows_per_block;
    const int row_end = min(N, row_begin + rows_per_block);
    // R rows per warp at a time (rows r, r + num_warps, ...): more loads in flight, and one
    // shared-memory update per channel for all of them. Missing rows (past the block's range) repeat
    // the first row with weight 0 and are not stored.
    for (int row = row_begin + warp; row < row_end; row += R * num_warps) {
        size_t off[R];
        float m[R], s[R], wr[R], sum_dn[R], sum_dnn[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int rr = row + r * num_warps;
            const bool valid = rr < row_end;
            off[r] = (size_t)(valid ? rr : row) * C;
            m[r] = mean[valid ? rr : row];
            s[r] = rstd[valid ? rr : row];
            wr[r] = valid ? 1.0f : 0.0f;
            sum_dn[r] = 0.f;
            sum_dnn[r] = 0.f;
        }
        // first pass at one 256-channel step: row sums, column partial sums of dweight and dbias
        auto first = [&](int j, int c, const x128 (&d)[R], const x128 (&x)[R]) {
            const x128 w = load128(weight + c);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float dw = 0.f, db = 0.f;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const LayerNormBwdTerms t = layernorm_bwd_terms((float)x[r][k], (float)d[r][k], (float)w[k], m[r], s[r]);
                    sum_dn[r] += t.dn;
                    sum_dnn[r] += t.dn * t.n;
                    dw += wr[r] * ((float)d[r][k] * t.n);
                    db += wr[r] * (float)d[r][k];
                }
                const int slot = (j * V + k) * WARP_SIZE + lane;
                acc_dw[slot] += dw;
                acc_db[slot] += db;
            }
        };
        // second pass at one step: dinp += ..., stored, and its column partial sum
        auto second = [&](int j, int c, const x128 (&d)[R], const x128 (&x)[R], x128 (&g)[R]) {
            const x128 w = load128(weight + c);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float dr = 0.f;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const LayerNormBwdTerms t = layernorm_bwd_terms((float)x[r][k], (float)d[r][k], (float)w[k], m[r], s[r]);
                    g[r][k] = (floatX)layernorm_bwd_dinp((float)g[r][k], s[r], t, sum_dn[r], sum_dnn[r]);
                    dr += wr[r] * (float)g[r][k];
                }
                if constexpr (SumDinp) acc_dr[(j * V + k) * WARP_SIZE + lane] += dr;
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (wr[r] != 0.0f) store128(dinp + off[r] + c, g[r]);
            }
        };
        for (int c = lane * V, j = 0; c < C; c += WARP_SIZE * V, j++) {
            x128 d[R], x[R];
#pragma unroll
            for (int r = 0; r < R; r++) {
                d[r] = load128(dout + off[r] + c);
                x[r] = load128(inp + off[r] + c);
            }
            first(j, c, d, x);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            sum_dn[r] = warp_reduce_sum(sum_dn[r]) / C;    // now mean(dnorm)
            sum_dnn[r] = warp_reduce_sum(sum_dnn[r]) / C;  // now mean(dnorm * norm)
        }
        for (int c = lane * V, j = 0; c < C; c += WARP_SIZE * V, j++) {
            x128 d[R], x[R], g[R];
#pragma unroll
            for (int r = 0; r < R; r++) {  // the last reads of dout and inp: evict first, so the first
                d[r] = load128cs(dout + off[r] + c);  // pass's rows of other warps stay in L2 for their turn
                x[r] = load128cs(inp + off[r] + c);
                g[r] = load128(dinp + off[r] + c);
            }
            second(j, c, d, x, g);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int j = c / (WARP_SIZE * V), lane_c = (c / V) % WARP_SIZE, k = c % V;
        const int slot = (j * V + k) * WARP_SIZE + lane_c;
        for (int a = 0; a < NACC; a++) {
            float total = 0.f;
            for (int w = 0; w < num_warps; w++) total += smem[((size_t)w * NACC + a) * slots + slot];  // fixed order
            partials[((size_t)a * gridDim.x + blockIdx.x) * C + c] = total;
        }
    }
}

// Column-owner backward (C <= LAYERNORM_BWD_COL_MAX_THREADS * V: every GPT-2 width in BF16 builds, C up
// to 1024 in FP32 builds): thread t of a block owns channels [Vt, Vt + V) of every row (V = x128::size,
// 8 in bf16, 4 in fp32), so the column sums (dweight, dbias, dinp) stay in 2V-3V registers per thread:
// no shared-memory copies, so no limit of one block per SM at wide rows (the warp-per-row kernel's
// 172 KB of accumulators at C = 1600). The block takes groups
// of R rows (groups blockIdx.x, blockIdx.x + gridDim.x, ...): dout, inp and dinp of the R rows are loaded
// before any arithmetic (3R 16-byte loads per thread in flight), each row's two sums are reduced over
// the block (warp shuffles, then the warps' values in warp order from shared memory: one
// __syncthreads per group, double-buffered so the next group's writes cannot meet this group's reads),
// and dinp is updated and stored. Partials (NACC, gridDim.x, C) as above, finished by column_finish.
// Deterministic: fixed summation orders throughout, the grid a function of N, C and the GPU.
#ifndef LAYERNORM_BWD_COLUMNS  // -D override: 0 takes the warp-per-row kernel for every width (A/B)
#define LAYERNORM_BWD_COLUMNS 1
#endif
// Rows per group and the grid, from the lab's sweep (dev/cuda/layernorm.cu; the times are in
// dev/cuda/PERF.md row 26): R = 2 at the most resident blocks was the fastest at every width, ahead of
// R = 1, of R = 4 (176 registers: 2 blocks per SM) and of the warp-per-row kernel. Occupancy, not loads
// per thread, sets the bytes in flight.
#ifndef LAYERNORM_BWD_COL_ROWS  // rows per group (-D override for lab sweeps)
#define LAYERNORM_BWD_COL_ROWS 2
#endif
#ifndef LAYERNORM_BWD_COL_BLOCKS_PER_SM  // at most this many resident blocks per SM (each adds partials)
#define LAYERNORM_BWD_COL_BLOCKS_PER_SM 8
#endif
constexpr int LAYERNORM_BWD_COL_MAX_THREADS = 256;

template <bool SumDinp, int R>
__global__ void __launch_bounds__(LAYERNORM_BWD_COL_MAX_THREADS)
    layernorm_backward_columns_kernel(floatX* dinp, float* partials, const floatX* dout, const floatX* inp,
                                      const floatX* weight, const float* mean, const float* rstd, int N, int C) {
    constexpr int V = x128::size;
    __shared__ float row_sums[2][LAYERNORM_BWD_COL_MAX_THREADS / WARP_SIZE][2 * R];  // [parity][warp][sum]
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    const int c = threadIdx.x * V;
    const bool active = c < C;  // the last warp may be partly past the row
    const x128 zero{};
    const x128 w = active ? load128(weight + c) : zero;
    float acc_dw[V] = {}, acc_db[V] = {}, acc_dr[V] = {};
    const int groups = ceil_div(N, R);
    int parity = 0;
    for (int group = blockIdx.x; group < groups; group += gridDim.x, parity ^= 1) {
        const int row0 = group * R;
        size_t off[R];
        float m[R], s[R], wr[R];
        x128 d[R], x[R], g[R];
#pragma unroll
        for (int r = 0; r < R; r++) {  // rows past N repeat row0 with weight 0 and are not stored
            const bool valid = row0 + r < N;
            const int row = valid ? row0 + r : row0;
            off[r] = (size_t)row * C + c;
            m[r] = mean[row];
            s[r] = rstd[row];
            wr[r] = valid ? 1.0f : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < R; r++) {  // dout and inp: last reads (evict first); dinp is written back
            d[r] = active ? load128cs(dout + off[r]) : zero;
            x[r] = active ? load128cs(inp + off[r]) : zero;
            g[r] = active ? load128(dinp + off[r]) : zero;
        }
        float sums[2 * R];  // sum dnorm of rows 0..R-1, then sum dnorm * norm
#pragma unroll
        for (int r = 0; r < R; r++) {
            float sum_dn = 0.f, sum_dnn = 0.f;
#pragma unroll
            for (int k = 0; k < V; k++) {
                const LayerNormBwdTerms t = layernorm_bwd_terms((float)x[r][k], (float)d[r][k], (float)w[k], m[r], s[r]);
                sum_dn += t.dn;
                sum_dnn += t.dn * t.n;
            }
            sums[r] = sum_dn;
            sums[R + r] = sum_dnn;
        }
#pragma unroll
        for (int i = 0; i < 2 * R; i++) sums[i] = warp_reduce_sum(sums[i]);
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < 2 * R; i++) row_sums[parity][warp][i] = sums[i];
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 2 * R; i++) {
            float total = 0.f;
            for (int v = 0; v < num_warps; v++) total += row_sums[parity][v][i];  // warp order
            sums[i] = total / C;  // mean(dnorm), mean(dnorm * norm)
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
#pragma unroll
            for (int k = 0; k < V; k++) {
                const LayerNormBwdTerms t = layernorm_bwd_terms((float)x[r][k], (float)d[r][k], (float)w[k], m[r], s[r]);
                acc_dw[k] += wr[r] * ((float)d[r][k] * t.n);
                acc_db[k] += wr[r] * (float)d[r][k];
                g[r][k] = (floatX)layernorm_bwd_dinp((float)g[r][k], s[r], t, sums[r], sums[R + r]);
                if constexpr (SumDinp) acc_dr[k] += wr[r] * (float)g[r][k];
            }
            if (active && wr[r] != 0.0f) store128(dinp + off[r], g[r]);
        }
    }
    if (!active) return;
    constexpr int NACC = SumDinp ? 3 : 2;
    auto store = [&](int a, const float (&acc)[V]) {
        float* p = partials + ((size_t)a * gridDim.x + blockIdx.x) * C + c;
#pragma unroll
        for (int k = 0; k < V; k += 4) {  // V = 8 (bf16) or 4 (fp32 builds); c is a multiple of V
            *reinterpret_cast<float4*>(p + k) = make_float4(acc[k], acc[k + 1], acc[k + 2], acc[k + 3]);
        }
    };
    store(0, acc_dw);
    store(1, acc_db);
    if constexpr (NACC == 3) store(2, acc_dr);
}

// ----------------------------------------------------------------------------
// launchers

constexpr int LAYERNORM_BLOCK = 256;  // 8 rows per block

// out_ld: row stride of out, 0 for C; larger adds the ones column (layernorm_write_ones_column), and
// must keep rows 16-byte aligned.
inline int layernorm_out_ld(int C, int out_ld) {
    if (C % x128::size != 0) fatal("layernorm: C=%d must be a multiple of %d", C, x128::size);
    if (out_ld == 0) return C;
    if (out_ld < C || out_ld % x128::size != 0) fatal("layernorm: output row stride %d (C=%d)", out_ld, C);
    return out_ld;
}

template <int VPL>
inline void layernorm_forward_launch(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                                     const floatX* bias, int N, int C, cudaStream_t stream, int out_ld) {
    const int rows_per_block = LAYERNORM_BLOCK / WARP_SIZE;
    layernorm_forward_kernel<VPL><<<ceil_div(N, rows_per_block), LAYERNORM_BLOCK, 0, stream>>>(
        out, mean, rstd, inp, weight, bias, N, C, out_ld);
    cudaCheckLaunch();
}

// The row in registers up to C = 4096 (16 vectors per lane; faster than re-reading it: dev/cuda/PERF.md
// row 19), re-read beyond.
inline void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C, cudaStream_t stream, int out_ld = 0) {
    out_ld = layernorm_out_ld(C, out_ld);
    const int vpl = ceil_div(C, WARP_SIZE * x128::size);
    if (vpl <= 1) layernorm_forward_launch<1>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else if (vpl <= 2) layernorm_forward_launch<2>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else if (vpl <= 3) layernorm_forward_launch<3>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else if (vpl <= 4) layernorm_forward_launch<4>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else if (vpl <= 6) layernorm_forward_launch<6>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else if (vpl <= 8) layernorm_forward_launch<8>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else if (vpl <= 16) layernorm_forward_launch<16>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
    else layernorm_forward_launch<0>(out, mean, rstd, inp, weight, bias, N, C, stream, out_ld);
}

inline void layernorm_recompute(floatX* out, const floatX* inp, const float* mean, const float* rstd,
                                const floatX* weight, const floatX* bias, int N, int C, cudaStream_t stream,
                                int out_ld = 0) {
    out_ld = layernorm_out_ld(C, out_ld);
    const int block = 256;
    layernorm_recompute_kernel<<<ceil_div((long)N * C, (long)block * x128::size), block, 0, stream>>>(
        out, inp, mean, rstd, weight, bias, N, C, out_ld);
    cudaCheckLaunch();
}

// Shape of the backward's grid: blocks of LAYERNORM_BWD_WARPS warps, or fewer where their per-warp
// accumulators would not fit in shared memory (wide rows, or GPUs with less of it: 8 warps take 96 bytes
// per channel, C rounded up to 256: 168 KB at C = 1600 against 163 KB on an A100, 99 KB on an RTX 4090,
// 227 KB on an H100 / H200), and as many blocks as fit on the GPU at once. A function of N, C and the
// GPU only, so results are reproducible on a given GPU.
constexpr int LAYERNORM_BWD_WARPS = 8;

inline int layernorm_backward_slots(int C) { return ceil_div(C, WARP_SIZE * x128::size) * WARP_SIZE * x128::size; }

inline size_t layernorm_backward_smem(int C, bool sum_dinp, int warps) {
    return (size_t)warps * (sum_dinp ? 3 : 2) * layernorm_backward_slots(C) * sizeof(float);
}

// Whether width C takes the column-owner kernel (else the warp-per-row one), and its block size.
inline bool layernorm_backward_uses_columns(int C) {
    return LAYERNORM_BWD_COLUMNS != 0 && C <= LAYERNORM_BWD_COL_MAX_THREADS * x128::size;
}
inline int layernorm_backward_columns_threads(int C) {
    return ceil_div(C / x128::size, WARP_SIZE) * WARP_SIZE;
}

// Calls f(kernel instance) for SumDinp and R rows per group (1, 2, 4 or 8).
template <bool SumDinp, class F>
inline void layernorm_backward_columns_dispatch(int R, F&& f) {
    switch (R) {
        case 1: f(layernorm_backward_columns_kernel<SumDinp, 1>); break;
        case 2: f(layernorm_backward_columns_kernel<SumDinp, 2>); break;
        case 4: f(layernorm_backward_columns_kernel<SumDinp, 4>); break;
        case 8: f(layernorm_backward_columns_kernel<SumDinp, 8>); break;
        default: fatal("layernorm_backward: %d rows per group (1, 2, 4 or 8)", R);
    }
}

// Blocks of the column-owner kernel resident per SM for (C, SumDinp, R), at most blocks_per_sm_cap.
inline int layernorm_backward_columns_per_sm(int C, bool sum_dinp, int R, int blocks_per_sm_cap) {
    int per_sm = 0;
    auto occupancy = [&](auto kernel) {
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, layernorm_backward_columns_threads(C), 0));
    };
    if (sum_dinp) layernorm_backward_columns_dispatch<true>(R, occupancy);
    else layernorm_backward_columns_dispatch<false>(R, occupancy);
    if (per_sm < 1) fatal("layernorm_backward: no block of the column kernel fits (C=%d, R=%d)", C, R);
    return per_sm < blocks_per_sm_cap ? per_sm : blocks_per_sm_cap;
}

// The grid per (C, SumDinp) is worked out once and kept in ctx.layernorm_grids (LayerNormBackwardGrid:
// llmc/gpu_context.cuh); the blocks are then capped by N.
template <bool SumDinp>
inline LayerNormBackwardGrid layernorm_backward_grid_for(GpuContext& ctx, int N, int C) {
    auto it = ctx.layernorm_grids.find({C, SumDinp});
    if (it == ctx.layernorm_grids.end()) {
        LayerNormBackwardGrid g;
        if (layernorm_backward_uses_columns(C)) {
            g.rows = LAYERNORM_BWD_COL_ROWS;
            g.warps = layernorm_backward_columns_threads(C) / WARP_SIZE;
            g.smem = 0;
            g.blocks = layernorm_backward_columns_per_sm(C, SumDinp, g.rows, LAYERNORM_BWD_COL_BLOCKS_PER_SM) *
                       ctx.props.multiProcessorCount;
        } else {
            auto kernel = layernorm_backward_kernel<SumDinp>;
            cudaFuncAttributes attr;
            cudaCheck(cudaFuncGetAttributes(&attr, kernel));
            const size_t limit = ctx.props.sharedMemPerBlockOptin - attr.sharedSizeBytes;  // minus its static smem
            g.warps = LAYERNORM_BWD_WARPS;
            while (g.warps > 1 && layernorm_backward_smem(C, SumDinp, g.warps) > limit) g.warps /= 2;
            g.smem = layernorm_backward_smem(C, SumDinp, g.warps);
            if (g.smem > limit) {
                fatal("layernorm_backward: C=%d needs %zu bytes of shared memory even with one warp per block; "
                      "this GPU allows %zu", C, g.smem, limit);
            }
            allow_dynamic_smem(kernel, g.smem);
            int per_sm = 0;
            cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, g.warps * WARP_SIZE, g.smem));
            if (per_sm < 1) {
                fatal("layernorm_backward: no block of %d warps with %zu bytes of shared memory fits (C=%d)",
                      g.warps, g.smem, C);
            }
            g.blocks = per_sm * ctx.props.multiProcessorCount;
        }
        it = ctx.layernorm_grids.emplace(std::make_pair(C, SumDinp), g).first;
    }
    LayerNormBackwardGrid out = it->second;
    // at least one row group per block (column kernel), one row per warp (warp-per-row kernel)
    const int max_blocks = out.rows > 0 ? ceil_div(N, out.rows) : ceil_div(N, out.warps);
    if (out.blocks > max_blocks) out.blocks = max_blocks;
    return out;
}

inline LayerNormBackwardGrid layernorm_backward_grid(GpuContext& ctx, int N, int C, bool sum_dinp) {
    return sum_dinp ? layernorm_backward_grid_for<true>(ctx, N, C) : layernorm_backward_grid_for<false>(ctx, N, C);
}

inline int layernorm_backward_blocks(GpuContext& ctx, int N, int C, bool sum_dinp) {
    return layernorm_backward_grid(ctx, N, C, sum_dinp).blocks;
}

inline size_t layernorm_backward_scratch_floats(GpuContext& ctx, int N, int C) {
    const size_t with = (size_t)3 * layernorm_backward_blocks(ctx, N, C, true) * C;
    const size_t without = (size_t)2 * layernorm_backward_blocks(ctx, N, C, false) * C;
    return with > without ? with : without;
}

// The column-owner kernel with an explicit grid (rows per group R, blocks), partials finished into the
// gradients: layernorm_backward's arguments. The lab (dev/cuda/layernorm.cu) sweeps R and blocks
// through it; scratch: (dinp_colsum ? 3 : 2) * blocks * C floats.
inline void layernorm_backward_columns(int R, int blocks, floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                                       const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                                       const float* rstd, int N, int C, cudaStream_t stream,
                                       floatX* dinp_colsum = nullptr, bool accumulate_params = true) {
    if (C % x128::size != 0 || C > LAYERNORM_BWD_COL_MAX_THREADS * x128::size) {
        fatal("layernorm_backward_columns: C=%d must be a multiple of %d and at most %d", C, x128::size,
              LAYERNORM_BWD_COL_MAX_THREADS * x128::size);
    }
    const bool sum_dinp = dinp_colsum != nullptr;
    auto launch = [&](auto kernel) {
        kernel<<<blocks, layernorm_backward_columns_threads(C), 0, stream>>>(dinp, scratch, dout, inp, weight, mean,
                                                                            rstd, N, C);
    };
    if (sum_dinp) layernorm_backward_columns_dispatch<true>(R, launch);
    else layernorm_backward_columns_dispatch<false>(R, launch);
    cudaCheckLaunch();
    floatX* outs[] = {dweight, dbias, dinp_colsum};
    column_finish(outs, sum_dinp ? 3 : 2, scratch, blocks, C, stream, accumulate_params);
}

// scratch: layernorm_backward_scratch_floats(ctx, N, C) floats. dinp_colsum (optional, C): += the column
// sums of dinp after the update, i.e. the bias gradient of the matmul whose output fed this residual.
// accumulate_params = false: dweight, dbias and dinp_colsum are written (=), not read (dinp is always +=).
inline void layernorm_backward(GpuContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                               const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                               const float* rstd, int N, int C, cudaStream_t stream, floatX* dinp_colsum = nullptr,
                               bool accumulate_params = true) {
    if (C % x128::size != 0) fatal("layernorm_backward: C=%d must be a multiple of %d", C, x128::size);
    const bool sum_dinp = dinp_colsum != nullptr;
    const LayerNormBackwardGrid g = layernorm_backward_grid(ctx, N, C, sum_dinp);
    if (g.rows > 0) {
        layernorm_backward_columns(g.rows, g.blocks, dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C,
                                   stream, dinp_colsum, accumulate_params);
        return;
    }
    const int slots = layernorm_backward_slots(C);
    auto launch = [&](auto kernel) {
        kernel<<<g.blocks, g.warps * WARP_SIZE, g.smem, stream>>>(dinp, scratch, dout, inp, weight, mean, rstd, N, C,
                                                                 slots);
    };
    if (sum_dinp) launch(layernorm_backward_kernel<true>);
    else launch(layernorm_backward_kernel<false>);
    cudaCheckLaunch();
    floatX* outs[] = {dweight, dbias, dinp_colsum};
    column_finish(outs, sum_dinp ? 3 : 2, scratch, g.blocks, C, stream, accumulate_params);
}
