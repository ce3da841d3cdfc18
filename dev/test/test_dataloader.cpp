// Tests for llmc/dataloader.h and llmc/rand.h: windows, process interleaving, shuffling, exact
// resume and clear errors on bad shards. Shards are written into a fresh temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "llmc/dataloader.h"
#include "llmc/rand.h"
#include "test_util.h"

namespace {

// Fresh directory, removed with its files at process exit. Death-test children exit through
// fatal() -> exit(), which runs atexit handlers: only the process that made the directories
// removes them (the children's copies of the TempDirs are never destroyed).
std::vector<TempDir*> g_temp_dirs;
pid_t g_owner_pid = 0;
void remove_temp_dirs() {
    if (getpid() != g_owner_pid) return;
    for (TempDir* dir : g_temp_dirs) delete dir;
    g_temp_dirs.clear();
}
std::string make_temp_dir() {
    if (g_temp_dirs.empty()) {
        g_owner_pid = getpid();
        atexit(remove_temp_dirs);
    }
    g_temp_dirs.push_back(new TempDir("test_dataloader"));
    return g_temp_dirs.back()->path;
}

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens, int magic = SHARD_MAGIC,
                 int version = SHARD_VERSION, long header_count = -1) {
    int32_t header[256] = {0};
    header[0] = magic;
    header[1] = version;
    header[2] = header_count >= 0 ? (int32_t)header_count : (int32_t)tokens.size();
    FILE* f = fopen(path.c_str(), "wb");
    fwrite(header, 4, 256, f);
    fwrite(tokens.data(), 2, tokens.size(), f);
    fclose(f);
}

// Shard s holds tokens s*10000 + i, so every token names its shard and position.
std::vector<uint16_t> shard_tokens(int s, size_t n) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(s * 10000 + i);
    return t;
}

// Three shards of different lengths: 100, 57, 130 tokens.
std::string make_dataset() {
    std::string dir = make_temp_dir();
    const size_t sizes[3] = {100, 57, 130};
    for (int s = 0; s < 3; s++) {
        char name[64];
        snprintf(name, sizeof(name), "/train_%06d.bin", s);
        write_shard(dir + name, shard_tokens(s, sizes[s]));
    }
    return dir;
}

std::vector<int> next_inputs(DataLoader* dl) {
    dataloader_next_batch(dl);
    return std::vector<int>(dl->inputs, dl->inputs + dl->B * dl->T);
}

}  // namespace

TEST(Rand, PermutationIsPermutationAndDeterministic) {
    for (size_t n : {1, 2, 7, 1000}) {
        std::vector<int32_t> a(n), b(n);
        uint64_t s1 = rng_seed(42), s2 = rng_seed(42);
        random_permutation(a.data(), n, &s1);
        random_permutation(b.data(), n, &s2);
        EXPECT_EQ(a, b);
        EXPECT_EQ(s1, s2);
        std::set<int32_t> seen(a.begin(), a.end());
        EXPECT_EQ(seen.size(), n);
        EXPECT_EQ(*seen.begin(), 0);
        EXPECT_EQ(*seen.rbegin(), (int32_t)n - 1);
    }
    std::vector<int32_t> a(50), b(50);
    uint64_t s1 = rng_seed(1), s2 = rng_seed(2);
    random_permutation(a.data(), 50, &s1);
    random_permutation(b.data(), 50, &s2);
    EXPECT_NE(a, b);
}

TEST(Rand, XorshiftStarKnownValuesAndRanges) {
    // xorshift* from state 1: first output computed by hand from the recurrence
    uint64_t s = 1;
    uint64_t x = 1;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    EXPECT_EQ(random_u32(&s), (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32));
    EXPECT_EQ(s, x);
    uint64_t st = rng_seed(7);
    double mean = 0.0;
    for (int i = 0; i < 10000; i++) {
        float f = random_f32(&st);
        ASSERT_GE(f, 0.0f);
        ASSERT_LT(f, 1.0f);
        mean += f;
        ASSERT_LT(random_below(&st, 3), 3u);
    }
    EXPECT_NEAR(mean / 10000, 0.5, 0.02);
    EXPECT_NE(rng_seed(0), 0u);
}

