/*
 * Multiple-choice eval loader (docs/formats.md "Multiple-choice eval file", HellaSwag style, magic 20240522).
 *
 * The whole file is parsed and validated at init (HellaSwag val is ~10k examples, a few MB). Each
 * example has a context, 4 completions and a label. A batch holds E = floor(B/4) examples x 4
 * completions (B >= 4, as llm.c: with B not a multiple of 4 the last B - 4E rows are padding);
 * row 4*e + c holds context + completion c of the batch's example e, left aligned and padded:
 *   inputs[row, t]  = token t of (context, completion)      (pad: end-of-text, GPT2_EOT)
 *   targets[row, t] = token t+1                              (pad: GPT2_EOT)
 *   mask[row, t]    = 1 where targets[row, t] is a completion token, else 0
 * so the model's loss at a masked position is the loss of one completion token given everything
 * before it. All three arrays are (B, T) and overwritten by each next_batch.
 *
 * Process interleaving: global batch k holds examples [k*P*E, (k+1)*P*E) with E = B/4 examples per
 * process; process r takes the E examples starting at k*P*E + r*E. Every process runs the same number
 * of batches (ceil(N / (P*E))), so collective reductions line up; rows past the last example are
 * padding with an all-zero mask and count for nothing.
 *
 * API
 *   void eval_loader_init(EvalLoader*, const char* path, size_t B, size_t T, int process_rank,
 *                         int num_processes)      B >= 4; examples must fit in T
 *   bool eval_file_missing(const char* path)     nothing at path (-h 1 then trains without the eval, as
 *                                                llm.c); a file that is there but bad is an init error
 *   void eval_check_vocab(const EvalLoader*, int vocab_size)   every id (and the pad) < the model's V
 *   size_t eval_loader_num_batches(const EvalLoader*)
 *   void eval_loader_reset(EvalLoader*)
 *   void eval_loader_next_batch(EvalLoader*)     fills inputs, targets, mask, labels
 *   int  eval_loader_stat_losses(const EvalLoader*, const float* losses)
 *        losses (B*T, per-position losses of the current batch) -> number of this process's
 *        examples in the batch whose lowest mean completion loss is the labelled completion
 *   void eval_loader_free(EvalLoader*)
 *   std::string eval_example_problem(const EvalExample&)
 *        the content rules of one example (label 0..3, non-empty context and completions, token ids
 *        < GPT2_VOCAB_SIZE, under 65535 bytes): "" when it is fine, else what is wrong. The writer
 *        (dev/data/prepare_dataset.h) applies the same function, so it never writes what this refuses.
 * Bad files (magic, version, delimiter, sizes, labels, token ids, truncation, trailing bytes) stop
 * with one fatal() message naming the file and the example.
 */
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/file_header.h"
#include "llmc/gpt2_vocab.h"
#include "llmc/utils.h"

constexpr int EVAL_NUM_COMPLETIONS = 4;

struct EvalExample {
    int label = 0;
    std::vector<uint16_t> context;
    std::vector<uint16_t> completions[EVAL_NUM_COMPLETIONS];
};

// Bytes of one example in the file: delimiter, bytes, index, label, count, then a length + ids per part.
inline size_t eval_example_bytes(const EvalExample& e) {
    size_t words = 5 + 1 + e.context.size();
    for (const std::vector<uint16_t>& c : e.completions) words += 1 + c.size();
    return words * sizeof(uint16_t);
}

inline std::string eval_example_problem(const EvalExample& e) {
    char buf[128];
    if (e.label < 0 || e.label >= EVAL_NUM_COMPLETIONS) {
        snprintf(buf, sizeof(buf), "has label %d (must be 0..3)", e.label);
        return buf;
    }
    if (e.context.empty()) return "has an empty context";
    for (int c = 0; c < EVAL_NUM_COMPLETIONS; c++) {
        if (e.completions[c].empty()) {
            snprintf(buf, sizeof(buf), "has an empty completion %d", c);
            return buf;
        }
    }
    for (int part = -1; part < EVAL_NUM_COMPLETIONS; part++) {
        for (uint16_t t : part < 0 ? e.context : e.completions[part]) {
            if (t >= GPT2_VOCAB_SIZE) {
                snprintf(buf, sizeof(buf), "has token id %u >= %d", (unsigned)t, GPT2_VOCAB_SIZE);
                return buf;
            }
        }
    }
    if (eval_example_bytes(e) >= 65535) {
        snprintf(buf, sizeof(buf), "is %zu bytes, more than the format's 65534", eval_example_bytes(e));
        return buf;
    }
    return "";
}

