// Tests for llmc/eval_loader.h on a hand-made eval file (docs/formats.md "Multiple-choice eval file", 20240522):
// batch layout (inputs, targets, mask), process interleaving, scoring, and clear errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llmc/eval_loader.h"
#include "test_util.h"

namespace {

struct Ex {
    int label;
    std::vector<uint16_t> ctx;
    std::vector<uint16_t> comp[4];
};

// Example i: context of 2 + i%3 tokens, completion c of 1 + (i + c) % 3 tokens; token values encode
// (example, part, position) so the batch layout can be checked exactly.
std::vector<Ex> make_examples(int n) {
    std::vector<Ex> out(n);
    for (int i = 0; i < n; i++) {
        out[i].label = (i * 7) % 4;
        for (int t = 0; t < 2 + i % 3; t++) out[i].ctx.push_back((uint16_t)(1000 * i + t));
        for (int c = 0; c < 4; c++) {
            for (int t = 0; t < 1 + (i + c) % 3; t++) out[i].comp[c].push_back((uint16_t)(1000 * i + 100 * (c + 1) + t));
        }
    }
    return out;
}

std::vector<uint16_t> example_stream(const Ex& e, int idx) {
    std::vector<uint16_t> s = {65535, 0, (uint16_t)idx, (uint16_t)e.label, 4, (uint16_t)e.ctx.size()};
    s.insert(s.end(), e.ctx.begin(), e.ctx.end());
    for (int c = 0; c < 4; c++) {
        s.push_back((uint16_t)e.comp[c].size());
        s.insert(s.end(), e.comp[c].begin(), e.comp[c].end());
    }
    s[1] = (uint16_t)(s.size() * 2);
    return s;
}

std::vector<uint16_t> file_body(const std::vector<Ex>& ex, int* longest) {
    std::vector<uint16_t> body;
    *longest = 0;
    for (size_t i = 0; i < ex.size(); i++) {
        std::vector<uint16_t> s = example_stream(ex[i], (int)i);
        *longest = std::max(*longest, (int)s.size() * 2);
        body.insert(body.end(), s.begin(), s.end());
    }
    return body;
}

void write_eval_file(const std::string& path, const std::vector<uint16_t>& body, int n, int longest,
                     int magic = EVAL_MAGIC, int version = EVAL_VERSION) {
    int32_t header[256] = {0};
    header[0] = magic;
    header[1] = version;
    header[2] = n;
    header[3] = longest;
    FILE* f = fopen(path.c_str(), "wb");
    fwrite(header, 4, 256, f);
    fwrite(body.data(), 2, body.size(), f);
    fclose(f);
}

std::string write_examples(const TempDir& dir, const std::vector<Ex>& ex, const char* name = "eval.bin") {
    int longest;
    std::vector<uint16_t> body = file_body(ex, &longest);
    std::string path = dir.path + "/" + name;
    write_eval_file(path, body, (int)ex.size(), longest);
    return path;
}

}  // namespace

