// Tests for llmc/model_file.h: descriptors, parameter layout, bf16 rounding, checkpoint round trips and
// validation, the debug-state reader, and (suite Reference) files written by train_gpt2.py, found in the
// directory named by REFERENCE_DIR (dev/test/reference_check.sh makes them). Reference tests fail, never
// skip, when REFERENCE_DIR is unset: run them through reference_check.sh, or filter with
// --gtest_filter=-Reference.*
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "debug_state.h"
#include "llmc/model_file.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

// maxT, V, Vp, L, NH, C: small enough to write many files, uneven enough to catch swapped fields.
constexpr GPT2Config kTiny = {16, 50, 64, 2, 2, 8};

// Escapes a path for gtest's POSIX regex so death-test messages can be matched against it.
std::string re_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (strchr(".[]{}()\\*+?^$|", c)) out += '\\';
        out += c;
    }
    return out;
}

std::vector<float> random_floats(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

int32_t* header_of(std::vector<char>& bytes) { return reinterpret_cast<int32_t*>(bytes.data()); }

bool same_config(const GPT2Config& a, const GPT2Config& b) { return memcmp(&a, &b, sizeof(a)) == 0; }

// A valid v3 file for kTiny, as bytes, for the corruption tests to damage.
std::vector<char> tiny_v3_bytes(const TempDir& dir) {
    std::string path = dir.file("valid.bin");
    std::vector<float> p = random_floats(gpt2_num_parameters(kTiny), 1);
    model_file_write(path.c_str(), kTiny, p.data(), DType::FP32, 3);
    return read_bytes<char>(path);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// descriptors and layout

TEST(Descriptor, GPT2Shapes) {
    // GPT-2's real shapes (a table: d24 is not 24 heads of 64); d6 and d60-d84 are llm.c's
    struct { int n, C, NH; } want[] = {{6, 384, 6},    {12, 768, 12},  {24, 1024, 16}, {36, 1280, 20},
                                       {48, 1600, 25}, {60, 1920, 30}, {72, 2880, 30}, {84, 3456, 36}};
    for (auto w : want) {
        GPT2Config c{};
        std::string d = "d" + std::to_string(w.n);
        ASSERT_TRUE(gpt2_config_from_descriptor(d.c_str(), &c)) << d;
        EXPECT_EQ(c.num_layers, w.n);
        EXPECT_EQ(c.num_heads, w.NH);
        EXPECT_EQ(c.channels, w.C);
        EXPECT_EQ(c.max_seq_len, 1024);
        EXPECT_EQ(c.vocab_size, 50257);
        EXPECT_EQ(c.padded_vocab_size, 50304);
        GPT2Config p{};
        ASSERT_TRUE(gpt2_config_from_descriptor(("gpt2:" + d).c_str(), &p));
        EXPECT_TRUE(same_config(c, p)) << "gpt2:" << d;
    }
}

TEST(Descriptor, GPT2ParameterCounts) {
    struct { const char* d; size_t n; } want[] = {
        {"d12", 124475904u}, {"d24", 354871296u}, {"d36", 774090240u}, {"d48", 1557686400u}};
    for (auto w : want) {
        GPT2Config c{};
        ASSERT_TRUE(gpt2_config_from_descriptor(w.d, &c));
        EXPECT_EQ(gpt2_num_parameters(c), w.n) << w.d;
    }
}

TEST(Descriptor, CustomShape) {
    GPT2Config c{};
    ASSERT_TRUE(gpt2_config_from_descriptor("custom:L2,C1600,NH25", &c));
    EXPECT_EQ(c.num_layers, 2);
    EXPECT_EQ(c.channels, 1600);
    EXPECT_EQ(c.num_heads, 25);
    EXPECT_EQ(c.padded_vocab_size, 50304);
    for (const char* s : {"custom:L2,C64", "custom:", "custom:L2,C64,NH2,", "custom:l2,c64,nh2", "custom:L-1,C64,NH1"}) {
        EXPECT_EXIT(gpt2_config_from_descriptor(s, &c), ::testing::ExitedWithCode(1),
                    "error: -e " + re_escape(s) + ": malformed custom shape")
            << s;
    }
    EXPECT_EXIT(gpt2_config_from_descriptor("custom:L2,C100,NH3", &c), ::testing::ExitedWithCode(1),
                "custom:L2,C100,NH3: channels C=100 is not divisible by num_heads NH=3");
    // well-formed zeros are not "malformed": the message names the field and its range
    EXPECT_EXIT(gpt2_config_from_descriptor("custom:L0,C64,NH1", &c), ::testing::ExitedWithCode(1),
                "custom:L0,C64,NH1: num_layers L=0 is outside \\[1, 1024\\]");
    EXPECT_EXIT(gpt2_config_from_descriptor("custom:L1,C0,NH1", &c), ::testing::ExitedWithCode(1),
                "custom:L1,C0,NH1: channels C=0 is outside \\[1, 65536\\]");
    EXPECT_EXIT(gpt2_config_from_descriptor("custom:L1,C64,NH0", &c), ::testing::ExitedWithCode(1),
                "custom:L1,C64,NH0: num_heads NH=0 is outside \\[1, 64\\]");
}

// Each problem of a configuration is named with the field and its value (model file headers, -e custom:).
TEST(Descriptor, ConfigProblemsNameTheFieldAndValue) {
    struct Case { GPT2Config c; const char* problem; };
    // maxT, V, Vp, L, NH, C
    const Case cases[] = {
        {{0, 50, 64, 2, 2, 8}, "max_seq_len maxT=0 is outside [1, 1048576]"},
        {{16, 0, 64, 2, 2, 8}, "vocab_size V=0 is outside [1, 16777216]"},
        {{16, 50, 48, 2, 2, 8}, "padded_vocab_size Vp=48 is smaller than vocab_size V=50"},
        {{16, 50257, (1 << 24) + 8, 2, 2, 8}, "padded_vocab_size Vp=16777224 is outside [50257, 16777216]"},
        {{16, 50, 60, 2, 2, 8}, "padded_vocab_size Vp=60 is not a multiple of 8"},
        {{16, 50, 64, 0, 2, 8}, "num_layers L=0 is outside [1, 1024]"},
        {{16, 50, 64, 2, 2, 70000}, "channels C=70000 is outside [1, 65536]"},
        {{16, 50, 64, 2, 0, 8}, "num_heads NH=0 is outside [1, 8]"},
        {{16, 50, 64, 2, -3, 8}, "num_heads NH=-3 is outside [1, 8]"},
        {{16, 50, 64, 2, 3, 8}, "channels C=8 is not divisible by num_heads NH=3"},
    };
    for (const Case& k : cases) {
        const std::string got = gpt2_config_problem(k.c);
        EXPECT_EQ(got.substr(0, strlen(k.problem)), k.problem);
    }
    EXPECT_EQ(gpt2_config_problem(kTiny), "");
    EXPECT_EQ(gpt2_config_problem({16, 50, 56, 2, 2, 8}), "");  // a multiple of 8 that is not one of 128
}

TEST(Descriptor, PathsAreNotDescriptors) {
    GPT2Config c{};
    for (const char* s : {"gpt2_124M.bin", "d12.bin", "dir/d12", "d", "", "model", "d12x", "./d12"}) {
        EXPECT_FALSE(gpt2_config_from_descriptor(s, &c)) << s;
    }
}

TEST(Descriptor, BadDescriptorsListTheValidOnes) {
    GPT2Config c{};
    for (const char* s : {"gpt2:", "gpt2:d0", "gpt2:x12", "gpt2:d12.bin", "d0", "d2", "d13", "d65", "d99999999999"}) {
        EXPECT_EXIT(gpt2_config_from_descriptor(s, &c), ::testing::ExitedWithCode(1),
                    "error: -e " + re_escape(s) + ": unknown model descriptor; valid: d6, d12, d24, d36, d48, "
                    "d60, d72, d84")
            << s;
    }
}

TEST(Layout, ParameterCounts) {
    GPT2Config c{};
    ASSERT_TRUE(gpt2_config_from_descriptor("d12", &c));
    EXPECT_EQ(gpt2_num_parameters(c), 124475904u);
    size_t s[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, s);
    EXPECT_EQ(s[0], 50304u * 768);          // wte
    EXPECT_EQ(s[1], 1024u * 768);           // wpe
    EXPECT_EQ(s[4], 12u * 3 * 768 * 768);   // qkvw
    EXPECT_EQ(s[12], 12u * 768 * 4 * 768);  // fcprojw
    EXPECT_EQ(s[15], 768u);                 // lnfb
    ASSERT_TRUE(gpt2_config_from_descriptor("custom:L2,C128,NH2", &c));
    EXPECT_EQ(gpt2_num_parameters(c), 6966784u);  // what train_gpt2.py prints for this shape
}

// ------------------------------------------------------------------------------------------------
// bf16

TEST(Bf16, RoundsToNearestEven) {
    auto bits = [](uint32_t u) { float f; memcpy(&f, &u, 4); return float_to_bf16_rne(f); };
    EXPECT_EQ(float_to_bf16_rne(1.0f), 0x3F80);
    EXPECT_EQ(bits(0x3F808000u), 0x3F80);  // tie, even stays
    EXPECT_EQ(bits(0x3F818000u), 0x3F82);  // tie, odd rounds up
    EXPECT_EQ(bits(0x3F808001u), 0x3F81);  // above half
    EXPECT_EQ(bits(0x3F807FFFu), 0x3F80);  // below half
    EXPECT_EQ(bits(0xBF818000u), 0xBF82);  // sign does not matter
    EXPECT_EQ(bits(0x7F7FFFFFu), 0x7F80);  // largest float rounds to inf
    EXPECT_EQ(bits(0x7F800000u), 0x7F80);  // inf stays inf
    EXPECT_EQ(bits(0x00000001u), 0x0000);  // denormal rounds to zero
    uint16_t nan = bits(0xFF800001u);      // a NaN whose rounding would carry into the sign
    EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
    EXPECT_EQ(nan & 0x8000, 0x8000);
}

TEST(Bf16, EveryBf16ValueSurvivesTheRoundTrip) {
    for (uint32_t b = 0; b < 65536; b++) {
        float f = bf16_to_float(static_cast<uint16_t>(b));
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_bf16_rne(f), b);
    }
}

// ------------------------------------------------------------------------------------------------
// checkpoints

TEST(ModelFile, Fp32RoundTripAndConversion) {
    TempDir dir("test_model_file");
    std::string path = dir.file("m.bin");
    size_t n = gpt2_num_parameters(kTiny);
    std::vector<float> p = random_floats(n, 2);
    model_file_write(path.c_str(), kTiny, p.data(), DType::FP32, 3);
    EXPECT_TRUE(temp_files_of(path).empty());
    EXPECT_EQ(fs::file_size(path), 1024 + 4 * n);
    ModelFileInfo info = model_file_read_header(path.c_str());
    EXPECT_EQ(info.version, 3);
    EXPECT_TRUE(same_config(info.cfg, kTiny));
    std::vector<float> back(n);
    model_file_read_params(path.c_str(), info, back.data(), DType::FP32);
    EXPECT_EQ(memcmp(back.data(), p.data(), 4 * n), 0);
    std::vector<uint16_t> b16(n);
    model_file_read_params(path.c_str(), info, b16.data(), DType::BF16);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(b16[i], float_to_bf16_rne(p[i])) << i;
}

TEST(ModelFile, Bf16RoundTripAndConversion) {
    TempDir dir("test_model_file");
    std::string from32 = dir.file("from32.bin"), from16 = dir.file("from16.bin"), wide = dir.file("wide.bin");
    size_t n = gpt2_num_parameters(kTiny);
    std::vector<float> p = random_floats(n, 3);
    std::vector<uint16_t> rounded(n);
    for (size_t i = 0; i < n; i++) rounded[i] = float_to_bf16_rne(p[i]);
    model_file_write(from32.c_str(), kTiny, p.data(), DType::FP32, 5);
    model_file_write(from16.c_str(), kTiny, rounded.data(), DType::BF16, 5);
    EXPECT_EQ(fs::file_size(from32), 1024 + 2 * n);
    EXPECT_EQ(read_file(from32), read_file(from16));
    ModelFileInfo info = model_file_read_header(from32.c_str());
    EXPECT_EQ(info.version, 5);
    EXPECT_TRUE(same_config(info.cfg, kTiny));
    std::vector<uint16_t> b16(n);
    model_file_read_params(from32.c_str(), info, b16.data(), DType::BF16);
    EXPECT_EQ(b16, rounded);
    std::vector<float> f32(n);
    model_file_read_params(from32.c_str(), info, f32.data(), DType::FP32);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(f32[i], bf16_to_float(rounded[i])) << i;
    // bf16 params written as v3 widen exactly
    model_file_write(wide.c_str(), kTiny, rounded.data(), DType::BF16, 3);
    std::vector<float> w(n);
    model_file_read_params(wide.c_str(), model_file_read_header(wide.c_str()), w.data(), DType::FP32);
    EXPECT_EQ(w, f32);
}

TEST(ModelFile, LargeFilesStreamThroughChunks) {
    // more elements than one conversion chunk, with a non-multiple tail
    TempDir dir("test_model_file");
    GPT2Config c = {64, 1000, 1024, 1, 4, 512};
    size_t n = gpt2_num_parameters(c);
    ASSERT_GT(n, MODEL_FILE_CHUNK_ELEMS);
    std::vector<float> p = random_floats(n, 4);
    std::string path = dir.file("big.bin");
    model_file_write(path.c_str(), c, p.data(), DType::FP32, 5);
    std::vector<float> back(n);
    model_file_read_params(path.c_str(), model_file_read_header(path.c_str()), back.data(), DType::FP32);
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(back[i], bf16_to_float(float_to_bf16_rne(p[i]))) << i;
    EXPECT_EQ(back[n - 1], bf16_to_float(float_to_bf16_rne(p[n - 1])));
}

// Each corruption must stop with exit code 1 and a message that names the file.
TEST(ModelFileValidation, RejectsBadFiles) {
    TempDir dir("test_model_file");
    std::vector<char> good = tiny_v3_bytes(dir);
    struct Case { const char* name; std::vector<char> bytes; const char* expect; };
    std::vector<Case> cases;
    cases.push_back({"empty.bin", {}, "is too small to hold a header \\(0 bytes, need 1024\\)"});
    cases.push_back({"short_header.bin", std::vector<char>(good.begin(), good.begin() + 500), "too small to hold a header"});
    auto damaged = [&](const char* name, auto edit, const char* expect) {
        std::vector<char> b = good;
        edit(b);
        cases.push_back({name, b, expect});
    };
    damaged("magic.bin", [](std::vector<char>& b) { header_of(b)[0] = 12345; }, "magic 12345");
    damaged("shard.bin", [](std::vector<char>& b) { header_of(b)[0] = 20240520; }, "a token shard");
    damaged("version.bin", [](std::vector<char>& b) { header_of(b)[1] = 4; }, "has version 4, expected 3 \\(fp32\\) or 5 \\(bf16\\)");
    damaged("v5_but_fp32_body.bin", [](std::vector<char>& b) { header_of(b)[1] = 5; }, "trailing bytes");
    damaged("truncated.bin", [](std::vector<char>& b) { b.resize(b.size() - 2); }, "truncated");
    damaged("trailing.bin", [](std::vector<char>& b) { b.resize(b.size() + 4); }, "trailing bytes");
    damaged("layers.bin", [](std::vector<char>& b) { header_of(b)[4] = 0; }, "has a bad header: num_layers L=0");
    damaged("heads.bin", [](std::vector<char>& b) { header_of(b)[5] = 3; }, "C=8 is not divisible by num_heads NH=3");
    damaged("heads0.bin", [](std::vector<char>& b) { header_of(b)[5] = 0; }, "num_heads NH=0 is outside");
    damaged("vocab.bin", [](std::vector<char>& b) { header_of(b)[7] = 49; }, "Vp=49 is smaller than vocab_size V=50");
    damaged("vocab_huge.bin", [](std::vector<char>& b) { header_of(b)[7] = (1 << 24) + 1; },
            "Vp=16777217 is outside \\[50, 16777216\\]");
    damaged("vocab_odd.bin", [](std::vector<char>& b) { header_of(b)[7] = 60; }, "Vp=60 is not a multiple of 8");
    damaged("size_fields.bin", [](std::vector<char>& b) { header_of(b)[6] = 16; }, "but its header says v3, L=");
    for (const Case& c : cases) {
        std::string path = dir.file(c.name);
        write_file(path, c.bytes);
        EXPECT_EXIT(model_file_read_header(path.c_str()), ::testing::ExitedWithCode(1),
                    "error: .*" + re_escape(path) + ".*" + c.expect)
            << c.name;
    }
    std::string missing = dir.file("missing.bin");
    EXPECT_EXIT(model_file_read_header(missing.c_str()), ::testing::ExitedWithCode(1),
                "cannot open '" + re_escape(missing) + "'");
}

// Start-up check of the weights: the first NaN or inf is named by tensor, layer and element, in both
// precisions, also past the first read chunk; finite files (any values) pass.
TEST(ModelFileValidation, NonFiniteParametersAreNamed) {
    TempDir dir("test_model_file");
    GPT2Config c = {64, 1000, 1024, 2, 4, 512};  // over two read chunks
    const size_t n = gpt2_num_parameters(c);
    ASSERT_GT(n, 2 * MODEL_FILE_CHUNK_ELEMS);
    std::vector<float> p = random_floats(n, 3);
    p[n / 2] = 3e38f;  // large but finite, and bf16 rounds it to inf: only the fp32 file keeps it
    const std::string v3 = dir.file("v3.bin"), v5 = dir.file("v5.bin");
    model_file_write(v3.c_str(), c, p.data(), DType::FP32, 3);
    model_file_check_finite(v3.c_str(), model_file_read_header(v3.c_str()));
    p[n / 2] = 1.0f;
    model_file_write(v5.c_str(), c, p.data(), DType::FP32, 5);
    model_file_check_finite(v5.c_str(), model_file_read_header(v5.c_str()));
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    size_t fcw = 0;  // first element of fcw
    for (int t = 0; t < PARAM_FCW; t++) fcw += sizes[t];
    const size_t per_layer = sizes[PARAM_FCW] / c.num_layers;
    struct Case { size_t index; float value; const char* where; };
    const Case cases[] = {
        {0, NAN, "holds nan at element 0 of wte \\(parameter 0 of "},
        {fcw + per_layer + 5, INFINITY, "holds inf at element 5 of layer 1's fcw "},
        {n - 1, -INFINITY, "holds -inf at element 511 of lnfb "},
    };
    for (const Case& k : cases) {
        std::vector<float> q = p;
        q[k.index] = k.value;
        for (int version : {3, 5}) {
            const std::string path = dir.file("bad" + std::to_string(version) + ".bin");
            model_file_write(path.c_str(), c, q.data(), DType::FP32, version);
            const ModelFileInfo info = model_file_read_header(path.c_str());
            EXPECT_EXIT(model_file_check_finite(path.c_str(), info), ::testing::ExitedWithCode(1),
                        "model file '" + re_escape(path) + "' " + k.where)
                << k.where << " v" << version;
        }
    }
}

TEST(ModelFileValidation, ReadParamsNoticesAFileThatChanged) {
    TempDir dir("test_model_file");
    std::string path = dir.file("m.bin");
    write_file(path, tiny_v3_bytes(dir));
    ModelFileInfo info = model_file_read_header(path.c_str());
    std::vector<char> b = read_bytes<char>(path);
    b.resize(b.size() - 8);
    write_file(path, b);
    std::vector<float> dst(gpt2_num_parameters(kTiny));
    EXPECT_EXIT(model_file_read_params(path.c_str(), info, dst.data(), DType::FP32), ::testing::ExitedWithCode(1),
                re_escape(path) + "' changed size");
}

TEST(ModelFileValidation, WriteRejectsBadVersionAndConfig) {
    TempDir dir("test_model_file");
    std::string path = dir.file("w.bin");
    std::vector<float> p(gpt2_num_parameters(kTiny));
    EXPECT_EXIT(model_file_write(path.c_str(), kTiny, p.data(), DType::FP32, 4), ::testing::ExitedWithCode(1),
                "cannot write '" + re_escape(path) + "': model file version 4");
    GPT2Config bad = kTiny;
    bad.num_heads = 3;
    EXPECT_EXIT(model_file_write(path.c_str(), bad, p.data(), DType::FP32, 3), ::testing::ExitedWithCode(1),
                "cannot write '" + re_escape(path) + "': bad config");
}

// ------------------------------------------------------------------------------------------------
// debug state, synthetic

namespace {

struct DebugFile {
    int version = 3, B = 2, T = 4, K = 3, has_dev = 1;
    float lr = 1e-3f;
};

std::vector<char> debug_state_bytes(const GPT2Config& cfg, const DebugFile& d) {
    std::vector<int32_t> h(FILE_HEADER_INTS, 0);
    h[0] = DEBUG_STATE_MAGIC;
    h[1] = d.version;
    h[2] = d.B;
    h[3] = d.T;
    if (d.version == 3) {
        h[4] = cfg.vocab_size;
        h[5] = cfg.padded_vocab_size;
        h[6] = d.K;
        memcpy(&h[7], &d.lr, 4);
        h[8] = d.has_dev;
    }
    size_t BT = static_cast<size_t>(d.B) * d.T;
    std::vector<float> body;  // everything after x, y, as floats
    std::vector<int32_t> x(BT), y(BT);
    for (size_t i = 0; i < BT; i++) {
        x[i] = static_cast<int32_t>((7 * i) % cfg.vocab_size);
        y[i] = static_cast<int32_t>((7 * i + 7) % cfg.vocab_size);
    }
    for (size_t i = 0; i < BT * cfg.vocab_size; i++) body.push_back(0.001f * i);  // logits
    body.push_back(3.5f);                                                          // loss
    for (size_t i = 0; i < gpt2_num_parameters(cfg); i++) body.push_back(-0.5f * i);
    if (d.version == 3) {
        for (int k = 0; k < d.K; k++) body.push_back(3.5f - k);
        for (int k = 0; d.has_dev && k < DEBUG_NUM_DEVIATIONS; k++) {
            body.push_back(2.0f * k);
            body.push_back(1.0f * k);
        }
    }
    std::vector<char> bytes;
    auto append = [&](const void* p, size_t n) { bytes.insert(bytes.end(), (const char*)p, (const char*)p + n); };
    append(h.data(), 4 * h.size());
    append(x.data(), 4 * BT);
    append(y.data(), 4 * BT);
    append(body.data(), 4 * body.size());
    return bytes;
}

}  // namespace

TEST(DebugState, ReadsVersion3) {
    TempDir dir("test_model_file");
    std::string path = dir.file("d.bin");
    write_file(path, debug_state_bytes(kTiny, DebugFile{}));
    DebugState s = debug_state_read(path.c_str(), kTiny);
    EXPECT_EQ(s.version, 3);
    EXPECT_EQ(s.B, 2);
    EXPECT_EQ(s.T, 4);
    EXPECT_EQ(s.V, kTiny.vocab_size);
    EXPECT_EQ(s.Vp, kTiny.padded_vocab_size);
    ASSERT_EQ(s.x.size(), 8u);
    EXPECT_EQ(s.x[1], 7);
    EXPECT_EQ(s.y[0], 7);
    ASSERT_EQ(s.logits.size(), 8u * kTiny.vocab_size);
    EXPECT_FLOAT_EQ(s.logits[10], 0.01f);
    EXPECT_EQ(s.loss, 3.5f);
    ASSERT_EQ(s.grads.size(), gpt2_num_parameters(kTiny));
    EXPECT_EQ(s.grads.back(), -0.5f * (s.grads.size() - 1));
    EXPECT_EQ(s.lr, 1e-3f);
    EXPECT_EQ(s.expected_losses, (std::vector<float>{3.5f, 2.5f, 1.5f}));
    ASSERT_TRUE(s.has_bf16_deviation);
    ASSERT_EQ(s.bf16_max_dev.size(), static_cast<size_t>(DEBUG_NUM_DEVIATIONS));
    EXPECT_EQ(s.bf16_max_dev[DEBUG_DEV_LOSSES], 34.0f);
    EXPECT_EQ(s.bf16_mean_dev[DEBUG_DEV_GRADS + 2], 3.0f);
}

TEST(DebugState, ReadsLlmcVersion2AndNoDeviations) {
    TempDir dir("test_model_file");
    std::string v2 = dir.file("v2.bin"), nodev = dir.file("nodev.bin");
    DebugFile d;
    d.version = 2;
    write_file(v2, debug_state_bytes(kTiny, d));
    DebugState s = debug_state_read(v2.c_str(), kTiny);
    EXPECT_EQ(s.V, kTiny.vocab_size);
    EXPECT_TRUE(s.expected_losses.empty());
    EXPECT_FALSE(s.has_bf16_deviation);
    d = DebugFile{};
    d.has_dev = 0;
    write_file(nodev, debug_state_bytes(kTiny, d));
    s = debug_state_read(nodev.c_str(), kTiny);
    EXPECT_FALSE(s.has_bf16_deviation);
    EXPECT_TRUE(s.bf16_max_dev.empty());
    EXPECT_EQ(s.expected_losses.size(), 3u);
}

// llm.c's train_gpt2.py write_state (f1e2ace), step by step: int32 header of 256 zeros with [0] 20240327,
// [1] 2, [2] B, [3] T; x and y as int32 (B, T); logits fp32 (B, T, V) (its model's vocab is unpadded);
// the loss as one fp32; the gradients through write_tensors in fp32: wte padded with zero rows to
// (Vp, C), wpe, then for each per-layer parameter all L layers in turn, then lnf weight and bias.
// `grads[i]` is tensor i of the checkpoint order without padding (wte (V, C)).
static void write_llmc_v2_debug_state(const std::string& path, const GPT2Config& cfg, int B, int T,
                                      const std::vector<int32_t>& x, const std::vector<int32_t>& y,
                                      const std::vector<float>& logits, float loss,
                                      const std::vector<std::vector<float>>& grads) {
    std::string out;
    auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    std::vector<int32_t> header(256, 0);
    header[0] = 20240327;
    header[1] = 2;
    header[2] = B;
    header[3] = T;
    put(header.data(), 1024);
    put(x.data(), 4 * x.size());
    put(y.data(), 4 * y.size());
    put(logits.data(), 4 * logits.size());
    put(&loss, 4);
    std::vector<float> wte_padded((size_t)cfg.padded_vocab_size * cfg.channels, 0.0f);
    std::copy(grads[0].begin(), grads[0].end(), wte_padded.begin());
    put(wte_padded.data(), 4 * wte_padded.size());
    for (int i = 1; i < NUM_PARAMETER_TENSORS; i++) put(grads[i].data(), 4 * grads[i].size());
    write_file(path, out);
}

TEST(DebugState, ReadsAFileWrittenAsLlmcWritesVersion2) {
    const GPT2Config& c = kTiny;
    const int B = 3, T = 5, BT = B * T;
    std::vector<int32_t> x(BT), y(BT);
    for (int i = 0; i < BT; i++) {
        x[i] = (11 * i + 3) % c.vocab_size;
        y[i] = (11 * i + 14) % c.vocab_size;
    }
    std::vector<float> logits = random_floats((size_t)BT * c.vocab_size, 7);
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    std::vector<std::vector<float>> grads(NUM_PARAMETER_TENSORS);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = i == 0 ? (size_t)c.vocab_size * c.channels : sizes[i];
        grads[i] = random_floats(n, 100 + i);
    }
    TempDir dir("test_model_file");
    const std::string path = dir.file("llmc_v2.bin");
    write_llmc_v2_debug_state(path, c, B, T, x, y, logits, 4.25f, grads);

    const DebugState s = debug_state_read(path.c_str(), c);
    EXPECT_EQ(s.version, 2);
    EXPECT_EQ(s.B, B);
    EXPECT_EQ(s.T, T);
    EXPECT_EQ(s.x, std::vector<int>(x.begin(), x.end()));
    EXPECT_EQ(s.y, std::vector<int>(y.begin(), y.end()));
    EXPECT_EQ(s.logits, logits);
    EXPECT_EQ(s.loss, 4.25f);
    EXPECT_TRUE(s.expected_losses.empty());
    EXPECT_FALSE(s.has_bf16_deviation);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        for (size_t j = 0; j < sizes[i]; j++) {
            const float want = j < grads[i].size() ? grads[i][j] : 0.0f;  // wte's padded rows are 0
            ASSERT_EQ(s.grads[off + j], want) << PARAMETER_TENSOR_NAMES[i] << " element " << j;
        }
        off += sizes[i];
    }
    EXPECT_EQ(off, s.grads.size());
}

