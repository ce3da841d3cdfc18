// Tests of dataset preparation (dev/data/prepare_dataset.h) and of the prepare_dataset / gpt2tok tools
// run as a user would. The vocabulary comes from $GPT2_VOCAB_DIR, else the repository's dev/data/gpt2;
// a missing vocabulary fails the tests (it does not skip them).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <glob.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "dev/data/prepare_dataset.h"
#include "test_util.h"
#include "test_vocab.h"

namespace {

const Gpt2Bpe* bpe() { return test_bpe(); }

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// eot + ids of each document, the stream the shards must hold.
std::vector<uint32_t> expected_stream(const std::vector<std::string>& docs) {
    std::vector<uint32_t> all;
    for (const std::string& d : docs) {
        all.push_back(GPT2_EOT);
        std::vector<uint32_t> ids = test_encode(d);
        all.insert(all.end(), ids.begin(), ids.end());
    }
    return all;
}

// Reads a shard, checking the header and the size rule; returns its tokens.
std::vector<uint32_t> read_shard(const std::string& path) {
    std::string raw = read_file(path);
    EXPECT_GE(raw.size(), 1024u) << path;
    if (raw.size() < 1024) return {};
    int32_t header[256];
    memcpy(header, raw.data(), sizeof(header));
    EXPECT_EQ(header[0], 20240520) << path;
    EXPECT_EQ(header[1], 1) << path;
    for (int i = 3; i < 256; i++) EXPECT_EQ(header[i], 0) << path << " slot " << i;
    EXPECT_EQ(raw.size(), 1024u + 2u * (uint32_t)header[2]) << path << ": size must be 1024 + 2n";
    std::vector<uint32_t> ids;
    for (size_t i = 1024; i + 1 < raw.size(); i += 2) ids.push_back((uint8_t)raw[i] | ((uint8_t)raw[i + 1] << 8));
    return ids;
}

const std::vector<std::string> DOCS = {
    "First document. It's short.",
    "Second one,\nwith two lines and \xf0\x9f\x98\x80 emoji.",
    "Third: caf\xc3\xa9 1234 \xe4\xbd\xa0\xe5\xa5\xbd   spaces   ",
    "Fourth and last \xff (an invalid byte).",
};

PrepareOptions options_for(const TempDir& tmp, const std::vector<std::string>& inputs) {
    PrepareOptions opt;
    opt.inputs = inputs;
    opt.shards.out_dir = tmp.path + "/out";
    opt.shards.name = "t";
    opt.progress = false;
    return opt;
}

std::vector<std::string> one_file_per_doc(const TempDir& tmp, const std::vector<std::string>& docs) {
    std::vector<std::string> files;
    for (size_t i = 0; i < docs.size(); i++) files.push_back(tmp.write("doc" + std::to_string(i) + ".txt", docs[i]));
    return files;
}

std::vector<uint32_t> concat_shards(const std::vector<std::string>& paths) {
    std::vector<uint32_t> all;
    for (const std::string& p : paths) {
        std::vector<uint32_t> ids = read_shard(p);
        all.insert(all.end(), ids.begin(), ids.end());
    }
    return all;
}

}  // namespace

// Names in dir, sorted (hidden ones too).
std::vector<std::string> list_files(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

TEST(Shards, HeaderSizeAndDocumentSeparators) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    PrepareOptions opt = options_for(tmp, one_file_per_doc(tmp, DOCS));
    opt.shards.shard_tokens = 16;   // documents run across shard boundaries
    PrepareStats s = prepare_shards(bpe(), opt);
    std::vector<uint32_t> expect = expected_stream(DOCS);
    EXPECT_EQ(s.documents, DOCS.size());
    EXPECT_EQ(s.tokens, expect.size());
    ASSERT_EQ(s.shards.size(), (expect.size() + 15) / 16);
    for (size_t i = 0; i < s.shards.size(); i++) {
        char name[64];
        snprintf(name, sizeof(name), "/out/t_%s_%06zu.bin", i == 0 ? "val" : "train", i);
        EXPECT_EQ(s.shards[i], tmp.path + name);
        size_t n = read_shard(s.shards[i]).size();
        EXPECT_EQ(n, i + 1 < s.shards.size() ? 16u : expect.size() - 16 * i);
        EXPECT_TRUE(temp_files_of(s.shards[i]).empty());
    }
    EXPECT_EQ(concat_shards(s.shards), expect);
}

