// GPT-2 byte-level BPE: vocabulary loading, encoding, decoding. See llmc/gpt2_bpe.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "llmc/gpt2_bpe.h"
#include "llmc/file_header.h"  // TOKENIZER_MAGIC, TOKENIZER_VERSION

#include <atomic>
#include <queue>
#include <thread>

#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "llmc/utils.h"

// The GPT-2 pre-tokenisation pattern (contractions, letters, digits, other symbols, each with an optional
// leading space; whitespace runs leave their last space to the next word):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s spelled out as Unicode White_Space, the set tiktoken's regex engine uses: PCRE2's own \s under
// UCP also matches U+180E (Mongolian vowel separator, no longer a space since Unicode 6.3).
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char* GPT2_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";
#undef WS

// Bounds of the per-thread piece cache (memory stays around 50 MB per thread on large corpora).
static constexpr size_t CACHE_MAX_ENTRIES = 1u << 19;
static constexpr size_t CACHE_MAX_PIECE = 64;

// ----------------------------------------------------------------------------
// vocabulary directory

static bool file_exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

static bool vocab_dir_ok(const std::string& dir) {
    return !dir.empty() && file_exists(dir + "/encoder.json") && file_exists(dir + "/vocab.bpe");
}

static std::string exe_dir() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return ".";
    buf[n] = '\0';
    std::string p(buf);
    size_t slash = p.rfind('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}

// Runs argv[0] (looked up in PATH) with exactly these arguments, no shell in between: a path with
// quotes, $(...) or spaces is one argument like any other; its standard output goes to out_fd. Returns
// true when it ran and exited 0.
static bool run_argv(const std::vector<std::string>& args, int out_fd) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) return false;
    pid_t pid;
    const bool spawned = posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO) == 0 &&
                         posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    if (!spawned) return false;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return false;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// curl writes to its standard output, a new temporary file beside dst that we create (temp_file_create:
// a random name, created exclusively, so never a link planted under a fixed name), renamed over dst
// once complete. curl itself opens no file. Three tries, each from an empty file.
static bool download_to(const std::string& url, const std::string& dst) {
    std::string tmp;
    FilePtr out(temp_file_create(dst, &tmp));
    if (out == nullptr) return false;
    const int fd = fileno(out.get());
    bool ok = false;
    for (int attempt = 0; attempt < 3 && !ok; attempt++) {
        if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) break;
        ok = run_argv({"curl", "-fsSL", url}, fd);
    }
    ok = ok && fsync(fd) == 0;
    out.reset();
    if (ok && rename(tmp.c_str(), dst.c_str()) == 0) return true;
    unlink(tmp.c_str());
    return false;
}

bool gpt2_vocab_download(const std::string& dir, const char* base_url) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return false;
    for (const char* name : {"encoder.json", "vocab.bpe"}) {
        const std::string dst = dir + "/" + name;
        const std::string url = std::string(base_url) + name;
        fprintf(stderr, "downloading %s -> %s\n", url.c_str(), dst.c_str());
        if (!download_to(url, dst)) return false;
    }
    return true;
}

std::string gpt2_vocab_dir_find(const char* flag_dir) {
    if (flag_dir != nullptr && flag_dir[0] != '\0') {
        if (!vocab_dir_ok(flag_dir)) {
            fatal("--vocab '%s' does not hold encoder.json and vocab.bpe", flag_dir);
        }
        return flag_dir;
    }
    const char* env = getenv("GPT2_VOCAB_DIR");
    if (env != nullptr && env[0] != '\0') {
        if (!vocab_dir_ok(env)) fatal("GPT2_VOCAB_DIR='%s' does not hold encoder.json and vocab.bpe", env);
        return env;
    }
    const std::string exe = exe_dir();
    const std::string candidates[] = {"dev/data/gpt2", exe + "/dev/data/gpt2"};
    for (const std::string& c : candidates) {
        if (vocab_dir_ok(c)) return c;
    }
    const std::string dl = exe + "/dev/data/gpt2";
    if (gpt2_vocab_download(dl, GPT2_VOCAB_URL) && vocab_dir_ok(dl)) return dl;
    fatal("GPT-2 vocabulary (encoder.json, vocab.bpe) not found in dev/data/gpt2 (of the working directory or the executable's) and "
          "the download from openaipublic.blob.core.windows.net failed; set GPT2_VOCAB_DIR (or pass --vocab) "
          "to a directory holding both files");
}

