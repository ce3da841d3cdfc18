/*
 * Checkpoints, host side: which fp32 blocks form a state file's body, and reading one checkpoint
 * (model file header + this process's state file) into host memory. The GPU side (writing a
 * checkpoint, uploading one that was read) is llmc/checkpoint.cuh; file formats in llmc/run_state.h
 * and llmc/model_file.h; the directory helpers (paths, DONE, leftovers) in llmc/run_state.h.
 *
 * State file body (formats.md): AdamW m, AdamW v, then the fp32 master weights when header slot 4 is
 * 1; each block holds this process's optimizer shard (all parameters without ZeRO-1), in floats.
 *   BF16 build: the master block is the master copy the update keeps (-w 1), written once it exists
 *     (the first update makes it from the parameters; before that a -w 1 run writes none, and a
 *     resume makes it from the parameters again). Reading a file with one needs -w 1.
 *   FP32 build: the parameters are fp32 already, so the master block is the parameters' shard. It is
 *     written with -w 1 (the default), as llm.c's FP32 build does: its default -w 1 keeps an fp32 copy
 *     equal to the parameters bit for bit (made by an fp32 -> fp32 copy; then llm.c llmc/adamw.cuh
 *     stores one fp32 result to both, its stochastic_rounding to float being a plain store), and it
 *     stops on a state file without the block. With -w 0 none is written (llm.c's -w 0 expects
 *     none). A file with the block is read with either -w, and the block is checked, not used: it
 *     must equal the parameters of the checkpoint's model file bit for bit (checkpoint_upload). Using
 *     it could only give the same numbers; checking catches a model file and a state file of
 *     different checkpoints, and the FP32 update stays as it is (it keeps no fp32 copy).
 *
 * API
 *   enum class StateBlock { adamw_m, adamw_v, master }
 *   StateBody state_body_to_write(bool bf16_build, bool master_weights, bool master_ready, size_t shard)
 *        the blocks a state file of this run holds, in file order; master_weights: -w; master_ready:
 *        a BF16 run's master copy exists (ignored in FP32 builds); shard: optimizer elements of this process
 *   StateBody state_body_to_read(bool bf16_build, bool master_weights, bool file_has_master, size_t shard)
 *        the blocks to read from a file whose slot 4 is file_has_master; .refused names why this run
 *        cannot read it (empty: it can)
 *   std::vector<HostBuffer> state_body_buffers(const StateBody&, float* m, float* v, float* master)
 *        the body in file order over the caller's arrays (each body.elements floats)
 *   void checkpoint_read(CheckpointRead* out, dir, step, const GPT2Config& expect, const std::string& cfg_source,
 *                        int num_processes, int rank, size_t shard, bool bf16_build, bool master_weights)
 *        reads and checks checkpoint `step` of dir: the model file's header against `expect` (the
 *        message names cfg_source, e.g. "-e d12"), the whole state file (llmc/run_state.h checks); out
 *        gets the paths, the header, the run state and the m / v / master blocks (master empty when
 *        the file has none). One fatal() naming the file on any problem.
 */
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "llmc/model_file.h"
#include "llmc/run_state.h"

enum class StateBlock { adamw_m, adamw_v, master };

struct StateBody {
    std::vector<StateBlock> blocks;  // file order
    size_t elements = 0;             // floats in each block
    std::string refused;             // state_body_to_read: why this run cannot read the file

    bool has_master() const { return blocks.size() == 3; }
    size_t bytes() const { return blocks.size() * elements * sizeof(float); }
};

inline StateBody state_body_(bool with_master, size_t shard) {
    StateBody b;
    b.blocks = {StateBlock::adamw_m, StateBlock::adamw_v};
    if (with_master) b.blocks.push_back(StateBlock::master);
    b.elements = shard;
    return b;
}

inline StateBody state_body_to_write(bool bf16_build, bool master_weights, bool master_ready, size_t shard) {
    return state_body_(master_weights && (master_ready || !bf16_build), shard);
}

inline StateBody state_body_to_read(bool bf16_build, bool master_weights, bool file_has_master, size_t shard) {
    StateBody b = state_body_(file_has_master, shard);
    if (file_has_master && bf16_build && !master_weights) {
        b.refused = "holds fp32 master weights but this run keeps none (-w 0): resume with -w 1";
    }
    return b;
}

inline std::vector<HostBuffer> state_body_buffers(const StateBody& body, float* m, float* v, float* master) {
    std::vector<HostBuffer> out;
    for (StateBlock block : body.blocks) {
        float* p = block == StateBlock::adamw_m ? m : block == StateBlock::adamw_v ? v : master;
        out.push_back({p, body.elements * sizeof(float)});
    }
    return out;
}

struct CheckpointRead {
    int step = -1;  // -1: nothing read
    std::string model_path, state_path;
    ModelFileInfo info{};
    RunState rs;
    std::vector<float> m, v, master;  // master: empty when the state file has no master block
};

inline void checkpoint_read(CheckpointRead* out, const std::string& dir, int step, const GPT2Config& expect,
                            const std::string& cfg_source, int num_processes, int rank, size_t shard,
                            bool bf16_build, bool master_weights) {
    CheckpointRead& r = *out;
    r = CheckpointRead();
    r.step = step;
    r.model_path = ckpt_model_path(dir, step);
    r.state_path = ckpt_state_path(dir, step, rank);
    r.info = model_file_read_header(r.model_path.c_str());
    if (memcmp(&r.info.cfg, &expect, sizeof(GPT2Config)) != 0) {
        fatal("checkpoint '%s' has a different model configuration than %s", r.model_path.c_str(), cfg_source.c_str());
    }
    const RunState peek = run_state_peek(r.state_path);
    if (!peek.llmc_zero_layout && peek.num_processes > 1 && shard < gpt2_num_parameters(expect)) {
        fatal("'%s' holds a ZeRO-1 optimizer shard of %d processes in the layout of an earlier gpt2cu build "
              "(one contiguous slice; this build uses llm.c's 1/P of every tensor of every layer), so its m, v "
              "and master weights would land on the wrong parameters: resume it with the build that wrote it, "
              "or start fresh (without -y 1, or with another -o)", r.state_path.c_str(), peek.num_processes);
    }
    const StateBody body = state_body_to_read(bf16_build, master_weights, peek.use_master_weights, shard);
    if (!body.refused.empty()) fatal("'%s' %s", r.state_path.c_str(), body.refused.c_str());
    r.m.resize(shard);
    r.v.resize(shard);
    if (body.has_master()) r.master.resize(shard);
    r.rs = run_state_read(r.state_path, state_body_buffers(body, r.m.data(), r.v.data(), r.master.data()),
                          num_processes, rank);
}
