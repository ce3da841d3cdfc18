// Tests of the GPT-2 tokenizer (llmc/gpt2_bpe.h) and the decode-only reader (llmc/tokenizer.h).
// The vocabulary comes from $GPT2_VOCAB_DIR, else the repository's dev/data/gpt2; a missing
// vocabulary fails the tests (it does not skip them).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <sys/stat.h>

#include <filesystem>
#include <random>
#include <unistd.h>

#include "llmc/gpt2_bpe.h"
#include "llmc/tokenizer.h"
#include "test_util.h"
#include "test_vocab.h"

namespace {

const Gpt2Bpe* bpe() { return test_bpe(); }

std::string decode(const std::vector<uint32_t>& ids) {
    std::string s;
    gpt2_decode(bpe(), ids.data(), ids.size(), &s);
    return s;
}

struct Case {
    const char* name;
    const char* text;
    std::vector<uint32_t> ids;
};

// Expected ids from tiktoken 0.14 (Encoding "gpt2" built offline from the same encoder.json/vocab.bpe,
// encode_ordinary). Texts are UTF-8 written as octal escapes: the pattern's edge cases, i.e. contractions
// (case-sensitive), runs of spaces before words and at line ends, digits (incl. Arabic-Indic and
// superscripts), punctuation and a literal "<|endoftext|>" (plain text, never the special id),
// non-Latin scripts, emoji with modifiers / ZWJ / flags, NBSP, CRLF, and U+0085 / U+180E / U+3000 /
// U+2028 / U+200B where regex engines disagree on what \s is, and repeated characters (merge ties go
// to the leftmost pair).
const std::vector<Case> TIKTOKEN_CASES = {
    {"contractions", "I'm sure you'll see they've said it's 'd 'S DON'T we'RE",
     {40, 1101, 1654, 345, 1183, 766, 484, 1053, 531, 340, 338, 705, 67, 705, 50, 23917, 6, 51, 356, 6, 2200}},
    {"spaces", "a  b   c    \n    d  \n\n  e   ",
     {64, 220, 275, 220, 220, 269, 220, 220, 220, 220, 198, 220, 220, 220, 288, 220, 220, 628, 220, 304, 220, 220, 220}},
    {"line_ends", "line one  \nline two\t\n\n\nend \n",
     {1370, 530, 220, 220, 198, 1370, 734, 197, 628, 198, 437, 220, 198}},
    {"digits", "1234567 3.14 1,000,000 x2 99bottles \331\243\331\244\331\245 \302\262",
     {10163, 2231, 3134, 513, 13, 1415, 352, 11, 830, 11, 830, 2124, 17, 7388, 10985, 829, 18923, 96, 149, 97, 149, 98, 1587, 110}},
    {"punctuation", "Hello, world!!! (yes) -- \"quoted\"... <|endoftext|> a+b=c; \302\277qu\303\251?",
     {15496, 11, 995, 10185, 357, 8505, 8, 1377, 366, 421, 5191, 26214, 1279, 91, 437, 1659, 5239, 91, 29, 257, 10, 65, 28, 66, 26, 1587, 123, 421, 2634, 30}},
    {"non_latin", "\320\237\321\200\320\270\320\262\320\265\321\202 \320\274\320\270\321\200, \344\275\240\345\245\275\344\270\226\347\225\214\357\274\214\343\201\223\343\202\223\343\201\253\343\201\241\343\201\257\343\200\202\331\205\330\261\330\255\330\250\330\247 \340\244\250\340\244\256\340\244\270\340\245\215\340\244\244\340\245\207",
     {140, 253, 21169, 18849, 38857, 16843, 20375, 12466, 120, 18849, 21169, 11, 220, 19526, 254, 25001, 121, 10310, 244, 45911, 234, 171, 120, 234, 46036, 22174, 28618, 2515, 94, 31676, 16764, 25405, 26897, 148, 255, 39848, 12919, 28225, 101, 11976, 106, 11976, 116, 24231, 235, 11976, 97, 24231, 229}},
    {"emoji", "ok \360\237\221\215\360\237\217\275 family \360\237\221\250\342\200\215\360\237\221\251\342\200\215\360\237\221\247\342\200\215\360\237\221\246 flag \360\237\207\253\360\237\207\267 \342\235\244\357\270\217!",
     {482, 50169, 235, 8582, 237, 121, 1641, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100, 447, 235, 41840, 99, 6056, 12520, 229, 104, 8582, 229, 115, 43074, 97, 37929, 0}},
    {"nbsp", "price:\302\240100\302\240\342\202\254 and\302\240\302\240two \302\240x",
     {20888, 25, 1849, 3064, 1849, 26391, 290, 1849, 1849, 11545, 220, 1849, 87}},
    {"crlf", "first line\r\nsecond line\r\n\r\n  indented\r\n",
     {11085, 1627, 201, 198, 12227, 1627, 201, 198, 201, 198, 220, 773, 4714, 201, 198}},
    {"unicode_space", "a\302\205b \341\240\216c\343\200\200d\342\200\250e\342\200\213f x \302\205y",
     {64, 126, 227, 65, 28053, 254, 236, 66, 5099, 222, 67, 447, 101, 68, 9525, 69, 2124, 220, 126, 227, 88}},
    {"repeats", "aaaaa 7777777 xxxxxxxxx ======= !!!!!!!!!!! ---------",
     {24794, 64, 35534, 3324, 3324, 2124, 24223, 29335, 855, 220, 34635, 10185, 45337}},
};

}  // namespace

