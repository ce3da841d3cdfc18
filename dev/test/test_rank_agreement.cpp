// Tests for llmc/rank_agreement.h: the resume step is rank 0's choice and every rank names the files of
// that step it cannot see (checkpoint files written to disk, one directory per simulated node); the
// per-step vote gives every rank the same stop / last-step decision whichever rank saw the signal.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "llmc/rank_agreement.h"
#include "test_util.h"

namespace {

void touch(const std::string& p) { write_file(p, "x"); }

// The files a complete checkpoint of `step` has for `num_processes` ranks (as save_checkpoint writes them).
void write_checkpoint(const std::string& dir, int step, int num_processes, bool done = true) {
    touch(ckpt_model_path(dir, step));
    for (int r = 0; r < num_processes; r++) touch(ckpt_state_path(dir, step, r));
    if (done) touch(ckpt_done_path(dir, step));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One step of the vote on P simulated ranks: pack, sum as the all-reduce does, decide on each rank.
std::vector<StepDecision> run_vote(const std::vector<StepVote>& votes) {
    const int P = (int)votes.size();
    float sum[STEP_VOTE_SLOTS] = {0, 0, 0};
    for (const StepVote& v : votes) {
        float packed[STEP_VOTE_SLOTS];
        step_vote_pack(v, packed);
        for (int i = 0; i < STEP_VOTE_SLOTS; i++) sum[i] += packed[i];
    }
    std::vector<StepDecision> out;
    for (int r = 0; r < P; r++) {
        float copy[STEP_VOTE_SLOTS] = {sum[0], sum[1], sum[2]};  // what each rank reads back
        out.push_back(step_vote_decide(copy, P));
    }
    return out;
}

}  // namespace

TEST(Resume, Rank0ChoosesTheNewestCompleteStepOfItsView) {
    TempDir d("test_resume");
    write_checkpoint(d.path, 10, 2);
    write_checkpoint(d.path, 20, 2, /*done=*/false);  // interrupted while writing
    EXPECT_EQ(resume_choose_step(d.path), 10);
    EXPECT_EQ(resume_choose_step(d.path + "/nonexistent"), -1);
}

TEST(Resume, EveryRankOfASharedDirectoryFindsItsFiles) {
    TempDir d("test_resume");
    write_checkpoint(d.path, 30, 4);
    const int step = resume_choose_step(d.path);
    for (int r = 0; r < 4; r++) EXPECT_TRUE(resume_missing_files(d.path, step, r).empty()) << "rank " << r;
}

// A node-local -o: rank 0's node holds step 20, rank 1's node only step 10. Choosing per rank would
// resume rank 1 from 10 and rank 0 from 20; with rank 0's choice rank 1 names what it lacks.
TEST(Resume, ARankWithAnOlderViewNamesTheFilesItLacks) {
    TempDir node0("test_resume0"), node1("test_resume1");
    write_checkpoint(node0.path, 10, 2);
    write_checkpoint(node0.path, 20, 2);
    write_checkpoint(node1.path, 10, 2);
    const int step = resume_choose_step(node0.path);
    ASSERT_EQ(step, 20);
    EXPECT_NE(resume_choose_step(node1.path), step);  // what rank 1 would have chosen alone
    EXPECT_TRUE(resume_missing_files(node0.path, step, 0).empty());
    const std::vector<std::string> missing = resume_missing_files(node1.path, step, 1);
    ASSERT_EQ(missing.size(), 3u);
    EXPECT_EQ(missing[0], ckpt_done_path(node1.path, 20));
    EXPECT_EQ(missing[1], ckpt_model_path(node1.path, 20));
    EXPECT_EQ(missing[2], ckpt_state_path(node1.path, 20, 1));
    const std::string msg = resume_missing_message(missing, step, 1);
    EXPECT_TRUE(contains(msg, "rank 1: rank 0 chose to resume from step 20")) << msg;
    EXPECT_TRUE(contains(msg, "state_00000020_00001.bin")) << msg;
}

TEST(Resume, OnlyTheMissingStateFileOfOneRankIsNamed) {
    TempDir d("test_resume");
    write_checkpoint(d.path, 40, 3);
    ASSERT_EQ(remove(ckpt_state_path(d.path, 40, 2).c_str()), 0);
    EXPECT_TRUE(resume_missing_files(d.path, 40, 1).empty());
    const std::vector<std::string> missing = resume_missing_files(d.path, 40, 2);
    ASSERT_EQ(missing.size(), 1u);
    EXPECT_EQ(missing[0], ckpt_state_path(d.path, 40, 2));
}

TEST(StepVote, OneRanksSignalStopsEveryRankAtTheSameStep) {
    // the signal reached rank 2 only (between the ranks' checks): all four decide to stop
    std::vector<StepVote> votes = {{2.0f, false, false}, {2.5f, false, false}, {3.0f, true, false}, {2.5f, false, false}};
    for (const StepDecision& d : run_vote(votes)) {
        EXPECT_TRUE(d.stop);
        EXPECT_EQ(d.stop_requests, 1);
        EXPECT_FALSE(d.last_disagree);
        EXPECT_FLOAT_EQ(d.loss, 2.5f);
    }
    votes[2].stop_requested = false;
    for (const StepDecision& d : run_vote(votes)) EXPECT_FALSE(d.stop);
}

TEST(StepVote, ANonFiniteLossOnOneRankIsNonFiniteOnEvery) {
    std::vector<StepVote> votes = {{2.0f, false, false}, {NAN, false, false}, {2.0f, false, false}};
    for (const StepDecision& d : run_vote(votes)) {
        EXPECT_FALSE(std::isfinite(d.loss));
        EXPECT_FALSE(d.stop);  // the counts are not poisoned by the loss
    }
}

TEST(StepVote, LastStepMustBeTheSameOnEveryRank) {
    for (const StepDecision& d : run_vote({{1, false, true}, {1, false, true}, {1, false, true}})) {
        EXPECT_FALSE(d.last_disagree);
        EXPECT_EQ(d.last_votes, 3);
    }
    for (const StepDecision& d : run_vote({{1, false, true}, {1, false, false}, {1, false, true}})) {
        EXPECT_TRUE(d.last_disagree);
        EXPECT_EQ(d.last_votes, 2);
    }
}

TEST(StepVote, CountsStayExactForManyRanks) {
    std::vector<StepVote> votes(4096, StepVote{3.0f, true, true});
    const StepDecision d = run_vote(votes)[0];
    EXPECT_EQ(d.stop_requests, 4096);
    EXPECT_EQ(d.last_votes, 4096);
    EXPECT_FALSE(d.last_disagree);
    EXPECT_FLOAT_EQ(d.loss, 3.0f);
}
