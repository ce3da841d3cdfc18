/*
 * What the two autotunes share: llmc/matmul.cuh (cuBLASLt algorithms) and llmc/cudnn_att.cpp (cuDNN
 * attention plans). autotune_choose runs every candidate once on the call's own data, keeps those whose
 * outputs are bitwise equal to the default's (candidate 0), times them (autotune_time) and picks one
 * (autotune_pick), so the choice never changes the numbers.
 *
 * Equality is decided on a 64-bit hash of the output bytes computed on the GPU (an output can be GBs,
 * the LM head's logits: no room for a reference copy, and a host copy per candidate would be slow):
 * equal outputs give equal hashes; unequal ones collide with probability ~2^-64.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "llmc/cuda_common.h"

// Keep the default (candidate 0) unless another is at least this much faster.
constexpr float AUTOTUNE_MIN_GAIN = 0.03f;

// Milliseconds of launch(0) ... launch(count - 1) on `stream`: four rounds of one run per candidate,
// each run after L2 is overwritten (back-to-back runs find their operands in L2, which the training
// step's kernels mostly do not: that hid the difference between the LM head forward's cuBLASLt
// candidates, dev/cuda/PERF.md row 11); the fastest round counts.
inline std::vector<float> autotune_time(const cudaDeviceProp& props, int count, const std::function<void(int)>& launch,
                                        cudaStream_t stream) {
    void* flush = nullptr;
    const size_t flush_bytes = 2 * (size_t)props.l2CacheSize;
    if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) {  // no room: time without the flush
        (void)cudaGetLastError();
        flush = nullptr;
    }
    GpuTimer timer;
    std::vector<float> best(count, 1e30f);
    for (int round = 0; round < 4; round++) {
        for (int c = 0; c < count; c++) {
            if (flush) cudaCheck(cudaMemsetAsync(flush, round, flush_bytes, stream));
            best[c] = std::min(best[c], timer.ms([&] { launch(c); }, stream));
        }
    }
    if (flush) cudaCheck(cudaFree(flush));
    return best;
}

// Index of the fastest time in ms (index 0: the default), or 0 when that is not AUTOTUNE_MIN_GAIN
// faster: differences of ~1% are within the timing noise, and a kernel timed alone can rank
// differently inside the step (other kernels' data in L2).
inline int autotune_pick(const std::vector<float>& ms) {
    int chosen = 0;
    for (int c = 1; c < (int)ms.size(); c++) {
        if (ms[c] < ms[chosen]) chosen = c;
    }
    return ms[chosen] > (1.0f - AUTOTUNE_MIN_GAIN) * ms[0] ? 0 : chosen;
}

// ----------------------------------------------------------------------------
// bitwise-equality filter

__device__ inline uint64_t autotune_mix64(uint64_t x) {  // splitmix64 finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// *out += sum over the buffer of mix(index, word): order-independent, so any grid gives the same sum.
// static: this header is compiled into two objects (the trainer and llmc/cudnn_att.cpp).
static __global__ void autotune_hash_kernel(const uint8_t* bytes, size_t num_bytes, unsigned long long* out) {
    const size_t words = num_bytes / 4;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(bytes);
    uint64_t local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
        local += autotune_mix64((i << 32) ^ w[i]);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (size_t i = words * 4; i < num_bytes; i++) local += autotune_mix64(((uint64_t)i << 40) ^ bytes[i] ^ 0xABull);
    }
    for (int offset = 16; offset > 0; offset >>= 1) local += __shfl_xor_sync(0xFFFFFFFFu, local, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, (unsigned long long)local);
}

// One device buffer of a candidate's result.
struct AutotuneOutput {
    const void* ptr;
    size_t bytes;
};

// Hash of all outputs (synchronizes the stream); scratch: one device word.
inline uint64_t autotune_outputs_hash(const cudaDeviceProp& props, const std::vector<AutotuneOutput>& outputs,
                                      unsigned long long* scratch, cudaStream_t stream) {
    uint64_t h = 0;
    for (size_t o = 0; o < outputs.size(); o++) {
        cudaCheck(cudaMemsetAsync(scratch, 0, sizeof(unsigned long long), stream));
        const size_t n = outputs[o].bytes;
        const int blocks = (int)std::min<size_t>(4 * (size_t)props.multiProcessorCount, n / 1024 + 1);
        autotune_hash_kernel<<<blocks, 256, 0, stream>>>((const uint8_t*)outputs[o].ptr, n, scratch);
        cudaCheckLaunch();
        unsigned long long sum = 0;
        cudaCheck(cudaMemcpyAsync(&sum, scratch, sizeof(sum), cudaMemcpyDeviceToHost, stream));
        cudaCheck(cudaStreamSynchronize(stream));
        h ^= sum * 31 + (o + 1);  // salted by position: swapped outputs do not cancel
    }
    return h;
}

struct AutotuneChoice {
    std::vector<int> equal;  // candidates whose outputs are bitwise equal to candidate 0's (0 first)
    std::vector<float> ms;   // their times, as equal
    int pick = 0;            // index into equal / ms of the one kept (0: the default)
    int chosen() const { return equal[pick]; }
};

// Over candidates 0 .. count-1 (0: the default). prepare() puts the outputs into their state before a
// call (restores an accumulated output, or poisons it so that unwritten bytes show); run(i) launches
// candidate i on `stream` and returns false when it cannot run (it is then not a candidate; the default
// must run; run must not synchronize: it is also what autotune_time times). Each candidate runs once
// after prepare() and its outputs are hashed; the equal ones are timed and picked from. Afterwards the
// outputs are as the last timed run left them. props: the device's (L2 size of the flush, SM count of
// the hash grid), from the caller's GpuContext (llmc/gpu_context.cuh) or cuDNN state.
inline AutotuneChoice autotune_choose(const cudaDeviceProp& props, int count,
                                      const std::vector<AutotuneOutput>& outputs, const std::function<void()>& prepare,
                                      const std::function<bool(int)>& run, cudaStream_t stream) {
    unsigned long long* scratch = nullptr;
    cudaCheck(cudaMalloc(&scratch, sizeof(unsigned long long)));
    AutotuneChoice r;
    uint64_t reference = 0;
    for (int i = 0; i < count; i++) {
        prepare();
        if (!run(i)) {
            if (i == 0) fatal("autotune: the default candidate failed to run");
            continue;
        }
        const cudaError_t err = cudaStreamSynchronize(stream);  // a failing kernel is named here, not in the hash
        if (err != cudaSuccess) check_failed_("CUDA", cudaGetErrorString(err), "autotune trial run", __FILE__, __LINE__);
        const uint64_t h = autotune_outputs_hash(props, outputs, scratch, stream);
        if (i == 0) reference = h;
        if (h == reference) r.equal.push_back(i);
    }
    cudaCheck(cudaFree(scratch));
    r.ms = autotune_time(props, (int)r.equal.size(), [&](int e) {
        if (!run(r.equal[e])) fatal("autotune: candidate %d ran once, then failed when timed", r.equal[e]);
    }, stream);
    r.pick = autotune_pick(r.ms);
    return r;
}