TEST(Gpt2Bpe, MatchesTiktokenOnPatternEdgeCases) {
    REQUIRE_VOCAB();
    for (const Case& c : TIKTOKEN_CASES) {
        EXPECT_EQ(test_encode(c.text), c.ids) << c.name;
        EXPECT_EQ(decode(c.ids), c.text) << c.name;
    }
}

TEST(Gpt2Bpe, TinyShakespeare) {
    REQUIRE_VOCAB();
    std::string text = read_file(test_vocab_dir() + "/../tinyshakespeare.txt");
    ASSERT_EQ(text.size(), 1115394u) << "tinyshakespeare.txt not found next to the vocabulary directory";
    std::vector<uint32_t> ids = test_encode(text);
    EXPECT_EQ(ids.size(), 338025u);
    std::vector<uint32_t> first10(ids.begin(), ids.begin() + 10);
    EXPECT_EQ(first10, (std::vector<uint32_t>{5962, 22307, 25, 198, 8421, 356, 5120, 597, 2252, 11}));
    EXPECT_EQ(decode(ids), text);

    // Encoding in parallel chunks cut at safe points gives the same ids.
    std::vector<Gpt2Encoder> encs(3);
    for (Gpt2Encoder& e : encs) gpt2_encoder_init(&e, bpe());
    std::string twice = text + text;   // > 1 MiB, so it really is cut
    std::vector<uint32_t> par, seq = test_encode(twice);
    gpt2_encode_parallel(encs, twice.data(), twice.size(), &par);
    EXPECT_EQ(par, seq);
    for (Gpt2Encoder& e : encs) gpt2_encoder_free(&e);
}

TEST(Gpt2Bpe, LongPieces) {
    REQUIRE_VOCAB();
    // Counts from tiktoken: one piece of 10,000 letters / spaces / digits exercises the merge heap.
    std::vector<uint32_t> a = test_encode(std::string(10000, 'a'));
    EXPECT_EQ(a, std::vector<uint32_t>(2500, 24794));   // "aaaa"
    EXPECT_EQ(test_encode(std::string(10000, ' ')), std::vector<uint32_t>(10000, 220));
    EXPECT_EQ(test_encode(std::string(10000, '7')), std::vector<uint32_t>(5000, 3324));   // "77"
    std::vector<uint32_t> ab = test_encode(std::string(9999, ' ') + "x");
    ASSERT_EQ(ab.size(), 9999u);
    EXPECT_EQ(ab.back(), 2124u);   // " x"
    std::string big(1 << 20, ' ');   // 1 MiB of one piece: fast and exact
    EXPECT_EQ(decode(test_encode(big)), big);
}

TEST(Gpt2Bpe, EmptyInput) {
    REQUIRE_VOCAB();
    EXPECT_TRUE(test_encode("").empty());
    EXPECT_EQ(decode({}), "");
}

