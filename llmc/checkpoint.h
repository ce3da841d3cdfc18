/*
 * Checkpoints, host side: which fp32 blocks form a state file's body, and reading one checkpoint
 * (model file header + this process's state file) into host memory. The GPU side (writing a
 * checkpoint, uploading one that was read) is llmc/checkpoint.cuh; file formats in llmc/run_state.h
 * and llmc/model_file.h. Also the checkpoint directory: paths, DONE files, leftovers. (Deleting old
 * checkpoints, llm.c's -nk / -nm rule, is llmc/train_plan.h.)
 *
 * State file body (docs/formats.md "Run state"): AdamW m, AdamW v, then the fp32 master weights when header slot 4 is
 * 1; each block holds this process's optimizer shard (all parameters without ZeRO-1), in floats.
 *   BF16 build: the master block is the master copy the update keeps (-w 1), written once it exists
 *     (the first update makes it from the parameters; before that a -w 1 run writes none, and a
 *     resume makes it from the parameters again). Reading a file with one needs -w 1.
 *   FP32 build: the parameters are fp32 already, so the master block is the parameters' shard. It is
 *     written with -w 1 (the default), as llm.c's FP32 build does: its default -w 1 keeps an fp32 copy
 *     equal to the parameters bit for bit (made by an fp32 -> fp32 copy; then llm.c llmc/adamw.cuh
 *     stores one fp32 result to both, its stochastic_rounding to float being a plain store), and it
 *     stops on a state file without the block. With -w 0 none is written (llm.c's -w 0 expects
 *     none). A file with the block is read with either -w, and the block is checked, not used: it
 *     must equal the parameters of the checkpoint's model file bit for bit (checkpoint_upload). Using
 *     it could only give the same numbers; checking catches a model file and a state file of
 *     different checkpoints, and the FP32 update stays as it is (it keeps no fp32 copy).
 *
 * API
 *   enum class StateBlock { adamw_m, adamw_v, master }
 *   StateBody state_body_to_write(bool bf16_build, bool master_weights, bool master_ready, size_t shard)
 *        the blocks a state file of this run holds, in file order; master_weights: -w; master_ready:
 *        a BF16 run's master copy exists (ignored in FP32 builds); shard: optimizer elements of this process
 *   StateBody state_body_to_read(bool bf16_build, bool master_weights, bool file_has_master, size_t shard)
 *        the blocks to read from a file whose slot 4 is file_has_master; .refused names why this run
 *        cannot read it (empty: it can)
 *   std::vector<HostBuffer> state_body_buffers(const StateBody&, float* m, float* v, float* master)
 *        the body in file order over the caller's arrays (each body.elements floats)
 *   std::string state_body_values_problem(m, v, master)
 *        "" when m and master are finite and v finite and >= 0, else the first value that is not
 *        (block, element, value); on up to 16 threads
 *   void checkpoint_read(CheckpointRead* out, dir, step, const GPT2Config& expect, const std::string& cfg_source,
 *                        int num_processes, int rank, size_t shard, bool bf16_build, bool master_weights,
 *                        ZeroLayout layout = llmc)
 *        reads and checks checkpoint `step` of dir: the model file's header against `expect` (the
 *        message names cfg_source, e.g. "-e d12"), the whole state file (llmc/run_state.h checks), that
 *        the state file holds `step` (header slot 10), that neither file is a link to a file of another
 *        step (ckpt_linked_step_), and that a ZeRO-1 shard (P > 1, shard < N) is in this run's `layout`
 *        (llmc/zero_shards.h); out
 *        gets the paths, the header, the run state and the m / v / master blocks (master empty when
 *        the file has none), their values checked (state_body_values_problem). One fatal() naming the
 *        file on any problem.
 *
 * Checkpoint directory (a checkpoint of step S is complete once DONE_%08d exists):
 *   std::string ckpt_model_path(dir, step)        DIR/model_%08d.bin
 *   std::string ckpt_state_path(dir, step, rank)  DIR/state_%08d_%05d.bin
 *   std::string ckpt_done_path(dir, step)         DIR/DONE_%08d
 *   void ckpt_make_dir(dir)                       mkdir -p; fatal naming -o on failure
 *   void ckpt_write_done(dir, step)               fsyncs the directory, then creates the empty DONE
 *   void ckpt_check_writable(dir)                 creates and deletes a probe file; fatal naming -o
 *   int  ckpt_find_latest(dir)                    largest step with a DONE file, -1 if none/no dir; fatal
 *                                                 when that DONE is not a regular file (a FIFO, a folder)
 *   std::string ckpt_incomplete_problem(dir, step, rank)
 *        "" when the checkpoint `step` that a DONE file names can be resumed by `rank` (-1: the model
 *        file only), else why not: DONE is a directory or a link to nothing, the model file or the
 *        rank's state file is missing or not a file. For the start-up, before anything is read.
 *   std::vector<std::string> ckpt_remove_leftovers(dir, rank)
 *        deletes the temporary files an interrupted checkpoint left (<name>.tmp.<hex>, or <name>.tmp
 *        of earlier builds; rank 0: of model and DONE files and its state file; rank r > 0: of its own
 *        state file only; regular files only: never a link or what it points to) and returns their
 *        paths. Call at start-up, when nothing writes to dir.
 */
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "llmc/model_file.h"
#include "llmc/run_state.h"
#include "llmc/zero_shards.h"

