/*
 * Causal multi-head self-attention, fused (flash-attention style: online softmax, no (B,NH,T,T)
 * tensor in memory). The path used when cuDNN is off (USE_CUDNN=0), and the backward of cuDNN builds
 * for sm_90a (llmc/gpt2.cuh's dispatch: there it reads cuDNN's out and stats). Head size HS = 64.
 *
 * attention_forward:  inp (B,T,3,NH,HS) = the QKV projection output (q | k | v per token)
 *                     out (B,T,NH,HS) = softmax(q k^T / sqrt(HS), causal) v                 (out =)
 *                     lse (B,NH,T) fp32 = natural-log log-sum-exp of each scaled score row   (lse =)
 * attention_backward: dinp (B,T,3,NH,HS) = dq | dk | dv                                     (dinp =)
 *                     scratch (attention_backward_scratch_floats) = D (B,NH,T) fp32 =
 *                     rowsum(dout * out)                                                    (scratch =)
 *
 * Implementations, chosen in one place (the launchers at the bottom, `if constexpr` and LLMC_SM90A):
 *  - bf16 builds: tensor-core kernels (cp.async double buffering, swizzled shared memory),
 *    FlashAttention-2 structure, 64-row tiles, one warpgroup (4 warps) per block. The matrix products
 *    are wgmma (warpgroup, B from shared memory by descriptor) in sm_90a builds (GPU_COMPUTE_CAPABILITY
 *    = 90), mma.sync m16n8k16 + ldmatrix otherwise; both give each warp the same fragments.
 *    Backward: a D = rowsum(dO*O) kernel (coalesced: 8 lanes per row), a dK/dV kernel (one block
 *    per key tile, loops over query tiles) and a dQ kernel (one block per query tile) that
 *    recomputes P and dP; the sm_90a pair reads its loop-fixed operands from shared memory
 *    (att_wgmma_abt_tiles says why). Every output
 *    element has one writer and a fixed summation order: bitwise deterministic.
 *  - FP32 builds, and the reference in dev/cuda/attention.cu: fp32 math on the CUDA cores (one
 *    thread per query or key row), deterministic for the same reason.
 * Both read floatX inputs and keep the softmax statistics and all accumulations in fp32.
 */
#pragma once

#include <type_traits>

#include "llmc/cuda_common.h"

constexpr int ATT_HS = 64;    // head size this file supports (every GPT-2 configuration)
constexpr int ATT_ROWS = 64;  // fp32 kernels: query (or key) rows per block, one per thread
constexpr int ATT_TILE = 64;  // fp32 kernels: keys (or queries) staged in shared memory per step

// ----------------------------------------------------------------------------
// fp32 kernels (CUDA cores): the reference, and the path of FP32 builds

// Copy `rows` rows of one head (HS values each) from the (B,T,3,NH,HS) layout into fp32 shared memory.
__device__ inline void att_load_tile(float (*dst)[ATT_HS], const floatX* base, int row0, int rows, int T,
                                     int row_stride) {
    for (int idx = threadIdx.x * x128::size; idx < rows * ATT_HS; idx += blockDim.x * x128::size) {
        const int r = idx / ATT_HS, d = idx % ATT_HS;
        if (row0 + r < T) {
            x128 v = load128(base + (size_t)(row0 + r) * row_stride + d);
            for (int k = 0; k < x128::size; k++) dst[r][d + k] = (float)v[k];
        } else {
            for (int k = 0; k < x128::size; k++) dst[r][d + k] = 0.f;
        }
    }
}

__device__ inline float att_dot(const float* a, const float (&b)[ATT_HS]) {
    float s = 0.f;
#pragma unroll
    for (int d = 0; d < ATT_HS; d += 4) {
        const float4 v = *reinterpret_cast<const float4*>(a + d);
        s += v.x * b[d] + v.y * b[d + 1] + v.z * b[d + 2] + v.w * b[d + 3];
    }
    return s;
}

__device__ inline void att_load_row(float (&dst)[ATT_HS], const floatX* src, float scale) {
#pragma unroll
    for (int d = 0; d < ATT_HS; d += x128::size) {
        x128 v = load128(src + d);
#pragma unroll
        for (int k = 0; k < x128::size; k++) dst[d + k] = (float)v[k] * scale;
    }
}

// The causal key loop of the fp32 kernels (forward and dQ): K and V of the block's visible keys pass
// through shared memory in tiles of ATT_TILE rows, and body(k_row, v_row) runs for each key <= t of
// this thread's query row t, in key order. Threads with t >= T only help load.
template <class Body>
__device__ __forceinline__ void att_fp32_for_each_key(const floatX* qkv, int C, int T, int row_stride, int t,
                                                      Body&& body) {
    __shared__ __align__(16) float ks[ATT_TILE][ATT_HS];
    __shared__ __align__(16) float vs[ATT_TILE][ATT_HS];
    const int last_key = min(T - 1, (int)(blockIdx.x + 1) * ATT_ROWS - 1);
    for (int k0 = 0; k0 <= last_key; k0 += ATT_TILE) {
        __syncthreads();
        att_load_tile(ks, qkv + C, k0, ATT_TILE, T, row_stride);
        att_load_tile(vs, qkv + 2 * C, k0, ATT_TILE, T, row_stride);
        __syncthreads();
        if (t >= T) continue;
        const int jn = min(ATT_TILE, t - k0 + 1);  // causal: keys k0 .. t
        for (int j = 0; j < jn; j++) body(ks[j], vs[j]);
    }
}

// dst[0, HS) = acc * scale, rounded to floatX
__device__ __forceinline__ void att_store_row(floatX* dst, const float (&acc)[ATT_HS], float scale) {
#pragma unroll
    for (int d = 0; d < ATT_HS; d += x128::size) {
        x128 v;
#pragma unroll
        for (int k = 0; k < x128::size; k++) v[k] = (floatX)(acc[d + k] * scale);
        store128(dst + d, v);
    }
}

__global__ void __launch_bounds__(ATT_ROWS) attention_forward_fp32_kernel(floatX* out, float* lse,
                                                                          const floatX* inp, int T, int NH) {
    const int C = NH * ATT_HS, b = blockIdx.z, h = blockIdx.y;
    const int t = blockIdx.x * ATT_ROWS + threadIdx.x;
    const int row_stride = 3 * C;
    const floatX* qkv = inp + (size_t)b * T * row_stride + h * ATT_HS;
    const float scale = rsqrtf((float)ATT_HS);

    float q[ATT_HS], acc[ATT_HS];
    if (t < T) att_load_row(q, qkv + (size_t)t * row_stride, scale);
#pragma unroll
    for (int d = 0; d < ATT_HS; d++) acc[d] = 0.f;
    float m = -INFINITY, l = 0.f;

    att_fp32_for_each_key(qkv, C, T, row_stride, t, [&](const float (&k)[ATT_HS], const float (&v)[ATT_HS]) {
        const float s = att_dot(k, q);
        if (s > m) {  // new running max: rescale what was accumulated
            const float corr = expf(m - s);
            l *= corr;
#pragma unroll
            for (int d = 0; d < ATT_HS; d++) acc[d] *= corr;
            m = s;
        }
        const float p = expf(s - m);
        l += p;
#pragma unroll
        for (int d = 0; d < ATT_HS; d++) acc[d] += p * v[d];
    });
    if (t >= T) return;
    att_store_row(out + ((size_t)b * T + t) * C + h * ATT_HS, acc, 1.0f / l);
    lse[((size_t)b * NH + h) * T + t] = m + logf(l);
}

// D[b,h,t] = sum_d dout * out (the softmax-backward row term). A block per (b, ATT_D_T positions): its
// ATT_D_T * NH rows are contiguous in the (B,T,NH,HS) layout, read ATT_D_LANES lanes per row (one 16-byte
// load each of dout and out, so 8 lanes read whole 128-byte lines), summed by a fixed shuffle tree,
// staged in shared memory (NH, ATT_D_T) and written ATT_D_T consecutive t per head, coalesced in D's
// (B,NH,T) layout. (Was one thread per row: 16-byte loads at a 128-byte stride, writes at a stride of T.)
constexpr int ATT_D_T = 32;
constexpr int ATT_D_LANES = ATT_HS / x128::size;  // 8 in bf16, 16 in fp32
constexpr int ATT_D_THREADS = 256;
static_assert(WARP_SIZE % ATT_D_LANES == 0, "a row's lanes share a warp");

