/*
 * Token + position embedding.
 *
 * forward:  out(B,T,C) = wte[inp[b,t]] + wpe[t]                                   (out =)
 * backward: dwte(Vp,C) += sum over (b,t) with inp[b,t]==v of dout[b,t]            (dwte +=)
 *           dwpe(maxT,C) += sum over b of dout[b,t]                                (dwpe +=, or = for t < T)
 *
 * The backward is deterministic and uses no float atomics: the host (which has the tokens anyway)
 * groups the positions of each distinct token (a counting sort) while the forward pass runs on the
 * GPU, and cuts each token's positions into segments of at most ENCODER_SEGMENT, so that a frequent
 * token (a few percent of real text is "," or " the") is summed by many blocks instead of one long
 * serial loop. One block per segment sums its positions in a fixed order in fp32; a token with a
 * single segment is then written straight back (one read-modify-write of its wte row), the partial
 * sums of a token with several segments go to fp32 scratch and a second kernel adds them in order.
 * In bf16 the row update uses stochastic rounding so small gradients accumulated over micro-steps
 * are not rounded away.
 */
#pragma once

#include <vector>
#include "llmc/cuda_common.h"

// ----------------------------------------------------------------------------
// kernels

__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
                                       int B, int T, int C) {
    const int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= B * T * C) return;
    const int bt = idx / C;
    const int t = bt % T;
    const int c = idx % C;
    const int token = inp[bt];
    x128 a = load128cs(wte + (size_t)token * C + c);
    x128 p = load128cs(wpe + (size_t)t * C + c);
    x128 o;
    for (int k = 0; k < x128::size; k++) o[k] = (floatX)((float)a[k] + (float)p[k]);
    store128(out + idx, o);
}

// one thread per (t, 8 channels): sums over b in order, onto dwpe (accumulate) or onto 0 (dwpe not read)
__global__ void wpe_backward_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C, uint32_t seed,
                                    bool accumulate) {
    const int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= T * C) return;
    float acc[x128::size] = {};
    if (accumulate) {
        x128 old = load128(dwpe + idx);
        for (int k = 0; k < x128::size; k++) acc[k] = (float)old[k];
    }
#pragma unroll 8  // several loads in flight
    for (int b = 0; b < B; b++) {
        x128 d = load128cs(dout + (size_t)b * T * C + idx);
        for (int k = 0; k < x128::size; k++) acc[k] += (float)d[k];
    }
    x128 res;
    for (int k = 0; k < x128::size; k++) stochastic_round(acc[k], &res[k], idx + k, seed);
    store128(dwpe + idx, res);
}

// dwte[token, c .. c+size) += acc, stochastically rounded (the one write of those wte elements)
__device__ inline void wte_row_add(floatX* dwte, int token, int c, const float* acc, int C, uint32_t seed) {
    floatX* row = dwte + (size_t)token * C + c;
    x128 old = load128(row), res;
    for (int k = 0; k < x128::size; k++) stochastic_round((float)old[k] + acc[k], &res[k], token * C + c + k, seed);
    store128(row, res);
}

constexpr int ENCODER_SEGMENT = 64;  // positions per block at most
constexpr int ENCODER_ROW_GROUPS = 4;  // threadIdx.y: positions begin + y, begin + y + 4, ...

// One segment of one token (int4: token, begin, end, slot) per block. blockDim = (column threads,
// ENCODER_ROW_GROUPS); each row group sums every 4th position of the segment, then row group 0 adds
// the 4 sums in order. slot < 0: the token has this one segment, dwte row += sum (stochastic
// rounding); else partial[slot] = sum, for wte_combine_kernel.
__global__ void wte_segment_kernel(floatX* dwte, float* partial, const floatX* dout, const int4* segments,
                                   const int* positions, int C, uint32_t seed) {
    extern __shared__ float sums[];  // (ENCODER_ROW_GROUPS, C)
    const int4 seg = segments[blockIdx.x];
    const int token = seg.x, begin = seg.y, end = seg.z, slot = seg.w;
    for (int c = threadIdx.x * x128::size; c < C; c += blockDim.x * x128::size) {
        float acc[x128::size] = {};
#pragma unroll 4
        for (int i = begin + threadIdx.y; i < end; i += ENCODER_ROW_GROUPS) {
            x128 d = load128(dout + (size_t)positions[i] * C + c);
            for (int k = 0; k < x128::size; k++) acc[k] += (float)d[k];
        }
        for (int k = 0; k < x128::size; k++) sums[threadIdx.y * C + c + k] = acc[k];
    }
    __syncthreads();
    if (threadIdx.y != 0) return;
    for (int c = threadIdx.x * x128::size; c < C; c += blockDim.x * x128::size) {
        float acc[x128::size] = {};
        for (int r = 0; r < ENCODER_ROW_GROUPS; r++) {  // fixed order
            for (int k = 0; k < x128::size; k++) acc[k] += sums[r * C + c + k];
        }
        if (slot >= 0) {
            for (int k = 0; k < x128::size; k++) partial[(size_t)slot * C + c + k] = acc[k];
        } else {
            wte_row_add(dwte, token, c, acc, C, seed);
        }
    }
}

