/*
 * What the trainer's counting flags mean, computed exactly as llm.c's train_gpt2.cu computes them
 * (at f1e2ace), host only, so the same command line plans the same run:
 *   -x  steps:  -1 = one epoch = floor(tokens of all train shards / total batch -d); 0 = no update
 *               (the loop still evaluates, samples and, with -n > 0, checkpoints step 0); N = N.
 *   -m  val batches: -1 = the whole val split = floor(tokens of all val shards / (B*T*processes));
 *               N = N batches (the val loader wraps around, as llm.c's does, if N exceeds the split).
 *   -n / -nk / -nm  checkpoints: with -o and -n > 0, at every step > 0 that is a multiple of -n and at
 *               the last step, except the step a resumed run starts at; after writing step S, with
 *               -nk K > 0, the checkpoint of step S - K*n is deleted if that is > 0 and (-nm M == 0 or
 *               not a multiple of M): one deletion per write, so "major" multiples of M stay forever.
 *   -h  multiple-choice eval at steps > 0 that are multiples of -v, and at the last step.
 *   tok/s on the step line: llm.c's bias-corrected moving average, update k+1 (loop index k):
 *               k == 0: this step's value; else ema = 0.95 ema + 0.05 tps, printed ema / (1 - 0.95^k),
 *               all in fp32 as llm.c.
 *
 * API
 *   size_t shard_pattern_tokens(const std::vector<std::string>& paths)  sum of header token counts
 *   int    plan_train_steps(int max_steps, size_t train_tokens, long total_batch)
 *   int    plan_val_batches(int val_max_steps, size_t val_tokens, long tokens_per_micro_batch)
 *   bool   checkpoint_due(int step, bool last_step, int every, bool have_output_dir, bool resume_start)
 *   int    checkpoint_to_delete(int step, int every, int keep, int major)   -1 = none
 *   void   checkpoint_delete_done(dir, step)          process 0, first: the checkpoint is no longer complete
 *   void   checkpoint_delete_files(dir, step, rank)   then (after a barrier): process 0 the model file,
 *                                                     every process its state file; missing files are fine
 *   bool   eval_due(int step, bool last_step, int val_every)
 *   struct TokPerSecAverage; float tok_per_sec_update(TokPerSecAverage*, int step, float tok_per_s)
 *   std::string init_file_missing_message(const std::string& path)
 */
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/checkpoint.h"
#include "llmc/utils.h"

// The -e default, as llm.c's (a bf16 GPT-2 124M checkpoint in the working directory).
inline constexpr const char* DEFAULT_INIT_FILE = "gpt2_124M_bf16.bin";

// Sum of the token counts in the shard headers (slot 2); the loader has validated each file already.
inline size_t shard_pattern_tokens(const std::vector<std::string>& paths) {
    size_t total = 0;
    for (const std::string& p : paths) {
        FILE* fp = fopen_check(p.c_str(), "rb");
        int32_t h[3];
        fread_check(h, sizeof(int32_t), 3, fp, p.c_str());
        fclose_check(fp, p.c_str());
        if (h[2] < 0) fatal("token shard '%s': negative token count %d in its header", p.c_str(), h[2]);
        total += (size_t)h[2];
    }
    return total;
}

inline int plan_train_steps(int max_steps, size_t train_tokens, long total_batch) {
    if (max_steps != -1) return max_steps;
    size_t n = train_tokens / (size_t)total_batch;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

inline int plan_val_batches(int val_max_steps, size_t val_tokens, long tokens_per_micro_batch) {
    if (val_max_steps != -1) return val_max_steps;
    size_t n = val_tokens / (size_t)tokens_per_micro_batch;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

// resume_start: this is the first iteration of a run resumed from a checkpoint (of this very step).
inline bool checkpoint_due(int step, bool last_step, int every, bool have_output_dir, bool resume_start) {
    if (every <= 0 || !have_output_dir || resume_start) return false;
    return (step > 0 && step % every == 0) || last_step;
}

inline int checkpoint_to_delete(int step, int every, int keep, int major) {
    if (keep <= 0 || every <= 0) return -1;
    const long del = (long)step - (long)keep * every;
    if (del <= 0) return -1;
    if (major > 0 && del % major == 0) return -1;
    return (int)del;
}

// Removes path; a missing file is not an error (llm.c deletes S - K*n whether or not it was written).
inline void checkpoint_remove_(const std::string& path) {
    if (remove(path.c_str()) != 0 && errno != ENOENT) {
        fprintf(stderr, "warning: cannot delete old checkpoint file '%s': %s\n", path.c_str(), strerror(errno));
    }
}

inline void checkpoint_delete_done(const std::string& dir, int step) { checkpoint_remove_(ckpt_done_path(dir, step)); }

inline void checkpoint_delete_files(const std::string& dir, int step, int rank) {
    if (rank == 0) checkpoint_remove_(ckpt_model_path(dir, step));
    checkpoint_remove_(ckpt_state_path(dir, step, rank));
}

inline bool eval_due(int step, bool last_step, int val_every) {
    return (val_every > 0 && step > 0 && step % val_every == 0) || last_step;
}

struct TokPerSecAverage {
    float ema = 0.0f;
};

// step: the loop index of this update (0 for the first update of a fresh run).
inline float tok_per_sec_update(TokPerSecAverage* a, int step, float tok_per_s) {
    if (step <= 0) return tok_per_s;  // llm.c counts the first step as warm-up (cuBLAS/cuDNN set-up)
    a->ema = 0.95f * a->ema + 0.05f * tok_per_s;
    return a->ema / (1.0f - powf(0.95f, (float)step));
}

inline std::string init_file_missing_message(const std::string& path) {
    std::string msg = "-e " + path + ": no such checkpoint file";
    if (path == DEFAULT_INIT_FILE) msg += " (the default -e, as in llm.c)";
    msg += ". Either start from random weights with a descriptor, e.g. -e d12 (GPT-2 124M; d24, d36, d48, "
           "gpt3:c768, ... see --help), or import OpenAI's GPT-2 weights: "
           "python3 dev/hf.py import gpt2 gpt2_124M.bin, then -e gpt2_124M.bin "
           "(add --dtype bf16 and name it gpt2_124M_bf16.bin to make it the default)";
    return msg;
}