TEST(Shards, ValTrainSplit) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    std::vector<std::string> files = one_file_per_doc(tmp, DOCS);
    const std::vector<uint32_t> expect = expected_stream(DOCS);
    const std::string val = tmp.path + "/out/t_val_000000.bin";
    const std::string train1 = tmp.path + "/out/t_train_000001.bin", train2 = tmp.path + "/out/t_train_000002.bin";

    // A number of tokens: the val shard holds exactly the first 13, train shards of 15 follow.
    PrepareOptions opt = options_for(tmp, files);
    ASSERT_GT(expect.size(), 13u + 2 * 15u) << "the documents should fill more than two train shards";
    opt.shards.val_tokens = 13;
    opt.shards.shard_tokens = 15;
    PrepareStats s = prepare_shards(bpe(), opt);
    ASSERT_EQ(s.shards.size(), 1 + (expect.size() - 13 + 14) / 15);
    EXPECT_EQ(s.shards[0], val);
    EXPECT_EQ(s.shards[1], train1);
    EXPECT_EQ(s.shards[2], train2);
    EXPECT_EQ(read_shard(val), std::vector<uint32_t>(expect.begin(), expect.begin() + 13));
    EXPECT_EQ(read_shard(train1), std::vector<uint32_t>(expect.begin() + 13, expect.begin() + 28));
    EXPECT_EQ(read_shard(train2), std::vector<uint32_t>(expect.begin() + 28, expect.begin() + 43));
    EXPECT_EQ(concat_shards(s.shards), expect);

    // A fraction of all tokens.
    TempDir tmp2("test_prepare_dataset");
    opt = options_for(tmp2, files);
    opt.val_fraction = 0.25;
    opt.shards.shard_tokens = 1000;
    s = prepare_shards(bpe(), opt);
    ASSERT_EQ(s.shards.size(), 2u);
    size_t nval = (size_t)std::llround(0.25 * expect.size());
    EXPECT_EQ(read_shard(s.shards[0]).size(), nval);
    EXPECT_EQ(read_shard(s.shards[1]).size(), expect.size() - nval);

    // No val split: train shards start at 000001.
    TempDir tmp3("test_prepare_dataset");
    opt = options_for(tmp3, files);
    opt.shards.val_tokens = 0;
    s = prepare_shards(bpe(), opt);
    ASSERT_EQ(s.shards.size(), 1u);
    EXPECT_EQ(s.shards[0], tmp3.path + "/out/t_train_000001.bin");

    // Default: the first full shard is val, as with llm.c's FineWeb shards.
    TempDir tmp4("test_prepare_dataset");
    opt = options_for(tmp4, files);
    opt.shards.shard_tokens = 40;
    s = prepare_shards(bpe(), opt);
    EXPECT_EQ(read_shard(s.shards[0]).size(), 40u);
    EXPECT_NE(s.shards[0].find("_val_000000.bin"), std::string::npos);
}

TEST(Shards, OutputDoesNotDependOnThreads) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    // Many small documents in small batches, plus one document large enough to be cut into pieces.
    std::string jsonl;
    std::vector<std::string> docs;
    for (int i = 0; i < 300; i++) {
        docs.push_back("Document " + std::to_string(i) + ": " + DOCS[i % DOCS.size()].substr(0, 20 + i % 7));
    }
    std::string big = read_file(test_vocab_dir() + "/../tinyshakespeare.txt");
    ASSERT_FALSE(big.empty()) << "tinyshakespeare.txt not found next to the vocabulary directory";
    big += big;
    docs.insert(docs.begin() + 150, big);
    for (const std::string& d : docs) jsonl += nlohmann::json({{"text", d}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    // (the invalid byte of DOCS[3] becomes U+FFFD in JSON; compare against what the file holds)
    std::string path = tmp.write("docs.jsonl", jsonl);
    std::vector<std::string> stored;
    for (size_t pos = 0; pos < jsonl.size();) {
        size_t end = jsonl.find('\n', pos);
        stored.push_back(nlohmann::json::parse(jsonl.substr(pos, end - pos))["text"].get<std::string>());
        pos = end + 1;
    }
    std::vector<std::vector<uint32_t>> results;
    for (int threads : {1, 3}) {
        TempDir out("test_prepare_dataset");
        PrepareOptions opt = options_for(out, {path});
        opt.threads = threads;
        opt.batch_bytes = 4096;
        opt.shards.shard_tokens = 100000;
        PrepareStats s = prepare_shards(bpe(), opt);
        EXPECT_EQ(s.documents, docs.size());
        results.push_back(concat_shards(s.shards));
    }
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], expected_stream(stored));
}

