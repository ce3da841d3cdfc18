/*
 * Token-shard data loader (docs/formats.md "Token shards", magic 20240520), host only.
 *
 * A shard is 1024 header bytes then n uint16 token ids. Shards are found with glob() and taken in
 * sorted order; init validates every header and file size (not the token ids, see below), so
 * start-up time does not grow with the data. The loader never maps a whole shard: each batch is one
 * fseek + fread of B*T+1 tokens.
 *
 * Windows: a shard of n tokens holds W = (n - 1) / (P*B*T) windows of P*B*T tokens (P = number of
 * processes). Window w starts at token w*P*B*T; process r reads its B*T+1 tokens at offset r*B*T
 * inside it, so the P processes together read exactly what one process with batch P*B would read.
 * After a window the loader advances to the next one; when none is left in the shard it moves to
 * the next shard, and after the last shard it starts a new epoch at the first shard (reshuffled when
 * shuffling). A caller may take more batches than an epoch holds (an optimizer step of more
 * micro-batches than the data has windows): the loader simply goes on into the next epoch, as llm.c's.
 *
 * Token ids: every id of a shard is checked against the vocabulary (< vocab_size) before the first
 * window of that shard is handed out, once per loader (a shard read again in a later epoch, or after
 * a reset, is not checked again). A bad id stops with the flag, the shard, the position and the value;
 * no batch of that shard has been returned by then. While a shard is being read, the shard the loader
 * will move to after it (next in the order, or the first of the next epoch: its order is computed
 * ahead on a copy of the generator) is checked on a background thread; the result is only looked at
 * when that shard is needed, so what the loader returns and when it stops never depends on timing.
 * dataloader_check_upcoming does the check of the shard the next batch reads at once (the trainer
 * calls it at start-up, before the GPU, so a bad first shard is still a start-up error).
 *
 * Shuffling (shuffle = true: the train loader by default, as llm.c; never the val loader), exactly
 * llm.c's algorithm (llmc/dataloader.h at f1e2ace), so the same shards give the same batches in the
 * same order as llm.c at any process count and rank:
 *  - one MT19937 (rand.h) per loader, seeded with 42 + process_rank: the ranks shuffle independently
 *    (a global batch is not one window read by all ranks, as it is without shuffling; over an epoch
 *    every rank still reads its slot of every window exactly once);
 *  - the shard order starts as the identity; at the start of every epoch (init included) it is
 *    permuted IN PLACE, so each epoch permutes the previous epoch's order (cumulative);
 *  - whenever a shard becomes current (first shard of an epoch, or the next shard), its window order
 *    is reset to the identity and permuted, drawing after the shard permutation.
 * The generator's state, both orders and the two positions are the whole state (run_state.h writes
 * them in llm.c's layout). Without shuffling both orders are the identity.
 *
 * API
 *   std::vector<std::string> dataloader_glob(const char* glob_pattern, const char* flag_name)
 *        the shards a pattern matches, sorted; fatal naming flag_name when it matches none.
 *   void dataloader_init(DataLoader*, const char* glob_pattern, const char* flag_name, size_t B,
 *                        size_t T, int process_rank, int num_processes, bool shuffle)
 *        headers and sizes only. flag_name (e.g. "-i") is named in the errors (no match, bad ids).
 *        The ids are checked against the GPT-2 vocabulary (GPT2_VOCAB_SIZE) until dataloader_set_vocab.
 *   void dataloader_set_vocab(DataLoader*, const char* flag_name, int vocab_size)
 *        the vocabulary the ids must be below (the model's), and the flag named in id errors; reads
 *        nothing. Shards checked against another vocabulary before are checked again.
 *   void dataloader_check_upcoming(DataLoader*)
 *        checks now the shard the next batch reads (fatal on a bad id), then starts the background
 *        check of the shard after it. Without this call the check happens in the next batch.
 *   void dataloader_next_batch(DataLoader*)    inputs = tokens [0, B*T), targets = tokens [1, B*T]
 *                                              of this process's window (int32, B*T each, overwritten)
 *   void dataloader_reset(DataLoader*)         llm.c's reset: back to the first shard of the shard
 *                                              order; without shuffling the same batches again, with
 *                                              shuffling new orders (the generator moves on)
 *   size_t dataloader_num_batches(const DataLoader*)   windows per epoch (= global batches per epoch)
 *   DataLoaderState dataloader_get_state(const DataLoader*)
 *   void dataloader_set_state(DataLoader*, const DataLoaderState&, const char* source)
 *        exact save/restore (run_state.h stores it); after set_state the batches equal the
 *        uninterrupted sequence. A state whose shard count or window count does not fit this loader
 *        is refused naming both numbers; `source` (the state file) is named in errors. sample_idx may
 *        equal the shard's window count (the next batch then moves on, as in llm.c).
 *   void dataloader_begin_step(DataLoader*, bool overfit_single_batch)
 *        call before the micro-batches of each optimizer step. With overfit (-a 1, which also turns
 *        shuffling off) the loader goes back to the start, as llm.c does: every step reads windows
 *        0..accum-1 again, micro-step k reading window k. Without it, nothing (the data continues).
 *   void dataloader_free(DataLoader*)          waits for a background check still running
 *
 * Every user error goes through fatal() (exit code 1); the background thread never calls it.
 */
