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
 *                  (both = instead, not read, with accumulate_grads = false)
 *
 * Bias gradients through a ones column: when inp is stored with row stride C + MATMUL_BIAS_PAD and
 * columns C.. hold (1, 0, ..., 0) (llmc/layernorm.cuh writes its outputs that way for the biased
 * matmuls qkv and fc), the weight-gradient GEMM runs over all C + MATMUL_BIAS_PAD columns into a
 * scratch: its column C is dout^T @ 1 = dbias, computed with the rest of the GEMM instead of a separate
 * pass over dout; a small kernel then moves both into the floatX gradients. On an optimizer step's
 * first micro-step (accumulate_grads = false: the gradients are written, not read) the scratch is floatX,
 * rounded once by the GEMM, and the kernel copies it into place; on the other micro-steps it is fp32 and
 * the kernel adds it to the gradients, rounding once. Otherwise (unpadded inp) the bias gradient is a
 * deterministic column-sum kernel (llmc/column_reduce.cuh). The ones column is there because the
 * separate bias pass cost more than the MATMUL_BIAS_PAD extra columns add to the qkv and fc GEMMs
 * (dev/cuda/PERF.md row 15).
 *
 * cuBLASLt is column-major: a row-major (R, K) matrix is a column-major (K, R) one, so each product
 * is written for the transposed problem. Descriptors and the chosen algorithm are cached per shape
 * and epilogue: nothing is created or queried inside the training step after the first one.
 *
 * Algorithm choice (autotune, on unless the GpuContext's autotune is false; train_gpt2cu -ma 0): on a
 * shape's first call, each of cuBLASLt's ranked candidates runs once on the call's own data, and only
 * those whose output is bitwise equal to the first candidate's (the heuristic's choice) are timed; the
 * fastest of them is kept. The numbers are therefore those of the heuristic's choice whatever the timing
 * says, so runs stay reproducible across processes. (dev/cuda/matmul_algos shows why this pays:
 * candidates that differ only in tile shape are bitwise equal, those with a different split-K are not,
 * and the heuristic's first choice is not always the fastest of the equal ones, e.g. for the LM head
 * forward; the times are in dev/cuda/PERF.md row 11.) The call's effect is the same as one plain call:
 * an accumulated output is restored before every trial run, and L2 is overwritten before every timed
 * one (as in the step, the operands are mostly not in L2; timed back to back, with their operands in L2,
 * the LM head forward's candidates looked alike although they differ in the step: PERF.md row 11).
 */
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>
#include <tuple>
#include <type_traits>
#include "llmc/autotune.h"
#include "llmc/column_reduce.cuh"
#include "llmc/gpu_context.cuh"
#include "llmc/phase_timer.h"

// Row padding of a matmul input that carries the ones column (header comment): 8 elements keep every
// row 16-byte aligned, as cuBLASLt wants; a pad of 1 column made the GEMM several times slower
// (dev/cuda/PERF.md row 15).
constexpr int MATMUL_BIAS_PAD = 8;

// MatmulEpilogue, MatmulOp, MatmulDesc (the plan cache's key) and MatmulPlan live in
// llmc/gpu_context.cuh with the cache, which the GpuContext holds (ctx.cublaslt).

inline bool epilogue_has_bias(MatmulEpilogue e) {
    return e == MatmulEpilogue::Bias || e == MatmulEpilogue::GeluAuxBias;
}
inline bool epilogue_has_aux(MatmulEpilogue e) {
    return e == MatmulEpilogue::GeluAuxBias || e == MatmulEpilogue::GeluAux || e == MatmulEpilogue::DGelu;
}
inline bool epilogue_aux_is_output(MatmulEpilogue e) {
    return e == MatmulEpilogue::GeluAuxBias || e == MatmulEpilogue::GeluAux;
}

// The buffers of one call. c: nullptr, d itself (accumulate in place), or a buffer laid out as D that
// does not overlap it; bias (m) and aux (laid out as D, floatX) where the epilogue takes them.
struct MatmulOperands {
    void* d;
    const floatX* a;
    const floatX* b;
    const void* c = nullptr;
    const void* bias = nullptr;
    floatX* aux = nullptr;
};

// cuBLASLt descriptor and layouts for g (D's leading dimension: m); no algorithm chosen yet.
inline MatmulPlan matmul_plan_describe(const GpuContext& ctx, const MatmulDesc& g) {
    const int m = g.m, n = g.n, k = g.k;
    const bool trans_a = g.trans_a, trans_b = g.trans_b;
    const MatmulEpilogue epilogue = g.epilogue;
    MatmulPlan plan;
    plan.epilogue = epilogue;
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
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.a, dtype, trans_a ? k : m, trans_a ? m : k, g.ld_a()));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.b, dtype, trans_b ? n : k, trans_b ? k : n, g.ld_b()));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan.c, g.d_fp32 ? CUDA_R_32F : dtype, m, n, m));
    return plan;
}