TEST(DebugState, LlmcFixedTolerancesForVersion2) {
    // the numbers of llm.c's test_gpt2.cu
    const LlmcTestTolerances bf = llmc_test_tolerances(true), fp = llmc_test_tolerances(false);
    EXPECT_EQ(bf.logits, 25.0f);
    EXPECT_EQ(fp.logits, 1e-3f);
    EXPECT_EQ(bf.loss, 0.05f);
    EXPECT_EQ(fp.loss, 1e-5f);
    EXPECT_EQ(bf.grad[0], 5e-1f);   // wte
    EXPECT_EQ(bf.grad[5], 3.5e-2f); // qkvb
    EXPECT_EQ(bf.grad[15], 2e-2f);  // lnfb
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) EXPECT_EQ(fp.grad[i], 1e-6f);
    EXPECT_EQ(bf.grad_rel, 0.079f);
    EXPECT_EQ(fp.grad_rel, 0.079f);
    EXPECT_EQ(bf.lr, 1e-4f);
    EXPECT_EQ(bf.steps, 10);
    // check_tensor's rule: |ours - ref| <= threshold + 0.079 |ref|, element by element
    const float ref[3] = {1.0f, -2.0f, 0.0f};
    double worst;
    size_t at;
    const float inside[3] = {1.0f + 0.8f * (0.01f + 0.079f), -2.0f, 0.009f};
    EXPECT_TRUE(llmc_tensor_within(inside, ref, 3, 0.01f, 0.079f, &worst, &at));
    EXPECT_EQ(at, 2u);  // 0.009 / 0.01 = 0.9 of its limit; element 0 is at 0.8 of its own
    EXPECT_NEAR(worst, 0.9, 1e-3);
    const float outside[3] = {1.0f, -2.0f - 1.1f * (0.01f + 2 * 0.079f), 0.0f};
    EXPECT_FALSE(llmc_tensor_within(outside, ref, 3, 0.01f, 0.079f, &worst, &at));
    EXPECT_EQ(at, 1u);
    EXPECT_NEAR(worst, 1.1, 1e-3);
    const float nan_ours[3] = {1.0f, NAN, 0.0f};
    EXPECT_FALSE(llmc_tensor_within(nan_ours, ref, 3, 0.01f, 0.079f, &worst, &at));
}

