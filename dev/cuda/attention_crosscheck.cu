/*
 * Cross-check of the two causal self-attention implementations on the SAME inputs: llmc/attention.cuh
 * (attention_forward / attention_backward, the tensor-core kernels of bf16 builds) against
 * llmc/cudnn_att.h (attention_forward_cudnn / attention_backward_cudnn), forward and backward.
 * The third side, a PyTorch fp32/fp64 reference, is dev/cuda/attention_crosscheck.py, reading the
 * files this program writes with --dump.
 *
 * Per shape (HS = 64; (B,T,NH) = (1,64,2), (4,256,4), (3,200,2), (8,1024,12), (2,2048,16), (2,1024,25)): fresh random
 * qkv (B,T,3,NH,HS) with q, k ~ 1.5 N(0,1) (scaled scores of std ~2.25: the softmax is neither flat nor
 * one-hot), v, dout ~ N(0,1), rounded to bf16; every output poisoned with 0xFF bytes (NaN) first.
 * Compares attention.cuh against cuDNN for out, lse (cuDNN's stats), dq, dk, dv: max abs difference
 * and rel L2 = ||attention.cuh - cudnn|| / ||cudnn||; a tensor passes when rel L2 < 1e-2 and both
 * sides are all finite. Then the pair that USE_CUDNN=1 builds for sm_90a run (llmc/gpt2.cuh): attention.cuh's
 * backward fed cuDNN's out and stats, its dq, dk, dv against cuDNN's backward, same criterion. Exit status 1 if any tensor fails (the dump files are still written).
 *
 * --dump DIR writes DIR/shape_<i>.bin (i = 0.. in the order above), little-endian:
 *   header   256 x int32: [0] magic 20240611, [1] version 1, [2] B, [3] T, [4] NH, [5] HS,
 *            [6] number of implementations (2: attention.cuh, then cudnn); the rest 0
 *   qkv      uint16 bf16 bits, (B, T, 3, NH, HS)
 *   dout     uint16 bf16 bits, (B, T, NH, HS)
 *   then per implementation (attention.cuh first, cudnn second), as float32:
 *     out    (B, T, NH, HS)      the bf16 output, widened
 *     lse    (B, NH, T)          natural-log log-sum-exp of the scaled scores q.k / sqrt(HS)
 *     dinp   (B, T, 3, NH, HS)   dq | dk | dv, the bf16 gradients, widened
 *
 * Usage: attention_crosscheck [--dump DIR] [--seed N]   (DIR must exist; default seed 42)
 * Build: make USE_CUDNN=1 cudnn && make -C dev/cuda USE_CUDNN=1 attention_crosscheck
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "llmc/attention.cuh"
#include "common.h"
#include "attention_inputs.h"  // host-generated inputs: the dump holds exactly what both implementations read
#include "llmc/cudnn_att.h"

static_assert(kFloatXIsBF16, "dev/cuda/attention_crosscheck.cu compares bf16 paths: build with -DENABLE_BF16");

constexpr double kRelTol = 1e-2;
constexpr int HS = ATT_HS;
constexpr int kDumpMagic = 20240611;
constexpr int kDumpVersion = 1;
constexpr int kDumpHeaderInts = 256;

// ----------------------------------------------------------------------------
// one implementation's outputs on the device, and their host copies as fp32

struct Outputs {
    std::vector<float> out, lse, dinp;
};

// the host copies, as fp32 (download: common.h)
static Outputs fetch(const AttentionBuffers& b) {
    return {download(b.out, b.n_out), download(b.lse, b.n_lse), download(b.dinp, b.n_dinp)};
}

// ----------------------------------------------------------------------------
// comparison

// which = -1: the whole tensor; 0/1/2: the q/k/v third of each (b, t) row of a (B, T, 3, C) tensor
static bool compare(const char* name, const std::vector<float>& a, const std::vector<float>& b, int which, int C) {
    double max_abs = 0, sq_diff = 0, sq_ref = 0;
    size_t nonfinite = 0, n = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (which >= 0 && (int)((i / C) % 3) != which) continue;
        n++;
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
            nonfinite++;
            continue;
        }
        const double d = std::fabs((double)a[i] - b[i]);
        max_abs = std::max(max_abs, d);
        sq_diff += d * d;
        sq_ref += (double)b[i] * b[i];
    }
    const double rel = std::sqrt(sq_diff / std::max(sq_ref, 1e-30));
    const bool ok = nonfinite == 0 && rel < kRelTol;
    printf("    %-4s rel L2 %.3e  max abs %.3e  %s", name, rel, max_abs, ok ? "ok" : "FAIL");
    if (nonfinite) printf("  (%zu of %zu not finite)", nonfinite, n);
    printf("\n");
    return ok;
}

// ----------------------------------------------------------------------------
// dump for the PyTorch side (layout: this file's top comment)

static void write_dump(const std::string& path, const Shape& s, const std::vector<floatX>& qkv,
                       const std::vector<floatX>& dout, const Outputs* impls, int num_impls) {
    const int header[kDumpHeaderInts] = {kDumpMagic, kDumpVersion, s.B, s.T, s.NH, HS, num_impls};  // the rest 0
    static_assert(sizeof(floatX) == sizeof(uint16_t), "bf16 is dumped as its 16 bits");
    FILE* fp = fopen_check(path.c_str(), "wb");
    fwrite_check(header, sizeof(int), kDumpHeaderInts, fp, path.c_str());
    fwrite_check(qkv.data(), sizeof(floatX), qkv.size(), fp, path.c_str());
    fwrite_check(dout.data(), sizeof(floatX), dout.size(), fp, path.c_str());
    for (int i = 0; i < num_impls; i++) {
        fwrite_check(impls[i].out.data(), sizeof(float), impls[i].out.size(), fp, path.c_str());
        fwrite_check(impls[i].lse.data(), sizeof(float), impls[i].lse.size(), fp, path.c_str());
        fwrite_check(impls[i].dinp.data(), sizeof(float), impls[i].dinp.size(), fp, path.c_str());
    }
    fclose_check(fp, path.c_str());
    printf("    wrote %s\n", path.c_str());
}

// ----------------------------------------------------------------------------

static bool check_shape(CudnnState& st, const Shape& s, uint64_t seed, const char* dump_dir, int index) {
    const int C = s.NH * HS;
    printf("shape %d: B=%d T=%d NH=%d HS=%d\n", index, s.B, s.T, s.NH, HS);
    std::vector<floatX> qkv_h, dout_h;
    make_inputs(s, seed, qkv_h, dout_h);
    floatX* inp = upload(qkv_h);
    floatX* dout = upload(dout_h);

    Outputs impls[2];
    std::vector<float> mixed_dinp;  // attention.cuh's backward from cuDNN's forward (the sm_90a cuDNN build)
    {
        AttentionBuffers ours(s), cudnn(s), mixed(s);
        attention_forward(ours.out, ours.lse, inp, s.B, s.T, C, s.NH, 0);
        attention_backward(ours.dinp, ours.scratch, dout, inp, ours.out, ours.lse, s.B, s.T, C, s.NH, 0);
        attention_forward_cudnn(st, cudnn.out, cudnn.lse, inp, s.B, s.T, s.NH, C, true, 0);
        attention_backward_cudnn(st, cudnn.dinp, dout, inp, cudnn.out, cudnn.lse, s.B, s.T, s.NH, C, 0);
        attention_backward(mixed.dinp, mixed.scratch, dout, inp, cudnn.out, cudnn.lse, s.B, s.T, C, s.NH, 0);
        cudaCheck(cudaDeviceSynchronize());
        impls[0] = fetch(ours);
        impls[1] = fetch(cudnn);
        mixed_dinp = download(mixed.dinp, mixed.n_dinp);
    }
    cudaFreeCheck(&inp);
    cudaFreeCheck(&dout);

    printf("  attention.cuh vs cudnn:\n");
    bool ok = compare("out", impls[0].out, impls[1].out, -1, C);
    ok = compare("lse", impls[0].lse, impls[1].lse, -1, C) && ok;
    const char* names[3] = {"dq", "dk", "dv"};
    for (int which = 0; which < 3; which++) ok = compare(names[which], impls[0].dinp, impls[1].dinp, which, C) && ok;
    printf("  cudnn forward + attention.cuh backward (USE_CUDNN=1 on sm_90a) vs cudnn:\n");
    for (int which = 0; which < 3; which++) ok = compare(names[which], mixed_dinp, impls[1].dinp, which, C) && ok;
    if (dump_dir != nullptr) {
        write_dump(std::string(dump_dir) + "/shape_" + std::to_string(index) + ".bin", s, qkv_h, dout_h, impls, 2);
    }
    printf("  %s\n", ok ? "PASS" : "FAIL");
    return ok;
}

int main(int argc, char** argv) {
    const char* dump_dir = nullptr;
    uint64_t seed = 42;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
            dump_dir = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            char* end = nullptr;
            seed = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || argv[i][0] == '\0') fatal("--seed '%s' must be an unsigned integer", argv[i]);
        } else {
            fatal("unknown or incomplete argument '%s'; usage: %s [--dump DIR] [--seed N]", argv[i], argv[0]);
        }
    }
    if (dump_dir != nullptr) {  // fail before the slow part, not at the first write
        const std::string probe = std::string(dump_dir) + "/.attention_crosscheck_probe";
        FILE* fp = fopen(probe.c_str(), "wb");
        if (fp == nullptr) fatal("--dump '%s': cannot write there (does the directory exist?): %s", dump_dir, strerror(errno));
        fclose(fp);
        remove(probe.c_str());
    }

    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    printf("device: %s (sm_%d%d), seed %llu\n", prop.name, prop.major, prop.minor, (unsigned long long)seed);
    CudnnState* st = cudnn_state_create(prop, true);

    const Shape shapes[] = {{1, 64, 2}, {4, 256, 4}, {3, 200, 2}, {8, 1024, 12}, {2, 2048, 16}, {2, 1024, 25}};
    const int num_shapes = sizeof(shapes) / sizeof(shapes[0]);
    int failed = 0;
    for (int i = 0; i < num_shapes; i++) failed += check_shape(*st, shapes[i], seed, dump_dir, i) ? 0 : 1;

    cudnn_state_destroy(st);
    printf("%s: %d of %d shapes failed (attention.cuh vs cudnn, rel L2 < %.0e)\n", failed ? "FAIL" : "PASS", failed,
           num_shapes, kRelTol);
    if (dump_dir != nullptr) printf("next: python3 dev/cuda/attention_crosscheck.py %s\n", dump_dir);
    return failed ? 1 : 0;
}
