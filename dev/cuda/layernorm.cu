/*
 * Lab for llmc/layernorm.cuh against a CPU reference in double from the same bf16 values:
 *   layernorm_forward       out =, mean/rstd = (also with out == nullptr: statistics only); the row held
 *                           in registers up to C = 4096, re-read beyond (the shape C=8200)
 *   layernorm_recompute     out = from saved mean/rstd
 *   layernorm_backward      dinp +=, dweight +=, dbias +=, dinp_colsum += (per-block partials +
 *                           llmc/column_reduce.cuh), deterministic; also without dinp_colsum, and with
 *                           the parameter gradients written (=, from NaN) instead of accumulated; and the
 *                           column-owner kernel at every grid of a sweep (rows per group x blocks per SM)
 * Outputs that are overwritten are poisoned first; accumulated ones start from random values. The
 * backward runs twice from the same state and must be bitwise equal. Exit status 1 if any check fails.
 */
#include "llmc/layernorm.cuh"
#include "common.h"

struct Shape {
    int N, C;
};

// mean and rstd of one row, in double
static void row_stats(const float* x, int C, double* mean, double* rstd) {
    double sum = 0, sq = 0;
    for (int c = 0; c < C; c++) sum += x[c];
    const double m = sum / C;
    for (int c = 0; c < C; c++) sq += (x[c] - m) * (x[c] - m);
    *mean = m;
    *rstd = 1.0 / std::sqrt(sq / C + (double)LAYERNORM_EPS);
}

// out, mean, rstd of the rows of x (N, C)
static void layernorm_ref(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b, int N,
                          int C, std::vector<double>* out, std::vector<double>* mean, std::vector<double>* rstd) {
    out->resize((size_t)N * C);
    mean->resize(N);
    rstd->resize(N);
    for (int r = 0; r < N; r++) {
        const float* xr = x.data() + (size_t)r * C;
        row_stats(xr, C, &(*mean)[r], &(*rstd)[r]);
        for (int c = 0; c < C; c++) (*out)[(size_t)r * C + c] = (xr[c] - (*mean)[r]) * (*rstd)[r] * w[c] + b[c];
    }
}

// ref (N, C) laid out with row stride ld, the padding columns as (1, 0, ..., 0): the ones column
static std::vector<double> with_ones_column(const std::vector<double>& ref, int N, int C, int ld) {
    std::vector<double> out((size_t)N * ld, 0.0);
    for (int r = 0; r < N; r++) {
        std::copy(ref.begin() + (size_t)r * C, ref.begin() + (size_t)(r + 1) * C, out.begin() + (size_t)r * ld);
        out[(size_t)r * ld + C] = 1.0;
    }
    return out;
}

// Poisons out_pad (N, LD), runs launch() and checks that out_pad holds ref (N, C) followed by the
// ones column in each row.
static void check_padded(const std::string& what, floatX* out_pad, int N, int C, int LD, const std::vector<double>& ref,
                         const std::function<void()>& launch) {
    poison(out_pad, (size_t)N * LD);
    launch();
    lab_sync();
    check_close(what, download(out_pad, (size_t)N * LD), with_ones_column(ref, N, C, LD), TOL_BF16);
}

