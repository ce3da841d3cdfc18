/*
 * Small helpers shared by the GoogleTest host tests in dev/test/:
 *  - TempDir: a fresh directory under $TMPDIR (else /tmp), removed with everything in it when the
 *    object goes out of scope. Death-test children leave it alone: they exit without unwinding.
 *  - read_file / read_bytes: a whole file as bytes; empty when the file is missing or unreadable.
 *  - write_file: replaces a file with the given bytes; aborts (a test bug) if it cannot be written.
 *  - temp_files_of: the temporary files an atomic write of a path left (llmc/utils.h AtomicFile).
 *  - repo_root / test_vocab_dir: where the repo is (from the test binary's path) and the GPT-2
 *    vocabulary the tokenizer tests use ($GPT2_VOCAB_DIR, else the repository's dev/data/gpt2).
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

struct TempDir {
    std::string path;

    explicit TempDir(const char* prefix = "gpt2cu_test") {
        std::error_code ec;
        std::filesystem::path base = std::filesystem::temp_directory_path(ec);
        if (ec) base = "/tmp";
        std::string tmpl = (base / (std::string(prefix) + "_XXXXXX")).string();
        if (mkdtemp(tmpl.data()) == nullptr) {
            perror(("TempDir: mkdtemp " + tmpl).c_str());
            abort();
        }
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;  // best effort: a test must not throw from a destructor
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string file(const std::string& name) const { return path + "/" + name; }
    // Writes bytes to file(name) and returns that path.
    std::string write(const std::string& name, const std::string& bytes) const;
};

inline std::string read_file(const std::string& path) {
    FILE* fp = fopen(path.c_str(), "rb");
    if (fp == nullptr) return std::string();
    std::string s;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) s.append(buf, n);
    fclose(fp);
    return s;
}

// read_file as a vector of bytes (char or uint8_t), for tests that index or patch a file's bytes.
template <typename Byte = uint8_t>
std::vector<Byte> read_bytes(const std::string& path) {
    std::string s = read_file(path);
    return std::vector<Byte>(s.begin(), s.end());
}

inline void write_file(const std::string& path, const void* data, size_t n) {
    FILE* fp = fopen(path.c_str(), "wb");
    bool ok = fp != nullptr && (n == 0 || fwrite(data, 1, n, fp) == n);  // data may be null when n == 0
    if (fp != nullptr && fclose(fp) != 0) ok = false;
    if (!ok) {
        perror(("write_file: " + path).c_str());
        abort();
    }
}

inline void write_file(const std::string& path, const std::string& bytes) {
    write_file(path, bytes.data(), bytes.size());
}

template <typename T>
void write_file(const std::string& path, const std::vector<T>& v) {
    write_file(path, v.data(), v.size() * sizeof(T));
}

inline std::string TempDir::write(const std::string& name, const std::string& bytes) const {
    std::string p = file(name);
    write_file(p, bytes);
    return p;
}

// The temporary files of path ("<path>.tmp.<hex>", or "<path>.tmp" of earlier builds) in its folder,
// sorted: empty after every completed atomic write (llmc/utils.h AtomicFile).
inline std::vector<std::string> temp_files_of(const std::string& path) {
    const std::filesystem::path p(path);
    const std::string prefix = p.filename().string() + ".tmp";
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(p.parent_path(), ec)) {
        const std::string name = e.path().filename().string();
        if (name.compare(0, prefix.size(), prefix) == 0) out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// <repo> from /proc/self/exe = <repo>/build/host/tests/<test>; "." if unreadable.
inline std::string repo_root() {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec || p.empty()) return ".";
    for (int up = 0; up < 4; up++) p = p.parent_path();
    return p.string();
}

inline std::string test_vocab_dir() {
    const char* env = getenv("GPT2_VOCAB_DIR");
    if (env != nullptr && env[0] != '\0') return env;
    return repo_root() + "/dev/data/gpt2";
}
