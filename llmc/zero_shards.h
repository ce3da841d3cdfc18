/*
 * Which parameters a process owns for the AdamW update, in llm.c's ZeRO-1 layout (host only, no CUDA).
 *
 * ZeRO-1 (-z 1) with P processes cuts every tensor of every layer into P equal slices: process r owns
 * elements [r*s, r*s + s) of each slice, s = slice size / P. The slices are the 16 tensors in checkpoint
 * order (llmc/model_file.h), the 12 per-layer tensors (ln1w .. fcprojb, ids 2..13) split into their L
 * layers; wte, wpe, lnfw, lnfb are one slice each. The process's AdamW m, v and master weights hold its
 * chunks back to back in that order, tensor by tensor, layer by layer, so chunk (i, l) sits at
 * (elements of tensors 0..i-1) / P + l * s. This is llm.c's layout (train_gpt2.cu: gpt2_get_tensor_at_layer,
 * the `local_offset_partial = tensor.offset / num_processes` and `s_stride = shard.size` of gpt2_update,
 * multi_gpu_get_shard_offset in llmc/multi_gpu.cuh), so a state file body is interchangeable with llm.c's.
 * llm.c asserts every slice size divisible by P (multi_gpu_get_shard_offset); zero_shard_problem says
 * which tensor is not, and the trainer refuses such a -z 1 run at start-up.
 *
 * With P = 1 each chunk is one whole layer of a tensor and the packing is the checkpoint order itself.
 * Without ZeRO-1 (stage 0) the chunk list is one chunk per whole tensor (layer -1), also checkpoint order.
 *
 *   zero_shard_problem(cfg, P)         "" when ZeRO-1 can shard cfg over P processes, else a message
 *                                      naming the first tensor whose slice is not divisible by P
 *   zero_shard_chunks(cfg, stage, P, r) the chunks process r updates, in shard order (fatal when the
 *                                      problem above is not "")
 *   zero_shard_size(cfg, stage, P)     elements of m (= of v, of master) per process: N / P, or N
 */
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "llmc/model_file.h"
#include "llmc/utils.h"

// One contiguous run of parameters that a process updates.
struct ZeroChunk {
    int tensor;           // 0..NUM_PARAMETER_TENSORS-1, checkpoint order
    int layer;            // 0..L-1 for the per-layer tensors, 0 for wte/wpe/lnfw/lnfb; -1: the whole tensor (stage 0)
    size_t slice_offset;  // first element of (tensor, layer) in the full parameter vector
    size_t slice_size;    // elements of (tensor, layer): one reduce-scatter / all-gather each; = P * size
    size_t offset;        // first element of this chunk in the full vector: slice_offset + rank * size
    size_t size;          // elements of this chunk
    size_t position;      // index of element `offset` within its whole tensor (stochastic rounding position)
    size_t shard_offset;  // first element of this chunk in the process's m, v and master buffers
};

inline std::string zero_shard_problem(const GPT2Config& cfg, int num_processes) {
    if (num_processes < 1) return "process count " + std::to_string(num_processes) + " < 1";
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const bool per_layer = param_tensor_is_per_layer(i);
        const size_t slice = per_layer ? sizes[i] / cfg.num_layers : sizes[i];
        if (slice % num_processes != 0) {
            return std::string("tensor ") + PARAMETER_TENSOR_NAMES[i] + " has " + std::to_string(slice) +
                   " elements" + (per_layer ? " per layer" : "") + ", not divisible by the " +
                   std::to_string(num_processes) + " processes (ZeRO-1 gives each process 1/P of every tensor of " +
                   "every layer, as llm.c does)";
        }
    }
    return "";
}

inline std::vector<ZeroChunk> zero_shard_chunks(const GPT2Config& cfg, int zero_stage, int num_processes, int rank) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    std::vector<ZeroChunk> chunks;
    size_t tensor_offset = 0, shard_offset = 0;
    if (zero_stage == 0) {
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            chunks.push_back({i, -1, tensor_offset, sizes[i], tensor_offset, sizes[i], 0, tensor_offset});
            tensor_offset += sizes[i];
        }
        return chunks;
    }
    const std::string problem = zero_shard_problem(cfg, num_processes);
    if (!problem.empty()) fatal("ZeRO-1 over %d processes: %s", num_processes, problem.c_str());
    check_process_rank("zero_shard_chunks", rank, num_processes);
    const size_t P = (size_t)num_processes, r = (size_t)rank;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const int layers = param_tensor_is_per_layer(i) ? cfg.num_layers : 1;
        const size_t slice = sizes[i] / layers, s = slice / P;
        for (int l = 0; l < layers; l++) {
            const size_t slice_offset = tensor_offset + (size_t)l * slice;
            chunks.push_back({i, l, slice_offset, slice, slice_offset + r * s, s, (size_t)l * slice + r * s, shard_offset});
            shard_offset += s;
        }
        tensor_offset += sizes[i];
    }
    return chunks;
}

inline size_t zero_shard_size(const GPT2Config& cfg, int zero_stage, int num_processes) {
    const size_t n = gpt2_num_parameters(cfg);
    return zero_stage == 0 ? n : n / (size_t)num_processes;
}
