/*
 * Lab for llmc/fused_classifier.cuh (softmax + cross-entropy + dlogits in place) against a CPU reference
 * in double from the same bf16 logits:
 *   losses += -log softmax(logits[:V])[target]      losses start from random values (+=)
 *   logits  = dloss * (softmax - onehot), padded columns V..Vp = 0      when write_dlogits
 *   logits untouched (bitwise)                                          when not
 * The padded columns are filled with NaN: they must not reach the loss and must come back as 0. Every
 * fifth row is shifted by +80 (exp would overflow fp32 without the max subtraction). Targets include 0 and
 * V-1. At the big shape the CPU checks 64 sampled rows in full; GPU scans check every row for NaN/Inf and
 * nonzero padding. Two runs from the same input must be bitwise equal. Exit status 1 if any check fails.
 */
#include "llmc/fused_classifier.cuh"
#include "llmc/gpt2_vocab.h"
#include "common.h"

struct Shape {
    int N, V, Vp;
};

__global__ void prepare_logits_kernel(floatX* logits, int N, int V, int Vp) {
    const size_t n = (size_t)N * Vp;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int row = (int)(i / Vp), col = (int)(i % Vp);
        if (col >= V) logits[i] = (floatX)NAN;
        else if (row % 5 == 1) logits[i] = (floatX)((float)logits[i] + 80.0f);
    }
}

__global__ void count_nonzero_padding_kernel(const floatX* logits, int N, int V, int Vp, unsigned long long* count) {
    const size_t pad = Vp - V, n = (size_t)N * pad;
    unsigned long long local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = (float)logits[(i / pad) * Vp + V + i % pad];
        local += (v != 0.0f || lab_nonfinite(v)) ? 1 : 0;
    }
    if (local) atomicAdd(count, local);
}

