/*
 * Lab for llmc/adamw.cuh against a CPU reference in double from the same inputs:
 *   adamw_update with fp32 master weights: m, v, master against the reference; every bf16 parameter is
 *     one of the two bf16 neighbours of its new master value, and the fraction rounded up matches the
 *     dropped fraction (z-score < 5): stochastic rounding is unbiased on real data
 *   adamw_update without master weights: m, v; parameters within one bf16 ulp of the exact update (plus
 *     the fp32 rounding of the subtraction, which matters where old value and step nearly cancel)
 *   same state and seed -> bitwise equal; another seed -> different roundings
 *   a shard updated with position0 = k equals elements [k, n) of the whole-tensor update, bitwise
 *   stochastic rounding is unbiased: the mean of millions of roundings of a constant x (round_from_fp32,
 *     and adamw_update with lr = 0) equals x within 5 standard errors
 *   copy_to_fp32 exact
 * The parameters are poisoned when master weights make them a pure output. Sizes are GPT-2 d12 tensors
 * plus odd ones; the timing runs one update over all 124,475,904 d12 parameters. Exit status 1 on failure.
 */
#include "llmc/adamw.cuh"
#include "llmc/gpt2_vocab.h"
#include "common.h"

static float bits_float(uint32_t b) {
    float x;
    memcpy(&x, &b, sizeof(x));
    return x;
}
// distance between adjacent bf16 values around x (8 significant bits)
static double bf16_ulp(double x) {
    int e = 0;
    std::frexp(x, &e);
    return std::ldexp(1.0, e - 8);
}

__global__ void set_constant_kernel(float* out, size_t n, float value) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = value;
}
static void set_constant(float* out, size_t n, float value) {
    set_constant_kernel<<<lab_grid(n), 256>>>(out, n, value);
    cudaCheckLaunch();
}

struct State {  // one parameter tensor with its optimizer state
    size_t n;
    floatX *params, *grads;
    float *master, *m, *v;  // master may be nullptr
};

static State alloc_state(size_t n, bool with_master) {
    State s{n, lab_alloc<floatX>(n), lab_alloc<floatX>(n), with_master ? lab_alloc<float>(n) : nullptr,
            lab_alloc<float>(n), lab_alloc<float>(n)};
    return s;
}
static void copy_state(const State& dst, const State& src) {
    copy_device(dst.params, src.params, src.n);
    copy_device(dst.grads, src.grads, src.n);
    if (src.master) copy_device(dst.master, src.master, src.n);
    copy_device(dst.m, src.m, src.n);
    copy_device(dst.v, src.v, src.n);
}
static size_t state_differences(const State& a, const State& b) {
    return count_bit_differences(a.params, b.params, a.n) + (a.master ? count_bit_differences(a.master, b.master, a.n) : 0) +
           count_bit_differences(a.m, b.m, a.n) + count_bit_differences(a.v, b.v, a.n);
}
static void update(const State& s, const AdamWParams& p, uint32_t seed, size_t offset = 0) {
    adamw_update(s.params + offset, s.master ? s.master + offset : nullptr, s.grads + offset, s.m + offset,
                 s.v + offset, s.n - offset, (uint32_t)offset, p, seed, 0);
}

