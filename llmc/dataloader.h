/*
 * Token-shard data loader (formats.md "Token shards", magic 20240520), host only.
 *
 * A shard is 1024 header bytes then n uint16 token ids. Shards are found with glob() and taken in
 * sorted order; every header and file size is validated at init. The loader never maps a whole
 * shard: each batch is one fseek + fread of B*T+1 tokens.
 *
 * Windows: a shard of n tokens holds W = (n - 1) / (P*B*T) windows of P*B*T tokens (P = number of
 * processes). Window w starts at token w*P*B*T; process r reads its B*T+1 tokens at offset r*B*T
 * inside it, so the P processes together read exactly what one process with batch P*B would read.
 * After a window the loader advances to the next one; when none is left in the shard it moves to
 * the next shard, and after the last shard it starts a new epoch at the first shard.
 *
 * Shuffling (shuffle = true): every epoch uses a permutation of the shard order, and every shard a
 * permutation of its window indices. Both are pure functions of (seed, epoch, position of the shard
 * in the epoch), so every process must use the same seed (the windows of one global batch must be
 * the same window on all processes) and a restart reproduces them. Without shuffling the order is
 * the identity and the epoch number does not matter.
 *
 * API
 *   void dataloader_init(DataLoader*, const char* glob_pattern, const char* flag_name, size_t B,
 *                        size_t T, int process_rank, int num_processes, bool shuffle, uint64_t seed)
 *        flag_name (e.g. "-i") is named in the error when the pattern matches nothing.
 *   void dataloader_next_batch(DataLoader*)    inputs = tokens [0, B*T), targets = tokens [1, B*T]
 *                                              of this process's window (int32, B*T each, overwritten)
 *   void dataloader_reset(DataLoader*)         back to the start of epoch 0 (same batches again)
 *   size_t dataloader_num_batches(const DataLoader*)   windows per epoch (= global batches per epoch)
 *   void dataloader_resume(DataLoader*, size_t shard_idx, size_t sample_idx)
 *        continue in the current epoch at position shard_idx of the shard order, window number
 *        sample_idx of that shard's window order (sample_idx == its window count is allowed: the
 *        next batch then moves on). Set the epoch first (dataloader_set_state) when shuffling.
 *   DataLoaderState dataloader_get_state(const DataLoader*)
 *   void dataloader_set_state(DataLoader*, const DataLoaderState&, const char* source)
 *        exact save/restore (run_state.h stores it); after set_state the batches equal the
 *        uninterrupted sequence. `source` (the state file) is named in errors.
 *   void dataloader_check_tokens(const DataLoader*, const char* flag_name, int vocab_size)
 *        reads every token of every shard (start-up check, before any GPU work): the first id >=
 *        vocab_size stops with the shard name and position. Memory/disk-bandwidth bound; prints
 *        progress to stderr when the shards are large.
 *   void dataloader_begin_step(DataLoader*, bool overfit_single_batch)
 *        call before the micro-batches of each optimizer step. With overfit (-a 1) the loader goes
 *        back to the start, as llm.c does: every step reads windows 0..accum-1 again, micro-step k
 *        reading window k. Without it, nothing (the data simply continues).
 *   void dataloader_free(DataLoader*)
 *
 * Every token of a loaded window is checked against the GPT-2 vocabulary (< 50257); a bad id stops
 * with the shard name and token position. Every user error goes through fatal() (exit code 1).
 */
#pragma once

#include <glob.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "llmc/rand.h"
#include "llmc/utils.h"

constexpr int32_t SHARD_MAGIC = 20240520;
constexpr int32_t SHARD_VERSION = 1;
constexpr int32_t DATALOADER_VOCAB_SIZE = 50257;  // GPT-2: valid token ids are 0..50256

// Everything needed to continue the exact batch sequence (written by run_state.h).
struct DataLoaderState {
    uint64_t epoch = 0;
    uint64_t shard_idx = 0;              // position in shard_order
    uint64_t sample_idx = 0;             // position in sample_order (next window to read)
    uint64_t shuffle_rng = 0;            // RNG state after drawing sample_order (0 if not shuffling)
    std::vector<int32_t> shard_order;    // (num_shards) this epoch's shard permutation
    std::vector<int32_t> sample_order;   // (windows of the current shard) window permutation
};

struct DataLoader {
    // configuration
    size_t B = 0, T = 0;
    int process_rank = 0, num_processes = 1;
    bool shuffle = false;
    uint64_t seed = 0;
    std::vector<std::string> shard_paths;    // sorted glob result
    std::vector<size_t> shard_num_windows;   // windows of P*B*T tokens per shard
    size_t total_windows = 0;
    // position
    DataLoaderState st;
    int current_file_shard = -1;             // shard whose file is open in fp, -1 if none
    FILE* fp = nullptr;
    // buffers
    uint16_t* buffer = nullptr;              // (B*T+1) raw tokens of the current window
    int* inputs = nullptr;                   // (B, T)
    int* targets = nullptr;                  // (B, T)
};