// ----------------------------------------------------------------------------
// checkpoint directory

inline std::string ckpt_path_(const std::string& dir, const char* fmt, int a, int b = 0) {
    char name[64];
    snprintf(name, sizeof(name), fmt, a, b);
    return dir + "/" + name;
}
inline std::string ckpt_model_path(const std::string& dir, int step) { return ckpt_path_(dir, "model_%08d.bin", step); }
inline std::string ckpt_state_path(const std::string& dir, int step, int rank) { return ckpt_path_(dir, "state_%08d_%05d.bin", step, rank); }
inline std::string ckpt_done_path(const std::string& dir, int step) { return ckpt_path_(dir, "DONE_%08d", step); }

inline void ckpt_make_dir(const std::string& dir) {
    if (dir.empty()) fatal("-o: empty output directory");
    for (size_t i = 1; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            std::string prefix = dir.substr(0, i);
            if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
                fatal("-o: cannot create directory '%s': %s", prefix.c_str(), strerror(errno));
            }
        }
    }
    struct stat sb;
    if (stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) fatal("-o: '%s' is not a directory", dir.c_str());
}

// Output folders on a read-only file system (or without write permission) exist but refuse files:
// found at start-up instead of at the first checkpoint.
// The probe is created as the checkpoint writers create theirs (temp_file_create: a new file under a
// random name, never through a link).
inline void ckpt_check_writable(const std::string& dir) {
    std::string probe;
    FILE* fp = temp_file_create(dir + "/.gpt2cu_write_probe", &probe);
    if (fp == nullptr) fatal("-o: cannot write files in '%s': %s", dir.c_str(), strerror(errno));
    fclose(fp);
    unlink(probe.c_str());
}

// Makes completed renames in dir durable before anything that depends on them is written.
inline void ckpt_fsync_dir_(const std::string& dir) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) fatal("cannot open checkpoint directory '%s': %s", dir.c_str(), strerror(errno));
    fsync(fd);  // best effort: some file systems refuse fsync on directories
    close(fd);
}

inline void ckpt_write_done(const std::string& dir, int step) {
    ckpt_fsync_dir_(dir);
    AtomicFile f = atomic_file_open(ckpt_done_path(dir, step));
    atomic_file_commit(f);
    ckpt_fsync_dir_(dir);
}

// Parses "<digits>" at s, returns the number of characters used (0 if none) and the value.
inline size_t ckpt_parse_digits_(const char* s, long long* value) {
    size_t n = 0;
    long long v = 0;
    while (s[n] >= '0' && s[n] <= '9' && n < 12) v = v * 10 + (s[n++] - '0');
    *value = v;
    return (n >= 8 && !(s[n] >= '0' && s[n] <= '9')) ? n : 0;
}

enum class CkptFileKind { None, Done, Other };