TEST(Shards, InputFormats) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    // Separator: empty documents between separators are skipped.
    std::string text = "doc one<SEP>doc two\n<SEP><SEP>doc three<SEP>";
    PrepareOptions opt = options_for(tmp, {tmp.write("a.txt", text)});
    opt.separator = "<SEP>";
    opt.shards.val_tokens = 0;
    PrepareStats s = prepare_shards(bpe(), opt);
    EXPECT_EQ(s.documents, 3u);
    EXPECT_EQ(concat_shards(s.shards), expected_stream({"doc one", "doc two\n", "doc three"}));

    // JSON lines: blank lines skipped, escapes decoded, other fields ignored.
    TempDir tmp2("test_prepare_dataset");
    std::string jsonl = "{\"text\": \"caf\\u00e9 \\n ok\", \"id\": 1}\n\n   \n{\"id\": 2, \"text\": \"second\"}";
    opt = options_for(tmp2, {tmp2.write("b.jsonl", jsonl)});
    opt.shards.val_tokens = 0;
    s = prepare_shards(bpe(), opt);
    EXPECT_EQ(s.documents, 2u);
    EXPECT_EQ(concat_shards(s.shards), expected_stream({"caf\xc3\xa9 \n ok", "second"}));

    // --format jsonl overrides the name; --format text reads a .jsonl file as one document.
    TempDir tmp3("test_prepare_dataset");
    opt = options_for(tmp3, {tmp3.write("c.txt", "{\"text\": \"x\"}\n")});
    opt.format = InputFormat::Jsonl;
    opt.shards.val_tokens = 0;
    EXPECT_EQ(concat_shards(prepare_shards(bpe(), opt).shards), expected_stream({"x"}));
}

// llm.c's tinyshakespeare.py: text.split("\n\n"), every section a document that keeps its "\n\n" except
// the last; empty sections are documents too (<|endoftext|> + "\n\n", or <|endoftext|> alone at the end).
TEST(Shards, KeepSeparatorAsLlmcTinyShakespeare) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    PrepareOptions opt = options_for(tmp, {tmp.write("a.txt", "First:\nhi\n\nSecond\n\n\n\nthird\n\n"),
                                           tmp.write("b.txt", "one\n\ntwo")});
    opt.separator = "\n\n";
    opt.keep_separator = true;
    opt.shards.val_tokens = 0;
    PrepareStats s = prepare_shards(bpe(), opt);
    const std::vector<std::string> docs = {"First:\nhi\n\n", "Second\n\n", "\n\n", "third\n\n", "", "one\n\n", "two"};
    EXPECT_EQ(s.documents, docs.size());
    EXPECT_EQ(concat_shards(s.shards), expected_stream(docs));
}

// llm.c's Tiny Shakespeare file names: one val file and one train file, without shard numbers.
TEST(Shards, Unnumbered) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    PrepareOptions opt = options_for(tmp, one_file_per_doc(tmp, DOCS));
    opt.shards.unnumbered = true;
    opt.shards.val_tokens = 10;
    opt.shards.shard_tokens = 4;   // sizes numbered train shards only
    PrepareStats s = prepare_shards(bpe(), opt);
    const std::vector<uint32_t> expect = expected_stream(DOCS);
    ASSERT_EQ(s.shards, (std::vector<std::string>{tmp.path + "/out/t_val.bin", tmp.path + "/out/t_train.bin"}));
    EXPECT_EQ(read_shard(s.shards[0]), std::vector<uint32_t>(expect.begin(), expect.begin() + 10));
    EXPECT_EQ(read_shard(s.shards[1]), std::vector<uint32_t>(expect.begin() + 10, expect.end()));
}

namespace {

void put_u64(std::string* out, uint64_t v) {
    for (int i = 0; i < 8; i++) out->push_back((char)(v >> (8 * i) & 0xff));
}

// A framed stream (see prepare_dataset.h) of these batches of documents, with the end marker.
std::string framed(const std::vector<std::vector<std::string>>& batches, bool end = true) {
    std::string out;
    for (const std::vector<std::string>& b : batches) {
        put_u64(&out, b.size());
        uint64_t off = 0;
        put_u64(&out, 0);
        for (const std::string& d : b) put_u64(&out, off += d.size());
        for (const std::string& d : b) out += d;
    }
    if (end) put_u64(&out, 0);
    return out;
}

}  // namespace

