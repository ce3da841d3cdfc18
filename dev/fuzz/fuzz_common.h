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

inline const char* fuzz_write_input(const uint8_t* data, size_t size) {
    FILE* f = fopen(fuzz_input_path().c_str(), "wb");
    if (f == nullptr) abort();
    if (size > 0 && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return fuzz_input_path().c_str();
}
