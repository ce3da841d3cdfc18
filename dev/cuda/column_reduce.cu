/*
 * Lab for llmc/column_reduce.cuh: bias_backward, dbias(OC) += column sums of dout(N, OC), against a
 * CPU sum in double from the same bf16 values. The fp32 scratch is poisoned first (every partial the
 * finishing kernel reads must have been written); dbias starts from random values (+=), or NaN with
 * accumulate = false (=); two runs from the same state must be bitwise equal. (layernorm_param_backward, the other user of these kernels, is
 * checked by the layernorm lab.)
 * column_finish alone: random partials (outputs, chunks, OC) against a host sum in the kernel's
 * documented fp32 order (group g adds chunks g, g + 8, ... in order, then the groups in order), which
 * must match bit for bit (the order is what keeps the trainer's results reproducible; a change of it
 * fails here), += and =; timed at the LayerNorm backward's partial shapes.
 * Exit status 1 if any check fails.
 */
#include "llmc/column_reduce.cuh"
#include "common.h"

struct Shape {
    int N, OC;
};

static void run_shape(const Shape& s) {
    const int N = s.N, OC = s.OC;
    const size_t n = (size_t)N * OC;
    const std::string shape = strfmt("N=%d OC=%d", N, OC);
    printf("-- %s (%d row chunks)\n", shape.c_str(), column_reduce_row_chunks(lab_ctx(), N, OC));

    floatX* dout = lab_alloc<floatX>(n);
    floatX* dbias = lab_alloc<floatX>(OC);
    floatX* dbias0 = lab_alloc<floatX>(OC);
    floatX* dbias1 = lab_alloc<floatX>(OC);
    const size_t scratch_n = column_reduce_scratch_floats(lab_ctx(), N, OC);
    float* scratch = lab_alloc<float>(scratch_n);
    fill_uniform(dout, n, -1.f, 1.f);
    fill_uniform(dbias0, OC, -1.f, 1.f);
    auto restore = [&] {
        copy_device(dbias, dbias0, OC);
        poison(scratch, scratch_n);
    };
    restore();
    bias_backward(lab_ctx(), dbias, dout, scratch, N, OC, 0);
    lab_sync();

    const std::vector<float> h_dout = download(dout, n), h_db0 = download(dbias0, OC);
    std::vector<double> ref(h_db0.begin(), h_db0.end());
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < OC; c++) ref[c] += h_dout[(size_t)r * OC + c];
    }
    check_close("bias_backward dbias += [" + shape + "]", download(dbias, OC), ref, TOL_BF16);

    copy_device(dbias1, dbias, OC);
    restore();
    bias_backward(lab_ctx(), dbias, dout, scratch, N, OC, 0);
    lab_sync();
    const size_t diff = count_bit_differences(dbias, dbias1, OC);
    check("bias_backward deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));

    // accumulate = false: dbias written from NaN (not read)
    restore();
    poison(dbias, OC);
    bias_backward(lab_ctx(), dbias, dout, scratch, N, OC, 0, false);
    lab_sync();
    std::vector<double> ref_new(OC);
    for (int c = 0; c < OC; c++) ref_new[c] = ref[c] - h_db0[c];
    check_close("bias_backward dbias = [" + shape + "]", download(dbias, OC), ref_new, TOL_BF16);

    const float ms = time_ms([&] { bias_backward(lab_ctx(), dbias, dout, scratch, N, OC, 0); });
    report("bias_backward", shape, ms, (double)n * sizeof(floatX) + 2.0 * OC * sizeof(floatX));
}

// column_finish over (n_out, chunks, OC) random partials, against the host emulation of its fixed order.
static void run_finish(int n_out, int chunks, int OC, bool timed) {
    const std::string shape = strfmt("outputs=%d chunks=%d OC=%d", n_out, chunks, OC);
    const size_t n = (size_t)n_out * chunks * OC;
    float* partial = lab_alloc<float>(n);
    floatX* outs[COLUMN_FINISH_MAX_OUTPUTS] = {};
    floatX* out0 = lab_alloc<floatX>((size_t)n_out * OC);
    for (int a = 0; a < n_out; a++) outs[a] = lab_alloc<floatX>(OC);
    fill_uniform(partial, n, -1.f, 1.f);
    fill_uniform(out0, (size_t)n_out * OC, -1.f, 1.f);
    const std::vector<float> hp = download(partial, n), h0 = download(out0, (size_t)n_out * OC);
    for (bool accumulate : {true, false}) {
        for (int a = 0; a < n_out; a++) {
            if (accumulate) copy_device(outs[a], out0 + (size_t)a * OC, OC);
            else poison(outs[a], OC);
        }
        column_finish(outs, n_out, partial, chunks, OC, 0, accumulate);
        lab_sync();
        size_t mismatched = 0;
        for (int a = 0; a < n_out; a++) {
            const std::vector<float> got = download(outs[a], OC);
            for (int c = 0; c < OC; c++) {
                float total = 0.f;
                for (int g = 0; g < COLUMN_FINISH_GROUPS; g++) {
                    float sum = 0.f;
                    for (int i = g; i < chunks; i += COLUMN_FINISH_GROUPS) sum += hp[((size_t)a * chunks + i) * OC + c];
                    total += sum;
                }
                const float want = round_floatX(accumulate ? h0[(size_t)a * OC + c] + total : total);
                mismatched += float_bits(got[c]) != float_bits(want);
            }
        }
        check(strfmt("column_finish %s, fixed order bitwise [%s]", accumulate ? "+=" : "=", shape.c_str()),
              mismatched == 0, strfmt("%zu of %zu outputs differ from the host's fixed-order sum", mismatched,
                                      (size_t)n_out * OC));
    }
    if (timed) {
        const float ms = time_ms([&] { column_finish(outs, n_out, partial, chunks, OC, 0, true); });
        report("column_finish", shape, ms, (double)n * sizeof(float) + 2.0 * n_out * OC * sizeof(floatX));
    }
}

int main() {
    lab_init("column_reduce");
    // the LayerNorm backward's partials: one chunk per block (layernorm_backward_blocks), 3 outputs with
    // the dinp column sum; odd chunk counts (groups of unequal length) and small outputs
    const int sms = lab_ctx().props.multiProcessorCount;
    run_finish(3, 8 * sms, 768, true);
    run_finish(3, 4 * sms, 1600, true);
    run_finish(2, 8 * sms, 1600, true);
    run_finish(3, 1, 40, false);
    run_finish(2, 7, 8, false);
    run_finish(1, 135, 72, false);
    run_finish(3, 16 * 8 + 9, 264, false);
    const Shape shapes[] = {
        {8 * 1024, 768},       // GPT-2 d12: attproj / fcproj bias
        {8 * 1024, 3 * 768},   // qkv bias
        {8 * 1024, 4 * 768},   // fc bias
        {8 * 1024, 4 * 1600},  // d48 fc bias (more columns than 2 blocks per SM)
        {64 * 1024, 3 * 768},  // qkv and fc bias at the trainer's B=64, T=1024
        {64 * 1024, 4 * 768},
        {37, 40},              // odd: rows not a multiple of the warps, one partial column block
        {3, 8},                // fewer rows than warps
    };
    for (const Shape& s : shapes) run_shape(s);
    return lab_finish();
}