TEST(Shards, FramedStream) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    // Every document counts, the empty one too (llm.c's fineweb.py gives it its <|endoftext|>).
    // (an empty batch would be the end marker)
    const std::vector<std::vector<std::string>> batches = {{DOCS[0], "", DOCS[1]}, {DOCS[2]}, {DOCS[3]}};
    PrepareOptions opt = options_for(tmp, {tmp.write("s.framed", framed(batches))});
    opt.format = InputFormat::Framed;
    opt.shards.shard_tokens = 7;
    PrepareStats s = prepare_shards(bpe(), opt);
    EXPECT_EQ(s.documents, 5u);
    EXPECT_EQ(concat_shards(s.shards), expected_stream({DOCS[0], "", DOCS[1], DOCS[2], DOCS[3]}));

    // A stream cut short anywhere, or without its end marker, is refused and nothing is written.
    const std::string whole = framed(batches);
    for (size_t cut : {whole.size() - 8, whole.size() - 9, whole.size() - 20, (size_t)4, (size_t)12}) {
        TempDir t("test_prepare_dataset");
        opt = options_for(t, {t.write("cut.framed", whole.substr(0, cut))});
        opt.format = InputFormat::Framed;
        EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1),
                    "framed input '.*cut.framed' (ended without its end marker|ends inside a batch)") << cut;
        EXPECT_EQ(list_files(t.path), (std::vector<std::string>{"cut.framed", "out"})) << cut;
        EXPECT_EQ(list_files(t.path + "/out"), std::vector<std::string>{}) << cut;
    }
    // Offsets that decrease; a writer that aborts (it has printed why: no message of our own).
    std::string bad;
    put_u64(&bad, 2);
    for (uint64_t o : {0, 5, 3}) put_u64(&bad, o);
    opt = options_for(tmp, {tmp.write("bad.framed", bad + "abcde")});
    opt.format = InputFormat::Framed;
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "framed input '.*bad.framed': bad offset 3");
    std::string aborted = framed({{DOCS[0]}}, false);
    put_u64(&aborted, ~(uint64_t)0);
    opt = options_for(tmp, {tmp.write("abort.framed", aborted)});
    opt.format = InputFormat::Framed;
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "^$");
}

TEST(Shards, TempThenRename) {
    TempDir tmp("test_prepare_dataset");
    const std::string path = tmp.path + "/s.bin";
    // An older shard under the same name, with a second hard link: if the writer truncated and rewrote
    // the file in place, the link would see the new bytes; a rename leaves the old inode alone.
    write_file(path, "old contents");
    ASSERT_EQ(link(path.c_str(), (tmp.path + "/old.bin").c_str()), 0);
    const uint16_t tokens[3] = {50256, 1, 2};
    write_token_shard(path, tokens, 3);
    EXPECT_EQ(read_file(tmp.path + "/old.bin"), "old contents");
    EXPECT_EQ(read_shard(path), (std::vector<uint32_t>{50256, 1, 2}));
    EXPECT_TRUE(temp_files_of(path).empty());

    // When the rename cannot happen, the complete data stays in the temporary file and nothing is half written.
    const std::string dir_in_the_way = tmp.path + "/blocked.bin";
    ASSERT_EQ(mkdir(dir_in_the_way.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir_in_the_way + "/x").c_str(), 0755), 0);
    EXPECT_EXIT(write_token_shard(dir_in_the_way, tokens, 3), testing::ExitedWithCode(1), "cannot rename");
    const std::vector<std::string> left = temp_files_of(dir_in_the_way);
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(read_file(left[0]).size(), 1024u + 6u);
}

// A run that fails after several shards are complete leaves no shard, no *.tmp and no
// staging folder (it used to leave the finished shards under their final names).
TEST(Shards, FailureLateInTheRunLeavesNothing) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    std::string lines;
    for (int i = 0; i < 200; i++) lines += "{\"text\": \"document number " + std::to_string(i) + " with a few words\"}\n";
    lines += "{\"body\": \"no text\"}\n";
    PrepareOptions opt = options_for(tmp, {tmp.write("late.jsonl", lines)});
    opt.shards.shard_tokens = 50;
    opt.shards.val_tokens = 50;
    opt.batch_bytes = 512;  // many batches: shards are finished long before the bad line
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "late.jsonl' line 201 has no string field");
    EXPECT_EQ(list_files(tmp.path + "/out"), std::vector<std::string>{});
}

// A second, smaller run into the same folder replaces the whole set: no shard of the
// first run stays to be picked up by a glob; a staging folder left by a killed run is deleted.
TEST(Shards, RerunReplacesTheWholeSet) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    std::string big, small;
    for (int i = 0; i < 60; i++) big += "document number " + std::to_string(i) + " with a few words\n\n";
    for (int i = 0; i < 5; i++) small += "short " + std::to_string(i) + "\n\n";
    PrepareOptions opt = options_for(tmp, {tmp.write("big.txt", big)});
    opt.separator = "\n\n";
    opt.shards.shard_tokens = 40;
    opt.shards.val_tokens = 40;
    PrepareStats first = prepare_shards(bpe(), opt);
    ASSERT_GT(first.shards.size(), 5u);
    // an unrelated file, and what a killed run would leave
    write_file(tmp.path + "/out/notes.txt", "mine");
    ASSERT_EQ(mkdir((tmp.path + "/out/.t.partial").c_str(), 0755), 0);
    write_file(tmp.path + "/out/.t.partial/t_train_000001.bin.tmp", "half");
    opt.inputs = {tmp.write("small.txt", small)};
    PrepareStats second = prepare_shards(bpe(), opt);
    ASSERT_LT(second.shards.size(), first.shards.size());
    std::vector<std::string> want = {"notes.txt"};
    for (const std::string& p : second.shards) want.push_back(p.substr(p.rfind('/') + 1));
    std::sort(want.begin(), want.end());
    EXPECT_EQ(list_files(tmp.path + "/out"), want);
    std::vector<std::string> docs;
    for (int i = 0; i < 5; i++) docs.push_back("short " + std::to_string(i));
    EXPECT_EQ(concat_shards(second.shards), expected_stream(docs));
}

