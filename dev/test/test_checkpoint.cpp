// Tests for llmc/checkpoint.h: which fp32 blocks a state file's body holds, in which order and of
// which size, per precision (BF16 / FP32 build), -w and optimizer shard (ZeRO-1); which files a run
// refuses; and checkpoint_read of a whole checkpoint (model header + state file), including a state
// file as llm.c's FP32 build writes it (slot 4 = 1, master block, no checksum); the checkpoint
// directory (paths, creation, DONE, finding the latest, leftovers, pruning).
#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "llmc/checkpoint.h"
#include "test_util.h"

namespace {

bool exists(const std::string& p) {
    struct stat sb;
    return stat(p.c_str(), &sb) == 0;
}

void touch(const std::string& p) { write_file(p, ""); }

std::set<std::string> list_dir(const std::string& dir) {
    std::set<std::string> out;
    DIR* d = opendir(dir.c_str());
    while (struct dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') out.insert(e->d_name);
    }
    closedir(d);
    return out;
}

// The files of checkpoint `step` in dir: the model, one state file per rank, and DONE if done.
void make_ckpt(const std::string& dir, int step, bool done, int ranks = 1) {
    touch(ckpt_model_path(dir, step));
    for (int r = 0; r < ranks; r++) touch(ckpt_state_path(dir, step, r));
    if (done) ckpt_write_done(dir, step);
}

using Blocks = std::vector<StateBlock>;
const Blocks kMV = {StateBlock::adamw_m, StateBlock::adamw_v};
const Blocks kMVMaster = {StateBlock::adamw_m, StateBlock::adamw_v, StateBlock::master};

// Optimizer shard sizes: a whole small model, and ZeRO-1 shards of GPT-2 124M over 3 and 8 processes
// (padded to a multiple of P: ceil(N / P)).
constexpr size_t kN124M = 124475904;
const size_t kShards[] = {5, kN124M, (kN124M + 2) / 3, kN124M / 8};

TEST(StateBody, WriteBlocksPerPrecisionAndMasterWeights) {
    for (size_t shard : kShards) {
        SCOPED_TRACE(shard);
        // BF16: the master copy once it exists (-w 1 after the first update), else none
        StateBody b = state_body_to_write(true, true, true, shard);
        EXPECT_EQ(b.blocks, kMVMaster);
        EXPECT_TRUE(b.has_master());
        EXPECT_EQ(b.elements, shard);
        EXPECT_EQ(b.bytes(), 3 * shard * sizeof(float));
        EXPECT_EQ(state_body_to_write(true, true, false, shard).blocks, kMV);
        EXPECT_EQ(state_body_to_write(true, false, false, shard).blocks, kMV);
        // FP32: the parameters are the master block with -w 1 (as llm.c's FP32 build), none with -w 0
        b = state_body_to_write(false, true, false, shard);
        EXPECT_EQ(b.blocks, kMVMaster);
        EXPECT_EQ(b.bytes(), 3 * shard * sizeof(float));
        EXPECT_EQ(state_body_to_write(false, true, true, shard).blocks, kMVMaster);
        b = state_body_to_write(false, false, false, shard);
        EXPECT_EQ(b.blocks, kMV);
        EXPECT_FALSE(b.has_master());
        EXPECT_EQ(b.bytes(), 2 * shard * sizeof(float));
    }
}

TEST(StateBody, ReadBlocksAndRefusals) {
    for (size_t shard : kShards) {
        SCOPED_TRACE(shard);
        for (bool bf16 : {true, false}) {
            for (bool w : {true, false}) {
                const StateBody none = state_body_to_read(bf16, w, false, shard);
                EXPECT_EQ(none.blocks, kMV);
                EXPECT_EQ(none.elements, shard);
                EXPECT_TRUE(none.refused.empty());
                const StateBody with = state_body_to_read(bf16, w, true, shard);
                EXPECT_EQ(with.blocks, kMVMaster);
                EXPECT_EQ(with.bytes(), 3 * shard * sizeof(float));
                // only a BF16 -w 0 run cannot take a master block (it keeps no copy to load it into)
                EXPECT_EQ(with.refused.empty(), !(bf16 && !w)) << "bf16 " << bf16 << " -w " << w;
            }
        }
    }
    EXPECT_NE(state_body_to_read(true, false, true, 5).refused.find("-w 1"), std::string::npos);
}

TEST(StateBody, BuffersInFileOrder) {
    float m[4], v[4], master[4];
    std::vector<HostBuffer> b = state_body_buffers(state_body_to_write(false, true, false, 4), m, v, master);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0].ptr, m);
    EXPECT_EQ(b[1].ptr, v);
    EXPECT_EQ(b[2].ptr, master);
    for (const HostBuffer& h : b) EXPECT_EQ(h.bytes, 16u);
    b = state_body_buffers(state_body_to_write(false, false, false, 4), m, v, nullptr);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[1].ptr, v);
}

