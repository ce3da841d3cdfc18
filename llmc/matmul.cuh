/*
 * Linear layers through cuBLASLt, with bias and GELU fused into the GEMM epilogue where asked.
 * Row-major shapes (N = B*T rows):
 *
 * matmul_forward:  out(N,OC) = inp(N,C) @ weight(OC,C)^T [+ bias(OC)] [+ residual(N,OC)]   (out =)
 *                  with gelu: pre_gelu(N,OC) = that, out = gelu(pre_gelu)                   (both =)
 *                  (the residual add rides in the epilogue as C with beta = 1: one read of the
 *                  residual stream there instead of a separate pass, rounded to floatX once)
 * matmul_backward: dinp(N,C) = dout(N,OC) @ weight(OC,C)                                    (dinp =)
 *                  with dgelu_input: dinp *= gelu'(dgelu_input) fused in the epilogue
 *                  dweight(OC,C) += dout^T @ inp                                            (dweight +=)
 *                  dbias(OC) += column sums of dout                                         (dbias +=)
 *
 * Bias gradients through a ones column: when inp is stored with row stride C + MATMUL_BIAS_PAD and
 * columns C.. hold (1, 0, ..., 0) (llmc/layernorm.cuh writes its outputs that way for the biased
 * matmuls qkv and fc), the weight-gradient GEMM runs over all C + MATMUL_BIAS_PAD columns into an fp32
 * scratch: its column C is dout^T @ 1 = dbias, computed with the rest of the GEMM instead of a separate
 * pass over dout; a small kernel then adds both into the bf16 gradients. Otherwise (unpadded inp) the
 * bias gradient is a deterministic column-sum kernel (llmc/column_reduce.cuh). Measured on the H200 at
 * d12 B=64 (-pt 1, one run): bias phase 2.71 -> 0.23 ms, the qkv/fc GEMMs +0.63 ms in all (row stride
 * 776 in the forward, 776 output rows in the weight gradient), step 106.97 -> 105.32 ms.
 *
 * cuBLASLt is column-major: a row-major (R, K) matrix is a column-major (K, R) one, so each product
 * is written for the transposed problem. Descriptors and the chosen algorithm are cached per shape
 * and epilogue: nothing is created or queried inside the training step after the first one.
 *
 * Algorithm choice (autotune, on unless matmul_context().autotune = false; train_gpt2cu -ma 0): on a
 * shape's first call, each of cuBLASLt's ranked candidates runs once on the call's own data, and only
 * those whose output is bitwise equal to the first candidate's (the heuristic's choice) are timed; the
 * fastest of them is kept. The numbers are therefore those of the heuristic's choice whatever the timing
 * says, so runs stay reproducible across processes. (Measured on the H200 with
 * dev/cuda/matmul_algos: candidates that differ only in tile shape are bitwise equal, those with a
 * different split-K are not; the heuristic's first choice is up to 16% slower than the fastest, e.g.
 * the LM head forward.) The call's effect is the same as one plain call: an accumulated output is
 * restored before every trial run, and L2 is overwritten before every timed one (as in the step, the
 * operands are mostly not in L2; timed back to back, the LM head forward's candidates came within 3%
 * of each other although candidate 0 is ~12% slower in the step).
 */
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>
#include <tuple>
#include "llmc/autotune.h"
#include "llmc/column_reduce.cuh"
#include "llmc/phase_timer.h"

constexpr size_t CUBLASLT_WORKSPACE_BYTES = 32ull << 20;
// Row padding of a matmul input that carries the ones column (header comment): 8 elements keep every
// row 16-byte aligned, as cuBLASLt wants; 1 column would make the GEMM 6x slower (measured on the H200).
constexpr int MATMUL_BIAS_PAD = 8;

// (cuBLASLt's DGELU_BGRAD, which would also give the fc bias gradient, was measured and rejected: on
// the H200 it ran 3x slower than DGELU for the fcproj backward, and its bf16 column sums were coarse.)
enum class MatmulEpilogue { None, Bias, GeluAuxBias, GeluAux, DGelu };