TEST(EvalLoader, BatchLayoutMaskAndInterleaving) {
    TempDir dir("test_eval_loader");
    std::vector<Ex> ex = make_examples(11);
    std::string path = write_examples(dir, ex);
    const size_t B = 8, T = 8;  // 2 examples per process per batch
    for (int P : {1, 2, 3}) {
        std::vector<int> seen(ex.size(), 0);
        std::vector<EvalLoader> ranks(P);
        for (int r = 0; r < P; r++) eval_loader_init(&ranks[r], path.c_str(), B, T, r, P);
        size_t nb = eval_loader_num_batches(&ranks[0]);
        EXPECT_EQ(nb, (ex.size() + 2 * P - 1) / (2 * P));
        for (size_t k = 0; k < nb; k++) {
            for (int r = 0; r < P; r++) {
                EvalLoader& el = ranks[r];
                eval_loader_next_batch(&el);
                for (size_t e = 0; e < 2; e++) {
                    size_t i = (k * P + r) * 2 + e;  // block of 2 examples per process in each global batch
                    if (i >= ex.size()) {
                        EXPECT_EQ(el.labels[e], -1);
                        for (size_t t = 0; t < 4 * T; t++) EXPECT_EQ(el.mask[e * 4 * T + t], 0);
                        continue;
                    }
                    seen[i]++;
                    EXPECT_EQ(el.labels[e], ex[i].label);
                    for (int c = 0; c < 4; c++) {
                        std::vector<int> full(ex[i].ctx.begin(), ex[i].ctx.end());
                        full.insert(full.end(), ex[i].comp[c].begin(), ex[i].comp[c].end());
                        size_t row = e * 4 + c, ctx = ex[i].ctx.size();
                        for (size_t t = 0; t < T; t++) {
                            int in = t < full.size() ? full[t] : GPT2_EOT;
                            int tg = t + 1 < full.size() ? full[t + 1] : GPT2_EOT;
                            int m = (t + 1 >= ctx && t + 1 < full.size()) ? 1 : 0;
                            ASSERT_EQ(el.inputs[row * T + t], in) << "P=" << P << " ex " << i << " c " << c << " t " << t;
                            ASSERT_EQ(el.targets[row * T + t], tg);
                            ASSERT_EQ(el.mask[row * T + t], m) << "ex " << i << " c " << c << " t " << t;
                        }
                    }
                }
            }
        }
        for (size_t i = 0; i < ex.size(); i++) EXPECT_EQ(seen[i], 1) << "example " << i << " P=" << P;
        for (int r = 0; r < P; r++) eval_loader_free(&ranks[r]);
    }
}

// llm.c's rule: any B >= 4 takes floor(B/4) examples per batch; the rows after them are padding with a
// zero mask (and count for nothing). Every example is still scored exactly once.
TEST(EvalLoader, BatchNotAMultipleOfFour) {
    TempDir dir("test_eval_loader");
    std::vector<Ex> ex = make_examples(7);
    std::string path = write_examples(dir, ex);
    const size_t T = 8;
    for (size_t B : {5, 6, 7, 9, 11}) {
        for (int P : {1, 2}) {
            const size_t E = B / 4;
            std::vector<int> seen(ex.size(), 0);
            std::vector<EvalLoader> ranks(P);
            for (int r = 0; r < P; r++) eval_loader_init(&ranks[r], path.c_str(), B, T, r, P);
            const size_t nb = eval_loader_num_batches(&ranks[0]);
            EXPECT_EQ(nb, (ex.size() + E * P - 1) / (E * P)) << "B=" << B << " P=" << P;
            for (size_t k = 0; k < nb; k++) {
                for (int r = 0; r < P; r++) {
                    EvalLoader& el = ranks[r];
                    eval_loader_next_batch(&el);
                    for (size_t e = 0; e < E; e++) {
                        if (el.labels[e] < 0) continue;
                        const size_t i = (k * P + r) * E + e;
                        ASSERT_LT(i, ex.size());
                        EXPECT_EQ(el.labels[e], ex[i].label);
                        EXPECT_EQ(el.inputs[(e * 4) * T], ex[i].ctx[0]);
                        seen[i]++;
                    }
                    for (size_t t = 4 * E * T; t < B * T; t++) {  // the rows after the last example
                        ASSERT_EQ(el.mask[t], 0) << "B=" << B;
                        ASSERT_EQ(el.inputs[t], GPT2_EOT);
                        ASSERT_EQ(el.targets[t], GPT2_EOT);
                    }
                    // a huge loss on the padding rows changes nothing
                    std::vector<float> losses(B * T, 1.0f);
                    for (size_t t = 4 * E * T; t < B * T; t++) losses[t] = -1e30f;
                    int live = 0;
                    for (size_t e = 0; e < E; e++) live += el.labels[e] >= 0 && el.labels[e] == 0;
                    EXPECT_EQ(eval_loader_stat_losses(&el, losses.data()), live);  // all tie: completion 0 wins
                }
            }
            for (size_t i = 0; i < ex.size(); i++) EXPECT_EQ(seen[i], 1) << "example " << i << " B=" << B << " P=" << P;
            for (int r = 0; r < P; r++) eval_loader_free(&ranks[r]);
        }
    }
}