TEST(DataLoader, SequentialWindowsShardsAndEpochWrap) {
    std::string dir = make_dataset();
    DataLoader dl;
    dataloader_init(&dl, (dir + "/train_*.bin").c_str(), "-i", 2, 4, 0, 1, false, 0);
    // windows of 8 tokens: (100-1)/8 = 12, (57-1)/8 = 7, (130-1)/8 = 16
    EXPECT_EQ(dataloader_num_batches(&dl), 35u);
    const int shard_of[3] = {12, 7, 16};
    for (int epoch = 0; epoch < 2; epoch++) {
        for (int s = 0; s < 3; s++) {
            for (int w = 0; w < shard_of[s]; w++) {
                dataloader_next_batch(&dl);
                for (int i = 0; i < 8; i++) {
                    ASSERT_EQ(dl.inputs[i], s * 10000 + w * 8 + i) << "epoch " << epoch << " shard " << s;
                    ASSERT_EQ(dl.targets[i], s * 10000 + w * 8 + i + 1);
                }
            }
        }
    }
    EXPECT_EQ(dl.st.epoch, 1u);
    dataloader_reset(&dl);
    EXPECT_EQ(next_inputs(&dl)[0], 0);
    dataloader_free(&dl);
}

TEST(DataLoader, RanksTogetherCoverTheSingleRankBatch) {
    std::string dir = make_dataset();
    std::string pattern = dir + "/train_*.bin";
    for (bool shuffle : {false, true}) {
        for (int P : {2, 4}) {
            const size_t B = 1, T = 3;
            DataLoader single;
            dataloader_init(&single, pattern.c_str(), "-i", B * P, T, 0, 1, shuffle, 5);
            std::vector<DataLoader> ranks(P);
            for (int r = 0; r < P; r++) dataloader_init(&ranks[r], pattern.c_str(), "-i", B, T, r, P, shuffle, 5);
            EXPECT_EQ(dataloader_num_batches(&single), dataloader_num_batches(&ranks[0]));
            size_t steps = 2 * dataloader_num_batches(&single) + 3;  // crosses two epoch boundaries
            for (size_t k = 0; k < steps; k++) {
                dataloader_next_batch(&single);
                std::vector<int> in, tg;
                for (int r = 0; r < P; r++) {
                    dataloader_next_batch(&ranks[r]);
                    in.insert(in.end(), ranks[r].inputs, ranks[r].inputs + B * T);
                    tg.insert(tg.end(), ranks[r].targets, ranks[r].targets + B * T);
                }
                ASSERT_EQ(in, std::vector<int>(single.inputs, single.inputs + B * T * P)) << "P=" << P << " k=" << k;
                ASSERT_EQ(tg, std::vector<int>(single.targets, single.targets + B * T * P));
            }
            dataloader_free(&single);
            for (int r = 0; r < P; r++) dataloader_free(&ranks[r]);
        }
    }
}

TEST(DataLoader, ShuffleIsPermutationDeterministicAndChangesPerEpoch) {
    std::string dir = make_dataset();
    std::string pattern = dir + "/train_*.bin";
    auto epoch_starts = [&](uint64_t seed, int epochs) {
        DataLoader dl;
        dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, true, seed);
        std::vector<std::vector<int>> out(epochs);
        for (int e = 0; e < epochs; e++) {
            for (size_t k = 0; k < dataloader_num_batches(&dl); k++) out[e].push_back(next_inputs(&dl)[0]);
        }
        dataloader_free(&dl);
        return out;
    };
    std::vector<std::vector<int>> a = epoch_starts(1234, 3), b = epoch_starts(1234, 3), c = epoch_starts(99, 1);
    // every window of every shard exactly once per epoch
    std::set<int> all;
    const int shard_of[3] = {12, 7, 16};
    for (int s = 0; s < 3; s++) for (int w = 0; w < shard_of[s]; w++) all.insert(s * 10000 + w * 8);
    for (const auto& epoch : a) {
        std::set<int> seen(epoch.begin(), epoch.end());
        EXPECT_EQ(seen.size(), epoch.size());
        EXPECT_EQ(seen, all);
    }
    EXPECT_EQ(a, b);         // same seed, same order
    EXPECT_NE(a[0], c[0]);   // different seed
    EXPECT_NE(a[0], a[1]);   // a new order each epoch
    EXPECT_NE(a[1], a[2]);
    // windows inside a shard are shuffled, not only the shard order
    std::vector<int> sorted = a[0];
    std::sort(sorted.begin(), sorted.end());
    EXPECT_NE(a[0], sorted);
}