static void run_shape(const Shape& s) {
    const int N = s.N, V = s.V, Vp = s.Vp;
    const size_t n = (size_t)N * Vp;
    const std::string shape = strfmt("N=%d V=%d Vp=%d", N, V, Vp);
    printf("-- %s\n", shape.c_str());
    const float dloss = 1.0f / (N * 3);  // as with 3 gradient accumulation steps

    floatX* logits = lab_alloc<floatX>(n);
    floatX* logits0 = lab_alloc<floatX>(n);  // the input, to restore after the in-place kernel
    floatX* dlogits1 = lab_alloc<floatX>(n);
    float* losses = lab_alloc<float>(N);
    float* losses0 = lab_alloc<float>(N);
    float* losses1 = lab_alloc<float>(N);
    int* targets = lab_alloc<int>(N);
    fill_uniform(logits0, n, -8.f, 8.f);
    prepare_logits_kernel<<<lab_grid(n), 256>>>(logits0, N, V, Vp);
    cudaCheckLaunch();
    fill_uniform(losses0, N, 0.f, 1.f);
    std::vector<int> h_targets(N);
    for (int& t : h_targets) t = (int)host_random_below(V);
    h_targets[0] = 0;
    h_targets[N - 1] = V - 1;
    upload_ints(targets, h_targets);
    auto restore = [&] {
        copy_device(logits, logits0, n);
        copy_device(losses, losses0, N);
    };

    // reference for the sampled rows
    const std::vector<int> rows = sample_rows(N, 64);
    const std::string note = rows.size() < (size_t)N ? strfmt(", %zu rows", rows.size()) : "";
    const std::vector<float> h_logits = download_rows(logits0, Vp, rows);
    const std::vector<float> h_losses0 = download(losses0, N);
    std::vector<double> ref_loss(rows.size()), ref_dlogits(rows.size() * Vp, 0.0);
    for (size_t i = 0; i < rows.size(); i++) {
        const float* x = &h_logits[i * Vp];
        const int target = h_targets[rows[i]];
        double m = -INFINITY, sum = 0;
        for (int c = 0; c < V; c++) m = std::max(m, (double)x[c]);
        for (int c = 0; c < V; c++) sum += std::exp(x[c] - m);
        ref_loss[i] = h_losses0[rows[i]] + m + std::log(sum) - x[target];
        for (int c = 0; c < V; c++) ref_dlogits[i * Vp + c] = (std::exp(x[c] - m) / sum - (c == target)) * dloss;
    }
    auto sampled_losses = [&] {
        const std::vector<float> all = download(losses, N);
        std::vector<float> out;
        for (int r : rows) out.push_back(all[r]);
        return out;
    };
    const Tol tol_loss = {1e-4, 1e-5, 1e-4};
    const Tol tol_dlogits = {1e-2, 1e-5, 1e-2};  // values span decades (dloss * p): a tiny absolute floor

    // ---- loss only
    restore();
    fused_classifier(logits, losses, targets, dloss, N, V, Vp, false, 0);
    lab_sync();
    check_close("fused_classifier losses += (no dlogits) [" + shape + note + "]", sampled_losses(), ref_loss, tol_loss);
    const std::vector<float> losses_alone = download(losses, N);
    size_t diff = count_bit_differences(logits, logits0, n);
    check("fused_classifier leaves logits alone (no dlogits) [" + shape + "]", diff == 0, strfmt("%zu bytes changed", diff));

    // ---- loss and dlogits in place
    restore();
    fused_classifier(logits, losses, targets, dloss, N, V, Vp, true, 0);
    lab_sync();
    check_close("fused_classifier losses += [" + shape + note + "]", sampled_losses(), ref_loss, tol_loss);
    check_close("fused_classifier dlogits [" + shape + note + "]", download_rows(logits, Vp, rows), ref_dlogits, tol_dlogits);
    // the loss must not depend on whether dlogits are written (the same fp32 sum either way)
    check("fused_classifier losses identical with and without dlogits [" + shape + "]",
          download(losses, N) == losses_alone);
    const size_t bad = count_nonfinite(logits, n) + count_nonfinite(losses, N);
    cudaCheck(cudaMemset(lab().d_counter, 0, sizeof(unsigned long long)));
    count_nonzero_padding_kernel<<<lab_grid((size_t)N * (Vp - V) + 1), 256>>>(logits, N, V, Vp, lab().d_counter);
    cudaCheckLaunch();
    const size_t pad = (size_t)read_counter();
    check("fused_classifier every row finite, padding zeroed [" + shape + "]", bad == 0 && pad == 0,
          strfmt("%zu NaN/Inf, %zu nonzero padded entries", bad, pad));

    copy_device(dlogits1, logits, n);
    copy_device(losses1, losses, N);
    restore();
    fused_classifier(logits, losses, targets, dloss, N, V, Vp, true, 0);
    lab_sync();
    diff = count_bit_differences(logits, dlogits1, n) + count_bit_differences(losses, losses1, N);
    check("fused_classifier deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));

    float ms = time_ms([&] { fused_classifier(logits, losses, targets, dloss, N, V, Vp, true, 0); }, restore);
    report("fused_classifier+dlogits", shape, ms, 2.0 * n * sizeof(floatX) + 8.0 * N);
    ms = time_ms([&] { fused_classifier(logits, losses, targets, dloss, N, V, Vp, false, 0); }, restore);
    report("fused_classifier (loss only)", shape, ms, (double)N * V * sizeof(floatX) + 8.0 * N);
}

int main() {
    lab_init("fused_classifier");
    const Shape shapes[] = {
        {8 * 1024, GPT2_VOCAB_SIZE, GPT2_PADDED_VOCAB_SIZE},  // GPT-2 d12, B*T = 8*1024
        {64 * 1024, GPT2_VOCAB_SIZE, GPT2_PADDED_VOCAB_SIZE}, // d12 at the trainer's B=64, T=1024
        {300, 60001, 60008},       // wider than the shared-memory cache (56,320 columns): the re-read path
        {37, 101, 104},            // odd
        {64, 1024, 1024},          // no padding
        {5, 3, 8},                 // fewer columns than one thread's vector
    };
    for (const Shape& s : shapes) run_shape(s);
    return lab_finish();
}
