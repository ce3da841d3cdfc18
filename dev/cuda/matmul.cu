/*
 * Lab for llmc/matmul.cuh (cuBLASLt with fused epilogues) at the GPT-2 d12 layer shapes, the LM head and
 * two odd small shapes, against a CPU reference in double from the same bf16 values:
 *   matmul_forward   out = inp @ W^T (+ bias)                 poisoned first, every element must be written
 *                    with GELU fused: pre_gelu = that, out = gelu(pre_gelu)
 *                    with a residual (cases without GELU): out = that + residual, residual unchanged
 *   matmul_backward  dinp = dout @ W (* gelu'(dgelu_input))   poisoned first
 *                    dweight += dout^T inp, dbias += column sums of dout   start from random values
 *                    and with accumulate_grads = false: dweight, dbias =   poisoned first
 *                    two runs from the same state must be bitwise equal
 * Cases with a bias also run both with inp stored padded ("+pad": row stride C + MATMUL_BIAS_PAD, the
 * ones column after the C values), where dbias comes out of the weight-gradient GEMM.
 * At the big shapes the CPU checks sampled rows (forward, dinp) and sampled weight rows (dweight), each
 * element in full; a GPU scan checks that no element anywhere is NaN/Inf. Times everything and prints
 * TFLOP/s (forward 2*N*C*OC flops, backward 4*N*C*OC). Exit status 1 if any check fails.
 */
#include "llmc/matmul.cuh"
#include "llmc/gpt2_vocab.h"
#include "common.h"

struct Case {
    const char* name;
    int N, C, OC;  // inp (N, C), weight (OC, C), out (N, OC)
    bool bias;
    bool gelu;   // also check/time the forward with fused GELU
    bool dgelu;  // also check/time the backward with the dgelu epilogue
};