static void run_shape(const Shape& s) {
    const int N = s.N, C = s.C;
    const size_t NC = (size_t)N * C;
    const std::string shape = strfmt("N=%d C=%d", N, C);
    printf("-- %s\n", shape.c_str());

    floatX* inp = lab_uniform<floatX>(NC, -1.f, 3.f);  // mean ~1: the centring matters
    floatX* weight = lab_uniform<floatX>(C, 0.5f, 1.5f);
    floatX* bias = lab_uniform<floatX>(C, -0.5f, 0.5f);
    floatX* out = lab_alloc<floatX>(NC);
    const int LD = C + 8;  // padded output, as the trainer's ln1/ln2 (MATMUL_BIAS_PAD in llmc/matmul.cuh)
    floatX* out_pad = lab_alloc<floatX>((size_t)N * LD);
    float* mean = lab_alloc<float>(N);
    float* rstd = lab_alloc<float>(N);
    const std::vector<float> h_inp = download(inp, NC);
    const std::vector<float> h_w = download(weight, C), h_b = download(bias, C);
    std::vector<double> ref_out, ref_mean, ref_rstd;

    // ---- layernorm_forward
    layernorm_ref(h_inp, h_w, h_b, N, C, &ref_out, &ref_mean, &ref_rstd);
    // into o (nullptr: statistics only), every output poisoned first
    auto check_forward = [&](floatX* o, const std::string& variant) {
        if (o) poison(o, NC);
        poison(mean, N);
        poison(rstd, N);
        layernorm_forward(o, mean, rstd, inp, weight, bias, N, C, 0);
        lab_sync();
        if (o) check_close("layernorm_forward out [" + shape + "]", download(o, NC), ref_out, TOL_BF16);
        check_close("layernorm_forward " + variant + "mean [" + shape + "]", download(mean, N), ref_mean, TOL_FP32);
        check_close("layernorm_forward " + variant + "rstd [" + shape + "]", download(rstd, N), ref_rstd, TOL_FP32);
    };
    check_forward(out, "");
    check_forward(nullptr, "stats only, ");
    check_padded("layernorm_forward out, row stride C+8 with the ones column [" + shape + "]", out_pad, N, C, LD,
                 ref_out, [&] { layernorm_forward(out_pad, mean, rstd, inp, weight, bias, N, C, 0, LD); });
    const float fwd_ms = time_ms([&] { layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, 0); });
    report("layernorm_forward", shape, fwd_ms, 2.0 * NC * sizeof(floatX) + 8.0 * N);

    // the statistics the recompute and the backward read: the reference's, rounded to fp32
    std::vector<float> f_mean(ref_mean.begin(), ref_mean.end()), f_rstd(ref_rstd.begin(), ref_rstd.end());
    upload(mean, f_mean);
    upload(rstd, f_rstd);

    // ---- layernorm_recompute
    {
        std::vector<double> ref((size_t)NC);
        for (int r = 0; r < N; r++) {
            for (int c = 0; c < C; c++) {
                const size_t i = (size_t)r * C + c;
                ref[i] = ((double)h_inp[i] - f_mean[r]) * f_rstd[r] * h_w[c] + h_b[c];
            }
        }
        poison(out, NC);
        layernorm_recompute(out, inp, mean, rstd, weight, bias, N, C, 0);
        lab_sync();
        check_close("layernorm_recompute out [" + shape + "]", download(out, NC), ref, TOL_BF16);
        check_padded("layernorm_recompute out, row stride C+8 with the ones column [" + shape + "]", out_pad, N, C, LD,
                     ref, [&] { layernorm_recompute(out_pad, inp, mean, rstd, weight, bias, N, C, 0, LD); });
        const float ms = time_ms([&] { layernorm_recompute(out, inp, mean, rstd, weight, bias, N, C, 0); });
        report("layernorm_recompute", shape, ms, 2.0 * NC * sizeof(floatX) + 8.0 * N);
    }

    // ---- layernorm_backward
    {
        floatX* dout = lab_uniform<floatX>(NC, -1.f, 1.f);
        // all four accumulate (+=)
        const Accumulated<floatX> gi(NC, -1.f, 1.f), gw(C, -1.f, 1.f), gb(C, -1.f, 1.f), gc(C, -1.f, 1.f);
        floatX *dinp = gi.live, *dweight = gw.live, *dbias = gb.live, *dcol = gc.live;
        float* scratch = lab_alloc<float>(layernorm_backward_scratch_floats(lab_ctx(), N, C));
        auto restore = [&] {
            for (const Accumulated<floatX>* g : {&gi, &gw, &gb, &gc}) g->restore();
            poison(scratch, layernorm_backward_scratch_floats(lab_ctx(), N, C));  // partials must all be written before use
        };
        restore();
        layernorm_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, 0, dcol);
        lab_sync();

        const std::vector<float> h_dout = download(dout, NC);
        const std::vector<float> h_dinp0 = download(gi.start, NC);
        const std::vector<float> h_dw0 = download(gw.start, C), h_db0 = download(gb.start, C);
        std::vector<double> ref_dinp(NC), ref_dw(h_dw0.begin(), h_dw0.end()), ref_db(h_db0.begin(), h_db0.end());
        const std::vector<float> h_dcol0 = download(gc.start, C);
        std::vector<double> ref_dcol(h_dcol0.begin(), h_dcol0.end());
        std::vector<double> norm(C), dnorm(C);
        for (int r = 0; r < N; r++) {
            double mean_dnorm = 0, mean_dnorm_norm = 0;
            for (int c = 0; c < C; c++) {
                const size_t i = (size_t)r * C + c;
                norm[c] = ((double)h_inp[i] - f_mean[r]) * f_rstd[r];
                dnorm[c] = (double)h_dout[i] * h_w[c];
                mean_dnorm += dnorm[c];
                mean_dnorm_norm += dnorm[c] * norm[c];
                ref_dw[c] += (double)h_dout[i] * norm[c];
                ref_db[c] += h_dout[i];
            }
            mean_dnorm /= C;
            mean_dnorm_norm /= C;
            for (int c = 0; c < C; c++) {
                const size_t i = (size_t)r * C + c;
                ref_dinp[i] = h_dinp0[i] + f_rstd[r] * (dnorm[c] - mean_dnorm - norm[c] * mean_dnorm_norm);
                ref_dcol[c] += round_floatX((float)ref_dinp[i]);  // the kernel sums the stored (rounded) dinp
            }
        }
        check_close("layernorm_backward dinp += [" + shape + "]", download(dinp, NC), ref_dinp, TOL_BF16);
        check_close("layernorm_backward dweight += [" + shape + "]", download(dweight, C), ref_dw, TOL_BF16);
        check_close("layernorm_backward dbias += [" + shape + "]", download(dbias, C), ref_db, TOL_BF16);
        check_close("layernorm_backward dinp_colsum += [" + shape + "]", download(dcol, C), ref_dcol, TOL_BF16);

        for (const Accumulated<floatX>* g : {&gi, &gw, &gb, &gc}) g->keep_first();
        restore();
        layernorm_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, 0, dcol);
        lab_sync();
        size_t diff = gi.bit_differences() + gw.bit_differences() + gb.bit_differences() + gc.bit_differences();
        check("layernorm_backward deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));
        restore();
        layernorm_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, 0);  // no dinp_colsum
        lab_sync();
        // the other template instance: same results up to how the compiler contracts multiply-adds
        check_close("layernorm_backward (no dinp_colsum) dinp += [" + shape + "]", download(dinp, NC), ref_dinp, TOL_BF16);
        check_close("layernorm_backward (no dinp_colsum) dweight += [" + shape + "]", download(dweight, C), ref_dw, TOL_BF16);
        check_close("layernorm_backward (no dinp_colsum) dbias += [" + shape + "]", download(dbias, C), ref_db, TOL_BF16);
        diff = count_bit_differences(dcol, gc.start, C);
        check("layernorm_backward without dinp_colsum leaves it untouched [" + shape + "]", diff == 0,
              strfmt("%zu bytes differ", diff));

        // accumulate_params = false (an optimizer step's first micro-step): dweight, dbias and dinp_colsum
        // written from NaN, not read; dinp still +=
        restore();
        poison(dweight, C);
        poison(dbias, C);
        poison(dcol, C);
        layernorm_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, 0, dcol, false);
        lab_sync();
        {
            std::vector<double> rw(C), rb(C), rc(C);
            for (int c = 0; c < C; c++) {
                rw[c] = ref_dw[c] - h_dw0[c];
                rb[c] = ref_db[c] - h_db0[c];
                rc[c] = ref_dcol[c] - h_dcol0[c];
            }
            check_close("layernorm_backward (params =) dinp += [" + shape + "]", download(dinp, NC), ref_dinp, TOL_BF16);
            check_close("layernorm_backward dweight = [" + shape + "]", download(dweight, C), rw, TOL_BF16);
            check_close("layernorm_backward dbias = [" + shape + "]", download(dbias, C), rb, TOL_BF16);
            check_close("layernorm_backward dinp_colsum = [" + shape + "]", download(dcol, C), rc, TOL_BF16);
        }

        const float ms = time_ms([&] { layernorm_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, 0); });
        // minimum: read dout, inp, dinp; write dinp (the parameter gradients are small)
        report("layernorm_backward", shape, ms, 4.0 * NC * sizeof(floatX) + 8.0 * N);
        const float ms2 = time_ms([&] { layernorm_backward(lab_ctx(), dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, 0, dcol); });
        report("layernorm_backward +dinp_colsum", shape, ms2, 4.0 * NC * sizeof(floatX) + 8.0 * N);
        // of which the last step: the per-block partials (3, blocks, C) added into the three gradients
        const LayerNormBackwardGrid g = layernorm_backward_grid(lab_ctx(), N, C, true);
        const int blocks = g.blocks;
        printf("layernorm_backward grid [%s]: %d blocks of %d warps, %zu bytes of shared memory each\n", shape.c_str(),
               g.blocks, g.warps, g.smem);
        floatX* outs[] = {dweight, dbias, dcol};
        const float ms3 = time_ms([&] { column_finish(outs, 3, scratch, blocks, C, 0); });
        report(strfmt("  of which column_finish (%d blocks)", blocks), shape, ms3, 3.0 * blocks * C * sizeof(float));

        // The column-owner kernel's grid: rows per group R x resident blocks per SM (the build's choice is
        // LAYERNORM_BWD_COL_ROWS / _BLOCKS_PER_SM). Every variant is checked against the reference, and
        // timed (with dinp_colsum) at the shapes large enough to fill the GPU.
        if (layernorm_backward_uses_columns(C)) {
            const int sms = lab_ctx().props.multiProcessorCount;
            for (int R : {1, 2, 4, 8}) {
                int last_per_sm = 0;
                for (int cap : {1, 2, 3, 4, 6, 8, 16}) {
                    const int per_sm = layernorm_backward_columns_per_sm(C, true, R, cap);
                    if (per_sm == last_per_sm) continue;  // occupancy already reached
                    last_per_sm = per_sm;
                    const int nb = std::min(per_sm * sms, ceil_div(N, R));
                    float* scr = lab_alloc<float>((size_t)3 * nb * C);
                    const std::string v = strfmt("R=%d, %d blocks (%d per SM)", R, nb, per_sm);
                    restore();
                    poison(scr, (size_t)3 * nb * C);
                    layernorm_backward_columns(R, nb, dinp, dweight, dbias, scr, dout, inp, weight, mean, rstd, N, C, 0,
                                               dcol);
                    lab_sync();
                    check_close("layernorm_backward columns " + v + " dinp [" + shape + "]", download(dinp, NC), ref_dinp, TOL_BF16);
                    check_close("layernorm_backward columns " + v + " dweight [" + shape + "]", download(dweight, C), ref_dw, TOL_BF16);
                    check_close("layernorm_backward columns " + v + " dbias [" + shape + "]", download(dbias, C), ref_db, TOL_BF16);
                    check_close("layernorm_backward columns " + v + " dinp_colsum [" + shape + "]", download(dcol, C), ref_dcol, TOL_BF16);
                    if (N >= 4096) {
                        const float t = time_ms([&] {
                            layernorm_backward_columns(R, nb, dinp, dweight, dbias, scr, dout, inp, weight, mean, rstd,
                                                       N, C, 0, dcol);
                        });
                        report("  columns +dinp_colsum " + v, shape, t, 4.0 * NC * sizeof(floatX) + 8.0 * N);
                    }
                }
            }
        }
    }
}

int main() {
    lab_init("layernorm");
    const Shape shapes[] = {
        {8 * 1024, 768},   // GPT-2 d12, B*T = 8*1024
        {64 * 1024, 768},  // d12 at the trainer's B=64, T=1024 (timings at B=8 do not scale)
        {2048, 1600},     // d48 width
        {8 * 1024, 1600}, // d48 at the trainer's B=8, T=1024: about one wave of backward blocks
        {37, 40},         // odd rows (not a multiple of 8 per block), C not a multiple of 256
        {64, 4096},       // d64 width: the backward's 8 warps of accumulators exceed shared memory (4 on an H200)
        {24, 8200},       // wider still (2 warps on an H200); C not a multiple of 256
    };
    for (const Shape& s : shapes) run_shape(s);
    return lab_finish();
}
