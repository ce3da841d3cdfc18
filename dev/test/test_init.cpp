// Tests of the random initialisation (-e dN, gpt3:cN, custom:...): llm.c's gpt2_build_from_random bit for
// bit (llmc/model_file.h gpt2_init_params_random), and the MT19937 pieces it stands on (llmc/rand.h:
// jump-ahead, bulk uniforms, llm.c's normal_).
//
// dev/test/data/init_llmc.bin holds llm.c's own numbers. It was written once by a small generator kept
// outside this repository: a .cu file built with nvcc -O3 (as llm.c builds train_gpt2.cu) that includes
// llm.c's llmc/rand.h (karpathy/llm.c f1e2ace) unchanged and repeats gpt2_build_from_random's loop around
// it: manual_seed(seed), memset 0, LayerNorm weights 1, then normal_(buf, n, 0, std) in llm.c's order
// (wte's V rows, wpe, then per layer qkvw, attprojw, fcw, fcprojw; std 0.02, residual projections
// 0.02f * (1.0f / sqrtf(2.0f * L))), each value cast to floatX, once with floatX = float and once with
// floatX = __nv_bfloat16 (cuda_bf16.h's host conversion). The same generator built with g++ and with
// clang++ wrote the same bytes. llm.c fixes V = 50257, Vp = 50304; its seed is always 42 (the 1337 case
// is what its manual_seed gives for another seed, which our -seed reaches). The math is glibc's logf,
// cosf, sinf (x86-64, glibc 2.36); another libm could differ in the last bit of rare values.
//
// Layout, little-endian: uint32 magic 0x54494E49, version 1, number of cases; per case: char[32]
// descriptor, uint32 seed, uint32 K; then per parameter tensor (16, checkpoint order): uint64 numel,
// uint64 FNV-1a 64 of the whole tensor's fp32 bytes, uint64 the same of its bf16 bytes, uint32 h,
// uint32 t, then h fp32, h bf16 (the first h values), t fp32, t bf16 (the last t). h and t are
// min(numel, K) and min(numel - h, K) for the six drawn tensors, 0 for the others (the hashes cover them).
// Cases: custom:L2,C64,NH1 (seeds 42 and 1337), custom:L3,C10,NH2 (tensors with numel % 16 != 0: wte,
// qkvw, attprojw), custom:L2,C3,NH1, custom:L1,C2,NH1, custom:L1,C1,NH1 (tensors of fewer than 16 values,
// odd and even: llm.c's double-precision path), K = 100; d12 (GPT-2 124M), K = 1000.
// d48 is too big for a test (19 s of CPU, 3 GB); checked once the same way: the whole bf16 model's
// FNV-1a 64 is 69593d4c426f7034 in llm.c and in `build/host/tools/model_config --init d48`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmc/model_file.h"
#include "llmc/rand.h"
#include "test_util.h"

namespace {

uint64_t fnv1a64(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

struct RefTensor {
    uint64_t numel = 0, hash32 = 0, hash16 = 0;
    std::vector<uint32_t> head32, tail32;  // fp32 bit patterns
    std::vector<uint16_t> head16, tail16;  // bf16
};
struct RefCase {
    std::string desc;
    uint32_t seed = 0;
    std::vector<RefTensor> tensors;
};

struct Reader {
    std::string bytes;
    size_t pos = 0;
    bool ok = true;
    template <typename T>
    T get() {
        T v{};
        if (pos + sizeof(T) > bytes.size()) {
            ok = false;
            return v;
        }
        memcpy(&v, bytes.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    template <typename T>
    std::vector<T> get_n(size_t n) {
        std::vector<T> v(n);
        for (T& x : v) x = get<T>();
        return v;
    }
};

std::vector<RefCase> load_reference() {
    Reader r{read_file(repo_root() + "/dev/test/data/init_llmc.bin")};
    std::vector<RefCase> cases;
    if (r.get<uint32_t>() != 0x54494E49u || r.get<uint32_t>() != 1) return cases;
    const uint32_t n = r.get<uint32_t>();
    for (uint32_t c = 0; c < n && r.ok; c++) {
        RefCase rc;
        const std::vector<char> name = r.get_n<char>(32);
        rc.desc = std::string(name.data(), strnlen(name.data(), name.size()));
        rc.seed = r.get<uint32_t>();
        r.get<uint32_t>();  // K
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            RefTensor t;
            t.numel = r.get<uint64_t>();
            t.hash32 = r.get<uint64_t>();
            t.hash16 = r.get<uint64_t>();
            const uint32_t h = r.get<uint32_t>(), tl = r.get<uint32_t>();
            t.head32 = r.get_n<uint32_t>(h);
            t.head16 = r.get_n<uint16_t>(h);
            t.tail32 = r.get_n<uint32_t>(tl);
            t.tail16 = r.get_n<uint16_t>(tl);
            rc.tensors.push_back(std::move(t));
        }
        cases.push_back(std::move(rc));
    }
    if (!r.ok || r.pos != r.bytes.size()) cases.clear();
    return cases;
}

// llm.c's gpt2_build_from_random written plainly, one stream, on our rand.h: fp32 values.
std::vector<float> init_sequential(const GPT2Config& c, uint32_t seed) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    std::vector<float> out(gpt2_num_parameters(c), 0.0f);
    Mt19937State s;
    mt19937_seed(&s, seed);
    const size_t L = c.num_layers;
    const float residual_scale = 1.0f / sqrtf(2.0f * c.num_layers);
    for (size_t l = 0; l < L; l++) {
        size_t off = 0;
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            if (l == 0 && (i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW)) {
                for (size_t j = 0; j < sizes[i]; j++) out[off + j] = 1.0f;
            }
            const bool per_layer = i == PARAM_QKVW || i == PARAM_ATTPROJW || i == PARAM_FCW || i == PARAM_FCPROJW;
            if ((l == 0 && (i == PARAM_WTE || i == PARAM_WPE)) || per_layer) {
                size_t n = i == PARAM_WTE ? (size_t)c.vocab_size * c.channels : sizes[i];
                size_t at = off;
                if (per_layer) {
                    n /= L;
                    at += l * n;
                }
                const float std = (i == PARAM_ATTPROJW || i == PARAM_FCPROJW) ? 0.02f * residual_scale : 0.02f;
                mt19937_normal(out.data() + at, n, 0.0f, std, &s);
            }
            off += sizes[i];
        }
    }
    return out;
}

// Index of the first difference, or -1.
template <typename T>
long first_diff(const T* a, const T* b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) return (long)i;
    }
    return -1;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// MT19937 pieces