TEST(DataLoader, ResumeMidEpochEqualsUninterrupted) {
    std::string dir = make_dataset();
    std::string pattern = dir + "/train_*.bin";
    for (bool shuffle : {false, true}) {
        for (int P : {1, 2}) {
            for (size_t stop : {0, 5, 12, 19, 34, 35, 50}) {  // shard ends at 12, 19; epoch at 35
                DataLoader full;
                dataloader_init(&full, pattern.c_str(), "-i", 1, 4, P - 1, P, shuffle, 77);
                std::vector<std::vector<int>> expect;
                for (size_t k = 0; k < stop + 60; k++) expect.push_back(next_inputs(&full));

                DataLoader first;
                dataloader_init(&first, pattern.c_str(), "-i", 1, 4, P - 1, P, shuffle, 77);
                for (size_t k = 0; k < stop; k++) next_inputs(&first);
                DataLoaderState saved = dataloader_get_state(&first);
                dataloader_free(&first);

                DataLoader resumed;
                dataloader_init(&resumed, pattern.c_str(), "-i", 1, 4, P - 1, P, shuffle, 77);
                dataloader_set_state(&resumed, saved, "test");
                for (size_t k = stop; k < stop + 60; k++) {
                    ASSERT_EQ(next_inputs(&resumed), expect[k]) << "shuffle=" << shuffle << " P=" << P
                                                                << " stop=" << stop << " k=" << k;
                }
                if (!shuffle) {  // without shuffling the two position numbers suffice
                    DataLoader r2;
                    dataloader_init(&r2, pattern.c_str(), "-i", 1, 4, P - 1, P, false, 0);
                    dataloader_resume(&r2, saved.shard_idx, saved.sample_idx);
                    for (size_t k = stop; k < stop + 10; k++) ASSERT_EQ(next_inputs(&r2), expect[k]);
                    dataloader_free(&r2);
                }
                dataloader_free(&full);
                dataloader_free(&resumed);
            }
        }
    }
}

TEST(DataLoader, SetStateRejectsMismatchedState) {
    std::string dir = make_dataset();
    std::string pattern = dir + "/train_*.bin";
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, true, 3);
    DataLoaderState s = dataloader_get_state(&dl);
    s.shard_order = {0, 1};  // saved with 2 shards, now 3 match
    EXPECT_EXIT(dataloader_set_state(&dl, s, "ckpt/state.bin"), ::testing::ExitedWithCode(1),
                "ckpt/state.bin.*shard order.*3 shards");
    s = dataloader_get_state(&dl);
    s.sample_order.push_back(99);
    EXPECT_EXIT(dataloader_set_state(&dl, s, "ckpt/state.bin"), ::testing::ExitedWithCode(1), "window order");
    EXPECT_EXIT(dataloader_resume(&dl, 7, 0), ::testing::ExitedWithCode(1), "shard 7.*3 shards");
    EXPECT_EXIT(dataloader_resume(&dl, 0, 1000), ::testing::ExitedWithCode(1), "window 1000");
    dataloader_free(&dl);
}

TEST(DataLoaderErrors, NoMatchNamesPatternAndFlag) {
    std::string dir = make_temp_dir();
    DataLoader dl;
    std::string pattern = dir + "/nothing_*.bin";
    EXPECT_EXIT(dataloader_init(&dl, pattern.c_str(), "-j", 2, 4, 0, 1, false, 0),
                ::testing::ExitedWithCode(1), "error: -j '.*nothing_\\*\\.bin' matches no files");
}

