/*
 * Host-side utilities shared by every part of the project (no CUDA needed):
 *  - fatal(): the one way to report bad input (file, flag, data): one clear line, exit code 1.
 *  - checked wrappers for stdio and malloc that name the failing file and source line.
 *  - write-to-temp-then-rename for files that must never be seen half written.
 * Errors in our own code (broken invariants) use assert-like checks; errors a user can cause go
 * through fatal() so they never crash or hang.
 */
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifdef LLMC_FATAL_THROWS
// Fuzz builds (dev/fuzz): fatal() throws this instead of exiting, so one bad input ends one run of the
// harness, not the fuzzer.
struct FatalError {};
#endif

// A function that runs once, after an error's message is printed and before the process ends, with
// that message (without "error: "): the multi-GPU start-up registers one that tells the other processes
// and aborts the NCCL communicator (llmc/nccl_id_exchange.h peer_watch_start), so that they do not wait
// for this one. It need not return. One hook at a time; it is cleared before it runs, so an error inside
// it ends the process normally.
using FatalHook = void (*)(const char* message);
inline std::atomic<FatalHook>& fatal_hook_slot_() {
    static std::atomic<FatalHook> hook{nullptr};
    return hook;
}
inline void fatal_set_hook(FatalHook hook) { fatal_hook_slot_().store(hook); }
inline void fatal_run_hook_(const char* message) {
    const FatalHook hook = fatal_hook_slot_().exchange(nullptr);
    if (hook != nullptr) hook(message);
}

// Print "error: <message>" to stderr and exit with status 1. Use for anything the user can fix.
[[noreturn]] inline void fatal(const char* fmt, ...) {
    fflush(stdout);
    char message[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    fprintf(stderr, "error: %s\n", message);
#ifdef LLMC_FATAL_THROWS
    throw FatalError{};
#else
    fatal_run_hook_(message);
    exit(EXIT_FAILURE);
#endif
}

// The one check of a process rank and process count (-pr, -pn), wherever they arrive; `what` names
// the caller.
inline void check_process_rank(const char* what, int rank, int num_processes) {
    if (num_processes < 1) fatal("%s: the number of processes must be >= 1 (-pn), got %d", what, num_processes);
    if (rank < 0 || rank >= num_processes) {
        fatal("%s: process rank %d outside 0..%d (-pr must be below -pn %d)", what, rank, num_processes - 1,
              num_processes);
    }
}

// What a loader (DataLoader, EvalLoader) reads per batch: B rows of T tokens, this process's part of
// num_processes. loader_shape_set checks the rank and fills it.
struct LoaderShape {
    size_t B = 0, T = 0;
    int process_rank = 0, num_processes = 1;
};

inline void loader_shape_set(LoaderShape* s, const char* what, size_t B, size_t T, int process_rank,
                             int num_processes) {
    check_process_rank(what, process_rank, num_processes);
    s->B = B;
    s->T = T;
    s->process_rank = process_rank;
    s->num_processes = num_processes;
}

// ----------------------------------------------------------------------------
// checked stdio

inline FILE* fopen_check_(const char* path, const char* mode, const char* file, int line) {
    FILE* fp = fopen(path, mode);
    if (fp == nullptr) {
        fatal("cannot open '%s' (mode %s): %s  [%s:%d]", path, mode, strerror(errno), file, line);
    }
    return fp;
}
#define fopen_check(path, mode) fopen_check_(path, mode, __FILE__, __LINE__)

// Reads exactly count elements or reports the file as truncated. `what` names the file for the user.
inline void fread_check_(void* ptr, size_t size, size_t count, FILE* fp, const char* what,
                         const char* file, int line) {
    if (size == 0 || count == 0) return;  // ptr may be null then (an empty vector's data())
    size_t got = fread(ptr, size, count, fp);
    if (got != count) {
        if (feof(fp)) {
            fatal("'%s' is truncated: wanted %zu elements of %zu bytes, got %zu  [%s:%d]",
                  what, count, size, got, file, line);
        }
        fatal("read error on '%s': %s  [%s:%d]", what, strerror(errno), file, line);
    }
}
#define fread_check(ptr, size, count, fp, what) fread_check_(ptr, size, count, fp, what, __FILE__, __LINE__)

inline void fwrite_check_(const void* ptr, size_t size, size_t count, FILE* fp, const char* what,
                          const char* file, int line) {
    if (size == 0 || count == 0) return;  // ptr may be null then (an empty vector's data())
    size_t put = fwrite(ptr, size, count, fp);
    if (put != count) {
        fatal("write error on '%s' (%zu of %zu elements written): %s  [%s:%d]",
              what, put, count, strerror(errno), file, line);
    }
}
#define fwrite_check(ptr, size, count, fp, what) fwrite_check_(ptr, size, count, fp, what, __FILE__, __LINE__)

inline void fseek_check_(FILE* fp, long off, int whence, const char* what, const char* file, int line) {
    if (fseek(fp, off, whence) != 0) {
        fatal("seek failed on '%s' (offset %ld): %s  [%s:%d]", what, off, strerror(errno), file, line);
    }
}
#define fseek_check(fp, off, whence, what) fseek_check_(fp, off, whence, what, __FILE__, __LINE__)

inline void fclose_check_(FILE* fp, const char* what, const char* file, int line) {
    if (fclose(fp) != 0) {
        fatal("close failed on '%s': %s  [%s:%d]", what, strerror(errno), file, line);
    }
}
#define fclose_check(fp, what) fclose_check_(fp, what, __FILE__, __LINE__)

// Size of an open file in bytes (position is restored).
inline long file_size_of(FILE* fp, const char* what) {
    long pos = ftell(fp);
    fseek_check(fp, 0, SEEK_END, what);
    long size = ftell(fp);
    fseek_check(fp, pos, SEEK_SET, what);
    return size;
}

inline void* malloc_check_(size_t size, const char* file, int line) {
    void* p = malloc(size);
    if (p == nullptr && size > 0) {
        fatal("out of host memory allocating %zu bytes  [%s:%d]", size, file, line);
    }
    return p;
}
#define malloc_check(size) malloc_check_(size, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// Atomic file replacement: write to "<path>.tmp", flush + fsync, rename over <path>.
// A crash or a full disk at any point leaves either the old complete file or the new complete file.

#include <unistd.h>

struct AtomicFile {
    FILE* fp = nullptr;
    std::string final_path;
    std::string tmp_path;
};

inline AtomicFile atomic_file_open(const std::string& path) {
    AtomicFile f;
    f.final_path = path;
    f.tmp_path = path + ".tmp";
    f.fp = fopen_check(f.tmp_path.c_str(), "wb");
    return f;
}

inline void atomic_file_commit(AtomicFile& f) {
    if (fflush(f.fp) != 0 || fsync(fileno(f.fp)) != 0) {
        fatal("cannot flush '%s': %s", f.tmp_path.c_str(), strerror(errno));
    }
    fclose_check(f.fp, f.tmp_path.c_str());
    f.fp = nullptr;
    if (rename(f.tmp_path.c_str(), f.final_path.c_str()) != 0) {
        fatal("cannot rename '%s' to '%s': %s", f.tmp_path.c_str(), f.final_path.c_str(), strerror(errno));
    }
}

// ----------------------------------------------------------------------------
// Common 256 x int32 file header (docs/formats.md "File header"): every binary file of the ecosystem starts with one.

constexpr int FILE_HEADER_INTS = 256;
constexpr size_t FILE_HEADER_BYTES = FILE_HEADER_INTS * sizeof(int32_t);