__global__ void __launch_bounds__(ATT_D_THREADS) attention_backward_d_kernel(float* dvec, const floatX* dout,
                                                                          const floatX* out, int T, int NH) {
    extern __shared__ float att_d_rows[];  // (NH, ATT_D_T)
    const int b = blockIdx.y, t0 = blockIdx.x * ATT_D_T;
    const int nt = min(ATT_D_T, T - t0), rows = nt * NH;
    const size_t base = ((size_t)b * T + t0) * NH * ATT_HS;
    const int sub = threadIdx.x % ATT_D_LANES;
    constexpr int rows_per_pass = ATT_D_THREADS / ATT_D_LANES;
    // the loop bound is the same for a whole warp (its rows are r0 + 0..31/ATT_D_LANES), so every lane
    // reaches the shuffles; rows past the end read nothing and add zeros
    const int warp_row0 = threadIdx.x / WARP_SIZE * (WARP_SIZE / ATT_D_LANES);
    const int my = (threadIdx.x % WARP_SIZE) / ATT_D_LANES;
#pragma unroll 2
    for (int r0 = warp_row0; r0 < rows; r0 += rows_per_pass) {
        const int r = r0 + my;
        float s = 0.f;
        if (r < rows) {
            const size_t off = base + (size_t)r * ATT_HS + sub * x128::size;
            const x128 a = load128(dout + off), o = load128cs(out + off);  // out: last read of the step
#pragma unroll
            for (int k = 0; k < x128::size; k++) s += (float)a[k] * (float)o[k];
        }
#pragma unroll
        for (int m = ATT_D_LANES / 2; m > 0; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
        if (sub == 0 && r < rows) att_d_rows[(r % NH) * ATT_D_T + r / NH] = s;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < NH * ATT_D_T; i += ATT_D_THREADS) {
        const int h = i / ATT_D_T, tl = i % ATT_D_T;
        if (tl < nt) dvec[((size_t)b * NH + h) * T + t0 + tl] = att_d_rows[i];
    }
}

// dq_i = scale * sum_{j<=i} p_ij (dp_ij - D_i) k_j, with p_ij = exp(scale q_i.k_j - lse_i), dp_ij = do_i.v_j
__global__ void __launch_bounds__(ATT_ROWS) attention_backward_dq_fp32_kernel(floatX* dinp, const floatX* dout,
                                                                              const floatX* inp, const float* lse,
                                                                              const float* dvec, int T, int NH) {
    const int C = NH * ATT_HS, b = blockIdx.z, h = blockIdx.y;
    const int t = blockIdx.x * ATT_ROWS + threadIdx.x;
    const int row_stride = 3 * C;
    const floatX* qkv = inp + (size_t)b * T * row_stride + h * ATT_HS;
    const float scale = rsqrtf((float)ATT_HS);

    float q[ATT_HS], go[ATT_HS], dq[ATT_HS];
    float row_lse = 0.f, row_d = 0.f;
    if (t < T) {
        att_load_row(q, qkv + (size_t)t * row_stride, scale);
        att_load_row(go, dout + ((size_t)b * T + t) * C + h * ATT_HS, 1.0f);
        row_lse = lse[((size_t)b * NH + h) * T + t];
        row_d = dvec[((size_t)b * NH + h) * T + t];
    }
#pragma unroll
    for (int d = 0; d < ATT_HS; d++) dq[d] = 0.f;

    att_fp32_for_each_key(qkv, C, T, row_stride, t, [&](const float (&k)[ATT_HS], const float (&v)[ATT_HS]) {
        const float p = expf(att_dot(k, q) - row_lse);
        const float ds = p * (att_dot(v, go) - row_d);
#pragma unroll
        for (int d = 0; d < ATT_HS; d++) dq[d] += ds * k[d];
    });
    if (t >= T) return;
    att_store_row(dinp + ((size_t)b * T + t) * row_stride + h * ATT_HS, dq, scale);
}

// For key row j: dv_j = sum_{i>=j} p_ij do_i and dk_j = scale * sum_{i>=j} p_ij (dp_ij - D_i) q_i.
// WantDK selects which of the two this launch computes (one accumulator set per thread keeps the
// register count in bounds).
template <bool WantDK>
__global__ void __launch_bounds__(ATT_ROWS) attention_backward_dkv_fp32_kernel(floatX* dinp, const floatX* dout,
                                                                               const floatX* inp, const float* lse,
                                                                               const float* dvec, int T, int NH) {
    __shared__ __align__(16) float qs[ATT_TILE][ATT_HS];
    __shared__ __align__(16) float gos[ATT_TILE][ATT_HS];
    __shared__ float lses[ATT_TILE], ds_[ATT_TILE];
    const int C = NH * ATT_HS, b = blockIdx.z, h = blockIdx.y;
    const int j = blockIdx.x * ATT_ROWS + threadIdx.x;  // this thread's key row
    const int row_stride = 3 * C;
    const floatX* qkv = inp + (size_t)b * T * row_stride + h * ATT_HS;
    const floatX* go_base = dout + (size_t)b * T * C + h * ATT_HS;
    const float* lse_row = lse + ((size_t)b * NH + h) * T;
    const float* d_row = dvec + ((size_t)b * NH + h) * T;
    const float scale = rsqrtf((float)ATT_HS);

    float k[ATT_HS], v[ATT_HS], acc[ATT_HS];
    if (j < T) {
        att_load_row(k, qkv + C + (size_t)j * row_stride, scale);  // fold the scale into k
        if constexpr (WantDK) att_load_row(v, qkv + 2 * C + (size_t)j * row_stride, 1.0f);
    }
#pragma unroll
    for (int d = 0; d < ATT_HS; d++) acc[d] = 0.f;

    const int first_query = blockIdx.x * ATT_ROWS;  // queries before the block's first key see none of its keys
    for (int i0 = first_query - first_query % ATT_TILE; i0 < T; i0 += ATT_TILE) {
        __syncthreads();
        att_load_tile(qs, qkv, i0, ATT_TILE, T, row_stride);
        att_load_tile(gos, go_base, i0, ATT_TILE, T, C);
        for (int r = threadIdx.x; r < ATT_TILE; r += blockDim.x) {
            lses[r] = (i0 + r < T) ? lse_row[i0 + r] : 0.f;
            ds_[r] = (i0 + r < T) ? d_row[i0 + r] : 0.f;
        }
        __syncthreads();
        if (j >= T) continue;
        const int ib = max(0, j - i0);               // causal: queries i >= j
        const int ie = min(ATT_TILE, T - i0);
        for (int i = ib; i < ie; i++) {
            const float p = expf(att_dot(qs[i], k) - lses[i]);
            if constexpr (WantDK) {
                const float ds = p * (att_dot(gos[i], v) - ds_[i]);
#pragma unroll
                for (int d = 0; d < ATT_HS; d++) acc[d] += ds * qs[i][d];
            } else {
#pragma unroll
                for (int d = 0; d < ATT_HS; d++) acc[d] += p * gos[i][d];
            }
        }
    }
    if (j >= T) return;
    att_store_row(dinp + ((size_t)b * T + j) * row_stride + (WantDK ? C : 2 * C) + h * ATT_HS, acc,
                  WantDK ? scale : 1.0f);
}

// ----------------------------------------------------------------------------
// tensor-core kernels (bf16)
//
// Tiles: every kernel works on 64-row tiles of one (b, h): 64 query rows or 64 key rows, each row the
// 64 head dims. A block is 4 warps; warp w owns rows 16w..16w+15 of the block's own tile, so the
// per-row softmax statistics never leave a warp (shuffles among the 4 lanes of a row group only).
// Tuning: 64x64 tiles and 4 warps are the FlashAttention-2 choice for HS = 64; they keep the
// accumulators of the widest kernel (dK/dV: 2 x 16x64 fp32 per warp) in registers without spills.
// ptxas (sm_90): forward 134 registers, 40 KB smem (3 blocks/SM); dK/dV 241 and dQ 237 registers,
// 33 KB (2 blocks/SM). Tried: capping the backward at 3 blocks/SM (__launch_bounds__(128, 3), 168
// registers) spills 24-136 bytes, the forward at 4 blocks/SM spills 24; both left uncapped.
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 fragment layouts (PTX ISA), per warp, with
// lane = threadIdx.x % 32, g = lane / 4 (0..7), c = lane % 4 (0..3). Each 32-bit register holds two
// bf16; the lower 16 bits hold the element with the smaller column (A, C) or k (B) index.
//   A (16x16, row major), 4 registers: a0 = A[g][2c, 2c+1]     a1 = A[g+8][2c, 2c+1]
//                                      a2 = A[g][2c+8, 2c+9]   a3 = A[g+8][2c+8, 2c+9]
//   B (16x8, k x n),      2 registers: b0 = B[2c, 2c+1][g]     b1 = B[2c+8, 2c+9][g]
//   C/D (16x8 fp32),      4 floats:    d0, d1 = C[g][2c, 2c+1]  d2, d3 = C[g+8][2c, 2c+1]
// ldmatrix.x4 loads four 8x8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and
// register i receives matrix i: without .trans lane holds M[lane/4][2(lane%4), +1] (the A/C pattern),
// with .trans M[2(lane%4), +1][lane/4] (the B pattern when M is stored k-major, i.e. [k][n]).
// A 16x64 row block of accumulators (float [8][4], n-tile j = columns 8j..8j+7) is therefore already
// an A operand once packed to bf16: A chunk kc (columns 16kc..16kc+15) = {C[2kc] rows g, C[2kc] rows
// g+8, C[2kc+1] rows g, C[2kc+1] rows g+8} (att_c_to_a). That is how P and dS feed the next mma
// without a trip through shared memory.
//
// Shared memory tiles are [64][64] bf16, 128-byte rows of eight 16-byte chunks, chunk k of row r
// stored at chunk k ^ (r % 8). Every ldmatrix reads 8 consecutive rows at one logical chunk and every
// cp.async writes whole rows, so both hit 8 different chunk positions = all 32 banks, no conflicts.

constexpr int ATT_TC_TILE = 64;                 // rows per tile (queries or keys) = HS
constexpr int ATT_TC_THREADS = 128;             // 4 warps x 16 rows
constexpr int ATT_TC_TILE_BYTES = ATT_TC_TILE * ATT_HS * 2;
static_assert(ATT_HS == 64, "the tensor-core kernels assume 128-byte rows (HS = 64)");
static_assert(ATT_TC_THREADS == 2 * ATT_TC_TILE, "4 warps x 16 rows per tile; loaders assume 128 threads");

constexpr float ATT_LOG2E = 1.4426950408889634f;
constexpr float ATT_LN2 = 0.6931471805599453f;
constexpr float ATT_SCALE = 0.125f;                      // 1/sqrt(HS)
constexpr float ATT_SCALE_LOG2 = ATT_SCALE * ATT_LOG2E;  // scores go straight to the exp2 domain

// Which (batch, head, tile rank) a block of the tensor-core kernels computes: grid (tiles, NH, B), rank 0
// the tile with the most work (the last query tile, the first key tile: causal), blocks started in
// linear order (rank fastest, then head, then batch). Two longest-first orders (every head's heaviest
// tile first within a batch row, or over the whole grid) ran slower (dev/cuda/PERF.md, the "tried,
// removed" row of the longest-first order).
struct AttBlock {
    int b, h, rank;
};
__device__ __forceinline__ AttBlock att_block() { return {(int)blockIdx.z, (int)blockIdx.y, (int)blockIdx.x}; }

// byte offset of row `row`, 16-byte chunk `chunk` (columns 8*chunk..8*chunk+7) in a swizzled tile
__device__ __forceinline__ uint32_t att_swz(int row, int chunk) {
    return (uint32_t)(row * (ATT_HS * 2) + ((chunk ^ (row & 7)) << 4));
}

// (copies, commit and wait: llmc/cuda_common.h's cp_async16 / cp_async4 / cp_async_commit / cp_async_wait)

// Shared memory that cp.async (the generic proxy) filled and wgmma (the async proxy) reads next: each
// thread fences its completed copies before the barrier that publishes them (PTX ISA, memory
// consistency: proxies). Nothing to do for mma.sync.
__device__ __forceinline__ void att_fence_for_wgmma() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void att_ldmatrix(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void att_ldmatrix_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d (16x8 fp32) += a (16x16 bf16) * b (16x8 bf16)
__device__ __forceinline__ void att_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- wgmma (sm_90a builds: nvcc defines __CUDA_ARCH_FEAT_SM90_ALL for the compute_90a target) ----
// A block of these kernels is 4 warps = one warpgroup, and warp w owns rows 16w..16w+15 of a 64-row
// tile: exactly the rows wgmma.m64nNk16 gives warp w. Its register fragments are those of mma.sync
// above, so the kernels do not change: for m64n64k16 with A in registers, a[0..3] of a lane are the
// m16n8k16 A fragment of its warp's 16 rows, and accumulator d[4j + e] is C[j][e] of n-tile j (PTX ISA,
// "Register fragments and shared memory matrix layouts" for wgmma). B comes from shared memory by
// descriptor; the swizzled [64][64] tiles above are wgmma's canonical 128-byte-swizzle layout as they
// are (the XOR of chunk and row % 8 is what the hardware applies to address bits 4-6 with bits 7-9),
// provided each tile starts on a 1024-byte boundary:
//   K-major B (M^T in att_mma_abt: the tile's rows are the output columns, k runs along a row): each
//     k16 step is 32 bytes further along the rows; 8-row groups are SBO = 1024 bytes apart.
//   MN-major B (M in att_mma_ab: the tile's rows are k), "transpose B" = 1: each k16 step is 16 rows =
//     2048 bytes further; the 8-row k groups are SBO = 1024 bytes apart; the 64 output columns are one
//     128-byte swizzle atom, so the leading-dimension offset (between atoms) is never used.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATT_WGMMA 1
#endif

// shared-memory matrix descriptor: start address >> 4 (bits 0-13), leading byte offset >> 4 (16-29,
// unused here: 1), stride byte offset >> 4 (32-45), base offset 0 (tiles 1024-byte aligned), swizzle
// mode 1 = 128 bytes (62-63)
__device__ __forceinline__ uint64_t att_wgmma_desc(uint32_t smem_addr) {
    return (uint64_t)((smem_addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}
__device__ __forceinline__ void att_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void att_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void att_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// The accumulators pass through an empty asm before the fence and after the wait, so the compiler
// cannot move their initialisation below the fence or a read of them above the wait (it sees them
// as written by the wgmma statement, not by the wait).
__device__ __forceinline__ void att_reg_fence(float (&c)[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(c[j][e])::"memory");
    }
}

// d (64x64 fp32 over the warpgroup) += a (64x16 bf16, registers) * B (16x64 bf16, descriptor)
template <int TransB>
__device__ __forceinline__ void att_wgmma(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if defined(ATT_WGMMA)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
          "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
          "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TransB)
        : "memory");
#endif
}

__device__ __forceinline__ uint32_t att_pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo = the lower 16 bits
    uint32_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return bits;
}

// Stage rows row0..row0+63 of one head (HS bf16 each, `stride` elements between rows) into a swizzled
// tile, asynchronously. Rows >= T become zeros, so a tail tile never feeds NaN garbage to the mma.
__device__ __forceinline__ void att_load_tile_async(uint32_t dst, const __nv_bfloat16* src, int row0, int T,
                                                    int stride) {
#pragma unroll
    for (int i = 0; i < ATT_TC_TILE * 8 / ATT_TC_THREADS; i++) {
        const int idx = threadIdx.x + i * ATT_TC_THREADS;
        const int r = idx / 8, chunk = idx % 8;
        const bool valid = row0 + r < T;
        cp_async16(dst + att_swz(r, chunk), src + (size_t)(valid ? row0 + r : 0) * stride + chunk * 8, valid);
    }
}

// Stage 64 consecutive fp32 values of each of two (B,NH,T) rows (threads 0-63 the first, 64-127 the
// second); entries >= T become 0.
__device__ __forceinline__ void att_load_stats_async(float* dst_a, float* dst_b, const float* a, const float* b,
                                                     int row0, int T) {
    const int r = threadIdx.x % ATT_TC_TILE;
    const bool valid = row0 + r < T;
    const float* src = (threadIdx.x < ATT_TC_TILE ? a : b) + (valid ? row0 + r : 0);
    cp_async4(smem_addr((threadIdx.x < ATT_TC_TILE ? dst_a : dst_b) + r), src, valid);
}

// K and V rows row0..row0+63 of one head into two swizzled tiles; qkv points at the head's q in the
// (B,T,3,NH,HS) layout, so k is C further on and v 2C.
__device__ __forceinline__ void att_load_kv_async(uint32_t dst_k, uint32_t dst_v, const __nv_bfloat16* qkv, int C,
                                                  int row0, int T, int stride) {
    att_load_tile_async(dst_k, qkv + C, row0, T, stride);
    att_load_tile_async(dst_v, qkv + 2 * C, row0, T, stride);
}

// One step's wait in the double-buffered tile loops (stage step % 2 holds this step's tile, the other
// stage receives the next one). With a next tile (has_next), load_next() starts its copies (or the
// caller has started them already and uses the overload without load_next) and every copy group but
// that newest one is waited for; on the last step all are. Then a block barrier.
// Both spellings keep the generated code as it was: ptxas gives the forward kernel 3 more registers
// when its K/V copies go through the callback, and the dK/dV kernel 3 more when its copies are
// started before the call.
template <class LoadNext>
__device__ __forceinline__ void att_pipeline_wait(bool has_next, LoadNext&& load_next) {
    if (has_next) {
        load_next();
        cp_async_commit();
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    att_fence_for_wgmma();
    __syncthreads();
}
__device__ __forceinline__ void att_pipeline_wait(bool has_next) {
    att_pipeline_wait(has_next, [] {});
}

// A operand of the 16x64 row block starting at row0 of a swizzled tile; a[kc] = columns 16kc..16kc+15.
// Lanes 0-15 address rows row0+0..15 at chunk 2kc (matrices a0, a1), lanes 16-31 the same rows at
// chunk 2kc+1 (a2, a3).
__device__ __forceinline__ void att_load_a(uint32_t (&a)[4][4], uint32_t tile, int row0) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) att_ldmatrix(a[kc], tile + att_swz(row0 + lane % 16, 2 * kc + lane / 16));
}

