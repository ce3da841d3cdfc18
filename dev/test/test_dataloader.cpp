// Tests for llmc/dataloader.h and llmc/rand.h: windows, process interleaving, MT19937 against
// published values and std::mt19937, shuffling against an independent re-implementation of llm.c's
// data loader (llmc/dataloader.h at f1e2ace), exact resume and clear errors on bad shards. Shards are
// written into a fresh temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <random>
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

// Three shards of different lengths: 100, 57, 130 tokens, in a new temp dir; returns their pattern.
std::string make_dataset() {
    std::string dir = make_temp_dir();
    const size_t sizes[3] = {100, 57, 130};
    for (int s = 0; s < 3; s++) {
        char name[64];
        snprintf(name, sizeof(name), "/train_%06d.bin", s);
        write_shard(dir + name, shard_tokens(s, sizes[s]));
    }
    return dir + "/train_*.bin";
}

std::vector<int> next_inputs(DataLoader* dl) {
    dataloader_next_batch(dl);
    return std::vector<int>(dl->inputs, dl->inputs + dl->B * dl->T);
}

}  // namespace

// The reference: std::mt19937 (the C++ standard's, an independent implementation whose seeding is
// the same init_genrand) and llm.c's published random_permutation, written here from its description.
void reference_permute(std::vector<int>* v, std::mt19937* g) {
    for (int i = (int)v->size() - 1; i >= 1; i--) std::swap((*v)[i], (*v)[(*g)() % (uint32_t)(i + 1)]);
}

TEST(Rand, Mt19937PublishedValues) {
    Mt19937State s;
    mt19937_seed(&s, 5489);  // the reference implementation's default seed
    EXPECT_EQ(mt19937_u32(&s), 3499211612u);
    for (int i = 2; i < 10000; i++) mt19937_u32(&s);
    EXPECT_EQ(mt19937_u32(&s), 4123659995u);  // the C++ standard's check value: 10000th output
    // torch.manual_seed(137); torch.randint(0, 0xFFFFFFFF, [1]) five times (llm.c's rand.h comment)
    mt19937_seed(&s, 137);
    for (uint32_t want : {4053805790u, 2173880614u, 380293709u, 1237255315u, 2986595568u}) {
        EXPECT_EQ(mt19937_u32(&s), want);
    }
    // never seeded (llm.c's randint32 seeds such a state with 5489 first)
    Mt19937State z = {};
    EXPECT_FALSE(mt19937_valid(z));
    EXPECT_EQ(mt19937_u32(&z), 3499211612u);
    EXPECT_TRUE(mt19937_valid(z));
}

TEST(Rand, Mt19937MatchesStdMt19937AndStaysValid) {
    for (uint32_t seed : {0u, 1u, 42u, 43u, 0xFFFFFFFFu}) {
        Mt19937State s;
        mt19937_seed(&s, seed);
        EXPECT_EQ(s.seed_, seed);
        EXPECT_TRUE(mt19937_valid(s));
        std::mt19937 ref(seed);
        for (int i = 0; i < 3000; i++) {  // several twists
            ASSERT_EQ(mt19937_u32(&s), ref()) << "seed " << seed << " draw " << i;
            ASSERT_TRUE(mt19937_valid(s));
        }
    }
    Mt19937State s;
    mt19937_seed(&s, 7);
    Mt19937State bad = s;
    bad.matrix_a_[1] ^= 1;
    EXPECT_FALSE(mt19937_valid(bad));
    bad = s;
    bad.next_ = 700;  // would index past state_
    EXPECT_FALSE(mt19937_valid(bad));
    mt19937_u32(&s);
    bad = s;
    bad.left_ = 0;
    EXPECT_FALSE(mt19937_valid(bad));
}

