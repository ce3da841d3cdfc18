/*
 * Small deterministic host RNGs (no CUDA needed).
 *
 * 1. xorshift* (Marsaglia's xorshift64 followed by a 64-bit multiply, after Vigna) with the whole
 *    state in one uint64_t, so it can be saved in the run-state file (slots 20-23) and restored
 *    exactly. Used for the per-tensor stochastic-rounding seeds of the update, random init and the
 *    sampler. The state must never be 0 (xorshift would then only produce 0); rng_seed() guarantees that.
 *
 *   uint64_t rng_seed(uint64_t a, uint64_t b = 0)   well-mixed non-zero state from one or two values
 *                                                    (e.g. seed and epoch); splitmix64 finaliser
 *   uint32_t random_u32(uint64_t* state)            next 32 random bits, advances *state
 *   void     random_jump(uint64_t* state, uint64_t k)   advances *state as k calls of random_u32 would,
 *                                                    in O(log k) (the state update is linear over GF(2))
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
 */
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>

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

// The xorshift update is a linear map of the state's 64 bits over GF(2): a 64x64 bit matrix, one
// uint64_t per column (column j = the image of bit j). Jumping k steps applies that matrix's k-th power.
struct RngMatrix64_ {
    uint64_t col[64];
};
inline uint64_t rng_matrix_apply_(const RngMatrix64_& m, uint64_t x) {
    uint64_t y = 0;
    for (int j = 0; j < 64; j++) if ((x >> j) & 1) y ^= m.col[j];
    return y;
}
inline RngMatrix64_ rng_matrix_mul_(const RngMatrix64_& a, const RngMatrix64_& b) {  // a after b
    RngMatrix64_ r;
    for (int j = 0; j < 64; j++) r.col[j] = rng_matrix_apply_(a, b.col[j]);
    return r;
}

inline void random_jump(uint64_t* state, uint64_t k) {
    RngMatrix64_ step;
    for (int j = 0; j < 64; j++) {
        uint64_t x = 1ull << j;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        step.col[j] = x;
    }
    uint64_t s = *state;
    for (; k; k >>= 1) {  // square and multiply over the bits of k
        if (k & 1) s = rng_matrix_apply_(step, s);
        step = rng_matrix_mul_(step, step);
    }
    *state = s;
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

// Regenerates all 624 words (the "twist").
inline void mt19937_twist_(Mt19937State* s) {
    auto mix = [s](uint32_t a, uint32_t b, uint32_t far) {
        const uint32_t y = (a & 0x80000000u) | (b & 0x7FFFFFFFu);
        return far ^ (y >> 1) ^ s->matrix_a_[y & 1];
    };
    for (uint32_t i = 0; i < MT19937_N; i++) {
        const uint32_t far = s->state_[(i + MT19937_M) % MT19937_N];  // already updated for i >= N-M
        s->state_[i] = mix(s->state_[i], s->state_[(i + 1) % MT19937_N], far);
    }
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