// acc (16x64) += A (16x64) * M^T, M a swizzled [64][64] tile whose rows are the output columns (K in
// Q K^T). The B operand for output columns n, reduction index k is M[n][k]: M's rows give the B
// pattern without .trans. Per ldmatrix.x4 (output columns 16np.., k = 16kc..): lanes 0-7 rows
// 16np+0..7 chunk 2kc (b0 of n-tile 2np), 8-15 same rows chunk 2kc+1 (b1), 16-23 rows 16np+8..15
// chunk 2kc (b0 of n-tile 2np+1), 24-31 chunk 2kc+1 (b1).
__device__ __forceinline__ void att_mma_abt_warp(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
    const int lane = threadIdx.x % 32;
    // row % 8 == lane % 8 for every address, so the swizzled chunk is (2kc + half) ^ (lane % 8)
    // = 2kc ^ x; the np steps are whole 16-row blocks, i.e. immediate offsets
    const uint32_t base = tile + ((lane % 8) + (lane / 16) * 8) * (ATT_HS * 2);
    const int x = ((lane / 8) % 2) ^ (lane % 8);
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        const uint32_t addr = base + ((x ^ (2 * kc)) << 4);
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            att_ldmatrix(b, addr + np * 16 * (ATT_HS * 2));
            att_mma(acc[2 * np], a[kc], b[0], b[1]);
            att_mma(acc[2 * np + 1], a[kc], b[2], b[3]);
        }
    }
}