TEST(Shards, BadInputs) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    // Missing file.
    PrepareOptions opt = options_for(tmp, {tmp.path + "/nope.txt"});
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "cannot open input '.*nope.txt'");
    // A JSON line without "text", and one that is not JSON: named by file and line.
    opt = options_for(tmp, {tmp.write("bad.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"no text\"}\n")});
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "bad.jsonl' line 2 has no string field \"text\"");
    opt = options_for(tmp, {tmp.write("broken.jsonl", "{\"text\": \"unterminated}\n")});
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "broken.jsonl' line 1 is not valid JSON");
    // Output directory that cannot be created (a file is in the way).
    opt = options_for(tmp, {tmp.write("ok.txt", "fine")});
    opt.shards.out_dir = tmp.write("afile", "x") + "/sub";
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "afile' is not a directory");
    // Empty input: a clear message and no shard.
    opt = options_for(tmp, {tmp.write("empty.txt", ""), tmp.write("empty.jsonl", "\n\n")});
    EXPECT_EXIT(prepare_shards(bpe(), opt), testing::ExitedWithCode(1), "no documents in the input");
    EXPECT_FALSE(exists(tmp.path + "/out/t_val_000000.bin"));
    EXPECT_TRUE(temp_files_of(tmp.path + "/out/t_val_000000.bin").empty());
}

// ----------------------------------------------------------------------------

TEST(EvalFile, Layout) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    std::string in = tmp.write("hs.jsonl",
        "{\"ctx\": \"A man is sitting on a roof. he\", \"endings\": [\"is using wrap to wrap a pair of skis.\", "
        "\"is ripping level tiles off.\", \"is holding a rubik's cube.\", \"starts pulling up roofing.\"], \"label\": 3}\n"
        "{\"ctx\": \"Short\", \"endings\": [\"a\", \"b b\", \"c\", \"\\u00e9\"], \"label\": \"1\", \"extra\": 0}\n");
    std::string out = tmp.path + "/hs.bin";
    EvalStats st = prepare_eval_file(bpe(), in, out);
    EXPECT_TRUE(temp_files_of(out).empty());
    std::string raw = read_file(out);
    int32_t header[256];
    ASSERT_GE(raw.size(), 1024u);
    memcpy(header, raw.data(), sizeof(header));
    EXPECT_EQ(header[0], 20240522);
    EXPECT_EQ(header[1], 1);
    EXPECT_EQ(header[2], 2);
    EXPECT_EQ((size_t)header[3], st.longest_bytes);
    std::vector<uint16_t> body((raw.size() - 1024) / 2);
    memcpy(body.data(), raw.data() + 1024, body.size() * 2);

    struct Ex { std::string ctx; std::vector<std::string> endings; int label; };
    std::vector<Ex> examples = {
        {"A man is sitting on a roof. he", {"is using wrap to wrap a pair of skis.", "is ripping level tiles off.",
                                            "is holding a rubik's cube.", "starts pulling up roofing."}, 3},
        {"Short", {"a", "b b", "c", "\xc3\xa9"}, 1},
    };
    std::vector<uint16_t> expect;
    size_t longest = 0;
    for (size_t i = 0; i < examples.size(); i++) {
        size_t begin = expect.size();
        std::vector<uint32_t> ctx = test_encode(examples[i].ctx);
        expect.insert(expect.end(), {65535, 0, (uint16_t)i, (uint16_t)examples[i].label, 4, (uint16_t)ctx.size()});
        expect.insert(expect.end(), ctx.begin(), ctx.end());
        for (const std::string& e : examples[i].endings) {
            std::vector<uint32_t> ids = test_encode(" " + e);   // endings get a leading space
            expect.push_back((uint16_t)ids.size());
            expect.insert(expect.end(), ids.begin(), ids.end());
        }
        expect[begin + 1] = (uint16_t)((expect.size() - begin) * 2);
        longest = std::max(longest, (expect.size() - begin) * 2);
    }
    EXPECT_EQ(body, expect);
    EXPECT_EQ((size_t)header[3], longest);
}

