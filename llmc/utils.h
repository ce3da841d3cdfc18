/*
 * Host-side utilities shared by every part of the project (no CUDA needed):
 *  - fatal(): the one way to report bad input (file, flag, data): one clear line, exit code 1.
 *  - checked wrappers for stdio and malloc that name the failing file and source line; fopen_check
 *    opens regular files only (a FIFO as an input would block the reader forever) and never writes
 *    through a symbolic link.
 *  - FilePtr: a FILE closed when its scope ends, also when fatal() throws (fuzz and test builds).
 *  - write-to-temp-then-rename for files that must never be seen half written (AtomicFile).
 * Both kinds of error stop through fatal(): what a user can cause (a file, a flag, data) with a line
 * that says what to fix, so it never crashes or hangs; a broken invariant of our own code (a launcher's
 * shape rule, an "internal: ..." line) with a line naming the check. Failed CUDA / library calls stop
 * through the check macros of llmc/cuda_common.h. (llmc/rand.h alone keeps two assert()s, on
 * conditions that only its own code can break.)
 */
#pragma once

#include <atomic>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
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

// A FILE owned by its scope: closed when the scope ends, also when fatal() throws. A reader that
// refuses its input with fatal() then leaves no open file behind (fuzz builds catch the throw and
// read the next input; the process would run out of descriptors and memory otherwise).
struct FileCloser {
    void operator()(FILE* fp) const { fclose(fp); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// What st_mode is, for messages: "a FIFO (named pipe)", "a directory", ...
inline const char* file_type_name(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

// Opens path with open(2) flags `flags` as a stdio stream of mode `mode`, for regular files only.
// Returns nullptr with errno set when open(2) fails. O_NONBLOCK makes the open of a FIFO return at
// once (a blocking open waits for the other end, forever if there is none); anything but a regular
// file is then refused with fatal() naming it, and the descriptor goes back to blocking mode.
inline FILE* fopen_regular(const char* path, int flags, const char* mode) {
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, 0644);  // 0644: new files, subject to the umask
    if (fd < 0) return nullptr;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int err = errno;
        close(fd);
        errno = err;
        return nullptr;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        fatal("'%s' is %s, not a regular file: refusing to %s it", path, file_type_name(sb.st_mode),
              (flags & O_ACCMODE) == O_RDONLY ? "read" : "write");
    }
    const int fl = fcntl(fd, F_GETFL);
    FILE* fp = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ? nullptr : fdopen(fd, mode);
    if (fp == nullptr) {
        const int err = errno;
        close(fd);
        errno = err;
    }
    return fp;
}

// Opens an input file for reading: nullptr (errno set) when it cannot be opened; fatal() naming it
// when it is anything but a regular file (a FIFO, a directory, a device). Follows symbolic links.
inline FILE* fopen_input(const char* path) { return fopen_regular(path, O_RDONLY, "rb"); }

// fopen with a message naming the file on failure. Regular files only (fopen_regular). Read modes
// follow symbolic links; write and append modes ("w", "a", "r+") refuse to open through one
// (O_NOFOLLOW): an output opened by name is never redirected to a file elsewhere.
inline FILE* fopen_check_(const char* path, const char* mode, const char* file, int line) {
    const bool plus = strchr(mode, '+') != nullptr;
    int flags = plus ? O_RDWR : mode[0] == 'r' ? O_RDONLY : O_WRONLY;
    if (mode[0] == 'w') flags |= O_CREAT | O_TRUNC;
    if (mode[0] == 'a') flags |= O_CREAT | O_APPEND;
    if (flags != O_RDONLY) flags |= O_NOFOLLOW;
    FILE* fp = fopen_regular(path, flags, mode);
    if (fp == nullptr) {
        if (errno == ELOOP && (flags & O_NOFOLLOW)) {
            fatal("cannot open '%s' for writing: it is a symbolic link, and outputs are never written through "
                  "one  [%s:%d]", path, file, line);
        }
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
// Atomic file replacement: the content goes to a new temporary file beside the target,
// "<path>.tmp.<8 hex digits>", then flush + fsync and rename over <path>. A crash or a full disk at any
// point leaves either the old complete file or the new complete file (and at worst the temporary file:
// llmc/checkpoint.h removes those of a checkpoint on resume).
// The temporary file is created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0644 under the umask):
// whatever already has that name (a link planted there to redirect the write, a FIFO, a leftover) is
// never opened or followed; another random name is drawn instead. The rename replaces a link at
// <path> itself, never the file it points to. An AtomicFile destroyed uncommitted (fatal() throwing in
// fuzz and test builds) closes and deletes its temporary file.
//
//   AtomicFile f = atomic_file_open(path);   fwrite_check(..., f.fp, f.tmp_path.c_str());   atomic_file_commit(f);

struct AtomicFile {
    FILE* fp = nullptr;
    std::string final_path;
    std::string tmp_path;

    AtomicFile() = default;
    AtomicFile(AtomicFile&& o) noexcept : fp(o.fp), final_path(std::move(o.final_path)), tmp_path(std::move(o.tmp_path)) {
        o.fp = nullptr;
    }
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    AtomicFile& operator=(AtomicFile&&) = delete;
    ~AtomicFile() {
        if (fp != nullptr) {
            fclose(fp);
            unlink(tmp_path.c_str());
        }
    }
};

constexpr int ATOMIC_FILE_NAME_TRIES = 100;

// "<path>.tmp.<8 hex digits>", created exclusively; *out_path gets the name. Returns nullptr (errno
// set) if no name could be created.
inline FILE* temp_file_create(const std::string& path, std::string* out_path) {
    static std::random_device rd;  // getrandom() on Linux: names an attacker cannot plant in advance
    for (int i = 0; i < ATOMIC_FILE_NAME_TRIES; i++) {
        char suffix[16];
        snprintf(suffix, sizeof(suffix), ".tmp.%08x", (unsigned)rd());
        *out_path = path + suffix;
        FILE* fp = fopen_regular(out_path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, "wb");
        if (fp != nullptr || errno != EEXIST) return fp;
    }
    return nullptr;
}

inline AtomicFile atomic_file_open(const std::string& path) {
    AtomicFile f;
    f.final_path = path;
    f.fp = temp_file_create(path, &f.tmp_path);
    if (f.fp == nullptr) {
        fatal("cannot open '%s' for writing (temporary file '%s'): %s", path.c_str(), f.tmp_path.c_str(), strerror(errno));
    }
    return f;
}

// keep_open: returns the file, still open, for more writes to it under its final name (main.log is
// appended to); the caller closes it. Else returns nullptr.
inline FILE* atomic_file_commit(AtomicFile& f, bool keep_open = false) {
    if (fflush(f.fp) != 0 || fsync(fileno(f.fp)) != 0) {
        fatal("cannot flush '%s': %s", f.tmp_path.c_str(), strerror(errno));
    }
    if (rename(f.tmp_path.c_str(), f.final_path.c_str()) != 0) {
        fatal("cannot rename '%s' to '%s': %s", f.tmp_path.c_str(), f.final_path.c_str(), strerror(errno));
    }
    FILE* fp = f.fp;
    f.fp = nullptr;  // committed: the destructor leaves the file alone
    if (keep_open) return fp;
    fclose_check(fp, f.final_path.c_str());
    return nullptr;
}

// ----------------------------------------------------------------------------
// Common 256 x int32 file header (docs/formats.md "File header"): every binary file of the ecosystem starts with one.

constexpr int FILE_HEADER_INTS = 256;
constexpr size_t FILE_HEADER_BYTES = FILE_HEADER_INTS * sizeof(int32_t);
