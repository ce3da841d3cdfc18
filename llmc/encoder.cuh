/*
 * Token + position embedding.
 *
 * forward:  out(B,T,C) = wte[inp[b,t]] + wpe[t]                                   (out =)
 * backward: dwte(Vp,C) += sum over (b,t) with inp[b,t]==v of dout[b,t]            (dwte +=)
 *           dwpe(maxT,C) += sum over b of dout[b,t]                                (dwpe +=)
 *
 * The backward is deterministic and uses no float atomics: the host (which has the tokens anyway)
 * groups the positions of each distinct token (a counting sort, CSR layout) while the forward pass
 * runs on the GPU; one block then sums one token's positions in a fixed order in fp32 and does a
 * single read-modify-write of that wte row.
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

// one thread per (t, 8 channels): sums over b in order
__global__ void wpe_backward_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C, uint32_t seed) {
    const int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= T * C) return;
    float acc[x128::size];
    x128 old = load128(dwpe + idx);
    for (int k = 0; k < x128::size; k++) acc[k] = (float)old[k];
    for (int b = 0; b < B; b++) {
        x128 d = load128cs(dout + (size_t)b * T * C + idx);
        for (int k = 0; k < x128::size; k++) acc[k] += (float)d[k];
    }
    x128 res;
    for (int k = 0; k < x128::size; k++) stochastic_round(acc[k], &res[k], idx + k, seed);
    store128(dwpe + idx, res);
}

// grid.x = number of distinct tokens; each thread handles 8 channels of the token's row
__global__ void wte_backward_kernel(floatX* dwte, const floatX* dout, const int* bucket_tokens,
                                    const int* bucket_offsets, const int* bucket_positions, int C, uint32_t seed) {
    const int bucket = blockIdx.x;
    const int token = bucket_tokens[bucket];
    const int begin = bucket_offsets[bucket];
    const int end = bucket_offsets[bucket + 1];
    for (int c = threadIdx.x * x128::size; c < C; c += blockDim.x * x128::size) {
        float acc[x128::size];
        x128 old = load128(dwte + (size_t)token * C + c);
        for (int k = 0; k < x128::size; k++) acc[k] = (float)old[k];
        for (int i = begin; i < end; i++) {
            x128 d = load128(dout + (size_t)bucket_positions[i] * C + c);
            for (int k = 0; k < x128::size; k++) acc[k] += (float)d[k];
        }
        x128 res;
        for (int k = 0; k < x128::size; k++) stochastic_round(acc[k], &res[k], token * C + c + k, seed);
        store128(dwte + (size_t)token * C + c, res);
    }
}

// ----------------------------------------------------------------------------
// host-side bucketing for the deterministic wte backward

// Workspace owned by the model: pinned host staging + device arrays sized for B*T positions.
struct EncoderBackwardWorkspace {
    int* host_buf = nullptr;    // pinned: tokens[BT] | offsets[BT+1] | positions[BT]
    int* device_buf = nullptr;  // same layout on the device
    std::vector<int> counts;    // per vocab entry, host scratch
    int capacity_bt = 0;
    int num_buckets = 0;        // distinct tokens of the prepared batch
};

inline void encoder_backward_workspace_init(EncoderBackwardWorkspace* ws, int BT, int Vp) {
    const size_t n = (size_t)3 * BT + 1;
    cudaCheck(cudaMallocHost(&ws->host_buf, n * sizeof(int)));
    cudaCheck(cudaMalloc(&ws->device_buf, n * sizeof(int)));
    ws->counts.assign(Vp, 0);
    ws->capacity_bt = BT;
}

inline void encoder_backward_workspace_free(EncoderBackwardWorkspace* ws) {
    if (ws->host_buf) cudaCheck(cudaFreeHost(ws->host_buf));
    cudaFreeCheck(&ws->device_buf);
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
// positions of each distinct token (counting sort, stable) into the pinned buffer and starts its
// copy to the device on `stream`. Call after the previous micro-step's backward was queued and the
// stream synchronized (gpt2_forward does both), so the pinned buffer is free to reuse.
inline void encoder_backward_prepare(EncoderBackwardWorkspace* ws, const int* inputs_host, int BT,
                                     cudaStream_t stream) {
    if (BT > ws->capacity_bt) fatal("encoder_backward: B*T=%d exceeds workspace %d", BT, ws->capacity_bt);
    int* tokens = ws->host_buf;
    std::vector<int>& counts = ws->counts;
    int num_buckets = 0;
    for (int i = 0; i < BT; i++) {
        if (counts[inputs_host[i]]++ == 0) tokens[num_buckets++] = inputs_host[i];
    }
    int* offsets = tokens + num_buckets;
    int* positions = offsets + num_buckets + 1;
    offsets[0] = 0;
    for (int b = 0; b < num_buckets; b++) {
        offsets[b + 1] = offsets[b] + counts[tokens[b]];
        counts[tokens[b]] = offsets[b];  // reuse as write cursor
    }
    for (int i = 0; i < BT; i++) positions[counts[inputs_host[i]]++] = i;
    for (int b = 0; b < num_buckets; b++) counts[tokens[b]] = 0;  // reset for the next call
    ws->num_buckets = num_buckets;
    const size_t n = (size_t)2 * num_buckets + 1 + BT;
    cudaCheck(cudaMemcpyAsync(ws->device_buf, ws->host_buf, n * sizeof(int), cudaMemcpyHostToDevice, stream));
}

// Needs encoder_backward_prepare for the same tokens earlier on the same stream.
inline void encoder_backward(floatX* dwte, floatX* dwpe, const EncoderBackwardWorkspace* ws, const floatX* dout,
                             int B, int T, int C, uint32_t seed, cudaStream_t stream) {
    const int wpe_block = 256;
    wpe_backward_kernel<<<ceil_div((long)T * C, (long)wpe_block * x128::size), wpe_block, 0, stream>>>(dwpe, dout, B, T, C, seed);
    cudaCheckLaunch();
    const int num_buckets = ws->num_buckets;
    const int* d_tokens = ws->device_buf;
    const int* d_offsets = d_tokens + num_buckets;
    const int* d_positions = d_offsets + num_buckets + 1;
    const int block_size = C / x128::size >= 96 ? 96 : 32;
    wte_backward_kernel<<<num_buckets, block_size, 0, stream>>>(dwte, dout, d_tokens, d_offsets, d_positions, C, seed);
    cudaCheckLaunch();
}
