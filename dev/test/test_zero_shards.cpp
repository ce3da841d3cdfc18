// llmc/zero_shards.h: the ZeRO-1 chunk map against an independent re-statement of llm.c's layout
// (train_gpt2.cu: gpt2_get_tensor_at_layer, gpt2_update's local_offset_full / local_offset_partial and
// its num_slices strides; llmc/multi_gpu.cuh: multi_gpu_get_shard_offset), for the four GPT-2 shapes at
// every P from 1 to 8: every parameter owned by exactly one rank, m/v/master packed as llm.c packs them
// where P divides every slice, and the padded layout (one contiguous 1/P of the parameters, the last
// rank's run padded) with shards of one size on every rank where it does not.
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
const int kProcesses[] = {1, 2, 4, 8};  // P that divide every slice of the four shapes
const int kMaxProcesses = 8;

GPT2Config config_of(const Shape& s) {
    GPT2Config c;
    c.max_seq_len = 1024;
    c.vocab_size = GPT2_VOCAB_SIZE;
    c.padded_vocab_size = GPT2_PADDED_VOCAB_SIZE;
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
    const size_t Vp = GPT2_PADDED_VOCAB_SIZE, maxT = 1024, L = s.L, C = s.C;
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
            ASSERT_EQ(zero_shard_layout(cfg, P), ZeroLayout::llmc) << s.name << " P=" << P;
            for (int r = 0; r < P; r++) {
                SCOPED_TRACE(std::string(s.name) + " P=" + std::to_string(P) + " rank=" + std::to_string(r));
                const ZeroPlan plan = zero_shard_plan(cfg, 1, P, r);
                const std::vector<ZeroChunk>& got = plan.chunks;
                const auto want = llmc_layout(s, P, r);
                ASSERT_EQ(got.size(), want.size());
                ASSERT_EQ(got.size(), 4u + 12u * s.L);
                ASSERT_EQ(plan.slices.size(), got.size());  // one collective per (tensor, layer) slice
                EXPECT_EQ(plan.buffer_elements, gpt2_num_parameters(cfg));
                for (size_t k = 0; k < got.size(); k++) {
                    const ZeroChunk& c = got[k];
                    const Expected& e = want[k].second;
                    EXPECT_EQ(c.tensor, want[k].first) << k;
                    EXPECT_EQ(c.offset, e.param_offset) << k;
                    EXPECT_EQ(c.size, e.size) << k;
                    EXPECT_EQ(c.shard_offset, e.state_offset) << k;
                    EXPECT_EQ(c.position, e.position) << k;
                    // the slice that one reduce-scatter / all-gather covers, and this rank's place in it
                    const ZeroSlice& sl = plan.slices[k];
                    EXPECT_EQ(sl.count, c.size) << k;
                    EXPECT_EQ(sl.offset + (size_t)r * sl.count, c.offset) << k;
                    EXPECT_EQ(c.layer, (c.tensor >= 2 && c.tensor <= 13) ? (int)(e.position / (sl.count * P)) : 0) << k;
                }
            }
        }
    }
}