// ".tmp" or ".tmp.<1 or more hex digits>": the end of a temporary file's name.
inline bool ckpt_is_temp_suffix_(const char* q) {
    if (strncmp(q, ".tmp", 4) != 0) return false;
    q += 4;
    if (*q == '\0') return true;
    if (*q++ != '.' || *q == '\0') return false;
    for (; *q != '\0'; q++) {
        if (!isxdigit((unsigned char)*q)) return false;
    }
    return true;
}

// Recognises DONE_<step> (Done) and model_<step>.bin, state_<step>_<rank>.bin and the temporary files
// of any of the three (Other: files of that step): + ".tmp.<hex digits>" (atomic_file_open's names)
// or + ".tmp" (earlier builds). Steps have at least 8 digits, ranks at least 5.
inline CkptFileKind ckpt_classify_(const char* name, int* step) {
    const char* prefixes[] = {"DONE_", "model_", "state_"};
    for (int k = 0; k < 3; k++) {
        size_t plen = strlen(prefixes[k]);
        if (strncmp(name, prefixes[k], plen) != 0) continue;
        long long s;
        const char* q = name + plen;
        size_t n = ckpt_parse_digits_(q, &s);
        if (n == 0 || s > INT32_MAX) return CkptFileKind::None;
        q += n;
        if (k == 2) {  // state_: "_<rank>"
            size_t m = 0;
            if (*q != '_') return CkptFileKind::None;
            while (q[1 + m] >= '0' && q[1 + m] <= '9') m++;
            if (m < 5) return CkptFileKind::None;
            q += 1 + m;
        }
        if (k > 0) {
            if (strncmp(q, ".bin", 4) != 0) return CkptFileKind::None;
            q += 4;
        }
        *step = (int)s;
        if (*q == '\0') return k == 0 ? CkptFileKind::Done : CkptFileKind::Other;
        return ckpt_is_temp_suffix_(q) ? CkptFileKind::Other : CkptFileKind::None;
    }
    return CkptFileKind::None;
}

struct CkptEntry {
    bool done = false;
    std::vector<std::string> files;  // everything except the DONE file
};

inline std::map<int, CkptEntry> ckpt_scan_(const std::string& dir) {
    std::map<int, CkptEntry> out;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return out;
    while (struct dirent* e = readdir(d)) {
        int step;
        CkptFileKind kind = ckpt_classify_(e->d_name, &step);
        if (kind == CkptFileKind::None) continue;
        if (kind == CkptFileKind::Done) out[step].done = true;
        else out[step].files.push_back(dir + "/" + e->d_name);
    }
    closedir(d);
    return out;
}