// A checkpoint of step 7 in dir: the model file of `cfg` (fp32, v3) and this process's state file with
// the body `body` of m = i, v = 2i, master = the parameter values of the shard.
struct Fixture {
    TempDir dir{"test_checkpoint"};
    GPT2Config cfg{};
    std::vector<float> params, m, v, master;
    static constexpr int kStep = 7;

    Fixture() {
        EXPECT_TRUE(gpt2_config_from_descriptor("custom:L1,C64,NH1", &cfg));
        params.resize(gpt2_num_parameters(cfg));
        for (size_t i = 0; i < params.size(); i++) params[i] = 0.001f * (float)(i % 1000) - 0.5f;
        model_file_write(ckpt_model_path(dir.path, kStep).c_str(), cfg, params.data(), DType::FP32,
                         MODEL_FILE_VERSION_FP32);
    }
    void write_state(const StateBody& body, int num_processes = 1, int rank = 0, int zero_layout = 1, int step = kStep) {
        const size_t n = body.elements;
        m.resize(n);
        v.resize(n);
        master.assign(params.begin(), params.begin() + n);
        for (size_t i = 0; i < n; i++) {
            m[i] = (float)i;
            v[i] = 2.0f * (float)i;
        }
        RunState rs;
        rs.num_processes = num_processes;
        rs.process_rank = rank;
        rs.use_master_weights = body.has_master();
        rs.step = step;
        rs.rng_state = 99;
        rs.rng_state_last_update = 98;
        rs.zero_layout = zero_layout;
        run_state_write(ckpt_state_path(dir.path, step, rank), rs,
                        state_body_buffers(body, m.data(), v.data(), master.data()));
    }
};

TEST(CheckpointRead, Fp32MasterBlockRoundTrip) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    f.write_state(state_body_to_write(false, true, false, n));
    for (bool w : {true, false}) {  // an FP32 run reads the block with either -w
        CheckpointRead r;
        checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, false, w);
        EXPECT_EQ(r.step, Fixture::kStep);
        EXPECT_EQ(r.model_path, ckpt_model_path(f.dir.path, Fixture::kStep));
        EXPECT_EQ(r.state_path, ckpt_state_path(f.dir.path, Fixture::kStep, 0));
        EXPECT_EQ(r.info.version, MODEL_FILE_VERSION_FP32);
        EXPECT_TRUE(r.rs.use_master_weights);
        EXPECT_EQ(r.rs.rng_state, 99u);
        EXPECT_EQ(r.rs.rng_state_last_update, 98u);
        EXPECT_EQ(r.m, f.m);
        EXPECT_EQ(r.v, f.v);
        EXPECT_EQ(r.master, f.master);
    }
    // a BF16 -w 1 run takes it as its master copy
    CheckpointRead r;
    checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, true, true);
    EXPECT_EQ(r.master, f.master);
}

TEST(CheckpointRead, NoMasterBlock) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    f.write_state(state_body_to_write(false, false, false, n));
    for (bool bf16 : {true, false}) {
        CheckpointRead r;
        checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, bf16, true);
        EXPECT_FALSE(r.rs.use_master_weights);
        EXPECT_TRUE(r.master.empty());
        EXPECT_EQ(r.v, f.v);
    }
}

