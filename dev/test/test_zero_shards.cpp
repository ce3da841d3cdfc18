// llmc/zero_shards.h: the ZeRO-1 chunk map against an independent re-statement of llm.c's layout
// (train_gpt2.cu: gpt2_get_tensor_at_layer, gpt2_update's local_offset_full / local_offset_partial and
// its num_slices strides; llmc/multi_gpu.cuh: multi_gpu_get_shard_offset), for the four GPT-2 shapes at
// P = 1, 2, 4, 8: every parameter owned by exactly one rank, m/v/master packed as llm.c packs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "llmc/zero_shards.h"

namespace {

struct Shape {
    const char* name;
    int L, C, NH;
};
const Shape kShapes[] = {{"d12", 12, 768, 12}, {"d24", 24, 1024, 16}, {"d36", 36, 1280, 20}, {"d48", 48, 1600, 25}};
const int kProcesses[] = {1, 2, 4, 8};

GPT2Config config_of(const Shape& s) {
    GPT2Config c;
    c.max_seq_len = 1024;
    c.vocab_size = 50257;
    c.padded_vocab_size = 50304;
    c.num_layers = s.L;
    c.num_heads = s.NH;
    c.channels = s.C;
    return c;
}

// What llm.c's gpt2_update touches for tensor i, layer l on `rank`, written out from its formulas with
// the tensor sizes spelled out here (not taken from gpt2_param_sizes).
struct Expected {
    size_t param_offset, size, state_offset, position;
};
std::vector<std::pair<int, Expected>> llmc_layout(const Shape& s, int P, int rank) {
    const size_t Vp = 50304, maxT = 1024, L = s.L, C = s.C;
    // elements of tensor i, all layers: wte wpe ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb
    const size_t elements[16] = {Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                                 L * C,  L * C,    L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    std::vector<std::pair<int, Expected>> out;
    for (int i = 0; i < 16; i++) {
        size_t tensor_offset = 0;  // gpt2_get_tensor_at_layer(model, 0, i).offset
        for (int j = 0; j < i; j++) tensor_offset += elements[j];
        const bool in_block = 2 <= i && i <= 13;
        const size_t tensor_size = in_block ? elements[i] / L : elements[i];  // one layer
        const int num_layers = in_block ? (int)L : 1;
        const size_t shard_size = tensor_size / P;  // multi_gpu_get_shard_offset
        const size_t shard_offset = (size_t)rank * shard_size;
        const size_t local_offset_full = tensor_offset + shard_offset;
        const size_t local_offset_partial = tensor_offset / P;
        for (int l = 0; l < num_layers; l++) {  // adamw_update's slices: w_stride = tensor.size, s_stride = shard.size
            out.push_back({i, {local_offset_full + l * tensor_size, shard_size, local_offset_partial + l * shard_size,
                               l * tensor_size + shard_offset}});
        }
    }
    return out;
}

TEST(ZeroShards, ChunksMatchLlmcLayout) {
    for (const Shape& s : kShapes) {
        const GPT2Config cfg = config_of(s);
        for (int P : kProcesses) {
            ASSERT_EQ(zero_shard_problem(cfg, P), "") << s.name << " P=" << P;
            for (int r = 0; r < P; r++) {
                SCOPED_TRACE(std::string(s.name) + " P=" + std::to_string(P) + " rank=" + std::to_string(r));
                const std::vector<ZeroChunk> got = zero_shard_chunks(cfg, 1, P, r);
                const auto want = llmc_layout(s, P, r);
                ASSERT_EQ(got.size(), want.size());
                ASSERT_EQ(got.size(), 4u + 12u * s.L);
                for (size_t k = 0; k < got.size(); k++) {
                    const ZeroChunk& c = got[k];
                    const Expected& e = want[k].second;
                    EXPECT_EQ(c.tensor, want[k].first) << k;
                    EXPECT_EQ(c.offset, e.param_offset) << k;
                    EXPECT_EQ(c.size, e.size) << k;
                    EXPECT_EQ(c.shard_offset, e.state_offset) << k;
                    EXPECT_EQ(c.position, e.position) << k;
                    // the slice that one reduce-scatter / all-gather covers, and this rank's place in it
                    EXPECT_EQ(c.slice_size, c.size * P) << k;
                    EXPECT_EQ(c.slice_offset + (size_t)r * c.size, c.offset) << k;
                    EXPECT_EQ(c.layer, (c.tensor >= 2 && c.tensor <= 13) ? (int)(e.position / c.slice_size) : 0) << k;
                }
            }
        }
    }
}

// Across the ranks every parameter is in exactly one chunk, and each rank's m/v/master buffer is its
// chunks back to back, N / P elements.
TEST(ZeroShards, EveryParameterOwnedOnceAndShardsPacked) {
    for (const Shape& s : kShapes) {
        const GPT2Config cfg = config_of(s);
        const size_t N = gpt2_num_parameters(cfg);
        for (int P : kProcesses) {
            SCOPED_TRACE(std::string(s.name) + " P=" + std::to_string(P));
            std::vector<std::pair<size_t, size_t>> runs;  // (offset, size) over all ranks
            for (int r = 0; r < P; r++) {
                size_t packed = 0;
                for (const ZeroChunk& c : zero_shard_chunks(cfg, 1, P, r)) {
                    EXPECT_EQ(c.shard_offset, packed);
                    EXPECT_GT(c.size, 0u);
                    packed += c.size;
                    runs.push_back({c.offset, c.size});
                }
                EXPECT_EQ(packed, N / P);
                EXPECT_EQ(zero_shard_size(cfg, 1, P), N / P);
            }
            std::sort(runs.begin(), runs.end());
            size_t next = 0;  // the runs tile [0, N): no gap, no overlap
            for (const auto& [off, n] : runs) {
                ASSERT_EQ(off, next);
                next += n;
            }
            EXPECT_EQ(next, N);
        }
    }
}

// One process: whole layers in checkpoint order, shard buffer = the parameter vector (a -z 1 state file
// of one process holds what a -z 0 one does).
TEST(ZeroShards, OneProcessIsCheckpointOrder) {
    const GPT2Config cfg = config_of(kShapes[0]);
    size_t next = 0;
    for (const ZeroChunk& c : zero_shard_chunks(cfg, 1, 1, 0)) {
        EXPECT_EQ(c.offset, next);
        EXPECT_EQ(c.shard_offset, next);
        EXPECT_EQ(c.size, c.slice_size);
        next += c.size;
    }
    EXPECT_EQ(next, gpt2_num_parameters(cfg));
}

// Stage 0: one chunk per whole tensor, rounding positions from 0, regardless of the process count.
TEST(ZeroShards, StageZeroIsWholeTensors) {
    const GPT2Config cfg = config_of(kShapes[1]);
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    const std::vector<ZeroChunk> chunks = zero_shard_chunks(cfg, 0, 8, 3);
    ASSERT_EQ(chunks.size(), (size_t)NUM_PARAMETER_TENSORS);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        EXPECT_EQ(chunks[i].tensor, i);
        EXPECT_EQ(chunks[i].offset, off);
        EXPECT_EQ(chunks[i].shard_offset, off);
        EXPECT_EQ(chunks[i].size, sizes[i]);
        EXPECT_EQ(chunks[i].position, 0u);
        off += sizes[i];
    }
    EXPECT_EQ(zero_shard_size(cfg, 0, 8), gpt2_num_parameters(cfg));
}

// A process count that does not divide a slice is refused, naming the first such tensor and P.
TEST(ZeroShards, RefusesIndivisibleProcessCount) {
    const GPT2Config d12 = config_of(kShapes[0]);
    const std::string p5 = zero_shard_problem(d12, 5);  // 50304*768 is not a multiple of 5: wte first
    EXPECT_NE(p5.find("tensor wte has 38633472 elements, not divisible by the 5 processes"), std::string::npos) << p5;
    const GPT2Config d48 = config_of(kShapes[3]);
    const std::string p3 = zero_shard_problem(d48, 3);  // wte divides by 3, wpe (1024*1600) does not
    EXPECT_NE(p3.find("tensor wpe has 1638400 elements, not divisible by the 3 processes"), std::string::npos) << p3;
    GPT2Config odd = d12;
    odd.padded_vocab_size = 50304 * 7;
    odd.max_seq_len = 7 * 1024;
    const std::string p7 = zero_shard_problem(odd, 7);  // wte and wpe divide by 7, one layer of ln1w (768) does not
    EXPECT_NE(p7.find("tensor ln1w has 768 elements per layer, not divisible by the 7 processes"), std::string::npos) << p7;
    EXPECT_EQ(zero_shard_problem(d12, 3), "");  // 768 = 3 * 256
    EXPECT_EXIT(zero_shard_chunks(d12, 1, 5, 0), testing::ExitedWithCode(1), "ZeRO-1 over 5 processes: tensor wte");
    EXPECT_EXIT(zero_shard_chunks(d12, 1, 2, 2), testing::ExitedWithCode(1), "rank 2 outside 0..1");
}

}  // namespace