// ----------------------------------------------------------------------------
// internals

// Reads and validates one shard header and the file size; returns the number of tokens.
inline size_t dataloader_check_shard_(const std::string& path) {
    FILE* f = fopen_check(path.c_str(), "rb");
    long size = file_size_of(f, path.c_str());
    if (size < (long)FILE_HEADER_BYTES) {
        fatal("token shard '%s' is too small to hold a header (%ld bytes, need %zu)",
              path.c_str(), size, FILE_HEADER_BYTES);
    }
    int32_t header[FILE_HEADER_INTS];
    fread_check(header, sizeof(int32_t), FILE_HEADER_INTS, f, path.c_str());
    fclose_check(f, path.c_str());
    if (header[0] != SHARD_MAGIC) {
        fatal("token shard '%s' has bad magic %d (expected %d): not a token shard", path.c_str(),
              header[0], SHARD_MAGIC);
    }
    if (header[1] != SHARD_VERSION) {
        fatal("token shard '%s' has version %d, only version %d (uint16 tokens) is supported",
              path.c_str(), header[1], SHARD_VERSION);
    }
    if (header[2] < 0) fatal("token shard '%s' has negative token count %d", path.c_str(), header[2]);
    size_t ntok = (size_t)header[2];
    size_t expected = FILE_HEADER_BYTES + ntok * sizeof(uint16_t);
    if ((size_t)size != expected) {
        fatal("token shard '%s' is %ld bytes but its header says %zu tokens (%zu bytes): "
              "truncated or corrupted", path.c_str(), size, ntok, expected);
    }
    return ntok;
}

// Window order of the shard at position pos of the current epoch; leaves the RNG in st.shuffle_rng.
inline void dataloader_make_sample_order_(DataLoader* dl, size_t pos) {
    size_t shard = (size_t)dl->st.shard_order[pos];
    size_t n = dl->shard_num_windows[shard];
    dl->st.sample_order.resize(n);
    if (dl->shuffle) {
        uint64_t rng = rng_seed(dl->seed ^ rng_mix64(dl->st.epoch), pos + 1);
        random_permutation(dl->st.sample_order.data(), n, &rng);
        dl->st.shuffle_rng = rng;
    } else {
        for (size_t i = 0; i < n; i++) dl->st.sample_order[i] = (int32_t)i;
        dl->st.shuffle_rng = 0;
    }
}

inline void dataloader_make_shard_order_(DataLoader* dl) {
    size_t n = dl->shard_paths.size();
    dl->st.shard_order.resize(n);
    if (dl->shuffle) {
        uint64_t rng = rng_seed(dl->seed ^ rng_mix64(dl->st.epoch), 0);
        random_permutation(dl->st.shard_order.data(), n, &rng);
    } else {
        for (size_t i = 0; i < n; i++) dl->st.shard_order[i] = (int32_t)i;
    }
}

inline void dataloader_open_shard_(DataLoader* dl, int shard) {
    if (dl->current_file_shard == shard) return;
    if (dl->fp != nullptr) fclose_check(dl->fp, dl->shard_paths[dl->current_file_shard].c_str());
    dl->fp = fopen_check(dl->shard_paths[shard].c_str(), "rb");
    dl->current_file_shard = shard;
}

inline void dataloader_start_epoch_(DataLoader* dl, uint64_t epoch) {
    dl->st.epoch = epoch;
    dl->st.shard_idx = 0;
    dl->st.sample_idx = 0;
    dataloader_make_shard_order_(dl);
    dataloader_make_sample_order_(dl, 0);
}

// ----------------------------------------------------------------------------
// API

