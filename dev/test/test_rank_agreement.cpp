// Tests for llmc/rank_agreement.h: the resume step is rank 0's choice and every rank names the files of
// that step it cannot see (checkpoint files written to disk, one directory per simulated node); the
// per-step vote gives every rank the same stop / last-step decision whichever rank saw the signal; with
// ranks as threads and their collectives in memory: after the resume agreement no rank keeps a loader
// position or outlier window of a step the others do not use, every rank has rank 0's rounding RNG,
// the skip decision is rank 0's everywhere, and differing models stop every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "llmc/gpt2_vocab.h"
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
        EXPECT_EQ(d.stop_requests, 1);  // > 0: every rank stops after this step
        EXPECT_FALSE(d.last_disagree);
        EXPECT_FLOAT_EQ(d.loss, 2.5f);
    }
    votes[2].stop_requested = false;
    for (const StepDecision& d : run_vote(votes)) EXPECT_EQ(d.stop_requests, 0);
}

TEST(StepVote, ANonFiniteLossOnOneRankIsNonFiniteOnEvery) {
    std::vector<StepVote> votes = {{2.0f, false, false}, {NAN, false, false}, {2.0f, false, false}};
    for (const StepDecision& d : run_vote(votes)) {
        EXPECT_FALSE(std::isfinite(d.loss));
        EXPECT_EQ(d.stop_requests, 0);  // the counts are not poisoned by the loss
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

// ----------------------------------------------------------------------------
// Agreement through collectives: P ranks as threads of this process, with the collectives the trainer
// does through NCCL (a broadcast of rank 0's bytes, a sum of floats).

namespace {

class ThreadGroup {
public:
    explicit ThreadGroup(int P) : P_(P), slots_(P) {}
    RankComm comm(int rank) {
        RankComm c;
        c.rank = rank;
        c.num_processes = P_;
        c.broadcast = [this, rank](void* data, size_t bytes) {
            if (rank == 0) memcpy(buf_, data, bytes);
            barrier();
            if (rank != 0) memcpy(data, buf_, bytes);
            barrier();
        };
        c.sum = [this, rank](float* values, int n) {
            slots_[rank].assign(values, values + n);
            barrier();
            for (int i = 0; i < n; i++) {
                float s = 0.0f;
                for (int r = 0; r < P_; r++) s += slots_[r][i];
                values[i] = s;
            }
            barrier();
        };
        return c;
    }
    // Runs body(rank) on P threads and waits for all.
    void run(const std::function<void(int rank)>& body) {
        std::vector<std::thread> threads;
        for (int r = 0; r < P_; r++) threads.emplace_back(body, r);
        for (std::thread& t : threads) t.join();
    }

private:
    void barrier() {
        std::unique_lock<std::mutex> lock(mu_);
        const long gen = generation_;
        if (++waiting_ == P_) {
            waiting_ = 0;
            generation_++;
            cv_.notify_all();
        } else {
            cv_.wait(lock, [&] { return generation_ != gen; });
        }
    }
    int P_;
    std::vector<std::vector<float>> slots_;
    unsigned char buf_[64];
    std::mutex mu_;
    std::condition_variable cv_;
    int waiting_ = 0;
    long generation_ = 0;
};

// A tiny model (N = 1,128 parameters) and one train shard of 2,001 tokens.
GPT2Config tiny_config() { return GPT2Config{16, 96, 96, 1, 1, 8}; }
constexpr int kB = 2, kT = 8, kP = 2;

std::string write_train_shard(const std::string& dir) {
    const std::string path = dir + "/train_000000.bin";
    std::vector<int32_t> header(256, 0);
    header[0] = 20240520;
    header[1] = 1;
    header[2] = 2001;
    std::string bytes((const char*)header.data(), 1024);
    for (int i = 0; i < 2001; i++) {
        const uint16_t t = (uint16_t)(i * 7 % GPT2_VOCAB_SIZE);
        bytes.append((const char*)&t, 2);
    }
    write_file(path, bytes);
    return path;
}

// A rank's train loader, as the trainer sets it up (shuffled, rank r of kP).
void loader_init(DataLoader* dl, const std::string& shard, int rank) {
    dataloader_init(dl, shard.c_str(), "-i", kB, kT, rank, kP, true);
}

// Full windows of a run that has trained a while: the values of a quiet loss curve.
OutlierDetector full_window(double center) {
    OutlierDetector d;
    outlier_detector_init(&d);
    for (int i = 0; i < OUTLIER_WINDOW; i++) outlier_detector_update(&d, center + 0.001 * (i % 7));
    return d;
}

// Checkpoint `step` in dir for rank `rank` of kP: model file, this rank's state file (loader after
// `batches` batches, outlier windows unless without_windows), DONE.
void write_rank_checkpoint(const std::string& dir, const std::string& shard, int step, int rank, int batches,
                           bool without_windows = false) {
    const GPT2Config cfg = tiny_config();
    const size_t N = gpt2_num_parameters(cfg);
    std::vector<float> params(N, 0.25f), m(N, 1.0f), v(N, 2.0f);
    model_file_write(ckpt_model_path(dir, step).c_str(), cfg, params.data(), DType::FP32, MODEL_FILE_VERSION_FP32);
    DataLoader dl;
    loader_init(&dl, shard, rank);
    for (int i = 0; i < batches; i++) dataloader_next_batch(&dl);
    RunState rs;
    rs.num_processes = kP;
    rs.process_rank = rank;
    rs.shuffle = true;
    rs.step = step;
    rs.loader = dataloader_get_state(&dl);
    rs.has_outliers = !without_windows;
    rs.loss_outlier = full_window(3.0);
    rs.grad_norm_outlier = full_window(1.0);
    rs.rng_state = 13371337 + rank;  // as llm.c seeds each rank
    run_state_write(ckpt_state_path(dir, step, rank), rs, {{m.data(), N * sizeof(float)}, {v.data(), N * sizeof(float)}});
    dataloader_free(&dl);
    ckpt_write_done(dir, step);
}

// What one rank ends with after the trainer's resume: the host read before the processes are up
// (resume_read), then resume_agree, then the first step's skip decision with -sl 3 on a loss spike.
struct RankOutcome {
    int own_step = -1, agreed = -2;
    int loss_count_before = 0, loss_count = 0;
    DataLoaderState loader;
    std::vector<int> first_batch;
    StepSkip skip{};
    uint64_t rng = 0;
};

RankOutcome resume_rank(const std::string& dir, const std::string& shard, int rank, const RankComm& comm) {
    RankOutcome out;
    const GPT2Config cfg = tiny_config();
    const size_t N = gpt2_num_parameters(cfg);
    DataLoader dl;
    loader_init(&dl, shard, rank);
    OutlierDetector loss, norm;
    outlier_detector_init(&loss);
    outlier_detector_init(&norm);
    const ResumeHostState fresh = resume_host_state(&dl, loss, norm);
    CheckpointRead r;
    auto read = [&](int step) {
        checkpoint_read(&r, dir, step, cfg, "-e test", kP, rank, N, true, true);
        resume_restore_host(r, fresh, &dl, &loss, &norm);  // resume_read's checks run before the GPU starts
    };
    out.own_step = resume_choose_step(dir);
    if (out.own_step >= 0) read(out.own_step);
    out.loss_count_before = loss.count;
    out.agreed = resume_agree(&r, dir, fresh, &dl, &loss, &norm, comm, read);
    out.loss_count = loss.count;
    out.rng = r.step >= 0 ? r.rs.rng_state : 0;
    if (r.step >= 0) {
        uint64_t last = r.rs.rng_state_last_update;
        resume_agree_rng(&out.rng, &last, comm);
    }
    out.loader = dataloader_get_state(&dl);
    dataloader_next_batch(&dl);
    out.first_batch.assign(dl.inputs, dl.inputs + kB * kT);
    out.skip = step_skip_decide(&loss, &norm, 9.0f, 1.0f, 3.0f, 0.0f, comm);  // a loss spike, -sl 3
    dataloader_free(&dl);
    return out;
}

std::vector<int> fresh_first_batch(const std::string& shard, int rank) {
    DataLoader dl;
    loader_init(&dl, shard, rank);
    dataloader_next_batch(&dl);
    std::vector<int> b(dl.inputs, dl.inputs + kB * kT);
    dataloader_free(&dl);
    return b;
}

}  // namespace

// Node-local -o: rank 0's node has no checkpoint, rank 1's an old one. Rank 1 restored its loader
// position and full outlier windows before the processes were up; after the agreement it must be a
// fresh start like rank 0's, and with -sl on a loss spike both must decide alike. (Before, rank 1 kept
// its windows: its z-score was finite and far above 3 while rank 0's was NaN, so rank 1 alone skipped.)
TEST(ResumeAgreement, ARankWithAStaleCheckpointStartsFreshWithRank0) {
    TempDir data("test_agree_data"), node0("test_agree_node0"), node1("test_agree_node1");
    const std::string shard = write_train_shard(data.path);
    write_rank_checkpoint(node1.path, shard, 10, 1, 5);
    ThreadGroup group(kP);
    RankOutcome out[kP];
    const std::string dirs[kP] = {node0.path, node1.path};
    group.run([&](int r) { out[r] = resume_rank(dirs[r], shard, r, group.comm(r)); });
    EXPECT_EQ(out[0].own_step, -1);
    EXPECT_EQ(out[1].own_step, 10);
    EXPECT_EQ(out[1].loss_count_before, OUTLIER_WINDOW);  // what rank 1 had restored
    for (int r = 0; r < kP; r++) {
        SCOPED_TRACE("rank " + std::to_string(r));
        EXPECT_EQ(out[r].agreed, -1);
        EXPECT_EQ(out[r].loss_count, 0);
        EXPECT_EQ(out[r].loader.shard_idx, 0u);
        EXPECT_EQ(out[r].loader.sample_idx, 0u);
        EXPECT_EQ(out[r].first_batch, fresh_first_batch(shard, r));
        EXPECT_FALSE(out[r].skip.skip);
        EXPECT_TRUE(std::isnan(out[r].skip.loss_z));
    }
}

// Rank 1 sees a newer checkpoint (30, with windows) than rank 0 (20, written without windows as llm.c
// writes them): rank 1 re-reads 20, and nothing of 30 survives: loader at 20's position, empty windows.
TEST(ResumeAgreement, ARankWithANewerCheckpointTakesRank0sStepAndNothingOfItsOwn) {
    TempDir data("test_agree_data"), node0("test_agree_node0"), node1("test_agree_node1");
    const std::string shard = write_train_shard(data.path);
    for (int r = 0; r < kP; r++) write_rank_checkpoint(node0.path, shard, 20, r, 3, /*without_windows=*/true);
    for (int r = 0; r < kP; r++) write_rank_checkpoint(node1.path, shard, 20, r, 3, true);
    write_rank_checkpoint(node1.path, shard, 30, 1, 9);
    ThreadGroup group(kP);
    RankOutcome out[kP];
    const std::string dirs[kP] = {node0.path, node1.path};
    group.run([&](int r) { out[r] = resume_rank(dirs[r], shard, r, group.comm(r)); });
    EXPECT_EQ(out[1].own_step, 30);
    for (int r = 0; r < kP; r++) {
        SCOPED_TRACE("rank " + std::to_string(r));
        EXPECT_EQ(out[r].agreed, 20);
        EXPECT_EQ(out[r].loss_count, 0);
        EXPECT_EQ(out[r].loader.sample_idx, 3u);
        EXPECT_EQ(out[r].skip.skip, out[0].skip.skip);
        // llm.c's files hold 13371337 + rank: every rank now rounds with rank 0's
        EXPECT_EQ(out[r].rng, 13371337u);
    }
}

// -sl / -sg: rank 0's decision (and z-scores) on every rank, whatever the others' windows say; without
// skipping nothing is exchanged and nothing skipped.
TEST(StepSkip, Rank0DecidesForEveryRank) {
    for (const bool rank0_full : {false, true}) {
        SCOPED_TRACE(rank0_full ? "rank 0's windows full" : "rank 0's windows empty");
        ThreadGroup group(3);
        StepSkip got[3];
        bool all_off[3];
        group.run([&](int r) {
            OutlierDetector loss = (r == 0) == rank0_full ? full_window(3.0) : OutlierDetector{};
            OutlierDetector norm = full_window(1.0);
            if ((r == 0) != rank0_full) outlier_detector_init(&loss);
            OutlierDetector loss_copy = loss, norm_copy = norm;
            got[r] = step_skip_decide(&loss, &norm, 9.0f, 1.0f, 3.0f, 0.0f, group.comm(r));
            RankComm no_collectives = group.comm(r);
            no_collectives.broadcast = [](void*, size_t) { ADD_FAILURE() << "broadcast without -sl / -sg"; };
            all_off[r] = !step_skip_decide(&loss_copy, &norm_copy, 9.0f, 1.0f, 0.0f, 0.0f, no_collectives).skip;
        });
        for (int r = 0; r < 3; r++) {
            EXPECT_EQ(got[r].skip, rank0_full) << r;
            EXPECT_EQ(std::isnan(got[r].loss_z), !rank0_full) << r;
            EXPECT_TRUE(all_off[r]) << r;
        }
    }
}

// Rank 1's node lacks rank 0's step 20.
void resume_with_a_missing_step() {
    TempDir data("test_agree_data"), node0("test_agree_node0"), node1("test_agree_node1");
    const std::string shard = write_train_shard(data.path);
    for (int r = 0; r < kP; r++) write_rank_checkpoint(node0.path, shard, 20, r, 3);
    ThreadGroup group(kP);
    const std::string dirs[kP] = {node0.path, node1.path};
    group.run([&](int r) { resume_rank(dirs[r], shard, r, group.comm(r)); });
    exit(0);
}

// Rank 1's model has 2 layers, rank 0's 1 (or both 1: returns).
void agree_models(bool differ) {
    ThreadGroup group(kP);
    group.run([&](int r) {
        GPT2Config c = tiny_config();
        if (r == 1 && differ) c.num_layers = 2;
        ranks_agree_model(c, "-e test", group.comm(r));
    });
}

TEST(ResumeAgreementDeathTest, AMissingFileOfRank0sStepStopsEveryRank) {
    EXPECT_EXIT(resume_with_a_missing_step(), ::testing::ExitedWithCode(1),
                "rank 1: rank 0 chose to resume from step 20, but this rank cannot see");
}

TEST(ResumeAgreementDeathTest, ModelsMustAgree) {
    EXPECT_EXIT({ agree_models(true); exit(0); }, ::testing::ExitedWithCode(1),
                "rank 1: model from -e test is L2 C8 NH1 V96 maxT16, rank 0's L1 C8(.|\n)*1 of 2 ranks have another "
                "model than rank 0");
    agree_models(false);  // returns
}