// ----------------------------------------------------------------------------
// loading

// GPT-2 stores each byte as a printable code point: printable Latin-1 bytes stand for themselves, the
// other 68 bytes map to U+0100.. in byte order. Returns code point -> byte (-1 where unused).
static std::vector<int> unicode_to_byte_table() {
    std::vector<int> table(512, -1);
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool keeps = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        table[keeps ? b : next++] = b;
    }
    return table;
}

// Decodes one UTF-8 code point of a vocabulary string; returns false on malformed input.
static bool next_code_point(const std::string& s, size_t* i, uint32_t* cp) {
    unsigned char c = s[*i];
    int extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (extra < 0 || *i + extra >= s.size()) return false;
    *cp = extra == 0 ? c : (c & (0x3F >> extra));
    for (int k = 1; k <= extra; k++) {
        unsigned char d = s[*i + k];
        if ((d & 0xC0) != 0x80) return false;
        *cp = (*cp << 6) | (d & 0x3F);
    }
    *i += 1 + extra;
    return true;
}

// Vocabulary string (byte-to-unicode form) -> raw bytes. Returns false if it is not in that form.
static bool vocab_string_to_bytes(const std::string& s, const std::vector<int>& table, std::string* out) {
    out->clear();
    for (size_t i = 0; i < s.size();) {
        uint32_t cp;
        if (!next_code_point(s, &i, &cp) || cp >= table.size() || table[cp] < 0) return false;
        out->push_back((char)table[cp]);
    }
    return true;
}

static std::string read_whole_file(const std::string& path) {
    FILE* fp = fopen_check(path.c_str(), "rb");
    long size = file_size_of(fp, path.c_str());
    std::string data((size_t)size, '\0');
    if (size > 0) fread_check(&data[0], 1, (size_t)size, fp, path.c_str());
    fclose_check(fp, path.c_str());
    return data;
}

