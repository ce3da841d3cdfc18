/*
 * Dataset preparation with the GPT-2 tokenizer (used by dev/data/prepare_dataset.cpp and its tests).
 *
 * Token shards (docs/formats.md "Token shards", 20240520 v1): 256 x int32 header {magic, 1, n}, then n uint16 ids;
 * file size exactly 1024 + 2n. Every document is preceded by <|endoftext|> (50256); documents run on
 * across shard boundaries. Shard 0 is the val split (<name>_val_000000.bin), shards 1, 2, ... are train
 * (<name>_train_000001.bin, ...). The set is all-or-nothing: prepare_shards writes every shard into a
 * hidden staging folder beside them (<out>/.<name>.partial/, each shard via "<path>.tmp" + rename) and
 * moves them into <out> only once the whole set is done; then shards of an earlier run under the same
 * name that are not part of the new set are deleted (with a message), so `-i <out>/<name>_train_*.bin`
 * never mixes two runs. Any failure that exits (fatal(), full disk) deletes the staging folder; a run
 * killed outright leaves only that hidden folder, which the next run deletes.
 *
 * Documents: a text file is one document, or several when split on a separator string; a JSON lines
 * file holds one document per line in its "text" field. Batches of documents are tokenized by a pool of
 * threads and emitted in input order, so the shards do not depend on the thread count.
 *
 * Eval file (docs/formats.md "Multiple-choice eval file", magic 20240522 v1) from HellaSwag-style JSON lines
 * {"ctx": str, "endings": [4 x str], "label": 0..3}: per example the uint16 stream
 * 65535, example bytes, index, label, 4, context length, context ids, then per ending its length and
 * ids (endings tokenized with a leading space).
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "llmc/eval_loader.h"  // the example rules the reader applies
#include "llmc/file_header.h"  // SHARD_MAGIC, SHARD_VERSION, EVAL_MAGIC, EVAL_VERSION
#include "llmc/gpt2_bpe.h"
#include "llmc/utils.h"

// ----------------------------------------------------------------------------
// shards

struct ShardSpec {
    std::string out_dir = ".";
    std::string name = "data";
    uint64_t shard_tokens = 100000000;   // tokens per train shard
    int64_t val_tokens = -1;             // tokens of the val shard; -1: the val shard is a full shard, 0: none
};

inline std::string shard_path(const ShardSpec& spec, bool val, int index) {
    char buf[64];
    snprintf(buf, sizeof(buf), "_%s_%06d.bin", val ? "val" : "train", index);
    return spec.out_dir + "/" + spec.name + buf;
}

// Header + tokens, written to path + ".tmp" and renamed over path once complete.
inline void write_token_shard(const std::string& path, const uint16_t* tokens, size_t n) {
    if (n > (size_t)INT32_MAX) fatal("shard '%s' would hold %zu tokens, more than a header can count", path.c_str(), n);
    int32_t header[FILE_HEADER_INTS] = {};
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int32_t)n;
    AtomicFile f = atomic_file_open(path);
    fwrite_check(header, sizeof(int32_t), FILE_HEADER_INTS, f.fp, f.tmp_path.c_str());
    fwrite_check(tokens, sizeof(uint16_t), n, f.fp, f.tmp_path.c_str());
    atomic_file_commit(f);
}

struct ShardWriter {
    ShardSpec spec;
    std::vector<uint16_t> buf;
    uint64_t capacity = 0;             // tokens the current shard takes
    int index = 0;                     // current shard number (0 = val)
    uint64_t total = 0;                // tokens seen
    std::vector<std::string> written;  // paths of completed shards, in order
};

inline void shard_writer_init(ShardWriter* w, const ShardSpec& spec) {
    *w = ShardWriter();
    w->spec = spec;
    w->index = spec.val_tokens == 0 ? 1 : 0;
    w->capacity = spec.val_tokens > 0 ? (uint64_t)spec.val_tokens : spec.shard_tokens;
    w->buf.reserve(std::min<uint64_t>(w->capacity, 1u << 24));
}

inline void shard_writer_flush(ShardWriter* w) {
    std::string path = shard_path(w->spec, w->index == 0, w->index);
    write_token_shard(path, w->buf.data(), w->buf.size());
    w->written.push_back(path);
    w->buf.clear();
    w->index++;
    w->capacity = w->spec.shard_tokens;
}

inline void shard_writer_add(ShardWriter* w, const uint32_t* ids, size_t n) {
    w->total += n;
    while (n > 0) {
        size_t take = (size_t)std::min<uint64_t>(n, w->capacity - w->buf.size());
        for (size_t i = 0; i < take; i++) w->buf.push_back((uint16_t)ids[i]);   // ids < 50257
        ids += take;
        n -= take;
        if (w->buf.size() == w->capacity) shard_writer_flush(w);
    }
}

// Writes the last, partial shard.
inline void shard_writer_finish(ShardWriter* w) {
    if (!w->buf.empty()) shard_writer_flush(w);
}

// ----------------------------------------------------------------------------
// documents

enum class InputFormat { Auto, Text, Jsonl };

inline bool has_suffix(const std::string& s, const char* suffix) {
    size_t n = strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Fails with one message unless path is a readable regular file.
inline void check_input_file(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) fatal("cannot open input '%s': %s", path.c_str(), strerror(errno));
    if (!S_ISREG(st.st_mode)) fatal("input '%s' is not a regular file", path.c_str());
    FILE* fp = fopen(path.c_str(), "rb");
    if (fp == nullptr) fatal("cannot open input '%s': %s", path.c_str(), strerror(errno));
    fclose(fp);
}

inline std::string read_file_bytes(const std::string& path) {
    FILE* fp = fopen_check(path.c_str(), "rb");
    std::string data;
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) data.append(chunk, n);
    if (ferror(fp)) fatal("read error on '%s': %s", path.c_str(), strerror(errno));
    fclose(fp);
    return data;
}

// Yields documents from the input files in order; empty documents are skipped.
struct DocumentReader {
    std::vector<std::string> files;
    InputFormat format = InputFormat::Auto;
    std::string separator;             // text format: split each file on this (empty: a file is one document)
    size_t file_index = 0;
    FILE* jsonl = nullptr;             // open JSON lines file
    size_t line_number = 0;
    char* line = nullptr;
    size_t line_cap = 0;
    std::deque<std::string> pending;   // documents split out of the current text file
    uint64_t bytes_read = 0;
};

inline bool document_reader_is_jsonl(const DocumentReader* r, const std::string& path) {
    if (r->format == InputFormat::Auto) return has_suffix(path, ".jsonl");
    return r->format == InputFormat::Jsonl;
}

// Next document into *doc; false at the end of the input.
inline bool document_reader_next(DocumentReader* r, std::string* doc) {
    while (true) {
        if (!r->pending.empty()) {
            *doc = std::move(r->pending.front());
            r->pending.pop_front();
            return true;
        }
        if (r->jsonl != nullptr) {
            const std::string& path = r->files[r->file_index - 1];
            ssize_t n = getline(&r->line, &r->line_cap, r->jsonl);
            if (n < 0) {
                if (ferror(r->jsonl)) fatal("read error on '%s': %s", path.c_str(), strerror(errno));
                fclose(r->jsonl);
                r->jsonl = nullptr;
                continue;
            }
            r->line_number++;
            r->bytes_read += n;
            size_t start = 0;
            while (start < (size_t)n && isspace((unsigned char)r->line[start])) start++;
            if (start == (size_t)n) continue;   // blank line
            nlohmann::json j = nlohmann::json::parse(r->line + start, r->line + n, nullptr, false);
            if (j.is_discarded()) fatal("'%s' line %zu is not valid JSON", path.c_str(), r->line_number);
            if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
                fatal("'%s' line %zu has no string field \"text\"", path.c_str(), r->line_number);
            }
            *doc = j["text"].get<std::string>();
            if (doc->empty()) continue;
            return true;
        }
        if (r->file_index == r->files.size()) return false;
        const std::string& path = r->files[r->file_index++];
        if (document_reader_is_jsonl(r, path)) {
            r->jsonl = fopen_check(path.c_str(), "rb");
            r->line_number = 0;
            continue;
        }
        std::string text = read_file_bytes(path);
        r->bytes_read += text.size();
        if (r->separator.empty()) {
            if (!text.empty()) r->pending.push_back(std::move(text));
            continue;
        }
        size_t pos = 0;
        while (pos <= text.size()) {
            size_t end = text.find(r->separator, pos);
            if (end == std::string::npos) end = text.size();
            if (end > pos) r->pending.push_back(text.substr(pos, end - pos));
            pos = end + r->separator.size();
        }
    }
}

inline void document_reader_close(DocumentReader* r) {
    if (r->jsonl != nullptr) fclose(r->jsonl);
    r->jsonl = nullptr;
    free(r->line);
    r->line = nullptr;
}

// ----------------------------------------------------------------------------
// tokenizing pipeline

struct PrepareOptions {
    std::vector<std::string> inputs;
    InputFormat format = InputFormat::Auto;
    std::string separator;
    int threads = 1;
    ShardSpec shards;
    double val_fraction = -1;           // >= 0: the val shard gets this fraction of all tokens (two passes)
    size_t batch_bytes = 64u << 20;     // text tokenized per parallel batch
    bool progress = true;               // progress line on stderr
};

struct PrepareStats {
    uint64_t documents = 0;
    uint64_t bytes = 0;                 // bytes of document text
    uint64_t tokens = 0;                // including one <|endoftext|> per document
    std::vector<std::string> shards;    // written files, in order
};

// Reads all documents, tokenizes them in parallel batches, and hands each document's ids (eot first)
// to sink in input order. sink: void(const uint32_t* ids, size_t n).
template <typename Sink>
inline PrepareStats tokenize_documents(std::vector<Gpt2Encoder>& encoders, const PrepareOptions& opt,
                                       const char* label, Sink&& sink) {
    // A task is a piece of one document; long documents are cut at safe points so one huge file
    // still uses every thread (the ids are the same as encoding it whole).
    struct Task { size_t doc, begin, end; bool first; };
    constexpr size_t CUT_BYTES = 1u << 20;
    DocumentReader reader;
    reader.files = opt.inputs;
    reader.format = opt.format;
    reader.separator = opt.separator;
    PrepareStats stats;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> docs;
    std::vector<Task> tasks;
    std::vector<std::vector<uint32_t>> results;
    std::string doc;
    bool more = true;
    while (more) {
        docs.clear();
        size_t batch = 0;
        while (batch < opt.batch_bytes && (more = document_reader_next(&reader, &doc))) {
            batch += doc.size();
            docs.push_back(std::move(doc));
        }
        if (docs.empty()) break;
        tasks.clear();
        for (size_t d = 0; d < docs.size(); d++) {
            const std::string& s = docs[d];
            for (size_t begin = 0; begin < s.size();) {
                size_t end = gpt2_safe_cut(s.data(), s.size(), begin + CUT_BYTES);
                tasks.push_back({d, begin, end, begin == 0});
                begin = end;
            }
        }
        results.assign(tasks.size(), std::vector<uint32_t>());
        std::atomic<size_t> next{0};
        auto work = [&](Gpt2Encoder* enc) {
            for (size_t i; (i = next.fetch_add(1)) < tasks.size();) {
                // Encode into a local vector: the headers in results[] share cache lines across threads.
                const Task& t = tasks[i];
                std::vector<uint32_t> ids;
                if (t.first) ids.push_back(GPT2_EOT);
                gpt2_encode(enc, docs[t.doc].data() + t.begin, t.end - t.begin, &ids);
                results[i] = std::move(ids);
            }
        };
        std::vector<std::thread> pool;
        for (size_t k = 1; k < encoders.size(); k++) pool.emplace_back(work, &encoders[k]);
        work(&encoders[0]);
        for (std::thread& th : pool) th.join();
        for (std::vector<uint32_t>& r : results) {
            sink(r.data(), r.size());
            stats.tokens += r.size();
            std::vector<uint32_t>().swap(r);
        }
        stats.documents += docs.size();
        stats.bytes += batch;
        if (opt.progress) {
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            fprintf(stderr, "\r%s: %zu documents, %.1f MB, %.2fM tokens | %.2f MB/s, %.0f tokens/s   ", label,
                    (size_t)stats.documents, stats.bytes / 1e6, stats.tokens / 1e6, stats.bytes / 1e6 / s,
                    stats.tokens / s);
        }
    }
    if (opt.progress && stats.documents > 0) fprintf(stderr, "\n");
    document_reader_close(&reader);
    return stats;
}

// Creates dir (and its parents) if missing; fatal() unless it ends up a writable directory.
inline void make_output_dir(const std::string& dir) {
    for (size_t pos = 1; pos <= dir.size(); pos++) {
        if (pos < dir.size() && dir[pos] != '/') continue;
        std::string prefix = dir.substr(0, pos);
        struct stat st;
        if (stat(prefix.c_str(), &st) == 0) {
            if (!S_ISDIR(st.st_mode)) fatal("output directory '%s': '%s' is not a directory", dir.c_str(), prefix.c_str());
            continue;
        }
        if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
            fatal("cannot create output directory '%s': %s", dir.c_str(), strerror(errno));
        }
    }
    if (access(dir.c_str(), W_OK) != 0) fatal("output directory '%s' is not writable: %s", dir.c_str(), strerror(errno));
}

// Staging folder of an unfinished shard set: deleted at exit unless shard_staging_commit() ran (a
// fatal() exits through exit(), which runs atexit handlers).
inline std::string& shard_staging_dir_() {
    static std::string dir;  // function-local: no global defined in a header
    return dir;
}

inline void shard_staging_cleanup_() {
    std::string& dir = shard_staging_dir_();
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    dir.clear();
}

inline std::string shard_staging_begin(const ShardSpec& spec) {
    const std::string staging = spec.out_dir + "/." + spec.name + ".partial";
    std::error_code ec;
    if (std::filesystem::exists(staging, ec)) {
        fprintf(stderr, "note: deleting '%s', left by an earlier run that did not finish\n", staging.c_str());
        std::filesystem::remove_all(staging, ec);
        if (ec) fatal("cannot delete '%s': %s", staging.c_str(), ec.message().c_str());
    }
    if (mkdir(staging.c_str(), 0755) != 0) fatal("cannot create '%s': %s", staging.c_str(), strerror(errno));
    shard_staging_dir_() = staging;  // constructs the static first: its destructor must run after the handler
    static bool registered = false;
    if (!registered) {
        atexit(shard_staging_cleanup_);
        registered = true;
    }
    return staging;
}

// True for "<name>_val_NNNNNN.bin" / "<name>_train_NNNNNN.bin" (and their ".tmp"): a shard of the set.
inline bool is_shard_of_set(const std::string& file, const std::string& name) {
    if (file.compare(0, name.size() + 1, name + "_") != 0) return false;
    std::string rest = file.substr(name.size() + 1);
    if (has_suffix(rest, ".tmp")) rest.resize(rest.size() - 4);
    for (const char* split : {"val_", "train_"}) {
        const size_t n = strlen(split);
        if (rest.compare(0, n, split) != 0 || rest.size() != n + 6 + 4 || !has_suffix(rest, ".bin")) continue;
        bool digits = true;
        for (size_t i = n; i < n + 6; i++) digits = digits && rest[i] >= '0' && rest[i] <= '9';
        if (digits) return true;
    }
    return false;
}

// Moves the finished set from the staging folder into out_dir and deletes shards of an earlier run
// that the new set does not replace. Returns the final paths.
inline std::vector<std::string> shard_staging_commit(const ShardSpec& final_spec, const std::vector<std::string>& staged) {
    std::vector<std::string> keep, out;
    for (const std::string& p : staged) keep.push_back(p.substr(p.rfind('/') + 1));
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(final_spec.out_dir, ec)) {
        const std::string file = entry.path().filename().string();
        if (!is_shard_of_set(file, final_spec.name) || std::find(keep.begin(), keep.end(), file) != keep.end()) continue;
        fprintf(stderr, "note: deleting '%s', a shard of an earlier run that the new set does not replace\n",
                entry.path().c_str());
        if (unlink(entry.path().c_str()) != 0) fatal("cannot delete old shard '%s': %s", entry.path().c_str(), strerror(errno));
    }
    for (size_t i = 0; i < staged.size(); i++) {
        const std::string dst = final_spec.out_dir + "/" + keep[i];
        if (rename(staged[i].c_str(), dst.c_str()) != 0) {
            fatal("cannot move '%s' to '%s': %s", staged[i].c_str(), dst.c_str(), strerror(errno));
        }
        out.push_back(dst);
    }
    shard_staging_cleanup_();
    return out;
}

// The whole shard preparation: checks inputs and the output directory, tokenizes, writes shards.
inline PrepareStats prepare_shards(const Gpt2Bpe* bpe, const PrepareOptions& opt_in) {
    PrepareOptions opt = opt_in;
    if (opt.inputs.empty()) fatal("no input files given");
    for (const std::string& f : opt.inputs) check_input_file(f);
    if (opt.shards.shard_tokens < 1 || opt.shards.shard_tokens > (uint64_t)INT32_MAX) {
        fatal("--shard-size must be in [1, %d], got %llu", INT32_MAX, (unsigned long long)opt.shards.shard_tokens);
    }
    if (opt.shards.val_tokens > (int64_t)INT32_MAX) fatal("--val-tokens must be at most %d", INT32_MAX);
    if (opt.shards.name.empty() || opt.shards.name.find('/') != std::string::npos) {
        fatal("--name must be a non-empty file name prefix without '/', got '%s'", opt.shards.name.c_str());
    }
    make_output_dir(opt.shards.out_dir);
    std::vector<Gpt2Encoder> encoders(std::max(1, opt.threads));
    for (Gpt2Encoder& e : encoders) gpt2_encoder_init(&e, bpe);

    if (opt.val_fraction >= 0) {
        if (opt.val_fraction > 1) fatal("--val-fraction must be in [0, 1], got %g", opt.val_fraction);
        PrepareStats counted = tokenize_documents(encoders, opt, "counting tokens", [](const uint32_t*, size_t) {});
        opt.shards.val_tokens = (int64_t)std::llround(opt.val_fraction * (double)counted.tokens);
        if (opt.progress) {
            fprintf(stderr, "val split: %lld of %llu tokens\n", (long long)opt.shards.val_tokens,
                    (unsigned long long)counted.tokens);
        }
    }
    ShardSpec staged_spec = opt.shards;
    staged_spec.out_dir = shard_staging_begin(opt.shards);
    ShardWriter writer;
    shard_writer_init(&writer, staged_spec);
    PrepareStats stats = tokenize_documents(encoders, opt, "tokenizing",
                                            [&](const uint32_t* ids, size_t n) { shard_writer_add(&writer, ids, n); });
    for (Gpt2Encoder& e : encoders) gpt2_encoder_free(&e);
    if (stats.tokens == 0) {
        fatal("no documents in the input (%zu file%s, all empty): no shard written", opt.inputs.size(),
              opt.inputs.size() == 1 ? "" : "s");
    }
    shard_writer_finish(&writer);
    stats.shards = shard_staging_commit(opt.shards, writer.written);
    if (writer.index == 1 && opt.shards.val_tokens != 0) {
        fprintf(stderr, "warning: all %llu tokens went into the val shard and no train shard was written; "
                        "use --val-tokens, --val-fraction or a smaller --shard-size\n", (unsigned long long)stats.tokens);
    }
    return stats;
}

// ----------------------------------------------------------------------------
// multiple-choice eval file

struct EvalStats {
    size_t examples = 0;
    size_t longest_bytes = 0;
};

inline EvalStats prepare_eval_file(const Gpt2Bpe* bpe, const std::string& in, const std::string& out) {
    check_input_file(in);
    Gpt2Encoder enc;
    gpt2_encoder_init(&enc, bpe);
    FILE* fp = fopen_check(in.c_str(), "rb");
    std::vector<uint16_t> stream;
    EvalStats stats;
    char* line = nullptr;
    size_t cap = 0, line_number = 0;
    ssize_t n;
    std::vector<uint32_t> ids;
    auto push_u16 = [&](uint64_t v, const char* what) {
        if (v >= 65535) fatal("'%s' line %zu: %s (%llu) does not fit the eval file's uint16 fields", in.c_str(),
                              line_number, what, (unsigned long long)v);
        stream.push_back((uint16_t)v);
    };
    while ((n = getline(&line, &cap, fp)) >= 0) {
        line_number++;
        size_t start = 0;
        while (start < (size_t)n && isspace((unsigned char)line[start])) start++;
        if (start == (size_t)n) continue;
        nlohmann::json j = nlohmann::json::parse(line + start, line + n, nullptr, false);
        if (j.is_discarded() || !j.is_object()) fatal("'%s' line %zu is not a JSON object", in.c_str(), line_number);
        if (!j.contains("ctx") || !j["ctx"].is_string()) fatal("'%s' line %zu has no string field \"ctx\"", in.c_str(), line_number);
        const nlohmann::json& endings = j.contains("endings") ? j["endings"] : nlohmann::json();
        if (!endings.is_array() || endings.size() != 4) {
            fatal("'%s' line %zu: \"endings\" must be an array of 4 strings", in.c_str(), line_number);
        }
        int64_t label = -1;
        if (j.contains("label") && j["label"].is_number_integer()) label = j["label"].get<int64_t>();
        if (j.contains("label") && j["label"].is_string()) {
            std::string s = j["label"].get<std::string>();
            if (s.size() == 1 && s[0] >= '0' && s[0] <= '9') label = s[0] - '0';
        }
        if (label < 0 || label > 3) fatal("'%s' line %zu: \"label\" must be 0..3", in.c_str(), line_number);

        EvalExample ex;
        ex.label = (int)label;
        auto encode_u16 = [&](const std::string& text, std::vector<uint16_t>* out) {
            ids.clear();
            gpt2_encode(&enc, text.data(), text.size(), &ids);
            for (uint32_t id : ids) out->push_back(id < 65535 ? (uint16_t)id : (uint16_t)65535);
        };
        encode_u16(j["ctx"].get<std::string>(), &ex.context);
        for (size_t c = 0; c < endings.size(); c++) {
            if (!endings[c].is_string()) fatal("'%s' line %zu: \"endings\" must be an array of 4 strings", in.c_str(), line_number);
            encode_u16(" " + endings[c].get<std::string>(), &ex.completions[c]);
        }
        // the rules the eval loader applies when it reads the file
        const std::string problem = eval_example_problem(ex);
        if (!problem.empty()) fatal("'%s' line %zu: the example %s: not written", in.c_str(), line_number, problem.c_str());
        const size_t bytes = eval_example_bytes(ex);
        stream.push_back(65535);  // example delimiter
        push_u16(bytes, "example bytes");
        push_u16(stats.examples, "example index");
        push_u16((uint64_t)ex.label, "label");
        push_u16(EVAL_NUM_COMPLETIONS, "completion count");
        push_u16(ex.context.size(), "context length");
        stream.insert(stream.end(), ex.context.begin(), ex.context.end());
        for (const std::vector<uint16_t>& comp : ex.completions) {
            push_u16(comp.size(), "ending length");
            stream.insert(stream.end(), comp.begin(), comp.end());
        }
        stats.longest_bytes = std::max(stats.longest_bytes, bytes);
        stats.examples++;
    }
    free(line);
    fclose(fp);
    gpt2_encoder_free(&enc);
    if (stats.examples == 0) fatal("'%s' holds no examples: no eval file written", in.c_str());

    int32_t header[FILE_HEADER_INTS] = {};
    header[0] = EVAL_MAGIC;
    header[1] = EVAL_VERSION;
    header[2] = (int32_t)stats.examples;
    header[3] = (int32_t)stats.longest_bytes;
    AtomicFile f = atomic_file_open(out);
    fwrite_check(header, sizeof(int32_t), FILE_HEADER_INTS, f.fp, f.tmp_path.c_str());
    fwrite_check(stream.data(), sizeof(uint16_t), stream.size(), f.fp, f.tmp_path.c_str());
    atomic_file_commit(f);
    return stats;
}
