/*
 * Which parameters a process owns for the AdamW update under ZeRO-1, and the collectives that move them
 * (host only, no CUDA). Two layouts; the model and the process count choose one (zero_shard_layout):
 *
 * llm.c's (ZeroLayout::llmc), whenever P divides every slice: every tensor of every layer is cut into P
 *   equal runs, process r owning run r of each. The slices are the 16 tensors in checkpoint order
 *   (llmc/model_file.h), the 12 per-layer tensors (ln1w .. fcprojb, ids 2..13) split into their L layers;
 *   wte, wpe, lnfw, lnfb are one slice each. m, v and master weights hold the process's chunks back to
 *   back, tensor by tensor, layer by layer, so chunk (i, l) sits at (elements of tensors 0..i-1) / P +
 *   l * s, s = slice / P. This is llm.c's layout (train_gpt2.cu: gpt2_get_tensor_at_layer, the
 *   `local_offset_partial = tensor.offset / num_processes` and `s_stride = shard.size` of gpt2_update,
 *   multi_gpu_get_shard_offset in llmc/multi_gpu.cuh), so a state file body is interchangeable with
 *   llm.c's. One reduce-scatter / all-gather per slice.
 * Padded (ZeroLayout::padded, ours), when some slice does not divide by P (e.g. d12 at P = 5, 7; d24 at
 *   3, 5, 6, 7; d36 and d48 at 3, 6, 7; llm.c falls back to ZeRO-0 or stops there): the parameter vector
 *   as a whole is cut into P runs of S = ceil(N / P) elements, process r owning [r*S, r*S + S); the last
 *   run ends in up to P - 1 padding elements past N. The parameter and gradient buffers are allocated
 *   with P*S elements (the padding stays 0), so one in-place reduce-scatter / all-gather over [0, P*S)
 *   has the equal-size runs NCCL needs. A run is cut where tensors begin (chunks: weight decay and the
 *   rounding seed are per tensor); m, v and master hold S elements on every process, the last
 *   process's padding 0. State files mark the layout (llmc/run_state.h header slot 9 = 2).
 * Both give every parameter exactly one owner, and rounding positions are indices within the whole
 * tensor, so the update's bits do not depend on the layout.
 *
 * With P = 1 each chunk is one whole layer of a tensor and the packing is the checkpoint order itself.
 * Without ZeRO-1 (stage 0) the chunk list is one chunk per whole tensor (layer -1), also checkpoint order,
 * and there are no slices.
 *
 *   zero_shard_layout(cfg, P)            llmc when P divides every slice, else padded
 *   zero_shard_plan(cfg, stage, P, r)    the layout, chunks, slices and sizes of process r
 *   zero_shard_chunks(cfg, stage, P, r)  zero_shard_plan(...).chunks
 *   zero_shard_size(cfg, stage, P)       elements of m (= of v, of master) per process: N / P (llmc),
 *                                        ceil(N / P) (padded), or N (stage 0)
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "llmc/model_file.h"
#include "llmc/utils.h"

// The value is what a state file's header slot 9 holds (llmc/run_state.h).
enum class ZeroLayout : int { llmc = 1, padded = 2 };

inline const char* zero_layout_name(ZeroLayout l) {
    return l == ZeroLayout::llmc ? "llm.c's layout (1/P of every tensor of every layer)"
                                 : "the padded layout (one contiguous 1/P of all parameters)";
}

// One contiguous run of parameters that a process updates.
struct ZeroChunk {
    int tensor;           // 0..NUM_PARAMETER_TENSORS-1, checkpoint order
    int layer;            // llm.c's layout: 0..L-1 for the per-layer tensors, 0 for wte/wpe/lnfw/lnfb;
                          // -1: stage 0 (the whole tensor) or the padded layout (any run within the tensor)
    size_t offset;        // first element of this chunk in the full parameter vector
    size_t size;          // elements of this chunk
    size_t position;      // index of element `offset` within its whole tensor (stochastic rounding position)
    size_t shard_offset;  // first element of this chunk in the process's m, v and master buffers
};

// One reduce-scatter / all-gather: P runs of `count` elements back to back from `offset`, process r's
// being [offset + r*count, offset + (r+1)*count).
struct ZeroSlice {
    size_t offset;
    size_t count;
};

struct ZeroPlan {
    ZeroLayout layout = ZeroLayout::llmc;  // llmc for stage 0 and P = 1
    size_t shard_size = 0;       // elements of m, v, master on every process
    size_t buffer_elements = 0;  // elements the parameter and gradient buffers need: N, or P * shard_size (padded)
    std::vector<ZeroChunk> chunks;  // in m / v / master order (= tensor order)
    std::vector<ZeroSlice> slices;  // stage 1 only, the same list on every process
};

inline ZeroLayout zero_shard_layout(const GPT2Config& cfg, int num_processes) {
    if (num_processes < 1) fatal("ZeRO-1: process count %d < 1", num_processes);
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t slice = param_tensor_is_per_layer(i) ? sizes[i] / cfg.num_layers : sizes[i];
        if (slice % num_processes != 0) return ZeroLayout::padded;
    }
    return ZeroLayout::llmc;
}

inline ZeroPlan zero_shard_plan(const GPT2Config& cfg, int zero_stage, int num_processes, int rank) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    const size_t N = gpt2_num_parameters(cfg);
    ZeroPlan plan;
    plan.buffer_elements = N;
    size_t tensor_offset = 0;
    if (zero_stage == 0) {
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            plan.chunks.push_back({i, -1, tensor_offset, sizes[i], 0, tensor_offset});
            tensor_offset += sizes[i];
        }
        plan.shard_size = N;
        return plan;
    }
    check_process_rank("zero_shard_plan", rank, num_processes);
    const size_t P = (size_t)num_processes, r = (size_t)rank;
    plan.layout = zero_shard_layout(cfg, num_processes);
    if (plan.layout == ZeroLayout::padded) {
        const size_t S = (N + P - 1) / P, begin = r * S, end = std::min(N, begin + S);
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            const size_t lo = std::max(begin, tensor_offset), hi = std::min(end, tensor_offset + sizes[i]);
            if (lo < hi) plan.chunks.push_back({i, -1, lo, hi - lo, lo - tensor_offset, lo - begin});
            tensor_offset += sizes[i];
        }
        plan.shard_size = S;
        plan.buffer_elements = P * S;
        plan.slices.push_back({0, S});
        return plan;
    }
    size_t shard_offset = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const int layers = param_tensor_is_per_layer(i) ? cfg.num_layers : 1;
        const size_t slice = sizes[i] / layers, s = slice / P;
        for (int l = 0; l < layers; l++) {
            const size_t slice_offset = tensor_offset + (size_t)l * slice;
            plan.chunks.push_back({i, l, slice_offset + r * s, s, (size_t)l * slice + r * s, shard_offset});
            plan.slices.push_back({slice_offset, s});
            shard_offset += s;
        }
        tensor_offset += sizes[i];
    }
    plan.shard_size = shard_offset;  // = N / P
    return plan;
}

inline std::vector<ZeroChunk> zero_shard_chunks(const GPT2Config& cfg, int zero_stage, int num_processes, int rank) {
    return zero_shard_plan(cfg, zero_stage, num_processes, rank).chunks;
}

inline size_t zero_shard_size(const GPT2Config& cfg, int zero_stage, int num_processes) {
    const size_t n = gpt2_num_parameters(cfg), P = (size_t)num_processes;
    if (zero_stage == 0) return n;
    return zero_shard_layout(cfg, num_processes) == ZeroLayout::llmc ? n / P : (n + P - 1) / P;
}