void gpt2_bpe_load(Gpt2Bpe* bpe, const std::string& dir) {
    const std::string enc_path = dir + "/encoder.json";
    const std::string bpe_path = dir + "/vocab.bpe";
    const std::vector<int> table = unicode_to_byte_table();

    nlohmann::json enc = nlohmann::json::parse(read_whole_file(enc_path), nullptr, false);
    if (enc.is_discarded() || !enc.is_object()) fatal("'%s' is not a JSON object", enc_path.c_str());
    if (enc.size() != GPT2_VOCAB_SIZE) {
        fatal("'%s' has %zu tokens, expected %d", enc_path.c_str(), enc.size(), GPT2_VOCAB_SIZE);
    }
    bpe->token_bytes.assign(GPT2_VOCAB_SIZE, std::string());
    std::vector<bool> seen(GPT2_VOCAB_SIZE, false);
    std::string bytes;
    for (auto it = enc.begin(); it != enc.end(); ++it) {
        if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= GPT2_VOCAB_SIZE) {
            fatal("'%s': token '%s' has no id in [0, %d)", enc_path.c_str(), it.key().c_str(), GPT2_VOCAB_SIZE);
        }
        uint32_t id = it.value().get<uint32_t>();
        if (seen[id]) fatal("'%s': id %u appears twice", enc_path.c_str(), id);
        seen[id] = true;
        if (!vocab_string_to_bytes(it.key(), table, &bytes) || bytes.empty() || bytes.size() > 255) {
            fatal("'%s': token %u is not a GPT-2 byte-level token", enc_path.c_str(), id);
        }
        bpe->token_bytes[id] = bytes;
    }
    if (bpe->token_bytes[GPT2_EOT] != "<|endoftext|>") {
        fatal("'%s': id %d is not <|endoftext|>", enc_path.c_str(), GPT2_EOT);
    }
    bpe->bytes_to_id.clear();
    bpe->bytes_to_id.reserve(GPT2_VOCAB_SIZE);
    for (uint32_t id = 0; id < GPT2_EOT; id++) bpe->bytes_to_id.emplace(bpe->token_bytes[id], id);
    for (int b = 0; b < 256; b++) {
        auto it = bpe->bytes_to_id.find(std::string(1, (char)b));
        if (it == bpe->bytes_to_id.end()) fatal("'%s' lacks the token for byte %d", enc_path.c_str(), b);
        bpe->byte_token[b] = it->second;
    }

    // vocab.bpe: "#version" line, then merge i as "left right"; its result must be token 256 + i.
    // This is the check that lets ids serve as merge ranks.
    std::string merges_text = read_whole_file(bpe_path);
    size_t pos = merges_text.find('\n');
    if (merges_text.compare(0, 8, "#version") != 0 || pos == std::string::npos) {
        fatal("'%s' does not start with a #version line", bpe_path.c_str());
    }
    uint32_t merge_index = 0;
    std::string left, right;
    while (++pos < merges_text.size()) {
        size_t end = merges_text.find('\n', pos);
        if (end == std::string::npos) end = merges_text.size();
        std::string line = merges_text.substr(pos, end - pos);
        pos = end;
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || !vocab_string_to_bytes(line.substr(0, sp), table, &left) ||
            !vocab_string_to_bytes(line.substr(sp + 1), table, &right)) {
            fatal("'%s': merge %u is not two byte-level tokens", bpe_path.c_str(), merge_index);
        }
        auto it = bpe->bytes_to_id.find(left + right);
        if (it == bpe->bytes_to_id.end() || it->second != 256 + merge_index) {
            fatal("'%s' and '%s' disagree at merge %u", bpe_path.c_str(), enc_path.c_str(), merge_index);
        }
        merge_index++;
    }
    if (merge_index != GPT2_EOT - 256) {
        fatal("'%s' has %u merges, expected %d", bpe_path.c_str(), merge_index, GPT2_EOT - 256);
    }

    // Pair table: every split of a token into two tokens, keyed by their ids (tiktoken ranks the
    // concatenation, so any such split counts, not only the one listed in vocab.bpe).
    bpe->merges.clear();
    bpe->merges.reserve(1u << 19);
    for (uint32_t id = 0; id < GPT2_EOT; id++) {
        const std::string& s = bpe->token_bytes[id];
        for (size_t k = 1; k < s.size(); k++) {
            auto l = bpe->bytes_to_id.find(s.substr(0, k));
            if (l == bpe->bytes_to_id.end()) continue;
            auto r = bpe->bytes_to_id.find(s.substr(k));
            if (r == bpe->bytes_to_id.end()) continue;
            bpe->merges.emplace(((uint64_t)l->second << 32) | r->second, id);
        }
    }

    int err;
    PCRE2_SIZE err_off;
    bpe->pattern = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                                 &err_off, nullptr);
    if (bpe->pattern == nullptr) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        fatal("PCRE2 cannot compile the GPT-2 pattern at offset %zu: %s", (size_t)err_off, (char*)msg);
    }
    int jit = pcre2_jit_compile(bpe->pattern, PCRE2_JIT_COMPLETE);
    bpe->jit = jit == 0;
    if (jit != 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(jit, msg, sizeof(msg));
        fprintf(stderr, "warning: PCRE2 JIT unavailable (%s); tokenizing with the slower interpreter\n",
                (char*)msg);
    }
}

void gpt2_bpe_free(Gpt2Bpe* bpe) {
    if (bpe->pattern != nullptr) pcre2_code_free(bpe->pattern);
    bpe->pattern = nullptr;
    bpe->token_bytes.clear();
    bpe->bytes_to_id.clear();
    bpe->merges.clear();
}

void gpt2_encoder_init(Gpt2Encoder* enc, const Gpt2Bpe* bpe) {
    enc->bpe = bpe;
    enc->match = pcre2_match_data_create_from_pattern(bpe->pattern, nullptr);
    if (enc->match == nullptr) fatal("out of memory creating PCRE2 match data");
    enc->cache.clear();
    enc->cache_ids.clear();
}

void gpt2_encoder_free(Gpt2Encoder* enc) {
    if (enc->match != nullptr) pcre2_match_data_free(enc->match);
    enc->match = nullptr;
    enc->cache.clear();
    enc->cache_ids.clear();
}

