// Tests for llmc/run_state.h: state file round trip (incl. data loader and outlier windows),
// temp-then-rename safety, rejection of foreign/corrupted/truncated files, files exchanged with llm.c
// (dev/test/llmc_state.py writes and reads them as llm.c's save_state/load_state do), and the
// checkpoint directory helpers (find latest complete step, pruning rules).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "llmc/run_state.h"
#include "test_util.h"

namespace {

// Optimizer buffers of a fake model: m, v, master (floats with recognisable values).
struct Opt {
    std::vector<float> m, v, master;
    explicit Opt(size_t n, float base = 0.0f) : m(n), v(n), master(n) {
        for (size_t i = 0; i < n; i++) {
            m[i] = base + 0.5f * i;
            v[i] = base + 1e-3f * i;
            master[i] = base - 2.0f * i;
        }
    }
    std::vector<HostBuffer> body(bool with_master = true) {
        std::vector<HostBuffer> b = {{m.data(), m.size() * 4}, {v.data(), v.size() * 4}};
        if (with_master) b.push_back({master.data(), master.size() * 4});
        return b;
    }
};

RunState sample_state(bool shuffle) {
    RunState rs;
    rs.num_processes = 4;
    rs.process_rank = 2;
    rs.use_master_weights = true;
    rs.shuffle = shuffle;
    rs.step = 1234;
    rs.rng_state = 0xDEADBEEF12345678ull;
    rs.rng_state_last_update = 0x0123456789ABCDEFull;
    rs.loader.epoch = 3;
    rs.loader.shard_idx = 5;
    rs.loader.sample_idx = 0x100000007ull;  // needs both words
    if (shuffle) {
        rs.loader.shard_order = {2, 0, 1, 5, 4, 3};
        rs.loader.sample_order = {3, 1, 0, 2};
        mt19937_seed(&rs.loader.rng, 987654321);
        for (int i = 0; i < 700; i++) mt19937_u32(&rs.loader.rng);
    }
    rs.has_outliers = true;
    outlier_detector_init(&rs.loss_outlier);
    outlier_detector_init(&rs.grad_norm_outlier);
    for (int i = 0; i < 150; i++) {
        outlier_detector_update(&rs.loss_outlier, 3.0 + 0.01 * i);
        outlier_detector_update(&rs.grad_norm_outlier, 1.0 / (i + 1));
    }
    return rs;
}

RunState single_process(RunState rs) {
    rs.num_processes = 1;
    rs.process_rank = 0;
    return rs;
}

// A run state file in a fresh temp dir: rs written with optimizer buffers a (n floats each, with or
// without master weights) to path = dir/name, and the bytes the file then holds.
struct StateFile {
    TempDir dir{"test_run_state"};
    std::string path;
    RunState rs;
    Opt a;
    std::vector<uint8_t> bytes;
    StateFile(RunState state, size_t n, const char* name = "state.bin", bool with_master = true)
        : path(dir.file(name)), rs(std::move(state)), a(n) {
        run_state_write(path, rs, a.body(with_master));
        bytes = read_bytes(path);
    }
};

RunState without_outliers(RunState rs) {
    rs.has_outliers = false;
    return rs;
}

}  // namespace