// -h 1 trains on without the eval when there is no file (as llm.c); a file that is there is read.
TEST(EvalLoader, MissingFileIsTellable) {
    TempDir dir("test_eval_loader");
    EXPECT_TRUE(eval_file_missing((dir.path + "/hellaswag_val.bin").c_str()));
    EXPECT_TRUE(eval_file_missing((dir.path + "/no/such/dir/hellaswag_val.bin").c_str()));
    const std::string path = write_examples(dir, make_examples(2));
    EXPECT_FALSE(eval_file_missing(path.c_str()));
    EXPECT_TRUE(eval_file_missing((path + "/below_a_file.bin").c_str()));  // ENOTDIR: a path that cannot exist
}

TEST(EvalLoader, ScoringPicksLowestMeanCompletionLoss) {
    TempDir dir("test_eval_loader");
    std::vector<Ex> ex = make_examples(3);
    std::string path = write_examples(dir, ex);
    const size_t B = 12, T = 8;  // all 3 examples in one batch
    EvalLoader el;
    eval_loader_init(&el, path.c_str(), B, T, 0, 1);
    eval_loader_next_batch(&el);
    // unmasked positions get a huge loss that must be ignored; masked ones a per-completion value
    std::vector<float> losses(B * T, 1000.0f);
    auto set_row = [&](size_t row, std::vector<float> per_token) {
        size_t j = 0;
        for (size_t t = 0; t < T; t++) {
            if (el.mask[row * T + t]) losses[row * T + t] = per_token[j++ % per_token.size()];
        }
    };
    // example 0 (label 0): completion 0 has mean 1.0, others 2.0 -> correct
    for (int c = 0; c < 4; c++) set_row(0 * 4 + c, {c == 0 ? 1.0f : 2.0f});
    // example 1 (label 3): completion 1 is best -> wrong
    for (int c = 0; c < 4; c++) set_row(1 * 4 + c, {c == 1 ? 0.5f : 3.0f});
    // example 2 (label 2): completion 2 has the lowest MEAN but a higher sum (2 tokens vs 1)
    ASSERT_EQ(ex[2].label, 2);
    ASSERT_EQ(ex[2].comp[2].size(), 2u);
    for (int c = 0; c < 4; c++) set_row(2 * 4 + c, {c == 2 ? 1.5f : 1.6f});
    EXPECT_EQ(eval_loader_stat_losses(&el, losses.data()), 2);
    // a NaN loss never wins
    for (int c = 0; c < 4; c++) set_row(1 * 4 + c, {c == 3 ? NAN : 3.0f});  // label 3
    EXPECT_EQ(eval_loader_stat_losses(&el, losses.data()), 2);
    eval_loader_free(&el);
}

// The model's vocabulary bounds the file's token ids and the padding id 50256 (-h 1 with a small model).
TEST(EvalLoaderErrors, TokenIdsBeyondTheModelsVocabulary) {
    TempDir dir("test_eval_loader");
    std::vector<Ex> ex = make_examples(4);  // ids up to 3302
    int longest;
    std::vector<uint16_t> body = file_body(ex, &longest);
    std::string p = dir.path + "/ok.bin";
    write_eval_file(p, body, 4, longest);
    EvalLoader el;
    eval_loader_init(&el, p.c_str(), 8, 16, 0, 1);
    eval_check_vocab(&el, GPT2_VOCAB_SIZE);  // GPT-2's: fine
    eval_check_vocab(&el, GPT2_PADDED_VOCAB_SIZE);
    EXPECT_EXIT(eval_check_vocab(&el, GPT2_VOCAB_SIZE - 1), ::testing::ExitedWithCode(1),
                "-h 1: eval file '.*ok.bin' holds GPT-2 token ids up to 50256 \\(its rows are padded with 50256\\), "
                "but the model's vocabulary has 50256 ids");
    EXPECT_EXIT(eval_check_vocab(&el, 3000), ::testing::ExitedWithCode(1), "model's vocabulary has 3000 ids");
    eval_loader_free(&el);
}