TEST(Rand, Mt19937PermuteIsLlmcsInPlaceFisherYates) {
    for (uint32_t seed : {42u, 43u, 1000u}) {
        for (int n : {0, 1, 2, 3, 7, 100, 1000}) {
            Mt19937State s;
            mt19937_seed(&s, seed);
            std::mt19937 ref(seed);
            // twice on the same array: the second call permutes the first result (llm.c's shard order)
            std::vector<int32_t> got(n);
            std::vector<int> want(n);
            for (int i = 0; i < n; i++) got[i] = want[i] = i;
            for (int round = 0; round < 2; round++) {
                mt19937_permute(got.data(), n, &s);
                reference_permute(&want, &ref);
                ASSERT_EQ(std::vector<int>(got.begin(), got.end()), want) << "seed " << seed << " n " << n;
            }
            EXPECT_EQ(mt19937_u32(&s), ref()) << "n - 1 draws per call";
            std::set<int32_t> seen(got.begin(), got.end());
            EXPECT_EQ(seen.size(), (size_t)n);
        }
    }
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
    const std::string pattern = make_dataset();
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, false);
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

// Without shuffling the P ranks' windows are one window of the single-process run (with shuffling
// each rank has its own generator, as in llm.c: see MatchesLlmcShuffleAtAnyProcessCountAndRank).
TEST(DataLoader, RanksTogetherCoverTheSingleRankBatch) {
    const std::string pattern = make_dataset();
    for (int P : {2, 4}) {
        const size_t B = 1, T = 3;
        DataLoader single;
        dataloader_init(&single, pattern.c_str(), "-i", B * P, T, 0, 1, false);
        std::vector<DataLoader> ranks(P);
        for (int r = 0; r < P; r++) dataloader_init(&ranks[r], pattern.c_str(), "-i", B, T, r, P, false);
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

namespace {

// llm.c's DataLoader (llmc/dataloader.h at f1e2ace) reduced to its order of (shard, window) reads and
// written here from its published algorithm, with std::mt19937 as the generator: manual_seed(42 + rank);
// shard order starts as the identity; reset = position 0, permute the shard order in place, then the
// current shard's window order = identity permuted; advance = reset after the last shard, else next
// shard and a fresh window order; next_batch advances first when the shard is used up. Without
// shuffling (llm.c's val loader and -a 1) both orders stay the identity.
struct LlmcReference {
    std::vector<size_t> windows;  // per shard, in file order
    bool shuffle;
    std::mt19937 rng;
    std::vector<int> shard_indices, intra;
    size_t shard = 0, sample = 0;
    LlmcReference(std::vector<size_t> w, int rank, bool shuffle_ = true)
        : windows(std::move(w)), shuffle(shuffle_), rng(42u + (uint32_t)rank) {
        for (size_t i = 0; i < windows.size(); i++) shard_indices.push_back((int)i);
        reset();
    }
    void load_current() {
        intra.assign(windows[shard_indices[shard]], 0);
        for (size_t i = 0; i < intra.size(); i++) intra[i] = (int)i;
        if (shuffle) reference_permute(&intra, &rng);
    }
    void reset() {
        shard = sample = 0;
        if (shuffle) reference_permute(&shard_indices, &rng);
        load_current();
    }
    std::pair<int, int> next() {  // (shard file index, window)
        if (sample >= intra.size()) {
            if (shard == windows.size() - 1) {
                reset();
            } else {
                shard++;
                sample = 0;
                load_current();
            }
        }
        return {shard_indices[shard], intra[sample++]};
    }
};

}  // namespace

// The same shards give the same batches in the same order as llm.c at any process
// count and rank, over several epochs (the cumulative shard permutation), with shards of one window.
TEST(DataLoader, MatchesLlmcShuffleAtAnyProcessCountAndRank) {
    std::string dir = make_temp_dir();
    const size_t sizes[5] = {100, 57, 130, 10, 40};
    for (int s = 0; s < 5; s++) write_shard(dir + "/d_" + std::to_string(s) + ".bin", shard_tokens(s, sizes[s]));
    const size_t B = 1, T = 3;
    for (const char* pattern : {"/d_*.bin", "/d_2.bin"}) {  // five shards; one shard (only windows move)
        for (int P : {1, 2, 3}) {
            for (int r = 0; r < P; r++) {
                DataLoader dl;
                dataloader_init(&dl, (dir + pattern).c_str(), "-i", B, T, r, P, true);
                auto shard_number = [&](size_t file) {  // "d_<s>.bin"
                    const std::string& path = dl.shard_paths[file];
                    return path[path.size() - 5] - '0';
                };
                std::vector<size_t> windows;
                for (size_t f = 0; f < dl.shard_paths.size(); f++) windows.push_back((sizes[shard_number(f)] - 1) / (P * B * T));
                LlmcReference ref(windows, r);
                const size_t total = dataloader_num_batches(&dl);
                for (size_t k = 0; k < 4 * total + 2; k++) {
                    const std::pair<int, int> want = ref.next();
                    const int first_token = shard_number(want.first) * 10000 + want.second * (int)(P * B * T) + r * (int)(B * T);
                    ASSERT_EQ(next_inputs(&dl)[0], first_token) << pattern << " P=" << P << " r=" << r << " k=" << k;
                }
                EXPECT_EQ(dl.st.epoch, 4u);
                dataloader_free(&dl);
            }
        }
    }
}

// An optimizer step of more micro-batches than the data has windows (the trainer used to refuse it)
// goes on into the next epoch, reshuffled, in llm.c's order; with -a 1 (llm.c resets the loader before
// every step, unshuffled) every step reads the epoch's windows from the start and wraps the same way.
TEST(DataLoader, StepLongerThanAnEpochWrapsAsLlmc) {
    std::string dir = make_temp_dir();
    const size_t sizes[3] = {100, 57, 130};
    for (int s = 0; s < 3; s++) write_shard(dir + "/s_" + std::to_string(s) + ".bin", shard_tokens(s, sizes[s]));
    const size_t B = 1, T = 3;
    for (int P : {1, 2}) {
        std::vector<size_t> windows;
        for (size_t n : sizes) windows.push_back((n - 1) / (P * B * T));
        for (bool overfit : {false, true}) {
            for (int r = 0; r < P; r++) {
                const size_t total = windows[0] + windows[1] + windows[2];
                for (size_t accum : {total + 5, 2 * total + 3}) {
                    LlmcReference ref(windows, r, !overfit);
                    DataLoader dl;
                    dataloader_init(&dl, (dir + "/s_*.bin").c_str(), "-i", B, T, r, P, !overfit);
                    ASSERT_EQ(dataloader_num_batches(&dl), total);
                    for (int step = 0; step < 3; step++) {
                        dataloader_begin_step(&dl, overfit);
                        if (overfit) ref.reset();
                        for (size_t micro = 0; micro < accum; micro++) {
                            const std::pair<int, int> want = ref.next();
                            const int first_token = want.first * 10000 + want.second * (int)(P * B * T) + r * (int)(B * T);
                            ASSERT_EQ(next_inputs(&dl)[0], first_token) << "P=" << P << " r=" << r << " overfit=" << overfit
                                                                        << " accum=" << accum << " step=" << step
                                                                        << " micro=" << micro;
                        }
                    }
                    dataloader_free(&dl);
                }
            }
        }
    }
}

TEST(DataLoader, ShuffleCoversEveryWindowOncePerEpochAndChangesPerEpoch) {
    const std::string pattern = make_dataset();
    // first token of every batch, minus this rank's offset inside the window
    auto epoch_starts = [&](int rank, int P, int epochs) {
        DataLoader dl;
        dataloader_init(&dl, pattern.c_str(), "-i", 1, 4, rank, P, true);
        std::vector<std::vector<int>> out(epochs);
        for (int e = 0; e < epochs; e++) {
            for (size_t k = 0; k < dataloader_num_batches(&dl); k++) out[e].push_back(next_inputs(&dl)[0] - 4 * rank);
        }
        dataloader_free(&dl);
        return out;
    };
    std::vector<std::vector<int>> a = epoch_starts(0, 2, 3), b = epoch_starts(0, 2, 3), c = epoch_starts(1, 2, 1);
    std::set<int> all;  // windows of 2*1*4 tokens: (100-1)/8 = 12, (57-1)/8 = 7, (130-1)/8 = 16
    const int shard_of[3] = {12, 7, 16};
    for (int s = 0; s < 3; s++) for (int w = 0; w < shard_of[s]; w++) all.insert(s * 10000 + w * 8);
    for (const auto& epoch : a) {
        std::set<int> seen(epoch.begin(), epoch.end());
        EXPECT_EQ(seen.size(), epoch.size());
        EXPECT_EQ(seen, all);
    }
    EXPECT_EQ(std::set<int>(c[0].begin(), c[0].end()), all);
    EXPECT_EQ(a, b);         // deterministic
    EXPECT_NE(a[0], c[0]);   // rank 1 has its own generator (seed 43), as in llm.c
    EXPECT_NE(a[0], a[1]);   // a new order each epoch
    EXPECT_NE(a[1], a[2]);
    std::vector<int> sorted = a[0];  // windows inside a shard are shuffled, not only the shard order
    std::sort(sorted.begin(), sorted.end());
    EXPECT_NE(a[0], sorted);
}

TEST(DataLoader, ResumeMidEpochEqualsUninterrupted) {
    const std::string pattern = make_dataset();
    for (bool shuffle : {false, true}) {
        for (int P : {1, 2}) {
            for (size_t stop : {0, 5, 12, 19, 34, 35, 50}) {  // shard ends at 12, 19; epoch at 35
                DataLoader full;
                dataloader_init(&full, pattern.c_str(), "-i", 1, 4, P - 1, P, shuffle);
                std::vector<std::vector<int>> expect;
                for (size_t k = 0; k < stop + 60; k++) expect.push_back(next_inputs(&full));

                DataLoader first;
                dataloader_init(&first, pattern.c_str(), "-i", 1, 4, P - 1, P, shuffle);
                for (size_t k = 0; k < stop; k++) next_inputs(&first);
                DataLoaderState saved = dataloader_get_state(&first);
                dataloader_free(&first);
                if (!shuffle) {  // without shuffling the two positions suffice (llm.c saves no more)
                    saved.shard_order.clear();
                    saved.sample_order.clear();
                }

                DataLoader resumed;
                dataloader_init(&resumed, pattern.c_str(), "-i", 1, 4, P - 1, P, shuffle);
                dataloader_set_state(&resumed, saved, "test");
                for (size_t k = stop; k < stop + 60; k++) {
                    ASSERT_EQ(next_inputs(&resumed), expect[k]) << "shuffle=" << shuffle << " P=" << P
                                                                << " stop=" << stop << " k=" << k;
                }
                dataloader_free(&full);
                dataloader_free(&resumed);
            }
        }
    }
}

TEST(DataLoader, SetStateRejectsMismatchedState) {
    const std::string pattern = make_dataset();
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, true);
    // the loader's own state, changed by change(), must be refused with an error matching `message`
    auto expect_refused = [&](const std::function<void(DataLoaderState&)>& change, const char* message) {
        DataLoaderState s = dataloader_get_state(&dl);
        change(s);
        EXPECT_EXIT(dataloader_set_state(&dl, s, "ckpt/state.bin"), ::testing::ExitedWithCode(1), message);
    };
    expect_refused([](DataLoaderState& s) { s.shard_order = {0, 1}; },  // saved with 2 shards, now 3 match
                   "ckpt/state.bin': the saved data order covers 2 shards, but 3 shards match now");
    expect_refused([](DataLoaderState& s) { s.shard_order = {0, 0, 1}; }, "saved shard order is not a permutation");
    expect_refused([](DataLoaderState& s) { s.sample_order.push_back(99); },
                   "saved window order has [0-9]+ windows, but shard '.*train_00000[0-2].bin' has [0-9]+ windows of "
                   "num_processes\\*B\\*T = 1\\*2\\*4 tokens");
    expect_refused([](DataLoaderState& s) { s.sample_order[0] = s.sample_order[1]; },
                   "saved window order is not a permutation");
    expect_refused([](DataLoaderState& s) { s.rng.next_ = 5000; }, "shuffle generator state is not an MT19937 state");
    expect_refused([](DataLoaderState& s) { s.shard_idx = 7; }, "shard 7 but only 3 shards");
    expect_refused([](DataLoaderState& s) { s.sample_idx = 1000; }, "window 1000 of shard");
    dataloader_free(&dl);
    DataLoader plain;  // without shuffling only the positions are checked
    dataloader_init(&plain, pattern.c_str(), "-i", 2, 4, 0, 1, false);
    DataLoaderState s = DataLoaderState();
    s.shard_idx = 1;
    s.sample_idx = 8;  // shard 1 has 7 windows
    EXPECT_EXIT(dataloader_set_state(&plain, s, "ckpt/state.bin"), ::testing::ExitedWithCode(1),
                "window 8 of shard '.*train_000001.bin', which has only 7 windows");
    s.sample_idx = 7;  // at the end: the next batch moves on to shard 2
    dataloader_set_state(&plain, s, "ckpt/state.bin");
    EXPECT_EQ(next_inputs(&plain)[0], 20000);
    dataloader_free(&plain);
}

TEST(DataLoaderErrors, NoMatchNamesPatternAndFlag) {
    std::string dir = make_temp_dir();
    DataLoader dl;
    std::string pattern = dir + "/nothing_*.bin";
    EXPECT_EXIT(dataloader_init(&dl, pattern.c_str(), "-j", 2, 4, 0, 1, false),
                ::testing::ExitedWithCode(1), "error: -j '.*nothing_\\*\\.bin' matches no files");
}

TEST(DataLoaderErrors, BadShards) {
    std::string dir = make_temp_dir();
    DataLoader dl;
    auto expect_fail = [&](const std::string& name, const char* regex) {
        std::string p = dir + "/" + name;
        EXPECT_EXIT(dataloader_init(&dl, p.c_str(), "-i", 2, 4, 0, 1, false), ::testing::ExitedWithCode(1), regex)
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
    mkdir((dir + "/dir.bin").c_str(), 0755);
    expect_fail("dir.bin", "token shard '.*dir.bin' is a directory, not a regular file");
    write_shard(dir + "/small.bin", shard_tokens(0, 8));
    expect_fail("small.bin", "small.bin' has 8 tokens, fewer than one window.*1\\*2\\*4\\+1 = 9");
    // too small only once 4 processes share a window
    write_shard(dir + "/val.bin", shard_tokens(0, 32));
    std::string p = dir + "/val.bin";
    EXPECT_EXIT(dataloader_init(&dl, p.c_str(), "-j", 2, 4, 1, 4, false), ::testing::ExitedWithCode(1),
                "val.bin' has 32 tokens, fewer than one window.*4\\*2\\*4\\+1 = 33");
}

// A bad id anywhere in a shard stops the loader before it hands out the shard's first window (it used
// to hand out the windows before the bad one).
TEST(DataLoaderErrors, TokenOutOfVocabularyStopsBeforeTheShardsFirstWindow) {
    std::string dir = make_temp_dir();
    std::vector<uint16_t> t = shard_tokens(0, 40);
    t[21] = 50257;
    write_shard(dir + "/bad.bin", t);
    EXPECT_EXIT(
        {
            DataLoader dl;
            dataloader_init(&dl, (dir + "/bad.bin").c_str(), "-i", 1, 8, 0, 1, false);
            dataloader_next_batch(&dl);  // tokens 0..8 are fine, but the shard is not
            fprintf(stderr, "a window of the bad shard was handed out\n");
            exit(0);
        },
        ::testing::ExitedWithCode(1), "-i: token shard '.*bad.bin' has token id 50257 at position 21");
}

// One vocabulary bound: the model's. With a model of V > 50257, ids in [50257, V) are valid in the
// shard check and in every batch; ids >= V are refused, by the shard check before any batch.
TEST(DataLoaderErrors, BatchesUseTheModelsVocabulary) {
    std::string dir = make_temp_dir();
    std::vector<uint16_t> t = shard_tokens(0, 40);
    t[3] = 50300;
    write_shard(dir + "/big_vocab.bin", t);
    DataLoader dl;
    dataloader_init(&dl, (dir + "/big_vocab.bin").c_str(), "-i", 1, 8, 0, 1, false);
    dataloader_set_vocab(&dl, "-i", 50304);
    dataloader_check_upcoming(&dl);
    EXPECT_EQ(next_inputs(&dl)[3], 50300);
    dataloader_set_vocab(&dl, "-i", 1 << 20);  // beyond uint16: every id is one
    dataloader_reset(&dl);
    EXPECT_EQ(next_inputs(&dl)[3], 50300);
    EXPECT_EXIT(
        {
            dataloader_set_vocab(&dl, "-i", 50300);
            dataloader_reset(&dl);
            dataloader_next_batch(&dl);
        },
        ::testing::ExitedWithCode(1), "has token id 50300 at position 3.*must be < 50300");
    dataloader_free(&dl);
}

TEST(DataLoader, WindowOrderInsideAShardChangesPerEpoch) {
    std::string dir = make_temp_dir();
    write_shard(dir + "/one.bin", shard_tokens(0, 400));  // one shard: only the window order can change
    DataLoader dl;
    dataloader_init(&dl, (dir + "/one.bin").c_str(), "-i", 1, 8, 0, 1, true);
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
    const std::string pattern = make_dataset();
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, true);
    DataLoaderState s = dataloader_get_state(&dl);
    std::reverse(s.shard_order.begin(), s.shard_order.end());
    s.sample_idx = 1;
    DataLoader r;
    dataloader_init(&r, pattern.c_str(), "-i", 2, 4, 0, 1, true);
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

namespace {

// Shards t_000000..t_000002 of 100, 300 and 130 tokens (windows of 2*4: 12, 37 and 16); the shards in
// `bad` have id 60000 at position 290 (inside window 36, the last but not the first).
std::string make_dataset_with_bad(std::set<int> bad) {
    std::string dir = make_temp_dir();
    const size_t sizes[3] = {100, 300, 130};
    for (int s = 0; s < 3; s++) {
        std::vector<uint16_t> t = shard_tokens(s, sizes[s]);
        if (bad.count(s)) t[290 % sizes[s]] = 60000;
        write_shard(dir + "/t_00000" + std::to_string(s) + ".bin", t);
    }
    return dir + "/t_*.bin";
}

}  // namespace

// A bad id in a later shard: the batches before that shard come (shuffled or not), then the loader
// stops when it reaches the shard, before any of its windows is handed out.
TEST(DataLoaderErrors, BadIdInALaterShardStopsWhenTheLoaderReachesIt) {
    const std::string pattern = make_dataset_with_bad({1});
    for (bool shuffle : {false, true}) {
        // batches before shard 1 is first read, from llm.c's order (one rank)
        LlmcReference ref({12, 37, 16}, 0, shuffle);
        int before = 0;
        while (ref.next().first != 1) before++;
        ASSERT_GT(before, 0) << "the bad shard must not be the first one read here";
        EXPECT_EXIT(
            {
                DataLoader dl;
                dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, shuffle);
                for (int k = 0; k < before; k++) {
                    dataloader_next_batch(&dl);
                    if (dl.inputs[0] / 10000 == 1) exit(2);
                }
                fprintf(stderr, "%d good batches\n", before);
                dataloader_next_batch(&dl);
                fprintf(stderr, "a window of the bad shard was handed out\n");
                exit(0);
            },
            ::testing::ExitedWithCode(1),
            std::to_string(before) + " good batches\nerror: -i: token shard '.*t_000001.bin' has token id 60000 at "
            "position 290, outside the model's vocabulary \\(must be < 50257\\)")
            << "shuffle=" << shuffle;
    }
}

// Start-up reads one shard (the first the loader reads), not the data set: a bad id in a later shard
// is no start-up error. The shard after the current one is checked in the background, and a bad
// result is held back until the loader needs that shard.
TEST(DataLoaderErrors, StartUpChecksTheFirstShardOnlyAndLaterOnesInTheBackground) {
    const std::string pattern = make_dataset_with_bad({1});
    EXPECT_EXIT(
        {
            DataLoader dl;
            dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, false);
            dataloader_set_vocab(&dl, "-i", GPT2_VOCAB_SIZE);
            dataloader_check_upcoming(&dl);  // shard 0: good
            if (!dl.shard_checked[0] || dl.shard_checked[1]) exit(2);
            if (dl.scan_shard != 1) exit(3);  // shard 1 is being checked in the background
            dl.scan.wait();
            for (int k = 0; k < 12; k++) dataloader_next_batch(&dl);  // all of shard 0: the result waits
            fprintf(stderr, "shard 0 read\n");
            dataloader_next_batch(&dl);
            exit(0);
        },
        ::testing::ExitedWithCode(1), "shard 0 read\nerror: -i: token shard '.*t_000001.bin' has token id 60000");
    // a bad first shard is found by the start-up check, before any batch
    const std::string first_bad = make_dataset_with_bad({0});
    DataLoader dl;
    dataloader_init(&dl, first_bad.c_str(), "-i", 2, 4, 0, 1, false);
    EXPECT_EXIT(dataloader_check_upcoming(&dl), ::testing::ExitedWithCode(1),
                "-i: token shard '.*t_000000.bin' has token id 60000 at position 90");
    dataloader_free(&dl);
}