// acc (16x64) += A (16x64) * M, M a swizzled [64 k][64 n] tile (V in P V). B[k][n] = M[k][n] is
// k-major, so .trans gives the B pattern. Per ldmatrix.x4 (k = 16kc.., output columns 16np..): lanes
// 0-7 rows 16kc+0..7 chunk 2np (b0 of n-tile 2np), 8-15 rows 16kc+8..15 chunk 2np (b1), 16-23 rows
// 16kc+0..7 chunk 2np+1 (b0 of n-tile 2np+1), 24-31 rows 16kc+8..15 chunk 2np+1 (b1).
__device__ __forceinline__ void att_mma_ab_warp(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
    const int lane = threadIdx.x % 32;
    // as in att_mma_abt_warp: chunk (2np + half) ^ (lane % 8) = 2np ^ x, kc steps are immediate offsets
    const uint32_t base = tile + ((lane % 8) + ((lane / 8) % 2) * 8) * (ATT_HS * 2);
    const int x = (lane / 16) ^ (lane % 8);
#pragma unroll
    for (int np = 0; np < 4; np++) {
        const uint32_t addr = base + ((x ^ (2 * np)) << 4);
#pragma unroll
        for (int kc = 0; kc < 4; kc++) {
            uint32_t b[4];
            att_ldmatrix_trans(b, addr + kc * 16 * (ATT_HS * 2));
            att_mma(acc[2 * np], a[kc], b[0], b[1]);
            att_mma(acc[2 * np + 1], a[kc], b[2], b[3]);
        }
    }
}

// d (64x64 fp32) = (accumulate ? d : 0) + A (64x16, descriptor) * B (16x64, descriptor); TransA / TransB
// = 1: that operand is MN-major, 0: K-major
template <int TransA, int TransB>
__device__ __forceinline__ void att_wgmma_ss(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
#if defined(ATT_WGMMA)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
          "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
          "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
          "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TransA), "n"(TransB)
        : "memory");
#endif
}

// The products the kernels use, warpgroup-wide with wgmma in sm_90a builds, else per warp with the
// mma.sync routines above (same fragments either way).
//   att_mma_abt: acc (16x64 rows of the warp) += A (16x64) * M^T, M a [64][64] tile (K-major B)
//   att_mma_ab:  acc += A * M                                      (MN-major B)
#if defined(ATT_WGMMA)
__device__ __forceinline__ void att_wgmma_abt_issue(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
#pragma unroll
    for (int kc = 0; kc < 4; kc++) att_wgmma<0>(acc, a[kc], att_wgmma_desc(tile + kc * 32));
}
__device__ __forceinline__ void att_wgmma_ab_issue(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
#pragma unroll
    for (int kc = 0; kc < 4; kc++) att_wgmma<1>(acc, a[kc], att_wgmma_desc(tile + kc * 16 * (ATT_HS * 2)));
}
#endif

#if defined(ATT_WGMMA)
// ptxas (CUDA 13.0) treats the registers of a wgmma A operand as free after the instruction: an A
// fragment kept in registers across loop iterations (Q in the forward, K and V in the backward) was
// overwritten by the next values it allocated there (seen in the SASS; the lab's T >= 128 shapes
// failed). So operands that stay fixed over a loop are read from their shared-memory tile instead:
// acc (64x64 over the warpgroup) = A tile (64 rows, K-major) * B tile^T (K-major), A and B both
// [64][64] swizzled tiles.
__device__ __forceinline__ void att_wgmma_abt_tiles(float (&acc)[8][4], uint32_t a_tile, uint32_t b_tile) {
    att_reg_fence(acc);
    att_wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        att_wgmma_ss<0, 0>(acc, att_wgmma_desc(a_tile + kc * 32), att_wgmma_desc(b_tile + kc * 32), kc > 0);
    }
}
#endif

// acc += A * M^T (kBT, att_mma_abt) or A * M (att_mma_ab): one warpgroup wgmma, waited for, in sm_90a
// builds; the warp's own mma.sync otherwise
template <bool kBT>
__device__ __forceinline__ void att_mma_sync_or_wgmma(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
#if defined(ATT_WGMMA)
    att_reg_fence(acc);
    att_wgmma_fence();
    if constexpr (kBT) att_wgmma_abt_issue(acc, a, tile);
    else att_wgmma_ab_issue(acc, a, tile);
    att_wgmma_commit();
    att_wgmma_wait();
    att_reg_fence(acc);
#else
    if constexpr (kBT) att_mma_abt_warp(acc, a, tile);
    else att_mma_ab_warp(acc, a, tile);
#endif
}
__device__ __forceinline__ void att_mma_abt(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
    att_mma_sync_or_wgmma<true>(acc, a, tile);
}
__device__ __forceinline__ void att_mma_ab(float (&acc)[8][4], const uint32_t (&a)[4][4], uint32_t tile) {
    att_mma_sync_or_wgmma<false>(acc, a, tile);
}
// 16x64 fp32 accumulators -> bf16 A operand (see the layout note above)
__device__ __forceinline__ void att_c_to_a(uint32_t (&a)[4][4], const float (&c)[8][4]) {
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        a[kc][0] = att_pack_bf16(c[2 * kc][0], c[2 * kc][1]);
        a[kc][1] = att_pack_bf16(c[2 * kc][2], c[2 * kc][3]);
        a[kc][2] = att_pack_bf16(c[2 * kc + 1][0], c[2 * kc + 1][1]);
        a[kc][3] = att_pack_bf16(c[2 * kc + 1][2], c[2 * kc + 1][3]);
    }
}