TEST(Gpt2Bpe, InvalidUtf8RoundTrips) {
    REQUIRE_VOCAB();
    const std::vector<std::string> bad = {
        "\xff", "\xc0\x80", "abc\xe2\x82", "\xe2\x82 abc", "\x80\x80\x80", "\xed\xa0\x80 surrogate",
        "\xf4\x90\x80\x80 too big", "\xf5\xf6\xf7\xf8", "caf\xe9 latin-1", "ok \xf0\x9f\x98 cut emoji \xf0\x9f\x98\x80",
        "  \xff  x", "\n\xfe\n", "it\xff's", std::string("nul\0byte", 8),
    };
    for (const std::string& s : bad) {
        std::vector<uint32_t> ids = test_encode(s);
        EXPECT_EQ(decode(ids), s) << "input of " << s.size() << " bytes";
    }
    // An invalid byte is a piece of its own; the valid runs around it encode as they do alone.
    std::vector<uint32_t> expect = test_encode("hello");
    expect.push_back(bpe()->byte_token[0xff]);
    std::vector<uint32_t> world = test_encode(" world");
    expect.insert(expect.end(), world.begin(), world.end());
    EXPECT_EQ(test_encode("hello\xff world"), expect);

    // Every byte of a malformed sequence is its own piece: surrogates, overlongs, > U+10FFFF, truncation
    // (the leading space would merge with the first byte if that byte were taken for valid text).
    for (const std::string& s : {std::string(" \xed\xa0\x80"), std::string(" \xc0\x80"), std::string(" \xe0\x80\x80"),
                                 std::string(" \xf4\x90\x80\x80"), std::string(" \xf0\x9f\x98")}) {
        std::vector<uint32_t> bytes = {220};
        for (size_t i = 1; i < s.size(); i++) bytes.push_back(bpe()->byte_token[(unsigned char)s[i]]);
        EXPECT_EQ(test_encode(s), bytes) << "input of " << s.size() << " bytes";
    }

    // Random bytes (seeded) and random mixes of valid text with random bytes.
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 300; trial++) {
        std::string s;
        int n = rng() % 200;
        for (int i = 0; i < n; i++) {
            if (rng() % 4 == 0) s += " the \xc3\xa9t\xc3\xa9 ";
            else s += (char)(rng() % 256);
        }
        ASSERT_EQ(decode(test_encode(s)), s) << "trial " << trial;
    }
}

