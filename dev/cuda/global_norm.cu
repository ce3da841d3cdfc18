/*
 * Lab for llmc/global_norm.cuh: global_norm_squared, out = sum of g^2 over a bf16 buffer, against a CPU
 * sum in double from the same values. out and the partials are poisoned first; two runs must be
 * bitwise equal. Sizes: all GPT-2 d12 gradients, the wte gradient, and odd sizes that exercise the scalar
 * tail (n not a multiple of 8, fewer elements than one vector, fewer than the grid). Exit status 1 on failure.
 */
#include "llmc/global_norm.cuh"
#include "llmc/gpt2_vocab.h"
#include "common.h"

static void run_size(size_t n, const char* what) {
    const std::string shape = strfmt("n=%zu%s", n, what);
    printf("-- %s\n", shape.c_str());
    floatX* grads = lab_alloc<floatX>(n);
    float* partials = lab_alloc<float>(GLOBAL_NORM_BLOCKS);
    float* out = lab_alloc<float>(1);
    float* out1 = lab_alloc<float>(1);
    fill_uniform(grads, n, -1e-2f, 1e-2f);
    const std::vector<float> h = download(grads, n);
    double ref = 0;
    for (float g : h) ref += (double)g * g;

    poison(out, 1);
    poison(partials, GLOBAL_NORM_BLOCKS);
    global_norm_squared(out, partials, grads, n, 0);
    lab_sync();
    // fp32 sums of up to ~500 squares per thread: ~1e-6 relative expected, 1e-4 allowed
    check_close("global_norm_squared [" + shape + "]", download(out, 1), {ref}, Tol{1e-4, 0, 1e-4});

    copy_device(out1, out, 1);
    poison(out, 1);
    poison(partials, GLOBAL_NORM_BLOCKS);
    global_norm_squared(out, partials, grads, n, 0);
    lab_sync();
    const size_t diff = count_bit_differences(out, out1, 1);
    check("global_norm_squared deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));

    const float ms = time_ms([&] { global_norm_squared(out, partials, grads, n, 0); });
    report("global_norm_squared", shape, ms, (double)n * sizeof(floatX));
}

int main() {
    lab_init("global_norm");
    run_size(124475904, " (d12 all grads)");
    run_size((size_t)GPT2_PADDED_VOCAB_SIZE * 768, " (d12 wte)");
    run_size(1000003, " (odd)");
    run_size(37, " (odd)");
    run_size(5, " (< one vector)");
    return lab_finish();
}
