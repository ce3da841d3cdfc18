// Tests for llmc/train_plan.h: the counting flags (-x, -m, -n/-nk/-nm, -h, tok/s) mean what llm.c's
// train_gpt2.cu (f1e2ace) makes of them. Expected values follow llm.c's rules as its source states them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>
#include <string>
#include <vector>

#include "llmc/dataloader.h"
#include "llmc/train_plan.h"
#include "test_util.h"

namespace {

void write_shard(const std::string& path, int32_t ntok) {
    std::vector<int32_t> header(256, 0);
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = ntok;
    std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
    bytes.append(2 * (size_t)ntok, '\0');
    write_file(path, bytes);
}

bool exists(const std::string& p) {
    struct stat sb;
    return stat(p.c_str(), &sb) == 0;
}

}  // namespace

TEST(TrainPlan, EpochIsAllTrainTokensOverTotalBatchRoundedDown) {
    // Two shards of 1000 tokens, B*T = -d = 250: a shard holds (1000-1)/250 = 3 windows, 6 steps in
    // all by summing per shard; llm.c's epoch is floor(2000 / 250) = 8 steps (the loader wraps around).
    TempDir dir("test_train_plan");
    write_shard(dir.file("train_000.bin"), 1000);
    write_shard(dir.file("train_001.bin"), 1000);
    DataLoader dl;
    dataloader_init(&dl, (dir.path + "/train_*.bin").c_str(), "-i", 1, 250, 0, 1, false);
    const size_t tokens = shard_pattern_tokens(dl.shard_paths);
    EXPECT_EQ(tokens, 2000u);
    EXPECT_EQ(dataloader_num_batches(&dl), 2u * (999 / 250));  // the old count
    EXPECT_EQ(plan_train_steps(-1, tokens, 250), 2000 / 250);
    dataloader_free(&dl);
}

TEST(TrainPlan, StepsZeroMeansNoUpdateAndNIsN) {
    EXPECT_EQ(plan_train_steps(0, 1000000, 4096), 0);  // was "one epoch" before
    EXPECT_EQ(plan_train_steps(7, 1000000, 4096), 7);
}

TEST(TrainPlan, ValMinusOneIsTheWholeValSplit) {
    // llm.c: val_num_batches = val tokens / (B*T*processes), no gradient accumulation in val
    EXPECT_EQ(plan_val_batches(-1, 32768, 4 * 1024), 32768 / (4 * 1024));
    EXPECT_EQ(plan_val_batches(-1, 100000, 2 * 64 * 2), 100000 / (2 * 64 * 2));
    EXPECT_EQ(plan_val_batches(20, 32768, 4 * 1024), 20);  // more than the split holds: the loader wraps
}

TEST(TrainPlan, CheckpointWrittenAsLlmc) {
    // llm.c: (checkpoint_every > 0 && output_log_dir != NULL && resuming == 0) &&
    //        ((step > 0 && step % checkpoint_every == 0) || last_step)
    EXPECT_FALSE(checkpoint_due(30, true, 0, true, false));   // -n 0: not even a final one
    EXPECT_TRUE(checkpoint_due(30, true, 7, true, false));    // the last step, not a multiple
    EXPECT_TRUE(checkpoint_due(21, false, 7, true, false));
    EXPECT_FALSE(checkpoint_due(22, false, 7, true, false));
    EXPECT_FALSE(checkpoint_due(0, false, 7, true, false));   // step 0 is not written...
    EXPECT_TRUE(checkpoint_due(0, true, 7, true, false));     // ...unless it is the last (-x 0)
    EXPECT_FALSE(checkpoint_due(21, false, 7, false, false)); // no -o
    EXPECT_FALSE(checkpoint_due(21, false, 7, true, true));   // the step a resumed run starts from
    EXPECT_FALSE(checkpoint_due(30, true, 7, true, true));
}