// Our UTF-8 check must agree with PCRE2's own (we skip PCRE2's check on the runs we hand it).
TEST(Gpt2Bpe, Utf8RunsAgreeWithPcre2) {
    int err;
    PCRE2_SIZE off;
    pcre2_code* re = pcre2_compile((PCRE2_SPTR) "x", PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off, nullptr);
    ASSERT_NE(re, nullptr);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
    auto pcre2_valid_prefix = [&](const std::string& s) -> size_t {
        int rc = pcre2_match(re, (PCRE2_SPTR)s.data(), s.size(), 0, 0, md, nullptr);
        if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) return pcre2_get_startchar(md);
        return s.size();
    };
    const std::vector<std::string> fixed = {"\xed\xa0\x80", "\xed\x9f\xbf", "\xc0\x80", "\xc1\xbf", "\xc2\x80",
                                            "\xe0\x9f\xbf", "\xe0\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80",
                                            "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "ab\xe2\x82",
                                            "\x80", "ok\xc3"};
    for (const std::string& s : fixed) {
        EXPECT_EQ(gpt2_utf8_valid_prefix(s.data(), s.size()), pcre2_valid_prefix(s)) << testing::PrintToString(s);
    }
    std::mt19937 rng(42);
    const uint8_t interesting[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf,
                                   0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
    for (int trial = 0; trial < 20000; trial++) {
        std::string s;
        int n = 1 + rng() % 12;
        for (int i = 0; i < n; i++) s += (char)interesting[rng() % sizeof(interesting)];
        ASSERT_EQ(gpt2_utf8_valid_prefix(s.data(), s.size()), pcre2_valid_prefix(s)) << testing::PrintToString(s);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
}

TEST(Gpt2Bpe, SafeCutsDoNotChangeIds) {
    REQUIRE_VOCAB();
    for (const Case& c : TIKTOKEN_CASES) {
        std::string s = std::string(c.text) + ".\nThe " + c.text + "!\nAnd \xff\nX  \nY";
        std::vector<uint32_t> whole = test_encode(s);
        for (size_t pos = 0; pos <= s.size(); pos++) {
            size_t cut = gpt2_safe_cut(s.data(), s.size(), pos);
            ASSERT_GE(cut, pos);
            ASSERT_LE(cut, s.size());
            std::vector<uint32_t> joined = test_encode(s.substr(0, cut)), tail = test_encode(s.substr(cut));
            joined.insert(joined.end(), tail.begin(), tail.end());
            ASSERT_EQ(joined, whole) << c.name << " cut at " << cut;
        }
    }
    // Spaces before the newline would change the ids: no cut there.
    const std::string s = "word  \nNext";
    EXPECT_EQ(gpt2_safe_cut(s.data(), s.size(), 1), s.size());
}

TEST(Gpt2Bpe, DecodeRejectsOutOfRangeIds) {
    REQUIRE_VOCAB();
    std::vector<uint32_t> ids = {50257};
    EXPECT_EXIT(decode(ids), testing::ExitedWithCode(1), "token id 50257 is out of range");
}

TEST(Gpt2Bpe, BadVocabularyFailsWithOneMessage) {
    REQUIRE_VOCAB();
    TempDir tmp("test_gpt2_bpe");
    const std::string& dir = tmp.path;
    EXPECT_EXIT(gpt2_vocab_dir_find(dir.c_str()), testing::ExitedWithCode(1), "does not hold encoder.json");
    std::string enc = read_file(test_vocab_dir() + "/encoder.json"), merges = read_file(test_vocab_dir() + "/vocab.bpe");
    write_file(dir + "/encoder.json", "{not json");
    write_file(dir + "/vocab.bpe", merges);
    EXPECT_EXIT({ Gpt2Bpe b; gpt2_bpe_load(&b, dir); }, testing::ExitedWithCode(1), "encoder.json' is not a JSON object");
    // Swap two merge lines: the files no longer agree.
    size_t l1 = merges.find('\n') + 1, l2 = merges.find('\n', l1) + 1, l3 = merges.find('\n', l2) + 1;
    std::string swapped = merges.substr(0, l1) + merges.substr(l2, l3 - l2) + merges.substr(l1, l2 - l1) + merges.substr(l3);
    write_file(dir + "/encoder.json", enc);
    write_file(dir + "/vocab.bpe", swapped);
    EXPECT_EXIT({ Gpt2Bpe b; gpt2_bpe_load(&b, dir); }, testing::ExitedWithCode(1), "disagree at merge 0");
}

TEST(TokenizerBin, WriteAndRead) {
    REQUIRE_VOCAB();
    TempDir tmp("test_gpt2_bpe");
    std::string path = tmp.path + "/gpt2_tokenizer.bin";
    gpt2_write_tokenizer_bin(bpe(), path);
    EXPECT_TRUE(temp_files_of(path).empty()) << "temporary file left behind";
    std::string raw = read_file(path);
    size_t expect_size = 1024;
    for (const std::string& t : bpe()->token_bytes) expect_size += 1 + t.size();
    ASSERT_EQ(raw.size(), expect_size);
    uint32_t header[4];
    memcpy(header, raw.data(), sizeof(header));
    EXPECT_EQ(header[0], 20240328u);
    EXPECT_EQ(header[1], 2u);
    EXPECT_EQ(header[2], 50257u);
    EXPECT_EQ(header[3], 50256u);

    Tokenizer tok;
    ASSERT_TRUE(tokenizer_init(&tok, path.c_str()));
    EXPECT_EQ(tok.vocab_size, 50257u);
    EXPECT_EQ(tok.eot_token, 50256u);
    for (uint32_t id = 0; id < tok.vocab_size; id++) {
        ASSERT_EQ(tok.tokens[id], bpe()->token_bytes[id]) << id;
    }
    EXPECT_STREQ(tokenizer_decode(&tok, 50256), "<|endoftext|>");
    EXPECT_STREQ(tokenizer_decode(&tok, 5962), "First");
    EXPECT_EQ(tokenizer_decode(&tok, 50257), nullptr);

    // Printing: text as is, control bytes and partial UTF-8 characters escaped.
    auto printed = [&](uint32_t id) {
        char* buf = nullptr;
        size_t len = 0;
        FILE* f = open_memstream(&buf, &len);
        tokenizer_print(f, &tok, id);
        fclose(f);
        std::string s(buf, len);
        free(buf);
        return s;
    };
    EXPECT_EQ(printed(22307), " Citizen");
    EXPECT_EQ(printed(198), "\n");
    EXPECT_EQ(printed(bpe()->byte_token[0x1b]), "\\x1b");          // ESC
    EXPECT_EQ(printed(8582), "\\xf0\\x9f");                        // first half of an emoji
    EXPECT_EQ(printed(test_encode("\xc3\xa9")[0]), "\xc3\xa9");           // a whole character
    EXPECT_EQ(printed(60000), "<id 60000>");
    tokenizer_free(&tok);
}

TEST(TokenizerBin, MissingFileWarnsAndBadFilesFail) {
    REQUIRE_VOCAB();
    TempDir tmp("test_gpt2_bpe");
    const std::string& dir = tmp.path;
    Tokenizer tok;
    testing::internal::CaptureStderr();
    EXPECT_FALSE(tokenizer_init(&tok, (dir + "/missing.bin").c_str()));
    std::string warning = testing::internal::GetCapturedStderr();
    EXPECT_NE(warning.find("warning: cannot open tokenizer"), std::string::npos);
    EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1);

    std::string good = dir + "/good.bin";
    gpt2_write_tokenizer_bin(bpe(), good);
    std::string raw = read_file(good);
    auto write = [&](const std::string& name, const std::string& bytes) { return tmp.write(name, bytes); };
    std::string bad_magic = raw, bad_version = raw;
    bad_magic[0] = 1;
    bad_version[4] = 7;
    std::string p1 = write("magic.bin", bad_magic), p2 = write("version.bin", bad_version);
    std::string p3 = write("short.bin", raw.substr(0, raw.size() - 5)), p4 = write("long.bin", raw + "x");
    EXPECT_EXIT(tokenizer_init(&tok, p1.c_str()), testing::ExitedWithCode(1), "magic.bin' has bad magic");
    EXPECT_EXIT(tokenizer_init(&tok, p2.c_str()), testing::ExitedWithCode(1), "version.bin' has version 7");
    EXPECT_EXIT(tokenizer_init(&tok, p3.c_str()), testing::ExitedWithCode(1), "short.bin' is truncated");
    EXPECT_EXIT(tokenizer_init(&tok, p4.c_str()), testing::ExitedWithCode(1), "long.bin' has bytes after");
}