// PyTorch's values for torch.manual_seed(137): five torch.randint(0, 0xFFFFFFFF, [1]), torch.zeros(8)
// .normal_(), one randint, torch.zeros(16).normal_(), one randint. The draws agree exactly, the normals
// to 1e-6 (what llm.c's %f printout of them shows): torch keeps parts of Box-Muller in double where
// llm.c (and we) round to float. llm.c's exact bits are checked by InitLlmc.SameBitsAsLlmc.
TEST(Mt19937, NormalMatchesPytorchCpu) {
    Mt19937State s;
    mt19937_seed(&s, 137);
    for (uint32_t want : {4053805790u, 2173880614u, 380293709u, 1237255315u, 2986595568u}) {
        EXPECT_EQ(mt19937_u32(&s), want);
    }
    const float n8[8] = {0.7947664260864258f, 1.4369317293167114f, -0.2292192131280899f, 0.47556325793266296f,
                         -0.6334410905838013f, -0.5791953802108765f, -0.0925704762339592f, -0.8659197092056274f};
    float got[16];
    mt19937_normal(got, 8, 0.0f, 1.0f, &s);
    for (int i = 0; i < 8; i++) EXPECT_NEAR(got[i], n8[i], 1e-6f * std::max(1.0f, fabsf(n8[i]))) << i;
    EXPECT_EQ(mt19937_u32(&s), 2186503452u);
    const float n16[16] = {-1.2813878059387207f, -2.646395683288574f, -0.06569503247737885f, 0.2180829495191574f,
                           -0.46536165475845337f, -0.33108410239219666f, 2.5485482215881348f, 0.10425379872322083f,
                           0.8460659980773926f, 0.9462448358535767f, -0.2913765013217926f, 0.34313806891441345f,
                           -1.1186704635620117f, -0.18305328488349915f, -2.3153159618377686f, 0.3961987793445587f};
    mt19937_normal(got, 16, 0.0f, 1.0f, &s);
    for (int i = 0; i < 16; i++) EXPECT_NEAR(got[i], n16[i], 1e-6f * std::max(1.0f, fabsf(n16[i]))) << i;
    EXPECT_EQ(mt19937_u32(&s), 2756748748u);
}

TEST(Mt19937, DrawCountsOfNormal) {
    for (size_t n : {1, 2, 3, 8, 15, 16, 17, 31, 32, 33, 1000}) {
        Mt19937State a, b;
        mt19937_seed(&a, 9);
        b = a;
        std::vector<float> v(n);
        mt19937_normal(v.data(), n, 0.0f, 1.0f, &a);
        for (uint64_t i = 0; i < mt19937_normal_draws(n); i++) mt19937_u32(&b);
        EXPECT_EQ(mt19937_u32(&a), mt19937_u32(&b)) << "n = " << n;
    }
    EXPECT_EQ(mt19937_normal_draws(15), 32u);
    EXPECT_EQ(mt19937_normal_draws(16), 16u);
    EXPECT_EQ(mt19937_normal_draws(17), 33u);
}