TEST(DebugStateValidation, RejectsBadFiles) {
    TempDir dir("test_model_file");
    std::vector<char> good = debug_state_bytes(kTiny, DebugFile{});
    auto expect_dies = [&](const char* name, std::vector<char> bytes, const GPT2Config& cfg, const char* expect) {
        std::string path = dir.file(name);
        write_file(path, bytes);
        EXPECT_EXIT(debug_state_read(path.c_str(), cfg), ::testing::ExitedWithCode(1),
                    "error: .*" + re_escape(path) + ".*" + expect)
            << name;
    };
    std::vector<char> b = good;
    header_of(b)[0] = MODEL_FILE_MAGIC;
    expect_dies("magic.bin", b, kTiny, "a model checkpoint");
    b = good;
    header_of(b)[1] = 4;
    expect_dies("version.bin", b, kTiny, "has version 4, expected 2 \\(llm.c\\) or 3");
    b = good;
    b.resize(b.size() - 4);
    expect_dies("truncated.bin", b, kTiny, "truncated");
    expect_dies("short.bin", std::vector<char>(good.begin(), good.begin() + 100), kTiny, "too small to hold a header");
    b = good;
    header_of(b)[3] = kTiny.max_seq_len + 1;
    expect_dies("long_T.bin", b, kTiny, "bad batch shape");
    b = good;
    header_of(b)[8] = 2;
    expect_dies("flag.bin", b, kTiny, "bf16 flag 2");
    GPT2Config other = kTiny;
    other.vocab_size = 51;
    expect_dies("vocab.bin", good, other, "written for V=50");
    GPT2Config deeper = kTiny;
    deeper.num_layers = 3;
    expect_dies("model.bin", good, deeper, "written for another model");
    b = good;
    header_of(b)[FILE_HEADER_INTS + 3] = kTiny.vocab_size;  // x[3] = V
    expect_dies("token.bin", b, kTiny, "token 3 out of range");
    std::string missing = dir.file("missing.bin");
    EXPECT_EXIT(debug_state_read(missing.c_str(), kTiny), ::testing::ExitedWithCode(1),
                "cannot open '" + re_escape(missing) + "'");
}

