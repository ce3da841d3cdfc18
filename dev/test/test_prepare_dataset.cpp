// Tests of dataset preparation (dev/data/prepare_dataset.h) and of the prepare_dataset / gpt2tok tools
// run as a user would. The vocabulary comes from $GPT2_VOCAB_DIR, else the repository's dev/data/gpt2;
// a missing vocabulary fails the tests (it does not skip them).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

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

std::vector<std::string> list_files(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// Issue 21 point 2: a run that fails after several shards are complete leaves no shard, no *.tmp and no
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

// Issue 21 point 2: a second, smaller run into the same folder replaces the whole set: no shard of the
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
    // issue 21 point 3: an empty context used to be written, and then refused by the eval loader
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
        {tool("prepare_dataset") + "shards --vocab /nonexistent '" + tmp.write("a.txt", "text") + "'",
         "error: --vocab '/nonexistent' does not hold encoder.json and vocab.bpe"},
        {tool("prepare_dataset") + "shards" + vocab + "-o '" + tmp.path + "/o' '" + tmp.write("e.txt", "") + "'",
         "error: no documents in the input"},
        {tool("prepare_dataset") + "shards" + vocab + "'" + tmp.write("j.jsonl", "{\"x\": 1}\n") + "'",
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
