/*
 * Linear layers through cuBLASLt, with bias and GELU fused into the GEMM epilogue where asked.
 * Row-major shapes (N = B*T rows):
 *
 * matmul_forward:  out(N,OC) = inp(N,C) @ weight(OC,C)^T [+ bias(OC)]                      (out =)
 *                  with gelu: pre_gelu(N,OC) = that, out = gelu(pre_gelu)                   (both =)
 * matmul_backward: dinp(N,C) = dout(N,OC) @ weight(OC,C)                                    (dinp =)
 *                  with dgelu_input: dinp *= gelu'(dgelu_input) fused in the epilogue
 *                  dweight(OC,C) += dout^T @ inp                                            (dweight +=)
 *                  dbias(OC) += column sums of dout (deterministic, llmc/column_reduce.cuh)  (dbias +=)
 *
 * cuBLASLt is column-major: a row-major (R, K) matrix is a column-major (K, R) one, so each product
 * is written for the transposed problem. Descriptors and the chosen algorithm are cached per shape
 * and epilogue: nothing is created or queried inside the training step after the first one.
 */
#pragma once

#include <map>
#include <tuple>
#include "llmc/column_reduce.cuh"
#include "llmc/phase_timer.h"

constexpr size_t CUBLASLT_WORKSPACE_BYTES = 32ull << 20;

enum class MatmulEpilogue { None, Bias, GeluAuxBias, GeluAux, DGelu };

struct MatmulPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
};

struct MatmulContext {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    bool allow_tf32 = true;  // FP32 builds only (-f); bf16 builds always compute in fp32
    // key: m, n, k, transA, transB, epilogue, accumulate
    std::map<std::tuple<int, int, int, bool, bool, int, bool>, MatmulPlan> plans;
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
    cudaFreeCheck(&ctx.workspace);
    cublasCheck(cublasLtDestroy(ctx.handle));
    ctx.handle = nullptr;
}

// D(m,n) = op(A) op(B) (+ beta*D), column-major; see the header comment for how callers map shapes.
inline void matmul_cublaslt(floatX* d, const floatX* a, const floatX* b, const floatX* bias, floatX* aux,
                            int m, int n, int k, bool trans_a, bool trans_b, MatmulEpilogue epilogue,
                            bool accumulate, cudaStream_t stream) {
    MatmulContext& ctx = matmul_context();
    for (const void* p : {(const void*)d, (const void*)a, (const void*)b, (const void*)bias, (const void*)aux}) {
        if (((uintptr_t)p) % 16 != 0) fatal("matmul: pointer %p is not 16-byte aligned", p);
    }
    const auto key = std::make_tuple(m, n, k, trans_a, trans_b, (int)epilogue, accumulate);
    auto it = ctx.plans.find(key);
    if (it == ctx.plans.end()) {
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
        if (epilogue == MatmulEpilogue::Bias || epilogue == MatmulEpilogue::GeluAuxBias) {
            cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dtype, sizeof(dtype)));
        }
        if (epilogue == MatmulEpilogue::GeluAuxBias || epilogue == MatmulEpilogue::GeluAux || epilogue == MatmulEpilogue::DGelu) {
            const int64_t ld_aux = m;
            cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof(ld_aux)));
            cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &dtype, sizeof(dtype)));
        }
        cublasCheck(cublasLtMatrixLayoutCreate(&plan.a, dtype, trans_a ? k : m, trans_a ? m : k, trans_a ? k : m));
        cublasCheck(cublasLtMatrixLayoutCreate(&plan.b, dtype, trans_b ? n : k, trans_b ? k : n, trans_b ? n : k));
        cublasCheck(cublasLtMatrixLayoutCreate(&plan.c, dtype, m, n, m));

        cublasLtMatmulPreference_t pref;
        cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &CUBLASLT_WORKSPACE_BYTES, sizeof(CUBLASLT_WORKSPACE_BYTES)));
        cublasLtMatmulHeuristicResult_t heuristic;
        int found = 0;
        cublasCheck(cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                                                   &heuristic, &found));
        cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
        if (found == 0) {
            fatal("cuBLASLt has no algorithm for m=%d n=%d k=%d transA=%d transB=%d epilogue=%d", m, n, k,
                  trans_a, trans_b, (int)epilogue);
        }
        plan.algo = heuristic.algo;
        it = ctx.plans.emplace(key, plan).first;
    }
    MatmulPlan& plan = it->second;
    // pointers change between calls (layers), so they are set on the cached descriptor each time
    if (epilogue == MatmulEpilogue::Bias || epilogue == MatmulEpilogue::GeluAuxBias) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (epilogue == MatmulEpilogue::GeluAuxBias || epilogue == MatmulEpilogue::GeluAux || epilogue == MatmulEpilogue::DGelu) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasCheck(cublasLtMatmul(ctx.handle, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, d, plan.c, d, plan.c,
                               &plan.algo, ctx.workspace, CUBLASLT_WORKSPACE_BYTES, stream));
}

// ----------------------------------------------------------------------------
// launchers

// out(N,OC) = inp(N,C) @ weight^T + bias. If pre_gelu != nullptr, GELU is fused: pre_gelu gets the
// linear output and out its GELU.
inline void matmul_forward(floatX* out, floatX* pre_gelu, const floatX* inp, const floatX* weight,
                           const floatX* bias, int N, int C, int OC, cudaStream_t stream) {
    MatmulEpilogue ep;
    if (pre_gelu) ep = bias ? MatmulEpilogue::GeluAuxBias : MatmulEpilogue::GeluAux;
    else ep = bias ? MatmulEpilogue::Bias : MatmulEpilogue::None;
    matmul_cublaslt(out, weight, inp, bias, pre_gelu, OC, N, C, /*trans_a=*/true, /*trans_b=*/false, ep, false, stream);
}

// dinp = dout @ weight (times gelu'(dgelu_input) when given); dweight += dout^T inp; dbias += sum dout.
// scratch: column_reduce_scratch_floats(N, OC) floats (only used when dbias != nullptr).
// timer (optional, -pt 1): the bias reduction is charged to its own phase, the GEMMs to the phase
// that was current when this was called.
inline void matmul_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                            const floatX* inp, const floatX* weight, const floatX* dgelu_input, int N, int C, int OC,
                            cudaStream_t stream, PhaseTimer* timer = nullptr) {
    if (dbias) {
        const std::string gemm_phase = phase_timer_current(timer);
        phase_mark(timer, "bias grads (column sums)", stream);
        bias_backward(dbias, dout, scratch, N, OC, stream);
        phase_mark(timer, gemm_phase.c_str(), stream);
    }
    matmul_cublaslt(dinp, weight, dout, nullptr, const_cast<floatX*>(dgelu_input), C, N, OC, false, false,
                    dgelu_input ? MatmulEpilogue::DGelu : MatmulEpilogue::None, false, stream);
    matmul_cublaslt(dweight, inp, dout, nullptr, nullptr, C, OC, N, false, true, MatmulEpilogue::None, true, stream);
}