TEST(RunState, RoundTripAllFields) {
    TempDir dir("test_run_state");
    for (bool shuffle : {false, true}) {
        std::string path = dir.path + "/state_00001234_00002.bin";
        RunState rs = sample_state(shuffle);
        Opt a(1000);
        run_state_write(path, rs, a.body());
        EXPECT_TRUE(temp_files_of(path).empty());
        EXPECT_EQ(read_bytes(path).size(), 1024 + 3 * 4000 + (shuffle ? 8 + 24 + 8 + 16 + 2520 : 0) + 2 * (8 + 1024 + 16));

        RunState peek = run_state_peek(path);
        EXPECT_TRUE(peek.use_master_weights);
        EXPECT_EQ(peek.body_bytes, 12000u);

        Opt b(1000, 99.0f);
        RunState got = run_state_read(path, b.body(), 4, 2);
        EXPECT_EQ(b.m, a.m);
        EXPECT_EQ(b.v, a.v);
        EXPECT_EQ(b.master, a.master);
        EXPECT_EQ(got.step, 1234);
        EXPECT_EQ(got.rng_state, rs.rng_state);
        EXPECT_EQ(got.rng_state_last_update, rs.rng_state_last_update);
        EXPECT_EQ(got.shuffle, shuffle);
        EXPECT_EQ(got.loader.epoch, 3u);
        EXPECT_EQ(got.loader.shard_idx, 5u);
        EXPECT_EQ(got.loader.sample_idx, 0x100000007ull);
        EXPECT_EQ(got.loader.shard_order, rs.loader.shard_order);
        EXPECT_EQ(got.loader.sample_order, rs.loader.sample_order);
        EXPECT_EQ(memcmp(&got.loader.rng, &rs.loader.rng, sizeof(Mt19937State)), 0);
        ASSERT_TRUE(got.has_outliers);
        // restored detectors continue exactly like the originals
        EXPECT_EQ(outlier_detector_update(&got.loss_outlier, 4.5), outlier_detector_update(&rs.loss_outlier, 4.5));
        EXPECT_EQ(outlier_detector_update(&got.grad_norm_outlier, 0.1),
                  outlier_detector_update(&rs.grad_norm_outlier, 0.1));
    }
}

TEST(RunState, HeaderSlotsFollowFormatsMd) {
    StateFile f(without_outliers(sample_state(false)), 10, "s.bin", /*with_master=*/false);
    const int32_t* h = (const int32_t*)f.bytes.data();
    EXPECT_EQ(h[0], 20240527);
    EXPECT_EQ(h[1], 1);
    EXPECT_EQ(h[2], 4);
    EXPECT_EQ(h[3], 2);
    EXPECT_EQ(h[4], 1);
    EXPECT_EQ(h[5], 0);
    EXPECT_EQ(h[10], 1234);
    EXPECT_EQ((uint32_t)h[20], 0x12345678u);
    EXPECT_EQ((uint32_t)h[21], 0xDEADBEEFu);
    EXPECT_EQ((uint32_t)h[22], 0x89ABCDEFu);
    EXPECT_EQ((uint32_t)h[30], 5u);
    EXPECT_EQ((uint32_t)h[32], 7u);
    EXPECT_EQ((uint32_t)h[33], 1u);
    EXPECT_EQ(f.bytes.size(), 1024u + 80u);
    // m then v right after the header
    EXPECT_EQ(memcmp(f.bytes.data() + 1024, f.a.m.data(), 40), 0);
    EXPECT_EQ(memcmp(f.bytes.data() + 1064, f.a.v.data(), 40), 0);
}

TEST(RunState, InterruptedWriteLeavesTheOldFileIntact) {
    StateFile f(single_process(sample_state(true)), 64, "state_00000010_00000.bin");
    // a crash in the middle of the next write leaves a partial .tmp and never touches the final name
    write_file(f.path + ".tmp", std::vector<uint8_t>(f.bytes.begin(), f.bytes.begin() + 700));
    EXPECT_EQ(read_bytes(f.path), f.bytes);
    Opt b(64, 5.0f);
    run_state_read(f.path, b.body(), 1, 0);
    EXPECT_EQ(b.m, f.a.m);
    // the next successful write replaces the file; it writes its own temporary file (another name),
    // so it leaves the leftover alone (the resume removes leftovers: llmc/checkpoint.h)
    Opt c(64, 7.0f);
    run_state_write(f.path, f.rs, c.body());
    EXPECT_EQ(temp_files_of(f.path), std::vector<std::string>{f.path + ".tmp"});
    run_state_read(f.path, b.body(), 1, 0);
    EXPECT_EQ(b.m, c.m);
}