TEST(TrainPlan, KeepRuleDeletesOneOldCheckpointPerWriteAndSparesMajors) {
    // -n 10 -nk 2 over a 55-step run: writes 10, 20, 30, 40, 50 and 55 (last). Each write of S deletes
    // S - 20 if > 0. With -nm 0 the survivors are 40, 50, 55; with -nm 20, 20 is major and stays.
    // The deletions run on a real directory, with the model, state and DONE files of two processes.
    for (int major : {0, 20}) {
        TempDir dir("test_train_plan");
        std::set<int> written;
        for (int step = 0; step <= 55; step++) {
            if (!checkpoint_due(step, step == 55, 10, true, false)) continue;
            write_file(ckpt_model_path(dir.path, step), "m");
            for (int rank = 0; rank < 2; rank++) write_file(ckpt_state_path(dir.path, step, rank), "s");
            write_file(ckpt_done_path(dir.path, step), "");
            written.insert(step);
            const int del = checkpoint_to_delete(step, 10, 2, major);
            if (del > 0) {
                checkpoint_delete_done(dir.path, del);
                for (int rank = 0; rank < 2; rank++) checkpoint_delete_files(dir.path, del, rank);
            }
        }
        EXPECT_EQ(written, (std::set<int>{10, 20, 30, 40, 50, 55}));
        const std::set<int> want = major == 0 ? std::set<int>{40, 50, 55} : std::set<int>{20, 40, 50, 55};
        for (int step : written) {
            const bool keep = want.count(step) > 0;
            EXPECT_EQ(exists(ckpt_done_path(dir.path, step)), keep) << "step " << step << " -nm " << major;
            EXPECT_EQ(exists(ckpt_model_path(dir.path, step)), keep) << "step " << step;
            EXPECT_EQ(exists(ckpt_state_path(dir.path, step, 1)), keep) << "step " << step;
        }
    }
    EXPECT_EQ(checkpoint_to_delete(100, 10, 0, 0), -1);  // -nk 0: keep everything
    EXPECT_EQ(checkpoint_to_delete(20, 10, 2, 0), -1);   // 20 - 20 = 0: nothing to delete yet
}

TEST(TrainPlan, MultipleChoiceEvalFromStepOneOn) {
    // llm.c: (step > 0 && step % val_loss_every == 0) || last_step
    EXPECT_FALSE(eval_due(0, false, 20));
    EXPECT_TRUE(eval_due(0, true, 20));  // -x 0
    EXPECT_TRUE(eval_due(40, false, 20));
    EXPECT_FALSE(eval_due(41, false, 20));
    EXPECT_TRUE(eval_due(41, true, 20));
    EXPECT_FALSE(eval_due(40, false, 0));  // -v 0 (llm.c would divide by zero): the last step only
}

TEST(TrainPlan, TokPerSecIsLlmcBiasCorrectedAverage) {
    // step 0 (warm-up): the raw value. Then ema = 0.95 ema + 0.05 x, shown ema / (1 - 0.95^step).
    TokPerSecAverage a;
    EXPECT_FLOAT_EQ(tok_per_sec_update(&a, 0, 1000.0f), 1000.0f);  // not averaged in
    EXPECT_FLOAT_EQ(tok_per_sec_update(&a, 1, 100.0f), 100.0f);    // 5 / 0.05
    const float step2 = (0.95f * 5.0f + 0.05f * 300.0f) / (1.0f - 0.95f * 0.95f);
    EXPECT_NEAR(tok_per_sec_update(&a, 2, 300.0f), step2, 1e-3f);   // 202.56, not this step's 300
    EXPECT_NEAR(step2, 202.564f, 1e-2f);
}

TEST(TrainPlan, MissingInitFilePointsToDescriptorAndImport) {
    const std::string m = init_file_missing_message(DEFAULT_INIT_FILE);
    EXPECT_NE(m.find("gpt2_124M_bf16.bin"), std::string::npos) << m;
    EXPECT_NE(m.find("(the default -e"), std::string::npos) << m;
    EXPECT_NE(m.find("-e d12"), std::string::npos) << m;
    EXPECT_NE(m.find("python3 dev/hf.py import gpt2 gpt2_124M.bin"), std::string::npos) << m;
    EXPECT_EQ(init_file_missing_message("other.bin").find("(the default -e"), std::string::npos);
}
