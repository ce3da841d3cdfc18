/*
 * GPT-2 model files on the host (no CUDA): the configuration, the parameter layout shared by the
 * checkpoint and the GPU buffers, checkpoint read/write. (The GPU test's reference file, the debug
 * state, is read by dev/test/debug_state.h.)
 *
 * Checkpoint (docs/formats.md "Model checkpoint", 20240326): 256 x int32 header, then the 16 parameter tensors back to
 * back in checkpoint order (gpt2_param_sizes), fp32 (version 3) or raw bf16 bits (version 5).
 * Reads convert to the dtype the caller wants; fp32 -> bf16 rounds to nearest even, so a v5 file
 * written from fp32 parameters holds exactly what model_file_read_params(.., BF16) gives for the v3 file.
 * Start-up checks: model_file_read_header (magic, version, every header field with its range, Vp a
 * multiple of 8, the size) and model_file_check_finite (one pass over the weights: no NaN or inf).
 */
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "llmc/file_header.h"  // the magics and versions
#include "llmc/gpt2_vocab.h"
#include "llmc/rand.h"
#include "llmc/utils.h"

static_assert(sizeof(float) == 4 && sizeof(int) == 4, "files store fp32 and int32");
static_assert(sizeof(uint16_t) == 2, "bf16 is stored as 16 raw bits");
static_assert(FILE_HEADER_BYTES == 1024, "every file starts with 256 x int32");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "files are little-endian; no byte swapping here");

struct GPT2Config {
    int max_seq_len;        // maxT, 1024 for GPT-2
    int vocab_size;         // V (GPT-2: GPT2_VOCAB_SIZE, llmc/gpt2_vocab.h)
    int padded_vocab_size;  // Vp, V rounded up to a multiple of 128 (GPT-2: GPT2_PADDED_VOCAB_SIZE)
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
};
static_assert(sizeof(GPT2Config) == 6 * sizeof(int), "GPT2Config is six ints");

constexpr int NUM_PARAMETER_TENSORS = 16;

// The parameter tensors by name, in checkpoint order: the index of each in PARAMETER_TENSOR_NAMES,
// gpt2_param_sizes and the GPU structs (llmc/gpt2.cuh). The 12 from PARAM_LN1W to PARAM_FCPROJB are
// stacked over the L layers, layer-major.
enum ParamTensor : int {
    PARAM_WTE, PARAM_WPE,
    PARAM_LN1W, PARAM_LN1B, PARAM_QKVW, PARAM_QKVB, PARAM_ATTPROJW, PARAM_ATTPROJB,
    PARAM_LN2W, PARAM_LN2B, PARAM_FCW, PARAM_FCB, PARAM_FCPROJW, PARAM_FCPROJB,
    PARAM_LNFW, PARAM_LNFB,
};
static_assert(PARAM_LNFB + 1 == NUM_PARAMETER_TENSORS, "one enum value per parameter tensor");
constexpr int PARAM_FIRST_LAYER_TENSOR = PARAM_LN1W;
constexpr int NUM_LAYER_TENSORS = PARAM_FCPROJB - PARAM_LN1W + 1;  // 12 per transformer block
// Tensor i is one of the NUM_LAYER_TENSORS stacked over layers, (L, ...).
constexpr bool param_tensor_is_per_layer(int i) {
    return i >= PARAM_FIRST_LAYER_TENSOR && i < PARAM_FIRST_LAYER_TENSOR + NUM_LAYER_TENSORS;
}

// Names in checkpoint order; shapes beside them.
inline constexpr const char* PARAMETER_TENSOR_NAMES[NUM_PARAMETER_TENSORS] = {
    "wte",       // (Vp, C)
    "wpe",       // (maxT, C)
    "ln1w",      // (L, C)
    "ln1b",      // (L, C)
    "qkvw",      // (L, 3C, C)
    "qkvb",      // (L, 3C)
    "attprojw",  // (L, C, C)
    "attprojb",  // (L, C)
    "ln2w",      // (L, C)
    "ln2b",      // (L, C)
    "fcw",       // (L, 4C, C)
    "fcb",       // (L, 4C)
    "fcprojw",   // (L, C, 4C)
    "fcprojb",   // (L, C)
    "lnfw",      // (C)
    "lnfb",      // (C)
};

enum class DType { FP32, BF16 };