TEST(Mt19937, FillEqualsSingleDraws) {
    for (int before : {0, 1, 5, 623, 624, 625}) {
        for (size_t n : {0, 1, 600, 623, 624, 625, 5000}) {
            Mt19937State a, b;
            mt19937_seed(&a, 7);
            for (int i = 0; i < before; i++) mt19937_u32(&a);
            b = a;
            std::vector<float> x(n), y(n);
            for (size_t i = 0; i < n; i++) x[i] = mt19937_f32(&a);
            mt19937_fill_f32(&b, y.data(), n);
            ASSERT_EQ(first_diff(x.data(), y.data(), n), -1) << before << " " << n;
            ASSERT_EQ(0, memcmp(&a, &b, sizeof(a))) << before << " " << n;
        }
    }
    Mt19937State z = {};  // never seeded: seeded with 5489 first, as mt19937_u32 does
    float f;
    mt19937_fill_f32(&z, &f, 1);
    EXPECT_EQ(f, (float)(3499211612u & 0xFFFFFFu) / 16777216.0f);
}

// The polynomial jump against stepping, from fresh, mid-window and window-end states; the jumped state
// must be a valid one (it may be written to a state file) and continue the same stream.
TEST(Mt19937, JumpEqualsStepping) {
    for (uint64_t k : {0ull, 1ull, 2ull, 622ull, 623ull, 624ull, 625ull, 1248ull, 20000ull, 123457ull, 5000001ull}) {
        for (int before : {0, 1, 623, 624, 700}) {
            Mt19937State a, b, c;
            mt19937_seed(&a, 42);
            for (int i = 0; i < before; i++) mt19937_u32(&a);
            b = c = a;
            for (uint64_t i = 0; i < k; i++) mt19937_u32(&a);
            mt19937_jump_poly_(&b, k);
            mt19937_jump(&c, k);
            ASSERT_TRUE(mt19937_valid(b));
            for (int i = 0; i < 1500; i++) {
                const uint32_t want = mt19937_u32(&a);
                ASSERT_EQ(mt19937_u32(&b), want) << "k " << k << " before " << before << " draw " << i;
                ASSERT_EQ(mt19937_u32(&c), want) << "k " << k << " before " << before << " draw " << i;
            }
        }
    }
}

TEST(Mt19937, LongJumpMatchesStdMt19937) {
    // std::mt19937 is the same generator; discard() steps one by one
    std::mt19937 ref(2024);
    const uint64_t k = 100000000ull;
    ref.discard(k);
    Mt19937State s;
    mt19937_seed(&s, 2024);
    mt19937_jump(&s, k);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(mt19937_u32(&s), (uint32_t)ref()) << i;
}

// ------------------------------------------------------------------------------------------------
// the init

TEST(InitLlmc, ReferenceFileIsComplete) {
    const std::vector<RefCase> cases = load_reference();
    ASSERT_EQ(cases.size(), 7u) << "dev/test/data/init_llmc.bin is missing, truncated or not version 1";
    EXPECT_EQ(cases.back().desc, "d12");
}

// Every case of the reference file, both dtypes, on several threads: the same bits as llm.c.
TEST(InitLlmc, SameBitsAsLlmc) {
    const std::vector<RefCase> cases = load_reference();
    ASSERT_FALSE(cases.empty());
    for (const RefCase& rc : cases) {
        GPT2Config c{};
        ASSERT_TRUE(gpt2_config_from_descriptor(rc.desc.c_str(), &c)) << rc.desc;
        size_t sizes[NUM_PARAMETER_TENSORS];
        gpt2_param_sizes(c, sizes);
        const size_t n = gpt2_num_parameters(c);
        std::vector<float> p32(n, NAN);
        std::vector<uint16_t> p16(n, 0xFFFF);
        // small shapes: split into many shares (jumps inside tensors); d12: the trainer's default share
        const bool small = n < 10000000;
        gpt2_init_params_random(c, rc.seed, DType::FP32, p32.data(), small ? 5 : 2, small ? 1 : 1u << 23);
        gpt2_init_params_random(c, rc.seed, DType::BF16, p16.data(), 3, small ? 1 : 1u << 23);
        size_t off = 0;
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            const RefTensor& t = rc.tensors[i];
            const std::string what = rc.desc + " seed " + std::to_string(rc.seed) + " " + PARAMETER_TENSOR_NAMES[i];
            ASSERT_EQ(t.numel, sizes[i]) << what;
            std::vector<uint32_t> bits(sizes[i]);
            for (size_t j = 0; j < sizes[i]; j++) bits[j] = f32_bits(p32[off + j]);
            const long h32 = first_diff(bits.data(), t.head32.data(), t.head32.size());
            if (h32 >= 0) {
                float want;
                memcpy(&want, &t.head32[h32], 4);
                ADD_FAILURE() << what << ": fp32 value " << h32 << " is " << p32[off + h32] << ", llm.c's " << want;
            }
            const size_t tail_at = sizes[i] - t.tail32.size();
            const uint16_t* q16 = p16.data() + off;
            EXPECT_EQ(first_diff(bits.data() + tail_at, t.tail32.data(), t.tail32.size()), -1) << what << " fp32 last";
            EXPECT_EQ(first_diff(q16, t.head16.data(), t.head16.size()), -1) << what << " bf16 first values";
            EXPECT_EQ(first_diff(q16 + tail_at, t.tail16.data(), t.tail16.size()), -1) << what << " bf16 last values";
            EXPECT_EQ(fnv1a64(bits.data(), sizes[i] * 4), t.hash32) << what << ": fp32 tensor differs";
            EXPECT_EQ(fnv1a64(p16.data() + off, sizes[i] * 2), t.hash16) << what << ": bf16 tensor differs";
            off += sizes[i];
        }
    }
}