TEST(CheckpointRead, ZeroShardOfOneRank) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    const size_t shard = (n + 3) / 4;
    f.write_state(state_body_to_write(true, true, true, shard), 4, 2);
    CheckpointRead r;
    checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 4, 2, shard, true, true);
    EXPECT_EQ(r.m.size(), shard);
    EXPECT_EQ(r.master, f.master);
    // the same file read for another shard size (another -z or process count) is refused
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 4, 2, shard + 1, true, true),
                ::testing::ExitedWithCode(1), "holds [0-9]+ bytes of optimizer state but this run needs");
}

// Our files from before header slot 9 kept ZeRO-1 shards as one contiguous slice: with P > 1 they are
// refused (the same bytes in another order); with P = 1 or without ZeRO-1 the layouts coincide.
TEST(CheckpointRead, EarlierZeroLayoutRefused) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    const size_t shard = n / 4;
    const std::string state = ckpt_state_path(f.dir.path, Fixture::kStep, 2);
    f.write_state(state_body_to_write(true, true, true, shard), 4, 2);
    std::vector<uint8_t> bytes = read_bytes(state);
    int32_t slot9;
    memcpy(&slot9, &bytes[4 * 9], 4);
    EXPECT_EQ(slot9, 1);
    CheckpointRead r;
    checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 4, 2, shard, true, true);
    bytes[4 * 9] = 0;  // as an earlier build wrote it
    write_file(state, bytes);
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 4, 2, shard, true, true),
                ::testing::ExitedWithCode(1), "state_00000007_00002.bin' holds a ZeRO-1 optimizer shard of 4 "
                "processes in the layout of an earlier gpt2cu build");
    // P = 1: slot 9 = 0 passes the layout check (both layouts are the checkpoint order) and the read goes
    // on to the checksum, which the edit broke
    Fixture g;
    g.write_state(state_body_to_write(true, true, true, n));
    const std::string state1 = ckpt_state_path(g.dir.path, Fixture::kStep, 0);
    std::vector<uint8_t> one = read_bytes(state1);
    one[4 * 9] = 0;
    write_file(state1, one);
    EXPECT_EXIT(checkpoint_read(&r, g.dir.path, Fixture::kStep, g.cfg, "-e test", 1, 0, n, true, true),
                ::testing::ExitedWithCode(1), "checksum mismatch");  // past the layout check, to the checksum
}

// A -z 1 run whose process count does not divide every tensor shards in the padded layout (llmc/zero_shards.h)
// and marks it in slot 9 (= 2): such a file is read only by a run of that layout, and a file of llm.c's
// layout is never read by it; both can have the same size (d48 at P = 3), so the mark is what tells them apart.
TEST(CheckpointRead, ZeroLayoutMarkMustMatchTheRun) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    const size_t shard = (n + 2) / 3;
    const std::string state = ckpt_state_path(f.dir.path, Fixture::kStep, 1);
    CheckpointRead r;
    f.write_state(state_body_to_write(true, true, true, shard), 3, 1, (int)ZeroLayout::padded);
    int32_t slot9;
    memcpy(&slot9, &read_bytes(state)[4 * 9], 4);
    EXPECT_EQ(slot9, 2);
    checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 3, 1, shard, true, true, ZeroLayout::padded);
    EXPECT_EQ(r.rs.zero_layout, 2);
    EXPECT_EQ(r.m, f.m);
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 3, 1, shard, true, true),
                ::testing::ExitedWithCode(1), "state_00000007_00001.bin' holds a ZeRO-1 optimizer shard of 3 processes "
                "in the padded layout \\(one contiguous 1/P of all parameters\\), but this run shards in llm.c's layout");
    f.write_state(state_body_to_write(true, true, true, shard), 3, 1, (int)ZeroLayout::llmc);
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 3, 1, shard, true, true,
                                ZeroLayout::padded),
                ::testing::ExitedWithCode(1), "in llm.c's layout \\(1/P of every tensor of every layer\\), but this run "
                "shards in the padded layout");
    // unknown layouts are corruption
    std::vector<uint8_t> bytes = read_bytes(state);
    bytes[4 * 9] = 3;
    write_file(state, bytes);
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 3, 1, shard, true, true),
                ::testing::ExitedWithCode(1), "header slot 9 = 3: no such ZeRO-1 layout");
    // a whole optimizer state (ZeRO-0, or one process) is the same in every layout: not checked
    Fixture g;
    g.write_state(state_body_to_write(true, true, true, n), 3, 1, (int)ZeroLayout::padded);
    checkpoint_read(&r, g.dir.path, Fixture::kStep, g.cfg, "-e test", 3, 1, n, true, true);
    EXPECT_EQ(r.m.size(), n);
}