__device__ __forceinline__ void att_zero(float (&c)[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
}

// Write a warp's 16x64 accumulator block (rows scaled by scale_lo for rows g, scale_hi for rows g+8)
// as bf16 to global rows tile_row0 + wrow0 + 0..15 (rows >= T skipped). Goes through the warp's own 16
// rows of a free swizzled tile so that each lane stores whole 16-byte chunks, 8 lanes per 128-byte row.
__device__ __forceinline__ void att_store_rows(__nv_bfloat16* dst, int stride, int tile_row0, int T,
                                               const float (&c)[8][4], float scale_lo, float scale_hi,
                                               void* tile, int wrow0) {
    const int lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
    char* t = reinterpret_cast<char*>(tile);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        *reinterpret_cast<uint32_t*>(t + att_swz(wrow0 + g, j) + cq * 4) =
            att_pack_bf16(c[j][0] * scale_lo, c[j][1] * scale_lo);
        *reinterpret_cast<uint32_t*>(t + att_swz(wrow0 + g + 8, j) + cq * 4) =
            att_pack_bf16(c[j][2] * scale_hi, c[j][3] * scale_hi);
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = wrow0 + 4 * i + lane / 8, chunk = lane % 8;
        const int4 v = *reinterpret_cast<const int4*>(t + att_swz(r, chunk));
        if (tile_row0 + r < T) *reinterpret_cast<int4*>(dst + (size_t)(tile_row0 + r) * stride + chunk * 8) = v;
    }
}

// Forward. One block per (query tile, h, b); loops over the key tiles 0..qt (causal: tiles above the
// diagonal are skipped, only the diagonal tile is masked). K/V tiles are double-buffered: tile j+1 is
// in flight while tile j is used. Online softmax in the log2 domain: m = running max of scaled scores
// times log2(e), l = running sum of exp2(s - m) (per lane partial, summed over the row's 4 lanes at
// the end), O rescaled by exp2(m_old - m_new) whenever the max grows.
__global__ void __launch_bounds__(ATT_TC_THREADS) attention_forward_tc_kernel(__nv_bfloat16* out, float* lse,
                                                                              const __nv_bfloat16* inp, int T,
                                                                              int NH) {
    __shared__ __align__(1024) __nv_bfloat16 sq[ATT_TC_TILE * ATT_HS];
    __shared__ __align__(1024) __nv_bfloat16 sk[2][ATT_TC_TILE * ATT_HS];
    __shared__ __align__(1024) __nv_bfloat16 sv[2][ATT_TC_TILE * ATT_HS];
    const AttBlock blk = att_block();
    const int C = NH * ATT_HS, stride = 3 * C, b = blk.b, h = blk.h;
    const int qt = gridDim.x - 1 - blk.rank;  // longest rows (most key tiles) start first
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
    const __nv_bfloat16* qkv = inp + (size_t)b * T * stride + h * ATT_HS;
    const uint32_t sq_a = smem_addr(sq), sk_a = smem_addr(sk), sv_a = smem_addr(sv);

    att_load_tile_async(sq_a, qkv, qt * ATT_TC_TILE, T, stride);
    att_load_kv_async(sk_a, sv_a, qkv, C, 0, T, stride);
    cp_async_commit();

    const int row_lo = qt * ATT_TC_TILE + warp * 16 + g;  // this lane's rows: row_lo and row_lo + 8
#if !defined(ATT_WGMMA)
    uint32_t qa[4][4];
#endif
    float o[8][4];
    att_zero(o);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    for (int j = 0; j <= qt; j++) {
        const int st = j % 2;
        const uint32_t cur = st * ATT_TC_TILE_BYTES, nxt = (st ^ 1) * ATT_TC_TILE_BYTES;  // stage offsets
        if (j < qt) att_load_kv_async(sk_a + nxt, sv_a + nxt, qkv, C, (j + 1) * ATT_TC_TILE, T, stride);
        att_pipeline_wait(j < qt);

        float s[8][4];
#if defined(ATT_WGMMA)
        att_wgmma_abt_tiles(s, sq_a, sk_a + cur);  // S = Q K^T (Q from its tile: see att_wgmma_abt_tiles)
        att_wgmma_commit();
        att_wgmma_wait();
        att_reg_fence(s);
#else
        if (j == 0) att_load_a(qa, sq_a, warp * 16);
        att_zero(s);
        att_mma_abt(s, qa, sk_a + cur);
#endif
        if (j == qt) {  // diagonal tile: key > query is masked. Every row keeps key 0, so m stays finite.
#pragma unroll
            for (int n = 0; n < 8; n++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = j * ATT_TC_TILE + n * 8 + 2 * cq + e % 2;
                    if (key > row_lo + 8 * (e / 2)) s[n][e] = -INFINITY;
                }
            }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            const float m_new = fmaxf(m[r], mx * ATT_SCALE_LOG2);
            const float corr = exp2f(m[r] - m_new);  // 0 on the first tile (m = -inf)
            m[r] = m_new;
            l[r] *= corr;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                o[n][2 * r] *= corr;
                o[n][2 * r + 1] *= corr;
                s[n][2 * r] = exp2f(fmaf(s[n][2 * r], ATT_SCALE_LOG2, -m_new));
                s[n][2 * r + 1] = exp2f(fmaf(s[n][2 * r + 1], ATT_SCALE_LOG2, -m_new));
                l[r] += s[n][2 * r] + s[n][2 * r + 1];
            }
        }
        uint32_t pa[4][4];
        att_c_to_a(pa, s);
        att_mma_ab(o, pa, sv_a + cur);
        __syncthreads();  // everyone is done with stage st before iteration j+1 refills it
    }

    float inv_l[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffff, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffff, l[r], 2);
        inv_l[r] = 1.0f / l[r];
    }
    // sq is free after the loop's last barrier; each warp writes only its own 16 rows
    att_store_rows(out + (size_t)b * T * C + h * ATT_HS, C, qt * ATT_TC_TILE, T, o, inv_l[0], inv_l[1], sq,
                   warp * 16);
    if (cq == 0) {
        float* lse_row = lse + ((size_t)b * NH + h) * T;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            if (row_lo + 8 * r < T) lse_row[row_lo + 8 * r] = (m[r] + log2f(l[r])) * ATT_LN2;
        }
    }
}

// ---- element-wise steps of the backward, shared by its mma.sync and wgmma kernels ----
// Fragments as att_c_to_a: element (n, e) of a lane is row g + 8 (e / 2), column n * 8 + 2 cq + e % 2.

// dK/dV kernels: the query side of tile row0 (Q and dO tiles, lse and D of its rows) into one stage
__device__ __forceinline__ void att_bwd_load_query_tile(uint32_t sq, uint32_t sdo, float* slse, float* sd,
                                                        const __nv_bfloat16* qkv, const __nv_bfloat16* go,
                                                        const float* lse_row, const float* d_row, int row0, int T,
                                                        int C) {
    att_load_tile_async(sq, qkv, row0, T, 3 * C);
    att_load_tile_async(sdo, go, row0, T, C);
    att_load_stats_async(slse, sd, lse_row, d_row, row0, T);
}
// dK/dV kernels (rows = keys key_lo, key_lo + 8; columns = the queries of the tile at q0): S^T -> P^T
// in place, P = exp2(S * scale*log2e - lse*log2e), zero where key > query or query >= T when `masked`
__device__ __forceinline__ void att_bwd_pt(float (&s)[8][4], const float* slse, bool masked, int q0, int key_lo,
                                           int T, int cq) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int col = n * 8 + 2 * cq;
        const float2 lse2 = *reinterpret_cast<const float2*>(&slse[col]);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int query = q0 + col + e % 2;
            const float p = exp2f(fmaf(s[n][e], ATT_SCALE_LOG2, -(e % 2 ? lse2.y : lse2.x) * ATT_LOG2E));
            s[n][e] = (masked && (key_lo + 8 * (e / 2) > query || query >= T)) ? 0.f : p;
        }
    }
}
// dK/dV kernels: dP^T -> dS^T = P^T * (dP^T - D) in place (D of the tile's queries in sd)
__device__ __forceinline__ void att_bwd_dst(float (&dp)[8][4], const float (&pt)[8][4], const float* sd, int cq) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const float2 d2 = *reinterpret_cast<const float2*>(&sd[n * 8 + 2 * cq]);
#pragma unroll
        for (int e = 0; e < 4; e++) dp[n][e] = pt[n][e] * (dp[n][e] - (e % 2 ? d2.y : d2.x));
    }
}
// dQ kernels: lse * log2e and D of this lane's queries row_lo, row_lo + 8 of head bh (0 past T)
__device__ __forceinline__ void att_bwd_row_stats(float (&lse2)[2], float (&drow)[2], const float* lse,
                                                  const float* dvec, size_t bh, int T, int row_lo) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const size_t idx = bh * T + row_lo + 8 * r;
        const bool valid = row_lo + 8 * r < T;
        lse2[r] = valid ? lse[idx] * ATT_LOG2E : 0.f;
        drow[r] = valid ? dvec[idx] : 0.f;
    }
}
// dQ kernels (rows = queries, columns = the keys of the tile at k0): dP -> dS = P * (dP - D) in place,
// P from S; on the diagonal tile zero where key > query
__device__ __forceinline__ void att_bwd_ds(float (&dp)[8][4], const float (&s)[8][4], const float (&lse2)[2],
                                           const float (&drow)[2], bool diag, int k0, int row_lo, int cq) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = e / 2, key = k0 + n * 8 + 2 * cq + e % 2;
            const float p = exp2f(fmaf(s[n][e], ATT_SCALE_LOG2, -lse2[r]));
            dp[n][e] = (diag && key > row_lo + 8 * r) ? 0.f : p * (dp[n][e] - drow[r]);
        }
    }
}

