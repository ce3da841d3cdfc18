/*
 * Shared by the libFuzzer harnesses in dev/fuzz/ (built with -DLLMC_FATAL_THROWS: fatal() throws
 * FatalError, which a harness catches, so a refused input is a normal end of one run). Each reader takes
 * a path, so the input goes to a per-process temporary file first. A reader that refuses its input
 * must leave nothing behind (files, memory): dev/test/fuzz_check.sh runs with leak detection on.
 */
#pragma once

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

// The input goes through the lowest free descriptor, the same number for every input unless the run
// before left a file open (a reader that refused its input without closing its FILE: glibc keeps such a
// FILE reachable, so LeakSanitizer does not report it, but each one holds a descriptor and a few KB).
// A different number stops the harness at once, naming the leak. Harnesses open their own long-lived
// files before the first call.
inline const char* fuzz_write_input(const uint8_t* data, size_t size) {
    static int expected_fd = -1;
    FILE* f = fopen(fuzz_input_path().c_str(), "wb");
    if (f == nullptr) abort();
    if (expected_fd < 0) expected_fd = fileno(f);
    if (fileno(f) != expected_fd) {
        fprintf(stderr, "fuzz: descriptor %d is still open after the previous input: the reader left a file open\n",
                expected_fd);
        abort();
    }
    if (size > 0 && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return fuzz_input_path().c_str();
}