inline bool epilogue_has_bias(MatmulEpilogue e) {
    return e == MatmulEpilogue::Bias || e == MatmulEpilogue::GeluAuxBias;
}
inline bool epilogue_has_aux(MatmulEpilogue e) {
    return e == MatmulEpilogue::GeluAuxBias || e == MatmulEpilogue::GeluAux || e == MatmulEpilogue::DGelu;
}
inline bool epilogue_aux_is_output(MatmulEpilogue e) {
    return e == MatmulEpilogue::GeluAuxBias || e == MatmulEpilogue::GeluAux;
}

struct MatmulPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
    // autotune record (candidates == 0: not tuned)
    int candidates = 0, chosen = 0;
    float first_ms = 0, chosen_ms = 0;
    std::vector<float> trial_ms;  // per candidate, its fastest round (0: not bitwise equal, not timed)
};

struct MatmulContext {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    bool allow_tf32 = true;  // FP32 builds only (-f); bf16 builds always compute in fp32
    bool autotune = true;    // see the header comment
    unsigned long long* d_hash = nullptr;
    // key: m, n, k, transA, transB, epilogue, C given (beta = 1), lda, ldb, fp32 output
    std::map<std::tuple<int, int, int, bool, bool, int, bool, int, int, bool>, MatmulPlan> plans;
};

// The one context of the process (function-local static: created on first use).
inline MatmulContext& matmul_context() {
    static MatmulContext ctx;
    if (ctx.handle == nullptr) {
        cublasCheck(cublasLtCreate(&ctx.handle));
        cudaCheck(cudaMalloc(&ctx.workspace, CUBLASLT_WORKSPACE_BYTES));
    }
    return ctx;
}

inline void matmul_context_destroy() {
    MatmulContext& ctx = matmul_context();
    for (auto& kv : ctx.plans) {
        cublasCheck(cublasLtMatmulDescDestroy(kv.second.desc));
        cublasCheck(cublasLtMatrixLayoutDestroy(kv.second.a));
        cublasCheck(cublasLtMatrixLayoutDestroy(kv.second.b));
        cublasCheck(cublasLtMatrixLayoutDestroy(kv.second.c));
    }
    ctx.plans.clear();
    cudaFreeCheck(&ctx.d_hash);
    cudaFreeCheck(&ctx.workspace);
    cublasCheck(cublasLtDestroy(ctx.handle));
    ctx.handle = nullptr;
}

// Descriptor and layouts for D(m,n) = op(A) op(B) (+ C), column-major, leading dimensions lda / ldb
// (0: packed; D: m), D in fp32 when d_fp32 (A and B are floatX); no algorithm chosen yet.
inline MatmulPlan matmul_plan_describe(int m, int n, int k, bool trans_a, bool trans_b, MatmulEpilogue epilogue,
                                       int lda = 0, int ldb = 0, bool d_fp32 = false) {
    if (lda == 0) lda = trans_a ? k : m;
    if (ldb == 0) ldb = trans_b ? n : k;
    MatmulContext& ctx = matmul_context();
    MatmulPlan plan;
    const cudaDataType_t dtype = kFloatXIsBF16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute =
        (!kFloatXIsBF16 && ctx.allow_tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasCheck(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F));
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
    switch (epilogue) {
        case MatmulEpilogue::None: ep = CUBLASLT_EPILOGUE_DEFAULT; break;
        case MatmulEpilogue::Bias: ep = CUBLASLT_EPILOGUE_BIAS; break;
        case MatmulEpilogue::GeluAuxBias: ep = CUBLASLT_EPILOGUE_GELU_AUX_BIAS; break;
        case MatmulEpilogue::GeluAux: ep = CUBLASLT_EPILOGUE_GELU_AUX; break;
        case MatmulEpilogue::DGelu: ep = CUBLASLT_EPILOGUE_DGELU; break;
    }
    cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    if (epilogue_has_bias(epilogue)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dtype, sizeof(dtype)));
    }
    if (epilogue_has_aux(epilogue)) {
        const int64_t ld_aux = m;
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof(ld_aux)));
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &dtype, sizeof(dtype)));
    }
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.a, dtype, trans_a ? k : m, trans_a ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.b, dtype, trans_b ? n : k, trans_b ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.c, d_fp32 ? CUDA_R_32F : dtype, m, n, m));
    return plan;
}

