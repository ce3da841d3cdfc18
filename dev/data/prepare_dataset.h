/*
 * Dataset preparation with the GPT-2 tokenizer (used by dev/data/prepare_dataset.cpp and its tests).
 *
 * Token shards (docs/formats.md "Token shards", 20240520 v1): 256 x int32 header {magic, 1, n}, then n uint16 ids;
 * file size exactly 1024 + 2n. Every document is preceded by <|endoftext|> (GPT2_EOT); documents run on
 * across shard boundaries. Shard 0 is the val split (<name>_val_000000.bin), shards 1, 2, ... are train
 * (<name>_train_000001.bin, ...); with ShardSpec::unnumbered, one <name>_val.bin and one <name>_train.bin
 * (llm.c's Tiny Shakespeare layout).
 *
 * A set is all-or-nothing, also for a reader that globs <out>/<name>_train_*.bin while a run commits
 * or after it was killed: the run builds a complete copy of the output directory beside it
 * (<parent>/.<dir>.new-XXXXXX: the new shards plus hard links to every other file of <out>) and swaps
 * it with <out> in one renameat2(RENAME_EXCHANGE); the old directory is then deleted. A glob sees the
 * old set or the new one, never a mix. Shards of an earlier run under the same name go with the old
 * directory; files of other sets and other files in <out> are carried over. So <out> must be a
 * directory of its own: not the working directory, no subdirectories, not a mount point. Where the
 * filesystem cannot exchange two directories (NFS), <out> is moved aside and the new one moved in (a
 * reader in that instant finds no shard; a run killed there is undone by the next run, which moves the
 * old directory back). Leftovers of killed runs are deleted by the next run; a run that is alive holds
 * a flock on its directories, so two runs never delete each other's.
 *
 * Documents: a text file is one document, or several when split on a separator string (optionally
 * keeping the separator, as llm.c's tinyshakespeare.py does); a JSON lines file holds one document per
 * line in its "text" field; a framed stream (dev/data/fineweb.py's pipe) holds batches of documents,
 * see document_reader_framed_batch(); a parquet file a row per document, read by a DocumentSource that
 * the tool links in (dev/data/parquet_text.h). Batches of documents are tokenized by a pool of threads
 * (while the next batch is read) and emitted in input order, so the shards do not depend on the thread
 * count.
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
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
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
    bool unnumbered = false;             // <name>_val.bin + one <name>_train.bin holding every train token
};

inline std::string shard_path(const ShardSpec& spec, bool val, int index) {
    char buf[64];
    if (spec.unnumbered) snprintf(buf, sizeof(buf), "_%s.bin", val ? "val" : "train");
    else snprintf(buf, sizeof(buf), "_%s_%06d.bin", val ? "val" : "train", index);
    return spec.out_dir + "/" + spec.name + buf;
}

// Tokens the train shards take: one file holds them all when the shards are unnumbered.
inline uint64_t shard_train_capacity(const ShardSpec& spec) {
    return spec.unnumbered ? (uint64_t)INT32_MAX : spec.shard_tokens;
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
    w->capacity = spec.val_tokens > 0 ? (uint64_t)spec.val_tokens
                : spec.val_tokens == 0 ? shard_train_capacity(spec) : spec.shard_tokens;
    w->buf.reserve(std::min<uint64_t>(w->capacity, 1u << 24));
}

inline void shard_writer_flush(ShardWriter* w) {
    if (w->spec.unnumbered && w->index > 1) {
        fatal("the train split holds more than %d tokens, too many for the one file %s_train.bin", INT32_MAX,
              w->spec.name.c_str());
    }
    std::string path = shard_path(w->spec, w->index == 0, w->index);
    write_token_shard(path, w->buf.data(), w->buf.size());
    w->written.push_back(path);
    w->buf.clear();
    w->index++;
    w->capacity = shard_train_capacity(w->spec);
}

inline void shard_writer_add(ShardWriter* w, const uint32_t* ids, size_t n) {
    w->total += n;
    while (n > 0) {
        size_t take = (size_t)std::min<uint64_t>(n, w->capacity - w->buf.size());
        for (size_t i = 0; i < take; i++) w->buf.push_back((uint16_t)ids[i]);   // ids < GPT2_VOCAB_SIZE
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

enum class InputFormat { Auto, Text, Jsonl, Framed, Parquet };

// A format read outside this header, a batch of documents at a time (parquet: dev/data/parquet_text.h,
// built into the prepare_dataset tool when the Arrow / Parquet C++ libraries are found).
struct DocumentSource {
    virtual ~DocumentSource() = default;
    virtual uint64_t rows() const = 0;                       // documents in all
    virtual bool next(std::deque<std::string>* docs) = 0;   // appends a batch; false at the end
};
using DocumentSourceOpener = std::unique_ptr<DocumentSource> (*)(const std::string& path);

// The input name that means standard input.
constexpr const char* STDIN_INPUT = "-";

// Framed stream: a sequence of batches, all integers little-endian uint64. A batch is n, then n + 1
// offsets (the first 0, none smaller than the one before), then offsets[n] bytes; document i is bytes
// [offsets[i], offsets[i+1]). Every document counts, empty ones too. n = 0 ends the stream: a stream
// that stops without it was cut short (its writer died) and is refused. n = FRAMED_ABORT says the
// writer failed and has printed why: the run ends with exit code 1 and no message of its own.
constexpr uint64_t FRAMED_ABORT = ~(uint64_t)0;
constexpr uint64_t FRAMED_MAX_DOCS = 1ull << 26;    // per batch: a bound that garbage cannot pass
constexpr uint64_t FRAMED_MAX_BYTES = 1ull << 34;

inline bool has_suffix(const std::string& s, const char* suffix) {
    size_t n = strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Fails with one message unless path is a readable regular file (or "-": standard input).
inline void check_input_file(const std::string& path) {
    if (path == STDIN_INPUT) return;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) fatal("cannot open input '%s': %s", path.c_str(), strerror(errno));
    if (!S_ISREG(st.st_mode)) fatal("input '%s' is not a regular file", path.c_str());
    FILE* fp = fopen(path.c_str(), "rb");
    if (fp == nullptr) fatal("cannot open input '%s': %s", path.c_str(), strerror(errno));
    fclose(fp);
}

inline FILE* open_input(const std::string& path) {
    return path == STDIN_INPUT ? stdin : fopen_check(path.c_str(), "rb");
}

inline void close_input(FILE* fp) {
    if (fp != stdin) fclose(fp);
}

inline std::string read_file_bytes(const std::string& path) {
    FILE* fp = open_input(path);
    std::string data;
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) data.append(chunk, n);
    if (ferror(fp)) fatal("read error on '%s': %s", path.c_str(), strerror(errno));
    close_input(fp);
    return data;
}

// Yields documents from the input files in order. Empty documents are skipped, except in a framed
// stream, a parquet file and when sections keep their separator (llm.c gives those an <|endoftext|>).
struct DocumentReader {
    std::vector<std::string> files;
    InputFormat format = InputFormat::Auto;
    std::string separator;             // text format: split each file on this (empty: a file is one document)
    bool keep_separator = false;       // every section but a file's last keeps the separator at its end
    size_t file_index = 0;
    FILE* stream = nullptr;            // open JSON lines file or framed stream
    bool framed = false;               // stream is framed (else JSON lines)
    DocumentSourceOpener parquet = nullptr;
    std::unique_ptr<DocumentSource> source;   // open parquet file
    size_t line_number = 0;
    char* line = nullptr;
    size_t line_cap = 0;
    std::deque<std::string> pending;   // documents split out of the current text file or framed batch
    uint64_t bytes_read = 0;
};

inline InputFormat document_reader_format(const DocumentReader* r, const std::string& path) {
    if (r->format != InputFormat::Auto) return r->format;
    if (has_suffix(path, ".parquet")) return InputFormat::Parquet;
    return has_suffix(path, ".jsonl") ? InputFormat::Jsonl : InputFormat::Text;
}

// Reads exactly n bytes; false on a clean end of input before the first byte.
inline bool read_exact(FILE* fp, void* dst, size_t n, const std::string& path, const char* what) {
    size_t got = fread(dst, 1, n, fp);
    if (got == n) return true;
    if (ferror(fp)) fatal("read error on '%s': %s", path.c_str(), strerror(errno));
    if (got == 0) return false;
    fatal("framed input '%s' ends inside %s: the stream was cut short; no shard written", path.c_str(), what);
}

inline uint64_t read_u64_le(const unsigned char* b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

// Reads one batch of a framed stream into r->pending; false at its end marker.
inline bool document_reader_framed_batch(DocumentReader* r, const std::string& path) {
    unsigned char b[8];
    if (!read_exact(r->stream, b, 8, path, "a batch header")) {
        fatal("framed input '%s' ended without its end marker: the writer stopped early; no shard written", path.c_str());
    }
    const uint64_t n = read_u64_le(b);
    if (n == 0) return false;
    if (n == FRAMED_ABORT) exit(EXIT_FAILURE);   // the writer has said why
    if (n > FRAMED_MAX_DOCS) fatal("framed input '%s': a batch of %llu documents (at most %llu): not a framed stream?",
                                   path.c_str(), (unsigned long long)n, (unsigned long long)FRAMED_MAX_DOCS);
    std::vector<unsigned char> raw((n + 1) * 8);
    if (!read_exact(r->stream, raw.data(), raw.size(), path, "a batch's offsets")) {
        fatal("framed input '%s' ends inside a batch's offsets: the stream was cut short; no shard written", path.c_str());
    }
    std::vector<uint64_t> off(n + 1);
    for (uint64_t i = 0; i <= n; i++) {
        off[i] = read_u64_le(raw.data() + 8 * i);
        if ((i == 0 && off[0] != 0) || (i > 0 && off[i] < off[i - 1]) || off[i] > FRAMED_MAX_BYTES) {
            fatal("framed input '%s': bad offset %llu in a batch (offsets must start at 0, never decrease, and stay "
                  "below %llu)", path.c_str(), (unsigned long long)off[i], (unsigned long long)FRAMED_MAX_BYTES);
        }
    }
    std::string data(off[n], '\0');
    if (off[n] > 0 && !read_exact(r->stream, data.data(), off[n], path, "a batch's text")) {
        fatal("framed input '%s' ends inside a batch's text: the stream was cut short; no shard written", path.c_str());
    }
    r->bytes_read += 8 * (n + 2) + off[n];
    for (uint64_t i = 0; i < n; i++) r->pending.push_back(data.substr(off[i], off[i + 1] - off[i]));
    return true;
}

// Next document into *doc; false at the end of the input.
inline bool document_reader_next(DocumentReader* r, std::string* doc) {
    while (true) {
        if (!r->pending.empty()) {
            *doc = std::move(r->pending.front());
            r->pending.pop_front();
            return true;
        }
        if (r->source != nullptr) {
            if (!r->source->next(&r->pending)) r->source.reset();
            continue;
        }
        if (r->stream != nullptr && r->framed) {
            if (document_reader_framed_batch(r, r->files[r->file_index - 1])) continue;
            close_input(r->stream);
            r->stream = nullptr;
            continue;
        }
        if (r->stream != nullptr) {
            const std::string& path = r->files[r->file_index - 1];
            ssize_t n = getline(&r->line, &r->line_cap, r->stream);
            if (n < 0) {
                if (ferror(r->stream)) fatal("read error on '%s': %s", path.c_str(), strerror(errno));
                close_input(r->stream);
                r->stream = nullptr;
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
        const InputFormat format = document_reader_format(r, path);
        if (format == InputFormat::Parquet) {
            r->source = r->parquet(path);
            continue;
        }
        if (format == InputFormat::Jsonl || format == InputFormat::Framed) {
            r->stream = open_input(path);
            r->framed = format == InputFormat::Framed;
            r->line_number = 0;
            continue;
        }
        std::string text = read_file_bytes(path);
        r->bytes_read += text.size();
        if (r->separator.empty()) {
            if (!text.empty()) r->pending.push_back(std::move(text));
            continue;
        }
        // (with the separator kept, as llm.c's tinyshakespeare.py: text.split(sep), then every section
        // but the last gets sep back, and every section is a document, an empty last one too)
        size_t pos = 0;
        while (pos <= text.size()) {
            size_t end = text.find(r->separator, pos);
            const bool last = end == std::string::npos;
            if (last) end = text.size();
            if (r->keep_separator) {
                r->pending.push_back(text.substr(pos, end - pos) + (last ? "" : r->separator));
            } else if (end > pos) {
                r->pending.push_back(text.substr(pos, end - pos));
            }
            pos = end + r->separator.size();
        }
    }
}

inline void document_reader_close(DocumentReader* r) {
    r->source.reset();
    if (r->stream != nullptr) close_input(r->stream);
    r->stream = nullptr;
    free(r->line);
    r->line = nullptr;
}

// ----------------------------------------------------------------------------
// tokenizing pipeline

struct PrepareOptions {
    std::vector<std::string> inputs;
    InputFormat format = InputFormat::Auto;
    std::string separator;
    bool keep_separator = false;        // see DocumentReader
    DocumentSourceOpener parquet = nullptr;   // reads .parquet inputs (null: refused)
    int threads = 1;
    ShardSpec shards;
    double val_fraction = -1;           // >= 0: the val shard gets this fraction of all tokens (two passes)
    size_t batch_bytes = 64u << 20;     // text tokenized per parallel batch
    bool progress = true;               // progress line on stderr
    uint64_t expected_documents = 0;    // for the progress line's percentage and time left (0: unknown)
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
    reader.keep_separator = opt.keep_separator;
    reader.parquet = opt.parquet;
    PrepareStats stats;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Task> tasks;
    std::vector<std::vector<uint32_t>> results;
    // The next batch is read by its own thread while this one is tokenized, so reading (a pipe's
    // writer decompressing parquet, a JSON parse) overlaps the encoding instead of idling the pool.
    struct Batch { std::vector<std::string> docs; size_t bytes = 0; bool more = true; };
    auto read_batch = [&](Batch* b) {
        b->docs.clear();
        b->bytes = 0;
        std::string doc;
        while (b->bytes < opt.batch_bytes && (b->more = document_reader_next(&reader, &doc))) {
            b->bytes += doc.size();
            b->docs.push_back(std::move(doc));
        }
    };
    Batch current, ahead;
    read_batch(&current);
    while (!current.docs.empty()) {
        std::thread prefetch;
        if (current.more) prefetch = std::thread(read_batch, &ahead);
        const std::vector<std::string>& docs = current.docs;
        const size_t batch = current.bytes;
        tasks.clear();
        for (size_t d = 0; d < docs.size(); d++) {
            const std::string& s = docs[d];
            if (s.empty()) tasks.push_back({d, 0, 0, true});   // <|endoftext|> alone
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
        if (prefetch.joinable()) prefetch.join();
        else ahead.docs.clear();
        std::swap(current, ahead);
        if (opt.progress) {
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            char done[96] = "";
            if (opt.expected_documents > 0) {
                const double f = std::min(1.0, (double)stats.documents / (double)opt.expected_documents);
                const double left = f > 0 ? s * (1 - f) / f : 0;
                snprintf(done, sizeof(done), "%.1f%%, ~%.0f min left | ", 100 * f, left / 60);
            }
            fprintf(stderr, "\r%s: %s%zu documents, %.1f MB, %.2fM tokens | %.2f MB/s, %.0f tokens/s   ", label, done,
                    (size_t)stats.documents, stats.bytes / 1e6, stats.tokens / 1e6, stats.bytes / 1e6 / s,
                    stats.tokens / s);
        }
    }
    if (opt.progress && stats.documents > 0) fprintf(stderr, "\n");
    document_reader_close(&reader);
    return stats;
}

// ----------------------------------------------------------------------------
// committing a shard set (see the top of this file)

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

// True for a file of the set `name`: <name>_val_NNNNNN.bin, <name>_train_NNNNNN.bin, <name>_val.bin,
// <name>_train.bin, and each of those followed by ".tmp..." (a write that was interrupted).
inline bool is_shard_of_set(const std::string& file, const std::string& name) {
    if (file.compare(0, name.size() + 1, name + "_") != 0) return false;
    std::string rest = file.substr(name.size() + 1);
    const size_t tmp = rest.find(".bin.tmp");
    if (tmp != std::string::npos) rest.resize(tmp + 4);
    if (rest == "val.bin" || rest == "train.bin") return true;
    for (const char* split : {"val_", "train_"}) {
        const size_t n = strlen(split);
        if (rest.compare(0, n, split) != 0 || rest.size() != n + 6 + 4 || !has_suffix(rest, ".bin")) continue;
        bool digits = true;
        for (size_t i = n; i < n + 6; i++) digits = digits && rest[i] >= '0' && rest[i] <= '9';
        if (digits) return true;
    }
    return false;
}

inline std::vector<std::string> list_dir_names(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) fatal("cannot list directory '%s': %s", dir.c_str(), strerror(errno));
    while (const dirent* e = readdir(d)) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

// Opens dir with an exclusive flock: -1 when a live process holds one (or dir cannot be opened).
// A filesystem without flock counts as unlocked.
inline int lock_dir_nonblocking(const std::string& dir) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        close(fd);
        return -1;
    }
    return fd;
}

struct ShardSetDir {
    std::string out;          // the output directory as given (the printed paths)
    std::string real;         // its canonical path: the directory that is replaced
    std::string parent, base; // real = parent/base
    std::string staging;      // parent/.base.new-XXXXXX: the new directory, built by this run
    int staging_lock = -1;    // flock held on it while this run lives
    int commit_step = 0;      // steps of the commit done (test hook)
};

// What to delete when the process exits before the commit is done (a fatal() exits through exit(),
// which runs atexit handlers; a kill leaves it to the next run).
inline std::string& shard_set_cleanup_path_() {
    static std::string dir;   // function-local: no global defined in a header
    return dir;
}

inline void shard_set_cleanup_() {
    std::string& dir = shard_set_cleanup_path_();
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    dir.clear();
}

// Test hook, as a kill at that point would: PREPARE_DATASET_TEST_EXIT_AT_COMMIT_STEP=k ends the process
// with _exit(99) just before step k (1-based) of a commit: each file carried over, the swap (two
// renames without RENAME_EXCHANGE), the deletion of the old directory.
inline void shard_set_commit_step_(ShardSetDir* d) {
    d->commit_step++;
    const char* at = getenv("PREPARE_DATASET_TEST_EXIT_AT_COMMIT_STEP");
    if (at != nullptr && atoi(at) == d->commit_step) _exit(99);
}

// Deletes what killed runs left beside the output directory; a directory moved aside by a run killed
// between its two renames (no RENAME_EXCHANGE) is moved back when the output directory is missing.
inline void shard_set_clean_leftovers(const ShardSetDir& d) {
    const std::string new_prefix = "." + d.base + ".new-", old_prefix = "." + d.base + ".old-";
    for (const std::string& name : list_dir_names(d.parent)) {
        const bool is_new = name.compare(0, new_prefix.size(), new_prefix) == 0 && name.size() == new_prefix.size() + 6;
        const bool is_old = name.compare(0, old_prefix.size(), old_prefix) == 0 && name.size() == old_prefix.size() + 6;
        if (!is_new && !is_old) continue;
        const std::string path = d.parent + "/" + name;
        const int fd = lock_dir_nonblocking(path);
        if (fd < 0) continue;   // a live run's
        struct stat st;
        if (is_old && stat(d.real.c_str(), &st) != 0 && errno == ENOENT) {
            if (rename(path.c_str(), d.real.c_str()) != 0) {
                fatal("cannot move '%s' back to '%s': %s", path.c_str(), d.real.c_str(), strerror(errno));
            }
            fprintf(stderr, "note: moved '%s' back to '%s' (a run was killed while it replaced that directory)\n",
                    path.c_str(), d.real.c_str());
        } else {
            fprintf(stderr, "note: deleting '%s', left by a run that did not finish\n", path.c_str());
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
            if (ec) fatal("cannot delete '%s': %s", path.c_str(), ec.message().c_str());
        }
        close(fd);
    }
}

// Resolves and checks the output directory (created if missing) and makes this run's staging
// directory beside it.
inline ShardSetDir shard_set_begin(const std::string& out, const std::string& set_name) {
    ShardSetDir d;
    d.out = out;
    std::string path = out;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path.empty()) fatal("--out must not be empty");
    const std::string suggestion = (path == "." ? std::string("dev/data") : path) + "/" + set_name;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {   // made below; its parent must exist to be resolved
        std::string up = std::filesystem::path(path).parent_path().string();
        make_output_dir(up.empty() ? "." : up);
    }
    char* rp = realpath(path.c_str(), nullptr);
    if (rp != nullptr) {
        d.real = rp;
    } else {
        const std::filesystem::path p(path);
        char* up = realpath(p.has_parent_path() ? p.parent_path().c_str() : ".", nullptr);
        if (up == nullptr) fatal("cannot resolve output directory '%s': %s", out.c_str(), strerror(errno));
        d.real = std::string(up) + (strcmp(up, "/") == 0 ? "" : "/") + p.filename().string();
        free(up);
    }
    free(rp);
    if (d.real == "/") fatal("--out '/': give a directory of its own for the set, e.g. --out /data/%s", set_name.c_str());
    d.parent = d.real.substr(0, d.real.rfind('/'));
    if (d.parent.empty()) d.parent = "/";
    d.base = d.real.substr(d.real.rfind('/') + 1);
    shard_set_clean_leftovers(d);
    make_output_dir(d.real);

    char* cwd = getcwd(nullptr, 0);
    const std::string here = cwd != nullptr ? cwd : "";
    free(cwd);
    if (here == d.real || here.compare(0, d.real.size() + 1, d.real + "/") == 0) {
        fatal("--out '%s' is the working directory or holds it: a set is committed by replacing the output "
              "directory as a whole; give a directory of its own, e.g. --out %s", out.c_str(), suggestion.c_str());
    }
    struct stat st_dir, st_parent;
    if (stat(d.real.c_str(), &st_dir) != 0 || stat(d.parent.c_str(), &st_parent) != 0) {
        fatal("cannot stat output directory '%s': %s", out.c_str(), strerror(errno));
    }
    if (st_dir.st_dev != st_parent.st_dev) {
        fatal("--out '%s' is a mount point: a set is committed by replacing the output directory as a whole; "
              "give a directory inside it, e.g. --out %s", out.c_str(), suggestion.c_str());
    }
    for (const std::string& name : list_dir_names(d.real)) {
        struct stat e;
        if (name == "." + set_name + ".partial") continue;   // an earlier version's staging folder: dropped
        if (lstat((d.real + "/" + name).c_str(), &e) == 0 && S_ISDIR(e.st_mode)) {
            fatal("--out '%s' holds the directory '%s': a set is committed by replacing the output directory as a "
                  "whole, so it may hold files only; give a directory of its own, e.g. --out %s",
                  out.c_str(), name.c_str(), suggestion.c_str());
        }
    }

    std::string tmpl = d.parent + "/." + d.base + ".new-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
        fatal("cannot create a directory beside '%s' in '%s' (the new set is built there and swapped in whole): %s",
              out.c_str(), d.parent.c_str(), strerror(errno));
    }
    d.staging = tmpl;
    shard_set_cleanup_path_() = d.staging;  // constructs the static first: its destructor must run after the handler
    static bool registered = false;
    if (!registered) {
        atexit(shard_set_cleanup_);
        registered = true;
    }
    d.staging_lock = lock_dir_nonblocking(d.staging);
    if (chmod(d.staging.c_str(), st_dir.st_mode & 07777) != 0) {
        fatal("cannot set the mode of '%s': %s", d.staging.c_str(), strerror(errno));
    }
    if (geteuid() == 0 && chown(d.staging.c_str(), st_dir.st_uid, st_dir.st_gid) != 0) {
        fprintf(stderr, "note: cannot give '%s' the owner of '%s': %s\n", d.staging.c_str(), out.c_str(), strerror(errno));
    }
    return d;
}

// Swaps the finished set in: carries every other file of the output directory over into the staging
// directory (hard links; symlinks copied), then exchanges the two directories and deletes the old one.
// Returns the shards' final paths.
inline std::vector<std::string> shard_set_commit(ShardSetDir* d, const std::string& set_name,
                                                 const std::vector<std::string>& staged) {
    // Lock the output directory against another run's commit; if that run swapped it meanwhile, the
    // lock is on the old inode: take it again on the new one.
    int lock = -1;
    for (;;) {
        lock = open(d->real.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock < 0) fatal("cannot open output directory '%s': %s", d->out.c_str(), strerror(errno));
        while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {}
        struct stat held, now;
        if (fstat(lock, &held) == 0 && stat(d->real.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino) break;
        close(lock);
    }
    size_t replaced = 0;
    for (const std::string& name : list_dir_names(d->real)) {
        if (is_shard_of_set(name, set_name)) { replaced++; continue; }
        if (name == "." + set_name + ".partial") continue;
        const std::string src = d->real + "/" + name, dst = d->staging + "/" + name;
        struct stat st;
        if (lstat(src.c_str(), &st) != 0) continue;   // deleted meanwhile
        if (S_ISDIR(st.st_mode)) {
            fatal("the directory '%s' appeared in '%s' while the set was made: not committed (the output "
                  "directory may hold files only)", name.c_str(), d->out.c_str());
        }
        shard_set_commit_step_(d);
        if (S_ISLNK(st.st_mode)) {
            std::error_code ec;
            const std::filesystem::path target = std::filesystem::read_symlink(src, ec);
            if (!ec) std::filesystem::create_symlink(target, dst, ec);
            if (ec) fatal("cannot copy the symlink '%s' into the new output directory: %s", src.c_str(), ec.message().c_str());
        } else if (link(src.c_str(), dst.c_str()) != 0) {
            fatal("cannot carry '%s' over into the new output directory (hard link: %s); move it out of '%s' and "
                  "run again", src.c_str(), strerror(errno), d->out.c_str());
        }
    }

    shard_set_commit_step_(d);
    std::string retired = d->staging;   // where the old directory ends up
    bool exchanged = false;
#ifdef RENAME_EXCHANGE
    if (getenv("PREPARE_DATASET_TEST_NO_EXCHANGE") == nullptr) {   // test hook: the path below
        if (renameat2(AT_FDCWD, d->staging.c_str(), AT_FDCWD, d->real.c_str(), RENAME_EXCHANGE) == 0) {
            exchanged = true;
        } else if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
            fatal("cannot swap '%s' with '%s': %s", d->staging.c_str(), d->real.c_str(), strerror(errno));
        }
    }
#endif
    if (!exchanged) {
        // Two renames: for an instant there is no output directory (a glob finds no shard, never a mix);
        // a run killed in between is undone by the next one (shard_set_clean_leftovers).
        retired = d->parent + "/." + d->base + ".old-" + d->staging.substr(d->staging.size() - 6);
        if (rename(d->real.c_str(), retired.c_str()) != 0) {
            fatal("cannot move '%s' aside to '%s': %s", d->real.c_str(), retired.c_str(), strerror(errno));
        }
        shard_set_commit_step_(d);
        if (rename(d->staging.c_str(), d->real.c_str()) != 0) {
            const int err = errno;
            if (rename(retired.c_str(), d->real.c_str()) == 0) retired.clear();
            fatal("cannot move '%s' to '%s': %s%s", d->staging.c_str(), d->real.c_str(), strerror(err),
                  retired.empty() ? "" : " (the old directory is left beside it; the next run moves it back)");
        }
    }
    shard_set_cleanup_path_() = retired;   // the new set is in place; what is left to delete is the old one
    shard_set_commit_step_(d);
    shard_set_cleanup_();
    close(lock);
    if (d->staging_lock >= 0) close(d->staging_lock);
    d->staging_lock = -1;
    if (replaced > 0) {
        fprintf(stderr, "note: replaced %zu file%s of an earlier run of the set '%s' in '%s'\n", replaced,
                replaced == 1 ? "" : "s", set_name.c_str(), d->out.c_str());
    }
    std::vector<std::string> out;
    for (const std::string& p : staged) out.push_back(d->out + "/" + p.substr(p.rfind('/') + 1));
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
    if (opt.val_fraction >= 0 && std::find(opt.inputs.begin(), opt.inputs.end(), STDIN_INPUT) != opt.inputs.end()) {
        fatal("--val-fraction reads the input twice: it cannot read standard input ('-')");
    }
    // Every parquet file is opened (footer, schema) before any work: a bad one stops the run at once.
    uint64_t parquet_rows = 0;
    DocumentReader probe;
    probe.format = opt.format;
    for (const std::string& f : opt.inputs) {
        if (document_reader_format(&probe, f) != InputFormat::Parquet) continue;
        if (f == STDIN_INPUT) fatal("parquet input cannot be read from standard input ('-')");
        if (opt.parquet == nullptr) {
            fatal("'%s' is a parquet file, and this prepare_dataset was built without the Arrow / Parquet "
                  "libraries (pip install pyarrow, then make prepare_dataset)", f.c_str());
        }
        parquet_rows += opt.parquet(f)->rows();
    }
    if (opt.expected_documents == 0) opt.expected_documents = parquet_rows;
    ShardSetDir set_dir = shard_set_begin(opt.shards.out_dir, opt.shards.name);
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
    staged_spec.out_dir = set_dir.staging;
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
    stats.shards = shard_set_commit(&set_dir, opt.shards.name, writer.written);
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
