/*
 * Optimizer/run state files (docs/formats.md "Run state", magic 20240527), host only. One file
 * per process: DIR/state_%08d_%05d.bin (step, rank); the checkpoint directory (paths, DONE, leftovers,
 * pruning) is llmc/checkpoint.h.
 *
 * Header slots (int32; u64 values low word first):
 *   0 magic 20240527, 1 version 1, 2 num_processes, 3 process_rank, 4 use_master_weights,
 *   5 data loader shuffles, 10 step, 20-21 RNG state, 22-23 RNG state before the last update,
 *   30-31 shard index, 32-33 sample index                 (docs/formats.md "Run state")
 *   6 = 2: slots 40-41 hold a 64-bit checksum of the whole file: the header (with slots 40-41 read as
 *          0) then everything after it, so a flipped step, RNG or epoch slot is caught too (ours;
 *          files of earlier builds have 1 here, a checksum of the body only: refused with a message)
 *   7 = 2: the two outlier detectors follow the shuffle section, with their running sums (ours);
 *          7 = 1: files of earlier builds, without the sums: read, the sums recomputed from the window
 *   8 = 1: the shuffle section is llm.c's (with the 2,520-byte MT19937 state) (ours; files of earlier
 *          builds with slot 6 = 2 and slot 5 = 1 had another one: refused with a message)
 *   9 = 1: under ZeRO-1 the optimizer body is this process's chunks of every tensor of every layer, in
 *          llm.c's layout (llmc/zero_shards.h) (ours; earlier builds kept one contiguous slice, which
 *          differs for P > 1: checkpoint_read refuses such a -z 1 file; llm.c's files have llm.c's layout)
 *     = 2: under ZeRO-1 the body is this process's run of the padded layout (one contiguous 1/P of all
 *          parameters, ceil(N / P) elements, the last process's end zero-padded), used where P does not
 *          divide every tensor (ours; no llm.c counterpart). checkpoint_read refuses a file whose layout
 *          is not the run's: at d48 and P = 3 both have N / 3 elements, so only this slot tells them apart
 *   34-35 data loader epochs completed (ours; for information)
 *   36 number of shards, 37 windows of the current shard, of the run that wrote the file (ours; the
 *      shuffle section holds both too, but without shuffling they are the only record of them)
 *   42-43 bytes of the optimizer body (m, v, master) (ours; gives a clear message on a size mismatch)
 * Body: the caller's host buffers back to back (AdamW m, v, then master weights if slot 4 is 1; each
 * this process's shard under ZeRO-1); then, if slot 5, the data loader exactly as llm.c's write_state
 * (train_gpt2.cu at f1e2ace) writes it: u64 n, int32 shard_order[n], u64 m, int32 sample_order[m],
 * Mt19937State (rand.h: llm.c's raw mt19937_state struct, 2,520 bytes); then, if slot 7 (ours): for
 * loss and grad norm: int32 count, int32 index, f64 window[128], and with slot 7 = 2 f64 sum, f64 sum of
 * squares (llmc/outlier_detector.h: llm.c's running sums, whose rounding the z-scores depend on).
 * llm.c's load_state reads only its slots and the bytes up to the end of its shuffle section and
 * ignores the rest, so it reads our files; we read its files (slot 6 = 0 and none of our other
 * slots), with a warning that nothing in them could be verified. Slot 6 = 0 beside any of our other
 * slots (7, 8, 9, 34-37, 40-43) is refused: someone switched the checksum off. Restoring the loader
 * refuses a file whose shuffle setting, shard count or window count differs from this run's. An
 * unshuffled file without slots 36-37 (llm.c's, or ours from before them) records only the position
 * (shard, window): one outside this run's data is refused, but a different shard set or -b/-t/process
 * count that still contains it cannot be told apart; a warning says so.
 *
 * API
 *   struct HostBuffer { void* ptr; size_t bytes; }
 *   void run_state_write(const std::string& path, const RunState&, const std::vector<HostBuffer>& body)
 *        writes path.tmp, fsyncs, renames: an interrupted write never damages an existing file.
 *   RunState run_state_peek(const std::string& path)      header fields only (to size the buffers)
 *   RunState run_state_read(const std::string& path, const std::vector<HostBuffer>& body,
 *                           int num_processes, int process_rank)
 *        fills the body buffers; validates magic, version, process count and rank (vs this run),
 *        exact size, checksum: any mismatch is one fatal() naming the file.
 *   void run_state_restore_loader(const RunState&, DataLoader*, const std::string& path)
 */
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/dataloader.h"
#include "llmc/file_header.h"
#include "llmc/outlier_detector.h"
#include "llmc/utils.h"