// The backward of builds without wgmma (not sm_90a: mma.sync, per warp).
// dK and dV of one key tile (att_block().rank): loops over the query tiles i >= kt with Q, dO, lse and D
// double-buffered. Per warp (16 key rows x 64 queries), with S^T = K Q^T and dP^T = V dO^T:
//   P^T = exp2(S^T * scale*log2e - lse*log2e)  (masked: key > query, query >= T)
//   dV += P^T dO,   dS^T = P^T * (dP^T - D),   dK += dS^T Q   (times scale at the end)
__global__ void __launch_bounds__(ATT_TC_THREADS) attention_backward_dkv_tc_kernel(
    __nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp, const float* lse, const float* dvec,
    int T, int NH) {
    __shared__ __align__(128) __nv_bfloat16 sq[2][ATT_TC_TILE * ATT_HS];
    __shared__ __align__(128) __nv_bfloat16 sdo[2][ATT_TC_TILE * ATT_HS];
    __shared__ __align__(16) float slse[2][ATT_TC_TILE];
    __shared__ __align__(16) float sd[2][ATT_TC_TILE];
    const AttBlock blk = att_block();
    const int C = NH * ATT_HS, stride = 3 * C, b = blk.b, h = blk.h;
    const int kt = blk.rank;  // low key tiles see the most query tiles and start first
    const int nq = ceil_div(T, ATT_TC_TILE);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
    const __nv_bfloat16* qkv = inp + (size_t)b * T * stride + h * ATT_HS;
    const __nv_bfloat16* go = dout + (size_t)b * T * C + h * ATT_HS;
    const float* lse_row = lse + ((size_t)b * NH + h) * T;
    const float* d_row = dvec + ((size_t)b * NH + h) * T;
    const uint32_t sq_a = smem_addr(sq), sdo_a = smem_addr(sdo);

    // K and V of this tile pass through stage 1 into registers; stage 0 gets the first query tile
    att_load_kv_async(sq_a + ATT_TC_TILE_BYTES, sdo_a + ATT_TC_TILE_BYTES, qkv, C, kt * ATT_TC_TILE, T, stride);
    att_bwd_load_query_tile(sq_a, sdo_a, slse[0], sd[0], qkv, go, lse_row, d_row, kt * ATT_TC_TILE, T, C);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t ka[4][4], va[4][4];
    att_load_a(ka, sq_a + ATT_TC_TILE_BYTES, warp * 16);
    att_load_a(va, sdo_a + ATT_TC_TILE_BYTES, warp * 16);
    __syncthreads();  // stage 1 is refilled below

    const int key_lo = kt * ATT_TC_TILE + warp * 16 + g;  // this lane's keys: key_lo and key_lo + 8
    float dk[8][4], dv[8][4];
    att_zero(dk);
    att_zero(dv);
    for (int i = kt; i < nq; i++) {
        const int st = (i - kt) % 2;
        const uint32_t cur = st * ATT_TC_TILE_BYTES, nxt = (st ^ 1) * ATT_TC_TILE_BYTES;  // stage offsets
        att_pipeline_wait(i + 1 < nq, [&] {
            att_bwd_load_query_tile(sq_a + nxt, sdo_a + nxt, slse[st ^ 1], sd[st ^ 1], qkv, go, lse_row, d_row,
                                    (i + 1) * ATT_TC_TILE, T, C);
        });

        float s[8][4];
        att_zero(s);
        att_mma_abt_warp(s, ka, sq_a + cur);  // S^T: rows = keys, columns = queries
        const bool masked = i == kt || (i + 1) * ATT_TC_TILE > T;
        att_bwd_pt(s, slse[st], masked, i * ATT_TC_TILE, key_lo, T, cq);
        uint32_t pa[4][4];
        att_c_to_a(pa, s);
        att_mma_ab_warp(dv, pa, sdo_a + cur);  // dV += P^T dO

        float dp[8][4];
        att_zero(dp);
        att_mma_abt_warp(dp, va, sdo_a + cur);  // dP^T = V dO^T
        att_bwd_dst(dp, s, sd[st], cq);
        att_c_to_a(pa, dp);
        att_mma_ab_warp(dk, pa, sq_a + cur);  // dK += dS^T Q
        __syncthreads();
    }
    // after the loop's last barrier both stage-0 tiles are free; each warp uses its own rows
    __nv_bfloat16* dst = dinp + (size_t)b * T * stride + h * ATT_HS;
    att_store_rows(dst + C, stride, kt * ATT_TC_TILE, T, dk, ATT_SCALE, ATT_SCALE, sq[0], warp * 16);
    att_store_rows(dst + 2 * C, stride, kt * ATT_TC_TILE, T, dv, 1.0f, 1.0f, sdo[0], warp * 16);
}

// dQ of one query tile: loops over the key tiles 0..qt with K and V double-buffered. Per warp (16
// queries x 64 keys): S = Q K^T, dP = dO V^T, dS = P * (dP - D), dQ += dS K (times scale at the end).
// Recomputing P here instead of accumulating dQ across key tiles with atomics keeps the result
// bitwise deterministic.
__global__ void __launch_bounds__(ATT_TC_THREADS) attention_backward_dq_tc_kernel(
    __nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp, const float* lse, const float* dvec,
    int T, int NH) {
    __shared__ __align__(128) __nv_bfloat16 sk[2][ATT_TC_TILE * ATT_HS];
    __shared__ __align__(128) __nv_bfloat16 sv[2][ATT_TC_TILE * ATT_HS];
    const AttBlock blk = att_block();
    const int C = NH * ATT_HS, stride = 3 * C, b = blk.b, h = blk.h;
    const int qt = gridDim.x - 1 - blk.rank;  // longest rows start first
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
    const __nv_bfloat16* qkv = inp + (size_t)b * T * stride + h * ATT_HS;
    const __nv_bfloat16* go = dout + (size_t)b * T * C + h * ATT_HS;
    const uint32_t sk_a = smem_addr(sk), sv_a = smem_addr(sv);

    // Q and dO of this tile pass through stage 1 into registers; stage 0 gets key tile 0
    att_load_tile_async(sk_a + ATT_TC_TILE_BYTES, qkv, qt * ATT_TC_TILE, T, stride);
    att_load_tile_async(sv_a + ATT_TC_TILE_BYTES, go, qt * ATT_TC_TILE, T, C);
    att_load_kv_async(sk_a, sv_a, qkv, C, 0, T, stride);
    cp_async_commit();

    const int row_lo = qt * ATT_TC_TILE + warp * 16 + g;  // this lane's queries: row_lo and row_lo + 8
    float lse2[2], drow[2];
    att_bwd_row_stats(lse2, drow, lse, dvec, (size_t)b * NH + h, T, row_lo);
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qa[4][4], doa[4][4];
    att_load_a(qa, sk_a + ATT_TC_TILE_BYTES, warp * 16);
    att_load_a(doa, sv_a + ATT_TC_TILE_BYTES, warp * 16);
    __syncthreads();  // stage 1 is refilled below

    float dq[8][4];
    att_zero(dq);
    for (int j = 0; j <= qt; j++) {
        const int st = j % 2;
        const uint32_t cur = st * ATT_TC_TILE_BYTES, nxt = (st ^ 1) * ATT_TC_TILE_BYTES;  // stage offsets
        if (j < qt) att_load_kv_async(sk_a + nxt, sv_a + nxt, qkv, C, (j + 1) * ATT_TC_TILE, T, stride);
        att_pipeline_wait(j < qt);

        float s[8][4], dp[8][4];
        att_zero(s);
        att_zero(dp);
        att_mma_abt_warp(s, qa, sk_a + cur);    // S = Q K^T
        att_mma_abt_warp(dp, doa, sv_a + cur);  // dP = dO V^T
        att_bwd_ds(dp, s, lse2, drow, j == qt, j * ATT_TC_TILE, row_lo, cq);
        uint32_t dsa[4][4];
        att_c_to_a(dsa, dp);
        att_mma_ab_warp(dq, dsa, sk_a + cur);  // dQ += dS K
        __syncthreads();
    }
    att_store_rows(dinp + (size_t)b * T * stride + h * ATT_HS, stride, qt * ATT_TC_TILE, T, dq, ATT_SCALE,
                   ATT_SCALE, sk[0], warp * 16);
}