inline void dataloader_init(DataLoader* dl, const char* glob_pattern, const char* flag_name, size_t B,
                            size_t T, int process_rank, int num_processes, bool shuffle, uint64_t seed) {
    if (B == 0 || T == 0) fatal("data loader needs B > 0 and T > 0 (got B=%zu, T=%zu)", B, T);
    if (num_processes < 1 || process_rank < 0 || process_rank >= num_processes) {
        fatal("bad process rank %d of %d processes", process_rank, num_processes);
    }
    dl->B = B;
    dl->T = T;
    dl->process_rank = process_rank;
    dl->num_processes = num_processes;
    dl->shuffle = shuffle;
    dl->seed = seed;

    glob_t g;
    int rc = glob(glob_pattern, 0, nullptr, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == 0) globfree(&g);
        fatal("%s '%s' matches no files (expected token shards *.bin)", flag_name, glob_pattern);
    }
    dl->shard_paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(dl->shard_paths.begin(), dl->shard_paths.end());  // glob sorts by locale; make it bytewise
    if (dl->shard_paths.size() > (size_t)INT32_MAX) fatal("%s '%s' matches too many files", flag_name, glob_pattern);

    if (B > (size_t)INT32_MAX || T > (size_t)INT32_MAX || B * T > SIZE_MAX / 4 / (size_t)num_processes) {
        fatal("data loader: num_processes*B*T = %d*%zu*%zu is too large", num_processes, B, T);
    }
    size_t span = (size_t)num_processes * B * T;  // tokens of one global batch
    dl->shard_num_windows.clear();
    dl->total_windows = 0;
    for (const std::string& path : dl->shard_paths) {
        size_t ntok = dataloader_check_shard_(path);
        if (ntok < span + 1) {
            fatal("token shard '%s' has %zu tokens, fewer than one window of num_processes*B*T+1 = "
                  "%d*%zu*%zu+1 = %zu tokens: use a smaller -b/-t or fewer processes",
                  path.c_str(), ntok, num_processes, B, T, span + 1);
        }
        size_t windows = (ntok - 1) / span;
        if (windows > (size_t)INT32_MAX) fatal("token shard '%s' has too many windows", path.c_str());
        dl->shard_num_windows.push_back(windows);
        dl->total_windows += windows;
    }

    dl->buffer = (uint16_t*)malloc_check((B * T + 1) * sizeof(uint16_t));
    dl->inputs = (int*)malloc_check(B * T * sizeof(int));
    dl->targets = (int*)malloc_check(B * T * sizeof(int));
    dl->fp = nullptr;
    dl->current_file_shard = -1;
    dataloader_start_epoch_(dl, 0);
}

inline void dataloader_reset(DataLoader* dl) { dataloader_start_epoch_(dl, 0); }

inline void dataloader_begin_step(DataLoader* dl, bool overfit_single_batch) {
    if (overfit_single_batch) dataloader_reset(dl);
}

inline void dataloader_check_tokens(const DataLoader* dl, const char* flag_name, int vocab_size) {
    constexpr size_t CHUNK = (size_t)1 << 21;  // tokens per read (4 MiB)
    if (vocab_size > 65535) return;  // every uint16 id is valid
    std::vector<uint16_t> buf(CHUNK);
    uint64_t done = 0, total_bytes = 0;
    for (const std::string& path : dl->shard_paths) {
        struct stat sb;
        if (stat(path.c_str(), &sb) == 0) total_bytes += (uint64_t)sb.st_size;
    }
    const bool show_progress = total_bytes > ((uint64_t)1 << 30);  // a few seconds of reading and more
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    const uint16_t limit = (uint16_t)vocab_size;
    for (const std::string& path : dl->shard_paths) {
        FILE* f = fopen_check(path.c_str(), "rb");
        fseek_check(f, (long)FILE_HEADER_BYTES, SEEK_SET, path.c_str());
        size_t pos = 0;  // tokens of this shard read so far
        for (;;) {
            const size_t got = fread(buf.data(), sizeof(uint16_t), CHUNK, f);
            if (got == 0) {
                if (ferror(f)) fatal("read error on token shard '%s': %s", path.c_str(), strerror(errno));
                break;
            }
            // branch-free maximum (vectorises); the exact position is looked up only on failure
            uint16_t mx = 0;
            for (size_t i = 0; i < got; i++) mx = buf[i] > mx ? buf[i] : mx;
            if (mx >= limit) {
                size_t i = 0;
                while (buf[i] < limit) i++;
                fatal("%s: token shard '%s' has token id %u at position %zu, outside the model's vocabulary "
                      "(must be < %d): was it written with another tokenizer?", flag_name, path.c_str(),
                      (unsigned)buf[i], pos + i, vocab_size);
            }
            pos += got;
            done += got * sizeof(uint16_t);
            const auto now = std::chrono::steady_clock::now();
            if (show_progress && now - last > std::chrono::seconds(2)) {
                last = now;
                const double secs = std::chrono::duration<double>(now - t0).count();
                fprintf(stderr, "%s: checking token ids: %.1f of %.1f GB (%.1f GB/s)\n", flag_name, done / 1e9,
                        total_bytes / 1e9, done / 1e9 / secs);
            }
        }
        fclose_check(f, path.c_str());
    }
}

inline size_t dataloader_num_batches(const DataLoader* dl) { return dl->total_windows; }

