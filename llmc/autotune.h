/*
 * What the two autotunes share: llmc/matmul.cuh (cuBLASLt algorithms) and llmc/cudnn_att.cpp (cuDNN
 * attention plans). Each first keeps only the candidates whose outputs are bitwise equal to the
 * default's, then times those here and picks one, so the choice never changes the numbers.
 */
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "llmc/cuda_common.h"

// Keep the default (candidate 0) unless another is at least this much faster.
constexpr float AUTOTUNE_MIN_GAIN = 0.03f;

// Milliseconds of launch(0) ... launch(count - 1) on `stream`: four rounds of one run per candidate,
// each run after L2 is overwritten (back-to-back runs find their operands in L2, which the training
// step's kernels mostly do not: that hid a 12% difference between the LM head forward's cuBLASLt
// candidates); the fastest round counts.
inline std::vector<float> autotune_time(int count, const std::function<void(int)>& launch, cudaStream_t stream) {
    void* flush = nullptr;
    const size_t flush_bytes = 2 * (size_t)device_props().l2CacheSize;
    if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) {  // no room: time without the flush
        (void)cudaGetLastError();
        flush = nullptr;
    }
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    std::vector<float> best(count, 1e30f);
    for (int round = 0; round < 4; round++) {
        for (int c = 0; c < count; c++) {
            if (flush) cudaCheck(cudaMemsetAsync(flush, round, flush_bytes, stream));
            cudaCheck(cudaEventRecord(start, stream));
            launch(c);
            cudaCheck(cudaEventRecord(stop, stream));
            cudaCheck(cudaEventSynchronize(stop));
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, start, stop));
            best[c] = std::min(best[c], ms);
        }
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
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
