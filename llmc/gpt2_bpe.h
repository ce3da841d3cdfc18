/*
 * GPT-2 byte-level BPE tokenizer (encode and decode), producing exactly the ids of tiktoken's "gpt2".
 *
 *  text bytes -> pieces (GPT-2 pre-tokenisation regex, PCRE2 JIT, Unicode properties)
 *             -> each piece's bytes become byte tokens -> merged pairwise by rank -> ids
 *
 * Ranks: the rank of merging two adjacent parts is the id of their concatenated bytes when that is a
 * token (GPT-2 ids are merge ranks), lowest rank first, leftmost on ties; a piece that is a token as a
 * whole is that token (both as tiktoken does).
 * Invalid UTF-8: the text is cut into maximal valid UTF-8 runs, each run is pre-tokenised on its own and
 * every invalid byte is a piece of its own, so any byte string round-trips: decode(encode(x)) == x.
 * <|endoftext|> (GPT2_EOT) is never produced from text; callers add it as a document separator.
 *
 * Ownership and threads: Gpt2Bpe is read-only after gpt2_bpe_load and is shared by all threads;
 * each thread encodes through its own Gpt2Encoder (PCRE2 match data and a piece -> ids cache).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "llmc/gpt2_vocab.h"

struct pcre2_real_code_8;        // PCRE2 types, kept out of this header (pcre2.h needs a width macro)
struct pcre2_real_match_data_8;

struct Gpt2Bpe {
    std::vector<std::string> token_bytes;                    // id -> raw bytes (GPT2_VOCAB_SIZE entries)
    std::unordered_map<std::string, uint32_t> bytes_to_id;   // raw bytes -> id, without <|endoftext|>
    std::unordered_map<uint64_t, uint32_t> merges;           // (left id << 32 | right id) -> merged id
    uint32_t byte_token[256] = {};                           // byte value -> its single-byte token
    pcre2_real_code_8* pattern = nullptr;                    // compiled GPT-2 regex
    bool jit = false;                                        // pattern is JIT-compiled (the fast path)
};

struct Gpt2Encoder {
    const Gpt2Bpe* bpe = nullptr;
    pcre2_real_match_data_8* match = nullptr;
    // piece bytes -> (offset, count) into cache_ids; cleared when it grows past a bound
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> cache;
    std::vector<uint32_t> cache_ids;
    std::string key;                                          // reused lookup key (no allocation per piece)
};

// Vocabulary directory holding encoder.json and vocab.bpe. Order: flag_dir (if not null/empty), the
// env var GPT2_VOCAB_DIR, then dev/data/gpt2 (kept in the repository) relative to the working
// directory and to the executable's directory; else both files are downloaded with curl from OpenAI's public
// blob store into dev/data/gpt2 next to the executable. fatal() if all of that fails.
std::string gpt2_vocab_dir_find(const char* flag_dir);

// Downloads encoder.json and vocab.bpe from base_url into dir (created if missing) by running curl with
// an argument vector (posix_spawnp; no shell, so no character of dir or the URL is ever interpreted).
// curl writes each file to its standard output, a new temporary file <file>.tmp.<hex> (created
// exclusively, never through a link), renamed when complete. false if curl is missing or fails.
constexpr const char* GPT2_VOCAB_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/";
bool gpt2_vocab_download(const std::string& dir, const char* base_url);

// Loads encoder.json + vocab.bpe from dir, checks they agree (ids are merge ranks), builds the merge
// table and compiles the regex. fatal() naming the file on any problem.
void gpt2_bpe_load(Gpt2Bpe* bpe, const std::string& dir);
void gpt2_bpe_free(Gpt2Bpe* bpe);

void gpt2_encoder_init(Gpt2Encoder* enc, const Gpt2Bpe* bpe);
void gpt2_encoder_free(Gpt2Encoder* enc);

// Appends the ids of text[0, len) to *out (no <|endoftext|> added).
void gpt2_encode(Gpt2Encoder* enc, const char* text, size_t len, std::vector<uint32_t>* out);

// Length of the longest prefix of text[0, n) that is valid UTF-8 (no overlongs, surrogates or values
// past U+10FFFF: the rules PCRE2 checks). Only such runs are given to PCRE2.
size_t gpt2_utf8_valid_prefix(const char* text, size_t n);

// Appends the raw bytes of ids to *out. fatal() on an id >= vocab size.
void gpt2_decode(const Gpt2Bpe* bpe, const uint32_t* ids, size_t n, std::string* out);

// Smallest cut position p >= pos (p <= len) such that encoding text[0,p) and text[p,len) separately
// and concatenating gives the same ids as encoding the whole text; returns len if there is none.
// Cuts only where a non-space printable ASCII byte, then '\n', then an ASCII letter meet
// (the letter starts a new piece and nothing before the '\n' can look past it).
size_t gpt2_safe_cut(const char* text, size_t len, size_t pos);

// Encodes text with up to `threads` threads by cutting it at safe positions (gpt2_safe_cut) into
// chunks; the result is identical to gpt2_encode of the whole text. encoders: one per thread.
void gpt2_encode_parallel(std::vector<Gpt2Encoder>& encoders, const char* text, size_t len,
                          std::vector<uint32_t>* out);

// Writes gpt2_tokenizer.bin (magic 20240328, version 2; uint8 length + bytes per id) via temp+rename.
void gpt2_write_tokenizer_bin(const Gpt2Bpe* bpe, const std::string& path);
