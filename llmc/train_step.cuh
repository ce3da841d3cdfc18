/*
 * One optimizer step of GPT-2 training: the code train_gpt2.cu runs every step and test_gpt2.cu
 * checks (its AdamW losses and its save -> reload -> continue run through it too).
 *
 *   TrainStepResult train_step(GPT2* model, const TrainStep& ts, int step, float lr, bool next_is_last,
 *                              NextBatch next_batch)
 * step is the loop index (0-based); the update is AdamW step t = step + 1. In order:
 *   1. per-token losses zeroed (the gradients are not: the first micro-step's backward writes them)
 *   2. ts.grad_accum micro-steps: next_batch(micro) returns the micro-batch {inputs, targets} on the
 *      host, (ts.B, ts.T) each (the trainer's data loader, the test's fixed batch); forward with
 *      dloss = 1 / (B*T*grad_accum), backward (parameter gradients = on the first micro-step, += on the
 *      others; on the last micro-step ZeRO-0 starts each layer's all-reduce)
 *   3. the gradient reduction completed (gpt2_reduce_gradients)
 *   4. this rank's mean loss, and the vote (llmc/rank_agreement.h): mean loss over ranks, stop
 *      requests (ts.stop_flag != 0 at this point, on each rank), agreement on the last step
 *   5. the global gradient norm; a non-finite loss or norm stops the run
 *   6. z-scores of loss and norm (ts.loss_outlier / ts.norm_outlier windows +=; they are state file content)
 *      and the skip decision (llm.c's rule, outlier_skip): with -sl / -sg on, rank 0's decision and
 *      z-scores on every rank (llmc/rank_agreement.h step_skip_decide), so no rank skips an update alone
 *   7. unless skipped: AdamW at lr, gradients clipped to global norm 1 (llm.c's), weight decay on 2-D
 *      tensors (model RNG advanced: backward and update draw seeds)
 * It returns once the update is enqueued, not finished: the caller's next synchronization waits for it.
 * ts.watchdog (nullptr: none) names each wait of steps 2-6 (left inside the last one).
 *
 *   RankComm rank_comm_of(MultiGpuConfig*)   the agreements' collectives (llmc/rank_agreement.h) over NCCL
 */
#pragma once

#include <csignal>
#include <cmath>

#include "llmc/gpt2.cuh"
#include "llmc/outlier_detector.h"
#include "llmc/rank_agreement.h"
#include "llmc/watchdog.h"

struct StepBatch {
    const int* inputs;   // (B, T) host
    const int* targets;  // (B, T) host
};

struct TrainStep {
    int B = 0, T = 0;                 // micro-batch
    int grad_accum = 1;               // micro-steps per optimizer step
    float weight_decay = 0.0f;        // -c
    float skip_loss_z = 0.0f;         // -sl: skip the update above this loss z-score (0 = off; outlier_skip)
    float skip_norm_z = 0.0f;         // -sg: likewise for the gradient norm
    OutlierDetector* loss_outlier = nullptr;  // required
    OutlierDetector* norm_outlier = nullptr;  // required
    const volatile sig_atomic_t* stop_flag = nullptr;  // SIGINT / SIGTERM seen (nullptr: never)
    Watchdog* watchdog = nullptr;
#ifdef LLMC_TEST_HOOKS
    int hang_at_step = 0;             // test hook (test builds only): the vote of update `hang_at_step` blocks (0: off)
#endif
};

struct TrainStepResult {
    float loss;          // mean over ranks
    float norm;          // global gradient norm, before clipping
    float loss_z, norm_z;  // the step line's z-scores (NaN while the windows fill)
    int stop_requests;   // ranks that have seen SIGINT / SIGTERM; > 0: every rank stops after this step
};

inline RankComm rank_comm_of(MultiGpuConfig* mp) {
    RankComm c;
    c.rank = mp->process_rank;
    c.num_processes = mp->num_processes;
    c.broadcast = [mp](void* data, size_t bytes) { multi_gpu_broadcast_bytes(data, bytes, mp); };
    c.sum = [mp](float* values, int n) { multi_gpu_cpu_float_sums(values, n, mp); };
    return c;
}

inline void train_step_wait_(const TrainStep& ts, int step, const char* what) {
    if (ts.watchdog != nullptr) watchdog_enter(ts.watchdog, step, what);
}

template <class NextBatch>
TrainStepResult train_step(GPT2* model, const TrainStep& ts, int step, float lr, bool next_is_last,
                           NextBatch next_batch) {
    MultiGpuConfig* mp = model->mp;
    const int B = ts.B, T = ts.T, accum = ts.grad_accum;
    train_step_wait_(ts, step + 1, "forward, backward and the gradient reduction (ncclAllReduce / ncclReduceScatter)");
    gpt2_zero_losses(model);  // (the gradients need no zeroing: the first micro-step's backward writes them)
    for (int micro = 0; micro < accum; micro++) {
        const StepBatch batch = next_batch(micro);
        gpt2_forward(model, batch.inputs, batch.targets, B, T, true, accum);
        gpt2_backward(model, B, T, micro == 0, micro == accum - 1);
    }
    gpt2_reduce_gradients(model);
    const float local_loss = (float)(gpt2_losses_sum(model, B, T) / ((double)B * T * accum));
    float vote[STEP_VOTE_SLOTS];
    const bool stop_seen = ts.stop_flag != nullptr && *ts.stop_flag != 0;
    step_vote_pack({local_loss, stop_seen, next_is_last}, vote);
#ifdef LLMC_TEST_HOOKS
    if (step + 1 == ts.hang_at_step) multi_gpu_test_hang_collectives(mp, model->stream);
#endif
    train_step_wait_(ts, step + 1, "the loss / stop vote (ncclAllReduce)");
    multi_gpu_cpu_float_sums(vote, STEP_VOTE_SLOTS, mp);
    const StepDecision decision = step_vote_decide(vote, mp->num_processes);
    if (decision.last_disagree) {
        fatal("step %d: %d of %d ranks end training after this step, the others do not (-x, or the data's "
              "windows per rank, differ between ranks)", step + 1, decision.last_votes, mp->num_processes);
    }
    TrainStepResult r{};
    r.stop_requests = decision.stop_requests;
    r.loss = decision.loss;
    train_step_wait_(ts, step + 1, "the gradient norm (ZeRO-1: ncclAllReduce)");
    r.norm = gpt2_grad_norm(model);
    if (!std::isfinite(r.loss) || !std::isfinite(r.norm)) {
        fatal("step %d: the loss (%f) or gradient norm (%f) is not finite; stopping instead of training on "
              "garbage. Lower -l, add warmup (-u), or resume from the last checkpoint.", step + 1, r.loss, r.norm);
    }
    train_step_wait_(ts, step + 1, "the skip decision (-sl / -sg: ncclBroadcast)");
    const StepSkip skip = step_skip_decide(ts.loss_outlier, ts.norm_outlier, r.loss, r.norm, ts.skip_loss_z,
                                           ts.skip_norm_z, rank_comm_of(mp));
    r.loss_z = skip.loss_z;
    r.norm_z = skip.norm_z;
    if (skip.skip) {
        if (mp->process_rank == 0) {  // llm.c's line: the loss's reason first
            if (skip.skip_loss) printf("skipping update due to loss z-score of %f\n", r.loss_z);
            else printf("skipping update due to grad z-score of %f\n", r.norm_z);
        }
    } else {
        const float grad_scale = r.norm > 1.0f ? 1.0f / r.norm : 1.0f;
        gpt2_update(model, lr, ts.weight_decay, grad_scale, step + 1);
    }
    return r;
}
