// The activation buffer's layout (llmc/activation_layout.h): byte offsets of every tensor for GPT-2
// d12 at B=4, T=64, in both precisions and at every recompute level, as the trainer laid them out
// before the layout became a table (values printed by that code, for a bf16 and an fp32 build).
#include <gtest/gtest.h>

#include <vector>

#include "llmc/activation_layout.h"
#include "llmc/model_file.h"

namespace {

constexpr size_t kMatmulBiasPad = 8;  // MATMUL_BIAS_PAD (llmc/matmul.cuh): ln1 / ln2 rows are C + 8 long

struct Expected {
    int recompute;
    size_t floatx_bytes;
    std::vector<size_t> offsets;  // in ActivationTensor order
    size_t total;
};

const Expected kD12B4T64[] = {
    {0, 2, {0, 393216, 5160960, 5173248, 5185536, 19341312, 24059904, 24207360, 28925952, 33693696, 33705984,
            33718272, 52592640, 71467008, 76185600, 76578816, 76579840, 76580864, 76581888, 102337536, 102730752,
            103123968},
     104696832},
    {1, 2, {0, 393216, 5160960, 5173248, 5185536, 19341312, 24059904, 24207360, 28925952, 33693696, 33705984,
            33718272, 52592640, 54165504, 58884096, 59277312, 59278336, 59279360, 59280384, 85036032, 85429248,
            85822464},
     87395328},
    {2, 2, {0, 393216, 790528, 802816, 815104, 14970880, 19689472, 19836928, 24555520, 24952832, 24965120, 24977408,
            43851776, 45424640, 50143232, 50536448, 50537472, 50538496, 50539520, 76295168, 76688384, 77081600},
     78654464},
    {0, 4, {0, 786432, 10321920, 10334208, 10346496, 38658048, 48095232, 48242688, 57679872, 67215360, 67227648,
            67239936, 104988672, 142737408, 152174592, 152961024, 152962048, 152963072, 152964096, 204475392,
            205261824, 206048256},
     209193984},
    {1, 4, {0, 786432, 10321920, 10334208, 10346496, 38658048, 48095232, 48242688, 57679872, 67215360, 67227648,
            67239936, 104988672, 108134400, 117571584, 118358016, 118359040, 118360064, 118361088, 169872384,
            170658816, 171445248},
     174590976},
    {2, 4, {0, 786432, 1581056, 1593344, 1605632, 29917184, 39354368, 39501824, 48939008, 49733632, 49745920,
            49758208, 87506944, 90652672, 100089856, 100876288, 100877312, 100878336, 100879360, 152390656,
            153177088, 153963520},
     157109248},
};

}  // namespace

TEST(ActivationLayout, D12OffsetsAreTheTrainersAtEveryRecomputeLevelAndPrecision) {
    GPT2Config cfg{};
    ASSERT_TRUE(gpt2_config_from_descriptor("d12", &cfg));
    for (const Expected& e : kD12B4T64) {
        SCOPED_TRACE("recompute " + std::to_string(e.recompute) + ", floatX of " + std::to_string(e.floatx_bytes) +
                     " bytes");
        const ActivationLayout l = activation_layout(cfg, 4, 64, e.recompute, e.floatx_bytes,
                                                     cfg.channels + kMatmulBiasPad);
        ASSERT_EQ(e.offsets.size(), (size_t)NUM_ACTIVATION_TENSORS);
        for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) EXPECT_EQ(l.offset[i], e.offsets[i]) << "tensor " << i;
        EXPECT_EQ(l.total, e.total);
    }
}

// Back to back: each tensor starts where the one before ends, sizes are whole 256-byte blocks, and none
// is empty.
TEST(ActivationLayout, TensorsAreBackToBackIn256ByteBlocks) {
    GPT2Config cfg{};
    ASSERT_TRUE(gpt2_config_from_descriptor("custom:L3,C128,NH2", &cfg));
    for (int r = 0; r <= 2; r++) {
        const ActivationLayout l = activation_layout(cfg, 3, 5, r, 2, cfg.channels + kMatmulBiasPad);
        size_t at = 0;
        for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
            EXPECT_EQ(l.offset[i], at) << i;
            EXPECT_GT(l.bytes[i], 0u) << i;
            EXPECT_EQ(l.bytes[i] % 256, 0u) << i;
            at += l.bytes[i];
        }
        EXPECT_EQ(l.total, at);
    }
}