static void check_update(size_t n, const char* what, bool with_master) {
    const std::string shape = strfmt("n=%zu %s%s", n, what, with_master ? ", master" : ", no master");
    printf("-- %s\n", shape.c_str());
    AdamWParams p;
    p.lr = 1e-2f;  // large enough that the update is several bf16 ulps of a parameter
    p.weight_decay = 0.1f;
    p.grad_scale = 0.7f;
    p.t = 5;
    const State s = alloc_state(n, with_master), s0 = alloc_state(n, with_master), s1 = alloc_state(n, with_master);
    fill_uniform(s0.params, n, -0.1f, 0.1f);
    if (s0.master) fill_uniform(s0.master, n, -0.1f, 0.1f);
    fill_uniform(s0.grads, n, -0.01f, 0.01f);
    fill_uniform(s0.m, n, -1e-3f, 1e-3f);
    fill_uniform(s0.v, n, 0.f, 1e-5f);
    const uint32_t seed = host_random_u32();
    copy_state(s, s0);
    if (with_master) poison(s.params, n);  // with master weights the bf16 parameters are a pure output
    update(s, p, seed);
    lab_sync();

    // reference
    const std::vector<float> h_p0 = download(s0.params, n), h_g = download(s0.grads, n);
    const std::vector<float> h_m0 = download(s0.m, n), h_v0 = download(s0.v, n);
    const std::vector<float> h_master0 = with_master ? download(s0.master, n) : std::vector<float>();
    std::vector<double> ref_m(n), ref_v(n), ref_p(n);
    const double b1 = p.beta1, b2 = p.beta2;
    const double c1 = 1 - std::pow(b1, p.t), c2 = 1 - std::pow(b2, p.t);
    for (size_t i = 0; i < n; i++) {
        const double g = (double)h_g[i] * p.grad_scale;
        ref_m[i] = b1 * h_m0[i] + (1 - b1) * g;
        ref_v[i] = b2 * h_v0[i] + (1 - b2) * g * g;
        const double old = with_master ? h_master0[i] : h_p0[i];
        ref_p[i] = old - p.lr * ((ref_m[i] / c1) / (std::sqrt(ref_v[i] / c2) + p.eps) + p.weight_decay * old);
    }
    check_close("adamw m [" + shape + "]", download(s.m, n), ref_m, TOL_FP32);
    check_close("adamw v [" + shape + "]", download(s.v, n), ref_v, TOL_FP32);
    const std::vector<float> got_p = download(s.params, n);
    if (with_master) {
        const std::vector<float> got_master = download(s.master, n);
        // fp32 result: a few fp32 ulps of the old value and of the update (fast-math sqrt and division)
        check_close("adamw master [" + shape + "]", got_master, ref_p, Tol{1e-5, 1e-6, 1e-5});
        // each parameter is its master value rounded down or up (in magnitude), never anything else;
        // up with probability = dropped fraction f, so #up ~ sum f with variance sum f(1-f)
        size_t wrong = 0, ups = 0;
        double expected_ups = 0, var = 0;
        for (size_t i = 0; i < n; i++) {
            const uint32_t mb = float_bits(got_master[i]), pb = float_bits(got_p[i]) >> 16;
            const uint32_t lo = mb >> 16;
            const double f = (mb & 0xFFFFu) / 65536.0;
            if (pb != lo && !(pb == lo + 1 && f > 0)) wrong++;
            ups += pb == lo + 1;
            expected_ups += f;
            var += f * (1 - f);
        }
        const double z = (ups - expected_ups) / std::sqrt(std::max(var, 1e-12));
        check("adamw params = stochastic rounding of master [" + shape + "]", wrong == 0 && std::fabs(z) < 5,
              strfmt("%zu not a bf16 neighbour; rounded up %zu times, expected %.0f (z = %.2f)", wrong, ups, expected_ups, z));
    } else {
        // one bf16 ulp of the result, plus the fp32 rounding of `old - step` (8 fp32 ulps of the
        // larger operand): when old and the step nearly cancel, the result's own ulp is far smaller
        // than the fp32 error of the subtraction, which is not the kernel's fault
        size_t wrong = 0;
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            const double old = h_p0[i];
            const double step = std::fabs(old - ref_p[i]);
            const double fp32_err = 8.0 * std::ldexp(std::max(std::fabs(old), step), -24);
            const double err = std::fabs(got_p[i] - ref_p[i]) / (bf16_ulp(ref_p[i]) + fp32_err);
            worst = std::max(worst, lab_nonfinite(got_p[i]) ? INFINITY : err);
            wrong += !(err <= 1.001);
        }
        check("adamw params within one bf16 ulp (+fp32 rounding) of the update [" + shape + "]", wrong == 0,
              strfmt("%zu outside, worst %.3f ulp", wrong, worst));
    }

    // determinism and seeds
    copy_state(s1, s);
    copy_state(s, s0);
    update(s, p, seed);
    lab_sync();
    size_t diff = state_differences(s, s1);
    check("adamw deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));
    if (n >= 1000) {
        copy_state(s, s0);
        update(s, p, seed + 1);
        lab_sync();
        diff = count_bit_differences(s.params, s1.params, n);
        check("adamw another seed rounds differently [" + shape + "]", diff > 0, strfmt("%zu bytes differ", diff));
    }

    // a shard [k, n) updated alone with position0 = k matches the whole-tensor update
    if (with_master && n > 3) {
        const size_t k = n / 3;
        copy_state(s, s0);
        update(s, p, seed, k);
        lab_sync();
        diff = count_bit_differences(s.params + k, s1.params + k, n - k) +
               count_bit_differences(s.master + k, s1.master + k, n - k) + count_bit_differences(s.m + k, s1.m + k, n - k);
        check(strfmt("adamw shard [%zu, %zu) with position0 = %zu [", k, n, k) + shape + "]", diff == 0,
              strfmt("%zu bytes differ from the whole-tensor update", diff));
    }
}