// cuBLASLt's ranked algorithms for a described plan (at most max_count, best guess first).
inline std::vector<cublasLtMatmulHeuristicResult_t> matmul_algo_candidates(const MatmulPlan& plan, int max_count) {
    MatmulContext& ctx = matmul_context();
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(max_count);
    int found = 0;
    // an unsupported combination (e.g. an epilogue the library lacks for these types) is "no algorithm"
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan.desc, plan.a, plan.b, plan.c,
                                                                 plan.c, pref, max_count, results.data(), &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) found = 0;
    else cublasCheck(status);
    results.resize(found);
    return results;
}

// Runs a plan with the given algorithm: D = op(A) op(B) [+ C] with the epilogue, C laid out as D (c
// nullptr: beta = 0; c == d: accumulate in place); bias/aux pointers are set on the descriptor each
// call (they change between layers). Returns cuBLASLt's status (a configuration the library refuses
// for this problem is not an error to the lab's search); matmul_run is the checked call.
inline cublasStatus_t matmul_try_run(MatmulPlan& plan, const cublasLtMatmulAlgo_t& algo, void* d, const floatX* a,
                                     const floatX* b, const void* c, const void* bias, floatX* aux,
                                     MatmulEpilogue epilogue, cudaStream_t stream) {
    MatmulContext& ctx = matmul_context();
    if (epilogue_has_bias(epilogue)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (epilogue_has_aux(epilogue)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    }
    const float alpha = 1.0f, beta = c ? 1.0f : 0.0f;
    return cublasLtMatmul(ctx.handle, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, c ? c : d, plan.c, d, plan.c,
                          &algo, ctx.workspace, CUBLASLT_WORKSPACE_BYTES, stream);
}

inline void matmul_run(MatmulPlan& plan, const cublasLtMatmulAlgo_t& algo, void* d, const floatX* a,
                       const floatX* b, const void* c, const void* bias, floatX* aux, MatmulEpilogue epilogue,
                       cudaStream_t stream) {
    cublasCheck(matmul_try_run(plan, algo, d, a, b, c, bias, aux, epilogue, stream));
}

// ----------------------------------------------------------------------------
// autotune

// Order-independent 64-bit hash of a buffer's bytes (a sum of mixed (index, word) pairs): equal
// buffers give equal hashes; unequal ones collide with probability ~2^-64.
__device__ inline uint64_t matmul_mix64(uint64_t x) {  // splitmix64 finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__global__ void matmul_hash_kernel(const uint8_t* bytes, size_t num_bytes, unsigned long long* out) {
    const size_t words = num_bytes / 4;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(bytes);
    uint64_t local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
        local += matmul_mix64((i << 32) ^ w[i]);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (size_t i = words * 4; i < num_bytes; i++) local += matmul_mix64(((uint64_t)i << 40) ^ bytes[i] ^ 0xABull);
    }
    for (int offset = 16; offset > 0; offset >>= 1) local += __shfl_xor_sync(0xFFFFFFFFu, local, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, (unsigned long long)local);
}