// ------------------------------------------------------------------------------------------------
// files written by train_gpt2.py (REFERENCE_DIR)

namespace {

// "<dir>/<name>" for the one "<name>_debug_state.bin" in REFERENCE_DIR, or "" after recording a failure.
std::string reference_prefix() {
    const char* dir = getenv("REFERENCE_DIR");
    if (dir == nullptr || *dir == '\0') {
        ADD_FAILURE() << "REFERENCE_DIR is not set: run dev/test/reference_check.sh, which writes the files with "
                         "train_gpt2.py and sets it";
        return "";
    }
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string name = e.path().filename().string();
        const std::string suffix = "_debug_state.bin";
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
            found.push_back((fs::path(dir) / name.substr(0, name.size() - suffix.size())).string());
        }
    }
    if (ec) {
        ADD_FAILURE() << "REFERENCE_DIR=" << dir << ": " << ec.message();
        return "";
    }
    if (found.size() != 1) {
        ADD_FAILURE() << "REFERENCE_DIR=" << dir << " must hold exactly one *_debug_state.bin, found " << found.size();
        return "";
    }
    for (const char* suffix : {".bin", "_bf16.bin"}) {
        if (!fs::exists(found[0] + suffix)) {
            ADD_FAILURE() << "missing " << found[0] << suffix;
            return "";
        }
    }
    return found[0];
}

