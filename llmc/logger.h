/*
 * main.log writer in llm.c's line format (docs/formats.md "main.log"), so llm.c's plotting and ours read either:
 *   s:%d trl:%.4f lr:%.6f norm:%.2f     train step: loss, learning rate, grad norm
 *   s:%d tel:%.4f                       val loss
 *   s:%d eval:%.4f                      multiple-choice eval accuracy
 * Only process 0 with an output directory logs; on every other process the calls do nothing.
 * Each line is flushed as written, so a crash loses at most the line being written.
 *
 * Step numbering (the trainer's loop, exactly as llm.c's train_gpt2.cu numbers main.log): iteration k
 * first evaluates and logs "s:k tel/eval" (k updates done), then saves checkpoint k, then does update
 * k+1 and logs it as "s:k trl" (the loop index, not the count of updates: the step line on stdout
 * says "step k+1/N" for the same update, as llm.c's does).
 * Resuming from checkpoint k: logger_init(..., resume_step = k) drops every "s:" line with s >= k and
 * keeps the rest (and lines it does not recognise): the resumed run logs val/eval of step k and the
 * train lines from s:k on again, and lines a crashed run wrote after its last checkpoint describe
 * steps that get redone. The trimmed file replaces main.log atomically and is then appended to.
 * resume_step <= 0 truncates (fresh start). (llm.c appends on resume without trimming, so its log
 * can hold a step twice; readers such as dev/plot_log.py take the last value.)
 *
 * API
 *   void logger_init(Logger*, const char* log_dir, int process_rank, int resume_step)  dir may be NULL
 *   void logger_log_train(Logger*, int step, float loss, float lr, float grad_norm)
 *   void logger_log_val(Logger*, int step, float val_loss)
 *   void logger_log_eval(Logger*, int step, float accuracy)
 *   void logger_free(Logger*)
 */
#pragma once

#include <cstdio>
#include <string>

#include "llmc/utils.h"

struct Logger {
    FILE* fp = nullptr;  // nullptr: logging disabled
    std::string path;
};

// Drops the lines of path that the run resumed at resume_step will write again; atomic rewrite.
inline void logger_trim_(const std::string& path, int resume_step) {
    FILE* in = fopen(path.c_str(), "rb");
    if (in == nullptr) return;  // nothing logged yet
    std::string kept, line;
    int c;
    bool any_dropped = false;
    auto finish_line = [&]() {
        int step, n = 0;
        bool drop = false;
        if (sscanf(line.c_str(), "s:%d %n", &step, &n) == 1 && n > 0) drop = step >= resume_step;
        if (drop) any_dropped = true;
        else kept += line;
        line.clear();
    };
    while ((c = fgetc(in)) != EOF) {
        line += (char)c;
        if (c == '\n') finish_line();
    }
    if (!line.empty()) {
        line += '\n';  // a crash mid-line leaves no newline
        finish_line();
    }
    fclose(in);
    if (!any_dropped) return;
    AtomicFile f = atomic_file_open(path);
    fwrite_check(kept.data(), 1, kept.size(), f.fp, f.tmp_path.c_str());
    atomic_file_commit(f);
}

inline void logger_init(Logger* lg, const char* log_dir, int process_rank, int resume_step) {
    lg->fp = nullptr;
    lg->path.clear();
    if (log_dir == nullptr || log_dir[0] == '\0' || process_rank != 0) return;
    lg->path = std::string(log_dir) + "/main.log";
    if (resume_step > 0) {
        logger_trim_(lg->path, resume_step);
        lg->fp = fopen_check(lg->path.c_str(), "ab");
    } else {
        lg->fp = fopen_check(lg->path.c_str(), "wb");
    }
}

inline void logger_line_(Logger* lg, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline void logger_line_(Logger* lg, const char* fmt, ...) {
    if (lg->fp == nullptr) return;
    va_list ap;
    va_start(ap, fmt);
    int rc = vfprintf(lg->fp, fmt, ap);
    va_end(ap);
    if (rc < 0 || fflush(lg->fp) != 0) fatal("cannot write to '%s': %s", lg->path.c_str(), strerror(errno));
}

inline void logger_log_train(Logger* lg, int step, float loss, float lr, float grad_norm) {
    logger_line_(lg, "s:%d trl:%.4f lr:%.6f norm:%.2f\n", step, loss, lr, grad_norm);
}

inline void logger_log_val(Logger* lg, int step, float val_loss) {
    logger_line_(lg, "s:%d tel:%.4f\n", step, val_loss);
}

inline void logger_log_eval(Logger* lg, int step, float accuracy) {
    logger_line_(lg, "s:%d eval:%.4f\n", step, accuracy);
}

inline void logger_free(Logger* lg) {
    if (lg->fp != nullptr) fclose_check(lg->fp, lg->path.c_str());
    lg->fp = nullptr;
}
