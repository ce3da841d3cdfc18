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
 * steps that get redone. resume_step <= 0 starts an empty log (fresh start). (llm.c appends on resume
 * without trimming, so its log can hold a step twice; readers such as dev/plot_log.py take the last
 * value.)
 * Either way the new main.log (kept lines, or nothing) is written to a temporary file that replaces
 * main.log atomically (llmc/utils.h AtomicFile), and that file is then appended to: a link planted at
 * main.log (or at a temporary name) is never written through, and a main.log that is a link is
 * refused on resume rather than read.
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

// The lines of path that the run resumed at resume_step keeps ("" when there is no such file).
inline std::string logger_kept_lines_(const std::string& path, int resume_step) {
    // O_NOFOLLOW: the log is ours to rewrite; its content is not taken from wherever a link points
    FilePtr in(fopen_regular(path.c_str(), O_RDONLY | O_NOFOLLOW, "rb"));
    if (in == nullptr) {
        if (errno == ENOENT) return "";  // nothing logged yet
        if (errno == ELOOP) fatal("'%s' is a symbolic link: the log in -o is rewritten on resume, not through a link", path.c_str());
        fatal("cannot open '%s': %s", path.c_str(), strerror(errno));
    }
    std::string kept, line;
    int c;
    auto finish_line = [&]() {
        int step, n = 0;
        bool drop = false;
        if (sscanf(line.c_str(), "s:%d %n", &step, &n) == 1 && n > 0) drop = step >= resume_step;
        if (!drop) kept += line;
        line.clear();
    };
    while ((c = fgetc(in.get())) != EOF) {
        line += (char)c;
        if (c == '\n') finish_line();
    }
    if (ferror(in.get())) fatal("read error on '%s': %s", path.c_str(), strerror(errno));
    if (!line.empty()) {
        line += '\n';  // a crash mid-line leaves no newline
        finish_line();
    }
    return kept;
}

inline void logger_init(Logger* lg, const char* log_dir, int process_rank, int resume_step) {
    lg->fp = nullptr;
    lg->path.clear();
    if (log_dir == nullptr || log_dir[0] == '\0' || process_rank != 0) return;
    lg->path = std::string(log_dir) + "/main.log";
    const std::string kept = resume_step > 0 ? logger_kept_lines_(lg->path, resume_step) : "";
    AtomicFile f = atomic_file_open(lg->path);
    fwrite_check(kept.data(), 1, kept.size(), f.fp, f.tmp_path.c_str());
    lg->fp = atomic_file_commit(f, true);
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