TEST(EvalLoaderErrors, BadFiles) {
    TempDir dir("test_eval_loader");
    std::vector<Ex> ex = make_examples(4);
    int longest;
    std::vector<uint16_t> body = file_body(ex, &longest);
    EvalLoader el;
    auto expect_fail = [&](const std::string& name, const std::vector<uint16_t>& b, int n, const char* regex,
                           int magic = EVAL_MAGIC, int version = EVAL_VERSION, size_t T = 16) {
        std::string p = dir.path + "/" + name;
        write_eval_file(p, b, n, longest, magic, version);
        EXPECT_EXIT(eval_loader_init(&el, p.c_str(), 8, T, 0, 1), ::testing::ExitedWithCode(1), regex) << name;
    };
    expect_fail("magic.bin", body, 4, "magic.bin' has bad magic 20240520", 20240520);
    expect_fail("version.bin", body, 4, "version.bin' has version 2", EVAL_MAGIC, 2);
    expect_fail("trunc.bin", std::vector<uint16_t>(body.begin(), body.end() - 3), 4, "trunc.bin' is truncated inside example 3");
    expect_fail("count.bin", body, 5, "count.bin' ends after 4 examples, but its header says 5: truncated");
    expect_fail("trailing.bin", body, 3, "trailing.bin' has [0-9]+ bytes after its 3 examples");
    std::vector<uint16_t> b = body;
    b[0] = 7;
    expect_fail("delim.bin", b, 4, "delim.bin': example 0 does not start with the delimiter");
    b = body;
    b[3] = 4;  // label of example 0
    expect_fail("label.bin", b, 4, "label.bin': example 0 has label 4");
    b = body;
    b[4] = 3;  // number of completions
    expect_fail("ncomp.bin", b, 4, "ncomp.bin': example 0 has 3 completions");
    b = body;
    b[1] += 2;  // example byte size
    expect_fail("size.bin", b, 4, "size.bin': example 0 says it is [0-9]+ bytes");
    b = body;
    b[2] = 9;  // example index
    expect_fail("index.bin", b, 4, "index.bin': example 0 has index 9");
    b = body;
    b[6] = 50257;  // first context token
    expect_fail("token.bin", b, 4, "token.bin': example 0 has token id 50257");
    expect_fail("short_t.bin", body, 4, "short_t.bin': example [0-9]+ needs [0-9]+ tokens .* -t is 3",
                EVAL_MAGIC, EVAL_VERSION, 3);
    std::string p = dir.path + "/ok.bin";
    write_eval_file(p, body, 4, longest);
    EXPECT_EXIT(eval_loader_init(&el, p.c_str(), 3, 16, 0, 1), ::testing::ExitedWithCode(1), "-h 1 needs -b >= 4 .*got 3");
    // an odd number of bytes: a file cut inside a token, or a stray byte after the last example
    std::vector<char> bytes = read_bytes<char>(p);
    for (size_t cut : {1, 3, 5}) {
        const std::string q = dir.path + "/cut" + std::to_string(cut) + ".bin";
        write_file(q, bytes.data(), bytes.size() - cut);
        EXPECT_EXIT(eval_loader_init(&el, q.c_str(), 8, 16, 0, 1), ::testing::ExitedWithCode(1),
                    "cut" + std::to_string(cut) + ".bin' is truncated inside example 3") << cut;
    }
    const std::string stray = dir.path + "/stray.bin";
    bytes.push_back(7);
    write_file(stray, bytes.data(), bytes.size());
    EXPECT_EXIT(eval_loader_init(&el, stray.c_str(), 8, 16, 0, 1), ::testing::ExitedWithCode(1),
                "stray.bin' has 1 bytes after its 4 examples");
    write_eval_file(p, body, 4, -1);
    EXPECT_EXIT(eval_loader_init(&el, p.c_str(), 8, 16, 0, 1), ::testing::ExitedWithCode(1),
                "ok.bin' says its longest example is -1 bytes");
    EXPECT_EXIT(eval_loader_init(&el, (dir.path + "/missing.bin").c_str(), 8, 16, 0, 1), ::testing::ExitedWithCode(1),
                "cannot open '.*missing.bin'");
}