// Any thread count, any split (shares of one draw upwards), the plain sequential loop: the same bits.
TEST(InitLlmc, SameBitsForAnyThreadCount) {
    for (const char* desc : {"custom:L3,C10,NH2", "custom:L2,C3,NH1", "custom:L1,C1,NH1"}) {
        GPT2Config c{};
        ASSERT_TRUE(gpt2_config_from_descriptor(desc, &c));
        const size_t n = gpt2_num_parameters(c);
        for (uint32_t seed : {42u, 7u}) {
            const std::vector<float> ref = init_sequential(c, seed);
            for (int threads : {1, 2, 3, 8, 33}) {
                std::vector<float> got(n, NAN);
                gpt2_init_params_random(c, seed, DType::FP32, got.data(), threads, 1);
                ASSERT_EQ(0, memcmp(got.data(), ref.data(), n * sizeof(float))) << desc << " " << threads << " threads";
                std::vector<uint16_t> got16(n, 0xFFFF);
                gpt2_init_params_random(c, seed, DType::BF16, got16.data(), threads, 1);
                for (size_t i = 0; i < n; i++) ASSERT_EQ(got16[i], float_to_bf16_rne(ref[i])) << desc << " " << i;
            }
        }
    }
}

TEST(InitLlmc, ThreadsUsedFollowTheShare) {
    GPT2Config c{};
    ASSERT_TRUE(gpt2_config_from_descriptor("custom:L1,C1,NH1", &c));
    std::vector<float> p(gpt2_num_parameters(c));
    EXPECT_EQ(gpt2_init_params_random(c, 42, DType::FP32, p.data(), 16), 1);  // 51K draws: one worker
    EXPECT_EQ(gpt2_init_params_random(c, 42, DType::FP32, p.data(), 4, 1000), 4);
    EXPECT_EQ(gpt2_init_params_random(c, 42, DType::FP32, p.data(), 0, 1), 1);
}

// What GPT-2 asks for, and that the seed matters.
TEST(InitLlmc, StatisticsAndSeed) {
    GPT2Config c{};
    ASSERT_TRUE(gpt2_config_from_descriptor("custom:L2,C128,NH2", &c));
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    std::vector<float> p(gpt2_num_parameters(c));
    gpt2_init_params_random(c, 42, DType::FP32, p.data(), 2, 1);
    size_t off[NUM_PARAMETER_TENSORS + 1] = {0};
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) off[i + 1] = off[i] + sizes[i];
    auto rms = [&](size_t a, size_t b) {
        double s2 = 0;
        for (size_t j = a; j < b; j++) s2 += (double)p[j] * p[j];
        return sqrt(s2 / (b - a));
    };
    const size_t real = (size_t)c.vocab_size * c.channels;
    EXPECT_NEAR(rms(0, real), 0.02, 0.0002);
    for (size_t j = real; j < sizes[PARAM_WTE]; j++) ASSERT_EQ(p[j], 0.0f);
    EXPECT_NEAR(rms(off[PARAM_FCPROJW], off[PARAM_FCPROJW + 1]), 0.02 / sqrt(4.0), 0.0002);
    for (int i : {PARAM_LN1W, PARAM_LN2W, PARAM_LNFW}) {
        for (size_t j = off[i]; j < off[i + 1]; j++) ASSERT_EQ(p[j], 1.0f);
    }
    for (int i : {PARAM_LN1B, PARAM_QKVB, PARAM_ATTPROJB, PARAM_LN2B, PARAM_FCB, PARAM_FCPROJB, PARAM_LNFB}) {
        for (size_t j = off[i]; j < off[i + 1]; j++) ASSERT_EQ(p[j], 0.0f);
    }
    std::vector<float> q(p.size());
    gpt2_init_params_random(c, 43, DType::FP32, q.data(), 2, 1);
    EXPECT_NE(p[0], q[0]);
}