TEST(EvalFile, BadInputs) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    std::string out = tmp.path + "/e.bin";
    std::string three = tmp.write("three.jsonl", "{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\"], \"label\": 0}\n");
    EXPECT_EXIT(prepare_eval_file(bpe(), three, out), testing::ExitedWithCode(1), "line 1: \"endings\" must be an array of 4");
    std::string label = tmp.write("label.jsonl", "{\"ctx\": \"c\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 4}\n");
    EXPECT_EXIT(prepare_eval_file(bpe(), label, out), testing::ExitedWithCode(1), "\"label\" must be 0..3");
    std::string noctx = tmp.write("noctx.jsonl", "\n{\"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}\n");
    EXPECT_EXIT(prepare_eval_file(bpe(), noctx, out), testing::ExitedWithCode(1), "line 2 has no string field \"ctx\"");
    std::string empty = tmp.write("empty.jsonl", "");
    EXPECT_EXIT(prepare_eval_file(bpe(), empty, out), testing::ExitedWithCode(1), "holds no examples");
    // an empty context used to be written, and then refused by the eval loader
    std::string emptyctx = tmp.write("emptyctx.jsonl", "{\"ctx\": \"x\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 1}\n"
                                                     "{\"ctx\": \"\", \"endings\": [\"a\", \"b\", \"c\", \"d\"], \"label\": 0}\n");
    EXPECT_EXIT(prepare_eval_file(bpe(), emptyctx, out), testing::ExitedWithCode(1),
                "emptyctx.jsonl' line 2: the example has an empty context: not written");
    EXPECT_FALSE(exists(out));
}

// What the writer writes, the eval loader reads (one set of rules: llmc/eval_loader.h).
TEST(EvalFile, WriterOutputPassesTheLoader) {
    REQUIRE_VOCAB();
    TempDir tmp("test_prepare_dataset");
    std::string out = tmp.path + "/e.bin";
    std::string in = tmp.write("in.jsonl", "{\"ctx\": \" \", \"endings\": [\"\", \"b\", \"c c\", \"d\"], \"label\": 3}\n"
                                           "{\"ctx\": \"A man\", \"endings\": [\"runs\", \"b\", \"\u00e9\", \"d\"], \"label\": \"2\"}\n");
    EvalStats st = prepare_eval_file(bpe(), in, out);
    EXPECT_EQ(st.examples, 2u);
    EvalLoader el;
    eval_loader_init(&el, out.c_str(), 4, 64, 0, 1);
    ASSERT_EQ(el.examples.size(), 2u);
    EXPECT_EQ(el.examples[0].label, 3);
    EXPECT_EQ(el.examples[1].label, 2);
    EXPECT_EQ(eval_example_problem(el.examples[1]), "");
    eval_loader_free(&el);
}

// ----------------------------------------------------------------------------
// The tools as a user runs them: exit codes and one-line messages.

namespace {

struct ToolRun {
    int code;
    std::string out, err;
};

ToolRun run_tool(const std::string& args) {
    TempDir tmp("test_prepare_dataset");
    std::string cmd = args + " > '" + tmp.path + "/out' 2> '" + tmp.path + "/err'";
    int status = system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(tmp.path + "/out"), read_file(tmp.path + "/err")};
}

std::string tool(const char* name) {
    std::string p = repo_root() + "/" + name;
    return "'" + p + "' ";
}

#define REQUIRE_TOOLS() ASSERT_TRUE(exists(repo_root() + "/prepare_dataset") && exists(repo_root() + "/gpt2tok")) \
                            << "build the tools first: make host"

}  // namespace

TEST(Tools, Gpt2tokRoundTripsAnyBytes) {
    REQUIRE_VOCAB();
    REQUIRE_TOOLS();
    TempDir tmp("test_prepare_dataset");
    std::string bytes = "Hello \xff\xfe world\r\n\xe2\x82 \xf0\x9f\x98\x80 end";
    std::string in = tmp.write("in.bin", bytes);
    std::string vocab = " --vocab '" + test_vocab_dir() + "' ";
    ToolRun enc = run_tool(tool("gpt2tok") + vocab + "encode '" + in + "'");
    ASSERT_EQ(enc.code, 0) << enc.err;
    std::string ids = tmp.write("ids.txt", enc.out);
    ToolRun dec = run_tool(tool("gpt2tok") + vocab + "decode '" + ids + "'");
    ASSERT_EQ(dec.code, 0) << dec.err;
    EXPECT_EQ(dec.out, bytes);
    // An empty file encodes to nothing.
    ToolRun empty = run_tool(tool("gpt2tok") + vocab + "encode '" + tmp.write("empty.txt", "") + "'");
    EXPECT_EQ(empty.code, 0);
    EXPECT_EQ(empty.out, "");
}

