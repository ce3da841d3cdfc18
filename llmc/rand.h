/*
 * Small deterministic host RNGs (no CUDA needed).
 *
 * 1. xorshift* (Marsaglia's xorshift64 followed by a 64-bit multiply, after Vigna) with the whole
 *    state in one uint64_t, so it can be saved in the run-state file (slots 20-23) and restored
 *    exactly. Used for the per-tensor stochastic-rounding seeds of the update and the sampler. The
 *    state must never be 0 (xorshift would then only produce 0); rng_seed() guarantees that.
 *
 *   uint64_t rng_seed(uint64_t a, uint64_t b = 0)   well-mixed non-zero state from one or two values
 *                                                    (e.g. seed and epoch); splitmix64 finaliser
 *   uint32_t random_u32(uint64_t* state)            next 32 random bits, advances *state
 *   float    random_f32(uint64_t* state)            uniform in [0, 1), 24 random bits
 *   uint32_t random_below(uint64_t* state, uint32_t n)   uniform integer in [0, n), n > 0
 *
 * 2. MT19937 (Matsumoto and Nishimura's Mersenne Twister, 32-bit), with exactly the behaviour and the
 *    in-memory layout of llm.c's llmc/rand.h (karpathy/llm.c f1e2ace), which follows PyTorch's CPU
 *    generator: the data loader shuffles with it as llm.c does, and the run-state file stores the raw
 *    struct (2,520 bytes), so llm.c and we read each other's shuffled state files.
 *
 *   struct Mt19937State                              seed_ (u64), left_ (i32), next_ (u32),
 *                                                    state_[624] (u32), matrix_a_[2] (u32); no padding
 *   void     mt19937_seed(Mt19937State*, uint32_t seed)   llm.c's manual_seed (init_genrand); also
 *                                                    records the seed in seed_, which llm.c leaves unset
 *                                                    and never reads
 *   uint32_t mt19937_u32(Mt19937State*)              llm.c's randint32: next tempered output; a state
 *                                                    never seeded (matrix_a_ not {0, 0x9908b0df}) is
 *                                                    first seeded with 5489, as llm.c does
 *   bool     mt19937_valid(const Mt19937State&)      the state is one a seeded generator can be in
 *                                                    (constants intact, next_ inside state_): check
 *                                                    states read from files before drawing from them
 *   void     mt19937_permute(int32_t* data, int32_t n, Mt19937State*)
 *                                                    llm.c's random_permutation: shuffles data[0..n) IN
 *                                                    PLACE (not from the identity), Fisher-Yates from
 *                                                    the end: for i = n-1 .. 1, j = mt19937_u32() % (i+1),
 *                                                    swap data[i], data[j]; n - 1 draws (none for n <= 1).
 *                                                    The modulo is slightly biased, as in llm.c: kept
 *                                                    for identical permutations.
 *   void     mt19937_jump(Mt19937State*, uint64_t k) advances the state exactly as k calls of
 *                                                    mt19937_u32 would, in ~0.03 s for any k (below)
 *   float    mt19937_f32(Mt19937State*)              llm.c's randfloat32: low 24 bits of one draw / 2^24
 *   void     mt19937_fill_f32(Mt19937State*, float* out, size_t n)   n calls of mt19937_f32, faster
 *   double   mt19937_f64(Mt19937State*)              llm.c's randfloat64: low 53 bits of two draws (first
 *                                                    draw high) / 2^53
 *   void     mt19937_normal(float* data, size_t n, float mean, float std, Mt19937State*)
 *                                                    llm.c's normal_, bit for bit (torch's CPU normal_
 *                                                    but for rounding in the n < 16 path):
 *                                                    n >= 16: n uniforms, Box-Muller on each block of 16
 *                                                    (element t with t + 8); when n % 16 != 0, 16 fresh
 *                                                    uniforms replace the last 16 values. n < 16: two
 *                                                    doubles per pair of values. Same float/double
 *                                                    arithmetic and libm calls (logf, cosf, sinf) as llm.c.
 *                                                    Unlike llm.c (32-bit count), n may be >= 2^32.
 *   uint64_t mt19937_normal_draws(size_t n)          draws mt19937_normal takes for n values
 *   void     mt19937_normal_block16(float* data, float mean, float std)
 *                                                    the transform of one block of 16 uniforms, in place
 *
 * Jump-ahead: the twist is linear over GF(2) on the generator's 19937 state bits, with a characteristic
 * polynomial p of degree 19937 (found once per process, Berlekamp-Massey on one output bit, ~0.03 s). So
 * the untempered word sequence x satisfies x[b + D] = XOR of x[b + i] over the set coefficients i of
 * x^D mod p (b >= 1; the low 31 bits of a freshly seeded first word are not part of the state, hence one
 * draw first). The new 624-word window is that XOR of ~10,000 windows; x^D mod p costs ~log2(D)
 * polynomial squarings.
 */
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