// cuBLASLt's ranked algorithms for a described plan (at most max_count, best guess first).
inline std::vector<cublasLtMatmulHeuristicResult_t> matmul_algo_candidates(const GpuContext& ctx,
                                                                           const MatmulPlan& plan, int max_count) {
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(max_count);
    int found = 0;
    // an unsupported combination (e.g. an epilogue the library lacks for these types) is "no algorithm"
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt.handle, plan.desc, plan.a, plan.b, plan.c,
                                                                 plan.c, pref, max_count, results.data(), &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) found = 0;
    else cublasCheck(status);
    results.resize(found);
    return results;
}

// Runs a plan with the given algorithm on the operands (c nullptr: beta = 0); bias/aux pointers are
// set on the descriptor each call (they change between layers). Returns cuBLASLt's status (a
// configuration the library refuses for this problem is not an error to the lab's search);
// matmul_run is the checked call.
inline cublasStatus_t matmul_try_run(const GpuContext& ctx, MatmulPlan& plan, const cublasLtMatmulAlgo_t& algo,
                                     const MatmulOperands& x, cudaStream_t stream) {
    if (epilogue_has_bias(plan.epilogue)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x.bias, sizeof(x.bias)));
    }
    if (epilogue_has_aux(plan.epilogue)) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x.aux, sizeof(x.aux)));
    }
    const float alpha = 1.0f, beta = x.c ? 1.0f : 0.0f;
    return cublasLtMatmul(ctx.cublaslt.handle, plan.desc, &alpha, x.a, plan.a, x.b, plan.b, &beta, x.c ? x.c : x.d,
                          plan.c, x.d, plan.c, &algo, ctx.cublaslt.workspace, CUBLASLT_WORKSPACE_BYTES, stream);
}

inline void matmul_run(const GpuContext& ctx, MatmulPlan& plan, const cublasLtMatmulAlgo_t& algo,
                       const MatmulOperands& x, cudaStream_t stream) {
    cublasCheck(matmul_try_run(ctx, plan, algo, x, stream));
}

// ----------------------------------------------------------------------------
// autotune