inline void dataloader_next_batch(DataLoader* dl) {
    DataLoaderState& st = dl->st;
    // Lazy advance: a position past the last window of a shard means "next shard" (or next epoch).
    while (st.sample_idx >= st.sample_order.size()) {
        if (st.shard_idx + 1 < st.shard_order.size()) {
            st.shard_idx++;
            st.sample_idx = 0;
            dataloader_make_sample_order_(dl, st.shard_idx);
        } else {
            dataloader_start_epoch_(dl, st.epoch + 1);
        }
    }
    int shard = st.shard_order[st.shard_idx];
    size_t window = (size_t)st.sample_order[st.sample_idx];
    size_t BT = dl->B * dl->T;
    size_t offset = window * (size_t)dl->num_processes * BT + (size_t)dl->process_rank * BT;  // tokens
    const char* path = dl->shard_paths[shard].c_str();
    dataloader_open_shard_(dl, shard);
    fseek_check(dl->fp, (long)(FILE_HEADER_BYTES + offset * sizeof(uint16_t)), SEEK_SET, path);
    fread_check(dl->buffer, sizeof(uint16_t), BT + 1, dl->fp, path);
    for (size_t i = 0; i <= BT; i++) {
        if (dl->buffer[i] >= DATALOADER_VOCAB_SIZE) {
            fatal("token shard '%s' has token id %u at position %zu, outside the vocabulary "
                  "(must be < %d)", path, (unsigned)dl->buffer[i], offset + i, DATALOADER_VOCAB_SIZE);
        }
    }
    for (size_t i = 0; i < BT; i++) {
        dl->inputs[i] = dl->buffer[i];
        dl->targets[i] = dl->buffer[i + 1];
    }
    st.sample_idx++;
}

inline void dataloader_resume(DataLoader* dl, size_t shard_idx, size_t sample_idx) {
    if (shard_idx >= dl->shard_paths.size()) {
        fatal("cannot resume the data loader at shard %zu: only %zu shards match", shard_idx,
              dl->shard_paths.size());
    }
    dl->st.shard_idx = shard_idx;
    dataloader_make_sample_order_(dl, shard_idx);
    if (sample_idx > dl->st.sample_order.size()) {
        fatal("cannot resume the data loader at window %zu of shard '%s': it has only %zu windows "
              "(different -b/-t/process count or shards than the saved run?)", sample_idx,
              dl->shard_paths[dl->st.shard_order[shard_idx]].c_str(), dl->st.sample_order.size());
    }
    dl->st.sample_idx = sample_idx;
}

inline DataLoaderState dataloader_get_state(const DataLoader* dl) { return dl->st; }

// Checks that v is a permutation of 0..n-1.
inline bool dataloader_is_permutation_(const std::vector<int32_t>& v, size_t n) {
    if (v.size() != n) return false;
    std::vector<char> seen(n, 0);
    for (int32_t x : v) {
        if (x < 0 || (size_t)x >= n || seen[x]) return false;
        seen[x] = 1;
    }
    return true;
}

inline void dataloader_set_state(DataLoader* dl, const DataLoaderState& s, const char* source) {
    size_t nshards = dl->shard_paths.size();
    if (s.shard_idx >= nshards) {
        fatal("'%s': saved data position is shard %llu but only %zu shards match now", source,
              (unsigned long long)s.shard_idx, nshards);
    }
    dl->st.epoch = s.epoch;
    if (dl->shuffle) {
        if (!dataloader_is_permutation_(s.shard_order, nshards)) {
            fatal("'%s': saved shard order is not a permutation of the %zu shards that match now",
                  source, nshards);
        }
        dl->st.shard_order = s.shard_order;
    } else {
        dataloader_make_shard_order_(dl);
    }
    dataloader_resume(dl, s.shard_idx, s.sample_idx);
    if (dl->shuffle) {
        if (!dataloader_is_permutation_(s.sample_order, dl->st.sample_order.size())) {
            fatal("'%s': saved window order has %zu entries, the current shard has %zu windows "
                  "(different -b/-t/process count or shards than the saved run?)", source,
                  s.sample_order.size(), dl->st.sample_order.size());
        }
        dl->st.sample_order = s.sample_order;
        dl->st.shuffle_rng = s.shuffle_rng;
    }
}

inline void dataloader_free(DataLoader* dl) {
    if (dl->fp != nullptr) fclose(dl->fp);
    dl->fp = nullptr;
    dl->current_file_shard = -1;
    free(dl->buffer);
    free(dl->inputs);
    free(dl->targets);
    dl->buffer = nullptr;
    dl->inputs = nullptr;
    dl->targets = nullptr;
}
