/*
 * Survey of cuBLASLt's algorithms for the trainer's GEMMs (llmc/matmul.cuh) at GPT-2 d12, B*T = 65536
 * (other shapes by environment, below):
 * for every GEMM of one training step, each of cuBLASLt's ranked candidates (up to 32) is
 *   - run twice from the same state: the two outputs must be bitwise equal (deterministic),
 *   - compared bit for bit with candidate 0 (the one the trainer takes by default),
 *   - timed (median of LAB_REPS, L2 flushed).
 * The table lists candidate 0, the fastest, and the fastest that is bitwise equal to candidate 0, and the
 * step total of each (times the number of calls per step). Exit status 1 if a candidate is not
 * deterministic or produces NaN/Inf.
 * Env: MATMUL_ALGOS_N=<rows> (default 65536), MATMUL_ALGOS_C=<channels> (768) and MATMUL_ALGOS_L=<layers> (12)
 * for another model (d48 at B=8: MATMUL_ALGOS_N=8192 MATMUL_ALGOS_C=1600 MATMUL_ALGOS_L=48),
 * MATMUL_ALGOS_MAX=<candidates> (default 32).
 * MATMUL_ALGOS_SEARCH=1 also searches beyond the heuristic's list: for each algorithm id it returned,
 * every tile the id supports x stages (auto, the candidate's) x cluster shapes (auto, the candidate's,
 * 1x1, 2x1, 1x2) x CTA swizzle 0/1, with the candidate's split-K, reduction and custom option; the
 * configurations cublasLtMatmulAlgoCheck accepts are run, those bitwise equal to candidate 0 are timed
 * once, the fastest three again with the lab's timer. Adds a "searched" column to the step total.
 */
#include <set>
#include "llmc/matmul.cuh"
#include "llmc/gpt2_vocab.h"
#include "common.h"

struct Gemm {
    std::string name;
    MatmulDesc desc;  // packed; accumulate: C is D
    int per_step;
};

static Gemm gemm(const char* name, MatmulOp op_a, MatmulOp op_b, int m, int n, int k, MatmulEpilogue epilogue,
                 bool accumulate, int per_step) {
    Gemm g{name, MatmulDesc(op_a, op_b, m, n, k), per_step};
    g.desc.epilogue = epilogue;
    g.desc.accumulate = accumulate;
    return g;
}

// One configuration attribute of an algorithm, read at its own width (T: the type cublasLt.h gives it;
// the cluster shape and inner shape are uint16_t); -1 when it cannot be read.
template <class T>
static int algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    T v{};
    size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) == CUBLAS_STATUS_SUCCESS ? (int)v
                                                                                                               : -1;
}