// splitmix64 finaliser: turns nearby inputs (seed, seed+1, ...) into unrelated states.
inline uint64_t rng_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

inline uint64_t rng_seed(uint64_t a, uint64_t b = 0) {
    uint64_t s = rng_mix64(a ^ rng_mix64(b));
    return s != 0 ? s : 0x2545F4914F6CDD1Dull;
}

inline uint32_t random_u32(uint64_t* state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

inline float random_f32(uint64_t* state) {
    return (float)(random_u32(state) >> 8) / 16777216.0f;
}

// Lemire's multiply-shift with rejection: exactly uniform, no modulo bias.
inline uint32_t random_below(uint64_t* state, uint32_t n) {
    assert(n > 0);
    uint64_t m = (uint64_t)random_u32(state) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)random_u32(state) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

// ----------------------------------------------------------------------------
// MT19937, llm.c's layout and draw order

constexpr uint32_t MT19937_N = 624;
constexpr uint32_t MT19937_M = 397;
constexpr uint32_t MT19937_MATRIX_A = 0x9908B0DFu;

struct Mt19937State {
    uint64_t seed_;                  // the seed (llm.c leaves it unset; nobody reads it)
    int32_t left_;                   // outputs left before the next twist (+1)
    uint32_t next_;                  // index into state_ of the next output
    uint32_t state_[MT19937_N];
    uint32_t matrix_a_[2];           // {0, MT19937_MATRIX_A}
};
static_assert(sizeof(Mt19937State) == 2520, "llm.c's mt19937_state is 2,520 bytes in its state files");
static_assert(offsetof(Mt19937State, left_) == 8 && offsetof(Mt19937State, next_) == 12 &&
                  offsetof(Mt19937State, state_) == 16 && offsetof(Mt19937State, matrix_a_) == 2512,
              "field offsets of llm.c's mt19937_state");

inline void mt19937_seed(Mt19937State* s, uint32_t seed) {
    s->seed_ = seed;
    s->matrix_a_[0] = 0;
    s->matrix_a_[1] = MT19937_MATRIX_A;
    s->state_[0] = seed;
    for (uint32_t i = 1; i < MT19937_N; i++) {
        s->state_[i] = 1812433253u * (s->state_[i - 1] ^ (s->state_[i - 1] >> 30)) + i;
    }
    s->left_ = 1;  // the first draw twists
    s->next_ = 0;
}

// Regenerates all 624 words (the "twist"). Word i mixes words i and i + 1 with word i + M, which for
// i >= N - M is one already regenerated: three loops so that no index wraps inside a loop.
inline void mt19937_twist_(Mt19937State* s) {
    uint32_t* x = s->state_;
    const uint32_t a = s->matrix_a_[1];  // matrix_a_[0] is 0
    auto mix = [a](uint32_t hi, uint32_t lo, uint32_t far) {
        const uint32_t y = (hi & 0x80000000u) | (lo & 0x7FFFFFFFu);
        return far ^ (y >> 1) ^ ((y & 1) ? a : 0u);
    };
    uint32_t i = 0;
    for (; i < MT19937_N - MT19937_M; i++) x[i] = mix(x[i], x[i + 1], x[i + MT19937_M]);
    for (; i < MT19937_N - 1; i++) x[i] = mix(x[i], x[i + 1], x[i + MT19937_M - MT19937_N]);
    x[MT19937_N - 1] = mix(x[MT19937_N - 1], x[0], x[MT19937_M - 1]);
    s->left_ = (int32_t)MT19937_N;
    s->next_ = 0;
}

inline uint32_t mt19937_u32(Mt19937State* s) {
    if (s->matrix_a_[0] != 0 || s->matrix_a_[1] != MT19937_MATRIX_A) mt19937_seed(s, 5489);
    if (--s->left_ <= 0) mt19937_twist_(s);
    uint32_t y = s->state_[s->next_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C5680u;
    y ^= (y << 15) & 0xEFC60000u;
    y ^= y >> 18;
    return y;
}

// After seeding: left_ 1, next_ 0. After any draw: left_ + next_ == 625, 1 <= left_ <= 624.
inline bool mt19937_valid(const Mt19937State& s) {
    if (s.matrix_a_[0] != 0 || s.matrix_a_[1] != MT19937_MATRIX_A) return false;
    if (s.left_ == 1 && s.next_ == 0) return true;
    return s.left_ >= 1 && s.left_ <= (int32_t)MT19937_N && s.next_ == MT19937_N + 1 - (uint32_t)s.left_;
}

inline void mt19937_permute(int32_t* data, int32_t n, Mt19937State* s) {
    for (int32_t i = n - 1; i > 0; i--) {
        const int32_t j = (int32_t)(mt19937_u32(s) % (uint32_t)(i + 1));
        const int32_t tmp = data[i];
        data[i] = data[j];
        data[j] = tmp;
    }
}

// ----------------------------------------------------------------------------
// MT19937 jump-ahead

constexpr int MT19937_DEGREE = 19937;                     // degree of the characteristic polynomial
constexpr int MT19937_POLY_WORDS = MT19937_DEGREE / 64 + 1;  // 312 uint64 words hold bits 0..19937

// p, bit i = coefficient of x^i, by Berlekamp-Massey on bit 0 of 2 * 19937 outputs (any bit of any
// seed's outputs has p as its minimal polynomial: p is primitive). Computed once, then shared.
inline const std::vector<uint64_t>& mt19937_charpoly_() {
    static const std::vector<uint64_t> poly = [] {
        const int n_bits = 2 * MT19937_DEGREE;
        const int words = n_bits / 64 + 2;
        // rev bit t = sequence bit (n_bits - 1 - t): the discrepancy is then a word-aligned dot product
        std::vector<uint64_t> rev(words + 1, 0);
        Mt19937State s;
        mt19937_seed(&s, 5489);
        for (int t = 0; t < n_bits; t++) {
            const int r = n_bits - 1 - t;
            rev[r >> 6] |= (uint64_t)(mt19937_u32(&s) & 1) << (r & 63);
        }
        auto rev_word = [&](int bit) {  // 64 bits of rev from bit position `bit`
            const int w = bit >> 6, sh = bit & 63;
            return sh == 0 ? rev[w] : (rev[w] >> sh) | (rev[w + 1] << (64 - sh));
        };
        // connection polynomials C (current) and B (before the last length change): c_0 = 1
        std::vector<uint64_t> C(words, 0), B(words, 0), T;
        C[0] = B[0] = 1;
        int L = 0, m = 1;
        for (int n = 0; n < n_bits; n++) {
            const int o = n_bits - 1 - n;  // rev position of sequence bit n
            uint64_t acc = 0;
            for (int w = 0; w <= (L >> 6); w++) acc ^= C[w] & rev_word(o + 64 * w);
            if (!__builtin_parityll(acc)) { m++; continue; }
            const bool grow = 2 * L <= n;
            if (grow) T = C;
            const int ws = m >> 6, sh = m & 63;  // C ^= B << m
            for (int w = 0; w + ws < words; w++) {
                C[w + ws] ^= B[w] << sh;
                if (sh != 0 && w + ws + 1 < words) C[w + ws + 1] ^= B[w] >> (64 - sh);
            }
            if (grow) { L = n + 1 - L; B.swap(T); m = 1; }
            else m++;
        }
        assert(L == MT19937_DEGREE);
        // p(x) = x^L C(1/x): coefficient i of p is c_(L - i)
        std::vector<uint64_t> p(MT19937_POLY_WORDS, 0);
        for (int i = 0; i <= L; i++) {
            const int j = L - i;
            if ((C[j >> 6] >> (j & 63)) & 1) p[i >> 6] |= 1ull << (i & 63);
        }
        return p;
    }();
    return poly;
}

// x^e mod p, e >= 0: square and multiply from the top bit of e. The product of two residues has at
// most 2 * 19936 + 1 bits; reduction clears bits >= 19937 from the top with copies of p pre-shifted by
// 0..63 bits, so every XOR is word-aligned.
inline std::vector<uint64_t> mt19937_x_pow_mod_(uint64_t e) {
    const std::vector<uint64_t>& p = mt19937_charpoly_();
    constexpr int W = MT19937_POLY_WORDS, W2 = 2 * W;
    std::vector<uint64_t> shifted((size_t)64 * (W + 1), 0);  // shifted[r] = p << r, W + 1 words
    for (int r = 0; r < 64; r++) {
        uint64_t* d = &shifted[(size_t)r * (W + 1)];
        for (int w = 0; w < W; w++) {
            d[w] ^= p[w] << r;
            if (r != 0) d[w + 1] ^= p[w] >> (64 - r);
        }
    }
    std::vector<uint64_t> g(W2, 0), t(W2, 0);
    g[0] = 1;
    int top = 0;  // highest possibly-set bit of g
    auto reduce = [&](std::vector<uint64_t>& v, int hi) {
        for (int i = hi; i >= MT19937_DEGREE; i--) {
            if (!((v[i >> 6] >> (i & 63)) & 1)) continue;
            const int s = i - MT19937_DEGREE;
            const uint64_t* d = &shifted[(size_t)(s & 63) * (W + 1)];
            uint64_t* v0 = &v[s >> 6];
            const int n = std::min(W + 1, W2 - (s >> 6));
            for (int w = 0; w < n; w++) v0[w] ^= d[w];
        }
    };
    auto spread = [](uint32_t x) {  // bit i -> bit 2i: squaring over GF(2)
        uint64_t v = x;
        v = (v | (v << 16)) & 0x0000FFFF0000FFFFull;
        v = (v | (v << 8)) & 0x00FF00FF00FF00FFull;
        v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0Full;
        v = (v | (v << 2)) & 0x3333333333333333ull;
        v = (v | (v << 1)) & 0x5555555555555555ull;
        return v;
    };
    for (int b = 63; b >= 0; b--) {
        if (top > 0) {  // g = g^2 mod p
            for (int w = 0; w < W; w++) {
                t[2 * w] = spread((uint32_t)g[w]);
                t[2 * w + 1] = spread((uint32_t)(g[w] >> 32));
            }
            top = 2 * top;
            reduce(t, std::min(top, 2 * (MT19937_DEGREE - 1)));
            g.swap(t);
            top = std::min(top, MT19937_DEGREE - 1);
        }
        if ((e >> b) & 1) {  // g = g * x mod p
            for (int w = W2 - 1; w > 0; w--) g[w] = (g[w] << 1) | (g[w - 1] >> 63);
            g[0] <<= 1;
            top++;
            reduce(g, std::min(top, MT19937_DEGREE));
            top = std::min(top, MT19937_DEGREE - 1);
        }
    }
    g.resize(W);
    return g;
}

// The jump by the polynomial, for any k (tests use it for small k as well).
inline void mt19937_jump_poly_(Mt19937State* s, uint64_t k) {
    if (k == 0) return;
    mt19937_u32(s);  // state_ now holds x[b .. b + 623] with b >= 624, and next_ >= 1 were used
    k--;
    // next output is x[b + next_]; after k more it is x[b + next_ + k]: the window from b + D, next_ 1
    const uint64_t D = (uint64_t)s->next_ + k - 1;
    const std::vector<uint64_t> g = mt19937_x_pow_mod_(D);
    std::vector<uint32_t> x(MT19937_DEGREE + MT19937_N);  // x[i] = x[b + i]
    memcpy(x.data(), s->state_, sizeof(s->state_));
    for (size_t i = MT19937_N; i < x.size(); i++) {
        const uint32_t y = (x[i - MT19937_N] & 0x80000000u) | (x[i - MT19937_N + 1] & 0x7FFFFFFFu);
        x[i] = x[i - MT19937_N + MT19937_M] ^ (y >> 1) ^ s->matrix_a_[y & 1];
    }
    uint32_t acc[MT19937_N] = {};
    for (int i = 0; i < MT19937_DEGREE; i++) {
        if (!((g[i >> 6] >> (i & 63)) & 1)) continue;
        const uint32_t* src = &x[i];
        for (uint32_t j = 0; j < MT19937_N; j++) acc[j] ^= src[j];
    }
    memcpy(s->state_, acc, sizeof(acc));
    s->next_ = 1;
    s->left_ = (int32_t)MT19937_N;
}

// Below this many draws, stepping is cheaper than the polynomial (~4 ns a draw against ~0.03 s).
constexpr uint64_t MT19937_JUMP_STEP_LIMIT = 1u << 22;

inline void mt19937_jump(Mt19937State* s, uint64_t k) {
    if (k < MT19937_JUMP_STEP_LIMIT) {
        for (uint64_t i = 0; i < k; i++) mt19937_u32(s);
        return;
    }
    mt19937_jump_poly_(s, k);
}

// ----------------------------------------------------------------------------
// llm.c's uniform and normal draws

inline float mt19937_f32(Mt19937State* s) {
    return (float)(mt19937_u32(s) & 0xFFFFFFu) * (1.0f / 16777216.0f);
}

// n calls of mt19937_f32, a window of 624 words at a time (the tempering loop vectorises).
inline void mt19937_fill_f32(Mt19937State* s, float* out, size_t n) {
    if (s->matrix_a_[0] != 0 || s->matrix_a_[1] != MT19937_MATRIX_A) mt19937_seed(s, 5489);
    while (n > 0) {
        if (s->left_ <= 1) {
            mt19937_twist_(s);
            s->left_ = (int32_t)MT19937_N + 1;  // mt19937_u32 counts the draw that twists before twisting
        }
        const size_t take = std::min(n, (size_t)s->left_ - 1);
        const uint32_t* src = s->state_ + s->next_;
        for (size_t i = 0; i < take; i++) {
            uint32_t y = src[i];
            y ^= y >> 11;
            y ^= (y << 7) & 0x9D2C5680u;
            y ^= (y << 15) & 0xEFC60000u;
            y ^= y >> 18;
            out[i] = (float)(y & 0xFFFFFFu) * (1.0f / 16777216.0f);
        }
        s->next_ += (uint32_t)take;
        s->left_ -= (int32_t)take;
        out += take;
        n -= take;
    }
}

inline double mt19937_f64(Mt19937State* s) {
    const uint64_t hi = mt19937_u32(s);
    const uint64_t lo = mt19937_u32(s);
    return (double)(((hi << 32) | lo) & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

constexpr float MT19937_NORMAL_EPS = 1e-12f;  // keeps logf's argument above 0
constexpr double MT19937_TWO_PI = 2.0 * 3.14159265358979323846;  // 2.0 * M_PI, a double as in llm.c

// The expressions are llm.c's, operation for operation (float unless written double): keep them so.
inline void mt19937_normal_block16(float* d, float mean, float std) {
    for (int t = 0; t < 8; t++) {
        const float u1 = 1.0f - d[t];
        const float u2 = d[t + 8];
        const float radius = sqrtf(-2.0f * logf(u1 + MT19937_NORMAL_EPS));
        const float theta = (float)(MT19937_TWO_PI * u2);
        d[t] = radius * cosf(theta) * std + mean;
        d[t + 8] = radius * sinf(theta) * std + mean;
    }
}

inline uint64_t mt19937_normal_draws(size_t n) {
    if (n < 16) return 4 * (uint64_t)((n + 1) / 2);  // two doubles (four draws) per pair of values
    return n + (n % 16 != 0 ? 16 : 0);
}

inline void mt19937_normal(float* data, size_t n, float mean, float std, Mt19937State* s) {
    if (n >= 16) {
        mt19937_fill_f32(s, data, n);
        for (size_t i = 0; i + 16 <= n; i += 16) mt19937_normal_block16(data + i, mean, std);
        if (n % 16 != 0) {
            float* last = data + n - 16;
            for (int t = 0; t < 16; t++) last[t] = mt19937_f32(s);
            mt19937_normal_block16(last, mean, std);
        }
        return;
    }
    double second = 0.0;  // the sine of the previous pair
    bool have_second = false;
    for (size_t t = 0; t < n; t++) {
        if (have_second) {
            data[t] = (float)(second * std + mean);
            have_second = false;
            continue;
        }
        const float u1 = (float)mt19937_f64(s);
        const float u2 = (float)mt19937_f64(s);
        const float radius = sqrtf(-2.0f * logf(1.0f - u2 + MT19937_NORMAL_EPS));
        const float theta = (float)(MT19937_TWO_PI * u1);
        second = radius * sinf(theta);
        have_second = true;
        data[t] = radius * cosf(theta) * std + mean;
    }
}
