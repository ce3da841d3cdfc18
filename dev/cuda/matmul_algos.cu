/*
 * Survey of cuBLASLt's algorithms for the trainer's GEMMs (llmc/matmul.cuh) at GPT-2 d12, B*T = 65536:
 * for every GEMM of one training step, each of cuBLASLt's ranked candidates (up to 32) is
 *   - run twice from the same state: the two outputs must be bitwise equal (deterministic),
 *   - compared bit for bit with candidate 0 (the one the trainer takes by default),
 *   - timed (median of LAB_REPS, L2 flushed).
 * The table lists candidate 0, the fastest, and the fastest that is bitwise equal to candidate 0, and the
 * step total of each (times the number of calls per step). Exit status 1 if a candidate is not
 * deterministic or produces NaN/Inf.
 * Env: MATMUL_ALGOS_N=<rows> (default 65536), MATMUL_ALGOS_MAX=<candidates> (default 32).
 */
#include "llmc/matmul.cuh"
#include "common.h"

struct Gemm {
    std::string name;
    int m, n, k;
    bool trans_a, trans_b;
    MatmulEpilogue epilogue;
    bool accumulate;
    int per_step;
};

static int algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    int v = -1;
    size_t written = 0;
    uint32_t u = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &u, sizeof(u), &written) == CUBLAS_STATUS_SUCCESS) {
        v = (int)u;
    }
    return v;
}