// Backward of sm_90a builds (wgmma): the same two kernels as above, dK/dV per key tile and dQ per
// query tile, deterministic for the same reason. The operands fixed over a block's loop (K and V
// here, Q and dO in the dQ kernel) are read from shared-memory tiles by descriptor, not kept as
// register A fragments (att_wgmma_abt_tiles says why), so the dK/dV kernel needs 48 KB of tiles plus
// its statistics: dynamic shared memory. Tried and replaced (dev/cuda/PERF.md): one fused kernel
// adding each key tile's dQ part into an fp32 accumulator in a fixed block order (no recomputation
// of P and dP) was slower than this pair (the ordered accumulation makes the blocks of a head wait
// for each other).
constexpr int ATT_DKV_WGMMA_SMEM = 6 * ATT_TC_TILE_BYTES + 4 * ATT_TC_TILE * (int)sizeof(float) + 1024;  // + alignment

__global__ void __launch_bounds__(ATT_TC_THREADS) attention_backward_dkv_wgmma_kernel(
    __nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp, const float* lse, const float* dvec,
    int T, int NH) {
#if defined(ATT_WGMMA)
    extern __shared__ uint8_t att_dyn_smem[];
    // 1024-byte aligned tiles: Q[2], dO[2], K, V, then lse[2][64] and D[2][64]
    const uint32_t raw = smem_addr(att_dyn_smem);
    uint8_t* base = att_dyn_smem + (((raw + 1023) & ~1023u) - raw);
    __nv_bfloat16* sq0 = reinterpret_cast<__nv_bfloat16*>(base);
    __nv_bfloat16* sdo0 = reinterpret_cast<__nv_bfloat16*>(base + 2 * ATT_TC_TILE_BYTES);
    float (*slse)[ATT_TC_TILE] = reinterpret_cast<float (*)[ATT_TC_TILE]>(base + 6 * ATT_TC_TILE_BYTES);
    float (*sd)[ATT_TC_TILE] = slse + 2;
    const uint32_t sq_a = smem_addr(sq0), sdo_a = sq_a + 2 * ATT_TC_TILE_BYTES;
    const uint32_t sk_a = sq_a + 4 * ATT_TC_TILE_BYTES, sv_a = sq_a + 5 * ATT_TC_TILE_BYTES;

    const AttBlock blk = att_block();
    const int C = NH * ATT_HS, stride = 3 * C, b = blk.b, h = blk.h;
    const int nq = ceil_div(T, ATT_TC_TILE);
    const int kt = blk.rank;  // low key tiles see the most query tiles and start first
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
    const __nv_bfloat16* qkv = inp + (size_t)b * T * stride + h * ATT_HS;
    const __nv_bfloat16* go = dout + (size_t)b * T * C + h * ATT_HS;
    const size_t bh = (size_t)b * NH + h;
    const float* lse_row = lse + bh * T;
    const float* d_row = dvec + bh * T;

    // K and V stay in their tiles for the whole loop (A operands of S^T and dP^T; not registers: see
    // att_wgmma_abt_tiles); stage 0 gets the first query tile
    att_load_kv_async(sk_a, sv_a, qkv, C, kt * ATT_TC_TILE, T, stride);
    att_bwd_load_query_tile(sq_a, sdo_a, slse[0], sd[0], qkv, go, lse_row, d_row, kt * ATT_TC_TILE, T, C);
    cp_async_commit();

    const int key_lo = kt * ATT_TC_TILE + warp * 16 + g;  // this lane's keys: key_lo and key_lo + 8
    float dk[8][4], dv[8][4];
    att_zero(dk);
    att_zero(dv);
    for (int i = kt; i < nq; i++) {
        const int st = (i - kt) % 2;
        const uint32_t cur = st * ATT_TC_TILE_BYTES, nxt = (st ^ 1) * ATT_TC_TILE_BYTES;  // stage offsets
        att_pipeline_wait(i + 1 < nq, [&] {
            att_bwd_load_query_tile(sq_a + nxt, sdo_a + nxt, slse[st ^ 1], sd[st ^ 1], qkv, go, lse_row, d_row,
                                    (i + 1) * ATT_TC_TILE, T, C);
        });

        float s[8][4], dp[8][4];
        att_wgmma_abt_tiles(s, sk_a, sq_a + cur);    // S^T = K Q^T: rows = keys, columns = queries
        att_wgmma_abt_tiles(dp, sv_a, sdo_a + cur);  // dP^T = V dO^T
        att_wgmma_commit();
        att_wgmma_wait();
        att_reg_fence(s);
        att_reg_fence(dp);
        const bool masked = i == kt || (i + 1) * ATT_TC_TILE > T;
        // att_bwd_pt and att_bwd_dst in one pass. Calling the two instead compiles to other code (ptxas
        // then keeps one copy of the dS loop instead of one per masked / unmasked path, 1152 instead of
        // 1224 instructions): equal per element, but not yet run on a GPU, so not taken.
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int col = n * 8 + 2 * cq;
            const float2 lse2 = *reinterpret_cast<const float2*>(&slse[st][col]);
            const float2 d2 = *reinterpret_cast<const float2*>(&sd[st][col]);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int query = i * ATT_TC_TILE + col + e % 2;
                const float p = exp2f(fmaf(s[n][e], ATT_SCALE_LOG2, -(e % 2 ? lse2.y : lse2.x) * ATT_LOG2E));
                s[n][e] = (masked && (key_lo + 8 * (e / 2) > query || query >= T)) ? 0.f : p;
                dp[n][e] = s[n][e] * (dp[n][e] - (e % 2 ? d2.y : d2.x));
            }
        }
        uint32_t pa[4][4], dsa[4][4];
        att_c_to_a(pa, s);
        att_c_to_a(dsa, dp);
        att_reg_fence(dv);
        att_reg_fence(dk);
        att_wgmma_fence();
        att_wgmma_ab_issue(dv, pa, sdo_a + cur);  // dV += P^T dO
        att_wgmma_ab_issue(dk, dsa, sq_a + cur);  // dK += dS^T Q
        att_wgmma_commit();
        att_wgmma_wait();
        att_reg_fence(dv);
        att_reg_fence(dk);
        __syncthreads();  // stage st is refilled next step
    }
    // both stage-0 tiles are free now; each warp uses its own rows
    __nv_bfloat16* dst = dinp + (size_t)b * T * stride + h * ATT_HS;
    att_store_rows(dst + C, stride, kt * ATT_TC_TILE, T, dk, ATT_SCALE, ATT_SCALE, sq0, warp * 16);
    att_store_rows(dst + 2 * C, stride, kt * ATT_TC_TILE, T, dv, 1.0f, 1.0f, sdo0, warp * 16);
#else
    __trap();  // launched only by sm_90a builds (LLMC_SM90A), where ATT_WGMMA is defined
#endif
}