TEST(CheckpointRead, Refusals) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    f.write_state(state_body_to_write(true, true, true, n));
    CheckpointRead r;
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, true, false),
                ::testing::ExitedWithCode(1), "state_00000007_00000.bin' holds fp32 master weights but this run keeps none \\(-w 0\\)");
    GPT2Config other = f.cfg;
    other.num_layers = 2;
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, other, "-e d12", 1, 0, n, true, true),
                ::testing::ExitedWithCode(1), "model_00000007.bin' has a different model configuration than -e d12");
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, 8, f.cfg, "-e test", 1, 0, n, true, true), ::testing::ExitedWithCode(1),
                "model_00000008.bin");
}

// A state file holds the step it was written at (header slot 10): a file of step 7 under step 9's name
// (copied, renamed or linked) is refused naming both steps, with a checksum or without one (as llm.c
// writes them). Earlier builds resumed step 9 from step 7's optimizer and data position.
TEST(CheckpointRead, StateFileOfAnotherStepRefused) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    f.write_state(state_body_to_write(true, true, true, n));
    const std::string model9 = ckpt_model_path(f.dir.path, 9), state9 = ckpt_state_path(f.dir.path, 9, 0);
    write_file(model9, read_file(ckpt_model_path(f.dir.path, Fixture::kStep)));
    write_file(state9, read_file(ckpt_state_path(f.dir.path, Fixture::kStep, 0)));
    CheckpointRead r;
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true), ::testing::ExitedWithCode(1),
                "state file '.*/state_00000009_00000.bin' holds step 7, but it is resumed as step 9");
    // no checksum (slot 6 = 0, none of our slots): llm.c's layout, the same step slot
    std::vector<int32_t> header(FILE_HEADER_INTS, 0);
    header[0] = RUN_STATE_MAGIC;
    header[1] = 1;
    header[2] = 1;
    header[10] = Fixture::kStep;
    std::string bytes((const char*)header.data(), FILE_HEADER_BYTES);
    bytes.append(2 * n * sizeof(float), '\0');
    write_file(state9, bytes);
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true), ::testing::ExitedWithCode(1),
                "state_00000009_00000.bin' holds step 7, but it is resumed as step 9");
    // the step it holds: read
    f.write_state(state_body_to_write(true, true, true, n), 1, 0, 1, 9);
    checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true);
    EXPECT_EQ(r.rs.step, 9);
}

// The model file holds no step, but a link shows where it points: a model (or state) file of step 9 that
// is a symbolic link to step 7's file, or a hard link shared with it, is refused naming both steps.
TEST(CheckpointRead, LinkToAFileOfAnotherStepRefused) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    f.write_state(state_body_to_write(true, true, true, n));
    f.write_state(state_body_to_write(true, true, true, n), 1, 0, 1, 9);
    const std::string model7 = ckpt_model_path(f.dir.path, Fixture::kStep), model9 = ckpt_model_path(f.dir.path, 9);
    CheckpointRead r;
    ASSERT_EQ(symlink("model_00000007.bin", model9.c_str()), 0);  // relative, as ln -s would make it
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true), ::testing::ExitedWithCode(1),
                "model file '.*/model_00000009.bin' is a link to '.*/model_00000007.bin', a file of step 7, but it is "
                "resumed as step 9");
    ASSERT_EQ(unlink(model9.c_str()), 0);
    ASSERT_EQ(link(model7.c_str(), model9.c_str()), 0);
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true), ::testing::ExitedWithCode(1),
                "model file '.*/model_00000009.bin' is a link to '.*/model_00000007.bin', a file of step 7");
    // a link to a file of the same step elsewhere (a checkpoint moved to another disk) is fine
    ASSERT_EQ(unlink(model9.c_str()), 0);
    TempDir other("test_checkpoint");
    const std::string moved = other.path + "/model_00000009.bin";
    write_file(moved, read_file(model7));
    ASSERT_EQ(symlink(moved.c_str(), model9.c_str()), 0);
    checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true);
    EXPECT_EQ(r.rs.step, 9);
}