// Mean of many stochastic roundings of one fp32 value x, against x.
static void check_unbiased(float x, bool through_adamw) {
    const size_t n = 1 << 22;
    const int seeds = 4;
    const uint32_t b = float_bits(x), lo_bits = b & 0xFFFF0000u;
    const double lo = bits_float(lo_bits), hi = bits_float(lo_bits + 0x10000u);
    const double f = (b & 0xFFFFu) / 65536.0;  // the dropped fraction: P(round away from zero)
    floatX* out = lab_alloc<floatX>(n);
    float* src = lab_alloc<float>(n);
    float* m = lab_alloc<float>(n);
    float* v = lab_alloc<float>(n);
    floatX* grads = lab_alloc<floatX>(n);
    double sum = 0;
    for (int k = 0; k < seeds; k++) {
        const uint32_t seed = host_random_u32();
        set_constant(src, n, x);
        poison(out, n);
        if (through_adamw) {
            // lr = 0, zero gradient and moments: the new master value is x itself, params its rounding
            AdamWParams p;
            p.lr = 0.f;
            p.weight_decay = 0.f;
            p.grad_scale = 1.f;
            p.t = 1;
            cudaCheck(cudaMemset(m, 0, n * sizeof(float)));
            cudaCheck(cudaMemset(v, 0, n * sizeof(float)));
            cudaCheck(cudaMemset(grads, 0, n * sizeof(floatX)));
            adamw_update(out, src, grads, m, v, n, 0, p, seed, 0);
        } else {
            round_from_fp32(out, src, n, seed, 0);
        }
        const std::vector<float> got = download(out, n);
        for (float g : got) sum += g;
    }
    const double total = (double)n * seeds;
    const double mean = sum / total;
    const double se = std::fabs(hi - lo) * std::sqrt(f * (1 - f) / total);
    const double z = se > 0 ? (mean - x) / se : (mean == x ? 0.0 : INFINITY);
    const double nearest_bias = (f < 0.5 ? lo : hi) - (double)x;
    check(strfmt("stochastic rounding unbiased, %s, x = %.9g", through_adamw ? "adamw_update" : "round_from_fp32", x),
          std::fabs(z) < 5,
          strfmt("mean - x = %.2e (z = %.2f over %.0f roundings; round-to-nearest: %.2e)", mean - x, z, total, nearest_bias));
}

int main() {
    lab_init("adamw");
    struct Size {
        size_t n;
        const char* what;
    };
    const Size sizes[] = {
        {(size_t)GPT2_PADDED_VOCAB_SIZE * 768, "(d12 wte)"},
        {(size_t)12 * 4 * 768 * 768, "(d12 fcw, 12 layers)"},
        {(size_t)12 * 768, "(d12 ln1w)"},
        {1000003, "(odd)"},
        {37, "(odd)"},
    };
    for (const Size& s : sizes) check_update(s.n, s.what, true);
    for (const Size& s : sizes) {
        if (s.n < 30000000) check_update(s.n, s.what, false);
    }

    for (float frac : {0.01f, 0.3f, 0.5f, 0.77f}) check_unbiased(1.0f + frac / 128.0f, false);
    check_unbiased(-3.14159265f, false);
    check_unbiased(1.2345e-3f, false);
    check_unbiased(1.0f + 0.3f / 128.0f, true);
    check_unbiased(-0.0123456f, true);

    {  // copy_to_fp32 is exact
        const size_t n = 1000003;
        floatX* src = lab_alloc<floatX>(n);
        float* dst = lab_alloc<float>(n);
        fill_uniform(src, n, -2.f, 2.f);
        poison(dst, n);
        copy_to_fp32(dst, src, n, 0);
        lab_sync();
        const std::vector<float> a = download(src, n), b = download(dst, n);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += float_bits(a[i]) != float_bits(b[i]);
        check("copy_to_fp32 exact [n=1000003]", diff == 0, strfmt("%zu differ", diff));
    }

    // timing: one update over every parameter of GPT-2 d12
    const size_t n = 124475904;
    const State s = alloc_state(n, true);
    fill_uniform(s.params, n, -0.1f, 0.1f);
    fill_uniform(s.master, n, -0.1f, 0.1f);
    fill_uniform(s.grads, n, -0.01f, 0.01f);
    fill_uniform(s.m, n, -1e-3f, 1e-3f);
    fill_uniform(s.v, n, 0.f, 1e-5f);
    AdamWParams p;
    p.lr = 3e-4f;
    p.weight_decay = 0.1f;
    p.grad_scale = 1.f;
    p.t = 10;
    const std::string shape = "n=124475904 (d12)";
    float ms = time_ms([&] { update(s, p, 1234); });
    report("adamw_update, master", shape, ms, 28.0 * n);  // params w 2, grads r 2, master/m/v r+w 8 each
    State nm = s;
    nm.master = nullptr;
    ms = time_ms([&] { update(nm, p, 1234); });
    report("adamw_update, no master", shape, ms, 22.0 * n);  // params r+w 4, grads 2, m/v 8 each
    const size_t bad = count_nonfinite(s.params, n);
    check("adamw no NaN/Inf after the timing runs [" + shape + "]", bad == 0, strfmt("%zu NaN/Inf", bad));
    return lab_finish();
}
