/*
 * The GPU context: the state the launchers need beyond their arguments, in one object the program
 * creates and passes down (no singletons, no file-scope state in llmc/):
 *
 *   props           the properties of the device current at creation (SM count, shared memory, L2:
 *                   grid shapes of llmc/column_reduce.cuh and llmc/layernorm.cuh, the autotunes' L2 flush)
 *   stream          the compute stream; a model (GPT2::stream) launches everything on it
 *   allow_tf32      FP32 builds: cuBLASLt may compute in TF32 (train_gpt2cu -f); bf16 builds always fp32
 *   autotune        fastest bitwise-equal cuBLASLt algorithm and cuDNN plan per shape (-ma; llmc/matmul.cuh)
 *   cublaslt        handle, workspace and plan cache of llmc/matmul.cuh (plans keyed by MatmulDesc)
 *   cudnn           llmc/cudnn_att.cpp's state (handle, graph cache, workspace), opaque here; USE_CUDNN
 *                   builds only (nullptr otherwise)
 *   layernorm_grids llmc/layernorm.cuh's backward grid per (C, dinp column sums)
 *   timer           -pt 1: matmul_backward charges its bias work to phases of its own (nullptr: off);
 *                   gpt2_backward sets it from GPT2::timer for the duration of the pass
 *
 * Who creates it: the program, once the device is chosen: train_gpt2.cu's setup (after the NCCL
 * start-up picks the device), test_gpt2.cu's main, the kernel labs in lab_init (dev/cuda/common.h; the
 * cuDNN attention labs make a CudnnState of their own with cudnn_state_create).
 * gpu_context_init makes everything (the cuDNN handle too, so a bad install fails at start-up);
 * gpu_context_free releases it. Lifetime: it must outlive every model and every launch that uses it;
 * it is not copyable (the model holds a pointer, the launchers take a reference). Several models may
 * share one context, as test_gpt2.cu's do: they then share the stream and the caches (a shape is
 * planned and autotuned once).
 *
 * One process-wide record remains by CUDA's own rules: a kernel's dynamic shared memory limit
 * (cudaFuncSetAttribute) belongs to the CUDA context, not to this object; allow_dynamic_smem
 * (llmc/cuda_common.h) reads it back from CUDA instead of keeping a copy.
 */
#pragma once

#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "llmc/cuda_common.h"
#include "llmc/phase_timer.h"
#ifdef ENABLE_CUDNN
#include "llmc/cudnn_att.h"
#endif

struct CudnnState;  // llmc/cudnn_att.cpp

// ----------------------------------------------------------------------------
// cuBLASLt state (llmc/matmul.cuh explains the GEMMs, the plan cache and the autotune)

constexpr size_t CUBLASLT_WORKSPACE_BYTES = 32ull << 20;

// (cuBLASLt's DGELU_BGRAD, which would also give the fc bias gradient, was measured and rejected: it
// ran slower than DGELU for the fcproj backward, and its bf16 column sums were coarse; dev/cuda/PERF.md,
// the "rejected in the lab" row of DGELU_BGRAD.)
enum class MatmulEpilogue { None, Bias, GeluAuxBias, GeluAux, DGelu };

// op(X): X or its transpose, as in BLAS's gemm("T", "N", ...).
enum class MatmulOp { N, T };

// One GEMM as cuBLASLt runs it, everything but the pointers: D(m,n) = op(A) op(B) [+ C] with an
// epilogue, column-major (llmc/matmul.cuh's header comment says how row-major callers map onto it). It
// is also the key of the plan cache: equal descriptors share descriptors, layouts and the chosen algorithm.
struct MatmulDesc {
    int m, n, k;
    bool trans_a, trans_b;
    MatmulEpilogue epilogue = MatmulEpilogue::None;
    bool accumulate = false;  // + C (beta = 1), C laid out as D; the plan is the same for C == D and C != D
    int lda = 0, ldb = 0;     // leading dimensions of A and B; 0: packed (ld_a(), ld_b())
    bool d_fp32 = false;      // D (and C) fp32, else floatX; A and B are floatX

