/*
 * Lab for llmc/encoder.cuh: encoder_forward (out =) and the deterministic encoder_backward
 * (dwte +=, dwpe +=, stochastically rounded), against a CPU reference in double computed from the same
 * bf16 values. Tokens are skewed (half from 16 "hot" tokens) so some wte rows sum hundreds or thousands of
 * positions (many segments: the two-kernel path), others one (the direct path).
 *
 * Checks per shape: forward output (poisoned first); dwte and dwpe against old + sum; wte rows of tokens
 * that do not occur and dwpe rows t >= T bitwise untouched; dwpe rows t < T written (=) from NaN with
 * accumulate_wpe = false (dwte still +=); two backward runs from the same state and
 * seed bitwise equal. Times both. Exit status 1 if any check fails.
 */
#include "llmc/encoder.cuh"
#include "llmc/gpt2_vocab.h"
#include "common.h"

struct Shape {
    int B, T, C, Vp;
};

static void run_shape(const Shape& s) {
    const int B = s.B, T = s.T, C = s.C, Vp = s.Vp, BT = B * T;
    const int V = std::min(Vp, GPT2_VOCAB_SIZE);
    const int maxT = T + 3;  // rows t >= T of wpe/dwpe exist but must not be touched
    const std::string shape = strfmt("B=%d T=%d C=%d Vp=%d", B, T, C, Vp);
    printf("-- %s\n", shape.c_str());

    // skewed tokens: half from a small hot set, half uniform
    std::vector<int> hot(16);
    for (int& h : hot) h = (int)host_random_below(V);
    std::vector<int> tokens(BT);
    for (int& tok : tokens) tok = (host_random_below(2) == 0) ? hot[host_random_below(16)] : (int)host_random_below(V);
    tokens[0] = 0;
    tokens[BT - 1] = V - 1;

    int* d_tokens = lab_alloc<int>(BT);
    upload_ints(d_tokens, tokens);
    floatX* wte = lab_uniform<floatX>((size_t)Vp * C, -1.f, 1.f);
    floatX* wpe = lab_uniform<floatX>((size_t)maxT * C, -1.f, 1.f);
    floatX* out = lab_alloc<floatX>((size_t)BT * C);

    // ---- forward
    poison(out, (size_t)BT * C);
    encoder_forward(out, d_tokens, wte, wpe, B, T, C, 0);
    lab_sync();
    {
        const std::vector<float> h_wte = download(wte, (size_t)Vp * C);
        const std::vector<float> h_wpe = download(wpe, (size_t)maxT * C);
        std::vector<double> ref((size_t)BT * C);
        for (int bt = 0; bt < BT; bt++) {
            for (int c = 0; c < C; c++) {
                ref[(size_t)bt * C + c] = round_floatX(h_wte[(size_t)tokens[bt] * C + c] + h_wpe[(size_t)(bt % T) * C + c]);
            }
        }
        check_close("encoder_forward out [" + shape + "]", download(out, (size_t)BT * C), ref, TOL_BF16);
    }
    const float fwd_ms = time_ms([&] { encoder_forward(out, d_tokens, wte, wpe, B, T, C, 0); });
    report("encoder_forward", shape, fwd_ms, 3.0 * BT * C * sizeof(floatX));

    // ---- backward
    floatX* dout = lab_uniform<floatX>((size_t)BT * C, -1.f, 1.f);
    // nonzero start values: the gradients accumulate (+=)
    const Accumulated<floatX> gte((size_t)Vp * C, -1.f, 1.f), gpe((size_t)maxT * C, -1.f, 1.f);
    floatX *dwte = gte.live, *dwpe = gpe.live;
    gte.restore();
    gpe.restore();
    EncoderBackwardWorkspace ws;
    encoder_backward_workspace_init(&ws, BT, Vp, C);
    const uint32_t seed = host_random_u32();
    encoder_backward_prepare(&ws, tokens.data(), BT, 0);
    encoder_backward(dwte, dwpe, &ws, dout, B, T, C, seed, 0);
    lab_sync();

    const std::vector<float> h_dout = download(dout, (size_t)BT * C);
    const std::vector<float> h_dwte0 = download(gte.start, (size_t)Vp * C);
    const std::vector<float> h_dwpe0 = download(gpe.start, (size_t)maxT * C);
    const std::vector<float> got_dwte = download(dwte, (size_t)Vp * C);
    const std::vector<float> got_dwpe = download(dwpe, (size_t)maxT * C);
    std::vector<double> ref_dwte(h_dwte0.begin(), h_dwte0.end());
    std::vector<double> ref_dwpe(h_dwpe0.begin(), h_dwpe0.end());
    std::vector<int> occurrences(Vp, 0);
    for (int bt = 0; bt < BT; bt++) {
        occurrences[tokens[bt]]++;
        for (int c = 0; c < C; c++) {
            const double d = h_dout[(size_t)bt * C + c];
            ref_dwte[(size_t)tokens[bt] * C + c] += d;
            ref_dwpe[(size_t)(bt % T) * C + c] += d;
        }
    }
    check_close("encoder_backward dwte += [" + shape + "]", got_dwte, ref_dwte, TOL_BF16_SR);
    check_close("encoder_backward dwpe += [" + shape + "]", got_dwpe, ref_dwpe, TOL_BF16_SR);
    size_t changed = 0;
    int distinct = 0;
    for (int v = 0; v < Vp; v++) {
        distinct += occurrences[v] > 0;
        if (occurrences[v] > 0) continue;
        for (int c = 0; c < C; c++) changed += got_dwte[(size_t)v * C + c] != h_dwte0[(size_t)v * C + c];
    }
    for (size_t i = (size_t)T * C; i < (size_t)maxT * C; i++) changed += got_dwpe[i] != h_dwpe0[i];
    check("encoder_backward leaves unused rows alone [" + shape + "]", changed == 0,
          strfmt("%zu elements changed (%d of %d tokens occur)", changed, distinct, Vp));

    // determinism: same state, same seed, bitwise same result
    gte.keep_first();
    gpe.keep_first();
    gte.restore();
    gpe.restore();
    encoder_backward_prepare(&ws, tokens.data(), BT, 0);
    encoder_backward(dwte, dwpe, &ws, dout, B, T, C, seed, 0);
    lab_sync();
    const size_t diff = gte.bit_differences() + gpe.bit_differences();
    check("encoder_backward deterministic [" + shape + "]", diff == 0, strfmt("%zu bytes differ between two runs", diff));

    // accumulate_wpe = false (an optimizer step's first micro-step): rows t < T of dwpe written from NaN,
    // the other rows untouched; dwte still +=
    gte.restore();
    gpe.restore();
    poison(dwpe, (size_t)T * C);
    encoder_backward_prepare(&ws, tokens.data(), BT, 0);
    encoder_backward(dwte, dwpe, &ws, dout, B, T, C, seed, 0, false);
    lab_sync();
    {
        const std::vector<float> got = download(dwpe, (size_t)maxT * C);
        std::vector<double> ref(ref_dwpe.begin(), ref_dwpe.end());
        for (size_t i = 0; i < (size_t)T * C; i++) ref[i] -= h_dwpe0[i];  // = instead of +=
        check_close("encoder_backward dwpe = (rows < T) [" + shape + "]", got, ref, TOL_BF16_SR);
        check_close("encoder_backward dwte += beside dwpe = [" + shape + "]", download(dwte, (size_t)Vp * C), ref_dwte,
                    TOL_BF16_SR);
    }

    const float bwd_ms = time_ms([&] {
        cudaCheck(cudaStreamSynchronize(0));  // the pinned staging buffer is reused
        encoder_backward_prepare(&ws, tokens.data(), BT, 0);
        encoder_backward(dwte, dwpe, &ws, dout, B, T, C, seed, 0);
    });
    // dout is read by both kernels; touched wte rows and T wpe rows are read and written
    const double bwd_bytes = (2.0 * BT * C + 2.0 * distinct * C + 2.0 * T * C) * sizeof(floatX);
    report("encoder_backward (incl. host)", shape, bwd_ms, bwd_bytes);
    // the GPU part alone (what the trainer waits for: the host part overlaps the forward pass)
    const float gpu_ms = time_ms([&] { encoder_backward(dwte, dwpe, &ws, dout, B, T, C, seed, 0); });
    report("encoder_backward (GPU)", shape, gpu_ms, bwd_bytes);
    encoder_backward_workspace_free(&ws);
}

int main() {
    lab_init("encoder");
    const Shape shapes[] = {
        {8, 1024, 768, GPT2_PADDED_VOCAB_SIZE},   // GPT-2 d12
        {64, 1024, 768, GPT2_PADDED_VOCAB_SIZE},  // d12 at the trainer's B=64: hot tokens have ~2000 positions (32 segments)
        {4, 256, 1600, GPT2_PADDED_VOCAB_SIZE},  // d48 width
        {3, 37, 40, 101},       // odd and small
    };
    for (const Shape& s : shapes) run_shape(s);
    return lab_finish();
}