// Why checkpoint `step` of dir, which its DONE file marks complete, cannot be resumed ("" when it can):
// DONE is not a file (a directory, a link to nothing), or the model file, or (rank >= 0) that rank's
// state file, is missing or not a file. For the start-up, before anything is read.
inline std::string ckpt_incomplete_problem(const std::string& dir, int step, int rank) {
    const std::string done = ckpt_done_path(dir, step);
    struct stat sb;
    if (lstat(done.c_str(), &sb) == 0 && S_ISLNK(sb.st_mode) && stat(done.c_str(), &sb) != 0) {
        char target[4096];
        const ssize_t n = readlink(done.c_str(), target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        return "-o " + dir + ": '" + done + "' is a link to '" + target + "', which does not exist, not the empty file "
               "that marks the checkpoint of step " + std::to_string(step) + " complete: remove the link";
    }
    if (stat(done.c_str(), &sb) == 0 && !S_ISREG(sb.st_mode)) {
        return "-o " + dir + ": '" + done + "' is " + (S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file") +
               ", not the empty file that marks the checkpoint of step " + std::to_string(step) + " complete: remove it";
    }
    std::vector<std::string> files = {ckpt_model_path(dir, step)};
    if (rank >= 0) files.push_back(ckpt_state_path(dir, step, rank));
    for (const std::string& f : files) {
        const bool there = stat(f.c_str(), &sb) == 0;
        if (there && S_ISREG(sb.st_mode)) continue;
        return "-o " + dir + ": the checkpoint of step " + std::to_string(step) + " is incomplete: '" + done +
               "' marks it complete, but '" + f + "' " +
               (there ? std::string("is ") + file_type_name(sb.st_mode) + ", not a regular file" : std::string("is missing")) +
               ". Restore that file, or delete the DONE file to resume from the checkpoint before it";
    }
    return "";
}

inline int ckpt_find_latest(const std::string& dir) {
    std::map<int, CkptEntry> entries = ckpt_scan_(dir);
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
        if (!it->second.done) continue;
        const std::string done = ckpt_done_path(dir, it->first);
        struct stat sb;
        if (stat(done.c_str(), &sb) == 0 && !S_ISREG(sb.st_mode)) {
            if (S_ISDIR(sb.st_mode)) fatal("%s", ckpt_incomplete_problem(dir, it->first, -1).c_str());
            fatal("-o: '%s' is %s, not a regular file (a checkpoint is complete once its DONE file exists, "
                  "an empty file)", done.c_str(), file_type_name(sb.st_mode));
        }
        return it->first;
    }
    return -1;
}

inline std::vector<std::string> ckpt_remove_leftovers(const std::string& dir, int rank) {
    std::vector<std::string> removed;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return removed;
    std::vector<std::string> names;
    while (struct dirent* e = readdir(d)) names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        int step;
        const size_t dot = name.find(".tmp");
        if (dot == std::string::npos || !ckpt_is_temp_suffix_(name.c_str() + dot)) continue;
        if (ckpt_classify_(name.c_str(), &step) != CkptFileKind::Other) continue;
        int owner = 0;  // model_ and DONE_ files are rank 0's
        if (name.compare(0, 6, "state_") == 0) owner = atoi(name.c_str() + name.find('_', 6) + 1);  // state_<step>_<rank>
        if (owner != rank) continue;
        const std::string path = dir + "/" + name;
        // only what a writer of ours leaves: a regular file (lstat: a link by that name is not ours, and
        // unlink would remove the link itself anyway, never what it points to)
        struct stat sb;
        if (lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (unlink(path.c_str()) == 0) removed.push_back(path);
        else fprintf(stderr, "warning: cannot delete leftover '%s': %s\n", path.c_str(), strerror(errno));
    }
    return removed;
}

// ----------------------------------------------------------------------------
// state file body and reading one checkpoint

enum class StateBlock { adamw_m, adamw_v, master };

struct StateBody {
    std::vector<StateBlock> blocks;  // file order
    size_t elements = 0;             // floats in each block
    std::string refused;             // state_body_to_read: why this run cannot read the file

    bool has_master() const { return blocks.size() == 3; }
    size_t bytes() const { return blocks.size() * elements * sizeof(float); }
};

inline StateBody state_body_(bool with_master, size_t shard) {
    StateBody b;
    b.blocks = {StateBlock::adamw_m, StateBlock::adamw_v};
    if (with_master) b.blocks.push_back(StateBlock::master);
    b.elements = shard;
    return b;
}

inline StateBody state_body_to_write(bool bf16_build, bool master_weights, bool master_ready, size_t shard) {
    return state_body_(master_weights && (master_ready || !bf16_build), shard);
}

inline StateBody state_body_to_read(bool bf16_build, bool master_weights, bool file_has_master, size_t shard) {
    StateBody b = state_body_(file_has_master, shard);
    if (file_has_master && bf16_build && !master_weights) {
        b.refused = "holds fp32 master weights but this run keeps none (-w 0): resume with -w 1";
    }
    return b;
}

inline std::vector<HostBuffer> state_body_buffers(const StateBody& body, float* m, float* v, float* master) {
    std::vector<HostBuffer> out;
    for (StateBlock block : body.blocks) {
        float* p = block == StateBlock::adamw_m ? m : block == StateBlock::adamw_v ? v : master;
        out.push_back({p, body.elements * sizeof(float)});
    }
    return out;
}

// Index of the first of n floats that is not a finite number >= 0 (NaN, inf, negative; -0 is fine), n if
// none. On the bits u with magnitude a = u & 0x7FFFFFFF, bit 31 of (a + 0x00800000) is set for NaN and
// inf (as in first_non_finite), and bit 31 of u & (a + 0x7FFFFFFF) for a negative number other than -0;
// OR-ed over the buffer (vectorises), the position is looked up only when one is there.
inline uint32_t not_nonneg_finite_bit_(uint32_t u) {
    const uint32_t a = u & 0x7FFFFFFFu;
    return ((a + 0x00800000u) | (u & (a + 0x7FFFFFFFu))) & 0x80000000u;
}

inline size_t first_not_nonneg_finite(const float* x, size_t n) {
    auto bit = [x](size_t i) { uint32_t u; memcpy(&u, x + i, 4); return not_nonneg_finite_bit_(u); };
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) acc |= bit(i);
    if (acc == 0) return n;
    size_t i = 0;
    while (bit(i) == 0) i++;
    return i;
}

