// Tests of llmc/auto_settings.h: what the trainer runs with when -r / -ge are not given.
#include <gtest/gtest.h>

#include "llmc/auto_settings.h"

namespace {
constexpr size_t GiB = 1ull << 30;
}

TEST(AutoRecompute, LeastRecomputeThatFitsWithRoomToSpare) {
    const size_t need[3] = {27 * GiB, 23 * GiB, 19 * GiB};  // d12 B=64-like: -r 0 keeps the most
    std::string why;
    EXPECT_EQ(auto_recompute(need, 70 * GiB, &why), 0);
    EXPECT_NE(why.find("27.0 GiB of 70.0 GiB free"), std::string::npos) << why;
    EXPECT_EQ(auto_recompute(need, 27 * GiB + AUTO_RECOMPUTE_SPARE_BYTES, &why), 0);  // exactly enough room
    EXPECT_EQ(auto_recompute(need, 27 * GiB + AUTO_RECOMPUTE_SPARE_BYTES - 1, &why), 1);
    EXPECT_EQ(auto_recompute(need, 24 * GiB, &why), 2);
    EXPECT_EQ(auto_recompute(need, 20 * GiB, &why), 2);  // nothing fits: the allocation explains it
    EXPECT_NE(why.find("even -r 2 needs 19.0 GiB"), std::string::npos) << why;
}

TEST(AutoGeluFusion, FusedOnHopperInBf16Only) {
    std::string why;
    EXPECT_EQ(auto_gelu_fusion(9, true, &why), 2);
    EXPECT_EQ(auto_gelu_fusion(10, true, &why), 2);
    EXPECT_EQ(auto_gelu_fusion(8, true, &why), 0);
    EXPECT_EQ(auto_gelu_fusion(9, false, &why), 0);
    EXPECT_FALSE(why.empty());
}