TEST(Tools, BadInputsExitWithOneMessage) {
    REQUIRE_VOCAB();
    REQUIRE_TOOLS();
    TempDir tmp("test_prepare_dataset");
    std::string vocab = " --vocab '" + test_vocab_dir() + "' ";
    struct Expect { std::string cmd, message; };
    const std::vector<Expect> cases = {
        {tool("prepare_dataset") + "shards" + vocab + "-o '" + tmp.path + "' '" + tmp.path + "/missing.txt'",
         "error: cannot open input"},
        {tool("prepare_dataset") + "shards --vocab /nonexistent -o '" + tmp.path + "/o' '" + tmp.write("a.txt", "text") + "'",
         "error: --vocab '/nonexistent' does not hold encoder.json and vocab.bpe"},
        {tool("prepare_dataset") + "shards" + vocab + "-o '" + tmp.path + "/o' '" + tmp.write("e.txt", "") + "'",
         "error: no documents in the input"},
        {tool("prepare_dataset") + "shards" + vocab + "-o '" + tmp.path + "/o' '" + tmp.write("j.jsonl", "{\"x\": 1}\n") + "'",
         "error: '" + tmp.path + "/j.jsonl' line 1 has no string field \"text\""},
        {tool("gpt2tok") + vocab + "decode '" + tmp.write("ids.txt", "15496 99999\n") + "'",
         "is not a token id in [0, 50257)"},
        {tool("gpt2tok") + vocab + "count '" + tmp.path + "/missing.txt'", "error: cannot open"},
    };
    for (const Expect& c : cases) {
        ToolRun r = run_tool(c.cmd);
        EXPECT_EQ(r.code, 1) << c.cmd;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.cmd << "\nstderr: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.cmd << "\nstderr: " << r.err;
    }
    EXPECT_FALSE(exists(tmp.path + "/o/data_val_000000.bin"));
    // Usage errors print the usage after the one error line.
    ToolRun usage = run_tool(tool("gpt2tok") + "frobnicate x");
    EXPECT_EQ(usage.code, 1);
    EXPECT_EQ(usage.err.rfind("error: unknown command frobnicate\nusage: gpt2tok", 0), 0u) << usage.err;
}

// ----------------------------------------------------------------------------
// Committing a set: a glob of the shard names sees the old set or the new one, never a mix, wherever
// the run is killed (a kill used to leave some new shards beside the rest of the old set).

namespace {

using FileSet = std::map<std::string, std::string>;   // name -> bytes

// What `<dir>/t_*_*.bin` gives a reader: every matching file with its bytes.
FileSet glob_set(const std::string& dir) {
    FileSet set;
    glob_t g;
    if (glob((dir + "/t_*_*.bin").c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            const std::string p = g.gl_pathv[i];
            set[p.substr(p.rfind('/') + 1)] = read_file(p);
        }
    }
    globfree(&g);
    return set;
}

std::string lines_of(int n, const char* word) {
    std::string s;
    for (int i = 0; i < n; i++) s += std::string(word) + " number " + std::to_string(i) + " with a few words\n\n";
    return s;
}

}  // namespace