constexpr int32_t RUN_STATE_CHECKSUM_BODY_ONLY = 1;  // slot 6 of files from earlier builds
constexpr int32_t RUN_STATE_CHECKSUM_WHOLE = 2;      // slot 6: checksum covers header and body
constexpr int RUN_STATE_CHECKSUM_SLOT = 40;
constexpr int RUN_STATE_LLMC_SHUFFLE_SLOT = 8;         // 1: the shuffle section is llm.c's layout
constexpr int RUN_STATE_LLMC_ZERO_SLOT = 9;            // ZeRO-1 layout: 1 llm.c's per tensor and layer, 2 padded
constexpr int RUN_STATE_OUTLIER_SLOT = 7;              // 2: outlier detectors with their running sums; 1: without
constexpr int32_t RUN_STATE_OUTLIER_WITH_SUMS = 2;
constexpr int RUN_STATE_NUM_SHARDS_SLOT = 36;          // the writing run's shard count (0: not recorded)
constexpr int RUN_STATE_NUM_WINDOWS_SLOT = 37;         // ... and its current shard's window count

struct HostBuffer {
    void* ptr;
    size_t bytes;
};

struct RunState {
    int num_processes = 1;
    int process_rank = 0;
    bool use_master_weights = false;
    bool shuffle = false;
    int step = 0;
    uint64_t rng_state = 0;
    uint64_t rng_state_last_update = 0;
    DataLoaderState loader;            // shard_idx, sample_idx, epoch; orders + RNG when shuffling
    bool has_outliers = false;         // the two windows below are saved/restored
    OutlierDetector loss_outlier;
    OutlierDetector grad_norm_outlier;
    uint64_t body_bytes = 0;           // set by peek/read: bytes of m, v, master in the file (0: unknown)
    int zero_layout = 1;               // slot 9 (written as given; peek/read: 1 for llm.c's files, 0 for ours
                                       // from before slot 9)
    uint64_t saved_num_shards = 0;     // set by peek/read: slots 36-37 (0: not recorded)
    uint64_t saved_num_windows = 0;
};

// ----------------------------------------------------------------------------
// 64-bit checksum (streaming, 4 independent multiply-rotate lanes: several GB/s, so hashing a
// multi-GB optimizer state costs less than writing it).

struct Checksum64 {
    uint64_t lane[4];
    unsigned char pending[32];
    size_t npending;
    uint64_t length;
};

