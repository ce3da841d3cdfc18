/*
 * Small deterministic host RNG (no CUDA needed).
 *
 * Generator: xorshift* (Marsaglia's xorshift64 followed by a 64-bit multiply, after Vigna) with the
 * whole state in one uint64_t, so it can be saved in the run-state file (slots 20-23) and restored
 * exactly. Used for data shuffling and for the per-tensor stochastic-rounding seeds of the update.
 * The state must never be 0 (xorshift would then only produce 0); rng_seed() guarantees that.
 *
 *   uint64_t rng_seed(uint64_t a, uint64_t b = 0)   well-mixed non-zero state from one or two values
 *                                                    (e.g. seed and epoch); splitmix64 finaliser
 *   uint32_t random_u32(uint64_t* state)            next 32 random bits, advances *state
 *   void     random_jump(uint64_t* state, uint64_t k)   advances *state as k calls of random_u32 would,
 *                                                    in O(log k) (the state update is linear over GF(2))
 *   float    random_f32(uint64_t* state)            uniform in [0, 1), 24 random bits
 *   uint32_t random_below(uint64_t* state, uint32_t n)   uniform integer in [0, n), n > 0
 *   void     random_permutation(int32_t* out, size_t n, uint64_t* state)
 *                                                    out = a uniformly random permutation of 0..n-1
 *                                                    (Fisher-Yates, overwrites out[0..n))
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

inline void random_permutation(int32_t* out, size_t n, uint64_t* state) {
    assert(n <= (size_t)INT32_MAX);
    for (size_t i = 0; i < n; i++) out[i] = (int32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = random_below(state, (uint32_t)i);
        int32_t tmp = out[i - 1];
        out[i - 1] = out[j];
        out[j] = tmp;
    }
}
