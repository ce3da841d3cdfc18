// prepare_dataset: text / JSON lines / framed stream -> GPT-2 token shards, HellaSwag-style JSON lines
// -> eval file.
// The work is in dev/data/prepare_dataset.h; this is the command line. Run without arguments for usage.
#include <thread>

#include "dev/data/prepare_dataset.h"
#ifdef PREPARE_DATASET_PARQUET
#include "dev/data/parquet_text.h"
constexpr DocumentSourceOpener PARQUET_OPENER = parquet_text_open;
constexpr bool HAS_PARQUET = true;
#else
constexpr DocumentSourceOpener PARQUET_OPENER = nullptr;   // built without Arrow / Parquet
constexpr bool HAS_PARQUET = false;
#endif

static const char* USAGE =
    "usage: prepare_dataset shards --out DIR [options] FILE...\n"
    "       prepare_dataset eval [--vocab DIR] IN.jsonl OUT.bin\n"
    "       prepare_dataset --features     (prints whether parquet input is built in)\n"
    "shards: tokenize documents (each preceded by <|endoftext|>) into DIR/NAME_val_000000.bin,\n"
    "        DIR/NAME_train_000001.bin, ... (uint16 token shards, magic 20240520). FILE '-' is standard input.\n"
    "        The set is committed all at once by replacing DIR as a whole (other files in DIR are kept):\n"
    "        DIR must be a directory of its own, holding no subdirectory.\n"
    "  -o, --out DIR       output directory, created if missing\n"
    "  -n, --name NAME     file name prefix (default: data)\n"
    "  --format F          text: each file is one document (or several, see --separator)\n"
    "                      jsonl: one JSON object per line, the document in its \"text\" field\n"
    "                      framed: batches of documents as dev/data/fineweb.py writes them (prepare_dataset.h)\n"
    "                      parquet: the \"text\" column, a row a document (if built with Arrow: see --features)\n"
    "                      auto (default): jsonl for *.jsonl, parquet for *.parquet files, else text\n"
    "  --separator STR     text: documents in a file are separated by STR (escapes \\n \\t \\r \\\\ understood)\n"
    "  --keep-separator    every document but a file's last keeps STR at its end, and none is skipped\n"
    "                      (llm.c's tinyshakespeare.py with --separator '\\n\\n')\n"
    "  --shard-size N      tokens per shard (default: 1e8)\n"
    "  --val-tokens N      the val shard holds the first N tokens (0: no val shard)\n"
    "  --val-fraction F    the val shard holds the first fraction F of all tokens (tokenizes twice)\n"
    "                      default: the first full shard is the val shard\n"
    "  --unnumbered        write NAME_val.bin and one NAME_train.bin (no shard numbers)\n"
    "  --expect-documents N  the number of documents, for the progress line's percentage\n"
    "  -j N                threads (default: all cores); the output does not depend on it\n"
    "  -q                  no progress line\n"
    "eval: HellaSwag-style lines {\"ctx\": ..., \"endings\": [4 strings], \"label\": 0..3} -> eval file\n"
    "      (magic 20240522)\n"
    "both:\n"
    "  --vocab DIR         directory with encoder.json and vocab.bpe (default: $GPT2_VOCAB_DIR, then\n"
    "                      dev/data/gpt2, else downloaded from OpenAI)\n";

[[noreturn]] static void usage_error(const std::string& msg) {
    fprintf(stderr, "error: %s\n%s", msg.c_str(), USAGE);
    exit(EXIT_FAILURE);
}

// A non-negative integer, plain or in scientific notation (1e8).
static uint64_t parse_count(const std::string& flag, const char* s) {
    char* end;
    double v = strtod(s, &end);
    if (*end != '\0' || end == s || !(v >= 0) || v > 9e18 || v != std::floor(v)) {
        usage_error(flag + " wants a non-negative whole number, got '" + s + "'");
    }
    return (uint64_t)v;
}

static std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 == s.size()) { out += s[i]; continue; }
        char c = s[++i];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
    return out;
}