TEST(DataLoaderErrors, BadShards) {
    std::string dir = make_temp_dir();
    DataLoader dl;
    auto expect_fail = [&](const std::string& name, const char* regex) {
        std::string p = dir + "/" + name;
        EXPECT_EXIT(dataloader_init(&dl, p.c_str(), "-i", 2, 4, 0, 1, false, 0), ::testing::ExitedWithCode(1), regex)
            << name;
    };
    write_shard(dir + "/magic.bin", shard_tokens(0, 100), 20240326);
    expect_fail("magic.bin", "magic.bin' has bad magic 20240326");
    write_shard(dir + "/version.bin", shard_tokens(0, 100), SHARD_MAGIC, 2);
    expect_fail("version.bin", "version.bin' has version 2");
    write_shard(dir + "/trunc.bin", shard_tokens(0, 100), SHARD_MAGIC, SHARD_VERSION, 120);
    expect_fail("trunc.bin", "trunc.bin' is 1224 bytes but its header says 120 tokens.*truncated");
    write_shard(dir + "/long.bin", shard_tokens(0, 100), SHARD_MAGIC, SHARD_VERSION, 90);
    expect_fail("long.bin", "long.bin' is 1224 bytes");
    write_file(dir + "/tiny.bin", "abc");
    expect_fail("tiny.bin", "tiny.bin' is too small to hold a header");
    write_shard(dir + "/small.bin", shard_tokens(0, 8));
    expect_fail("small.bin", "small.bin' has 8 tokens, fewer than one window.*1\\*2\\*4\\+1 = 9");
    // too small only once 4 processes share a window
    write_shard(dir + "/val.bin", shard_tokens(0, 32));
    std::string p = dir + "/val.bin";
    EXPECT_EXIT(dataloader_init(&dl, p.c_str(), "-j", 2, 4, 1, 4, false, 0), ::testing::ExitedWithCode(1),
                "val.bin' has 32 tokens, fewer than one window.*4\\*2\\*4\\+1 = 33");
}

TEST(DataLoaderErrors, TokenOutOfVocabularyNamesShardAndPosition) {
    std::string dir = make_temp_dir();
    std::vector<uint16_t> t = shard_tokens(0, 40);
    t[21] = 50257;
    write_shard(dir + "/bad.bin", t);
    DataLoader dl;
    dataloader_init(&dl, (dir + "/bad.bin").c_str(), "-i", 1, 8, 0, 1, false, 0);
    dataloader_next_batch(&dl);  // tokens 0..8 fine
    dataloader_next_batch(&dl);  // tokens 8..16 fine
    EXPECT_EXIT(dataloader_next_batch(&dl), ::testing::ExitedWithCode(1),
                "bad.bin' has token id 50257 at position 21");
    dataloader_free(&dl);
}

TEST(DataLoader, WindowOrderInsideAShardChangesPerEpoch) {
    std::string dir = make_temp_dir();
    write_shard(dir + "/one.bin", shard_tokens(0, 400));  // one shard: only the window order can change
    DataLoader dl;
    dataloader_init(&dl, (dir + "/one.bin").c_str(), "-i", 1, 8, 0, 1, true, 5);
    size_t n = dataloader_num_batches(&dl);
    std::vector<int> e0, e1;
    for (size_t k = 0; k < n; k++) e0.push_back(next_inputs(&dl)[0]);
    for (size_t k = 0; k < n; k++) e1.push_back(next_inputs(&dl)[0]);
    EXPECT_NE(e0, e1);
    EXPECT_EQ(std::set<int>(e0.begin(), e0.end()), std::set<int>(e1.begin(), e1.end()));
    dataloader_free(&dl);
}

