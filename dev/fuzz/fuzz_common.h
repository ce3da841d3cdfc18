/*
 * Shared by the libFuzzer harnesses in dev/fuzz/ (built with -DLLMC_FATAL_THROWS: fatal() throws
 * FatalError, which a harness catches, so a refused input is a normal end of one run). Each reader takes
 * a path, so the input goes to a per-process temporary file first. A reader that refuses its input
 * must leave nothing behind (files, memory): dev/test/fuzz_check.sh runs with leak detection on.
 */
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "llmc/utils.h"

inline const std::string& fuzz_input_path() {
    static const std::string path = "/tmp/gpt2cu_fuzz_" + std::to_string((long)getpid()) + ".bin";
    return path;
}

// Checks that one run of the harness leaves no file open: a reader that refused its input without
// closing its FILE (glibc keeps such a FILE reachable, so LeakSanitizer does not report it, but each
// one holds a descriptor and a few KB). Declared first in LLVMFuzzerTestOneInput (after any static
// file of the harness): a new file takes the lowest free descriptor, so at the end of the run the
// lowest free one is the same again unless something stayed open; then the harness aborts there.
inline int fuzz_lowest_free_fd() {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    return fd;
}

struct FuzzNoFileLeftOpen {
    const int lowest_free = fuzz_lowest_free_fd();
    ~FuzzNoFileLeftOpen() {
        if (fuzz_lowest_free_fd() != lowest_free) abort();  // a reader left a file open (see above)
    }
};

inline const char* fuzz_write_input(const uint8_t* data, size_t size) {
    FILE* f = fopen(fuzz_input_path().c_str(), "wb");
    if (f == nullptr) abort();
    if (size > 0 && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return fuzz_input_path().c_str();
}