int main(int argc, char** argv) {
    if (argc < 2) usage_error("no command given");
    std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help") { fputs(USAGE, stdout); return 0; }
    if (cmd == "--features") { printf("parquet: %s\n", HAS_PARQUET ? "yes" : "no"); return 0; }
    if (cmd != "shards" && cmd != "eval") usage_error("unknown command '" + cmd + "'");

    PrepareOptions opt;
    opt.parquet = PARQUET_OPENER;
    opt.threads = (int)std::max(1u, std::thread::hardware_concurrency());
    const char* vocab = nullptr;
    std::vector<std::string> positional;
    bool out_given = false;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) usage_error("missing value after " + a);
            return argv[++i];
        };
        if (a == "--vocab") vocab = value();
        else if (cmd == "eval" && a.size() > 1 && a[0] == '-') usage_error("unknown option for eval: " + a);
        else if (a == "-o" || a == "--out") { opt.shards.out_dir = value(); out_given = true; }
        else if (a == "-n" || a == "--name") opt.shards.name = value();
        else if (a == "--separator") opt.separator = unescape(value());
        else if (a == "--shard-size") opt.shards.shard_tokens = parse_count(a, value());
        else if (a == "--val-tokens") opt.shards.val_tokens = (int64_t)std::min<uint64_t>(parse_count(a, value()), INT64_MAX);
        else if (a == "-q") opt.progress = false;
        else if (a == "--keep-separator") opt.keep_separator = true;
        else if (a == "--unnumbered") opt.shards.unnumbered = true;
        else if (a == "--expect-documents") opt.expected_documents = parse_count(a, value());
        else if (a == "--val-fraction") {
            char* end;
            const char* s = value();
            opt.val_fraction = strtod(s, &end);
            if (*end != '\0' || end == s || !(opt.val_fraction >= 0 && opt.val_fraction <= 1)) {
                usage_error(std::string("--val-fraction wants a number in [0, 1], got '") + s + "'");
            }
        } else if (a == "-j") {
            uint64_t j = parse_count(a, value());
            if (j < 1 || j > 1024) usage_error("-j wants a thread count in 1..1024");
            opt.threads = (int)j;
        } else if (a == "--format") {
            std::string f = value();
            if (f == "text") opt.format = InputFormat::Text;
            else if (f == "jsonl") opt.format = InputFormat::Jsonl;
            else if (f == "framed") opt.format = InputFormat::Framed;
            else if (f == "parquet") opt.format = InputFormat::Parquet;
            else if (f == "auto") opt.format = InputFormat::Auto;
            else usage_error("--format wants text, jsonl, framed, parquet or auto, got '" + f + "'");
        } else if (a.size() > 1 && a[0] == '-') {
            usage_error("unknown option " + a);
        } else {
            positional.push_back(a);
        }
    }
    if (opt.val_fraction >= 0 && opt.shards.val_tokens >= 0) usage_error("give --val-tokens or --val-fraction, not both");
    if (!opt.separator.empty() && opt.format != InputFormat::Text && opt.format != InputFormat::Auto) {
        usage_error("--separator applies to text input only");
    }
    if (opt.keep_separator && opt.separator.empty()) usage_error("--keep-separator needs --separator");

    if (cmd == "eval") {
        if (positional.size() != 2) usage_error("eval wants IN.jsonl and OUT.bin");
        check_input_file(positional[0]);
        Gpt2Bpe bpe;
        gpt2_bpe_load(&bpe, gpt2_vocab_dir_find(vocab));
        EvalStats s = prepare_eval_file(&bpe, positional[0], positional[1]);
        printf("wrote %s: %zu examples, longest %zu bytes\n", positional[1].c_str(), s.examples, s.longest_bytes);
        gpt2_bpe_free(&bpe);
        return 0;
    }
    if (positional.empty()) usage_error("shards wants at least one input file");
    if (!out_given) usage_error("shards wants --out DIR (the directory of the set, e.g. dev/data/" + opt.shards.name + ")");
    if (std::count(positional.begin(), positional.end(), std::string(STDIN_INPUT)) > 1) {
        usage_error("standard input ('-') can be given once");
    }
    for (const std::string& f : positional) check_input_file(f);   // before the vocabulary load
    opt.inputs = positional;
    Gpt2Bpe bpe;
    gpt2_bpe_load(&bpe, gpt2_vocab_dir_find(vocab));
    PrepareStats s = prepare_shards(&bpe, opt);
    gpt2_bpe_free(&bpe);
    printf("%llu documents, %.1f MB, %llu tokens -> %zu shard%s:\n", (unsigned long long)s.documents, s.bytes / 1e6,
           (unsigned long long)s.tokens, s.shards.size(), s.shards.size() == 1 ? "" : "s");
    for (const std::string& p : s.shards) printf("  %s\n", p.c_str());
    return 0;
}