// Samples start after the tokenizer's own end-of-text (as llm.c's), GPT-2's when there is no tokenizer.
TEST(TokenizerBin, SamplesStartAfterTheTokenizersEndOfText) {
    TempDir tmp("test_gpt2_bpe");
    std::string raw(1024, '\0');
    const int32_t h[4] = {20240328, 2, 4, 3};  // version 2: 4 ids, end-of-text 3
    memcpy(&raw[0], h, sizeof(h));
    for (const char* t : {"a", "b", "c", "<eot>"}) raw += std::string(1, (char)strlen(t)) + t;
    Tokenizer tok;
    ASSERT_TRUE(tokenizer_init(&tok, tmp.write("tok4.bin", raw).c_str()));
    EXPECT_EQ(tokenizer_sample_start(&tok), 3);
    EXPECT_EQ(tokenizer_sample_start(nullptr), GPT2_EOT);
    EXPECT_EQ(GPT2_EOT, 50256);
}

// The vocabulary download runs curl with an argument vector. A folder named like a
// shell command substitution is created as named and passed to curl as one argument; nothing in it runs.
// A stand-in curl (first in PATH) records its arguments and writes to its standard output.
TEST(Gpt2Bpe, DownloadRunsNoShell) {
    TempDir tmp("test_gpt2_bpe");
    const std::string bin = tmp.path + "/bin";
    ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
    const std::string log = tmp.path + "/curl_args.txt";
    write_file(bin + "/curl",
               "#!/bin/sh\n"
               "for a in \"$@\"; do printf '%s\\n' \"$a\" >> '" + log + "'; done\n"
               "echo '{}'\n");
    ASSERT_EQ(chmod((bin + "/curl").c_str(), 0755), 0);
    const std::string old_path = getenv("PATH") ? getenv("PATH") : "";
    setenv("PATH", (bin + ":" + old_path).c_str(), 1);
    const std::string marker = tmp.path + "/pwned";
    const std::string dir = tmp.path + "/b'$(touch " + marker + ")'/gpt2";
    const std::string url = "https://example.invalid/x'$(touch " + marker + ")'/";
    const bool ok = gpt2_vocab_download(dir, url.c_str());
    setenv("PATH", old_path.c_str(), 1);
    EXPECT_TRUE(ok);
    EXPECT_FALSE(std::filesystem::exists(marker)) << "a shell ran part of the folder name or URL";
    EXPECT_EQ(read_file(dir + "/encoder.json"), "{}\n");
    EXPECT_EQ(read_file(dir + "/vocab.bpe"), "{}\n");
    const std::string args = read_file(log);
    EXPECT_NE(args.find("\nhttps://example.invalid/x'$(touch " + marker + ")'/vocab.bpe\n"), std::string::npos) << args;
    // curl missing: false, nothing thrown
    setenv("PATH", tmp.path.c_str(), 1);
    EXPECT_FALSE(gpt2_vocab_download(tmp.path + "/other", "https://example.invalid/"));
    setenv("PATH", old_path.c_str(), 1);
}

