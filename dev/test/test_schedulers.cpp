// Tests for llmc/schedulers.h (learning-rate schedules); the z-scores are dev/test/test_outlier_detector.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "llmc/schedulers.h"

namespace {
LRScheduler make(const char* type, float lr = 1e-3f, int warmup = 10, int n = 110, float frac = 0.1f) {
    LRScheduler s;
    lr_scheduler_init(&s, type, lr, warmup, n, frac);
    return s;
}
}  // namespace

TEST(LRScheduler, WarmupIsLinearFromLrOverW) {
    for (const char* type : {"cosine", "linear", "constant", "wsd"}) {
        LRScheduler s = make(type);
        EXPECT_FLOAT_EQ(get_learning_rate(&s, 0), 1e-4f) << type;
        EXPECT_FLOAT_EQ(get_learning_rate(&s, 4), 5e-4f) << type;
        EXPECT_FLOAT_EQ(get_learning_rate(&s, 9), 1e-3f) << type;
        EXPECT_FLOAT_EQ(get_learning_rate(&s, 10), 1e-3f) << type;  // first step after warmup: full lr
    }
}

TEST(LRScheduler, CosineLinearValuesAndFinalFraction) {
    LRScheduler c = make("cosine"), l = make("linear");
    EXPECT_FLOAT_EQ(get_learning_rate(&c, 60), 5.5e-4f);   // half way: r = 0.5
    EXPECT_FLOAT_EQ(get_learning_rate(&l, 60), 5.5e-4f);
    EXPECT_FLOAT_EQ(get_learning_rate(&l, 35), 7.75e-4f);  // r = 0.25
    EXPECT_NEAR(get_learning_rate(&c, 35), 1e-4 + 0.5 * (1 + std::cos(M_PI * 0.25)) * 9e-4, 1e-9);
    EXPECT_NEAR(get_learning_rate(&c, 109), 1e-4 + 0.5 * (1 + std::cos(M_PI * 0.99)) * 9e-4, 1e-9);
    for (LRScheduler* s : {&c, &l}) {
        EXPECT_FLOAT_EQ(get_learning_rate(s, 110), 1e-4f);  // exactly lr * frac at N
        EXPECT_FLOAT_EQ(get_learning_rate(s, 500), 1e-4f);  // and stays there
        for (int step = 10; step < 110; step++) {           // monotone decay
            EXPECT_LE(get_learning_rate(s, step + 1), get_learning_rate(s, step));
        }
    }
    LRScheduler flat = make("cosine", 3e-4f, 0, 100, 1.0f);  // llm.c defaults: -u 0 -q 1.0
    EXPECT_FLOAT_EQ(get_learning_rate(&flat, 0), 3e-4f);
    EXPECT_FLOAT_EQ(get_learning_rate(&flat, 73), 3e-4f);
}

TEST(LRScheduler, ConstantAndWsd) {
    LRScheduler k = make("constant");
    EXPECT_FLOAT_EQ(get_learning_rate(&k, 50), 1e-3f);
    EXPECT_FLOAT_EQ(get_learning_rate(&k, 5000), 1e-3f);
    LRScheduler w = make("wsd");  // decay starts at 0.8 * 110 = 88
    EXPECT_FLOAT_EQ(get_learning_rate(&w, 50), 1e-3f);
    EXPECT_FLOAT_EQ(get_learning_rate(&w, 88), 1e-3f);
    EXPECT_NEAR(get_learning_rate(&w, 99), 1e-4 + (1 - std::sqrt(0.5)) * 9e-4, 1e-9);  // r = 11/22
    EXPECT_FLOAT_EQ(get_learning_rate(&w, 110), 1e-4f);
    // warmup longer than 80%: decay starts after warmup
    LRScheduler w2 = make("wsd", 1e-3f, 95, 100, 0.0f);
    EXPECT_FLOAT_EQ(get_learning_rate(&w2, 94), 1e-3f);
    EXPECT_FLOAT_EQ(get_learning_rate(&w2, 95), 1e-3f);
    EXPECT_NEAR(get_learning_rate(&w2, 99), (1 - std::sqrt(0.8)) * 1e-3, 1e-9);
}

TEST(LRScheduler, BadSettingsNameTheFlag) {
    LRScheduler s;
    EXPECT_EXIT(lr_scheduler_init(&s, "cosin", 1e-3f, 0, 10, 1.0f), ::testing::ExitedWithCode(1),
                "-k: unknown learning rate schedule 'cosin'");
    EXPECT_EXIT(lr_scheduler_init(&s, "cosine", 1e-3f, 0, 10, 1.5f), ::testing::ExitedWithCode(1), "-q:");
    EXPECT_EXIT(lr_scheduler_init(&s, "cosine", 1e-3f, -1, 10, 1.0f), ::testing::ExitedWithCode(1), "-u:");
    EXPECT_EXIT(lr_scheduler_init(&s, "cosine", -1.0f, 0, 10, 1.0f), ::testing::ExitedWithCode(1), "-l:");
    EXPECT_EXIT(lr_scheduler_init(&s, "cosine", 1e-3f, 0, 0, 1.0f), ::testing::ExitedWithCode(1), "-x");
}