// llm.c's FP32 build with its default -w 1: header slots 0-5, 10, 20-23, 30-33 only (no checksum),
// body m, v, master (= the parameters), nothing after it.
TEST(CheckpointRead, LlmcFp32StateFile) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    std::vector<int32_t> header(FILE_HEADER_INTS, 0);
    header[0] = RUN_STATE_MAGIC;
    header[1] = 1;
    header[2] = 1;
    header[3] = 0;
    header[4] = 1;
    header[10] = Fixture::kStep;
    header[20] = 1234;
    std::vector<float> m(n, 0.25f), v(n, 0.5f);
    std::string bytes((const char*)header.data(), FILE_HEADER_BYTES);
    for (const std::vector<float>* b : {&m, &v, &f.params}) bytes.append((const char*)b->data(), n * sizeof(float));
    f.dir.write("state_00000007_00000.bin", bytes);
    CheckpointRead r;
    checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, false, true);
    EXPECT_TRUE(r.rs.use_master_weights);
    EXPECT_EQ(r.rs.rng_state, 1234u);
    EXPECT_EQ(r.m, m);
    EXPECT_EQ(r.master, f.params);
}

// m and the master weights are finite, v finite and >= 0: anything else in a state file is refused at
// start-up, naming the block and the element, whether the file has a checksum (ours: written that way)
// or not (llm.c's).
TEST(CheckpointRead, NonFiniteOrNegativeStateValuesRefused) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    struct Case { int block; size_t index; float value; const char* expect; };
    const Case cases[] = {
        {0, 3, NAN, "holds nan in its AdamW m at element 3 of "},
        {0, n - 1, -INFINITY, "holds -inf in its AdamW m at element "},
        {1, 0, -1.0f, "holds -1 in its AdamW v at element 0 of "},
        {1, 17, INFINITY, "holds inf in its AdamW v at element 17 of "},
        {1, 5, NAN, "holds nan in its AdamW v at element 5 of "},
        {2, 9, NAN, "holds nan in its fp32 master weights at element 9 of "},
    };
    for (const Case& k : cases) {
        std::vector<float> m(n, 0.25f), v(n, 0.5f), master = f.params;
        (k.block == 0 ? m : k.block == 1 ? v : master)[k.index] = k.value;
        std::vector<int32_t> header(FILE_HEADER_INTS, 0);  // llm.c's: no checksum
        header[0] = RUN_STATE_MAGIC;
        header[1] = 1;
        header[2] = 1;
        header[4] = 1;
        header[10] = Fixture::kStep;
        std::string bytes((const char*)header.data(), FILE_HEADER_BYTES);
        for (const std::vector<float>* b : {&m, &v, &master}) bytes.append((const char*)b->data(), n * sizeof(float));
        f.dir.write("state_00000007_00000.bin", bytes);
        CheckpointRead r;
        EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, true, true),
                    ::testing::ExitedWithCode(1), std::string("state_00000007_00000.bin' ") + k.expect)
            << k.expect;
    }
    // ours, checksum and all: written with a NaN, still refused
    f.write_state(state_body_to_write(true, true, true, n));
    f.m[11] = NAN;
    run_state_write(ckpt_state_path(f.dir.path, Fixture::kStep, 0), [&] {
        RunState rs;
        rs.use_master_weights = true;
        rs.step = Fixture::kStep;
        return rs;
    }(), state_body_buffers(state_body_to_write(true, true, true, n), f.m.data(), f.v.data(), f.master.data()));
    CheckpointRead r;
    EXPECT_EXIT(checkpoint_read(&r, f.dir.path, Fixture::kStep, f.cfg, "-e test", 1, 0, n, true, true),
                ::testing::ExitedWithCode(1), "holds nan in its AdamW m at element 11 of ");
    // zeros (a fresh optimizer) and -0 are fine
    f.write_state(state_body_to_write(true, true, true, n));
    std::fill(f.m.begin(), f.m.end(), 0.0f);
    std::fill(f.v.begin(), f.v.end(), -0.0f);
    EXPECT_EQ(state_body_values_problem(f.m, f.v, f.master), "");
}