inline uint64_t matmul_hash(const void* d, size_t num_bytes, uint64_t salt, cudaStream_t stream) {
    MatmulContext& ctx = matmul_context();
    if (ctx.d_hash == nullptr) cudaCheck(cudaMalloc(&ctx.d_hash, sizeof(unsigned long long)));
    cudaCheck(cudaMemsetAsync(ctx.d_hash, 0, sizeof(unsigned long long), stream));
    const int blocks = (int)std::min<size_t>(4 * (size_t)device_props().multiProcessorCount, num_bytes / 1024 + 1);
    matmul_hash_kernel<<<blocks, 256, 0, stream>>>((const uint8_t*)d, num_bytes, ctx.d_hash);
    cudaCheckLaunch();
    unsigned long long h = 0;
    cudaCheck(cudaMemcpyAsync(&h, ctx.d_hash, sizeof(h), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return h * 31 + salt;
}

// Picks plan.algo among the candidates (see the header comment) by running them on this call's data;
// leaves d (and aux, when it is an output) as one plain call with the first candidate would.
inline void matmul_autotune(MatmulPlan& plan, const std::vector<cublasLtMatmulHeuristicResult_t>& cands, void* d,
                            const floatX* a, const floatX* b, const void* c, const void* bias, floatX* aux, int m,
                            int n, MatmulEpilogue epilogue, bool d_fp32, cudaStream_t stream) {
    const size_t d_bytes = (size_t)m * n * (d_fp32 ? sizeof(float) : sizeof(floatX));
    const size_t aux_bytes = (size_t)m * n * sizeof(floatX);
    const bool aux_is_output = epilogue_aux_is_output(epilogue);
    void* saved = nullptr;  // the accumulated output before this call (C is D)
    if (c == d) {
        if (cudaMalloc(&saved, d_bytes) != cudaSuccess) {  // no room to tune: keep the first candidate
            (void)cudaGetLastError();
            plan.algo = cands[0].algo;
            matmul_run(plan, plan.algo, d, a, b, c, bias, aux, epilogue, stream);
            return;
        }
        cudaCheck(cudaMemcpyAsync(saved, d, d_bytes, cudaMemcpyDeviceToDevice, stream));
    }
    auto restore = [&]() {
        if (saved) cudaCheck(cudaMemcpyAsync(d, saved, d_bytes, cudaMemcpyDeviceToDevice, stream));
    };
    auto run = [&](int i) { matmul_run(plan, cands[i].algo, d, a, b, c, bias, aux, epilogue, stream); };
    auto output_hash = [&]() {
        uint64_t h = matmul_hash(d, d_bytes, 1, stream);
        if (aux_is_output) h ^= matmul_hash(aux, aux_bytes, 2, stream);
        return h;
    };
    std::vector<int> equal;  // candidates bitwise equal to the first
    uint64_t reference = 0;
    for (int i = 0; i < (int)cands.size(); i++) {
        restore();
        run(i);
        const uint64_t h = output_hash();
        if (i == 0) reference = h;
        if (h == reference) equal.push_back(i);
    }
    const std::vector<float> times = autotune_time((int)equal.size(), [&](int e) { run(equal[e]); }, stream);
    std::vector<float> best(cands.size(), 0.0f);
    for (size_t e = 0; e < equal.size(); e++) best[equal[e]] = times[e];
    const int chosen = equal[autotune_pick(times)];  // equal[0] == 0: the first candidate
    plan.algo = cands[chosen].algo;
    plan.candidates = (int)cands.size();
    plan.chosen = chosen;
    plan.first_ms = best[0];
    plan.chosen_ms = best[chosen];
    plan.trial_ms = best;
    restore();
    run(chosen);  // the call itself
    if (saved) {
        cudaCheck(cudaStreamSynchronize(stream));
        cudaCheck(cudaFree(saved));
    }
}

// One line on what the autotune did so far: shapes tuned, how many changed algorithm, and the time of
// one call of each shape with the heuristic's choice and with the chosen one.
inline std::string matmul_autotune_summary() {
    int tuned = 0, changed = 0;
    double first = 0, chosen = 0;
    for (const auto& kv : matmul_context().plans) {
        const MatmulPlan& p = kv.second;
        if (p.candidates == 0) continue;
        tuned++;
        changed += p.chosen != 0;
        first += p.first_ms;
        chosen += p.chosen_ms;
    }
    if (tuned == 0) return "cuBLASLt autotune: off or nothing tuned";
    char buf[256];
    snprintf(buf, sizeof(buf),
             "cuBLASLt autotune: %d GEMM shapes, %d use a faster algorithm than the heuristic's (same bits); "
             "one call of each: %.3f -> %.3f ms",
             tuned, changed, first, chosen);
    return buf;
}

// One line per tuned shape: m n k, epilogue, each candidate's time (- where its bits differ), the choice.
inline void matmul_autotune_print() {
    static const char* names[] = {"none", "bias", "gelu_aux_bias", "gelu_aux", "dgelu"};
    printf("cuBLASLt autotune (ms per call; -: output not bitwise equal to candidate 0, not timed):\n");
    for (const auto& kv : matmul_context().plans) {
        const MatmulPlan& p = kv.second;
        if (p.candidates == 0) continue;
        const auto& k = kv.first;
        std::string times;
        for (float t : p.trial_ms) times += t > 0 ? " " + std::to_string(t).substr(0, 6) : " -";
        printf("  m=%d n=%d k=%d %s%s:%s -> [%d]\n", std::get<0>(k), std::get<1>(k), std::get<2>(k),
               names[std::get<5>(k)], std::get<6>(k) ? " +=" : "", times.c_str(), p.chosen);
    }
}

// D(m,n) = op(A) op(B) [+ C], column-major; see the header comment for how callers map shapes.
// c: laid out as D; nullptr for none, d to accumulate in place; otherwise it must not overlap D.
// lda / ldb: leading dimensions, 0 for packed; d_fp32: D (and C) is fp32 (else floatX).
inline void matmul_cublaslt(void* d, const floatX* a, const floatX* b, const void* c, const void* bias, floatX* aux,
                            int m, int n, int k, bool trans_a, bool trans_b, MatmulEpilogue epilogue,
                            cudaStream_t stream, int lda = 0, int ldb = 0, bool d_fp32 = false) {
    if (lda == 0) lda = trans_a ? k : m;
    if (ldb == 0) ldb = trans_b ? n : k;
    MatmulContext& ctx = matmul_context();
    for (const void* p : {(const void*)d, (const void*)a, (const void*)b, c, bias, (const void*)aux}) {
        if (((uintptr_t)p) % 16 != 0) fatal("matmul: pointer %p is not 16-byte aligned", p);
    }
    const bool accumulate = c != nullptr;  // the plan is the same for C == D and C != D
    const auto key = std::make_tuple(m, n, k, trans_a, trans_b, (int)epilogue, accumulate, lda, ldb, d_fp32);
    auto it = ctx.plans.find(key);
    if (it == ctx.plans.end()) {
        MatmulPlan plan = matmul_plan_describe(m, n, k, trans_a, trans_b, epilogue, lda, ldb, d_fp32);
        const std::vector<cublasLtMatmulHeuristicResult_t> candidates =
            matmul_algo_candidates(plan, ctx.autotune ? 8 : 1);
        if (candidates.empty()) {
            fatal("cuBLASLt has no algorithm for m=%d n=%d k=%d transA=%d transB=%d epilogue=%d", m, n, k,
                  trans_a, trans_b, (int)epilogue);
        }
        plan.algo = candidates[0].algo;
        it = ctx.plans.emplace(key, plan).first;
        if (candidates.size() > 1) {
            matmul_autotune(it->second, candidates, d, a, b, c, bias, aux, m, n, epilogue, d_fp32, stream);
            return;
        }
    }
    matmul_run(it->second, it->second.algo, d, a, b, c, bias, aux, epilogue, stream);
}

// ----------------------------------------------------------------------------
// launchers

// out(N,OC) = inp(N,C) @ weight^T + bias [+ residual(N,OC)]. If pre_gelu != nullptr, GELU is fused:
// pre_gelu gets the linear output and out its GELU (no residual then). inp_ld: row stride of inp (0: C;
// C + MATMUL_BIAS_PAD with a ones column). residual must not overlap out.
inline void matmul_forward(floatX* out, floatX* pre_gelu, const floatX* inp, const floatX* weight,
                           const floatX* bias, int N, int C, int OC, cudaStream_t stream, int inp_ld = 0,
                           const floatX* residual = nullptr) {
    if (pre_gelu && residual) fatal("matmul_forward: GELU and a residual add in one call are not supported");
    MatmulEpilogue ep;
    if (pre_gelu) ep = bias ? MatmulEpilogue::GeluAuxBias : MatmulEpilogue::GeluAux;
    else ep = bias ? MatmulEpilogue::Bias : MatmulEpilogue::None;
    matmul_cublaslt(out, weight, inp, residual, bias, pre_gelu, OC, N, C, /*trans_a=*/true, /*trans_b=*/false, ep,
                    stream, /*lda=*/0, /*ldb=*/inp_ld);
}

// fp32 scratch of the weight-gradient GEMM over a padded input: (OC, C + MATMUL_BIAS_PAD).
inline size_t matmul_bias_grad_scratch_floats(int C, int OC) { return (size_t)OC * (C + MATMUL_BIAS_PAD); }

// dweight(OC,C) += ext[:, :C], dbias(OC) += ext[:, C], ext (OC, ld) fp32: one thread per x128 chunk of a
// dweight row, plus one per row for the bias. One rounding to floatX, as a GEMM with beta = 1 does.
__global__ void matmul_add_weight_bias_grads_kernel(floatX* dweight, floatX* dbias, const float* ext, int OC, int C,
                                                    int ld) {
    const int chunks = C / x128::size;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)OC * (chunks + 1)) return;
    const int oc = (int)(i / (chunks + 1)), j = (int)(i % (chunks + 1));
    const float* src = ext + (size_t)oc * ld;
    if (j == chunks) {
        dbias[oc] = (floatX)((float)dbias[oc] + src[C]);
        return;
    }
    const int c = j * x128::size;
    floatX* dst = dweight + (size_t)oc * C + c;
    x128 w = load128(dst);
    for (int k = 0; k < x128::size; k++) w[k] = (floatX)((float)w[k] + src[c + k]);
    store128(dst, w);
}

