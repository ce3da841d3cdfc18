// gpt2tok: command-line front end of the GPT-2 tokenizer (llmc/gpt2_bpe.h). Run without arguments for usage.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "llmc/gpt2_bpe.h"
#include "llmc/utils.h"

static const char* USAGE =
    "usage: gpt2tok [--vocab DIR] [-j N] COMMAND ARGS\n"
    "  encode FILE      print the GPT-2 ids of FILE's bytes, one per line (no <|endoftext|> added)\n"
    "  decode [FILE]    read whitespace-separated ids from FILE (or stdin), write their raw bytes to stdout\n"
    "  count FILE       count FILE's tokens and print the encoding speed in MB/s and tokens/s\n"
    "  write-bin OUT    write the decode-only tokenizer file (e.g. gpt2_tokenizer.bin)\n"
    "options:\n"
    "  --vocab DIR      directory with encoder.json and vocab.bpe (default: $GPT2_VOCAB_DIR, then\n"
    "                   dev/data/gpt2, else downloaded from OpenAI)\n"
    "  -j N             threads for encode/count (default: all cores)\n";

[[noreturn]] static void usage_error(const char* msg, const char* arg) {
    fprintf(stderr, "error: %s%s%s\n%s", msg, arg ? " " : "", arg ? arg : "", USAGE);
    exit(EXIT_FAILURE);
}

static std::string read_file(const char* path) {
    FILE* fp = fopen_check(path, "rb");
    std::string data;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) data.append(buf, n);
    if (ferror(fp)) fatal("read error on '%s': %s", path, strerror(errno));
    fclose(fp);
    return data;
}

struct Encoders {
    Gpt2Bpe bpe;
    std::vector<Gpt2Encoder> enc;
    Encoders(const char* vocab, int threads) : enc(threads) {
        gpt2_bpe_load(&bpe, gpt2_vocab_dir_find(vocab));
        for (Gpt2Encoder& e : enc) gpt2_encoder_init(&e, &bpe);
    }
    ~Encoders() {
        for (Gpt2Encoder& e : enc) gpt2_encoder_free(&e);
        gpt2_bpe_free(&bpe);
    }
};

static int cmd_encode(const char* vocab, int threads, const char* path) {
    std::string text = read_file(path);
    Encoders e(vocab, threads);
    std::vector<uint32_t> ids;
    gpt2_encode_parallel(e.enc, text.data(), text.size(), &ids);
    std::string out;
    out.reserve(ids.size() * 6);
    char buf[16];
    for (uint32_t id : ids) {
        int n = snprintf(buf, sizeof(buf), "%u\n", id);
        out.append(buf, n);
    }
    fwrite_check(out.data(), 1, out.size(), stdout, "stdout");
    return 0;
}

static int cmd_decode(const char* vocab, const char* path) {
    std::string text;
    if (path != nullptr) {
        text = read_file(path);
    } else {
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) text.append(buf, n);
    }
    const char* name = path ? path : "stdin";
    Gpt2Bpe bpe;
    gpt2_bpe_load(&bpe, gpt2_vocab_dir_find(vocab));
    std::vector<uint32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
        if (isspace((unsigned char)text[i])) { i++; continue; }
        size_t start = i;
        uint64_t v = 0;
        while (i < text.size() && isdigit((unsigned char)text[i]) && v < GPT2_VOCAB_SIZE) v = v * 10 + (text[i++] - '0');
        if (i == start || (i < text.size() && !isspace((unsigned char)text[i])) || v >= GPT2_VOCAB_SIZE) {
            size_t end = text.find_first_of(" \t\r\n", start);
            std::string word = text.substr(start, std::min<size_t>(end, start + 32) - start);
            fatal("'%s': '%s' is not a token id in [0, %d)", name, word.c_str(), GPT2_VOCAB_SIZE);
        }
        ids.push_back((uint32_t)v);
    }
    std::string out;
    gpt2_decode(&bpe, ids.data(), ids.size(), &out);
    fwrite_check(out.data(), 1, out.size(), stdout, "stdout");
    gpt2_bpe_free(&bpe);
    return 0;
}

static int cmd_count(const char* vocab, int threads, const char* path) {
    std::string text = read_file(path);
    Encoders e(vocab, threads);
    std::vector<uint32_t> ids;
    ids.reserve(text.size() / 3);
    auto t0 = std::chrono::steady_clock::now();
    gpt2_encode_parallel(e.enc, text.data(), text.size(), &ids);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("%s: %zu tokens, %zu bytes, %d thread%s, %.3f s: %.2f MB/s, %.0f tokens/s\n", path, ids.size(),
           text.size(), threads, threads == 1 ? "" : "s", s, text.size() / 1e6 / s, ids.size() / s);
    return 0;
}

static int cmd_write_bin(const char* vocab, const char* out) {
    Gpt2Bpe bpe;
    gpt2_bpe_load(&bpe, gpt2_vocab_dir_find(vocab));
    gpt2_write_tokenizer_bin(&bpe, out);
    printf("wrote %s (%zu tokens)\n", out, bpe.token_bytes.size());
    gpt2_bpe_free(&bpe);
    return 0;
}

int main(int argc, char** argv) {
    const char* vocab = nullptr;
    int threads = (int)std::max(1u, std::thread::hardware_concurrency());
    std::vector<const char*> args;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--vocab" || a == "-j") {
            if (i + 1 >= argc) usage_error("missing value after", argv[i]);
            if (a == "--vocab") {
                vocab = argv[++i];
            } else {
                char* end;
                long v = strtol(argv[++i], &end, 10);
                if (*end != '\0' || v < 1 || v > 1024) usage_error("-j wants a thread count in 1..1024, got", argv[i]);
                threads = (int)v;
            }
        } else if (a == "-h" || a == "--help") {
            fputs(USAGE, stdout);
            return 0;
        } else if (a.size() > 1 && a[0] == '-') {
            usage_error("unknown option", argv[i]);
        } else {
            args.push_back(argv[i]);
        }
    }
    if (args.empty()) usage_error("no command given", nullptr);
    std::string cmd = args[0];
    size_t nargs = args.size() - 1;
    if (cmd == "encode" && nargs == 1) return cmd_encode(vocab, threads, args[1]);
    if (cmd == "decode" && nargs <= 1) return cmd_decode(vocab, nargs == 1 ? args[1] : nullptr);
    if (cmd == "count" && nargs == 1) return cmd_count(vocab, threads, args[1]);
    if (cmd == "write-bin" && nargs == 1) return cmd_write_bin(vocab, args[1]);
    if (cmd == "encode" || cmd == "decode" || cmd == "count" || cmd == "write-bin") {
        usage_error("wrong number of arguments for", args[0]);
    }
    usage_error("unknown command", args[0]);
}