#pragma once

#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <system_error>
#include <vector>

#include "llmc/file_header.h"
#include "llmc/gpt2_vocab.h"
#include "llmc/rand.h"
#include "llmc/utils.h"

constexpr uint32_t DATALOADER_SHUFFLE_SEED = 42;  // llm.c: manual_seed(42 + process_rank)

// Everything needed to continue the exact batch sequence (written by run_state.h; the names in
// brackets are llm.c's DataLoader fields that hold the same values).
struct DataLoaderState {
    uint64_t epoch = 0;                  // epochs completed (ours, for information; not in llm.c)
    uint64_t shard_idx = 0;              // position in shard_order [current_shard_idx]
    uint64_t sample_idx = 0;             // position in sample_order of the next window [current_sample_idx]
    std::vector<int32_t> shard_order;    // (num_shards) [shard_indices]; identity without shuffling
    std::vector<int32_t> sample_order;   // (windows of the current shard) [intra_shard_indices]
    Mt19937State rng = {};               // shuffling generator [shuffle_rng]; unused without shuffling
};

// What reading every token id of one shard found (computed off the main thread: no fatal() inside).
struct ShardScan {
    bool bad = false;          // an id >= the vocabulary size was found
    size_t bad_position = 0;   // its token position in the shard
    unsigned bad_value = 0;    // its value
    int read_errno = 0;        // non-zero: the shard could not be read (errno)
};

struct DataLoader : LoaderShape {  // B, T, process_rank, num_processes
    // configuration
    bool shuffle = false;
    std::string flag_name;                   // named in errors ("-i", "-j")
    int vocab_size = GPT2_VOCAB_SIZE;  // token ids must be below this
    std::vector<std::string> shard_paths;    // sorted glob result
    std::vector<size_t> shard_num_windows;   // windows of P*B*T tokens per shard
    size_t total_windows = 0;
    // position
    DataLoaderState st;
    int current_file_shard = -1;             // shard whose file is open in fp, -1 if none
    FILE* fp = nullptr;
    // token-id checks
    std::vector<uint8_t> shard_checked;      // (num_shards) 1 once every id of the shard is known good
    size_t num_checked = 0;                  // shards with shard_checked set
    size_t num_scans = 0;                    // shards read in full so far (each at most once per vocabulary)
    int scan_shard = -1;                     // shard being checked in the background, -1 if none
    std::shared_future<ShardScan> scan;      // its result
    // buffers
    uint16_t* buffer = nullptr;              // (B*T+1) raw tokens of the current window
    int* inputs = nullptr;                   // (B, T)
    int* targets = nullptr;                  // (B, T)
};

// ----------------------------------------------------------------------------
// internals

// Reads and validates one shard header and the file size; returns the number of tokens.
inline size_t dataloader_check_shard_(const std::string& path) {
    int32_t header[FILE_HEADER_INTS];
    long size = 0;
    file_header_read(path.c_str(), SHARD_MAGIC, header, &size);
    if (header[2] < 0) fatal("token shard '%s' has negative token count %d", path.c_str(), header[2]);
    const size_t ntok = (size_t)header[2];
    const std::string says = std::to_string(ntok) + " tokens";
    file_size_check(path.c_str(), SHARD_MAGIC, size, FILE_HEADER_BYTES + ntok * sizeof(uint16_t), says.c_str());
    return ntok;
}

// The current shard's window order: the identity, permuted when shuffling (llm.c's
// prepare_intra_shard_indices_).
inline void dataloader_make_sample_order_(DataLoader* dl) {
    const size_t n = dl->shard_num_windows[(size_t)dl->st.shard_order[dl->st.shard_idx]];
    std::vector<int32_t>& order = dl->st.sample_order;
    order.resize(n);
    for (size_t i = 0; i < n; i++) order[i] = (int32_t)i;
    if (dl->shuffle) mt19937_permute(order.data(), (int32_t)n, &dl->st.rng);
}

