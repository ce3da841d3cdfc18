/*
 * The GPU test's reference file, the debug state, on the host (no CUDA), and llm.c's fixed tolerances
 * for the version 2 files llm.c writes. Test code only: test_gpt2.cu, the host tests in dev/test/ and
 * the fuzzer (dev/fuzz) include it; the trainer does not. It lives with the tests, and test_gpt2.cu
 * (at the root, as llm.c's) reaches it through -I. like every other header.
 *
 * Debug state (magic 20240327), written by train_gpt2.py --write_tensors; all little-endian:
 *   header int32[256]: [0] 20240327  [1] version (2 = llm.c, 3 = ours)  [2] B  [3] T
 *                      v3 only: [4] V  [5] Vp  [6] K  [7] lr (fp32 bits)  [8] 1 if bf16 deviations follow
 *                      [9] 1 if the fp32 loss-noise pair follows; other slots 0
 *   x int32[B*T], y int32[B*T] (y = x shifted by one token), logits fp32[B*T*V] (unpadded V),
 *   loss fp32, grads fp32[num_parameters] (16 tensors in checkpoint order, wte with Vp rows),
 *   v3: expected_losses fp32[K] (loss before update i when training on (x, y) with AdamW(lr, 0.9, 0.95,
 *       1e-8, wd 0) and clipping at norm 1.0, all fp32), then, if [8] == 1, DEBUG_NUM_DEVIATIONS pairs
 *       fp32 (max |bf16 - fp32|, mean |bf16 - fp32|) for: logits, the 16 gradient tensors, the K losses,
 *       where "bf16" is PyTorch with bf16-rounded weights under bf16 autocast; then, if [9] == 1, one
 *       fp32 pair (max, mean) |losses - losses'| over the K losses, losses' being the same fp32 training
 *       with SDPA attention or with every weight moved by one ulp, whichever drifts further: how much
 *       the trajectory amplifies fp32 rounding (DebugState::fp32_loss_noise_*).
 * A version 2 file (llm.c's) has no V/Vp/K slots: V and Vp are taken from the config, K = 0. It carries
 * no reference deviations either, so it is checked with llm.c's fixed tolerances (llmc_test_tolerances).
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "llmc/file_header.h"  // DEBUG_STATE_MAGIC and its versions
#include "llmc/model_file.h"   // GPT2Config, gpt2_num_parameters, NUM_PARAMETER_TENSORS
#include "llmc/utils.h"

// ----------------------------------------------------------------------------
// the reader

// Indices into DebugState::bf16_max_dev / bf16_mean_dev.
constexpr int DEBUG_DEV_LOGITS = 0;
constexpr int DEBUG_DEV_GRADS = 1;  // + tensor index in checkpoint order (0..15)
constexpr int DEBUG_DEV_LOSSES = DEBUG_DEV_GRADS + NUM_PARAMETER_TENSORS;
constexpr int DEBUG_NUM_DEVIATIONS = DEBUG_DEV_LOSSES + 1;  // 18
constexpr int DEBUG_STATE_MAX_LOSSES = 1 << 16;

struct DebugState {
    int version;                          // 2 (llm.c) or 3
    int B, T, V, Vp;
    std::vector<int> x, y;                // (B*T) inputs and targets
    std::vector<float> logits;            // (B, T, V), padded columns dropped
    float loss;                           // mean cross-entropy over B*T
    std::vector<float> grads;             // (num_parameters) 16 tensors, checkpoint order, wte with Vp rows
    float lr;                             // AdamW lr of expected_losses (0 for v2)
    std::vector<float> expected_losses;   // (K) loss before update i, i = 0..K-1; empty for v2
    bool has_bf16_deviation;              // the two vectors below are filled
    std::vector<float> bf16_max_dev;      // (DEBUG_NUM_DEVIATIONS) max |bf16 - fp32|
    std::vector<float> bf16_mean_dev;     // (DEBUG_NUM_DEVIATIONS) mean |bf16 - fp32|
    bool has_fp32_loss_noise;             // the two numbers below are filled (header slot 9)
    float fp32_loss_noise_max, fp32_loss_noise_mean;  // |fp32 losses - fp32 losses of a run differing by rounding|
};

inline DebugState debug_state_read(const char* path, const GPT2Config& cfg) {
    int32_t h[FILE_HEADER_INTS];
    long size = 0;
    FilePtr file = file_header_open(path, DEBUG_STATE_MAGIC, h, &size);
    FILE* fp = file.get();
    DebugState s;
    s.version = h[1];
    s.B = h[2];
    s.T = h[3];
    int K = 0, has_dev = 0, has_noise = 0;
    if (s.version == DEBUG_STATE_VERSION_LLMC) {
        s.V = cfg.vocab_size;
        s.Vp = cfg.padded_vocab_size;
        s.lr = 0.0f;
    } else {
        s.V = h[4];
        s.Vp = h[5];
        K = h[6];
        memcpy(&s.lr, &h[7], sizeof(float));
        has_dev = h[8];
        has_noise = h[9];
    }
    if (s.B < 1 || s.B > (1 << 16) || s.T < 1 || s.T > cfg.max_seq_len) {
        fatal("'%s': bad batch shape B=%d T=%d (model max_seq_len %d)", path, s.B, s.T, cfg.max_seq_len);
    }
    if (s.V != cfg.vocab_size || s.Vp != cfg.padded_vocab_size) {
        fatal("'%s' was written for V=%d Vp=%d but the model has V=%d Vp=%d", path, s.V, s.Vp, cfg.vocab_size,
              cfg.padded_vocab_size);
    }
    if (K < 0 || K > DEBUG_STATE_MAX_LOSSES || (has_dev != 0 && has_dev != 1) || (has_noise != 0 && has_noise != 1)) {
        fatal("'%s': bad header slots: K=%d (0..%d), bf16 flag %d, fp32 noise flag %d (0 or 1)", path, K,
              DEBUG_STATE_MAX_LOSSES, has_dev, has_noise);
    }
    size_t BT = static_cast<size_t>(s.B) * s.T;
    size_t nparams = gpt2_num_parameters(cfg);
    size_t ndev = (has_dev ? 2 * DEBUG_NUM_DEVIATIONS : 0) + (has_noise ? 2 : 0);
    size_t want = FILE_HEADER_BYTES + 4 * (2 * BT + BT * s.V + 1 + nparams + K + ndev);
    char says[192];
    snprintf(says, sizeof(says), "v%d, B=%d T=%d K=%d, bf16 flag %d for a model of %zu parameters (or written for "
             "another model?)", s.version, s.B, s.T, K, has_dev, nparams);
    file_size_check(path, DEBUG_STATE_MAGIC, size, want, says);
    s.x.resize(BT);
    s.y.resize(BT);
    s.logits.resize(BT * s.V);
    s.grads.resize(nparams);
    s.expected_losses.resize(K);
    s.has_bf16_deviation = has_dev == 1;
    fread_check(s.x.data(), sizeof(int), BT, fp, path);
    fread_check(s.y.data(), sizeof(int), BT, fp, path);
    fread_check(s.logits.data(), sizeof(float), BT * s.V, fp, path);
    fread_check(&s.loss, sizeof(float), 1, fp, path);
    fread_check(s.grads.data(), sizeof(float), nparams, fp, path);
    fread_check(s.expected_losses.data(), sizeof(float), K, fp, path);
    if (has_dev) {
        std::vector<float> dev(2 * DEBUG_NUM_DEVIATIONS);
        fread_check(dev.data(), sizeof(float), dev.size(), fp, path);
        for (int i = 0; i < DEBUG_NUM_DEVIATIONS; i++) {
            s.bf16_max_dev.push_back(dev[2 * i]);
            s.bf16_mean_dev.push_back(dev[2 * i + 1]);
        }
    }
    s.has_fp32_loss_noise = has_noise == 1;
    s.fp32_loss_noise_max = s.fp32_loss_noise_mean = 0.0f;
    if (has_noise) {
        fread_check(&s.fp32_loss_noise_max, sizeof(float), 1, fp, path);
        fread_check(&s.fp32_loss_noise_mean, sizeof(float), 1, fp, path);
    }
    fclose_check(file.release(), path);
    for (size_t i = 0; i < BT; i++) {
        if (s.x[i] < 0 || s.x[i] >= s.V || s.y[i] < 0 || s.y[i] >= s.V) {
            fatal("'%s': token %zu out of range (x=%d y=%d, V=%d)", path, i, s.x[i], s.y[i], s.V);
        }
    }
    return s;
}

// ----------------------------------------------------------------------------
// llm.c's fixed tolerances (test_gpt2.cu at f1e2ace), for version 2 debug states

// Its checks: every logit |ours - ref| < logits; each loss |ours - ref| < loss; every gradient element
// |ours - ref| <= grad[tensor] + grad_rel * |ref| (grad_rel = 0.079, "BF16 epsilon", in FP32 builds too);
// then `steps` AdamW steps (lr, betas 0.9/0.95, eps 1e-8, wd 0, clip 1.0) on the debug batch. (llm.c
// also compares those losses with 10 numbers written into its source for its own GPT-2 124M file;
// a v2 file carries no such numbers, so the trajectory is checked against the file's loss only.)
struct LlmcTestTolerances {
    float logits;
    float loss;
    float grad[NUM_PARAMETER_TENSORS];  // checkpoint order
    float grad_rel;
    float lr;
    int steps;
};

inline LlmcTestTolerances llmc_test_tolerances(bool bf16) {
    LlmcTestTolerances t;
    t.logits = bf16 ? 25.0f : 1e-3f;
    t.loss = bf16 ? 0.05f : 1e-5f;
    // llm.c's bf16 table, "set manually by inspecting the gradient differences"; 1e-6 for every tensor in FP32
    const float bf16_grad[NUM_PARAMETER_TENSORS] = {5e-1f, 4e-3f, 1e-1f, 4e-2f, 5e-2f, 3.5e-2f, 2e-2f, 3e-2f,
                                                    5e-2f, 3e-2f, 3e-2f, 3e-2f, 2e-2f, 1e-2f, 1e-1f, 2e-2f};
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) t.grad[i] = bf16 ? bf16_grad[i] : 1e-6f;
    t.grad_rel = 0.079f;
    t.lr = 1e-4f;
    t.steps = 10;
    return t;
}

// llm.c's check_tensor rule over n elements. Returns true when every element passes; *worst gets the
// largest |ours - ref| / (threshold + rel |ref|) (1.0 = at the limit), *worst_index its position.
inline bool llmc_tensor_within(const float* ours, const float* ref, size_t n, float threshold, float rel,
                               double* worst, size_t* worst_index) {
    bool ok = true;
    *worst = 0.0;
    *worst_index = 0;
    for (size_t i = 0; i < n; i++) {
        const float t_eff = threshold + fabsf(ref[i]) * rel;
        const float diff = fabsf(ours[i] - ref[i]);
        if (!(diff <= t_eff)) ok = false;  // NaN fails too
        const double ratio = std::isfinite(diff) ? (double)diff / t_eff : INFINITY;
        if (ratio > *worst || !std::isfinite(ratio)) {
            *worst = ratio;
            *worst_index = i;
        }
    }
    return ok;
}
