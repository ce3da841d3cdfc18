/*
 * Lab for llmc/gelu.cuh (tanh GELU) against a CPU reference in double from the same bf16 values:
 *   gelu_forward   out = gelu(inp)                    poisoned first
 *   gelu_backward  dinp = dout * gelu'(inp)           poisoned first, and in place (dinp == dout)
 * Inputs span [-6, 6] so both tails and the curved middle are covered. Exit status 1 if any check fails.
 */
#include "llmc/gelu.cuh"
#include "common.h"

static void run_size(size_t n, const char* what) {
    const std::string shape = strfmt("n=%zu%s", n, what);
    printf("-- %s\n", shape.c_str());
    floatX* inp = lab_uniform<floatX>(n, -6.f, 6.f);
    floatX* dout = lab_uniform<floatX>(n, -1.f, 1.f);
    floatX* out = lab_alloc<floatX>(n);
    floatX* dinp = lab_alloc<floatX>(n);
    const std::vector<float> h_inp = download(inp, n), h_dout = download(dout, n);
    std::vector<double> ref_fwd(n), ref_bwd(n);
    for (size_t i = 0; i < n; i++) {
        ref_fwd[i] = gelu_ref(h_inp[i]);
        ref_bwd[i] = h_dout[i] * gelu_grad_ref(h_inp[i]);
    }

    poison(out, n);
    gelu_forward(out, inp, n, 0);
    lab_sync();
    check_close("gelu_forward out [" + shape + "]", download(out, n), ref_fwd, TOL_BF16);

    poison(dinp, n);
    gelu_backward(dinp, inp, dout, n, 0);
    lab_sync();
    check_close("gelu_backward dinp [" + shape + "]", download(dinp, n), ref_bwd, TOL_BF16);

    copy_device(dinp, dout, n);
    gelu_backward(dinp, inp, dinp, n, 0);  // in place, as the trainer calls it
    lab_sync();
    check_close("gelu_backward in place [" + shape + "]", download(dinp, n), ref_bwd, TOL_BF16);

    const float fwd_ms = time_ms([&] { gelu_forward(out, inp, n, 0); });
    report("gelu_forward", shape, fwd_ms, 2.0 * n * sizeof(floatX));
    const float bwd_ms = time_ms([&] { gelu_backward(dinp, inp, dout, n, 0); });
    report("gelu_backward", shape, bwd_ms, 3.0 * n * sizeof(floatX));
}

int main() {
    lab_init("gelu");
    run_size((size_t)8 * 1024 * 4 * 768, " (d12 B*T*4C)");
    run_size((size_t)4 * 1024 * 4 * 1600, " (d48 B=4)");
    run_size(37 * 8, " (odd)");
    run_size(8, " (one vector)");
    return lab_finish();
}