// first(begin, end) -> index of the first bad element in [begin, end), or end; over [0, n) on up to 16
// threads (a d48 state body is 18.7 GB: one thread scans it in about 2 s, several near memory speed).
template <class First>
inline size_t parallel_first_(size_t n, First first) {
    const size_t threads = std::min<size_t>(16, std::max(1u, std::thread::hardware_concurrency()));
    if (threads == 1 || n < ((size_t)1 << 24)) return first((size_t)0, n);
    const size_t chunk = (n + threads - 1) / threads;
    std::vector<size_t> found(threads, n);
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; t++) {
        const size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
        pool.emplace_back([&, t, b, e] { const size_t i = first(b, e); found[t] = i < e ? i : n; });
    }
    for (std::thread& th : pool) th.join();
    return *std::min_element(found.begin(), found.end());
}

// The optimizer state of a state file, read: AdamW m and the master weights finite, v finite and >= 0
// (a running mean of squared gradients). A run never saves other values (it stops on a non-finite loss
// or norm before the update); a checksum only says a file is as it was written, and llm.c's files have
// none. Found here at start-up instead of as a NaN at the first update. "" when fine, else what is
// wrong (the element is one of this process's shard).
inline std::string state_body_values_problem(const std::vector<float>& m, const std::vector<float>& v,
                                             const std::vector<float>& master) {
    char buf[160];
    for (const std::vector<float>* block : {&m, &master}) {
        const float* x = block->data();
        const size_t i = parallel_first_(block->size(), [x](size_t b, size_t e) {
            return b + first_non_finite(x + b, DType::FP32, e - b);
        });
        if (i == block->size()) continue;
        snprintf(buf, sizeof(buf), "holds %g in its %s at element %zu of %zu (these are never NaN or inf)", (*block)[i],
                 block == &m ? "AdamW m" : "fp32 master weights", i, block->size());
        return buf;
    }
    const float* x = v.data();
    const size_t i = parallel_first_(v.size(), [x](size_t b, size_t e) { return b + first_not_nonneg_finite(x + b, e - b); });
    if (i < v.size()) {
        snprintf(buf, sizeof(buf), "holds %g in its AdamW v at element %zu of %zu (a mean of squared gradients: "
                 "always finite and >= 0)", v[i], i, v.size());
        return buf;
    }
    return "";
}

struct CheckpointRead {
    int step = -1;  // -1: nothing read
    std::string model_path, state_path;
    ModelFileInfo info{};
    RunState rs;
    std::vector<float> m, v, master;  // master: empty when the state file has no master block
};

// A checkpoint file of `step` that is really a file of another step: a symbolic link whose target is
// named as a checkpoint file of another step, or a hard link shared with another step's file of dir
// (file names from ckpt_classify_). Returns that step and, in *other, that file; -1 when none is seen.
// (A copy of another step's model file is not seen here: the model file holds no step. The state
// file's header does: checkpoint_read compares it.)
inline int ckpt_linked_step_(const std::string& dir, const std::string& path, int step, std::string* other) {
    auto base_name = [&](const std::string& p) { return p.substr(p.rfind('/') + 1); };
    const std::string own = base_name(path);
    char* real = realpath(path.c_str(), nullptr);
    if (real != nullptr) {
        const std::string target(real);
        free(real);
        const std::string name = base_name(target);
        int s;
        // same kind of file (model_ / state_ prefix) under another step
        if (name.compare(0, 6, own.substr(0, 6)) == 0 && ckpt_classify_(name.c_str(), &s) == CkptFileKind::Other && s != step) {
            *other = target;
            return s;
        }
    }
    struct stat sb;
    if (stat(path.c_str(), &sb) != 0 || sb.st_nlink < 2) return -1;
    for (const auto& it : ckpt_scan_(dir)) {
        if (it.first == step) continue;
        for (const std::string& f : it.second.files) {
            struct stat fb;
            if (base_name(f).compare(0, 6, own.substr(0, 6)) != 0 || stat(f.c_str(), &fb) != 0) continue;
            if (fb.st_dev == sb.st_dev && fb.st_ino == sb.st_ino) {
                *other = f;
                return it.first;
            }
        }
    }
    return -1;
}