// Blocks large enough to be scanned on several threads: the first bad element is named, whichever
// thread's part holds it.
TEST(CheckpointRead, LargeStateBlocksNameTheFirstBadElement) {
    const size_t n = ((size_t)1 << 24) + 1000;
    std::vector<float> m(n, 0.0f), v(n, 0.0f), none;
    EXPECT_EQ(state_body_values_problem(m, v, none), "");
    m[n - 5] = NAN;
    EXPECT_EQ(state_body_values_problem(m, v, none).find("holds nan in its AdamW m at element 16778211 of 16778216"), 0u);
    m[3] = INFINITY;
    EXPECT_EQ(state_body_values_problem(m, v, none).find("holds inf in its AdamW m at element 3 of"), 0u);
    m[3] = m[n - 5] = 0.0f;
    v[((size_t)1 << 23) + 7] = -2.0f;
    EXPECT_EQ(state_body_values_problem(m, v, none).find("holds -2 in its AdamW v at element 8388615 of"), 0u);
}

}  // namespace

// ----------------------------------------------------------------------------
// the checkpoint directory

// A step whose DONE file is there but is no file, or whose model / state file is missing, is named at
// start-up for what it is (not as a missing -e file, or an unreadable state file).
TEST(Checkpoint, IncompleteCheckpointNamesWhatIsWrong) {
    TempDir dir("test_checkpoint");
    make_ckpt(dir.path, 10, true, 2);
    EXPECT_EQ(ckpt_incomplete_problem(dir.path, 10, 0), "");
    EXPECT_EQ(ckpt_incomplete_problem(dir.path, 10, 1), "");
    EXPECT_EQ(ckpt_incomplete_problem(dir.path, 10, -1), "");
    const std::string done = ckpt_done_path(dir.path, 10);
    unlink(ckpt_state_path(dir.path, 10, 1).c_str());
    EXPECT_EQ(ckpt_incomplete_problem(dir.path, 10, 0), "");
    EXPECT_NE(ckpt_incomplete_problem(dir.path, 10, 1).find("the checkpoint of step 10 is incomplete: '" + done +
                                                           "' marks it complete, but '" +
                                                           ckpt_state_path(dir.path, 10, 1) + "' is missing"),
              std::string::npos);
    unlink(ckpt_model_path(dir.path, 10).c_str());
    EXPECT_NE(ckpt_incomplete_problem(dir.path, 10, -1).find("but '" + ckpt_model_path(dir.path, 10) + "' is missing"),
              std::string::npos);
    make_ckpt(dir.path, 20, false);
    mkdir(ckpt_done_path(dir.path, 20).c_str(), 0755);
    EXPECT_EXIT(ckpt_find_latest(dir.path), ::testing::ExitedWithCode(1),  // the newest DONE: named at once
                "DONE_00000020' is a directory, not the empty file that marks the checkpoint of step 20 complete");
    EXPECT_NE(ckpt_incomplete_problem(dir.path, 20, 0).find("DONE_00000020' is a directory, not the empty file that "
                                                            "marks the checkpoint of step 20 complete"),
              std::string::npos);
    make_ckpt(dir.path, 30, false);
    ASSERT_EQ(symlink((dir.path + "/gone").c_str(), ckpt_done_path(dir.path, 30).c_str()), 0);
    EXPECT_NE(ckpt_incomplete_problem(dir.path, 30, 0).find("DONE_00000030' is a link to '" + dir.path +
                                                            "/gone', which does not exist"),
              std::string::npos);
    touch(dir.path + "/gone");  // a link to a file is a DONE file
    EXPECT_EQ(ckpt_incomplete_problem(dir.path, 30, 0), "");
}

