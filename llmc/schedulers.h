/*
 * Learning-rate schedules (flags -k type, -l learning rate, -u warmup steps, -q final fraction).
 *
 * With lr = learning_rate, W = warmup_iterations, N = train_num_batches, min_lr = lr * final_frac:
 *   warmup (all types, steps < W):  lr * (step + 1) / W
 *   cosine:   min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr),  r = (step - W) / (N - W)
 *   linear:   lr - r * (lr - min_lr)
 *   constant: lr after warmup (llm.c's constant ignores -u; with the default -u 0 both agree)
 *   wsd:      warmup, then stable at lr until step D = max(W, floor(0.8 * N)), then "1 - sqrt"
 *             cooldown over the last 20%: min_lr + (1 - sqrt(r)) * (lr - min_lr), r = (step-D)/(N-D).
 *             1-sqrt is the cooldown shape Hagele et al. 2024 found to beat linear for WSD.
 * Decaying schedules return min_lr for steps >= N (the decay reaches exactly lr * final_frac at N).
 *
 * API
 *   void lr_scheduler_init(LRScheduler*, const char* type_name, float learning_rate,
 *                          int warmup_iterations, int train_num_batches, float final_learning_rate_frac)
 *        unknown type -> fatal naming -k; negative lr/warmup, frac outside [0, 1] or N < 1 -> fatal
 *   float get_learning_rate(const LRScheduler*, int step)      step counts from 0
 *   const char* lr_schedule_name(LRScheduleType)
 */
#pragma once

#include <cmath>
#include <cstring>

#include "llmc/utils.h"

enum class LRScheduleType { Cosine, Linear, Constant, WSD };

struct LRScheduler {
    LRScheduleType type = LRScheduleType::Cosine;
    float learning_rate = 3e-4f;
    int warmup_iterations = 0;
    int train_num_batches = 1;
    float final_learning_rate_frac = 1.0f;
};

inline const char* lr_schedule_name(LRScheduleType t) {
    switch (t) {
        case LRScheduleType::Cosine: return "cosine";
        case LRScheduleType::Linear: return "linear";
        case LRScheduleType::Constant: return "constant";
        case LRScheduleType::WSD: return "wsd";
    }
    return "?";
}

inline void lr_scheduler_init(LRScheduler* s, const char* type_name, float learning_rate,
                              int warmup_iterations, int train_num_batches,
                              float final_learning_rate_frac) {
    if (strcmp(type_name, "cosine") == 0) s->type = LRScheduleType::Cosine;
    else if (strcmp(type_name, "linear") == 0) s->type = LRScheduleType::Linear;
    else if (strcmp(type_name, "constant") == 0) s->type = LRScheduleType::Constant;
    else if (strcmp(type_name, "wsd") == 0) s->type = LRScheduleType::WSD;
    else fatal("-k: unknown learning rate schedule '%s' (use cosine, linear, constant or wsd)", type_name);
    if (!(learning_rate >= 0.0f) || !std::isfinite(learning_rate)) fatal("-l: learning rate must be >= 0, got %g", learning_rate);
    if (warmup_iterations < 0) fatal("-u: warmup steps must be >= 0, got %d", warmup_iterations);
    if (!(final_learning_rate_frac >= 0.0f && final_learning_rate_frac <= 1.0f)) {
        fatal("-q: final learning rate fraction must be in [0, 1], got %g", final_learning_rate_frac);
    }
    if (train_num_batches < 1) fatal("the learning rate schedule needs at least 1 training step, got %d (-x)", train_num_batches);
    s->learning_rate = learning_rate;
    s->warmup_iterations = warmup_iterations;
    s->train_num_batches = train_num_batches;
    s->final_learning_rate_frac = final_learning_rate_frac;
}

inline float get_learning_rate(const LRScheduler* s, int step) {
    const float lr = s->learning_rate;
    const int W = s->warmup_iterations, N = s->train_num_batches;
    const float min_lr = lr * s->final_learning_rate_frac;
    if (step < W) return lr * (float)(step + 1) / (float)W;
    if (s->type == LRScheduleType::Constant) return lr;
    if (step >= N) return min_lr;
    // here W <= step < N, so N - W >= 1
    if (s->type == LRScheduleType::WSD) {
        int D = (int)(0.8 * (double)N);
        if (D < W) D = W;
        if (step < D) return lr;
        float r = (float)(step - D) / (float)(N - D);
        return min_lr + (1.0f - sqrtf(r)) * (lr - min_lr);
    }
    float r = (float)(step - W) / (float)(N - W);
    if (s->type == LRScheduleType::Linear) return lr - r * (lr - min_lr);
    float coeff = 0.5f * (1.0f + cosf((float)M_PI * r));  // cosine: 1 -> 0
    return min_lr + coeff * (lr - min_lr);
}