// llm.c's dataloader_reset: first shard of the order (re-permuted in place when shuffling).
inline void dataloader_restart_(DataLoader* dl) {
    DataLoaderState& st = dl->st;
    st.shard_idx = 0;
    st.sample_idx = 0;
    if (dl->shuffle) mt19937_permute(st.shard_order.data(), (int32_t)st.shard_order.size(), &st.rng);
    dataloader_make_sample_order_(dl);
}

inline void dataloader_open_shard_(DataLoader* dl, int shard) {
    if (dl->current_file_shard == shard) return;
    if (dl->fp != nullptr) fclose_check(dl->fp, dl->shard_paths[dl->current_file_shard].c_str());
    dl->fp = fopen_check(dl->shard_paths[shard].c_str(), "rb");
    dl->current_file_shard = shard;
}

// Reads every token id of a shard and finds the first one >= vocab_size. Runs on the background
// thread too, so it reports instead of calling fatal().
inline ShardScan dataloader_scan_shard_(const std::string& path, int vocab_size) {
    constexpr size_t CHUNK = (size_t)1 << 21;  // tokens per read (4 MiB)
    ShardScan r;
    FILE* f = fopen(path.c_str(), "rb");
    if (f == nullptr || fseek(f, (long)FILE_HEADER_BYTES, SEEK_SET) != 0) {
        r.read_errno = errno != 0 ? errno : EIO;
        if (f != nullptr) fclose(f);
        return r;
    }
    std::vector<uint16_t> buf(CHUNK);
    const uint16_t limit = (uint16_t)vocab_size;  // callers skip the scan when vocab_size > 65535
    size_t pos = 0;  // tokens read so far
    for (;;) {
        const size_t got = fread(buf.data(), sizeof(uint16_t), CHUNK, f);
        if (got == 0) {
            if (ferror(f)) r.read_errno = errno != 0 ? errno : EIO;
            break;
        }
        // branch-free maximum (vectorises); the exact position is looked up only on failure
        uint16_t mx = 0;
        for (size_t i = 0; i < got; i++) mx = buf[i] > mx ? buf[i] : mx;
        if (mx >= limit) {
            size_t i = 0;
            while (buf[i] < limit) i++;
            r.bad = true;
            r.bad_position = pos + i;
            r.bad_value = buf[i];
            break;
        }
        pos += got;
    }
    fclose(f);
    return r;
}

// The outcome of a shard's scan: fatal when it found a bad id or could not read the shard.
inline void dataloader_take_scan_(DataLoader* dl, int shard, const ShardScan& r) {
    const char* path = dl->shard_paths[(size_t)shard].c_str();
    if (r.read_errno != 0) fatal("%s: read error on token shard '%s': %s", dl->flag_name.c_str(), path, strerror(r.read_errno));
    if (r.bad) {
        fatal("%s: token shard '%s' has token id %u at position %zu, outside the model's vocabulary (must be < %d): "
              "was it written with another tokenizer?", dl->flag_name.c_str(), path, r.bad_value, r.bad_position,
              dl->vocab_size);
    }
    if (!dl->shard_checked[(size_t)shard]) {
        dl->shard_checked[(size_t)shard] = 1;
        dl->num_checked++;
    }
}

// The shard that becomes current after the current one: the next in the shard order, or after the
// last the first of the next epoch, whose order restart_ will draw (worked out on copies).
inline int dataloader_shard_after_current_(const DataLoader* dl) {
    const DataLoaderState& st = dl->st;
    if (st.shard_idx + 1 < st.shard_order.size()) return st.shard_order[st.shard_idx + 1];
    if (!dl->shuffle) return st.shard_order[0];
    std::vector<int32_t> order = st.shard_order;
    Mt19937State rng = st.rng;
    mt19937_permute(order.data(), (int32_t)order.size(), &rng);
    return order[0];
}

// The shard the next batch reads (the next batch moves on first when the current one is used up).
inline int dataloader_upcoming_shard_(const DataLoader* dl) {
    if (dl->st.sample_idx < dl->st.sample_order.size()) return dl->st.shard_order[dl->st.shard_idx];
    return dataloader_shard_after_current_(dl);
}

// Blocks until `shard` is known good (its background check, or a check here); fatal if it is not.
inline void dataloader_ensure_checked_(DataLoader* dl, int shard) {
    if (dl->shard_checked[(size_t)shard]) return;
    if (dl->scan_shard == shard) {
        const ShardScan r = dl->scan.get();
        dl->scan = std::shared_future<ShardScan>();
        dl->scan_shard = -1;
        dataloader_take_scan_(dl, shard, r);
        return;
    }
    dl->num_scans++;
    dataloader_take_scan_(dl, shard, dataloader_scan_shard_(dl->shard_paths[(size_t)shard], dl->vocab_size));
}