inline uint64_t checksum_rotl_(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
constexpr uint64_t CHECKSUM_P1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t CHECKSUM_P2 = 0xC2B2AE3D27D4EB4Full;

inline void checksum_init(Checksum64* c) {
    for (int i = 0; i < 4; i++) c->lane[i] = CHECKSUM_P1 * (uint64_t)(i + 1);
    c->npending = 0;
    c->length = 0;
}

inline void checksum_block_(Checksum64* c, const unsigned char* p) {
    for (int i = 0; i < 4; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        c->lane[i] = checksum_rotl_(c->lane[i] + w * CHECKSUM_P2, 31) * CHECKSUM_P1;
    }
}

inline void checksum_update(Checksum64* c, const void* data, size_t n) {
    if (n == 0) return;  // data may be null then (an empty vector's data())
    const unsigned char* p = (const unsigned char*)data;
    c->length += n;
    if (c->npending > 0) {
        size_t take = std::min(n, 32 - c->npending);
        memcpy(c->pending + c->npending, p, take);
        c->npending += take;
        p += take;
        n -= take;
        if (c->npending < 32) return;
        checksum_block_(c, c->pending);
        c->npending = 0;
    }
    for (; n >= 32; p += 32, n -= 32) checksum_block_(c, p);
    memcpy(c->pending, p, n);
    c->npending = n;
}

inline uint64_t checksum_final(const Checksum64* c) {
    uint64_t h = c->length * CHECKSUM_P1;
    for (int i = 0; i < 4; i++) h = checksum_rotl_(h ^ c->lane[i], 27) * CHECKSUM_P2 + CHECKSUM_P1;
    for (size_t i = 0; i < c->npending; i++) h = checksum_rotl_(h ^ c->pending[i], 11) * CHECKSUM_P1;
    h ^= h >> 33;
    h *= CHECKSUM_P2;
    h ^= h >> 29;
    return h;
}

// ----------------------------------------------------------------------------
// header helpers

inline void run_state_put_u64_(int32_t* header, int slot, uint64_t v) {
    uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
    memcpy(&header[slot], &lo, 4);
    memcpy(&header[slot + 1], &hi, 4);
}

inline uint64_t run_state_get_u64_(const int32_t* header, int slot) {
    uint32_t lo, hi;
    memcpy(&lo, &header[slot], 4);
    memcpy(&hi, &header[slot + 1], 4);
    return (uint64_t)lo | ((uint64_t)hi << 32);
}

// Everything after the optimizer body: shuffle section and outlier windows.
inline std::vector<unsigned char> run_state_tail_bytes_(const RunState& rs) {
    std::vector<unsigned char> out;
    auto put = [&](const void* p, size_t n) {
        const unsigned char* b = (const unsigned char*)p;
        out.insert(out.end(), b, b + n);
    };
    if (rs.shuffle) {
        uint64_t n = rs.loader.shard_order.size();
        put(&n, 8);
        put(rs.loader.shard_order.data(), n * sizeof(int32_t));
        uint64_t m = rs.loader.sample_order.size();
        put(&m, 8);
        put(rs.loader.sample_order.data(), m * sizeof(int32_t));
        put(&rs.loader.rng, sizeof(Mt19937State));
    }
    if (rs.has_outliers) {
        for (const OutlierDetector* d : {&rs.loss_outlier, &rs.grad_norm_outlier}) {
            int32_t count = d->count, index = d->index;
            put(&count, 4);
            put(&index, 4);
            put(d->buffer, sizeof(d->buffer));
            put(&d->sum, 8);
            put(&d->sum_sq, 8);
        }
    }
    return out;
}

// ----------------------------------------------------------------------------
// write

inline void run_state_write(const std::string& path, const RunState& rs, const std::vector<HostBuffer>& body) {
    std::vector<unsigned char> tail = run_state_tail_bytes_(rs);
    uint64_t body_bytes = 0;
    for (const HostBuffer& b : body) body_bytes += b.bytes;

    int32_t header[FILE_HEADER_INTS] = {0};
    header[0] = RUN_STATE_MAGIC;
    header[1] = RUN_STATE_VERSION;
    header[2] = rs.num_processes;
    header[3] = rs.process_rank;
    header[4] = rs.use_master_weights ? 1 : 0;
    header[5] = rs.shuffle ? 1 : 0;
    header[6] = RUN_STATE_CHECKSUM_WHOLE;
    header[RUN_STATE_OUTLIER_SLOT] = rs.has_outliers ? RUN_STATE_OUTLIER_WITH_SUMS : 0;
    header[RUN_STATE_LLMC_SHUFFLE_SLOT] = 1;
    header[RUN_STATE_LLMC_ZERO_SLOT] = rs.zero_layout;
    header[10] = rs.step;
    run_state_put_u64_(header, 20, rs.rng_state);
    run_state_put_u64_(header, 22, rs.rng_state_last_update);
    run_state_put_u64_(header, 30, rs.loader.shard_idx);
    run_state_put_u64_(header, 32, rs.loader.sample_idx);
    run_state_put_u64_(header, 34, rs.loader.epoch);
    header[RUN_STATE_NUM_SHARDS_SLOT] = (int32_t)rs.loader.shard_order.size();   // the loader keeps both orders
    header[RUN_STATE_NUM_WINDOWS_SLOT] = (int32_t)rs.loader.sample_order.size();  // (identities without shuffling)
    run_state_put_u64_(header, 42, body_bytes);
    Checksum64 ck;
    checksum_init(&ck);
    checksum_update(&ck, header, FILE_HEADER_BYTES);  // slots 40-41 are still 0 here
    for (const HostBuffer& b : body) checksum_update(&ck, b.ptr, b.bytes);
    checksum_update(&ck, tail.data(), tail.size());
    run_state_put_u64_(header, RUN_STATE_CHECKSUM_SLOT, checksum_final(&ck));

    AtomicFile f = atomic_file_open(path);
    const char* what = f.tmp_path.c_str();
    fwrite_check(header, sizeof(int32_t), FILE_HEADER_INTS, f.fp, what);
    for (const HostBuffer& b : body) fwrite_check(b.ptr, 1, b.bytes, f.fp, what);
    fwrite_check(tail.data(), 1, tail.size(), f.fp, what);
    atomic_file_commit(f);
}

// ----------------------------------------------------------------------------
// read

// Reads and checks the header; returns the state's scalar fields and the file size.
inline RunState run_state_header_(const std::string& path, int32_t* header, FILE* fp, long* file_size) {
    const char* p = path.c_str();
    file_header_check(fp, p, RUN_STATE_MAGIC, header, file_size);
    for (int slot : {4, 5, 7, RUN_STATE_LLMC_SHUFFLE_SLOT}) {
        const int most = slot == RUN_STATE_OUTLIER_SLOT ? RUN_STATE_OUTLIER_WITH_SUMS : 1;
        if (header[slot] < 0 || header[slot] > most) {
            fatal("run state file '%s' is corrupted (header slot %d = %d, must be 0 to %d)", p, slot, header[slot], most);
        }
    }
    if (header[RUN_STATE_LLMC_ZERO_SLOT] < 0 || header[RUN_STATE_LLMC_ZERO_SLOT] > 2) {
        fatal("run state file '%s' is corrupted (header slot %d = %d: no such ZeRO-1 layout, must be 0, 1 or 2)", p,
              RUN_STATE_LLMC_ZERO_SLOT, header[RUN_STATE_LLMC_ZERO_SLOT]);
    }
    if (header[6] == RUN_STATE_CHECKSUM_BODY_ONLY) {
        fatal("run state file '%s' was written by an earlier gpt2cu build (checksum format %d, which does not "
              "cover the header); this build reads format %d only: resume it with the build that wrote it, or "
              "start fresh (without -y 1, or with another -o)", p, header[6], RUN_STATE_CHECKSUM_WHOLE);
    }
    if (header[6] != 0 && header[6] != RUN_STATE_CHECKSUM_WHOLE) {
        fatal("run state file '%s' is corrupted (header slot 6 = %d: unknown checksum format, expected %d)", p,
              header[6], RUN_STATE_CHECKSUM_WHOLE);
    }
    if (header[6] == RUN_STATE_CHECKSUM_WHOLE && header[5] == 1 && header[RUN_STATE_LLMC_SHUFFLE_SLOT] != 1) {
        fatal("run state file '%s' was written by an earlier gpt2cu build with its own data shuffling (not "
              "llm.c's); this build shuffles as llm.c and cannot continue that order: resume it with the build "
              "that wrote it, or start fresh (without -y 1, or with another -o)", p);
    }
    if (header[6] == 0) {
        for (int slot : {7, RUN_STATE_LLMC_SHUFFLE_SLOT, RUN_STATE_LLMC_ZERO_SLOT, 34, 35, RUN_STATE_NUM_SHARDS_SLOT,
                         RUN_STATE_NUM_WINDOWS_SLOT, 40, 41, 42, 43}) {
            if (header[slot] != 0) {
                fatal("run state file '%s' is corrupted: it has gpt2cu's header slot %d set (%d) but no checksum "
                      "(slot 6 = 0); gpt2cu always writes one", p, slot, header[slot]);
            }
        }
    }
    RunState rs;
    rs.num_processes = header[2];
    rs.process_rank = header[3];
    rs.use_master_weights = header[4] == 1;
    rs.shuffle = header[5] == 1;
    rs.has_outliers = header[RUN_STATE_OUTLIER_SLOT] != 0;
    rs.step = header[10];
    rs.rng_state = run_state_get_u64_(header, 20);
    rs.rng_state_last_update = run_state_get_u64_(header, 22);
    rs.loader.shard_idx = run_state_get_u64_(header, 30);
    rs.loader.sample_idx = run_state_get_u64_(header, 32);
    rs.loader.epoch = run_state_get_u64_(header, 34);
    rs.body_bytes = run_state_get_u64_(header, 42);
    rs.zero_layout = header[6] == 0 ? 1 : header[RUN_STATE_LLMC_ZERO_SLOT];
    if (header[RUN_STATE_NUM_SHARDS_SLOT] < 0 || header[RUN_STATE_NUM_WINDOWS_SLOT] < 0) {
        fatal("run state file '%s' is corrupted (header slots 36-37: %d shards, %d windows)", p,
              header[RUN_STATE_NUM_SHARDS_SLOT], header[RUN_STATE_NUM_WINDOWS_SLOT]);
    }
    rs.saved_num_shards = (uint64_t)header[RUN_STATE_NUM_SHARDS_SLOT];
    rs.saved_num_windows = (uint64_t)header[RUN_STATE_NUM_WINDOWS_SLOT];
    if (rs.num_processes < 1 || rs.process_rank < 0 || rs.process_rank >= rs.num_processes || rs.step < 0) {
        fatal("run state file '%s' is corrupted (rank %d of %d processes, step %d)", p, rs.process_rank,
              rs.num_processes, rs.step);
    }
    return rs;
}

inline RunState run_state_peek(const std::string& path) {
    FilePtr fp(fopen_check(path.c_str(), "rb"));
    int32_t header[FILE_HEADER_INTS];
    long size;
    RunState rs = run_state_header_(path, header, fp.get(), &size);
    fclose_check(fp.release(), path.c_str());
    return rs;
}

inline RunState run_state_read(const std::string& path, const std::vector<HostBuffer>& body,
                               int num_processes, int process_rank) {
    const char* p = path.c_str();
    FilePtr file(fopen_check(p, "rb"));
    FILE* fp = file.get();
    int32_t header[FILE_HEADER_INTS];
    long file_size;
    RunState rs = run_state_header_(path, header, fp, &file_size);
    if (rs.num_processes != num_processes || rs.process_rank != process_rank) {
        fatal("run state file '%s' belongs to process %d of %d, but this is process %d of %d: resume "
              "with the same number of processes (-pn) it was written with", p, rs.process_rank,
              rs.num_processes, process_rank, num_processes);
    }
    uint64_t expected_body = 0;
    for (const HostBuffer& b : body) expected_body += b.bytes;
    if (rs.body_bytes != 0 && rs.body_bytes != expected_body) {
        fatal("run state file '%s' holds %llu bytes of optimizer state but this run needs %llu "
              "(different model, -w or -z than the run that wrote it?)", p,
              (unsigned long long)rs.body_bytes, (unsigned long long)expected_body);
    }
    if ((uint64_t)file_size < FILE_HEADER_BYTES + expected_body) {
        fatal("run state file '%s' is truncated: %ld bytes, its optimizer state alone needs %llu", p,
              file_size, (unsigned long long)(FILE_HEADER_BYTES + expected_body));
    }
    Checksum64 ck;
    checksum_init(&ck);
    int32_t hashed_header[FILE_HEADER_INTS];
    memcpy(hashed_header, header, FILE_HEADER_BYTES);
    run_state_put_u64_(hashed_header, RUN_STATE_CHECKSUM_SLOT, 0);
    checksum_update(&ck, hashed_header, FILE_HEADER_BYTES);
    for (const HostBuffer& b : body) {
        fread_check(b.ptr, 1, b.bytes, fp, p);
        checksum_update(&ck, b.ptr, b.bytes);
    }
    size_t tail_size = (size_t)file_size - FILE_HEADER_BYTES - expected_body;
    std::vector<unsigned char> tail(tail_size);
    fread_check(tail.data(), 1, tail_size, fp, p);
    fclose_check(file.release(), p);
    checksum_update(&ck, tail.data(), tail.size());

    size_t pos = 0;
    auto take = [&](void* dst, size_t n) {
        if (pos + n > tail.size()) fatal("run state file '%s' is truncated or corrupted (data loader/outlier section)", p);
        memcpy(dst, tail.data() + pos, n);
        pos += n;
    };
    auto take_order = [&](std::vector<int32_t>* v) {
        uint64_t n;
        take(&n, 8);
        if (n > (tail.size() - pos) / sizeof(int32_t)) fatal("run state file '%s' is truncated or corrupted (permutation of %llu entries)", p, (unsigned long long)n);
        v->resize(n);
        if (n > 0) take(v->data(), n * sizeof(int32_t));  // data() of an empty vector may be null
    };
    if (rs.shuffle) {
        take_order(&rs.loader.shard_order);
        take_order(&rs.loader.sample_order);
        take(&rs.loader.rng, sizeof(Mt19937State));
    }
    if (rs.has_outliers) {
        const bool with_sums = header[RUN_STATE_OUTLIER_SLOT] == RUN_STATE_OUTLIER_WITH_SUMS;
        bool inexact = false;
        for (OutlierDetector* d : {&rs.loss_outlier, &rs.grad_norm_outlier}) {
            int32_t count, index;
            take(&count, 4);
            take(&index, 4);
            take(d->buffer, sizeof(d->buffer));
            if (count < 0 || count > OUTLIER_WINDOW || index < 0 || index >= OUTLIER_WINDOW) {
                fatal("run state file '%s' is corrupted (outlier window count %d index %d)", p, count, index);
            }
            d->count = count;
            d->index = index;
            if (with_sums) {
                take(&d->sum, 8);
                take(&d->sum_sq, 8);
            } else {
                // earlier builds: the same values in the same slots; their index ran ahead while filling
                if (count < OUTLIER_WINDOW) d->index = 0;
                outlier_detector_recompute_sums(d);
                inexact = inexact || count == OUTLIER_WINDOW;
            }
        }
        if (inexact) {
            fprintf(stderr, "note: run state file '%s' was written by an earlier build, without the z-score windows' "
                            "running sums: recomputed from the windows (-sl/-sg z-scores may differ in the last "
                            "digits from an uninterrupted run)\n", p);
        }
    }
    if (pos != tail.size()) {
        fatal("run state file '%s' has %zu unexpected bytes at the end (different model, -w or -z "
              "than the run that wrote it?)", p, tail.size() - pos);
    }
    // checked last so that size problems get the more specific messages above
    if (header[6] == RUN_STATE_CHECKSUM_WHOLE && checksum_final(&ck) != run_state_get_u64_(header, RUN_STATE_CHECKSUM_SLOT)) {
        fatal("run state file '%s' is corrupted: checksum mismatch (header or body changed since it was written)", p);
    }
    if (header[6] == 0) {
        fprintf(stderr, "warning: run state file '%s' has no checksum (as llm.c writes them): its contents are "
                        "unverified\n", p);
    }
    rs.body_bytes = expected_body;
    return rs;
}

inline void run_state_restore_loader(const RunState& rs, DataLoader* dl, const std::string& path) {
    if (rs.shuffle != dl->shuffle) {
        fatal("run state file '%s' was written %s data shuffling but this run has it %s (train data is "
              "shuffled by default, as in llm.c; -sh 0 or -a 1 turn it off)", path.c_str(),
              rs.shuffle ? "with" : "without", dl->shuffle ? "on" : "off");
    }
    // a shuffled file's orders carry both counts (dataloader_set_state compares them); an unshuffled
    // one has them in slots 36-37 only
    const size_t nshards = dl->shard_paths.size();
    if (!rs.shuffle && rs.saved_num_shards != 0 && rs.saved_num_shards != nshards) {
        fatal("run state file '%s' was written by a run over %llu shards, but %zu shards match now (different -i "
              "than the saved run?)", path.c_str(), (unsigned long long)rs.saved_num_shards, nshards);
    }
    if (!rs.shuffle && rs.saved_num_windows != 0 && rs.loader.shard_idx < nshards &&
        rs.saved_num_windows != dl->shard_num_windows[rs.loader.shard_idx]) {
        fatal("run state file '%s' was written by a run whose shard %llu ('%s') has %llu windows, but it has %zu "
              "windows of num_processes*B*T = %d*%zu*%zu tokens now (different -b/-t/process count or shards than "
              "the saved run?)", path.c_str(), (unsigned long long)rs.loader.shard_idx,
              dl->shard_paths[rs.loader.shard_idx].c_str(), (unsigned long long)rs.saved_num_windows,
              dl->shard_num_windows[rs.loader.shard_idx], dl->num_processes, dl->B, dl->T);
    }
    dataloader_set_state(dl, rs.loader, path.c_str());
    if (!rs.shuffle && rs.saved_num_shards == 0) {
        fprintf(stderr, "warning: run state file '%s' (unshuffled, by llm.c or an earlier gpt2cu) records only its data "
                "position, shard %llu window %llu, not the shard count or windows of the run that wrote it: a "
                "different -i, -b, -t or process count goes unnoticed unless the position lies outside this run's "
                "data\n", path.c_str(), (unsigned long long)rs.loader.shard_idx,
                (unsigned long long)rs.loader.sample_idx);
    }
}