// One token with several segments (int4: token, first slot, number of slots, unused) per block:
// dwte row += the segments' partial sums, added in segment order.
__global__ void wte_combine_kernel(floatX* dwte, const float* partial, const int4* multi, int C, uint32_t seed) {
    const int4 m = multi[blockIdx.x];
    const int token = m.x, first = m.y, count = m.z;
    for (int c = threadIdx.x * x128::size; c < C; c += blockDim.x * x128::size) {
        float acc[x128::size] = {};
        for (int s = first; s < first + count; s++) {
            for (int k = 0; k < x128::size; k++) acc[k] += partial[(size_t)s * C + c + k];
        }
        wte_row_add(dwte, token, c, acc, C, seed);
    }
}

// ----------------------------------------------------------------------------
// host-side bucketing for the deterministic wte backward

// Workspace owned by the model: pinned host staging + device copies, sized for B*T positions.
// Staging layout (ints): positions[BT, rounded up to 4] | segments[max_segments] (int4) | multi[max_multi] (int4).
struct EncoderBackwardWorkspace {
    int* host_buf = nullptr;    // pinned
    int* device_buf = nullptr;  // same layout on the device
    float* partial = nullptr;   // (max_slots, C) fp32 partial sums of tokens with several segments
    std::vector<int> counts;    // per vocab entry, host scratch
    std::vector<int> tokens;    // distinct tokens in order of first occurrence, host scratch
    int capacity_bt = 0, channels = 0;
    int positions_ints = 0;  // capacity_bt rounded up to a multiple of 4: the int4 arrays after it are aligned
    int max_segments = 0, max_multi = 0, max_slots = 0;
    int num_segments = 0, num_multi = 0;  // of the prepared batch
};

// Bounds for BT positions: every token has one segment plus one per ENCODER_SEGMENT positions; a
// token with n > ENCODER_SEGMENT positions has ceil(n / ENCODER_SEGMENT) < 2n / ENCODER_SEGMENT slots.
inline void encoder_backward_workspace_init(EncoderBackwardWorkspace* ws, int BT, int Vp, int C) {
    ws->capacity_bt = BT;
    ws->positions_ints = ceil_div(BT, 4) * 4;
    ws->channels = C;
    ws->max_segments = BT + BT / ENCODER_SEGMENT + 1;
    ws->max_multi = BT / (ENCODER_SEGMENT + 1) + 1;
    ws->max_slots = 2 * BT / ENCODER_SEGMENT + 1;
    const size_t n = (size_t)ws->positions_ints + 4 * ((size_t)ws->max_segments + ws->max_multi);
    cudaCheck(cudaMallocHost(&ws->host_buf, n * sizeof(int)));
    cudaCheck(cudaMalloc(&ws->device_buf, n * sizeof(int)));
    cudaCheck(cudaMalloc(&ws->partial, (size_t)ws->max_slots * C * sizeof(float)));
    ws->counts.assign(Vp, 0);
    ws->tokens.reserve(BT);
}

inline void encoder_backward_workspace_free(EncoderBackwardWorkspace* ws) {
    if (ws->host_buf) cudaCheck(cudaFreeHost(ws->host_buf));
    cudaFreeCheck(&ws->device_buf);
    cudaFreeCheck(&ws->partial);
    ws->host_buf = nullptr;
}

// ----------------------------------------------------------------------------
// launchers

inline void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
                            int B, int T, int C, cudaStream_t stream) {
    if (C % x128::size != 0) fatal("encoder_forward: C=%d must be a multiple of %d", C, x128::size);
    const int block_size = 256;
    const int grid_size = ceil_div((long)B * T * C, (long)block_size * x128::size);
    encoder_forward_kernel<<<grid_size, block_size, 0, stream>>>(out, inp, wte, wpe, B, T, C);
    cudaCheckLaunch();
}