inline size_t dtype_size(DType t) { return t == DType::FP32 ? 4 : 2; }

// ----------------------------------------------------------------------------
// bf16 <-> fp32

// Round to nearest, ties to even. NaN stays NaN (sign kept, made quiet); overflow rounds to inf.
inline uint16_t float_to_bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        return static_cast<uint16_t>((u >> 16) | 0x0040u);
    }
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// Copies n elements converting between dtypes (plain copy when they agree).
inline void convert_params(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
    if (src_type == dst_type) {
        memcpy(dst, src, n * dtype_size(src_type));
    } else if (src_type == DType::FP32) {
        const float* s = static_cast<const float*>(src);
        uint16_t* d = static_cast<uint16_t*>(dst);
        for (size_t i = 0; i < n; i++) d[i] = float_to_bf16_rne(s[i]);
    } else {
        const uint16_t* s = static_cast<const uint16_t*>(src);
        float* d = static_cast<float*>(dst);
        for (size_t i = 0; i < n; i++) d[i] = bf16_to_float(s[i]);
    }
}

// ----------------------------------------------------------------------------
// configuration and parameter layout

constexpr int GPT2_MAX_SEQ_LEN = 1024;
// GPT-2's shapes by depth, as GPT-2 and llm.c define them: a table, not a formula (head size 64 in all;
// d6 is llm.c's small test shape, d60-d84 its larger extrapolations). Parameters with Vp = 50304:
// d12 124,475,904; d24 354,871,296; d36 774,090,240; d48 1,557,686,400.
struct GPT2Shape {
    int depth;     // L, the N of "dN"
    int channels;  // C
    int heads;     // NH
};
inline constexpr GPT2Shape GPT2_SHAPES[] = {
    {6, 384, 6}, {12, 768, 12}, {24, 1024, 16}, {36, 1280, 20},
    {48, 1600, 25}, {60, 1920, 30}, {72, 2880, 30}, {84, 3456, 36},
};

// GPT-3's shapes by width, as llm.c's gpt3_set_hyperparameters defines them (descriptor "gpt3:cC"):
// depth and head size per channel count, NH = C / head size, maxT 2048, the GPT-2 vocabulary; dense
// attention everywhere (GPT-3 alternates dense and banded layers). c384 is llm.c's unofficial tiny one.
// llm.c lists c5140 (GPT-3 13B, as the GPT-3 paper's table prints it) with head size 128, which does
// not divide 5140: llm.c stops on an assert, here it is refused with a message.
struct GPT3Shape {
    int channels;   // C, the N of "gpt3:cN"
    int depth;      // L
    int head_size;  // C / NH
};
inline constexpr GPT3Shape GPT3_SHAPES[] = {
    {384, 6, 64}, {768, 12, 64}, {1024, 24, 64}, {1536, 24, 96}, {2048, 24, 128},
    {2560, 32, 80}, {4096, 32, 128}, {5140, 40, 128}, {12288, 96, 128},
};
constexpr int GPT3_MAX_SEQ_LEN = 2048;

// "d6, d12, ..., d84": the valid depths, for error messages.
inline std::string gpt2_descriptor_list() {
    std::string s;
    for (const GPT2Shape& g : GPT2_SHAPES) s += (s.empty() ? "d" : ", d") + std::to_string(g.depth);
    return s;
}

// "c384, c768, ...": the GPT-3 widths that make a model, for error messages.
inline std::string gpt3_descriptor_list() {
    std::string s;
    for (const GPT3Shape& g : GPT3_SHAPES) {
        if (g.channels % g.head_size == 0) s += (s.empty() ? "gpt3:c" : ", gpt3:c") + std::to_string(g.channels);
    }
    return s;
}

inline void gpt2_config_set_shape(GPT2Config* cfg, int layers, int channels, int heads) {
    cfg->max_seq_len = GPT2_MAX_SEQ_LEN;
    cfg->vocab_size = GPT2_VOCAB_SIZE;
    cfg->padded_vocab_size = GPT2_PADDED_VOCAB_SIZE;
    cfg->num_layers = layers;
    cfg->num_heads = heads;
    cfg->channels = channels;
}

inline std::string gpt2_config_problem(const GPT2Config& c);

// Parses the decimal number at *p (0..999999, at most 6 digits) and advances p; -1 when there is none.
inline int descriptor_number_(const char** p) {
    size_t n = strspn(*p, "0123456789");
    if (n == 0 || n > 6) return -1;
    int v = atoi(*p);
    *p += n;
    return v;
}