// The (offset, size) runs of all ranks together tile [0, N): no gap, no overlap.
void expect_tiling(std::vector<std::pair<size_t, size_t>> runs, size_t N) {
    std::sort(runs.begin(), runs.end());
    size_t next = 0;
    for (const auto& [off, n] : runs) {
        ASSERT_EQ(off, next);
        next += n;
    }
    EXPECT_EQ(next, N);
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
            expect_tiling(runs, N);
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

// Which (shape, P) need the padded layout: P does not divide some slice. Written out from the shapes
// (C = 768, 1024, 1280, 1600; wte 50304*C, wpe 1024*C, per-layer C, 3C, 4C and their products with C):
// d12 at 5 and 7; d24 at 3, 5, 6, 7; d36 and d48 at 3, 6, 7. Every other P from 1 to 8 keeps llm.c's.
TEST(ZeroShards, PaddedLayoutExactlyWherePDoesNotDivideASlice) {
    const std::vector<std::vector<int>> padded = {{5, 7}, {3, 5, 6, 7}, {3, 6, 7}, {3, 6, 7}};
    for (size_t k = 0; k < 4; k++) {
        const GPT2Config cfg = config_of(kShapes[k]);
        for (int P = 1; P <= kMaxProcesses; P++) {
            const bool want = std::find(padded[k].begin(), padded[k].end(), P) != padded[k].end();
            EXPECT_EQ(zero_shard_layout(cfg, P), want ? ZeroLayout::padded : ZeroLayout::llmc)
                << kShapes[k].name << " P=" << P;
        }
    }
}

// Every P from 2 to 8, both layouts: across the ranks every parameter element is in exactly one chunk,
// no chunk crosses a tensor, rounding positions are indices within the tensor, every rank's m/v/master
// has the same (padded) size and holds its chunks in order without overlap; the collectives' runs are
// of equal size and cover the buffer; where P divides every slice, the chunks are llm.c's.
TEST(ZeroShards, EveryElementOwnedOnceAtEveryProcessCount) {
    for (const Shape& s : kShapes) {
        const GPT2Config cfg = config_of(s);
        const size_t N = gpt2_num_parameters(cfg);
        size_t sizes[NUM_PARAMETER_TENSORS], starts[NUM_PARAMETER_TENSORS];
        gpt2_param_sizes(cfg, sizes);
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) starts[i] = i == 0 ? 0 : starts[i - 1] + sizes[i - 1];
        for (int P = 2; P <= kMaxProcesses; P++) {
            SCOPED_TRACE(std::string(s.name) + " P=" + std::to_string(P));
            const ZeroLayout layout = zero_shard_layout(cfg, P);
            const size_t S = zero_shard_size(cfg, 1, P);
            EXPECT_EQ(S, layout == ZeroLayout::llmc ? N / P : (N + P - 1) / P);
            std::vector<std::pair<size_t, size_t>> runs;  // (offset, size) over all ranks
            std::vector<ZeroSlice> slices0;
            for (int r = 0; r < P; r++) {
                const ZeroPlan plan = zero_shard_plan(cfg, 1, P, r);
                ASSERT_EQ(plan.layout, layout);
                ASSERT_EQ(plan.shard_size, S);  // equal on every rank
                if (r == 0) slices0 = plan.slices;
                ASSERT_EQ(plan.slices.size(), slices0.size());  // every rank issues the same collectives
                size_t covered = 0;
                for (size_t k = 0; k < plan.slices.size(); k++) {
                    EXPECT_EQ(plan.slices[k].offset, slices0[k].offset);
                    EXPECT_EQ(plan.slices[k].count, slices0[k].count);
                    EXPECT_EQ(plan.slices[k].offset, covered);  // back to back from 0
                    covered += plan.slices[k].count * P;
                }
                EXPECT_EQ(covered, plan.buffer_elements);
                size_t packed_end = 0;
                for (const ZeroChunk& c : plan.chunks) {
                    ASSERT_GT(c.size, 0u);
                    EXPECT_GE(c.shard_offset, packed_end);  // in order, no overlap
                    packed_end = c.shard_offset + c.size;
                    EXPECT_LE(packed_end, S);
                    EXPECT_GE(c.offset, starts[c.tensor]);  // within its tensor
                    EXPECT_LE(c.offset + c.size, starts[c.tensor] + sizes[c.tensor]);
                    EXPECT_EQ(c.position, c.offset - starts[c.tensor]);
                    runs.push_back({c.offset, c.size});
                }
                if (layout == ZeroLayout::padded) {
                    EXPECT_EQ(plan.buffer_elements, S * P);
                    EXPECT_LT(plan.buffer_elements - N, (size_t)P);  // padding: fewer than P elements
                    ASSERT_EQ(plan.slices.size(), 1u);
                    for (const ZeroChunk& c : plan.chunks) {  // rank r's run [r*S, r*S + S), packed as is
                        EXPECT_GE(c.offset, r * S);
                        EXPECT_LE(c.offset + c.size, r * S + S);
                        EXPECT_EQ(c.shard_offset, c.offset - r * S);
                    }
                } else {
                    EXPECT_EQ(plan.buffer_elements, N);
                    EXPECT_EQ(packed_end, S);
                    const auto want = llmc_layout(s, P, r);
                    ASSERT_EQ(plan.chunks.size(), want.size());
                    for (size_t k = 0; k < want.size(); k++) {
                        EXPECT_EQ(plan.chunks[k].offset, want[k].second.param_offset) << k;
                        EXPECT_EQ(plan.chunks[k].shard_offset, want[k].second.state_offset) << k;
                    }
                }
            }
            expect_tiling(runs, N);
        }
    }
}

// d48 at P = 3 (the 1558M recipe on three GPUs): N divides by 3, so the padded layout has no padding,
// yet its chunks differ from what llm.c's layout would be; its m/v/master size equals llm.c's N / 3, so
// only the layout mark in the state file (llmc/run_state.h slot 9) tells the two apart.
TEST(ZeroShards, D48AtThreeProcessesIsContiguousThirds) {
    const GPT2Config cfg = config_of(kShapes[3]);
    const size_t N = gpt2_num_parameters(cfg);
    ASSERT_EQ(N % 3, 0u);
    for (int r = 0; r < 3; r++) {
        const ZeroPlan plan = zero_shard_plan(cfg, 1, 3, r);
        EXPECT_EQ(plan.layout, ZeroLayout::padded);
        EXPECT_EQ(plan.shard_size, N / 3);
        EXPECT_EQ(plan.buffer_elements, N);
        EXPECT_EQ(plan.chunks.front().offset, r * (N / 3));
        EXPECT_EQ(plan.chunks.back().offset + plan.chunks.back().size, (r + 1) * (N / 3));
    }
    // d12 at P = 7: 124,475,904 = 7 * 17,782,272, no padding either; at P = 5 the last rank has one pad element
    const GPT2Config d12 = config_of(kShapes[0]);
    const ZeroPlan p5 = zero_shard_plan(d12, 1, 5, 4);
    EXPECT_EQ(p5.shard_size, 24895181u);
    EXPECT_EQ(p5.buffer_elements, 5u * 24895181u);
    EXPECT_EQ(p5.buffer_elements - gpt2_num_parameters(d12), 1u);
    size_t owned = 0;
    for (const ZeroChunk& c : p5.chunks) owned += c.size;
    EXPECT_EQ(owned, p5.shard_size - 1);  // the last rank: its run minus the padding
}

TEST(ZeroShards, BadRankIsFatal) {
    const GPT2Config d12 = config_of(kShapes[0]);
    EXPECT_EXIT(zero_shard_plan(d12, 1, 2, 2), testing::ExitedWithCode(1), "rank 2 outside 0..1");
}

}  // namespace