static double dot(const float* a, const float* b, int n) {
    double s[4] = {0, 0, 0, 0};  // independent chains: the compiler may not reorder one sum
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; k++) s[k] += (double)a[i + k] * b[i + k];
    }
    for (; i < n; i++) s[0] += (double)a[i] * b[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

// acc (rows, len) += coef (rows, K) @ M (K, len): each row of acc gains its row of coef times the rows of M.
static void add_weighted_rows(double* acc, const float* coef, const float* M, size_t rows, int K, int len) {
    for (size_t i = 0; i < rows; i++) {
        double* a = acc + i * len;
        for (int k = 0; k < K; k++) {
            const double d = coef[i * K + k];
            const float* m = M + (size_t)k * len;
            for (int c = 0; c < len; c++) a[c] += d * m[c];
        }
    }
}

// How many rows of a tensor the CPU recomputes: all of them when that fits the budget (multiply-adds),
// else 8 to 64.
static int rows_to_check(int total, double budget, double cost_per_row) {
    if (total * cost_per_row <= budget) return total;
    return (int)std::max(8.0, std::min(64.0, budget / cost_per_row));
}

static void run_case(const Case& cs) {
    const int N = cs.N, C = cs.C, OC = cs.OC;
    const std::string shape = strfmt("%s N=%d C=%d OC=%d", cs.name, N, C, OC);
    printf("-- %s%s\n", shape.c_str(), cs.bias ? " +bias" : "");
    const double fwd_flops = 2.0 * N * C * OC;

    floatX* inp = lab_alloc<floatX>((size_t)N * C);
    floatX* weight = lab_alloc<floatX>((size_t)OC * C);
    floatX* bias = cs.bias ? lab_alloc<floatX>(OC) : nullptr;
    floatX* out = lab_alloc<floatX>((size_t)N * OC);
    floatX* pre = cs.gelu ? lab_alloc<floatX>((size_t)N * OC) : nullptr;
    fill_uniform(inp, (size_t)N * C, -1.f, 1.f);
    const float a = 3.0f / std::sqrt((float)C);  // pre-activations ~ unit variance: GELU's curved part
    fill_uniform(weight, (size_t)OC * C, -a, a);
    if (bias) fill_uniform(bias, OC, -0.5f, 0.5f);
    const std::vector<float> h_inp = download(inp, (size_t)N * C);
    const std::vector<float> h_w = download(weight, (size_t)OC * C);
    const std::vector<float> h_bias = bias ? download(bias, OC) : std::vector<float>(OC, 0.f);
    // the same input with the ones column: row stride C + MATMUL_BIAS_PAD, padding (1, 0, ..., 0)
    const int LD = C + MATMUL_BIAS_PAD;
    floatX* inp_pad = nullptr;
    if (cs.bias) {
        inp_pad = lab_alloc<floatX>((size_t)N * LD);
        cudaCheck(cudaMemset(inp_pad, 0, (size_t)N * LD * sizeof(floatX)));
        cudaCheck(cudaMemcpy2D(inp_pad, LD * sizeof(floatX), inp, C * sizeof(floatX), C * sizeof(floatX), N,
                               cudaMemcpyDeviceToDevice));
        const std::vector<floatX> ones(N, (floatX)1.0f);
        cudaCheck(cudaMemcpy2D(inp_pad + C, LD * sizeof(floatX), ones.data(), sizeof(floatX), sizeof(floatX), N,
                               cudaMemcpyHostToDevice));
    }
    const int pad_variants = cs.bias ? 2 : 1;

    // ---- forward (plain, then with GELU)
    const std::vector<int> rows_f = sample_rows(N, rows_to_check(N, 2e8, (double)C * OC));
    const std::string rows_note = rows_f.size() < (size_t)N ? strfmt(", %zu rows", rows_f.size()) : "";
    std::vector<double> ref_pre(rows_f.size() * OC), ref_gelu(rows_f.size() * OC);
    for (size_t i = 0; i < rows_f.size(); i++) {
        for (int o = 0; o < OC; o++) {
            const double v = h_bias[o] + dot(&h_inp[(size_t)rows_f[i] * C], &h_w[(size_t)o * C], C);
            ref_pre[i * OC + o] = v;
            ref_gelu[i * OC + o] = gelu_ref(v);
        }
    }
    for (int v = 0; v < (cs.gelu ? 2 : 1) * pad_variants; v++) {
        const int with_gelu = cs.gelu ? v % 2 : 0;
        const bool padded = v / (cs.gelu ? 2 : 1) == 1;
        const std::string kernel = std::string("matmul_forward") + (cs.bias ? "+bias" : "") + (with_gelu ? "+gelu" : "") +
                                   (padded ? "+pad" : "");
        floatX* pre_arg = with_gelu ? pre : nullptr;
        const floatX* x = padded ? inp_pad : inp;
        const int x_ld = padded ? LD : 0;
        poison(out, (size_t)N * OC);
        if (pre_arg) poison(pre, (size_t)N * OC);
        matmul_forward(lab_ctx(), out, pre_arg, x, weight, bias, N, C, OC, 0, x_ld);
        lab_sync();
        if (with_gelu) {
            check_close(kernel + " pre_gelu [" + shape + rows_note + "]", download_rows(pre, OC, rows_f), ref_pre, TOL_BF16);
            check_close(kernel + " out [" + shape + rows_note + "]", download_rows(out, OC, rows_f), ref_gelu, TOL_BF16);
        } else {
            check_close(kernel + " out [" + shape + rows_note + "]", download_rows(out, OC, rows_f), ref_pre, TOL_BF16);
        }
        const size_t bad = count_nonfinite(out, (size_t)N * OC) + (pre_arg ? count_nonfinite(pre, (size_t)N * OC) : 0);
        check(kernel + " writes every element [" + shape + "]", bad == 0, strfmt("%zu NaN/Inf left", bad));
        const float ms = time_ms([&] { matmul_forward(lab_ctx(), out, pre_arg, x, weight, bias, N, C, OC, 0, x_ld); });
        report(kernel, strfmt("%s %dx%dx%d", cs.name, N, C, OC), ms,
               ((double)N * C + (double)OC * C + (1.0 + with_gelu) * N * OC) * sizeof(floatX), fwd_flops);
    }

    // ---- forward with the residual add in the epilogue (out = inp @ W^T + bias + residual), the way the
    // trainer runs the attproj / fcproj forwards: one rounding of the sum, residual untouched
    if (!cs.gelu) {
        const std::string kernel = std::string("matmul_forward") + (cs.bias ? "+bias" : "") + "+residual";
        floatX* residual = lab_alloc<floatX>((size_t)N * OC);
        fill_uniform(residual, (size_t)N * OC, -4.f, 4.f);
        const std::vector<float> h_res = download(residual, (size_t)N * OC);
        std::vector<double> ref_res(rows_f.size() * OC);
        for (size_t i = 0; i < rows_f.size(); i++) {
            for (int o = 0; o < OC; o++) ref_res[i * OC + o] = ref_pre[i * OC + o] + h_res[(size_t)rows_f[i] * OC + o];
        }
        poison(out, (size_t)N * OC);
        matmul_forward(lab_ctx(), out, nullptr, inp, weight, bias, N, C, OC, 0, 0, residual);
        lab_sync();
        check_close(kernel + " out [" + shape + rows_note + "]", download_rows(out, OC, rows_f), ref_res, TOL_BF16);
        const std::vector<float> res_after = download(residual, (size_t)N * OC);
        check(kernel + " leaves the residual unchanged [" + shape + "]",
              memcmp(res_after.data(), h_res.data(), h_res.size() * sizeof(float)) == 0, "residual was written");
        const size_t bad = count_nonfinite(out, (size_t)N * OC);
        check(kernel + " writes every element [" + shape + "]", bad == 0, strfmt("%zu NaN/Inf left", bad));
        const float ms = time_ms([&] { matmul_forward(lab_ctx(), out, nullptr, inp, weight, bias, N, C, OC, 0, 0, residual); });
        report(kernel, strfmt("%s %dx%dx%d", cs.name, N, C, OC), ms,
               ((double)N * C + (double)OC * C + 2.0 * N * OC) * sizeof(floatX), fwd_flops);
    }

    // ---- backward (plain, then with dgelu)
    floatX* dout = lab_uniform<floatX>((size_t)N * OC, -1.f, 1.f);
    floatX* dinp = lab_alloc<floatX>((size_t)N * C);
    floatX* dinp1 = lab_alloc<floatX>((size_t)N * C);  // the first run's dinp (the rerun must match it)
    // parameter gradients accumulate (+=)
    const Accumulated<floatX> gw((size_t)OC * C, -1.f, 1.f);
    const Accumulated<floatX> gb = cs.bias ? Accumulated<floatX>(OC, -1.f, 1.f) : Accumulated<floatX>();
    floatX *dweight = gw.live, *dbias = gb.live;
    floatX* dgelu_in = cs.dgelu ? lab_uniform<floatX>((size_t)N * C, -3.f, 3.f) : nullptr;
    const size_t scratch_n =
        cs.bias ? std::max(column_reduce_scratch_floats(lab_ctx(), N, OC), matmul_bias_grad_scratch_floats(C, OC)) : 0;
    float* scratch = cs.bias ? lab_alloc<float>(scratch_n) : nullptr;
    auto restore = [&] {
        poison(dinp, (size_t)N * C);
        gw.restore();
        gb.restore();
        if (scratch) poison(scratch, scratch_n);
    };

    // reference pieces shared by both variants
    const std::vector<int> rows_b = sample_rows(N, rows_to_check(N, 2e8, (double)C * OC));
    const std::vector<int> rows_w = sample_rows(OC, rows_to_check(OC, 1e8, (double)N * C));
    const std::vector<float> h_dout_rows = download_rows(dout, OC, rows_b);
    const std::vector<float> h_dout_cols = download_cols(dout, N, OC, rows_w);
    std::vector<double> ref_dinp_lin(rows_b.size() * C, 0.0);  // dout @ W, before dgelu
    add_weighted_rows(ref_dinp_lin.data(), h_dout_rows.data(), h_w.data(), rows_b.size(), OC, C);
    const std::vector<float> h_dw0_rows = download_rows(gw.start, C, rows_w);
    std::vector<double> ref_dw(h_dw0_rows.begin(), h_dw0_rows.end());  // += dout^T inp
    add_weighted_rows(ref_dw.data(), h_dout_cols.data(), h_inp.data(), rows_w.size(), N, C);
    std::vector<double> ref_db, ref_db_new;
    if (cs.bias) {
        const std::vector<float> h_db0 = download(gb.start, OC);
        ref_db_new.assign(OC, 0.0);
        const std::vector<float> h_dout = download(dout, (size_t)N * OC);
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) ref_db_new[o] += h_dout[(size_t)n * OC + o];
        }
        ref_db.resize(OC);
        for (int o = 0; o < OC; o++) ref_db[o] = h_db0[o] + ref_db_new[o];
    }
    std::vector<double> ref_dw_new(ref_dw.size());  // without the start values: accumulate_grads = false
    for (size_t i = 0; i < ref_dw.size(); i++) ref_dw_new[i] = ref_dw[i] - h_dw0_rows[i];
    const std::string brows = rows_b.size() < (size_t)N ? strfmt(", %zu rows", rows_b.size()) : "";
    const std::string wrows = rows_w.size() < (size_t)OC ? strfmt(", %zu rows", rows_w.size()) : "";

    for (int v = 0; v < (cs.dgelu ? 2 : 1) * pad_variants; v++) {
        const int with_dgelu = cs.dgelu ? v % 2 : 0;
        const bool padded = v / (cs.dgelu ? 2 : 1) == 1;
        const std::string kernel = std::string("matmul_backward") + (cs.bias ? "+bias" : "") + (with_dgelu ? "+dgelu" : "") +
                                   (padded ? "+pad" : "");
        const floatX* dg = with_dgelu ? dgelu_in : nullptr;
        const floatX* x = padded ? inp_pad : inp;
        const int x_ld = padded ? LD : 0;
        auto launch = [&] {
            matmul_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, x, weight, dg, N, C, OC, 0, x_ld);
        };
        restore();
        launch();
        lab_sync();

        std::vector<double> ref_dinp = ref_dinp_lin;
        if (with_dgelu) {
            const std::vector<float> h_dg = download_rows(dgelu_in, C, rows_b);
            for (size_t i = 0; i < ref_dinp.size(); i++) ref_dinp[i] *= gelu_grad_ref(h_dg[i]);
        }
        check_close(kernel + " dinp [" + shape + brows + "]", download_rows(dinp, C, rows_b), ref_dinp, TOL_BF16);
        check_close(kernel + " dweight += [" + shape + wrows + "]", download_rows(dweight, C, rows_w), ref_dw, TOL_BF16);
        if (cs.bias) check_close(kernel + " dbias += [" + shape + "]", download(dbias, OC), ref_db, TOL_BF16);
        const size_t bad = count_nonfinite(dinp, (size_t)N * C) + count_nonfinite(dweight, (size_t)OC * C);
        check(kernel + " writes every element [" + shape + "]", bad == 0, strfmt("%zu NaN/Inf left", bad));

        copy_device(dinp1, dinp, (size_t)N * C);
        gw.keep_first();
        gb.keep_first();
        restore();
        launch();
        lab_sync();
        const size_t diff = count_bit_differences(dinp, dinp1, (size_t)N * C) + gw.bit_differences() + gb.bit_differences();
        check(kernel + " deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));

        // accumulate_grads = false (an optimizer step's first micro-step): dweight / dbias written, not read;
        // they start as NaN, so an element left unwritten (or read) shows
        restore();
        poison(dweight, (size_t)OC * C);
        if (cs.bias) poison(dbias, OC);
        matmul_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, x, weight, dg, N, C, OC, 0, x_ld, false);
        lab_sync();
        check_close(kernel + " dweight = [" + shape + wrows + "]", download_rows(dweight, C, rows_w), ref_dw_new, TOL_BF16);
        if (cs.bias) check_close(kernel + " dbias = [" + shape + "]", download(dbias, OC), ref_db_new, TOL_BF16);
        const size_t bad_new = count_nonfinite(dweight, (size_t)OC * C) + (cs.bias ? count_nonfinite(dbias, OC) : 0);
        check(kernel + " dweight / dbias = write every element [" + shape + "]", bad_new == 0,
              strfmt("%zu NaN/Inf left", bad_new));

        const float ms = time_ms(launch);
        report(kernel, strfmt("%s %dx%dx%d", cs.name, N, C, OC), ms,
               ((double)N * OC * (cs.bias ? 2 : 1) + (double)N * C * (with_dgelu ? 3 : 2) + 3.0 * OC * C) * sizeof(floatX),
               2 * fwd_flops);
    }
}

int main() {
    lab_init("matmul");
    const int BT = 8 * 1024, C = 768, Vp = GPT2_PADDED_VOCAB_SIZE;  // GPT-2 d12, B*T = 8*1024
    const int BT64 = 64 * 1024;                     // the trainer's B=64, T=1024
    const Case cases[] = {
        {"qkv", BT, C, 3 * C, true, false, false},
        {"attproj", BT, C, C, true, false, false},
        {"fc", BT, C, 4 * C, true, true, false},
        {"fcproj", BT, 4 * C, C, true, false, true},  // its dinp is the fc output gradient: dgelu fused there
        {"lm_head", BT, C, Vp, false, false, false},
        {"qkv@B64", BT64, C, 3 * C, true, false, false},
        {"fc@B64", BT64, C, 4 * C, true, true, false},
        {"attproj@B64", BT64, C, C, true, false, false},  // the residual-add forwards at the benchmark's size
        {"fcproj@B64", BT64, 4 * C, C, true, false, false},
        {"odd", 37, 40, 72, true, true, true},
        {"odd_nobias", 37, 40, 72, false, true, true},
    };
    for (const Case& cs : cases) run_case(cs);
    return lab_finish();
}