// Model descriptors of -e (and train_gpt2.py --model), with the GPT-2 vocabulary and maxT 1024:
//   "dN" or "gpt2:dN"            a row of GPT2_SHAPES (d12 = GPT-2 124M, ..., d48 = 1558M)
//   "gpt3:cN"                    a row of GPT3_SHAPES (llm.c's GPT-3 shapes, maxT 2048)
//   "custom:L<n>,C<n>,NH<n>"     any other shape, e.g. custom:L2,C1600,NH25 (tests, experiments)
// Returns false when desc does not look like a descriptor (it is then a checkpoint path); a malformed
// "gpt2:" / "gpt3:" / "custom:" descriptor, or a dN / cN outside the tables, is fatal() with the valid ones.
inline bool gpt2_config_from_descriptor(const char* desc, GPT2Config* cfg) {
    const char* d = desc;
    if (strncmp(d, "gpt3:", 5) == 0) {
        const char* p = d + 5;
        int C = -1;
        if (p[0] == 'c' && p[1] != '0') {  // no leading zeros: one spelling per model
            p++;
            C = descriptor_number_(&p);
        }
        for (const GPT3Shape& g : GPT3_SHAPES) {
            if (C != g.channels || *p != '\0') continue;
            if (g.channels % g.head_size != 0) {
                fatal("-e %s: llm.c's GPT-3 table gives C=%d head size %d, which does not divide it (llm.c stops "
                      "on an assert too); valid: %s", desc, g.channels, g.head_size, gpt3_descriptor_list().c_str());
            }
            gpt2_config_set_shape(cfg, g.depth, g.channels, g.channels / g.head_size);
            cfg->max_seq_len = GPT3_MAX_SEQ_LEN;
            return true;
        }
        fatal("-e %s: unknown GPT-3 descriptor; valid: %s (llm.c's GPT-3 shapes by width, maxT 2048)", desc,
              gpt3_descriptor_list().c_str());
    }
    if (strncmp(d, "custom:", 7) == 0) {
        const char* p = d + 7;
        int L = -1, C = -1, NH = -1;
        if (*p == 'L') { p++; L = descriptor_number_(&p); }
        if (L >= 0 && strncmp(p, ",C", 2) == 0) { p += 2; C = descriptor_number_(&p); }
        if (C >= 0 && strncmp(p, ",NH", 3) == 0) { p += 3; NH = descriptor_number_(&p); }
        if (NH < 0 || *p != '\0') {  // well-formed zeros are refused below, naming the field
            fatal("-e %s: malformed custom shape; write custom:L<layers>,C<channels>,NH<heads>, "
                  "e.g. custom:L2,C1600,NH25", desc);
        }
        gpt2_config_set_shape(cfg, L, C, NH);
        std::string problem = gpt2_config_problem(*cfg);
        if (!problem.empty()) fatal("-e %s: %s", desc, problem.c_str());
        return true;
    }
    bool prefixed = strncmp(d, "gpt2:", 5) == 0;
    if (prefixed) d += 5;
    size_t ndigits = strlen(d) > 1 ? strspn(d + 1, "0123456789") : 0;
    bool shaped = d[0] == 'd' && ndigits > 0 && d[1 + ndigits] == '\0';
    if (!prefixed && !shaped) return false;
    int depth = (shaped && ndigits <= 3) ? atoi(d + 1) : 0;
    for (const GPT2Shape& g : GPT2_SHAPES) {
        if (g.depth == depth) {
            gpt2_config_set_shape(cfg, g.depth, g.channels, g.heads);
            return true;
        }
    }
    fatal("-e %s: unknown model descriptor; valid: %s (or gpt2:dN; d12 = GPT-2 124M, d24 = 350M, "
          "d36 = 774M, d48 = 1558M), gpt3:cN (%s), custom:L<layers>,C<channels>,NH<heads>, or a checkpoint file",
          desc, gpt2_descriptor_list().c_str(), gpt3_descriptor_list().c_str());
}

// The kernels read rows of the (Vp, C) embedding / logits 16 bytes at a time (x128: 8 bf16 or 4 fp32
// values): Vp must be a multiple of 8, in both builds, so that a model file loads in either.
constexpr int GPT2_PADDED_VOCAB_MULTIPLE = 8;