// ----------------------------------------------------------------------------
// encoding

size_t gpt2_utf8_valid_prefix(const char* text, size_t n) {
    const uint8_t* s = (const uint8_t*)text;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {   // skip ASCII eight bytes at a time
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ull) == 0) { i += 8; continue; }
        }
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t extra;
        uint8_t lo = 0x80, hi = 0xBF;   // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) extra = 1;
        else if (c >= 0xE0 && c <= 0xEF) { extra = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { extra = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return i;
        if (i + extra >= n) return i;   // truncated sequence
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
        }
        i += 1 + extra;
    }
    return n;
}

// BPE of one piece with at least two bytes: repeatedly merges the adjacent pair whose merged token has
// the lowest id (leftmost on ties). A heap of candidate pairs keeps long pieces O(n log n); a candidate
// is stale once either side changed (a part's start and id fix its extent, so the check is exact).
static void bpe_merge_piece(const Gpt2Bpe* bpe, const uint8_t* s, size_t n, std::vector<uint32_t>* out) {
    struct Cand {
        uint32_t rank, pos, left, right;
        bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::vector<uint32_t> id(n), next(n), prev(n);
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push_pair = [&](uint32_t p, uint32_t q) {
        auto it = bpe->merges.find(((uint64_t)id[p] << 32) | id[q]);
        if (it != bpe->merges.end()) heap.push({it->second, p, id[p], id[q]});
    };
    for (size_t i = 0; i < n; i++) {
        id[i] = bpe->byte_token[s[i]];
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)(i - 1);   // wraps for i == 0: "no previous part"
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair((uint32_t)i, (uint32_t)(i + 1));
    const uint32_t none = (uint32_t)n;
    while (!heap.empty()) {
        Cand c = heap.top();
        heap.pop();
        uint32_t q = next[c.pos];
        if (id[c.pos] != c.left || q == none || id[q] != c.right) continue;   // stale
        id[c.pos] = c.rank;     // ids are ranks
        id[q] = UINT32_MAX;     // q is gone
        next[c.pos] = next[q];
        if (next[q] != none) prev[next[q]] = c.pos;
        if (c.pos != 0) push_pair(prev[c.pos], c.pos);
        if (next[c.pos] != none) push_pair(c.pos, next[c.pos]);
    }
    for (uint32_t p = 0; p != none; p = next[p]) out->push_back(id[p]);
}

static void encode_piece(Gpt2Encoder* enc, const uint8_t* s, size_t n, std::vector<uint32_t>* out) {
    const Gpt2Bpe* bpe = enc->bpe;
    if (n == 1) {
        out->push_back(bpe->byte_token[s[0]]);
        return;
    }
    enc->key.assign((const char*)s, n);
    auto hit = enc->cache.find(enc->key);
    if (hit != enc->cache.end()) {
        out->insert(out->end(), enc->cache_ids.begin() + hit->second.first,
                    enc->cache_ids.begin() + hit->second.first + hit->second.second);
        return;
    }
    size_t first = out->size();
    auto whole = bpe->bytes_to_id.find(enc->key);
    if (whole != bpe->bytes_to_id.end()) {
        out->push_back(whole->second);
    } else {
        bpe_merge_piece(bpe, s, n, out);
    }
    if (n <= CACHE_MAX_PIECE) {
        if (enc->cache.size() >= CACHE_MAX_ENTRIES) {
            enc->cache.clear();
            enc->cache_ids.clear();
        }
        uint32_t off = (uint32_t)enc->cache_ids.size();
        enc->cache_ids.insert(enc->cache_ids.end(), out->begin() + first, out->end());
        enc->cache.emplace(enc->key, std::make_pair(off, (uint32_t)(out->size() - first)));
    }
}

// Pre-tokenises one valid UTF-8 run and encodes its pieces.
static void encode_valid_run(Gpt2Encoder* enc, const uint8_t* s, size_t n, std::vector<uint32_t>* out) {
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(enc->match);
    size_t off = 0;
    while (off < n) {
        int rc = enc->bpe->jit ? pcre2_jit_match(enc->bpe->pattern, s, n, off, 0, enc->match, nullptr)
                               : pcre2_match(enc->bpe->pattern, s, n, off, PCRE2_NO_UTF_CHECK, enc->match, nullptr);
        // Every character matches some alternative, so a match always starts at off and is non-empty.
        if (rc < 0 || ov[0] != off || ov[1] <= off) {
            fatal("GPT-2 pattern matched no piece at byte %zu of a %zu-byte run (PCRE2 code %d)", off, n, rc);
        }
        encode_piece(enc, s + off, ov[1] - off, out);
        off = ov[1];
    }
}

void gpt2_encode(Gpt2Encoder* enc, const char* text, size_t len, std::vector<uint32_t>* out) {
    const uint8_t* s = (const uint8_t*)text;
    size_t i = 0;
    while (i < len) {
        size_t run = gpt2_utf8_valid_prefix(text + i, len - i);
        if (run > 0) {
            encode_valid_run(enc, s + i, run, out);
            i += run;
        } else {
            out->push_back(enc->bpe->byte_token[s[i]]);   // an invalid byte is its own piece
            i++;
        }
    }
}

void gpt2_decode(const Gpt2Bpe* bpe, const uint32_t* ids, size_t n, std::string* out) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= bpe->token_bytes.size()) {
            fatal("token id %u is out of range (vocabulary has %zu tokens)", ids[i], bpe->token_bytes.size());
        }
        out->append(bpe->token_bytes[ids[i]]);
    }
}