// One background check at a time, of the shard after the current one. A finished good result is
// recorded; a bad one stays in `scan` until that shard is needed (dataloader_ensure_checked_).
inline void dataloader_prefetch_check_(DataLoader* dl) {
    if (dl->scan_shard >= 0) {
        if (dl->scan.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
        const ShardScan& r = dl->scan.get();
        if (r.bad || r.read_errno != 0) return;  // kept for when the shard is needed
        dataloader_take_scan_(dl, dl->scan_shard, r);
        dl->scan = std::shared_future<ShardScan>();
        dl->scan_shard = -1;
    }
    if (dl->num_checked == dl->shard_paths.size()) return;
    const int next = dataloader_shard_after_current_(dl);
    if (dl->shard_checked[(size_t)next]) return;
    try {
        dl->scan = std::async(std::launch::async, dataloader_scan_shard_, dl->shard_paths[(size_t)next], dl->vocab_size).share();
    } catch (const std::system_error&) {
        return;  // no thread to be had: the shard is checked when it is needed, on this thread
    }
    dl->num_scans++;
    dl->scan_shard = next;
}

// Drops the background check (waiting for it to finish) and forgets every result.
inline void dataloader_forget_checks_(DataLoader* dl) {
    if (dl->scan.valid()) dl->scan.wait();
    dl->scan = std::shared_future<ShardScan>();
    dl->scan_shard = -1;
    dl->shard_checked.assign(dl->shard_paths.size(), 0);
    dl->num_checked = 0;
}

// ----------------------------------------------------------------------------
// API

// The one check of a shard pattern: the files it matches, sorted bytewise (glob sorts by locale);
// none is an error naming the flag.
inline std::vector<std::string> dataloader_glob(const char* glob_pattern, const char* flag_name) {
    glob_t g;
    int rc = glob(glob_pattern, 0, nullptr, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == 0) globfree(&g);
        fatal("%s '%s' matches no files (expected token shards *.bin; for Tiny Shakespeare run "
              "dev/data/tinyshakespeare.sh)", flag_name, glob_pattern);
    }
    std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(paths.begin(), paths.end());
    if (paths.size() > (size_t)INT32_MAX) fatal("%s '%s' matches too many files", flag_name, glob_pattern);
    return paths;
}

inline void dataloader_init(DataLoader* dl, const char* glob_pattern, const char* flag_name, size_t B,
                            size_t T, int process_rank, int num_processes, bool shuffle) {
    if (B == 0 || T == 0) fatal("data loader needs B > 0 and T > 0 (got B=%zu, T=%zu)", B, T);
    loader_shape_set(dl, "data loader", B, T, process_rank, num_processes);
    dl->shuffle = shuffle;
    dl->flag_name = flag_name;
    dl->vocab_size = GPT2_VOCAB_SIZE;

    dl->shard_paths = dataloader_glob(glob_pattern, flag_name);

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
    dataloader_forget_checks_(dl);
    dl->num_scans = 0;
    dl->st = DataLoaderState();
    dl->st.shard_order.resize(dl->shard_paths.size());
    for (size_t i = 0; i < dl->shard_paths.size(); i++) dl->st.shard_order[i] = (int32_t)i;
    if (shuffle) mt19937_seed(&dl->st.rng, DATALOADER_SHUFFLE_SEED + (uint32_t)process_rank);
    dataloader_restart_(dl);
}

inline void dataloader_reset(DataLoader* dl) { dataloader_restart_(dl); }

inline void dataloader_begin_step(DataLoader* dl, bool overfit_single_batch) {
    if (overfit_single_batch) dataloader_reset(dl);
}

inline void dataloader_set_vocab(DataLoader* dl, const char* flag_name, int vocab_size) {
    if (vocab_size < 1) fatal("%s: vocabulary size %d: must be >= 1", flag_name, vocab_size);
    dl->flag_name = flag_name;
    if (vocab_size == dl->vocab_size) return;
    dl->vocab_size = vocab_size;
    dataloader_forget_checks_(dl);
    if (vocab_size > 65535) {  // every uint16 id is valid: nothing to read
        dl->shard_checked.assign(dl->shard_paths.size(), 1);
        dl->num_checked = dl->shard_paths.size();
    }
}

inline void dataloader_check_upcoming(DataLoader* dl) {
    dataloader_ensure_checked_(dl, dataloader_upcoming_shard_(dl));
    dataloader_prefetch_check_(dl);
}