// Empty string when the config is usable, else what is wrong with it, naming the field and its value.
// Bounds keep every size below 2^62 elements, so products in size_t never overflow.
inline std::string gpt2_config_problem(const GPT2Config& c) {
    char buf[160];
    auto outside = [&](const char* field, int v, long lo, long hi) {
        snprintf(buf, sizeof(buf), "%s=%d is outside [%ld, %ld]", field, v, lo, hi);
        return std::string(buf);
    };
    if (c.max_seq_len < 1 || c.max_seq_len > (1 << 20)) return outside("max_seq_len maxT", c.max_seq_len, 1, 1 << 20);
    if (c.vocab_size < 1 || c.vocab_size > (1 << 24)) return outside("vocab_size V", c.vocab_size, 1, 1 << 24);
    if (c.padded_vocab_size < c.vocab_size) {
        snprintf(buf, sizeof(buf), "padded_vocab_size Vp=%d is smaller than vocab_size V=%d", c.padded_vocab_size,
                 c.vocab_size);
        return buf;
    }
    if (c.padded_vocab_size > (1 << 24)) return outside("padded_vocab_size Vp", c.padded_vocab_size, c.vocab_size, 1 << 24);
    if (c.padded_vocab_size % GPT2_PADDED_VOCAB_MULTIPLE != 0) {
        snprintf(buf, sizeof(buf), "padded_vocab_size Vp=%d is not a multiple of %d (the kernels read its rows 16 "
                 "bytes at a time)", c.padded_vocab_size, GPT2_PADDED_VOCAB_MULTIPLE);
        return buf;
    }
    if (c.num_layers < 1 || c.num_layers > 1024) return outside("num_layers L", c.num_layers, 1, 1024);
    if (c.channels < 1 || c.channels > (1 << 16)) return outside("channels C", c.channels, 1, 1 << 16);
    if (c.num_heads < 1 || c.num_heads > c.channels) return outside("num_heads NH", c.num_heads, 1, c.channels);
    if (c.channels % c.num_heads != 0) {
        snprintf(buf, sizeof(buf), "channels C=%d is not divisible by num_heads NH=%d", c.channels, c.num_heads);
        return buf;
    }
    return "";
}

// Element counts of the 16 tensors in checkpoint order (shapes in PARAMETER_TENSOR_NAMES).
inline void gpt2_param_sizes(const GPT2Config& cfg, size_t sizes[NUM_PARAMETER_TENSORS]) {
    size_t Vp = cfg.padded_vocab_size, maxT = cfg.max_seq_len, L = cfg.num_layers, C = cfg.channels;
    sizes[PARAM_WTE] = Vp * C;
    sizes[PARAM_WPE] = maxT * C;
    sizes[PARAM_LN1W] = L * C;
    sizes[PARAM_LN1B] = L * C;
    sizes[PARAM_QKVW] = L * 3 * C * C;
    sizes[PARAM_QKVB] = L * 3 * C;
    sizes[PARAM_ATTPROJW] = L * C * C;
    sizes[PARAM_ATTPROJB] = L * C;
    sizes[PARAM_LN2W] = L * C;
    sizes[PARAM_LN2B] = L * C;
    sizes[PARAM_FCW] = L * 4 * C * C;
    sizes[PARAM_FCB] = L * 4 * C;
    sizes[PARAM_FCPROJW] = L * C * 4 * C;
    sizes[PARAM_FCPROJB] = L * C;
    sizes[PARAM_LNFW] = C;
    sizes[PARAM_LNFB] = C;
}

inline size_t gpt2_num_parameters(const GPT2Config& cfg) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) total += sizes[i];
    return total;
}

// The tensors that get weight decay and a random init: wte, wpe, qkvw, attprojw, fcw, fcprojw.
inline bool param_tensor_is_2d(int i) {
    return i == PARAM_WTE || i == PARAM_WPE || i == PARAM_QKVW || i == PARAM_ATTPROJW || i == PARAM_FCW ||
           i == PARAM_FCPROJW;
}

// One normal draw of llm.c's random init: n values N(0, std) written at element `at` of the parameters,
// from the init stream's draw `first_draw` on (mt19937_normal_draws(n) draws).
struct InitDraw {
    size_t at;
    size_t n;
    float std;
    uint64_t first_draw;
};