TEST(RunState, WriteThatDiesHalfWayLeavesThePreviousFile) {
    StateFile f(single_process(sample_state(true)), 4096);
    // Simulate a disk that fills up half way: in the (forked) death-test child, files may not grow
    // past 20 kB, so the write of the ~50 kB state fails part way through the body.
    auto write_with_full_disk = [&]() {
        struct rlimit rl = {20000, 20000};
        setrlimit(RLIMIT_FSIZE, &rl);
        signal(SIGXFSZ, SIG_IGN);  // get EFBIG from write() instead of being killed
        Opt c(4096, 3.0f);
        run_state_write(f.path, f.rs, c.body());
    };
    EXPECT_EXIT(write_with_full_disk(), ::testing::ExitedWithCode(1), "write error on '.*state.bin.tmp.[0-9a-f]+'");
    EXPECT_EQ(read_bytes(f.path), f.bytes);  // the final name still holds the complete old file
    EXPECT_EQ(temp_files_of(f.path).size(), 1u);  // the partial temp file is what got cut short
    Opt b(4096, 1.0f);
    run_state_read(f.path, b.body(), 1, 0);
    EXPECT_EQ(b.v, f.a.v);
}

TEST(RunStateErrors, ForeignCorruptedAndTruncatedFilesAreRejected) {
    StateFile f(sample_state(true), 256);
    Opt b(256);
    auto variant = [&](const char* name, std::vector<uint8_t> bytes) {
        std::string p = f.dir.path + "/" + name;
        write_file(p, bytes);
        return p;
    };
    // wrong process count / rank for this run
    EXPECT_EXIT(run_state_read(f.path, b.body(), 8, 2), ::testing::ExitedWithCode(1),
                "state.bin' belongs to process 2 of 4, but this is process 2 of 8");
    EXPECT_EXIT(run_state_read(f.path, b.body(), 4, 0), ::testing::ExitedWithCode(1), "process 2 of 4, but this is process 0 of 4");
    // different model size
    Opt small(100);
    EXPECT_EXIT(run_state_read(f.path, small.body(), 4, 2), ::testing::ExitedWithCode(1),
                "holds 3072 bytes of optimizer state but this run needs 1200");
    // bad magic / version
    std::vector<uint8_t> m = f.bytes;
    m[0] ^= 1;
    EXPECT_EXIT(run_state_read(variant("magic.bin", m), b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "run state file '.*magic.bin' has bad magic");
    m = f.bytes;
    m[4] = 2;
    EXPECT_EXIT(run_state_read(variant("version.bin", m), b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "version.bin' has version 2");
    // flipped byte in the body: checksum
    m = f.bytes;
    m[1024 + 3000] ^= 0x10;
    EXPECT_EXIT(run_state_read(variant("flip.bin", m), b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "flip.bin' is corrupted: checksum mismatch");
    // truncated at several places: header, body, tail
    for (size_t keep : {(size_t)100, (size_t)2000, f.bytes.size() - 5}) {
        m.assign(f.bytes.begin(), f.bytes.begin() + keep);
        EXPECT_EXIT(run_state_read(variant("trunc.bin", m), b.body(), 4, 2), ::testing::ExitedWithCode(1),
                    "trunc.bin' is (truncated|corrupted|too small to hold a header)")
            << keep;
    }
    // extra bytes at the end
    m = f.bytes;
    m.push_back(0);
    EXPECT_EXIT(run_state_read(variant("extra.bin", m), b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "extra.bin' has 1 unexpected bytes at the end");
    EXPECT_EXIT(run_state_read(f.dir.path + "/missing.bin", b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "cannot open '.*missing.bin'");
}

TEST(RunState, RestoresTheDataLoaderExactly) {
    TempDir dir("test_run_state");
    for (int s = 0; s < 3; s++) {
        std::vector<uint16_t> tok(100 + 20 * s);
        for (size_t i = 0; i < tok.size(); i++) tok[i] = (uint16_t)(s * 1000 + i);
        int32_t header[256] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)tok.size()};
        FILE* f = fopen((dir.path + "/shard_" + std::to_string(s) + ".bin").c_str(), "wb");
        fwrite(header, 4, 256, f);
        fwrite(tok.data(), 2, tok.size(), f);
        fclose(f);
    }
    std::string pattern = dir.path + "/shard_*.bin";
    DataLoader full, first, resumed;
    dataloader_init(&full, pattern.c_str(), "-i", 2, 3, 0, 1, true);
    dataloader_init(&first, pattern.c_str(), "-i", 2, 3, 0, 1, true);
    dataloader_init(&resumed, pattern.c_str(), "-i", 2, 3, 0, 1, true);
    std::vector<std::vector<int>> expect;
    for (int k = 0; k < 120; k++) {
        dataloader_next_batch(&full);
        expect.emplace_back(full.inputs, full.inputs + 6);
    }
    for (int k = 0; k < 41; k++) dataloader_next_batch(&first);
    RunState rs;
    rs.shuffle = true;
    rs.loader = dataloader_get_state(&first);
    std::string path = dir.path + "/state_00000041_00000.bin";
    float dummy[4] = {1, 2, 3, 4};
    run_state_write(path, rs, {{dummy, sizeof(dummy)}});
    RunState got = run_state_read(path, {{dummy, sizeof(dummy)}}, 1, 0);
    run_state_restore_loader(got, &resumed, path);
    for (int k = 41; k < 120; k++) {
        dataloader_next_batch(&resumed);
        ASSERT_EQ(std::vector<int>(resumed.inputs, resumed.inputs + 6), expect[k]) << k;
    }
    DataLoader unshuffled;
    dataloader_init(&unshuffled, pattern.c_str(), "-i", 2, 3, 0, 1, false);
    EXPECT_EXIT(run_state_restore_loader(got, &unshuffled, path), ::testing::ExitedWithCode(1),
                "written with data shuffling but this run has it off .*-sh 0 or -a 1 turn it off");
    dataloader_free(&full);
    dataloader_free(&first);
    dataloader_free(&resumed);
    dataloader_free(&unshuffled);
}

namespace {

// Runs dev/test/llmc_state.py (llm.c's writer and reader) with args; returns stdout and stderr.
std::string llmc_state_py(const std::string& args, int* rc) {
    const std::string cmd = "python3 '" + repo_root() + "/dev/test/llmc_state.py' " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    const int status = p != nullptr ? pclose(p) : -1;
    *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

std::map<std::string, std::string> key_values(const std::string& text) {
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const size_t eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

std::string join(const std::vector<int32_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// Shards shard_<s>.bin of sizes[s] tokens, token i of shard s = s*1000 + i. Returns the glob pattern.
std::string write_shards(const TempDir& dir, const std::vector<size_t>& sizes) {
    for (size_t s = 0; s < sizes.size(); s++) {
        std::vector<uint16_t> tok(sizes[s]);
        for (size_t i = 0; i < tok.size(); i++) tok[i] = (uint16_t)(s * 1000 + i);
        int32_t header[256] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)tok.size()};
        write_file(dir.path + "/shard_" + std::to_string(s) + ".bin", std::string((const char*)header, 1024) +
                   std::string((const char*)tok.data(), tok.size() * 2));
    }
    return dir.path + "/shard_*.bin";
}

std::string windows_arg(const DataLoader& dl) {
    std::string s;
    for (size_t w : dl.shard_num_windows) s += (s.empty() ? "" : ",") + std::to_string(w);
    return s;
}

std::vector<int> batch(DataLoader* dl) {
    dataloader_next_batch(dl);
    return std::vector<int>(dl->inputs, dl->inputs + dl->B * dl->T);
}

}  // namespace

// A state file as llm.c writes it (shuffled or not, any rank) reads, every field
// lands, and the restored loader continues with the batches of an uninterrupted run.
TEST(RunStateLlmc, LlmcsFileReadsAndTheLoaderContinues) {
    TempDir dir("test_run_state");
    const std::string pattern = write_shards(dir, {100, 160, 70});
    const std::string path = dir.file("state_00000041_00001.bin");
    struct Case { bool shuffle; int P, rank, batches; };
    for (Case c : {Case{true, 1, 0, 0}, Case{true, 1, 0, 23}, Case{true, 2, 1, 9}, Case{true, 3, 2, 40},
                   Case{false, 2, 1, 9}, Case{false, 1, 0, 31}}) {
        SCOPED_TRACE("shuffle " + std::to_string(c.shuffle) + " P " + std::to_string(c.P) + " rank " +
                     std::to_string(c.rank) + " batches " + std::to_string(c.batches));
        DataLoader full, resumed;
        dataloader_init(&full, pattern.c_str(), "-i", 2, 3, c.rank, c.P, c.shuffle);
        dataloader_init(&resumed, pattern.c_str(), "-i", 2, 3, c.rank, c.P, c.shuffle);
        std::vector<std::vector<int>> expect;
        DataLoaderState at_stop;
        for (int k = 0; k < c.batches + 60; k++) {
            if (k == c.batches) at_stop = dataloader_get_state(&full);
            expect.push_back(batch(&full));
        }
        int rc;
        const std::string out = llmc_state_py("write '" + path + "' --params 16 --procs " + std::to_string(c.P) +
                                              " --rank " + std::to_string(c.rank) + " --step 41 --shuffle " +
                                              std::to_string(c.shuffle) + " --windows " + windows_arg(full) +
                                              " --batches " + std::to_string(c.batches), &rc);
        ASSERT_EQ(rc, 0) << out;
        Opt got_opt(16, 7.0f);
        ::testing::internal::CaptureStderr();
        RunState got = run_state_read(path, got_opt.body(), c.P, c.rank);
        EXPECT_NE(::testing::internal::GetCapturedStderr().find("has no checksum"), std::string::npos);
        Opt want_opt(16);
        EXPECT_EQ(got_opt.m, want_opt.m);
        EXPECT_EQ(got_opt.v, want_opt.v);
        EXPECT_EQ(got_opt.master, want_opt.master);
        EXPECT_EQ(got.step, 41);
        EXPECT_EQ(got.rng_state, 0x1122334455667788ull);
        EXPECT_EQ(got.rng_state_last_update, 0x99AABBCCDDEEFF00ull);
        EXPECT_EQ(got.shuffle, c.shuffle);
        EXPECT_FALSE(got.has_outliers);
        EXPECT_EQ(got.loader.shard_idx, at_stop.shard_idx);
        EXPECT_EQ(got.loader.sample_idx, at_stop.sample_idx);
        if (c.shuffle) {
            EXPECT_EQ(got.loader.shard_order, at_stop.shard_order);
            EXPECT_EQ(got.loader.sample_order, at_stop.sample_order);
            // the raw generator after seed_ (which llm.c never sets): same words, same position
            EXPECT_EQ(memcmp((const char*)&got.loader.rng + 8, (const char*)&at_stop.rng + 8, sizeof(Mt19937State) - 8), 0);
        }
        run_state_restore_loader(got, &resumed, path);
        for (int k = c.batches; k < c.batches + 60; k++) ASSERT_EQ(batch(&resumed), expect[k]) << "batch " << k;
        dataloader_free(&full);
        dataloader_free(&resumed);
    }
}

// ... and llm.c's load_state reads ours: the same fields, nothing read past the end (our outlier windows
// come after llm.c's content and are ignored), and llm.c's loader continues with our batches.
TEST(RunStateLlmc, OurFileReadsInLlmcsReader) {
    TempDir dir("test_run_state");
    // equal window counts: llm.c checks the saved count against the first shard of its first epoch
    const std::string pattern = write_shards(dir, {100, 101, 102});
    const std::string path = dir.file("state.bin");
    for (bool shuffle : {true, false}) {
        for (int P : {1, 2}) {
            const int rank = P - 1;
            SCOPED_TRACE("shuffle " + std::to_string(shuffle) + " P " + std::to_string(P));
            DataLoader dl;
            dataloader_init(&dl, pattern.c_str(), "-i", 2, 3, rank, P, shuffle);
            for (int k = 0; k < 29; k++) dataloader_next_batch(&dl);
            RunState rs = sample_state(shuffle);
            rs.num_processes = P;
            rs.process_rank = rank;
            rs.shuffle = shuffle;
            rs.loader = dataloader_get_state(&dl);
            Opt a(16);
            run_state_write(path, rs, a.body());
            int rc;
            const std::string out = llmc_state_py("read '" + path + "' --params 16 --master 1 --procs " +
                                                  std::to_string(P) + " --rank " + std::to_string(rank) +
                                                  " --windows " + windows_arg(dl) + " --continue 40", &rc);
            ASSERT_EQ(rc, 0) << out;
            std::map<std::string, std::string> kv = key_values(out);
            EXPECT_EQ(kv["step"], "1234");
            EXPECT_EQ(kv["should_shuffle"], shuffle ? "1" : "0");
            EXPECT_EQ(kv["rng_state"], std::to_string(rs.rng_state));
            EXPECT_EQ(kv["current_shard_idx"], std::to_string(rs.loader.shard_idx));
            EXPECT_EQ(kv["current_sample_idx"], std::to_string(rs.loader.sample_idx));
            EXPECT_EQ(kv["m_last"], "7.5");
            EXPECT_EQ(kv["master_last"], "-30.0");
            size_t llmc_bytes = 1024 + 3 * 64;
            if (shuffle) {
                EXPECT_EQ(kv["shard_indices"], join(rs.loader.shard_order));
                EXPECT_EQ(kv["intra_shard_indices"], join(rs.loader.sample_order));
                EXPECT_EQ(kv["mt_left"], std::to_string(rs.loader.rng.left_));
                llmc_bytes += 8 + 3 * 4 + 8 + 4 * rs.loader.sample_order.size() + 2520;
            }
            EXPECT_EQ(kv["bytes_read"], std::to_string(llmc_bytes));
            EXPECT_EQ(kv["file_size"], std::to_string(llmc_bytes + 2 * (8 + 1024 + 16)));  // + our outlier detectors
            std::string next;  // (shard, window) of our next batches: token s*1000 + window*P*B*T + rank*B*T
            for (int k = 0; k < 40; k++) {
                const int tok = batch(&dl)[0];
                next += (k ? "," : "") + std::to_string(tok / 1000) + ":" + std::to_string((tok % 1000 - rank * 6) / (6 * P));
            }
            EXPECT_EQ(kv["next"], next);
            dataloader_free(&dl);
        }
    }
}

// Without shuffling our files keep the shard count and the current shard's window count in header slots
// 36-37, so another -i or -b/-t is refused as with shuffling; a file without them (llm.c's) resumes when
// its position fits, with a warning saying what could not be checked; one whose position lies beyond
// this run's data is refused.
TEST(RunState, UnshuffledFilesRecordShardAndWindowCounts) {
    TempDir dir("test_run_state");
    const std::string pattern = write_shards(dir, {100, 160, 70});  // B=2 T=3: 16, 26, 11 windows
    const std::string two = dir.path + "/shard_[01].bin";
    DataLoader first;
    dataloader_init(&first, pattern.c_str(), "-i", 2, 3, 0, 1, false);
    for (int k = 0; k < 20; k++) dataloader_next_batch(&first);  // shard 1, window 4
    RunState rs;
    rs.loader = dataloader_get_state(&first);
    const std::string path = dir.file("state.bin");
    float buf[4] = {1, 2, 3, 4};
    run_state_write(path, rs, {{buf, sizeof(buf)}});
    const std::vector<uint8_t> bytes = read_bytes(path);
    const int32_t* h = (const int32_t*)bytes.data();
    EXPECT_EQ(h[RUN_STATE_NUM_SHARDS_SLOT], 3);
    EXPECT_EQ(h[RUN_STATE_NUM_WINDOWS_SLOT], 26);
    const RunState got = run_state_read(path, {{buf, sizeof(buf)}}, 1, 0);
    EXPECT_EQ(got.saved_num_shards, 3u);
    EXPECT_EQ(got.saved_num_windows, 26u);
    auto restore = [&](const RunState& r, const std::string& pat, size_t B) {
        DataLoader dl;
        dataloader_init(&dl, pat.c_str(), "-i", B, 3, 0, 1, false);
        run_state_restore_loader(r, &dl, path);
        dataloader_next_batch(&dl);
        const int tok = dl.inputs[0];
        dataloader_free(&dl);
        return tok;
    };
    dataloader_next_batch(&first);
    EXPECT_EQ(restore(got, pattern, 2), first.inputs[0]);
    EXPECT_EXIT(restore(got, two, 2), ::testing::ExitedWithCode(1),
                "state.bin' was written by a run over 3 shards, but 2 shards match now");
    EXPECT_EXIT(restore(got, pattern, 1), ::testing::ExitedWithCode(1),
                "state.bin' was written by a run whose shard 1 \\('.*shard_1.bin'\\) has 26 windows, but it has 53 "
                "windows of num_processes\\*B\\*T = 1\\*1\\*3 tokens now");
    // as llm.c writes it: only the position
    RunState llmc = got;
    llmc.saved_num_shards = llmc.saved_num_windows = 0;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(restore(llmc, pattern, 1), 1000 + 4 * 3);  // shard 1, window 4 of -b 1: not the saved run's data
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("state.bin' (unshuffled, by llm.c or an earlier gpt2cu) records only its data position, shard "
                       "1 window 4, not the shard count or windows of the run that wrote it"), std::string::npos) << err;
    llmc.loader.sample_idx = 17;  // shard 0 has 8 windows with -b 4
    llmc.loader.shard_idx = 0;
    EXPECT_EXIT(restore(llmc, pattern, 4), ::testing::ExitedWithCode(1),
                "saved data position is window 17 of shard '.*shard_0.bin', which has only 8 windows");
    llmc.loader.shard_idx = 2;
    EXPECT_EXIT(restore(llmc, two, 2), ::testing::ExitedWithCode(1), "saved data position is shard 2 but only 2 shards");
    dataloader_free(&first);
}

// A file whose shuffle setting, shard count or window count does not fit this run is refused, naming both.
TEST(RunStateLlmc, MismatchedLlmcFilesAreRefusedNamingTheDifference) {
    TempDir dir("test_run_state");
    const std::string pattern = write_shards(dir, {100, 160, 70});
    const std::string path = dir.file("state.bin");
    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), "-i", 2, 3, 0, 1, true);  // windows 16, 26, 11
    Opt o(16);
    int rc;
    auto restore = [&](const std::string& args) {
        ASSERT_EQ(llmc_state_py("write '" + path + "' --params 16 " + args, &rc), "");
        RunState rs = run_state_read(path, o.body(), 1, 0);  // warns: no checksum (llm.c's file)
        run_state_restore_loader(rs, &dl, path);
    };
    EXPECT_EXIT(restore("--windows 16,26 --batches 3"), ::testing::ExitedWithCode(1),
                "state.bin': the saved data order covers 2 shards, but 3 shards match now");
    EXPECT_EXIT(restore("--windows 8,13,5 --batches 3"), ::testing::ExitedWithCode(1),
                "state.bin': the saved window order has [0-9]+ windows, but shard '.*shard_[0-2].bin' has [0-9]+ windows");
    EXPECT_EXIT(restore("--shuffle 0 --windows 16,26,11 --batches 3"), ::testing::ExitedWithCode(1),
                "state.bin' was written without data shuffling but this run has it on");
    dataloader_free(&dl);
}

// The checksum covers the header, so a changed step, RNG state, data position or
// epoch is refused, and zeroing slot 6 does not switch the check off.
TEST(RunStateErrors, ChangedHeaderSlotsAreCaughtAndTheChecksumCannotBeSwitchedOff) {
    const StateFile f(sample_state(true), 64);
    Opt b(64);
    const std::string p = f.dir.path + "/changed.bin";
    for (int slot : {10, 20, 21, 22, 30, 32, 34}) {
        std::vector<uint8_t> m = f.bytes;
        m[4 * slot] ^= 0x01;
        write_file(p, m);
        EXPECT_EXIT(run_state_read(p, b.body(), 4, 2), ::testing::ExitedWithCode(1),
                    "changed.bin' is corrupted: checksum mismatch")
            << "slot " << slot;
    }
    std::vector<uint8_t> m = f.bytes;
    m[4 * 6] = 0;  // checksum "off", our other slots still set
    write_file(p, m);
    EXPECT_EXIT(run_state_read(p, b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "changed.bin' is corrupted: it has gpt2cu's header slot 7 set .* but no checksum");
    m = f.bytes;
    m[4 * 6] = 1;  // an earlier build's format (body-only checksum)
    write_file(p, m);
    EXPECT_EXIT(run_state_read(p, b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "written by an earlier gpt2cu build \\(checksum format 1.*start fresh");
    m = f.bytes;
    m[4 * 8] = 0;  // shuffled, checksummed, but not llm.c's shuffle section: an earlier build's own order
    write_file(p, m);
    EXPECT_EXIT(run_state_read(p, b.body(), 4, 2), ::testing::ExitedWithCode(1),
                "written by an earlier gpt2cu build with its own data shuffling \\(not llm.c's\\)");
    m = f.bytes;
    m[4 * 6] = 7;
    write_file(p, m);
    EXPECT_EXIT(run_state_read(p, b.body(), 4, 2), ::testing::ExitedWithCode(1), "unknown checksum format");
}

// A file as llm.c writes it (no checksum, none of our slots) reads, but says it is unverified.
TEST(RunState, FileWithoutChecksumReadsWithAWarning) {
    RunState rs = without_outliers(sample_state(false));
    rs.loader.epoch = 0;
    StateFile f(rs, 32);
    std::vector<uint8_t> bytes = f.bytes;
    int32_t* h = (int32_t*)bytes.data();
    h[6] = 0;
    for (int slot : {8, 9, 40, 41, 42, 43}) h[slot] = 0;
    write_file(f.path, bytes);
    Opt b(32, 9.0f);
    ::testing::internal::CaptureStderr();
    RunState got = run_state_read(f.path, b.body(), 4, 2);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("has no checksum"), std::string::npos) << err;
    EXPECT_NE(err.find("unverified"), std::string::npos) << err;
    EXPECT_EQ(got.step, 1234);
    EXPECT_EQ(b.m, f.a.m);
    EXPECT_EQ(b.master, f.a.master);
}

// A shuffled state with an empty window order (corrupt) must not memcpy from null.
TEST(RunState, EmptyPermutationReadsWithoutUndefinedBehaviour) {
    RunState rs = sample_state(true);
    rs.loader.sample_order.clear();
    const StateFile f(rs, 16);
    Opt b(16);
    RunState got = run_state_read(f.path, b.body(), 4, 2);
    EXPECT_TRUE(got.loader.sample_order.empty());
    EXPECT_EQ(got.loader.shard_order, f.rs.loader.shard_order);
}