// The shard the next batch reads is the one checked at start-up, also after a resume that stopped at
// the end of a shard (the next batch moves on first); a model with a smaller vocabulary checks ids
// valid for GPT-2; a vocabulary above 65535 accepts every id without reading.
TEST(DataLoaderErrors, CheckUpcomingFollowsTheResumedPositionAndTheModelsVocabulary) {
    const std::string pattern = make_dataset_with_bad({2});
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-j", 2, 4, 0, 1, false);
    DataLoaderState s = dataloader_get_state(&dl);
    s.shard_idx = 1;
    s.sample_idx = 37;  // shard 1 used up: the next batch reads shard 2
    dataloader_set_state(&dl, s, "state.bin");
    EXPECT_EXIT(dataloader_check_upcoming(&dl), ::testing::ExitedWithCode(1),
                "-j: token shard '.*t_000002.bin' has token id 60000 at position 30");
    dataloader_free(&dl);

    // (all inside the death test: a fork copies no background thread)
    const std::string good = make_dataset_with_bad({});
    EXPECT_EXIT(
        {
            dataloader_init(&dl, good.c_str(), "-i", 2, 4, 0, 1, false);
            dataloader_set_vocab(&dl, "-i (model)", 10050);  // shard 1 holds ids 10000..10299
            dataloader_check_upcoming(&dl);                  // shard 0 (ids < 100) is fine
            for (int k = 0; k < 12; k++) dataloader_next_batch(&dl);
            fprintf(stderr, "shard 0 read\n");
            dataloader_next_batch(&dl);
            exit(0);
        },
        ::testing::ExitedWithCode(1),
        "shard 0 read\nerror: -i \\(model\\): token shard '.*t_000001.bin' has token id 10050 at position 50.*must be < 10050");

    const std::string bad = make_dataset_with_bad({0, 1, 2});
    dataloader_init(&dl, bad.c_str(), "-i", 2, 4, 0, 1, true);
    dataloader_set_vocab(&dl, "-i", 70000);
    dataloader_check_upcoming(&dl);
    for (size_t k = 0; k < 2 * dataloader_num_batches(&dl); k++) dataloader_next_batch(&dl);
    EXPECT_EQ(dl.num_scans, 0u);
    dataloader_free(&dl);
}