// llm.c's gpt2_build_from_random order: wte (its V real rows only), wpe, then layer by layer qkvw,
// attprojw, fcw, fcprojw. Residual projections (attprojw, fcprojw) get 0.02 * (1 / sqrtf(2L)), computed
// as llm.c does in float.
inline std::vector<InitDraw> gpt2_init_draws(const GPT2Config& c) {
    size_t sizes[NUM_PARAMETER_TENSORS], offsets[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    for (size_t i = 0, off = 0; i < NUM_PARAMETER_TENSORS; off += sizes[i], i++) offsets[i] = off;
    const size_t L = c.num_layers;
    const float residual_scale = 1.0f / sqrtf(2.0f * c.num_layers);
    std::vector<InitDraw> draws;
    uint64_t next = 0;
    auto add = [&](size_t at, size_t n, float std) {
        draws.push_back({at, n, std, next});
        next += mt19937_normal_draws(n);
    };
    add(offsets[PARAM_WTE], (size_t)c.vocab_size * c.channels, 0.02f);
    add(offsets[PARAM_WPE], sizes[PARAM_WPE], 0.02f);
    for (size_t l = 0; l < L; l++) {
        for (int i : {PARAM_QKVW, PARAM_ATTPROJW, PARAM_FCW, PARAM_FCPROJW}) {
            const size_t n = sizes[i] / L;
            add(offsets[i] + l * n, n, i == PARAM_ATTPROJW || i == PARAM_FCPROJW ? 0.02f * residual_scale : 0.02f);
        }
    }
    return draws;
}

// llm.c's random initialisation (gpt2_build_from_random; docs/formats.md "Random initialisation"), bit for bit: mt19937 seeded with `seed` (llm.c
// always uses 42), llm.c's normal_ (mt19937_normal) for each of gpt2_init_draws in order; LayerNorm
// weights 1; biases and wte's padded rows 0; every value converted to `dtype` (bf16: round to nearest
// even, as llm.c's (floatX) cast). Written to out in checkpoint order; returns the threads used.
//
// Parallel, with the same bits for any thread count: every value's draws sit at a known position of the
// one stream, so each of `threads` workers jumps its generator (mt19937_jump) to the start of its share
// (whole blocks of 16 draws) and draws and transforms from there. The 16 redrawn values of a tensor whose
// size is not a multiple of 16, and the small (< 16) tensors, overwrite or fill after all workers are done.
// min_share: the fewest draws worth a worker of their own (a jump costs ~0.05 s); tests lower it.
inline int gpt2_init_params_random(const GPT2Config& c, uint64_t seed, DType dtype, void* out, int threads,
                                   uint64_t min_share = 1u << 23) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(c, sizes);
    auto store = [dtype, out](size_t at, const float* v, size_t n) {
        if (dtype == DType::FP32) {
            memcpy(static_cast<float*>(out) + at, v, n * sizeof(float));
        } else {
            uint16_t* d = static_cast<uint16_t*>(out) + at;
            for (size_t i = 0; i < n; i++) d[i] = float_to_bf16_rne(v[i]);
        }
    };
    // the constant parts: LayerNorm weights 1, biases 0, wte's padded rows 0
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        size_t begin = 0;  // the first element not drawn
        if (i == PARAM_WTE) begin = (size_t)c.vocab_size * c.channels;
        else if (param_tensor_is_2d(i)) begin = sizes[i];
        const float v = (i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW) ? 1.0f : 0.0f;
        if (dtype == DType::FP32) std::fill_n(static_cast<float*>(out) + off + begin, sizes[i] - begin, v);
        else std::fill_n(static_cast<uint16_t*>(out) + off + begin, sizes[i] - begin, float_to_bf16_rne(v));
        off += sizes[i];
    }

    const std::vector<InitDraw> draws = gpt2_init_draws(c);
    const uint64_t total = draws.back().first_draw + mt19937_normal_draws(draws.back().n);
    // A work unit is a block of 16 values (16 draws), the redrawn last 16 of a tensor (unit n / 16, drawn
    // after the n % 16 uniforms of the partial block, which are never used), or a whole tensor of fewer
    // than 16 values.
    auto units = [](const InitDraw& d) { return d.n < 16 ? 1 : d.n / 16 + (d.n % 16 != 0); };
    struct Pos { size_t draw, unit; };
    auto first_draw_of = [&](Pos p) {  // the redrawn last 16 follow all n uniforms of the tensor
        if (p.draw == draws.size()) return total;
        const InitDraw& d = draws[p.draw];
        return d.first_draw + (d.n >= 16 && p.unit == d.n / 16 ? d.n : 16 * p.unit);
    };
    // the first unit starting at or after draw position `target`
    auto pos_at = [&](uint64_t target) {
        auto later = [](uint64_t t, const InitDraw& d) { return t < d.first_draw; };
        const size_t k = std::upper_bound(draws.begin(), draws.end(), target, later) - draws.begin() - 1;
        const size_t u = (size_t)((target - draws[k].first_draw + 15) / 16);
        return u < units(draws[k]) ? Pos{k, u} : Pos{k + 1, 0};
    };
    const uint64_t most = total / std::max<uint64_t>(min_share, 1);
    threads = (int)std::max<uint64_t>(1, std::min<uint64_t>(std::max(threads, 1), most));
    std::vector<Pos> starts;
    for (int t = 0; t < threads; t++) starts.push_back(pos_at(total * t / threads));
    starts.push_back(Pos{draws.size(), 0});
    std::vector<std::array<float, 16>> last16(draws.size());  // redrawn tails and small tensors

    auto work = [&](Pos from, Pos to) {
        if (first_draw_of(from) >= first_draw_of(to)) return;
        Mt19937State s;
        mt19937_seed(&s, (uint32_t)seed);
        mt19937_jump(&s, first_draw_of(from));
        constexpr size_t BATCH = 64;  // blocks drawn and transformed at a time
        float buf[16 * BATCH];
        for (size_t k = from.draw; k < draws.size() && k <= to.draw; k++) {
            const InitDraw& d = draws[k];
            const size_t u0 = k == from.draw ? from.unit : 0, u1 = k == to.draw ? to.unit : units(d);
            if (u0 >= u1) continue;
            if (d.n < 16) {
                mt19937_normal(last16[k].data(), d.n, 0.0f, d.std, &s);
                continue;
            }
            const size_t full = std::min(u1, d.n / 16);
            for (size_t u = u0; u < full; u += BATCH) {
                const size_t nb = std::min(BATCH, full - u);
                mt19937_fill_f32(&s, buf, 16 * nb);
                for (size_t b = 0; b < nb; b++) mt19937_normal_block16(buf + 16 * b, 0.0f, d.std);
                store(d.at + 16 * u, buf, 16 * nb);
            }
            if (u1 > d.n / 16) {  // the redrawn last 16
                if (u0 < d.n / 16) mt19937_jump(&s, d.n % 16);  // the uniforms of the partial block
                mt19937_fill_f32(&s, last16[k].data(), 16);
                mt19937_normal_block16(last16[k].data(), 0.0f, d.std);
            }
        }
    };
    if (threads == 1) {
        work(starts[0], starts[1]);
    } else {
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; t++) pool.emplace_back(work, starts[t], starts[t + 1]);
        for (std::thread& t : pool) t.join();
    }
    for (size_t k = 0; k < draws.size(); k++) {
        const InitDraw& d = draws[k];
        if (d.n < 16) store(d.at, last16[k].data(), d.n);
        else if (d.n % 16 != 0) store(d.at + d.n - 16, last16[k].data(), 16);
    }
    return threads;
}

