/*
 * Decode-only GPT-2 tokenizer for printing samples: reads gpt2_tokenizer.bin (docs/formats.md "Tokenizer": header
 * magic 20240328, version 1 or 2, vocab size, end-of-text id (v2); then per id a uint8 length and the
 * raw bytes). Header-only, no regex library needed.
 *
 *   Tokenizer tok;
 *   if (tokenizer_init(&tok, "gpt2_tokenizer.bin")) { tokenizer_print(stdout, &tok, id); tokenizer_free(&tok); }
 *
 * A missing file is not an error (one warning line, tokenizer_init returns false); a file that is there
 * but malformed (magic, version, size, truncation) or not a regular file (a FIFO) is: fatal() naming
 * the file. A refused file leaves *t empty and nothing allocated (fatal() may throw: fuzz builds).
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/file_header.h"
#include "llmc/gpt2_vocab.h"
#include "llmc/utils.h"

struct Tokenizer {
    uint32_t vocab_size = 0;
    uint32_t eot_token = 0;
    std::vector<std::string> tokens;  // id -> bytes (a token may hold a 0 byte; c_str() is NUL-terminated)
};

inline bool tokenizer_init(Tokenizer* t, const char* path) {
    *t = Tokenizer();
    FilePtr file(fopen_input(path));  // a FIFO or directory: fatal() naming it
    if (file == nullptr) {
        fprintf(stderr, "warning: cannot open tokenizer '%s' (%s): samples will not be decoded "
                        "(dev/data/tinyshakespeare.sh or 'gpt2tok write-bin' writes it)\n", path, strerror(errno));
        return false;
    }
    FILE* fp = file.get();
    int32_t header[FILE_HEADER_INTS];
    long size = 0;
    file_header_check(fp, path, TOKENIZER_MAGIC, header, &size);
    const uint32_t vocab_size = (uint32_t)header[2];
    const uint32_t eot_token = header[1] == 2 ? (uint32_t)header[3] : GPT2_EOT;  // version 1 predates the eot slot
    if (vocab_size == 0 || vocab_size > (1u << 24) || eot_token >= vocab_size) {
        fatal("'%s' has a bad header: vocab size %u, end-of-text id %u", path, vocab_size, eot_token);
    }
    // each token takes at least 2 bytes: a vocabulary the file cannot hold is refused before any allocation
    if ((uint64_t)size - FILE_HEADER_BYTES < 2ull * vocab_size) {
        fatal("'%s' is truncated: %ld bytes cannot hold the %u tokens its header says", path, size, vocab_size);
    }
    std::vector<std::string> tokens(vocab_size);
    for (uint32_t i = 0; i < vocab_size; i++) {
        uint8_t n;
        fread_check(&n, 1, 1, fp, path);
        if (n == 0) fatal("'%s': token %u has length 0", path, i);
        tokens[i].resize(n);
        fread_check(&tokens[i][0], 1, n, fp, path);
    }
    if (fgetc(fp) != EOF) fatal("'%s' has bytes after the last of its %u tokens", path, vocab_size);
    fclose_check(file.release(), path);
    t->vocab_size = vocab_size;
    t->eot_token = eot_token;
    t->tokens = std::move(tokens);
    return true;
}

// The id samples start after, as llm.c's generation: the tokenizer's end-of-text (from its header;
// GPT2_EOT in version 1 files), or GPT2_EOT when no tokenizer was loaded (t == nullptr).
inline int tokenizer_sample_start(const Tokenizer* t) { return t != nullptr ? (int)t->eot_token : GPT2_EOT; }

// Bytes of token id, NUL-terminated; nullptr for an id outside the vocabulary.
inline const char* tokenizer_decode(const Tokenizer* t, uint32_t id) {
    return id < t->vocab_size ? t->tokens[id].c_str() : nullptr;
}

// Prints a token so that it cannot garble a terminal: printable ASCII, '\n' and '\t' and complete
// UTF-8 characters (>= U+00A0) are written as they are, every other byte as "\xNN". A character split
// across two tokens therefore shows as escapes. Ids outside the vocabulary print as "<id N>".
inline void tokenizer_print(FILE* out, const Tokenizer* t, uint32_t id) {
    if (id >= t->vocab_size) {
        fprintf(out, "<id %u>", id);
        return;
    }
    const unsigned char* s = (const unsigned char*)t->tokens[id].data();
    const size_t n = t->tokens[id].size();
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = len == 1 ? (c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t' : len > 1 && i + len <= n;
        uint32_t cp = len > 1 ? c & (0x7F >> len) : c;
        for (size_t k = 1; ok && k < len; k++) {
            ok = (s[i + k] & 0xC0) == 0x80;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        // reject C1 controls, overlongs, surrogates and values past U+10FFFF
        static const uint32_t min_cp[5] = {0, 0, 0xA0, 0x800, 0x10000};
        if (ok && len > 1) ok = cp >= min_cp[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        if (ok) {
            fwrite(s + i, 1, len, out);
            i += len;
        } else {
            fprintf(out, "\\x%02x", c);
            i++;
        }
    }
}

inline void tokenizer_free(Tokenizer* t) { *t = Tokenizer(); }