// Picks plan.algo among the candidates (see the header comment) by running them on this call's data;
// leaves d (and aux, when it is an output) as one plain call with the first candidate would.
inline void matmul_autotune(const GpuContext& ctx, MatmulPlan& plan,
                            const std::vector<cublasLtMatmulHeuristicResult_t>& cands, const MatmulDesc& g,
                            const MatmulOperands& x, cudaStream_t stream) {
    void* d = x.d;
    const size_t d_bytes = (size_t)g.m * g.n * (g.d_fp32 ? sizeof(float) : sizeof(floatX));
    void* saved = nullptr;  // the accumulated output before this call (C is D)
    if (x.c == d) {
        if (cudaMalloc(&saved, d_bytes) != cudaSuccess) {  // no room to tune: keep the first candidate
            (void)cudaGetLastError();
            plan.algo = cands[0].algo;
            matmul_run(ctx, plan, plan.algo, x, stream);
            return;
        }
        cudaCheck(cudaMemcpyAsync(saved, d, d_bytes, cudaMemcpyDeviceToDevice, stream));
    }
    auto restore = [&]() {
        if (saved) cudaCheck(cudaMemcpyAsync(d, saved, d_bytes, cudaMemcpyDeviceToDevice, stream));
    };
    auto run = [&](int i) {
        matmul_run(ctx, plan, cands[i].algo, x, stream);
        return true;
    };
    std::vector<AutotuneOutput> outputs = {{d, d_bytes}};
    if (epilogue_aux_is_output(g.epilogue)) outputs.push_back({x.aux, (size_t)g.m * g.n * sizeof(floatX)});
    const AutotuneChoice choice = autotune_choose(ctx.props, (int)cands.size(), outputs, restore, run, stream);
    std::vector<float> best(cands.size(), 0.0f);  // 0: not bitwise equal, not timed
    for (size_t e = 0; e < choice.equal.size(); e++) best[choice.equal[e]] = choice.ms[e];
    const int chosen = choice.chosen();
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
inline std::string matmul_autotune_summary(const GpuContext& ctx) {
    int tuned = 0, changed = 0;
    double first = 0, chosen = 0;
    for (const auto& kv : ctx.cublaslt.plans) {
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
inline void matmul_autotune_print(const GpuContext& ctx) {
    static const char* names[] = {"none", "bias", "gelu_aux_bias", "gelu_aux", "dgelu"};
    printf("cuBLASLt autotune (ms per call; -: output not bitwise equal to candidate 0, not timed):\n");
    for (const auto& kv : ctx.cublaslt.plans) {
        const MatmulPlan& p = kv.second;
        if (p.candidates == 0) continue;
        const MatmulDesc& g = kv.first;
        std::string times;
        for (float t : p.trial_ms) times += t > 0 ? " " + std::to_string(t).substr(0, 6) : " -";
        printf("  m=%d n=%d k=%d %s%s:%s -> [%d]\n", g.m, g.n, g.k, names[(int)g.epilogue], g.accumulate ? " +=" : "",
               times.c_str(), p.chosen);
    }
}

// Runs g on the operands through the plan cache (the first call of a shape describes it and, with
// the autotune on, picks its algorithm: header comment). x.c must be given exactly when g.accumulate.
inline void matmul_cublaslt(GpuContext& ctx, const MatmulDesc& g, const MatmulOperands& x, cudaStream_t stream) {
    for (const void* p : {(const void*)x.d, (const void*)x.a, (const void*)x.b, x.c, x.bias, (const void*)x.aux}) {
        if (((uintptr_t)p) % 16 != 0) fatal("matmul: pointer %p is not 16-byte aligned", p);
    }
    if ((x.c != nullptr) != g.accumulate) fatal("matmul: C given (%d) but accumulate = %d", x.c != nullptr, g.accumulate);
    auto it = ctx.cublaslt.plans.find(g);
    if (it == ctx.cublaslt.plans.end()) {
        MatmulPlan plan = matmul_plan_describe(ctx, g);
        const std::vector<cublasLtMatmulHeuristicResult_t> candidates =
            matmul_algo_candidates(ctx, plan, ctx.autotune ? 8 : 1);
        if (candidates.empty()) {
            fatal("cuBLASLt has no algorithm for m=%d n=%d k=%d transA=%d transB=%d epilogue=%d", g.m, g.n, g.k,
                  g.trans_a, g.trans_b, (int)g.epilogue);
        }
        plan.algo = candidates[0].algo;
        it = ctx.cublaslt.plans.emplace(g, plan).first;
        if (candidates.size() > 1) {
            matmul_autotune(ctx, it->second, candidates, g, x, stream);
            return;
        }
    }
    matmul_run(ctx, it->second, it->second.algo, x, stream);
}

// ----------------------------------------------------------------------------
// launchers

// out(N,OC) = inp(N,C) @ weight^T + bias [+ residual(N,OC)]. If pre_gelu != nullptr, GELU is fused:
// pre_gelu gets the linear output and out its GELU (no residual then). inp_ld: row stride of inp (0: C;
// C + MATMUL_BIAS_PAD with a ones column). residual must not overlap out.
inline void matmul_forward(GpuContext& ctx, floatX* out, floatX* pre_gelu, const floatX* inp, const floatX* weight,
                           const floatX* bias, int N, int C, int OC, cudaStream_t stream, int inp_ld = 0,
                           const floatX* residual = nullptr) {
    if (pre_gelu && residual) fatal("matmul_forward: GELU and a residual add in one call are not supported");
    MatmulDesc g(MatmulOp::T, MatmulOp::N, OC, N, C);  // out^T (OC, N) = weight (OC, C) @ inp^T (C, N)
    if (pre_gelu) g.epilogue = bias ? MatmulEpilogue::GeluAuxBias : MatmulEpilogue::GeluAux;
    else g.epilogue = bias ? MatmulEpilogue::Bias : MatmulEpilogue::None;
    g.accumulate = residual != nullptr;
    g.ldb = inp_ld;
    matmul_cublaslt(ctx, g, {out, weight, inp, residual, bias, pre_gelu}, stream);
}

// fp32 scratch of the weight-gradient GEMM over a padded input: (OC, C + MATMUL_BIAS_PAD).
inline size_t matmul_bias_grad_scratch_floats(int C, int OC) { return (size_t)OC * (C + MATMUL_BIAS_PAD); }

// From the ones-column GEMM's output ext (OC, ld) to the gradients: one thread per x128 chunk of a
// dweight row, plus one per row for the bias.
//   Accumulate: dweight(OC,C) += ext[:, :C], dbias(OC) += ext[:, C], ext fp32 (Src = float); one
//               rounding to floatX, as a GEMM with beta = 1 does.
//   otherwise:  dweight = ext[:, :C], dbias = ext[:, C], ext floatX (Src = floatX): the first
//               micro-step's gradients, rounded once by the GEMM itself, copied into place.
// ld and every chunk's column are multiples of x128::size: 16-byte loads of ext in both cases (fp32 as
// float4s: was one 4-byte load per value), evict-first (read once).
template <bool Accumulate>
using MatmulFinishSrc = std::conditional_t<Accumulate, float, floatX>;  // ext's element type
template <bool Accumulate>
__global__ void matmul_finish_weight_bias_grads_kernel(floatX* dweight, floatX* dbias,
                                                       const MatmulFinishSrc<Accumulate>* ext, int OC, int C, int ld) {
    using Src = MatmulFinishSrc<Accumulate>;
    const int chunks = C / x128::size;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)OC * (chunks + 1)) return;
    const int oc = (int)(i / (chunks + 1)), j = (int)(i % (chunks + 1));
    const Src* src = ext + (size_t)oc * ld;
    if (j == chunks) {
        dbias[oc] = Accumulate ? (floatX)((float)dbias[oc] + (float)src[C]) : (floatX)src[C];
        return;
    }
    const int c = j * x128::size;
    floatX* dst = dweight + (size_t)oc * C + c;
    if constexpr (!Accumulate) {
        store128(dst, load128cs(src + c));
    } else {
        x128 w = load128(dst);
        const float4* src4 = reinterpret_cast<const float4*>(src + c);
#pragma unroll
        for (int q = 0; q < x128::size / 4; q++) {
            const float4 e = __ldcs(src4 + q);
            w[4 * q + 0] = (floatX)((float)w[4 * q + 0] + e.x);
            w[4 * q + 1] = (floatX)((float)w[4 * q + 1] + e.y);
            w[4 * q + 2] = (floatX)((float)w[4 * q + 2] + e.z);
            w[4 * q + 3] = (floatX)((float)w[4 * q + 3] + e.w);
        }
        store128(dst, w);
    }
}

// dinp = dout @ weight (times gelu'(dgelu_input) when given); dweight += dout^T inp; dbias += sum dout.
// inp_ld: row stride of inp, 0 for C; C + MATMUL_BIAS_PAD when inp carries the ones column, which then
// gives dbias (header comment). scratch (only used when dbias != nullptr): column_reduce_scratch_floats(ctx,
// N, OC) floats, or matmul_bias_grad_scratch_floats(C, OC) with the ones column.
// accumulate_grads = false: dweight and dbias are written (=) and not read, as on an optimizer step's
// first micro-step (the gradients are not zeroed beforehand: gpt2_backward); dinp is always written.
// With ctx.timer (-pt 1), the bias work outside the GEMMs is charged to its own phase,
// the GEMMs to the phase that was current when this was called.
inline void matmul_backward(GpuContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                            const floatX* dout, const floatX* inp, const floatX* weight, const floatX* dgelu_input,
                            int N, int C, int OC, cudaStream_t stream, int inp_ld = 0,
                            bool accumulate_grads = true) {
    if (inp_ld == 0) inp_ld = C;
    if (inp_ld != C && inp_ld != C + MATMUL_BIAS_PAD) {
        fatal("matmul_backward: inp row stride %d must be C=%d or C+%d", inp_ld, C, MATMUL_BIAS_PAD);
    }
    const bool bias_from_gemm = dbias != nullptr && inp_ld != C;
    PhaseTimer* timer = ctx.timer;
    const std::string gemm_phase = phase_timer_current(timer);
    if (dbias && !bias_from_gemm) {
        phase_mark(timer, "bias grads (column sums)", stream);
        bias_backward(ctx, dbias, dout, scratch, N, OC, stream, accumulate_grads);
        phase_mark(timer, gemm_phase.c_str(), stream);
    }
    MatmulDesc gd(MatmulOp::N, MatmulOp::N, C, N, OC);  // dinp^T (C, N) = weight^T (C, OC) @ dout^T (OC, N)
    gd.epilogue = dgelu_input ? MatmulEpilogue::DGelu : MatmulEpilogue::None;
    matmul_cublaslt(ctx, gd, {dinp, weight, dout, nullptr, nullptr, const_cast<floatX*>(dgelu_input)}, stream);
    if (!bias_from_gemm) {
        MatmulDesc gw(MatmulOp::N, MatmulOp::T, C, OC, N);  // dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC)
        gw.accumulate = accumulate_grads;
        gw.lda = inp_ld;
        matmul_cublaslt(ctx, gw, {dweight, inp, dout, accumulate_grads ? dweight : nullptr}, stream);
        return;
    }
    // ext (OC, C+pad) = dout^T @ [inp | 1 0 ... 0]: column-major (C+pad, OC); column C of the row-major
    // view is dbias. fp32 when added to the gradients; floatX (half the traffic) when it replaces them.
    if (C % x128::size != 0) fatal("matmul_backward: C=%d must be a multiple of %d", C, x128::size);
    MatmulDesc ge(MatmulOp::N, MatmulOp::T, inp_ld, OC, N);
    ge.lda = inp_ld;
    ge.d_fp32 = accumulate_grads;
    matmul_cublaslt(ctx, ge, {scratch, inp, dout}, stream);
    phase_mark(timer, "bias grads (dW GEMM column)", stream);
    const size_t threads = (size_t)OC * (C / x128::size + 1);
    if (accumulate_grads) {
        matmul_finish_weight_bias_grads_kernel<true><<<ceil_div(threads, 256), 256, 0, stream>>>(dweight, dbias,
                                                                                                 scratch, OC, C, inp_ld);
    } else {
        matmul_finish_weight_bias_grads_kernel<false><<<ceil_div(threads, 256), 256, 0, stream>>>(
            dweight, dbias, reinterpret_cast<const floatX*>(scratch), OC, C, inp_ld);
    }
    cudaCheckLaunch();
    phase_mark(timer, gemm_phase.c_str(), stream);
}