bool all_finite(const std::vector<float>& v) {
    for (float x : v) {
        if (!std::isfinite(x)) return false;
    }
    return true;
}

}  // namespace

TEST(Reference, HeadersAgree) {
    std::string prefix = reference_prefix();
    ASSERT_FALSE(prefix.empty());
    ModelFileInfo f32 = model_file_read_header((prefix + ".bin").c_str());
    ModelFileInfo b16 = model_file_read_header((prefix + "_bf16.bin").c_str());
    EXPECT_EQ(f32.version, 3);
    EXPECT_EQ(b16.version, 5);
    EXPECT_TRUE(same_config(f32.cfg, b16.cfg));
    EXPECT_EQ(f32.cfg.vocab_size, GPT2_VOCAB_SIZE);
    EXPECT_EQ(f32.cfg.padded_vocab_size, GPT2_PADDED_VOCAB_SIZE);
    size_t n = gpt2_num_parameters(f32.cfg);
    EXPECT_EQ(fs::file_size(prefix + ".bin"), 1024 + 4 * n);
    EXPECT_EQ(fs::file_size(prefix + "_bf16.bin"), 1024 + 2 * n);
}

TEST(Reference, Bf16FileIsTheRoundedFp32File) {
    std::string prefix = reference_prefix();
    ASSERT_FALSE(prefix.empty());
    std::string p32 = prefix + ".bin", p16 = prefix + "_bf16.bin";
    ModelFileInfo info32 = model_file_read_header(p32.c_str());
    ModelFileInfo info16 = model_file_read_header(p16.c_str());
    size_t n = gpt2_num_parameters(info32.cfg);
    std::vector<float> w32(n);
    std::vector<uint16_t> w16(n), w32_as16(n);
    model_file_read_params(p32.c_str(), info32, w32.data(), DType::FP32);
    model_file_read_params(p16.c_str(), info16, w16.data(), DType::BF16);
    model_file_read_params(p32.c_str(), info32, w32_as16.data(), DType::BF16);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; i++) mismatches += w16[i] != float_to_bf16_rne(w32[i]);
    EXPECT_EQ(mismatches, 0u) << "of " << n << " parameters";
    EXPECT_EQ(w16, w32_as16);
    EXPECT_TRUE(all_finite(w32));
    // padded wte rows are zero; real rows are not
    const GPT2Config& c = info32.cfg;
    size_t C = c.channels;
    for (size_t i = static_cast<size_t>(c.vocab_size) * C; i < static_cast<size_t>(c.padded_vocab_size) * C; i++) {
        ASSERT_EQ(w32[i], 0.0f) << "wte padding row " << i / C;
    }
    float row0 = 0;
    for (size_t i = 0; i < C; i++) row0 += std::fabs(w32[i]);
    EXPECT_GT(row0, 0.0f);
}