// ----------------------------------------------------------------------------
// checkpoint read / write

struct ModelFileInfo {
    GPT2Config cfg;
    int version;  // 3 (fp32) or 5 (bf16)
};

inline DType model_file_dtype(int version) { return version == MODEL_FILE_VERSION_FP32 ? DType::FP32 : DType::BF16; }

// The one check of a sequence length (-t) against a model's configuration.
inline void gpt2_check_seq_len(const GPT2Config& cfg, int T) {
    if (T > cfg.max_seq_len) fatal("-t %d is larger than the model's max sequence length %d", T, cfg.max_seq_len);
}

inline size_t model_file_expected_bytes(const ModelFileInfo& info) {
    return FILE_HEADER_BYTES + gpt2_num_parameters(info.cfg) * dtype_size(model_file_dtype(info.version));
}

inline ModelFileInfo model_file_read_header(const char* path) {
    int32_t h[FILE_HEADER_INTS];
    long size = 0;
    file_header_read(path, MODEL_FILE_MAGIC, h, &size);
    ModelFileInfo info;
    info.version = h[1];
    info.cfg.max_seq_len = h[2];
    info.cfg.vocab_size = h[3];
    info.cfg.num_layers = h[4];
    info.cfg.num_heads = h[5];
    info.cfg.channels = h[6];
    info.cfg.padded_vocab_size = h[7];
    std::string problem = gpt2_config_problem(info.cfg);
    if (!problem.empty()) {
        fatal("model file '%s' has a bad header: %s (maxT=%d V=%d Vp=%d L=%d NH=%d C=%d)", path, problem.c_str(),
              h[2], h[3], h[7], h[4], h[5], h[6]);
    }
    char says[96];
    snprintf(says, sizeof(says), "v%d, L=%d C=%d Vp=%d", info.version, info.cfg.num_layers, info.cfg.channels,
             info.cfg.padded_vocab_size);
    file_size_check(path, MODEL_FILE_MAGIC, size, model_file_expected_bytes(info), says);
    return info;
}