size_t gpt2_safe_cut(const char* text, size_t len, size_t pos) {
    if (pos == 0) return 0;
    size_t p = pos < 2 ? 2 : pos;
    while (p < len) {
        const void* nl = memchr(text + p - 1, '\n', len - (p - 1));
        if (nl == nullptr) return len;
        p = (size_t)((const char*)nl - text) + 1;   // the byte after the newline
        if (p >= len) return len;
        unsigned char before = (unsigned char)text[p - 2], after = (unsigned char)text[p];
        bool printable = p >= 2 && before > ' ' && before < 0x7F;
        bool letter = (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z');
        if (printable && letter) return p;
        p++;
    }
    return len;
}

void gpt2_encode_parallel(std::vector<Gpt2Encoder>& encoders, const char* text, size_t len,
                          std::vector<uint32_t>* out) {
    const size_t threads = encoders.size();
    if (threads <= 1 || len < (1u << 20)) {
        gpt2_encode(&encoders[0], text, len, out);
        return;
    }
    // Several chunks per thread so that uneven chunks still balance.
    const size_t target = len / (threads * 8) + 1;
    std::vector<size_t> cuts{0};
    while (cuts.back() < len) cuts.push_back(gpt2_safe_cut(text, len, cuts.back() + target));
    const size_t chunks = cuts.size() - 1;
    std::vector<std::vector<uint32_t>> parts(chunks);
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            for (size_t c; (c = next.fetch_add(1)) < chunks;) {
                // Encode into a local vector: the headers in parts[] share cache lines across threads.
                std::vector<uint32_t> ids;
                ids.reserve((cuts[c + 1] - cuts[c]) / 3);
                gpt2_encode(&encoders[t], text + cuts[c], cuts[c + 1] - cuts[c], &ids);
                parts[c] = std::move(ids);
            }
        });
    }
    for (std::thread& th : pool) th.join();
    for (const auto& part : parts) out->insert(out->end(), part.begin(), part.end());
}

void gpt2_write_tokenizer_bin(const Gpt2Bpe* bpe, const std::string& path) {
    uint32_t header[FILE_HEADER_INTS] = {};
    header[0] = TOKENIZER_MAGIC;
    header[1] = TOKENIZER_VERSION;
    header[2] = (uint32_t)bpe->token_bytes.size();
    header[3] = GPT2_EOT;
    AtomicFile f = atomic_file_open(path);
    fwrite_check(header, sizeof(uint32_t), FILE_HEADER_INTS, f.fp, f.tmp_path.c_str());
    for (const std::string& t : bpe->token_bytes) {
        uint8_t n = (uint8_t)t.size();   // 1..255, checked at load
        fwrite_check(&n, 1, 1, f.fp, f.tmp_path.c_str());
        fwrite_check(t.data(), 1, t.size(), f.fp, f.tmp_path.c_str());
    }
    atomic_file_commit(f);
}
