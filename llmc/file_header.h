/*
 * The one reader of the 256 x int32 header that starts every binary file (docs/formats.md "File header"),
 * host only. Each file format is one row of FILE_FORMATS: its magic, what it is called in messages,
 * and the versions this build reads. Every reader (model file, debug state, run state, token shard,
 * eval file, tokenizer) opens its file through file_header_open / file_header_check, so a file that
 * is too short, of another kind or of an unknown version gets the same message whatever was passed:
 *
 *   KIND 'PATH' is a directory, not a regular file   (also a FIFO, a device: nothing is opened that
 *                                                    could block or is no file)
 *   KIND 'PATH' is too small to hold a header (N bytes, need 1024)
 *   KIND 'PATH' has bad magic M (WHAT M BELONGS TO), expected E
 *   KIND 'PATH' has version V, expected VERSIONS
 *   KIND 'PATH' is N bytes but its header says WHAT, which takes W bytes: truncated | trailing bytes
 *     (file_size_check, after the reader has worked out W from the header's fields)
 *
 * API
 *   const FileFormat& file_format(int32_t magic)          the row of a magic (fatal if none: a bug)
 *   const char* file_kind_of_magic(int32_t magic)          "a token shard", ... for messages
 *   FilePtr file_header_open(path, magic, h, &size)        fopen + file_header_check; fatal naming path
 *   void  file_header_check(fp, path, magic, h, &size)     reads h[0, 256) of an open file, checks the
 *                                                          size, magic and version; fp after the header
 *   void  file_header_read(path, magic, h, &size)          the same, file closed again
 *   void  file_size_check(path, magic, size, want, says)   fatal unless size == want
 */
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>

#include "llmc/utils.h"

constexpr int32_t MODEL_FILE_MAGIC = 20240326;
constexpr int32_t MODEL_FILE_VERSION_FP32 = 3;
constexpr int32_t MODEL_FILE_VERSION_BF16 = 5;
constexpr int32_t DEBUG_STATE_MAGIC = 20240327;
constexpr int32_t DEBUG_STATE_VERSION_LLMC = 2;  // llm.c's layout
constexpr int32_t DEBUG_STATE_VERSION = 3;       // ours
constexpr int32_t TOKENIZER_MAGIC = 20240328;
constexpr int32_t TOKENIZER_VERSION = 2;        // written; version 1 (no end-of-text slot) is read too
constexpr int32_t SHARD_MAGIC = 20240520;
constexpr int32_t SHARD_VERSION = 1;
constexpr int32_t EVAL_MAGIC = 20240522;
constexpr int32_t EVAL_VERSION = 1;
constexpr int32_t RUN_STATE_MAGIC = 20240527;
constexpr int32_t RUN_STATE_VERSION = 1;

struct FileFormat {
    int32_t magic;
    const char* kind;        // in messages: "token shard 'x.bin' ..."
    const char* a_kind;      // what a file with this magic is: "a token shard"
    int32_t versions[2];     // the versions read (a second slot of 0: only one)
    const char* versions_text;
};

constexpr FileFormat FILE_FORMATS[] = {
    {MODEL_FILE_MAGIC, "model file", "a model checkpoint", {MODEL_FILE_VERSION_FP32, MODEL_FILE_VERSION_BF16},
     "3 (fp32) or 5 (bf16)"},
    {DEBUG_STATE_MAGIC, "debug state", "a debug state", {DEBUG_STATE_VERSION_LLMC, DEBUG_STATE_VERSION},
     "2 (llm.c) or 3"},
    {TOKENIZER_MAGIC, "tokenizer file", "a tokenizer file", {1, TOKENIZER_VERSION}, "1 or 2"},
    {SHARD_MAGIC, "token shard", "a token shard", {SHARD_VERSION, 0}, "1 (uint16 tokens)"},
    {EVAL_MAGIC, "eval file", "a multiple-choice eval file", {EVAL_VERSION, 0}, "1"},
    {RUN_STATE_MAGIC, "run state file", "an optimizer state file", {RUN_STATE_VERSION, 0}, "1"},
};

inline const FileFormat* file_format_find_(int32_t magic) {
    for (const FileFormat& f : FILE_FORMATS) {
        if (f.magic == magic) return &f;
    }
    return nullptr;
}

inline const FileFormat& file_format(int32_t magic) {
    const FileFormat* f = file_format_find_(magic);
    if (f == nullptr) fatal("internal error: no file format with magic %d", magic);
    return *f;
}

// What a magic number belongs to, for error messages when the wrong kind of file is passed.
inline const char* file_kind_of_magic(int32_t magic) {
    const FileFormat* f = file_format_find_(magic);
    return f != nullptr ? f->a_kind : "not a file of this project";
}

inline void file_header_check(FILE* fp, const char* path, int32_t magic, int32_t h[FILE_HEADER_INTS], long* size) {
    const FileFormat& f = file_format(magic);
    *size = file_size_of(fp, path);
    if (*size < static_cast<long>(FILE_HEADER_BYTES)) {
        fatal("%s '%s' is too small to hold a header (%ld bytes, need %zu)", f.kind, path, *size, FILE_HEADER_BYTES);
    }
    fread_check(h, sizeof(int32_t), FILE_HEADER_INTS, fp, path);
    if (h[0] != magic) {
        fatal("%s '%s' has bad magic %d (%s), expected %d", f.kind, path, h[0], file_kind_of_magic(h[0]), magic);
    }
    if (h[1] == 0 || (h[1] != f.versions[0] && h[1] != f.versions[1])) {
        fatal("%s '%s' has version %d, expected %s", f.kind, path, h[1], f.versions_text);
    }
}

inline FilePtr file_header_open(const char* path, int32_t magic, int32_t h[FILE_HEADER_INTS], long* size) {
    struct stat st;  // named by kind before the open (which refuses the same, naming only the path)
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fatal("%s '%s' is %s, not a regular file", file_format(magic).kind, path, file_type_name(st.st_mode));
    }
    FilePtr fp(fopen_check(path, "rb"));
    file_header_check(fp.get(), path, magic, h, size);
    return fp;
}

inline void file_header_read(const char* path, int32_t magic, int32_t h[FILE_HEADER_INTS], long* size) {
    fclose_check(file_header_open(path, magic, h, size).release(), path);
}

// `says`: what the header's fields give, e.g. "120 tokens"; want: the bytes they take, header included.
inline void file_size_check(const char* path, int32_t magic, long size, size_t want, const char* says) {
    if (size >= 0 && static_cast<size_t>(size) == want) return;
    fatal("%s '%s' is %ld bytes but its header says %s, which takes %zu bytes: %s", file_format(magic).kind, path,
          size, says, want, static_cast<size_t>(size) < want ? "truncated" : "trailing bytes");
}