struct EvalLoader : LoaderShape {  // B, T, process_rank, num_processes
    std::string path;
    std::vector<EvalExample> examples;
    size_t examples_per_batch = 0;   // E = B / 4 per process
    size_t num_batches = 0;
    size_t next_batch_idx = 0;
    int* inputs = nullptr;           // (B, T)
    int* targets = nullptr;          // (B, T)
    uint8_t* mask = nullptr;         // (B, T)
    int* labels = nullptr;           // (E) label of each example of the batch, -1 for padding
};

// The one check of the micro-batch for the eval: room for one example's EVAL_NUM_COMPLETIONS rows (llm.c's
// rule; rows past the last whole example are padding).
inline void eval_check_batch(size_t B) {
    if (B < (size_t)EVAL_NUM_COMPLETIONS) {
        fatal("-h 1 needs -b >= %d (an example takes %d rows, one per completion), got %zu; use -h 0 or a larger -b",
              EVAL_NUM_COMPLETIONS, EVAL_NUM_COMPLETIONS, B);
    }
}

inline bool eval_file_missing(const char* path) {
    struct stat st;
    return stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

inline void eval_loader_init(EvalLoader* el, const char* path, size_t B, size_t T, int process_rank,
                             int num_processes) {
    eval_check_batch(B);
    loader_shape_set(el, "eval loader", B, T, process_rank, num_processes);
    el->path = path;
    el->examples.clear();

    int32_t header[FILE_HEADER_INTS];
    long size = 0;
    FilePtr f = file_header_open(path, EVAL_MAGIC, header, &size);
    if (header[2] <= 0) fatal("eval file '%s' says it has %d examples", path, header[2]);
    if (header[3] < 0) fatal("eval file '%s' says its longest example is %d bytes: corrupted header", path, header[3]);
    size_t n = (size_t)header[2];
    size_t longest = (size_t)header[3];  // 0: not given

    // an odd byte count is a file cut inside a token (or a stray byte): the parse below says which
    const size_t body_bytes = (size_t)size - FILE_HEADER_BYTES;
    const size_t body_words = body_bytes / sizeof(uint16_t);
    std::vector<uint16_t> body(body_words);
    fread_check(body.data(), sizeof(uint16_t), body_words, f.get(), path);
    fclose_check(f.release(), path);

    size_t pos = 0;  // in uint16 words
    auto need = [&](size_t words, size_t ex) {
        if (pos + words <= body_words) return;
        if (pos == body_words && pos * sizeof(uint16_t) == body_bytes && words == 5) {
            fatal("eval file '%s' ends after %zu examples, but its header says %zu: truncated (or a wrong example "
                  "count)", path, ex, n);
        }
        fatal("eval file '%s' is truncated inside example %zu (the file ends %zu bytes after its header)", path, ex,
              body_bytes);
    };
    for (size_t ex = 0; ex < n; ex++) {
        size_t start = pos;
        need(5, ex);
        if (body[pos] != 65535) {
            fatal("eval file '%s': example %zu does not start with the delimiter 65535 (found %u): "
                  "corrupted", path, ex, (unsigned)body[pos]);
        }
        size_t ex_bytes = body[pos + 1];
        if (body[pos + 2] != (uint16_t)ex) {
            fatal("eval file '%s': example %zu has index %u", path, ex, (unsigned)body[pos + 2]);
        }
        EvalExample e;
        e.label = body[pos + 3];
        int ncomp = body[pos + 4];
        pos += 5;
        if (ncomp != EVAL_NUM_COMPLETIONS) fatal("eval file '%s': example %zu has %d completions (must be 4)", path, ex, ncomp);
        need(1, ex);
        size_t ctx_len = body[pos++];
        need(ctx_len, ex);
        e.context.assign(body.begin() + pos, body.begin() + pos + ctx_len);
        pos += ctx_len;
        for (int c = 0; c < ncomp; c++) {
            need(1, ex);
            size_t len = body[pos++];
            need(len, ex);
            e.completions[c].assign(body.begin() + pos, body.begin() + pos + len);
            pos += len;
            if (ctx_len + len > T) {
                fatal("eval file '%s': example %zu needs %zu tokens (context + completion %d) but the "
                      "sequence length -t is %zu", path, ex, ctx_len + len, c, T);
            }
        }
        size_t got_bytes = (pos - start) * sizeof(uint16_t);
        if (got_bytes != ex_bytes) {
            fatal("eval file '%s': example %zu says it is %zu bytes but its fields take %zu: corrupted",
                  path, ex, ex_bytes, got_bytes);
        }
        if (longest > 0 && got_bytes > longest) {
            fatal("eval file '%s': example %zu is %zu bytes, more than the header's longest example %zu",
                  path, ex, got_bytes, longest);
        }
        const std::string problem = eval_example_problem(e);
        if (!problem.empty()) fatal("eval file '%s': example %zu %s", path, ex, problem.c_str());
        el->examples.push_back(std::move(e));
    }
    if (pos * sizeof(uint16_t) != body_bytes) {
        fatal("eval file '%s' has %zu bytes after its %zu examples: corrupted or wrong example count",
              path, body_bytes - pos * sizeof(uint16_t), n);
    }

    el->examples_per_batch = B / EVAL_NUM_COMPLETIONS;
    size_t per_global = el->examples_per_batch * (size_t)num_processes;
    el->num_batches = (n + per_global - 1) / per_global;
    el->next_batch_idx = 0;
    el->inputs = (int*)malloc_check(B * T * sizeof(int));
    el->targets = (int*)malloc_check(B * T * sizeof(int));
    el->mask = (uint8_t*)malloc_check(B * T);
    el->labels = (int*)malloc_check(el->examples_per_batch * sizeof(int));
}

// -h 1 with a model of vocab_size ids: every token id of the file, and the padding id, must be one.
inline void eval_check_vocab(const EvalLoader* el, int vocab_size) {
    int top = GPT2_EOT;
    for (const EvalExample& e : el->examples) {
        for (int part = -1; part < EVAL_NUM_COMPLETIONS; part++) {
            for (uint16_t t : part < 0 ? e.context : e.completions[part]) top = std::max(top, (int)t);
        }
    }
    if (top >= vocab_size) {
        fatal("-h 1: eval file '%s' holds GPT-2 token ids up to %d (its rows are padded with %d), but the model's "
              "vocabulary has %d ids: use a model with the GPT-2 vocabulary, or -h 0", el->path.c_str(), top,
              GPT2_EOT, vocab_size);
    }
}

inline size_t eval_loader_num_batches(const EvalLoader* el) { return el->num_batches; }

inline void eval_loader_reset(EvalLoader* el) { el->next_batch_idx = 0; }

inline void eval_loader_next_batch(EvalLoader* el) {
    size_t B = el->B, T = el->T, E = el->examples_per_batch;
    size_t k = el->next_batch_idx;
    el->next_batch_idx = (k + 1) % el->num_batches;
    size_t first = k * E * (size_t)el->num_processes + (size_t)el->process_rank * E;
    for (size_t i = 0; i < B * T; i++) {
        el->inputs[i] = GPT2_EOT;
        el->targets[i] = GPT2_EOT;
        el->mask[i] = 0;
    }
    for (size_t e = 0; e < E; e++) {
        size_t ex = first + e;
        if (ex >= el->examples.size()) {
            el->labels[e] = -1;
            continue;
        }
        const EvalExample& x = el->examples[ex];
        el->labels[e] = x.label;
        size_t ctx = x.context.size();
        for (int c = 0; c < EVAL_NUM_COMPLETIONS; c++) {
            size_t row = e * EVAL_NUM_COMPLETIONS + c;
            int* in = el->inputs + row * T;
            int* tg = el->targets + row * T;
            uint8_t* m = el->mask + row * T;
            const std::vector<uint16_t>& comp = x.completions[c];
            size_t len = ctx + comp.size();  // <= T (checked at init)
            auto tok = [&](size_t t) -> int { return t < ctx ? x.context[t] : comp[t - ctx]; };
            for (size_t t = 0; t < len; t++) in[t] = tok(t);
            for (size_t t = 0; t + 1 < len; t++) tg[t] = tok(t + 1);
            // position t predicts token t+1: completion tokens are ctx..len-1
            for (size_t t = ctx - 1; t + 1 < len; t++) m[t] = 1;
        }
    }
}

inline int eval_loader_stat_losses(const EvalLoader* el, const float* losses) {
    size_t T = el->T;
    int correct = 0;
    for (size_t e = 0; e < el->examples_per_batch; e++) {
        if (el->labels[e] < 0) continue;
        int best = -1;
        double best_loss = 0.0;
        for (int c = 0; c < EVAL_NUM_COMPLETIONS; c++) {
            size_t row = e * EVAL_NUM_COMPLETIONS + c;
            double sum = 0.0;
            int count = 0;
            for (size_t t = 0; t < T; t++) {
                if (el->mask[row * T + t]) {
                    sum += losses[row * T + t];
                    count++;
                }
            }
            double mean = sum / count;  // count > 0: completions are non-empty
            if (!std::isfinite(mean)) mean = INFINITY;  // a NaN loss never wins
            if (best < 0 || mean < best_loss) {  // ties go to the lower index
                best = c;
                best_loss = mean;
            }
        }
        if (best == el->labels[e]) correct++;
    }
    return correct;
}

inline void eval_loader_free(EvalLoader* el) {
    free(el->inputs);
    free(el->targets);
    free(el->mask);
    free(el->labels);
    el->inputs = el->targets = el->labels = nullptr;
    el->mask = nullptr;
    el->examples.clear();
}