// A shard that cannot be read any more when the loader reaches it (deleted after start-up) is named.
TEST(DataLoaderErrors, ShardGoneAfterStartUpIsNamed) {
    const std::string pattern = make_dataset_with_bad({});
    const std::string gone = pattern.substr(0, pattern.size() - 5) + "000001.bin";  // ".../t_" + ...
    EXPECT_EXIT(
        {
            DataLoader dl;
            dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, false);
            remove(gone.c_str());
            for (int k = 0; k < 13; k++) dataloader_next_batch(&dl);
            exit(0);
        },
        ::testing::ExitedWithCode(1), "-i: read error on token shard '.*t_000001.bin': No such file or directory");
}

// Each shard is read in full once per loader: not again in later epochs, after a reset (the val
// loader's every evaluation) or after set_state.
TEST(DataLoader, EachShardIsCheckedOnce) {
    const std::string pattern = make_dataset_with_bad({});
    for (bool shuffle : {false, true}) {
        DataLoader dl;
        dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, shuffle);
        dataloader_check_upcoming(&dl);
        const DataLoaderState start = dataloader_get_state(&dl);
        for (size_t k = 0; k < 3 * dataloader_num_batches(&dl); k++) dataloader_next_batch(&dl);
        dataloader_reset(&dl);
        for (int k = 0; k < 20; k++) dataloader_next_batch(&dl);
        dataloader_set_state(&dl, start, "state.bin");
        for (int k = 0; k < 20; k++) dataloader_next_batch(&dl);
        EXPECT_EQ(dl.num_scans, 3u) << "shuffle=" << shuffle;
        EXPECT_EQ(dl.num_checked, 3u);
        dataloader_free(&dl);
    }
}