TEST(Checkpoint, PathsAndDirCreation) {
    TempDir dir("test_checkpoint");
    EXPECT_EQ(ckpt_model_path("out", 5000), "out/model_00005000.bin");
    EXPECT_EQ(ckpt_state_path("out", 5000, 3), "out/state_00005000_00003.bin");
    EXPECT_EQ(ckpt_done_path("out", 5000), "out/DONE_00005000");
    std::string nested = dir.path + "/a/b/c";
    ckpt_make_dir(nested);
    ckpt_make_dir(nested);  // existing is fine
    EXPECT_TRUE(exists(nested));
    touch(dir.path + "/file");
    EXPECT_EXIT(ckpt_make_dir(dir.path + "/file/x"), ::testing::ExitedWithCode(1), "-o: cannot create directory");
}

TEST(Checkpoint, FindLatestIgnoresStepsWithoutDone) {
    TempDir dir("test_checkpoint");
    EXPECT_EQ(ckpt_find_latest(dir.path), -1);
    EXPECT_EQ(ckpt_find_latest(dir.path + "/missing"), -1);
    for (int step : {100, 200, 300}) make_ckpt(dir.path, step, false);
    ckpt_write_done(dir.path, 100);
    ckpt_write_done(dir.path, 200);
    touch(dir.path + "/DONE_00000400.tmp");  // a marker that never got renamed
    touch(dir.path + "/DONE_0000050");       // not a DONE name (7 digits)
    touch(dir.path + "/DONE_00000600x");
    EXPECT_EQ(ckpt_find_latest(dir.path), 200);  // 300 has no DONE
    ckpt_write_done(dir.path, 300);
    EXPECT_EQ(ckpt_find_latest(dir.path), 300);
    ckpt_write_done(dir.path, 123456789);  // more than 8 digits still parses
    EXPECT_EQ(ckpt_find_latest(dir.path), 123456789);
}

// Resume deletes what an interrupted checkpoint left, each rank its own files.
TEST(Checkpoint, RemoveLeftoversDeletesOnlyTmpFilesOfCheckpoints) {
    TempDir dir("test_checkpoint");
    const std::string d = dir.path;
    for (const char* name : {"model_00000040.bin", "state_00000040_00000.bin", "state_00000040_00001.bin", "DONE_00000040",
                             "model_00000060.bin.tmp", "state_00000060_00000.bin.tmp", "state_00000060_00001.bin.tmp",
                             "DONE_00000060.tmp", "main.log", "notes.tmp", "model_x.bin.tmp"}) {
        touch(d + "/" + name);
    }
    std::vector<std::string> r1 = ckpt_remove_leftovers(d, 1);
    ASSERT_EQ(r1.size(), 1u);
    EXPECT_EQ(r1[0], d + "/state_00000060_00001.bin.tmp");
    std::vector<std::string> r0 = ckpt_remove_leftovers(d, 0);
    EXPECT_EQ(r0, (std::vector<std::string>{d + "/DONE_00000060.tmp", d + "/model_00000060.bin.tmp",
                                            d + "/state_00000060_00000.bin.tmp"}));
    EXPECT_EQ(list_dir(d), (std::set<std::string>{"model_00000040.bin", "state_00000040_00000.bin",
                                                  "state_00000040_00001.bin", "DONE_00000040", "main.log",
                                                  "notes.tmp", "model_x.bin.tmp"}));
    EXPECT_EQ(ckpt_find_latest(d), 40);
}