TEST(DataLoader, SetStateFollowsTheSavedPermutations) {
    // The saved orders are the truth (not a recomputation), so a state written by a build that
    // shuffled differently still resumes exactly.
    std::string dir = make_dataset();
    std::string pattern = dir + "/train_*.bin";
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, true, 8);
    DataLoaderState s = dataloader_get_state(&dl);
    std::reverse(s.shard_order.begin(), s.shard_order.end());
    s.sample_idx = 1;
    DataLoader r;
    dataloader_init(&r, pattern.c_str(), "-i", 2, 4, 0, 1, true, 8);
    // the sample order belongs to the shard at position shard_idx of the SAVED shard order
    size_t windows[3] = {12, 7, 16};
    s.sample_order.resize(windows[s.shard_order[0]]);
    for (size_t i = 0; i < s.sample_order.size(); i++) s.sample_order[i] = (int32_t)(s.sample_order.size() - 1 - i);
    dataloader_set_state(&r, s, "test");
    int shard = s.shard_order[0];
    EXPECT_EQ(next_inputs(&r)[0], shard * 10000 + (int)(windows[shard] - 2) * 8);
    EXPECT_EQ(next_inputs(&r)[0], shard * 10000 + (int)(windows[shard] - 3) * 8);
    dataloader_free(&dl);
    dataloader_free(&r);
}

// Issue 21 point 1: the start-up scan finds a bad id anywhere in any shard (here in the last window
// of the second shard, which no batch of a short run would reach) before any batch is read.
TEST(DataLoaderErrors, CheckTokensFindsABadIdAnywhereBeforeTraining) {
    std::string dir = make_temp_dir();
    write_shard(dir + "/t_000000.bin", shard_tokens(0, 100));
    std::vector<uint16_t> t = shard_tokens(1, 300);
    t[297] = 60000;
    write_shard(dir + "/t_000001.bin", t);
    DataLoader dl;
    dataloader_init(&dl, (dir + "/t_*.bin").c_str(), "-i", 2, 4, 0, 1, false, 0);
    EXPECT_EXIT(dataloader_check_tokens(&dl, "-i", 50257), ::testing::ExitedWithCode(1),
                "-i: token shard '.*t_000001.bin' has token id 60000 at position 297.*must be < 50257");
    // a model with a smaller vocabulary: ids valid for GPT-2 are not valid for it
    write_shard(dir + "/t_000001.bin", shard_tokens(1, 300));
    EXPECT_EXIT(dataloader_check_tokens(&dl, "-j", 10050), ::testing::ExitedWithCode(1),
                "-j: token shard '.*t_000001.bin' has token id 10050 at position 50");
    dataloader_check_tokens(&dl, "-i", 50257);  // all valid: returns
    dataloader_free(&dl);
}

// Issue 21 point 6: num_processes*B*T overflowing size_t used to divide by zero.
TEST(DataLoaderErrors, HugeBatchGeometryIsRefusedNotDividedByZero) {
    std::string dir = make_dataset();
    DataLoader dl;
    const std::string p = dir + "/train_*.bin";
    EXPECT_EXIT(dataloader_init(&dl, p.c_str(), "-i", (size_t)1 << 32, (size_t)1 << 32, 0, 1, false, 0),
                ::testing::ExitedWithCode(1), "num_processes\\*B\\*T = 1\\*4294967296\\*4294967296 is too large");
}

// Issue 21 point 8: with -a 1 each step restarts the data, as llm.c: micro-step k of every step reads
// window k (not window 0 for every micro-step, and not windows accum.. of later steps).
TEST(DataLoader, OverfitSingleBatchReadsWindowsZeroToAccumEveryStep) {
    std::string dir = make_dataset();
    DataLoader dl;
    dataloader_init(&dl, (dir + "/train_*.bin").c_str(), "-i", 2, 4, 0, 1, false, 0);
    const int accum = 3;
    std::vector<std::vector<int>> first;
    for (int step = 0; step < 4; step++) {
        dataloader_begin_step(&dl, true);
        for (int micro = 0; micro < accum; micro++) {
            std::vector<int> in = next_inputs(&dl);
            ASSERT_EQ(in[0], micro * 8) << "step " << step << " micro " << micro;  // window micro of shard 0
            if (step == 0) first.push_back(in);
            else ASSERT_EQ(in, first[micro]);
        }
    }
    // without -a 1 the data continues: the second step starts at window accum
    dataloader_reset(&dl);
    for (int step = 0; step < 2; step++) {
        dataloader_begin_step(&dl, false);
        for (int micro = 0; micro < accum; micro++) ASSERT_EQ(next_inputs(&dl)[0], (step * accum + micro) * 8);
    }
    dataloader_free(&dl);
}
