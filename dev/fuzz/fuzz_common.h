/*
 * Shared by the libFuzzer harnesses in dev/fuzz/ (built with -DLLMC_FATAL_THROWS: fatal() throws
 * FatalError, which a harness catches, so a refused input is a normal end of one run). Each reader takes
 * a path, so the input goes to a per-process temporary file first.
 */
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmc/utils.h"

inline const std::string& fuzz_input_path() {
    static const std::string path = "/tmp/gpt2cu_fuzz_" + std::to_string((long)getpid()) + ".bin";
    return path;
}

// A reader that stops with fatal() leaves its FILE open: harmless in the programs (fatal() exits), but a
// harness that catches the throw would run out of descriptors after ~1000 such inputs (fopen then
// fails and the harness aborts; seen in CI). Before each input, close every descriptor opened since the
// first input: libFuzzer holds none of its own across runs. The leaked FILE structs stay (a few KB each).
inline void fuzz_close_leaked_descriptors() {
    static const int first_free = [] { int fd = dup(0); if (fd >= 0) close(fd); return fd; }();
    if (first_free < 0) return;
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return;
    const int own = dirfd(dir);
    std::vector<int> leaked;
    for (dirent* e = readdir(dir); e != nullptr; e = readdir(dir)) {
        const int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd > 2 && fd >= first_free && fd != own) leaked.push_back(fd);
    }
    closedir(dir);
    for (int fd : leaked) close(fd);
}

inline const char* fuzz_write_input(const uint8_t* data, size_t size) {
    fuzz_close_leaked_descriptors();
    FILE* f = fopen(fuzz_input_path().c_str(), "wb");
    if (f == nullptr) abort();
    if (size > 0 && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return fuzz_input_path().c_str();
}