// Streams the file through a bounded buffer so a conversion never needs a second full-size copy.
constexpr size_t MODEL_FILE_CHUNK_ELEMS = 1 << 20;

inline void model_file_read_params(const char* path, const ModelFileInfo& info, void* dst, DType want) {
    if (info.version != MODEL_FILE_VERSION_FP32 && info.version != MODEL_FILE_VERSION_BF16) {
        fatal("'%s': unsupported model file version %d (expected 3 = fp32 or 5 = bf16)", path, info.version);
    }
    DType have = model_file_dtype(info.version);
    size_t n = gpt2_num_parameters(info.cfg);
    FilePtr file(fopen_check(path, "rb"));
    FILE* fp = file.get();
    long size = file_size_of(fp, path);
    if (static_cast<size_t>(size) != model_file_expected_bytes(info)) {
        fatal("'%s' changed size since its header was read (%ld bytes, expected %zu)", path, size,
              model_file_expected_bytes(info));
    }
    fseek_check(fp, static_cast<long>(FILE_HEADER_BYTES), SEEK_SET, path);
    if (have == want) {
        fread_check(dst, dtype_size(have), n, fp, path);
    } else {
        std::vector<char> buf(MODEL_FILE_CHUNK_ELEMS * dtype_size(have));
        char* out = static_cast<char*>(dst);
        for (size_t done = 0; done < n; done += MODEL_FILE_CHUNK_ELEMS) {
            size_t k = std::min(MODEL_FILE_CHUNK_ELEMS, n - done);
            fread_check(buf.data(), dtype_size(have), k, fp, path);
            convert_params(buf.data(), have, out + done * dtype_size(want), want, k);
        }
    }
    fclose_check(file.release(), path);
}

// Where flat parameter index i (checkpoint order) lies: "element 5 of layer 3's qkvw" / "element 7 of wte".
inline std::string gpt2_param_position(const GPT2Config& cfg, size_t i) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    int t = 0;
    while (t + 1 < NUM_PARAMETER_TENSORS && i >= sizes[t]) i -= sizes[t++];
    char buf[96];
    if (param_tensor_is_per_layer(t)) {
        const size_t per_layer = sizes[t] / cfg.num_layers;
        snprintf(buf, sizeof(buf), "element %zu of layer %zu's %s", i % per_layer, i / per_layer, PARAMETER_TENSOR_NAMES[t]);
    } else {
        snprintf(buf, sizeof(buf), "element %zu of %s", i, PARAMETER_TENSOR_NAMES[t]);
    }
    return buf;
}

// NaN and inf are the values whose magnitude bits a reach infinity's (exponent all ones): then
// a + (the lowest exponent bit) carries into the sign bit. OR-ing that over the buffer is branch-free
// integer work that vectorises to memory speed; the position is looked up only when there is one.
// Bits: uint16_t (bf16) or uint32_t (fp32); kMagnitude masks all but the sign, kExponent1 is the lowest
// exponent bit.
template <class Bits, Bits kMagnitude, Bits kExponent1>
inline size_t first_non_finite_(const unsigned char* p, size_t n) {
    constexpr Bits kSign = (Bits)~kMagnitude;
    auto at = [p](size_t i) { Bits u; memcpy(&u, p + sizeof(Bits) * i, sizeof(Bits)); return u; };  // no aliasing
    auto carried = [](Bits u) { return (Bits)((u & kMagnitude) + kExponent1); };  // sign bit set: NaN or inf
    Bits acc = 0;
    for (size_t i = 0; i < n; i++) acc |= carried(at(i));
    if ((acc & kSign) == 0) return n;
    size_t i = 0;
    while ((carried(at(i)) & kSign) == 0) i++;
    return i;
}