// The temporary names of this build's writers ("<name>.tmp.<hex>", llmc/utils.h AtomicFile) are
// leftovers too. Only regular files go: a link by such a name is left alone, and so is what it points to.
TEST(Checkpoint, RemoveLeftoversKnowsTheRandomTempNamesAndSkipsLinks) {
    TempDir dir("test_checkpoint");
    const std::string d = dir.path;
    for (const char* name : {"model_00000060.bin.tmp.0a1b2c3d", "state_00000060_00000.bin.tmp.ffffffff",
                             "state_00000060_00001.bin.tmp.12345678", "DONE_00000060.tmp.00000000",
                             "model_00000060.bin.tmp.xyz", "model_00000060.bin.tmp.", "main.log.tmp.0a1b2c3d"}) {
        touch(d + "/" + name);
    }
    TempDir outside("test_checkpoint");
    const std::string victim = outside.path + "/victim";
    write_file(victim, "victim\n");
    ASSERT_EQ(symlink(victim.c_str(), (d + "/model_00000070.bin.tmp.0000abcd").c_str()), 0);
    EXPECT_EQ(ckpt_remove_leftovers(d, 1), std::vector<std::string>{d + "/state_00000060_00001.bin.tmp.12345678"});
    EXPECT_EQ(ckpt_remove_leftovers(d, 0), (std::vector<std::string>{d + "/DONE_00000060.tmp.00000000",
                                                                   d + "/model_00000060.bin.tmp.0a1b2c3d",
                                                                   d + "/state_00000060_00000.bin.tmp.ffffffff"}));
    EXPECT_EQ(list_dir(d), (std::set<std::string>{"model_00000060.bin.tmp.xyz", "model_00000060.bin.tmp.",
                                                  "main.log.tmp.0a1b2c3d", "model_00000070.bin.tmp.0000abcd"}));
    EXPECT_EQ(read_file(victim), "victim\n");
}

// A checkpoint is complete once its DONE file exists; a DONE that is a FIFO or a folder is refused by
// name rather than taken as complete (the files beside it would be read as a checkpoint).
TEST(Checkpoint, FindLatestRefusesADoneThatIsNoFile) {
    TempDir dir("test_checkpoint");
    make_ckpt(dir.path, 10, true);
    make_ckpt(dir.path, 20, false);
    ASSERT_EQ(mkfifo(ckpt_done_path(dir.path, 20).c_str(), 0644), 0);
    EXPECT_EXIT(ckpt_find_latest(dir.path), ::testing::ExitedWithCode(1),
                "-o: '.*/DONE_00000020' is a FIFO \\(named pipe\\), not a regular file");
}

// Checkpoint writers create their files under new random names and rename them into place: a link
// planted at the names earlier builds wrote to (<name>.tmp) is never written through, and a link at
// the final name is replaced, not followed. Earlier builds overwrote the file the link pointed to.
TEST(Checkpoint, WritersNeverWriteThroughALink) {
    Fixture f;
    const size_t n = gpt2_num_parameters(f.cfg);
    TempDir outside("test_checkpoint");
    const std::string victim = outside.path + "/victim";
    write_file(victim, "victim\n");
    const std::string model = ckpt_model_path(f.dir.path, 9), state = ckpt_state_path(f.dir.path, 9, 0);
    for (const std::string& p : {model + ".tmp", state + ".tmp", ckpt_done_path(f.dir.path, 9) + ".tmp", state}) {
        ASSERT_EQ(symlink(victim.c_str(), p.c_str()), 0) << p;
    }
    model_file_write(model.c_str(), f.cfg, f.params.data(), DType::FP32, MODEL_FILE_VERSION_FP32);
    f.write_state(state_body_to_write(true, true, true, n), 1, 0, 1, 9);
    ckpt_write_done(f.dir.path, 9);
    EXPECT_EQ(read_file(victim), "victim\n");
    struct stat sb;
    ASSERT_EQ(lstat(state.c_str(), &sb), 0);
    EXPECT_TRUE(S_ISREG(sb.st_mode)) << "the link at the state file's name is replaced by the file";
    CheckpointRead r;
    checkpoint_read(&r, f.dir.path, 9, f.cfg, "-e test", 1, 0, n, true, true);
    EXPECT_EQ(r.m, f.m);
    // the probe of -o is created the same way
    ckpt_check_writable(f.dir.path);
    EXPECT_EQ(read_file(victim), "victim\n");
}

// An output folder that exists but takes no files is found at start-up.
TEST(Checkpoint, CheckWritableRefusesAFolderThatTakesNoFiles) {
    TempDir dir("test_checkpoint");
    ckpt_check_writable(dir.path);  // fine, and leaves nothing behind
    EXPECT_TRUE(list_dir(dir.path).empty());
    // /proc exists and is a directory, but no one (root included) can create files in it
    EXPECT_EXIT(ckpt_check_writable("/proc"), ::testing::ExitedWithCode(1), "-o: cannot write files in '/proc'");
}