static std::string describe(const cublasLtMatmulAlgo_t& algo) {
    return strfmt("id %d tile %d stages %d splitK %d red %d swz %d opt %d cluster %d",
                  algo_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID), algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                  algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                  algo_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                  algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                  algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                  algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                  algo_attr<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

struct Summary {
    double def = 0, best = 0, best_eq = 0, searched = 0;
};

template <class T>
static std::vector<T> cap_array(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
    std::vector<T> v(bytes / sizeof(T));
    if (v.empty() || cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
    return v;
}

// Configurations beyond the heuristic's list (header comment). Returns the fastest bitwise-equal time,
// at most t_heuristic (the heuristic's fastest bitwise-equal candidate).
static float search(const Gemm& g, MatmulPlan& plan, const std::vector<cublasLtMatmulHeuristicResult_t>& cands,
                    floatX* a, floatX* b, floatX* d, const floatX* d_ref, const floatX* d_init, floatX* bias,
                    floatX* aux, float t_heuristic) {
    const GpuContext& ctx = lab_ctx();
    const size_t nd = (size_t)g.desc.m * g.desc.n;
    std::vector<cublasLtMatmulAlgo_t> configs;
    std::set<std::vector<int>> seen;
    int checked = 0;
    for (const auto& c : cands) {
        const int id = algo_attr<int32_t>(c.algo, CUBLASLT_ALGO_CONFIG_ID);
        const int32_t splitk = algo_attr<int32_t>(c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
        const uint32_t red = algo_attr<uint32_t>(c.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
        const uint32_t custom = algo_attr<uint32_t>(c.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
        const uint32_t cand_stages = algo_attr<uint32_t>(c.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
        const uint16_t cand_cluster = algo_attr<uint16_t>(c.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
        const uint16_t inner = algo_attr<uint16_t>(c.algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
        const std::vector<uint32_t> tiles = cap_array<uint32_t>(c.algo, CUBLASLT_ALGO_CAP_TILE_IDS);
        int32_t swz_support = 0;
        size_t w = 0;
        cublasLtMatmulAlgoCapGetAttribute(&c.algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz_support, sizeof(swz_support), &w);
        const std::set<uint32_t> stages = {0u, cand_stages};
        const std::set<uint16_t> clusters = {0, cand_cluster, CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                             CUBLASLT_CLUSTER_SHAPE_1x2x1};
        for (uint32_t tile : tiles) {
            for (uint32_t st : stages) {
                for (uint16_t cl : clusters) {
                    for (uint32_t swz = 0; swz <= (swz_support ? 1u : 0u); swz++) {
                        const std::vector<int> key = {id, (int)tile, (int)st, (int)cl, (int)swz, splitk, (int)red, (int)custom, (int)inner};
                        if (!seen.insert(key).second) continue;
                        cublasLtMatmulAlgo_t algo;
                        if (cublasLtMatmulAlgoInit(ctx.cublaslt.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                                                   CUDA_R_16BF, CUDA_R_16BF, id, &algo) != CUBLAS_STATUS_SUCCESS) continue;
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof(st));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof(cl));
                        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof(inner));
                        cublasLtMatmulHeuristicResult_t r;
                        checked++;
                        if (cublasLtMatmulAlgoCheck(ctx.cublaslt.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo, &r) !=
                            CUBLAS_STATUS_SUCCESS) continue;
                        if (r.workspaceSize > CUBLASLT_WORKSPACE_BYTES) continue;
                        configs.push_back(algo);
                    }
                }
            }
        }
    }
    auto launch = [&](const cublasLtMatmulAlgo_t& algo) {
        return matmul_try_run(ctx, plan, algo, {d, a, b, g.desc.accumulate ? d : nullptr, bias, aux}, 0);
    };
    auto reset = [&]() {
        if (g.desc.accumulate) copy_device(d, d_init, nd);
    };
    GpuTimer timer;
    std::vector<std::pair<float, int>> timed;
    int equal = 0, failed = 0;
    for (size_t i = 0; i < configs.size(); i++) {
        reset();
        if (launch(configs[i]) != CUBLAS_STATUS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) {
            (void)cudaGetLastError();
            failed++;
            continue;
        }
        if (count_bit_differences(d, d_ref, nd) != 0) continue;
        equal++;
        reset();
        cudaCheck(cudaMemsetAsync(lab().l2_flush, (int)i & 0xFF, lab().l2_flush_bytes));
        timed.push_back({timer.ms([&] { launch(configs[i]); }), (int)i});
    }
    std::sort(timed.begin(), timed.end());
    float best = t_heuristic;
    std::string best_desc = "(none faster: the heuristic's)";
    for (size_t j = 0; j < timed.size() && j < 3; j++) {
        const cublasLtMatmulAlgo_t& algo = configs[timed[j].second];
        const float ms = time_ms([&] { launch(algo); }, g.desc.accumulate ? std::function<void()>(reset) : nullptr);
        printf("   search #%zu %8.4f ms (single run %.4f)  %s\n", j, ms, timed[j].first, describe(algo).c_str());
        if (ms < best) best = ms, best_desc = describe(algo);
    }
    printf("   search: %d configurations checked, %zu accepted, %d failed to run, %d bitwise equal to #0; "
           "best %.4f ms vs heuristic's %.4f ms (%.1f%%) %s\n",
           checked, configs.size(), failed, equal, best, t_heuristic, 100.0 * (t_heuristic - best) / t_heuristic,
           best_desc.c_str());
    return best;
}

static void survey(const Gemm& g, int max_candidates, Summary& total) {
    const size_t na = (size_t)g.desc.m * g.desc.k, nb = (size_t)g.desc.k * g.desc.n, nd = (size_t)g.desc.m * g.desc.n;
    const bool has_bias = epilogue_has_bias(g.desc.epilogue), has_aux = epilogue_has_aux(g.desc.epilogue);
    floatX *a, *b, *d, *d_first, *d_ref, *d_init = nullptr, *bias = nullptr, *aux = nullptr;
    cudaCheck(cudaMalloc(&a, na * sizeof(floatX)));
    cudaCheck(cudaMalloc(&b, nb * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d, nd * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_first, nd * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_ref, nd * sizeof(floatX)));
    fill_uniform(a, na, -1.f, 1.f);
    fill_uniform(b, nb, -1.f, 1.f);
    if (g.desc.accumulate) {
        cudaCheck(cudaMalloc(&d_init, nd * sizeof(floatX)));
        fill_uniform(d_init, nd, -1.f, 1.f);
    }
    if (has_bias) {
        cudaCheck(cudaMalloc(&bias, g.desc.m * sizeof(floatX)));
        fill_uniform(bias, g.desc.m, -0.5f, 0.5f);
    }
    if (has_aux) {
        cudaCheck(cudaMalloc(&aux, nd * sizeof(floatX)));
        fill_uniform(aux, nd, -2.f, 2.f);  // dGELU reads it; the GELU forward overwrites it
    }
    MatmulPlan plan = matmul_plan_describe(lab_ctx(), g.desc);
    const std::vector<cublasLtMatmulHeuristicResult_t> cands = matmul_algo_candidates(lab_ctx(), plan, max_candidates);
    printf("-- %s: m=%d n=%d k=%d x%d per step, %zu candidates\n", g.name.c_str(), g.desc.m, g.desc.n, g.desc.k, g.per_step,
           cands.size());
    const double flops = 2.0 * g.desc.m * g.desc.n * g.desc.k;
    float t_def = 0, t_best = 1e30f, t_best_eq = 1e30f;
    int i_best = -1, i_best_eq = -1;
    for (size_t i = 0; i < cands.size(); i++) {
        const cublasLtMatmulAlgo_t& algo = cands[i].algo;
        auto reset = [&]() {
            if (g.desc.accumulate) copy_device(d, d_init, nd);
        };
        auto launch = [&]() { matmul_run(lab_ctx(), plan, algo, {d, a, b, g.desc.accumulate ? d : nullptr, bias, aux}, 0); };
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
        const float ms = time_ms(launch, g.desc.accumulate ? std::function<void()>(reset) : nullptr);
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
        report(g.name + " default", strfmt("%dx%dx%d", g.desc.m, g.desc.n, g.desc.k), t_def, 0, flops);
        report(g.name + " fastest", strfmt("%dx%dx%d", g.desc.m, g.desc.n, g.desc.k), t_best, 0, flops);
        const float t_searched = env_or("MATMUL_ALGOS_SEARCH", 0) != 0
                                     ? search(g, plan, cands, a, b, d, d_ref, d_init, bias, aux, t_best_eq)
                                     : t_best_eq;
        total.searched += g.per_step * t_searched;
        total.def += g.per_step * t_def;
        total.best += g.per_step * t_best;
        total.best_eq += g.per_step * t_best_eq;
    }
    check(g.name + " has candidates", !cands.empty());
    if (!cands.empty()) {
        // the trainer's path: the first call of a shape autotunes (llmc/matmul.cuh); what it leaves must be
        // bitwise what one call with candidate 0 leaves (an accumulated output restored between trials)
        lab_ctx().autotune = true;
        if (g.desc.accumulate) copy_device(d, d_init, nd);
        matmul_cublaslt(lab_ctx(), g.desc, {d, a, b, g.desc.accumulate ? d : nullptr, bias, aux}, 0);
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
    const int N = (int)env_or("MATMUL_ALGOS_N", 65536);
    const int max_candidates = (int)env_or("MATMUL_ALGOS_MAX", 32);
    const int C = (int)env_or("MATMUL_ALGOS_C", 768), L = (int)env_or("MATMUL_ALGOS_L", 12), Vp = GPT2_PADDED_VOCAB_SIZE;
    if (C % 8 != 0) {  // (env_or has refused values <= 0)
        fprintf(stderr, "matmul_algos: MATMUL_ALGOS_C=%d must be a multiple of 8 (16-byte rows)\n", C);
        return 2;
    }
    lab_init("matmul_algos");
    lab().reps = (int)env_or("LAB_REPS", 10);
    printf("shape: N = B*T = %d rows, C = %d, %d layers\n", N, C, L);
    using E = MatmulEpilogue;
    using Op = MatmulOp;
    // the calls of gpt2_forward / gpt2_backward (llmc/gpt2.cuh) through matmul_forward / matmul_backward,
    // packed. (The trainer's qkv and fc inputs have row stride C + MATMUL_BIAS_PAD: their forward reads
    // with ldb = C + 8, their weight gradient is m = C + 8 into fp32; the matmul lab's "+pad" cases time those.)
    const std::vector<Gemm> gemms = {
        gemm("qkv fwd", Op::T, Op::N, 3 * C, N, C, E::Bias, false, L),
        gemm("attproj fwd", Op::T, Op::N, C, N, C, E::Bias, false, L),
        gemm("fc fwd (gelu)", Op::T, Op::N, 4 * C, N, C, E::GeluAuxBias, false, L),
        gemm("fcproj fwd", Op::T, Op::N, C, N, 4 * C, E::Bias, false, L),
        gemm("lm head fwd", Op::T, Op::N, Vp, N, C, E::None, false, 1),
        gemm("lm head dinp", Op::N, Op::N, C, N, Vp, E::None, false, 1),
        gemm("lm head dweight", Op::N, Op::T, C, Vp, N, E::None, true, 1),
        gemm("fcproj dinp (dgelu)", Op::N, Op::N, 4 * C, N, C, E::DGelu, false, L),
        gemm("fcproj dweight", Op::N, Op::T, 4 * C, C, N, E::None, true, L),
        gemm("fc dinp", Op::N, Op::N, C, N, 4 * C, E::None, false, L),
        gemm("fc dweight", Op::N, Op::T, C, 4 * C, N, E::None, true, L),
        gemm("attproj dinp", Op::N, Op::N, C, N, C, E::None, false, L),
        gemm("attproj dweight", Op::N, Op::T, C, C, N, E::None, true, L),
        gemm("qkv dinp", Op::N, Op::N, C, N, 3 * C, E::None, false, L),
        gemm("qkv dweight", Op::N, Op::T, C, 3 * C, N, E::None, true, L),
    };
    Summary total;
    for (const Gemm& g : gemms) survey(g, max_candidates, total);
    printf("\nstep total of the GEMMs: default %.2f ms, fastest %.2f ms (-%.2f), fastest bitwise-equal %.2f ms (-%.2f), "
           "searched bitwise-equal %.2f ms (-%.2f)\n",
           total.def, total.best, total.def - total.best, total.best_eq, total.def - total.best_eq, total.searched,
           total.def - total.searched);
    return lab_finish();
}