// The shard the loader predicts it reads next (checked ahead, in the background) is the one it then
// reads, across shard ends and epoch ends, where shuffling draws the next epoch's order.
TEST(DataLoader, PredictedNextShardIsTheOneRead) {
    std::string dir = make_temp_dir();
    const size_t sizes[5] = {100, 57, 130, 10, 40};
    for (int s = 0; s < 5; s++) write_shard(dir + "/d_" + std::to_string(s) + ".bin", shard_tokens(s, sizes[s]));
    for (bool shuffle : {false, true}) {
        DataLoader dl;
        dataloader_init(&dl, (dir + "/d_*.bin").c_str(), "-i", 1, 3, 0, 1, shuffle);
        for (size_t k = 0; k < 4 * dataloader_num_batches(&dl); k++) {
            const int predicted = dataloader_upcoming_shard_(&dl);
            dataloader_next_batch(&dl);
            ASSERT_EQ(dl.inputs[0] / 10000, predicted) << "shuffle=" << shuffle << " k=" << k;
        }
        dataloader_free(&dl);
    }
}

// A num_processes*B*T that overflows size_t used to divide by zero.
TEST(DataLoaderErrors, HugeBatchGeometryIsRefusedNotDividedByZero) {
    const std::string p = make_dataset();
    DataLoader dl;
    EXPECT_EXIT(dataloader_init(&dl, p.c_str(), "-i", (size_t)1 << 32, (size_t)1 << 32, 0, 1, false),
                ::testing::ExitedWithCode(1), "num_processes\\*B\\*T = 1\\*4294967296\\*4294967296 is too large");
}

// With -a 1 each step restarts the data, as llm.c: micro-step k of every step reads
// window k (not window 0 for every micro-step, and not windows accum.. of later steps).
TEST(DataLoader, OverfitSingleBatchReadsWindowsZeroToAccumEveryStep) {
    const std::string pattern = make_dataset();
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 4, 0, 1, false);
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