inline void checkpoint_read(CheckpointRead* out, const std::string& dir, int step, const GPT2Config& expect,
                            const std::string& cfg_source, int num_processes, int rank, size_t shard,
                            bool bf16_build, bool master_weights, ZeroLayout layout = ZeroLayout::llmc) {
    CheckpointRead& r = *out;
    r = CheckpointRead();
    r.step = step;
    r.model_path = ckpt_model_path(dir, step);
    r.state_path = ckpt_state_path(dir, step, rank);
    for (const std::string* p : {&r.model_path, &r.state_path}) {
        std::string other;
        const int linked = ckpt_linked_step_(dir, *p, step, &other);
        if (linked >= 0) {
            fatal("%s file '%s' is a link to '%s', a file of step %d, but it is resumed as step %d: the checkpoint "
                  "of step %d is not complete (delete DONE_%08d, or resume from another -o)",
                  p == &r.model_path ? "model" : "state", p->c_str(), other.c_str(), linked, step, step, step);
        }
    }
    r.info = model_file_read_header(r.model_path.c_str());
    if (memcmp(&r.info.cfg, &expect, sizeof(GPT2Config)) != 0) {
        fatal("checkpoint '%s' has a different model configuration than %s", r.model_path.c_str(), cfg_source.c_str());
    }
    const RunState peek = run_state_peek(r.state_path);
    const bool zero1_shard = peek.num_processes > 1 && shard < gpt2_num_parameters(expect);
    if (zero1_shard && peek.zero_layout == 0) {
        fatal("'%s' holds a ZeRO-1 optimizer shard of %d processes in the layout of an earlier gpt2cu build "
              "(one contiguous slice; this build uses llm.c's 1/P of every tensor of every layer), so its m, v "
              "and master weights would land on the wrong parameters: resume it with the build that wrote it, "
              "or start fresh (without -y 1, or with another -o)", r.state_path.c_str(), peek.num_processes);
    }
    if (zero1_shard && peek.zero_layout != (int)layout) {
        fatal("'%s' holds a ZeRO-1 optimizer shard of %d processes in %s, but this run shards in %s (-z 1 "
              "with %d processes and this model), so its m, v and master weights would land on "
              "the wrong parameters: it was not written by this model at this process count", r.state_path.c_str(),
              peek.num_processes, zero_layout_name((ZeroLayout)peek.zero_layout), zero_layout_name(layout),
              num_processes);
    }
    const StateBody body = state_body_to_read(bf16_build, master_weights, peek.use_master_weights, shard);
    if (!body.refused.empty()) fatal("'%s' %s", r.state_path.c_str(), body.refused.c_str());
    r.m.resize(shard);
    r.v.resize(shard);
    if (body.has_master()) r.master.resize(shard);
    r.rs = run_state_read(r.state_path, state_body_buffers(body, r.m.data(), r.v.data(), r.master.data()),
                          num_processes, rank);
    if (r.rs.step != step) {  // checked after the checksum: this is the step the file was written at
        fatal("state file '%s' holds step %d, but it is resumed as step %d: it is not the state of that checkpoint "
              "(delete DONE_%08d, or resume from another -o)", r.state_path.c_str(), r.rs.step, step, step);
    }
    const std::string values = state_body_values_problem(r.m, r.v, r.master);
    if (!values.empty()) fatal("run state file '%s' %s: the file is damaged", r.state_path.c_str(), values.c_str());
}