    MatmulDesc(MatmulOp op_a, MatmulOp op_b, int m_, int n_, int k_)
        : m(m_), n(n_), k(k_), trans_a(op_a == MatmulOp::T), trans_b(op_b == MatmulOp::T) {}
    int ld_a() const { return lda != 0 ? lda : (trans_a ? k : m); }
    int ld_b() const { return ldb != 0 ? ldb : (trans_b ? n : k); }
    // cache order (and the order matmul_autotune_print lists shapes in): m, n, k, transA, transB,
    // epilogue, accumulate, lda, ldb, fp32 output; a packed and an explicit equal stride are one key
    std::tuple<int, int, int, bool, bool, int, bool, int, int, bool> order_key() const {
        return std::make_tuple(m, n, k, trans_a, trans_b, (int)epilogue, accumulate, ld_a(), ld_b(), d_fp32);
    }
    bool operator<(const MatmulDesc& o) const { return order_key() < o.order_key(); }
};

struct MatmulPlan {
    MatmulEpilogue epilogue = MatmulEpilogue::None;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
    // autotune record (candidates == 0: not tuned)
    int candidates = 0, chosen = 0;
    float first_ms = 0, chosen_ms = 0;
    std::vector<float> trial_ms;  // per candidate, its fastest round (0: not bitwise equal, not timed)
};

inline void matmul_plan_destroy(MatmulPlan& plan) {
    cublasCheck(cublasLtMatmulDescDestroy(plan.desc));
    cublasCheck(cublasLtMatrixLayoutDestroy(plan.a));
    cublasCheck(cublasLtMatrixLayoutDestroy(plan.b));
    cublasCheck(cublasLtMatrixLayoutDestroy(plan.c));
}

struct CublasLtState {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;  // CUBLASLT_WORKSPACE_BYTES
    std::map<MatmulDesc, MatmulPlan> plans;
};

// ----------------------------------------------------------------------------
// LayerNorm backward grid (llmc/layernorm.cuh: layernorm_backward_grid)

struct LayerNormBackwardGrid {
    int warps, blocks;   // per block, in the grid
    size_t smem;         // dynamic shared memory per block
    int rows = 0;        // > 0: the column-owner kernel, with groups of this many rows
};

// ----------------------------------------------------------------------------
// the context

struct GpuContextOptions {
    bool allow_tf32 = true;  // -f
    bool autotune = true;    // -ma
    // the compute stream at the highest priority: when the AdamW update runs beside it (-ao 1), the
    // block scheduler gives the forward's blocks the free SMs first and the update fills what is left
    bool high_priority = false;
};

struct GpuContext {
    cudaDeviceProp props{};
    cudaStream_t stream = nullptr;
    bool allow_tf32 = true;
    bool autotune = true;
    CublasLtState cublaslt;
    CudnnState* cudnn = nullptr;
    std::map<std::pair<int, bool>, LayerNormBackwardGrid> layernorm_grids;  // (C, sum_dinp)
    PhaseTimer* timer = nullptr;

    GpuContext() = default;
    GpuContext(const GpuContext&) = delete;
    GpuContext& operator=(const GpuContext&) = delete;
};

// For the device current now (cudaSetDevice first).
inline void gpu_context_init(GpuContext* ctx, const GpuContextOptions& opt = GpuContextOptions()) {
    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaGetDeviceProperties(&ctx->props, device));
    int least = 0, greatest = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(&ctx->stream, cudaStreamDefault, opt.high_priority ? greatest : least));
    ctx->allow_tf32 = opt.allow_tf32;
    ctx->autotune = opt.autotune;
    cublasCheck(cublasLtCreate(&ctx->cublaslt.handle));
    cudaCheck(cudaMalloc(&ctx->cublaslt.workspace, CUBLASLT_WORKSPACE_BYTES));
#ifdef ENABLE_CUDNN
    ctx->cudnn = cudnn_state_create(ctx->props, opt.autotune);  // -ma covers the attention plans too
#endif
}

// Frees everything gpu_context_init made (safe on a context never initialized, and twice).
inline void gpu_context_free(GpuContext* ctx) {
    for (auto& kv : ctx->cublaslt.plans) matmul_plan_destroy(kv.second);
    ctx->cublaslt.plans.clear();
    cudaFreeCheck(&ctx->cublaslt.workspace);
    if (ctx->cublaslt.handle != nullptr) cublasCheck(cublasLtDestroy(ctx->cublaslt.handle));
    ctx->cublaslt.handle = nullptr;
#ifdef ENABLE_CUDNN
    cudnn_state_destroy(ctx->cudnn);
#endif
    ctx->cudnn = nullptr;
    ctx->layernorm_grids.clear();
    if (ctx->stream != nullptr) cudaCheck(cudaStreamDestroy(ctx->stream));
    ctx->stream = nullptr;
    ctx->timer = nullptr;
}