// dinp = dout @ weight (times gelu'(dgelu_input) when given); dweight += dout^T inp; dbias += sum dout.
// inp_ld: row stride of inp, 0 for C; C + MATMUL_BIAS_PAD when inp carries the ones column, which then
// gives dbias (header comment). scratch (only used when dbias != nullptr): column_reduce_scratch_floats(N, OC)
// floats, or matmul_bias_grad_scratch_floats(C, OC) with the ones column.
// timer (optional, -pt 1): the bias work outside the GEMMs is charged to its own phase, the GEMMs to
// the phase that was current when this was called.
inline void matmul_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                            const floatX* inp, const floatX* weight, const floatX* dgelu_input, int N, int C, int OC,
                            cudaStream_t stream, PhaseTimer* timer = nullptr, int inp_ld = 0) {
    if (inp_ld == 0) inp_ld = C;
    if (inp_ld != C && inp_ld != C + MATMUL_BIAS_PAD) {
        fatal("matmul_backward: inp row stride %d must be C=%d or C+%d", inp_ld, C, MATMUL_BIAS_PAD);
    }
    const bool bias_from_gemm = dbias != nullptr && inp_ld != C;
    const std::string gemm_phase = phase_timer_current(timer);
    if (dbias && !bias_from_gemm) {
        phase_mark(timer, "bias grads (column sums)", stream);
        bias_backward(dbias, dout, scratch, N, OC, stream);
        phase_mark(timer, gemm_phase.c_str(), stream);
    }
    matmul_cublaslt(dinp, weight, dout, nullptr, nullptr, const_cast<floatX*>(dgelu_input), C, N, OC, false, false,
                    dgelu_input ? MatmulEpilogue::DGelu : MatmulEpilogue::None, stream);
    if (!bias_from_gemm) {
        matmul_cublaslt(dweight, inp, dout, dweight, nullptr, nullptr, C, OC, N, false, true, MatmulEpilogue::None,
                        stream, /*lda=*/inp_ld);
        return;
    }
    // ext (OC, C+pad) fp32 = dout^T @ [inp | 1 0 ... 0]: column-major (C+pad, OC); column C of the
    // row-major view is dbias
    if (C % x128::size != 0) fatal("matmul_backward: C=%d must be a multiple of %d", C, x128::size);
    matmul_cublaslt(scratch, inp, dout, nullptr, nullptr, nullptr, inp_ld, OC, N, false, true, MatmulEpilogue::None,
                    stream, /*lda=*/inp_ld, /*ldb=*/0, /*d_fp32=*/true);
    phase_mark(timer, "bias grads (dW GEMM column)", stream);
    const size_t threads = (size_t)OC * (C / x128::size + 1);
    matmul_add_weight_bias_grads_kernel<<<ceil_div(threads, 256), 256, 0, stream>>>(dweight, dbias, scratch, OC, C,
                                                                                    inp_ld);
    cudaCheckLaunch();
    phase_mark(timer, gemm_phase.c_str(), stream);
}