// Host side of the backward, done while the forward runs (the tokens are known then): groups the
// positions of each distinct token (counting sort, stable), cuts them into segments, and starts the
// copy to the device on `stream`. Call after the previous micro-step's backward was queued and the
// stream synchronized (gpt2_forward does both), so the pinned buffer is free to reuse.
inline void encoder_backward_prepare(EncoderBackwardWorkspace* ws, const int* inputs_host, int BT,
                                     cudaStream_t stream) {
    if (BT > ws->capacity_bt) fatal("encoder_backward: B*T=%d exceeds workspace %d", BT, ws->capacity_bt);
    std::vector<int>& counts = ws->counts;
    std::vector<int>& tokens = ws->tokens;
    tokens.clear();
    for (int i = 0; i < BT; i++) {
        if (counts[inputs_host[i]]++ == 0) tokens.push_back(inputs_host[i]);
    }
    int* positions = ws->host_buf;
    int4* segments = reinterpret_cast<int4*>(positions + ws->positions_ints);
    int4* multi = segments + ws->max_segments;
    int begin = 0, num_segments = 0, num_multi = 0, num_slots = 0;
    for (int token : tokens) {
        const int n = counts[token];
        const int pieces = ceil_div(n, ENCODER_SEGMENT);
        if (pieces > 1) multi[num_multi++] = make_int4(token, num_slots, pieces, 0);
        for (int p = 0; p < pieces; p++) {
            const int b = begin + p * ENCODER_SEGMENT;
            const int e = b + ENCODER_SEGMENT < begin + n ? b + ENCODER_SEGMENT : begin + n;
            segments[num_segments++] = make_int4(token, b, e, pieces > 1 ? num_slots++ : -1);
        }
        counts[token] = begin;  // reuse as write cursor
        begin += n;
    }
    for (int i = 0; i < BT; i++) positions[counts[inputs_host[i]]++] = i;
    for (int token : tokens) counts[token] = 0;  // reset for the next call
    ws->num_segments = num_segments;
    ws->num_multi = num_multi;
    // positions, then the used parts of segments and multi (the layout has fixed offsets)
    int* dev = ws->device_buf;
    cudaCheck(cudaMemcpyAsync(dev, positions, (size_t)BT * sizeof(int), cudaMemcpyHostToDevice, stream));
    cudaCheck(cudaMemcpyAsync(dev + ws->positions_ints, segments, num_segments * sizeof(int4), cudaMemcpyHostToDevice, stream));
    cudaCheck(cudaMemcpyAsync(dev + ws->positions_ints + 4 * ws->max_segments, multi, num_multi * sizeof(int4),
                              cudaMemcpyHostToDevice, stream));
}

// Needs encoder_backward_prepare for the same tokens earlier on the same stream. accumulate_wpe = false:
// rows t < T of dwpe are written (=), not read (dwte is always +=: the LM head's weight gradient is
// there already, wte being tied to it).
inline void encoder_backward(floatX* dwte, floatX* dwpe, const EncoderBackwardWorkspace* ws, const floatX* dout,
                             int B, int T, int C, uint32_t seed, cudaStream_t stream, bool accumulate_wpe = true) {
    if (C != ws->channels) fatal("encoder_backward: C=%d but the workspace was made for C=%d", C, ws->channels);
    const int wpe_block = 256;
    wpe_backward_kernel<<<ceil_div((long)T * C, (long)wpe_block * x128::size), wpe_block, 0, stream>>>(
        dwpe, dout, B, T, C, seed, accumulate_wpe);
    cudaCheckLaunch();
    const int* d_positions = ws->device_buf;
    const int4* d_segments = reinterpret_cast<const int4*>(d_positions + ws->positions_ints);
    const int4* d_multi = d_segments + ws->max_segments;
    const int col_threads = C / x128::size >= 96 ? 96 : 32;
    const size_t smem = (size_t)ENCODER_ROW_GROUPS * C * sizeof(float);
    allow_dynamic_smem(wte_segment_kernel, smem);
    if (ws->num_segments > 0) {
        wte_segment_kernel<<<ws->num_segments, dim3(col_threads, ENCODER_ROW_GROUPS), smem, stream>>>(
            dwte, ws->partial, dout, d_segments, d_positions, C, seed);
        cudaCheckLaunch();
    }
    if (ws->num_multi > 0) {
        wte_combine_kernel<<<ws->num_multi, col_threads, 0, stream>>>(dwte, ws->partial, d_multi, C, seed);
        cudaCheckLaunch();
    }
}