inline size_t dataloader_num_batches(const DataLoader* dl) { return dl->total_windows; }

inline void dataloader_next_batch(DataLoader* dl) {
    DataLoaderState& st = dl->st;
    // Lazy advance, as llm.c: a position past the last window of a shard means "next shard", or
    // after the last shard a new epoch. Every shard has at least one window (init checks).
    if (st.sample_idx >= st.sample_order.size()) {
        if (st.shard_idx + 1 < st.shard_order.size()) {
            st.shard_idx++;
            st.sample_idx = 0;
            dataloader_make_sample_order_(dl);
        } else {
            st.epoch++;
            dataloader_restart_(dl);
        }
    }
    int shard = st.shard_order[st.shard_idx];
    dataloader_ensure_checked_(dl, shard);  // before any window of the shard is handed out
    dataloader_prefetch_check_(dl);
    size_t window = (size_t)st.sample_order[st.sample_idx];
    size_t BT = dl->B * dl->T;
    size_t offset = window * (size_t)dl->num_processes * BT + (size_t)dl->process_rank * BT;  // tokens
    const char* path = dl->shard_paths[shard].c_str();
    dataloader_open_shard_(dl, shard);
    fseek_check(dl->fp, (long)(FILE_HEADER_BYTES + offset * sizeof(uint16_t)), SEEK_SET, path);
    fread_check(dl->buffer, sizeof(uint16_t), BT + 1, dl->fp, path);
    for (size_t i = 0; i <= BT; i++) {  // the shard was checked; this catches a file changed since
        if (dl->buffer[i] >= (unsigned)dl->vocab_size) {
            fatal("%s: token shard '%s' has token id %u at position %zu, outside the model's vocabulary (must be < %d): "
                  "it changed after it was checked", dl->flag_name.c_str(), path, (unsigned)dl->buffer[i], offset + i,
                  dl->vocab_size);
        }
    }
    for (size_t i = 0; i < BT; i++) {
        dl->inputs[i] = dl->buffer[i];
        dl->targets[i] = dl->buffer[i + 1];
    }
    st.sample_idx++;
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
    const size_t nshards = dl->shard_paths.size();
    if (dl->shuffle && s.shard_order.size() != nshards) {
        fatal("'%s': the saved data order covers %zu shards, but %zu shards match now (different -i than "
              "the saved run?)", source, s.shard_order.size(), nshards);
    }
    if (dl->shuffle && !dataloader_is_permutation_(s.shard_order, nshards)) {
        fatal("'%s' is corrupted: its saved shard order is not a permutation of 0..%zu", source, nshards - 1);
    }
    if (s.shard_idx >= nshards) {
        fatal("'%s': saved data position is shard %llu but only %zu shards match now", source,
              (unsigned long long)s.shard_idx, nshards);
    }
    const size_t shard = dl->shuffle ? (size_t)s.shard_order[s.shard_idx] : (size_t)s.shard_idx;
    const size_t windows = dl->shard_num_windows[shard];
    const char* shard_path = dl->shard_paths[shard].c_str();
    if (dl->shuffle && s.sample_order.size() != windows) {
        fatal("'%s': the saved window order has %zu windows, but shard '%s' has %zu windows of "
              "num_processes*B*T = %d*%zu*%zu tokens (different -b/-t/process count or shards than the saved "
              "run?)", source, s.sample_order.size(), shard_path, windows, dl->num_processes, dl->B, dl->T);
    }
    if (s.sample_idx > windows) {
        fatal("'%s': saved data position is window %llu of shard '%s', which has only %zu windows of "
              "num_processes*B*T = %d*%zu*%zu tokens (different -b/-t/process count or shards than the saved "
              "run?)", source, (unsigned long long)s.sample_idx, shard_path, windows, dl->num_processes, dl->B,
              dl->T);
    }
    if (dl->shuffle && !dataloader_is_permutation_(s.sample_order, windows)) {
        fatal("'%s' is corrupted: its saved window order is not a permutation of 0..%zu", source, windows - 1);
    }
    if (dl->shuffle && !mt19937_valid(s.rng)) {
        fatal("'%s' is corrupted: its saved shuffle generator state is not an MT19937 state", source);
    }
    if (dl->shuffle) {
        dl->st = s;
    } else {
        dl->st.epoch = s.epoch;
        dl->st.shard_idx = s.shard_idx;
        dataloader_make_sample_order_(dl);
        dl->st.sample_idx = s.sample_idx;
    }
}

inline void dataloader_free(DataLoader* dl) {
    dataloader_forget_checks_(dl);
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
