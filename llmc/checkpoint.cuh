/*
 * Checkpoints, GPU side: the one save and the one load of model + optimizer state that the trainer and
 * test_gpt2.cu both run. Checkpoint S in dir (docs/formats.md "Checkpoint directory"): model_S.bin (rank 0), every
 * rank's state_S_<rank>.bin, then DONE_S (rank 0, after a barrier). Which blocks a state file holds,
 * and reading one on the host, are llmc/checkpoint.h.
 *
 *   void checkpoint_save(GPT2* model, const std::string& dir, int step, RunState rs)
 *        writes checkpoint `step` into dir (created if missing). rs carries the caller's part of the
 *        state file (data loader position and shuffle orders, outlier windows); the model's part
 *        (process geometry, step, RNG states, master flag) and the body are filled in here. Every
 *        process calls it (the barrier before DONE is a collective).
 *   void checkpoint_upload(GPT2* model, const CheckpointRead& r)
 *        after checkpoint_read(): parameters from r's model file, AdamW m and v, the master block
 *        (BF16: the master copy; FP32: checked against the parameters, see llmc/checkpoint.h) and the
 *        RNG states. The caller restores its own part of r.rs (data loader, outlier windows).
 */
#pragma once

#include <string>
#include <vector>

#include "llmc/checkpoint.h"
#include "llmc/gpt2.cuh"

inline void checkpoint_save(GPT2* model, const std::string& dir, int step, RunState rs) {
    const MultiGpuConfig* mp = model->mp;
    ckpt_make_dir(dir);
    if (mp->process_rank == 0) gpt2_write_params(model, ckpt_model_path(dir, step).c_str());
    std::vector<float> m, v, master;
    gpt2_optimizer_state_to_host(model, &m, &v, &master);  // master: BF16 -w 1 once the first update made it
    const size_t n = model->shard.size;
    const StateBody body = state_body_to_write(kFloatXIsBF16, model->opt.use_master_weights, !master.empty(), n);
    if (body.has_master() && master.empty()) {  // FP32: the parameters are the fp32 weights
        gpt2_shard_params_to_host(model, &master);
    }
    rs.num_processes = mp->num_processes;
    rs.process_rank = mp->process_rank;
    rs.use_master_weights = body.has_master();
    rs.step = step;
    rs.rng_state = model->rng_state;
    rs.rng_state_last_update = model->rng_state_last_update;
    rs.zero_layout = (int)model->shard.layout;
    run_state_write(ckpt_state_path(dir, step, mp->process_rank), rs,
                    state_body_buffers(body, m.data(), v.data(), master.data()));
    multi_gpu_barrier(mp);
    if (mp->process_rank == 0) ckpt_write_done(dir, step);
}

// FP32 builds: the master block of r must be this process's shard of the parameters just loaded.
inline void checkpoint_check_fp32_master_(GPT2* model, const CheckpointRead& r) {
    const size_t n = model->shard.size;
    std::vector<float> params;
    gpt2_shard_params_to_host(model, &params);
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&params[i], &r.master[i], sizeof(float)) != 0 && differ++ == 0) first = i;
    }
    if (differ > 0) {
        fatal("'%s' holds fp32 master weights that differ from the parameters of '%s' in %zu of this process's %zu "
              "(first: parameter %zu, %.9g in the state file, %.9g in the model file). In an FP32 build they are "
              "the same numbers (as in llm.c's FP32 build), so the two files are not of one checkpoint%s",
              r.state_path.c_str(), r.model_path.c_str(), differ, n, gpt2_shard_param_index(model, first), r.master[first],
              params[first],
              r.info.version == MODEL_FILE_VERSION_BF16 ? " (the model file is bf16: resume a BF16 run in a BF16 build)" : "");
    }
}

inline void checkpoint_upload(GPT2* model, const CheckpointRead& r) {
    if (model->shard.size != r.m.size()) {
        fatal("internal: optimizer shard of %zu elements, the state was read for %zu", model->shard.size, r.m.size());
    }
    gpt2_load_params(model, r.model_path.c_str(), r.info);
    const bool has_master = !r.master.empty();
    if (!kFloatXIsBF16 && has_master) checkpoint_check_fp32_master_(model, r);
    gpt2_optimizer_state_from_host(model, r.m.data(), r.v.data(), kFloatXIsBF16 && has_master ? r.master.data() : nullptr);
    model->rng_state = r.rs.rng_state;
    model->rng_state_last_update = r.rs.rng_state_last_update;
}