// The download never writes through a link: not one planted at the old fixed temporary name
// (<file>.tmp), nor one at the file itself (the rename replaces the link). Earlier builds had curl write
// to <file>.tmp, following a link there. A curl that fails leaves no temporary file.
TEST(Gpt2Bpe, DownloadWritesThroughNoLink) {
    TempDir tmp("test_gpt2_bpe");
    const std::string bin = tmp.path + "/bin";
    ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
    write_file(bin + "/curl",
               "#!/bin/sh\n"
               "for a in \"$@\"; do if [ \"$a\" = -o ]; then o=1; elif [ -n \"$o\" ]; then echo '{}' > \"$a\"; exit 0; fi; done\n"
               "case \"$*\" in *fail*) exit 22;; esac\n"
               "echo '{}'\n");
    ASSERT_EQ(chmod((bin + "/curl").c_str(), 0755), 0);
    const std::string dir = tmp.path + "/gpt2";
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    const std::string victim1 = tmp.path + "/victim1", victim2 = tmp.path + "/victim2";
    write_file(victim1, "victim 1\n");
    write_file(victim2, "victim 2\n");
    ASSERT_EQ(symlink(victim1.c_str(), (dir + "/encoder.json.tmp").c_str()), 0);
    ASSERT_EQ(symlink(victim2.c_str(), (dir + "/vocab.bpe").c_str()), 0);
    const std::string old_path = getenv("PATH") ? getenv("PATH") : "";
    setenv("PATH", (bin + ":" + old_path).c_str(), 1);
    const bool ok = gpt2_vocab_download(dir, "https://example.invalid/");
    const bool failed = gpt2_vocab_download(tmp.path + "/other", "https://example.invalid/fail/");
    setenv("PATH", old_path.c_str(), 1);
    EXPECT_TRUE(ok);
    EXPECT_EQ(read_file(victim1), "victim 1\n");
    EXPECT_EQ(read_file(victim2), "victim 2\n");
    EXPECT_EQ(read_file(dir + "/encoder.json"), "{}\n");
    struct stat sb;
    ASSERT_EQ(lstat((dir + "/vocab.bpe").c_str(), &sb), 0);
    EXPECT_TRUE(S_ISREG(sb.st_mode)) << "the link at vocab.bpe is replaced by the downloaded file";
    EXPECT_EQ(read_file(dir + "/vocab.bpe"), "{}\n");
    EXPECT_FALSE(failed);
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path + "/other")) << "a failed download leaves no temporary file";
}