// train_gpt2.py --write_llmc_v2 1: the same batch, logits, loss and gradients in llm.c's version 2 layout
TEST(Reference, LlmcVersion2DebugStateHoldsTheSameTensors) {
    std::string prefix = reference_prefix();
    ASSERT_FALSE(prefix.empty());
    GPT2Config cfg = model_file_read_header((prefix + ".bin").c_str()).cfg;
    DebugState v3 = debug_state_read((prefix + "_debug_state.bin").c_str(), cfg);
    DebugState v2 = debug_state_read((prefix + "_debug_state_v2.bin").c_str(), cfg);
    EXPECT_EQ(v2.version, 2);
    EXPECT_EQ(v2.B, v3.B);
    EXPECT_EQ(v2.T, v3.T);
    EXPECT_EQ(v2.x, v3.x);
    EXPECT_EQ(v2.y, v3.y);
    EXPECT_EQ(v2.logits, v3.logits);
    EXPECT_EQ(v2.loss, v3.loss);
    EXPECT_EQ(v2.grads, v3.grads);
    EXPECT_TRUE(v2.expected_losses.empty());
}

TEST(Reference, DebugStateIsSane) {
    std::string prefix = reference_prefix();
    ASSERT_FALSE(prefix.empty());
    GPT2Config cfg = model_file_read_header((prefix + ".bin").c_str()).cfg;
    DebugState s = debug_state_read((prefix + "_debug_state.bin").c_str(), cfg);
    EXPECT_EQ(s.version, 3);
    size_t BT = static_cast<size_t>(s.B) * s.T;
    for (size_t i = 0; i + 1 < BT; i++) ASSERT_EQ(s.x[i + 1], s.y[i]) << "y must be x shifted by one, at " << i;
    EXPECT_TRUE(all_finite(s.logits));
    EXPECT_TRUE(all_finite(s.grads));
    EXPECT_TRUE(all_finite(s.expected_losses));
    EXPECT_TRUE(std::isfinite(s.loss));

    // the stored loss is the mean cross-entropy of the stored logits (checks the layout end to end)
    double ce = 0;
    for (size_t i = 0; i < BT; i++) {
        const float* row = &s.logits[i * s.V];
        double mx = row[0], sum = 0;
        for (int v = 1; v < s.V; v++) mx = std::max(mx, static_cast<double>(row[v]));
        for (int v = 0; v < s.V; v++) sum += std::exp(row[v] - mx);
        ce += mx + std::log(sum) - row[s.y[i]];
    }
    ce /= BT;
    EXPECT_NEAR(ce, s.loss, 1e-4 * s.loss);

    // the K losses: the first is this loss, and training lowers it by at least 30%
    ASSERT_EQ(s.expected_losses.size(), 10u);
    EXPECT_GT(s.lr, 0.0f);
    EXPECT_NEAR(s.expected_losses[0], s.loss, 1e-5 * s.loss);
    EXPECT_LE(s.expected_losses.back(), 0.7f * s.expected_losses.front());
    for (size_t k = 1; k < s.expected_losses.size(); k++) {
        EXPECT_LT(s.expected_losses[k], s.expected_losses[0]) << "loss " << k;
    }

    // gradients: every tensor has some; padded wte rows and wpe rows >= T have none
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    size_t off = 0, C = cfg.channels;
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        double l1 = 0;
        for (size_t i = 0; i < sizes[t]; i++) l1 += std::fabs(s.grads[off + i]);
        EXPECT_GT(l1, 0.0) << PARAMETER_TENSOR_NAMES[t];
        off += sizes[t];
    }
    for (size_t i = static_cast<size_t>(s.V) * C; i < static_cast<size_t>(s.Vp) * C; i++) {
        ASSERT_EQ(s.grads[i], 0.0f) << "wte padding row " << i / C;
    }
    for (size_t i = static_cast<size_t>(s.T) * C; i < sizes[1]; i++) {
        ASSERT_EQ(s.grads[sizes[0] + i], 0.0f) << "wpe row " << i / C;
    }

    // bf16 deviations: present, finite, 0 <= mean <= max, and nonzero (bf16 does differ from fp32)
    ASSERT_TRUE(s.has_bf16_deviation);
    for (int k = 0; k < DEBUG_NUM_DEVIATIONS; k++) {
        EXPECT_TRUE(std::isfinite(s.bf16_max_dev[k]) && std::isfinite(s.bf16_mean_dev[k])) << k;
        EXPECT_GE(s.bf16_mean_dev[k], 0.0f) << k;
        EXPECT_LE(s.bf16_mean_dev[k], s.bf16_max_dev[k]) << k;
    }
    EXPECT_GT(s.bf16_max_dev[DEBUG_DEV_LOGITS], 0.0f);
    EXPECT_GT(s.bf16_max_dev[DEBUG_DEV_LOSSES], 0.0f);
}