// Index of the first NaN or inf among n values of type `type`, n if none.
inline size_t first_non_finite(const void* data, DType type, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    if (type == DType::BF16) return first_non_finite_<uint16_t, 0x7FFFu, 0x0080u>(p, n);
    return first_non_finite_<uint32_t, 0x7FFFFFFFu, 0x00800000u>(p, n);
}

// Start-up check of a model file whose header model_file_read_header accepted: every parameter finite.
// A run never saves NaN or inf weights (it stops on a non-finite loss or norm first), so one is damage;
// on the GPU it would only show as a NaN loss at the first step. Reads the body once in chunks of
// MODEL_FILE_CHUNK_ELEMS; fatal() naming the file, the tensor, the layer and the element.
inline void model_file_check_finite(const char* path, const ModelFileInfo& info) {
    const DType have = model_file_dtype(info.version);
    const size_t n = gpt2_num_parameters(info.cfg);
    FILE* fp = fopen_check(path, "rb");
    fseek_check(fp, static_cast<long>(FILE_HEADER_BYTES), SEEK_SET, path);
    std::vector<char> buf(MODEL_FILE_CHUNK_ELEMS * dtype_size(have));
    for (size_t done = 0; done < n; done += MODEL_FILE_CHUNK_ELEMS) {
        const size_t k = std::min(MODEL_FILE_CHUNK_ELEMS, n - done);
        fread_check(buf.data(), dtype_size(have), k, fp, path);
        const size_t bad = first_non_finite(buf.data(), have, k);
        if (bad == k) continue;
        float value;
        if (have == DType::BF16) {
            uint16_t b;
            memcpy(&b, buf.data() + 2 * bad, 2);
            value = bf16_to_float(b);
        } else {
            memcpy(&value, buf.data() + 4 * bad, 4);
        }
        fatal("model file '%s' holds %g at %s (parameter %zu of %zu): the file is damaged (a run never saves "
              "NaN or inf weights)", path, value, gpt2_param_position(info.cfg, done + bad).c_str(), done + bad, n);
    }
    fclose_check(fp, path);
}

inline void model_file_write(const char* path, const GPT2Config& cfg, const void* params, DType have, int version) {
    if (version != MODEL_FILE_VERSION_FP32 && version != MODEL_FILE_VERSION_BF16) {
        fatal("cannot write '%s': model file version %d, expected 3 (fp32) or 5 (bf16)", path, version);
    }
    std::string problem = gpt2_config_problem(cfg);
    if (!problem.empty()) fatal("cannot write '%s': bad config (%s)", path, problem.c_str());
    int32_t h[FILE_HEADER_INTS] = {};
    h[0] = MODEL_FILE_MAGIC;
    h[1] = version;
    h[2] = cfg.max_seq_len;
    h[3] = cfg.vocab_size;
    h[4] = cfg.num_layers;
    h[5] = cfg.num_heads;
    h[6] = cfg.channels;
    h[7] = cfg.padded_vocab_size;
    DType out = model_file_dtype(version);
    size_t n = gpt2_num_parameters(cfg);
    AtomicFile f = atomic_file_open(path);
    fwrite_check(h, sizeof(int32_t), FILE_HEADER_INTS, f.fp, f.tmp_path.c_str());
    if (have == out) {
        fwrite_check(params, dtype_size(out), n, f.fp, f.tmp_path.c_str());
    } else {
        std::vector<char> buf(MODEL_FILE_CHUNK_ELEMS * dtype_size(out));
        const char* in = static_cast<const char*>(params);
        for (size_t done = 0; done < n; done += MODEL_FILE_CHUNK_ELEMS) {
            size_t k = std::min(MODEL_FILE_CHUNK_ELEMS, n - done);
            convert_params(in + done * dtype_size(have), have, buf.data(), out, k);
            fwrite_check(buf.data(), dtype_size(out), k, f.fp, f.tmp_path.c_str());
        }
    }
    atomic_file_commit(f);
}