static std::string describe(const cublasLtMatmulAlgo_t& algo) {
    return strfmt("id %d tile %d stages %d splitK %d red %d swz %d opt %d cluster %d",
                  algo_attr(algo, CUBLASLT_ALGO_CONFIG_ID), algo_attr(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                  algo_attr(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), algo_attr(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                  algo_attr(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                  algo_attr(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), algo_attr(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                  algo_attr(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

struct Summary {
    double def = 0, best = 0, best_eq = 0;
};

static void survey(const Gemm& g, int max_candidates, Summary& total) {
    const size_t na = (size_t)g.m * g.k, nb = (size_t)g.k * g.n, nd = (size_t)g.m * g.n;
    const bool has_bias = epilogue_has_bias(g.epilogue), has_aux = epilogue_has_aux(g.epilogue);
    floatX *a, *b, *d, *d_first, *d_ref, *d_init = nullptr, *bias = nullptr, *aux = nullptr;
    cudaCheck(cudaMalloc(&a, na * sizeof(floatX)));
    cudaCheck(cudaMalloc(&b, nb * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d, nd * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_first, nd * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_ref, nd * sizeof(floatX)));
    fill_uniform(a, na, -1.f, 1.f);
    fill_uniform(b, nb, -1.f, 1.f);
    if (g.accumulate) {
        cudaCheck(cudaMalloc(&d_init, nd * sizeof(floatX)));
        fill_uniform(d_init, nd, -1.f, 1.f);
    }
    if (has_bias) {
        cudaCheck(cudaMalloc(&bias, g.m * sizeof(floatX)));
        fill_uniform(bias, g.m, -0.5f, 0.5f);
    }
    if (has_aux) {
        cudaCheck(cudaMalloc(&aux, nd * sizeof(floatX)));
        fill_uniform(aux, nd, -2.f, 2.f);  // dGELU reads it; the GELU forward overwrites it
    }
    MatmulPlan plan = matmul_plan_describe(g.m, g.n, g.k, g.trans_a, g.trans_b, g.epilogue);
    const std::vector<cublasLtMatmulHeuristicResult_t> cands = matmul_algo_candidates(plan, max_candidates);
    printf("-- %s: m=%d n=%d k=%d x%d per step, %zu candidates\n", g.name.c_str(), g.m, g.n, g.k, g.per_step,
           cands.size());
    const double flops = 2.0 * g.m * g.n * g.k;
    float t_def = 0, t_best = 1e30f, t_best_eq = 1e30f;
    int i_best = -1, i_best_eq = -1;
    for (size_t i = 0; i < cands.size(); i++) {
        const cublasLtMatmulAlgo_t& algo = cands[i].algo;
        auto reset = [&]() {
            if (g.accumulate) copy_device(d, d_init, nd);
        };
        auto launch = [&]() { matmul_run(plan, algo, d, a, b, bias, aux, g.epilogue, g.accumulate, 0); };
        reset();
        launch();
        lab_sync();
        copy_device(d_first, d, nd);
        reset();
        launch();
        lab_sync();
        const size_t rerun_diff = count_bit_differences(d, d_first, nd);
        const size_t bad = count_nonfinite(d, nd);
        if (i == 0) copy_device(d_ref, d, nd);
        const size_t ref_diff = i == 0 ? 0 : count_bit_differences(d, d_ref, nd);
        const float ms = time_ms(launch, g.accumulate ? std::function<void()>(reset) : nullptr);
        const bool ok = rerun_diff == 0 && bad == 0;
        if (!ok) {
            check(strfmt("%s candidate %zu deterministic and finite", g.name.c_str(), i), false,
                  strfmt("%zu bytes differ between reruns, %zu NaN/Inf", rerun_diff, bad));
        }
        printf("   [%2zu] %8.4f ms %6.1f TFLOP/s  %s  waves %.2f  %s\n", i, ms, flops / (ms * 1e-3) / 1e12,
               ref_diff == 0 ? "== #0" : "!= #0", cands[i].wavesCount, describe(algo).c_str());
        if (i == 0) t_def = ms;
        if (ok && ms < t_best) t_best = ms, i_best = (int)i;
        if (ok && ref_diff == 0 && ms < t_best_eq) t_best_eq = ms, i_best_eq = (int)i;
    }
    if (!cands.empty()) {
        printf("   default %.4f ms, fastest [%d] %.4f ms (%.1f%%), fastest bitwise-equal [%d] %.4f ms (%.1f%%)\n", t_def,
               i_best, t_best, 100.0 * (t_def - t_best) / t_def, i_best_eq, t_best_eq,
               100.0 * (t_def - t_best_eq) / t_def);
        report(g.name + " default", strfmt("%dx%dx%d", g.m, g.n, g.k), t_def, 0, flops);
        report(g.name + " fastest", strfmt("%dx%dx%d", g.m, g.n, g.k), t_best, 0, flops);
        total.def += g.per_step * t_def;
        total.best += g.per_step * t_best;
        total.best_eq += g.per_step * t_best_eq;
    }
    check(g.name + " has candidates", !cands.empty());
    if (!cands.empty()) {
        // the trainer's path: the first call of a shape autotunes (llmc/matmul.cuh); what it leaves must be
        // bitwise what one call with candidate 0 leaves (an accumulated output restored between trials)
        matmul_context().autotune = true;
        if (g.accumulate) copy_device(d, d_init, nd);
        matmul_cublaslt(d, a, b, bias, aux, g.m, g.n, g.k, g.trans_a, g.trans_b, g.epilogue, g.accumulate, 0);
        lab_sync();
        const size_t diff = count_bit_differences(d, d_ref, nd);
        check(g.name + " autotuned call == candidate 0", diff == 0, strfmt("%zu bytes differ", diff));
    }
    for (cublasLtMatrixLayout_t l : {plan.a, plan.b, plan.c}) cublasCheck(cublasLtMatrixLayoutDestroy(l));
    cublasCheck(cublasLtMatmulDescDestroy(plan.desc));
    for (floatX* p : {a, b, d, d_first, d_ref, d_init, bias, aux}) {
        if (p) cudaCheck(cudaFree(p));
    }
}

int main() {
    lab_init("matmul_algos");
    lab().reps = (int)env_or("LAB_REPS", 10);
    const int N = (int)env_or("MATMUL_ALGOS_N", 65536);
    const int max_candidates = (int)env_or("MATMUL_ALGOS_MAX", 32);
    const int C = 768, L = 12, Vp = 50304;
    using E = MatmulEpilogue;
    // the calls of gpt2_forward / gpt2_backward (llmc/gpt2.cuh) through matmul_forward / matmul_backward,
    // packed. (The trainer's qkv and fc inputs have row stride C + MATMUL_BIAS_PAD: their forward reads
    // with ldb = C + 8, their weight gradient is m = C + 8 into fp32; the matmul lab's "+pad" cases time those.)
    const std::vector<Gemm> gemms = {
        {"qkv fwd", 3 * C, N, C, true, false, E::Bias, false, L},
        {"attproj fwd", C, N, C, true, false, E::Bias, false, L},
        {"fc fwd (gelu)", 4 * C, N, C, true, false, E::GeluAuxBias, false, L},
        {"fcproj fwd", C, N, 4 * C, true, false, E::Bias, false, L},
        {"lm head fwd", Vp, N, C, true, false, E::None, false, 1},
        {"lm head dinp", C, N, Vp, false, false, E::None, false, 1},
        {"lm head dweight", C, Vp, N, false, true, E::None, true, 1},
        {"fcproj dinp (dgelu)", 4 * C, N, C, false, false, E::DGelu, false, L},
        {"fcproj dweight", 4 * C, C, N, false, true, E::None, true, L},
        {"fc dinp", C, N, 4 * C, false, false, E::None, false, L},
        {"fc dweight", C, 4 * C, N, false, true, E::None, true, L},
        {"attproj dinp", C, N, C, false, false, E::None, false, L},
        {"attproj dweight", C, C, N, false, true, E::None, true, L},
        {"qkv dinp", C, N, 3 * C, false, false, E::None, false, L},
        {"qkv dweight", C, 3 * C, N, false, true, E::None, true, L},
    };
    Summary total;
    for (const Gemm& g : gemms) survey(g, max_candidates, total);
    printf("\nstep total of the GEMMs: default %.2f ms, fastest %.2f ms (-%.2f), fastest bitwise-equal %.2f ms (-%.2f)\n",
           total.def, total.best, total.def - total.best, total.best_eq, total.def - total.best_eq);
    return lab_finish();
}