__global__ void __launch_bounds__(ATT_TC_THREADS) attention_backward_dq_wgmma_kernel(
    __nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp, const float* lse, const float* dvec,
    int T, int NH) {
#if defined(ATT_WGMMA)
    __shared__ __align__(1024) __nv_bfloat16 sk[2][ATT_TC_TILE * ATT_HS];
    __shared__ __align__(1024) __nv_bfloat16 sv[2][ATT_TC_TILE * ATT_HS];
    __shared__ __align__(1024) __nv_bfloat16 sq[ATT_TC_TILE * ATT_HS];
    __shared__ __align__(1024) __nv_bfloat16 sdo[ATT_TC_TILE * ATT_HS];
    const AttBlock blk = att_block();
    const int C = NH * ATT_HS, stride = 3 * C, b = blk.b, h = blk.h;
    const int qt = gridDim.x - 1 - blk.rank;  // longest rows start first
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, cq = lane % 4;
    const __nv_bfloat16* qkv = inp + (size_t)b * T * stride + h * ATT_HS;
    const __nv_bfloat16* go = dout + (size_t)b * T * C + h * ATT_HS;
    const uint32_t sk_a = smem_addr(sk), sv_a = smem_addr(sv);
    const uint32_t sq_a = smem_addr(sq), sdo_a = smem_addr(sdo);

    att_load_tile_async(sq_a, qkv, qt * ATT_TC_TILE, T, stride);
    att_load_tile_async(sdo_a, go, qt * ATT_TC_TILE, T, C);
    att_load_kv_async(sk_a, sv_a, qkv, C, 0, T, stride);
    cp_async_commit();

    const int row_lo = qt * ATT_TC_TILE + warp * 16 + g;  // this lane's queries: row_lo and row_lo + 8
    float lse2[2], drow[2];
    att_bwd_row_stats(lse2, drow, lse, dvec, (size_t)b * NH + h, T, row_lo);
    float dq[8][4];
    att_zero(dq);
    for (int j = 0; j <= qt; j++) {
        const int st = j % 2;
        const uint32_t cur = st * ATT_TC_TILE_BYTES, nxt = (st ^ 1) * ATT_TC_TILE_BYTES;  // stage offsets
        if (j < qt) att_load_kv_async(sk_a + nxt, sv_a + nxt, qkv, C, (j + 1) * ATT_TC_TILE, T, stride);
        att_pipeline_wait(j < qt);

        float s[8][4], dp[8][4];
        att_wgmma_abt_tiles(s, sq_a, sk_a + cur);    // S = Q K^T
        att_wgmma_abt_tiles(dp, sdo_a, sv_a + cur);  // dP = dO V^T
        att_wgmma_commit();
        att_wgmma_wait();
        att_reg_fence(s);
        att_reg_fence(dp);
        att_bwd_ds(dp, s, lse2, drow, j == qt, j * ATT_TC_TILE, row_lo, cq);
        uint32_t dsa[4][4];
        att_c_to_a(dsa, dp);
        att_mma_ab(dq, dsa, sk_a + cur);  // dQ += dS K
        __syncthreads();
    }
    att_store_rows(dinp + (size_t)b * T * stride + h * ATT_HS, stride, qt * ATT_TC_TILE, T, dq, ATT_SCALE,
                   ATT_SCALE, sk[0], warp * 16);
#else
    __trap();  // launched only by sm_90a builds (LLMC_SM90A), where ATT_WGMMA is defined
#endif
}

// ----------------------------------------------------------------------------
// launchers

// The backward's fp32 scratch: D = rowsum(dO * O), B*NH*T floats.
inline size_t attention_backward_scratch_floats(int B, int T, int NH) { return (size_t)B * NH * T; }

inline void attention_check_shape(int C, int NH) {
    if (C != NH * ATT_HS) {
        fatal("attention: head size C/NH = %d/%d is not %d, the only head size llmc/attention.cuh supports", C, NH, ATT_HS);
    }
}

// D = rowsum(dout * out) into scratch_d (B, NH, T): the first step of both backwards
inline void attention_backward_d(float* scratch_d, const floatX* dout, const floatX* out, int B, int T, int NH,
                                 cudaStream_t stream) {
    const size_t smem = (size_t)NH * ATT_D_T * sizeof(float);
    if (smem > 48 * 1024) fatal("attention_backward_d: NH=%d heads need %zu bytes of shared memory (48 KB at most)", NH, smem);
    dim3 grid(ceil_div(T, ATT_D_T), B);
    attention_backward_d_kernel<<<grid, ATT_D_THREADS, smem, stream>>>(scratch_d, dout, out, T, NH);
    cudaCheckLaunch();
}

// fp32 CUDA-core path (any floatX): FP32 builds, and the reference the lab checks the bf16 path against
inline void attention_forward_fp32(floatX* out, float* lse, const floatX* inp, int B, int T, int NH,
                                   cudaStream_t stream) {
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    attention_forward_fp32_kernel<<<grid, ATT_ROWS, 0, stream>>>(out, lse, inp, T, NH);
    cudaCheckLaunch();
}

inline void attention_backward_fp32(floatX* dinp, float* scratch_d, const floatX* dout, const floatX* inp,
                                    const floatX* out, const float* lse, int B, int T, int NH, cudaStream_t stream) {
    attention_backward_d(scratch_d, dout, out, B, T, NH, stream);
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    attention_backward_dq_fp32_kernel<<<grid, ATT_ROWS, 0, stream>>>(dinp, dout, inp, lse, scratch_d, T, NH);
    cudaCheckLaunch();
    attention_backward_dkv_fp32_kernel<true><<<grid, ATT_ROWS, 0, stream>>>(dinp, dout, inp, lse, scratch_d, T, NH);
    cudaCheckLaunch();
    attention_backward_dkv_fp32_kernel<false><<<grid, ATT_ROWS, 0, stream>>>(dinp, dout, inp, lse, scratch_d, T, NH);
    cudaCheckLaunch();
}

// Tensor-core path. Templates only so that FP32 builds, where the dispatch below discards these
// calls, never instantiate them; Elem is always __nv_bfloat16.
template <class Elem>
inline void attention_forward_tc(Elem* out, float* lse, const Elem* inp, int B, int T, int NH, cudaStream_t stream) {
    static_assert(std::is_same<Elem, __nv_bfloat16>::value, "the tensor-core attention kernels take bf16");
    dim3 grid(ceil_div(T, ATT_TC_TILE), NH, B);
    attention_forward_tc_kernel<<<grid, ATT_TC_THREADS, 0, stream>>>(out, lse, inp, T, NH);
    cudaCheckLaunch();
}

template <class Elem>
inline void attention_backward_tc(Elem* dinp, float* scratch_d, const Elem* dout, const Elem* inp, const Elem* out,
                                  const float* lse, int B, int T, int NH, cudaStream_t stream) {
    static_assert(std::is_same<Elem, __nv_bfloat16>::value, "the tensor-core attention kernels take bf16");
    attention_backward_d(scratch_d, dout, out, B, T, NH, stream);
    dim3 grid(ceil_div(T, ATT_TC_TILE), NH, B);
#if defined(LLMC_SM90A)
    cudaCheck(cudaFuncSetAttribute(attention_backward_dkv_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   ATT_DKV_WGMMA_SMEM));
    attention_backward_dkv_wgmma_kernel<<<grid, ATT_TC_THREADS, ATT_DKV_WGMMA_SMEM, stream>>>(dinp, dout, inp, lse,
                                                                                             scratch_d, T, NH);
    cudaCheckLaunch();
    attention_backward_dq_wgmma_kernel<<<grid, ATT_TC_THREADS, 0, stream>>>(dinp, dout, inp, lse, scratch_d, T, NH);
    cudaCheckLaunch();
#else
    attention_backward_dkv_tc_kernel<<<grid, ATT_TC_THREADS, 0, stream>>>(dinp, dout, inp, lse, scratch_d, T, NH);
    cudaCheckLaunch();
    attention_backward_dq_tc_kernel<<<grid, ATT_TC_THREADS, 0, stream>>>(dinp, dout, inp, lse, scratch_d, T, NH);
    cudaCheckLaunch();
#endif
}

// What attention_forward / attention_backward run in this binary, for the run table and the lab: the
// device code's compile target decides (sm_90a: wgmma), so a one-thread kernel reports it.
__global__ void attention_engine_kernel(int* wgmma) {
#if defined(ATT_WGMMA)
    *wgmma = 1;
#else
    *wgmma = 0;
#endif
}
inline const char* attention_engine_name() {
    if constexpr (!kFloatXIsBF16) return "fp32 CUDA cores";
    int* d = nullptr;
    int wgmma = 0;
    cudaCheck(cudaMalloc(&d, sizeof(int)));
    attention_engine_kernel<<<1, 1>>>(d);
    cudaCheckLaunch();
    cudaCheck(cudaMemcpy(&wgmma, d, sizeof(int), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(d));
    return wgmma ? "bf16 tensor cores, wgmma (sm_90a)" : "bf16 tensor cores, mma.sync";
}

// The one dispatch point: tensor cores for bf16, CUDA cores for FP32 builds.
inline void attention_forward(floatX* out, float* lse, const floatX* inp, int B, int T, int C, int NH,
                              cudaStream_t stream) {
    attention_check_shape(C, NH);
    if constexpr (kFloatXIsBF16) {
        attention_forward_tc(out, lse, inp, B, T, NH, stream);
    } else {
        attention_forward_fp32(out, lse, inp, B, T, NH, stream);
    }
}

// scratch_d: attention_backward_scratch_floats(B, T, NH) floats.
inline void attention_backward(floatX* dinp, float* scratch_d, const floatX* dout, const floatX* inp,
                               const floatX* out, const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
    attention_check_shape(C, NH);
    if constexpr (kFloatXIsBF16) {
        attention_backward_tc(dinp, scratch_d, dout, inp, out, lse, B, T, NH, stream);
    } else {
        attention_backward_fp32(dinp, scratch_d, dout, inp, out, lse, B, T, NH, stream);
    }
}