TEST(Tools, CommitIsAllOrNothingAtEveryStep) {
    REQUIRE_VOCAB();
    REQUIRE_TOOLS();
    TempDir tmp("test_prepare_dataset");
    const std::string big = tmp.write("big.txt", lines_of(60, "old")), small = tmp.write("small.txt", lines_of(8, "new"));
    const std::string base = tool("prepare_dataset") + "shards -q --vocab '" + test_vocab_dir() +
                             "' --separator '\\n\\n' --shard-size 40 -n t -o '";
    // The sets as complete runs write them.
    const std::string ref = tmp.path + "/ref";
    ASSERT_EQ(run_tool(base + ref + "/a' '" + big + "'").code, 0);
    ASSERT_EQ(run_tool(base + ref + "/b' '" + small + "'").code, 0);
    const FileSet old_set = glob_set(ref + "/a"), new_set = glob_set(ref + "/b");
    ASSERT_GT(old_set.size(), new_set.size() + 2);
    ASSERT_GE(new_set.size(), 2u);

    for (bool exchange : {true, false}) {
        const std::string hooks = exchange ? "" : "PREPARE_DATASET_TEST_NO_EXCHANGE=1 ";
        int steps = 0;
        for (int k = 1; k < 100; k++) {
            const std::string work = tmp.path + "/w";
            std::filesystem::remove_all(work);
            ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
            const std::string out = work + "/out";
            ASSERT_EQ(run_tool(base + out + "' '" + big + "'").code, 0);
            write_file(out + "/notes.txt", "mine");                       // other files of the directory
            ASSERT_EQ(symlink("notes.txt", (out + "/link").c_str()), 0);
            ToolRun r = run_tool("PREPARE_DATASET_TEST_EXIT_AT_COMMIT_STEP=" + std::to_string(k) + " " + hooks + base +
                                 out + "' '" + small + "'");
            ASSERT_TRUE(r.code == 99 || r.code == 0) << r.code << r.err;
            const FileSet seen = glob_set(out);
            const bool missing = !exists(out);   // between the two renames without RENAME_EXCHANGE
            EXPECT_TRUE(seen == old_set || seen == new_set || (!exchange && missing))
                << (exchange ? "exchange" : "two renames") << ", killed before commit step " << k << ": the glob sees "
                << seen.size() << " files, a mix of the old set (" << old_set.size() << ") and the new one ("
                << new_set.size() << ")";
            if (!missing) {
                EXPECT_EQ(read_file(out + "/notes.txt"), "mine") << k;
                EXPECT_EQ(read_file(out + "/link"), "mine") << k;
            }
            // The next run cleans up (moving the old directory back if it is missing) and commits.
            ToolRun again = run_tool(base + out + "' '" + small + "'");
            ASSERT_EQ(again.code, 0) << again.err;
            EXPECT_EQ(glob_set(out), new_set) << k;
            EXPECT_EQ(read_file(out + "/notes.txt"), "mine") << k;
            EXPECT_EQ(list_files(work), std::vector<std::string>{"out"}) << "leftovers beside the output, step " << k;
            if (r.code == 0) break;   // k is past the last step
            steps = k;
        }
        // carried files (notes.txt, link), the swap (two renames without exchange), deleting the old one
        EXPECT_EQ(steps, exchange ? 4 : 5);
    }
}

TEST(Tools, OutputDirectoryRules) {
    REQUIRE_VOCAB();
    REQUIRE_TOOLS();
    TempDir tmp("test_prepare_dataset");
    const std::string in = tmp.write("in.txt", lines_of(5, "doc"));
    const std::string base = tool("prepare_dataset") + "shards -q --vocab '" + test_vocab_dir() + "' -n t ";
    // Refused: a directory holding a subdirectory, the working directory (or one that holds it).
    const std::string sub = tmp.path + "/withsub";
    ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((sub + "/inner").c_str(), 0755), 0);
    ToolRun r = run_tool(base + "-o '" + sub + "' '" + in + "'");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("error: --out '" + sub + "' holds the directory 'inner'"), std::string::npos) << r.err;
    r = run_tool("cd '" + sub + "/inner' && " + base + "-o . '" + in + "'");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("error: --out '.' is the working directory or holds it"), std::string::npos) << r.err;
    r = run_tool("cd '" + sub + "/inner' && " + base + "-o .. '" + in + "'");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("is the working directory or holds it"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    // A symlink to the output directory: the directory it names is replaced, the symlink stays.
    const std::string real = tmp.path + "/real", via = tmp.path + "/via";
    ASSERT_EQ(mkdir(real.c_str(), 0750), 0);
    ASSERT_EQ(symlink(real.c_str(), via.c_str()), 0);
    r = run_tool(base + "-o '" + via + "' '" + in + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(list_files(real), std::vector<std::string>{"t_val_000000.bin"});
    struct stat st;
    ASSERT_EQ(lstat(via.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode));
    ASSERT_EQ(stat(real.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0750u) << "the new directory keeps the old one's mode";
    // Another set in the same directory stays; the same set is replaced with one note.
    r = run_tool(base + "-o '" + real + "' --name other '" + in + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_tool(tool("prepare_dataset") + "shards --vocab '" + test_vocab_dir() + "' -n t -o '" + real + "' '" + in + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("note: replaced 1 file of an earlier run of the set 't'"), std::string::npos) << r.err;
    EXPECT_EQ(list_files(real), (std::vector<std::string>{"other_val_000000.bin", "t_val_000000.bin"}));
    // Leftovers of a killed run beside the directory are deleted; those of a live run are not.
    const std::string stale = tmp.path + "/.real.new-abcdef", live = tmp.path + "/.real.new-ghijkl";
    ASSERT_EQ(mkdir(stale.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(live.c_str(), 0755), 0);
    const int fd = open(live.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_EQ(flock(fd, LOCK_EX), 0);
    r = run_tool(base + "-o '" + real + "' '" + in + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(exists(stale));
    EXPECT_TRUE(exists(live));
    close(fd);
}
