/*
 * The GPT-2 model: parameter, gradient, optimizer and activation memory, forward, backward,
 * AdamW update, gradient norm, and checkpoint I/O. The trainer and the GPU test both drive this.
 *
 * Memory: one cudaMalloc each for parameters (floatX), gradients (floatX, same layout), AdamW m and v
 * (fp32), master weights (fp32, bf16 builds with -w 1), and activations, all before the first step.
 * A step allocates nothing on the GPU, except in the first call of each shape: a GEMM shape's first
 * call creates its cuBLASLt descriptors and, with the autotune on (-ma 1, the default), allocates and
 * frees temporary buffers while it times the candidates (llmc/matmul.cuh, llmc/autotune.h); in cuDNN
 * builds an attention shape's first call builds its graphs (autotuned the same way) and may grow
 * cuDNN's workspace (llmc/cudnn_att.cpp). Those first calls come in the first optimizer step, in the
 * first micro-step that accumulates gradients (the second of a step, when -d asks for accumulation:
 * other GEMMs), in the first evaluation and in the first sample (batch 1: other shapes).
 *
 * Gradient conventions (see each layer header): parameter gradients are written (=) by the backward of
 * an optimizer step's first micro-step and accumulate (+=) over the others, so there is no zeroing pass
 * (at d48 that was a 3.1 GB memset, and every accumulating kernel read the zeros back); activation
 * gradients are overwritten (=); the residual-stream gradient accumulates (+=) within one backward pass.
 *
 * Recompute levels (-r): 0 keeps every activation; 1 keeps one GELU output buffer and recomputes
 * GELU in the backward; 2 also keeps only the LayerNorm statistics and recomputes ln1/ln2.
 *
 * Several processes (llmc/multi_gpu.cuh): with ZeRO stage 0 each layer's gradients are all-reduced on the
 * NCCL stream as soon as that layer's backward of the last micro-step is done, overlapping the rest
 * of the backward. ZeRO-1 shards the optimizer (llmc/zero_shards.h): where P divides every tensor of
 * every layer, in llm.c's layout (each process owns 1/P of each; one grouped reduce-scatter / all-gather
 * per (tensor, layer) slice; m, v and master weights packed tensor by tensor, layer by layer, as llm.c's
 * state files do); at any other P in the padded layout (each process owns one contiguous 1/P of the
 * parameter vector; the parameter and gradient buffers get up to P-1 zero elements at the end so that
 * one reduce-scatter / all-gather has equal runs). After the backward the reduce-scatter leaves each
 * process the summed gradient of its chunks, the gradient norm adds the chunks' squares and then the
 * processes', AdamW updates the chunks, and the all-gather brings every process the updated parameters.
 * With one process ZeRO-1 runs the same chunked code over whole layers and gives the bits of ZeRO-0.
 */
#pragma once

#include <cmath>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "llmc/activation_layout.h"
#include "llmc/adamw.cuh"
#include "llmc/attention.cuh"
#include "llmc/cuda_common.h"
#include "llmc/encoder.cuh"
#include "llmc/fused_classifier.cuh"
#include "llmc/gelu.cuh"
#include "llmc/global_norm.cuh"
#include "llmc/gpu_context.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/matmul.cuh"
#include "llmc/model_file.h"
#include "llmc/phase_timer.h"
#include "llmc/multi_gpu.cuh"
#ifdef ENABLE_CUDNN
#include "llmc/cudnn_att.h"
#endif

// ----------------------------------------------------------------------------
// parameters

// Pointers into one flat buffer, in checkpoint order (docs/formats.md "Model checkpoint").
struct ParameterTensors {
    floatX* wte;       // (Vp, C)
    floatX* wpe;       // (maxT, C)
    floatX* ln1w;      // (L, C)
    floatX* ln1b;      // (L, C)
    floatX* qkvw;      // (L, 3C, C)
    floatX* qkvb;      // (L, 3C)
    floatX* attprojw;  // (L, C, C)
    floatX* attprojb;  // (L, C)
    floatX* ln2w;      // (L, C)
    floatX* ln2b;      // (L, C)
    floatX* fcw;       // (L, 4C, C)
    floatX* fcb;       // (L, 4C)
    floatX* fcprojw;   // (L, C, 4C)
    floatX* fcprojb;   // (L, C)
    floatX* lnfw;      // (C)
    floatX* lnfb;      // (C)
};
static_assert(sizeof(ParameterTensors) == NUM_PARAMETER_TENSORS * sizeof(floatX*), "16 tensor pointers");
static_assert(offsetof(ParameterTensors, ln1w) == PARAM_LN1W * sizeof(floatX*) &&
                  offsetof(ParameterTensors, fcprojb) == PARAM_FCPROJB * sizeof(floatX*) &&
                  offsetof(ParameterTensors, lnfb) == PARAM_LNFB * sizeof(floatX*),
              "fields in ParamTensor order");

// Tensor i (a ParamTensor) of the struct.
inline floatX** tensor_slots(ParameterTensors* p) { return reinterpret_cast<floatX**>(p); }
inline floatX* const* tensor_slots(const ParameterTensors* p) { return reinterpret_cast<floatX* const*>(p); }

// ----------------------------------------------------------------------------
// activations

// Pointers into the one activation buffer, in its order (llmc/activation_layout.h: ActivationTensor and
// the shapes, ACTIVATION_SHAPES, which sizes every field; the static_asserts below tie the two together).
struct ActivationTensors {
    floatX* encoded;    // (B, T, C)
    floatX* ln1;        // (L, B, T, C + MATMUL_BIAS_PAD), or (B, T, ...) with recompute 2: see gpt2_ln_ld
    float* ln1_mean;    // (L, B, T)
    float* ln1_rstd;    // (L, B, T)
    floatX* qkv;        // (L, B, T, 3C): attention input
    floatX* atty;       // (L, B, T, C): attention output
    float* att_lse;     // (L, B, NH, T): softmax log-sum-exp
    floatX* residual2;  // (L, B, T, C)
    floatX* ln2;        // (L, B, T, C + MATMUL_BIAS_PAD), or (B, T, ...) with recompute 2
    float* ln2_mean;    // (L, B, T)
    float* ln2_rstd;    // (L, B, T)
    floatX* fch;        // (L, B, T, 4C): fc output before GELU
    floatX* fch_gelu;   // (L, B, T, 4C), or (B, T, 4C) with recompute >= 1
    floatX* residual3;  // (L, B, T, C)
    floatX* lnf;        // (B, T, C)
    float* lnf_mean;    // (B, T)
    float* lnf_rstd;    // (B, T)
    float* losses;      // (B, T) per-token loss, summed over micro-steps
    floatX* output;     // (B, T, Vp) logits, then dlogits in place
    floatX* scratch_btc;   // (B, T, C): dresidual in backward
    floatX* scratch_btc2;  // (B, T, C): activation gradients of width C in backward
    floatX* scratch_bt4c;  // (B, T, 4C): activation gradients of width 4C (and 3C for qkv)
};
static_assert(sizeof(ActivationTensors) == NUM_ACTIVATION_TENSORS * sizeof(void*), "one field per ActivationTensor");
#define GPT2_ACT_FIELD_IS(field, tensor) (offsetof(ActivationTensors, field) == (tensor) * sizeof(void*))
static_assert(GPT2_ACT_FIELD_IS(encoded, ACT_ENCODED) && GPT2_ACT_FIELD_IS(ln1, ACT_LN1) &&
                  GPT2_ACT_FIELD_IS(ln1_mean, ACT_LN1_MEAN) && GPT2_ACT_FIELD_IS(ln1_rstd, ACT_LN1_RSTD) &&
                  GPT2_ACT_FIELD_IS(qkv, ACT_QKV) && GPT2_ACT_FIELD_IS(atty, ACT_ATTY) &&
                  GPT2_ACT_FIELD_IS(att_lse, ACT_ATT_LSE) && GPT2_ACT_FIELD_IS(residual2, ACT_RESIDUAL2) &&
                  GPT2_ACT_FIELD_IS(ln2, ACT_LN2) && GPT2_ACT_FIELD_IS(ln2_mean, ACT_LN2_MEAN) &&
                  GPT2_ACT_FIELD_IS(ln2_rstd, ACT_LN2_RSTD) && GPT2_ACT_FIELD_IS(fch, ACT_FCH) &&
                  GPT2_ACT_FIELD_IS(fch_gelu, ACT_FCH_GELU) && GPT2_ACT_FIELD_IS(residual3, ACT_RESIDUAL3) &&
                  GPT2_ACT_FIELD_IS(lnf, ACT_LNF) && GPT2_ACT_FIELD_IS(lnf_mean, ACT_LNF_MEAN) &&
                  GPT2_ACT_FIELD_IS(lnf_rstd, ACT_LNF_RSTD) && GPT2_ACT_FIELD_IS(losses, ACT_LOSSES) &&
                  GPT2_ACT_FIELD_IS(output, ACT_OUTPUT) && GPT2_ACT_FIELD_IS(scratch_btc, ACT_SCRATCH_BTC) &&
                  GPT2_ACT_FIELD_IS(scratch_btc2, ACT_SCRATCH_BTC2) && GPT2_ACT_FIELD_IS(scratch_bt4c, ACT_SCRATCH_BT4C),
              "ActivationTensors' fields in ActivationTensor order");
#undef GPT2_ACT_FIELD_IS

// Row stride of ln1 / ln2, the inputs of the biased matmuls (qkv, fc): C plus the ones column that
// gives their bias gradients from the weight-gradient GEMM (llmc/matmul.cuh).
inline int gpt2_ln_ld(const GPT2Config& cfg) { return cfg.channels + MATMUL_BIAS_PAD; }

// Bytes and offsets of every activation tensor for batch (B, T) in this build (llmc/activation_layout.h).
inline ActivationLayout gpt2_activation_layout(const GPT2Config& cfg, int B, int T, int recompute) {
    return activation_layout(cfg, B, T, recompute, sizeof(floatX), gpt2_ln_ld(cfg));
}

// ----------------------------------------------------------------------------
// the model

struct GPT2Options {
    int recompute = 1;           // -r
    int gelu_fusion = 0;         // -ge
    bool use_master_weights = true;  // -w (bf16 builds only)
    bool overlap_update = false;     // AdamW on a second stream, overlapped with the next forward (-ao)
    // (-f and -ma, TF32 and the autotunes, are the GpuContext's: llmc/gpu_context.cuh)
};

struct GPT2 {
    GPT2Config config;
    GPT2Options opt;
    GpuContext* ctx = nullptr;         // the program's (llmc/gpu_context.cuh), not owned
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t num_parameters = 0;
    MultiGpuConfig* mp = nullptr;      // process group (single-process config when not distributed)
    struct {
        size_t size = 0;                // elements of m, v, master: N / P (padded: ceil(N / P)) under ZeRO-1, else N
        ZeroLayout layout = ZeroLayout::llmc;  // state files record it (llmc/run_state.h slot 9)
        size_t buffer_elements = 0;     // elements of params_memory and grads_memory: N, or more when padded
        std::vector<ZeroChunk> chunks;  // what this process updates, in m/v/master order (llmc/zero_shards.h)
        std::vector<ZeroSlice> slices;  // the ZeRO-1 reduce-scatter / all-gather runs (empty for ZeRO-0)
        GlobalNormSpans norm_spans;     // the chunks on the GPU, for the ZeRO-1 gradient norm
    } shard;
    ParameterTensors params, grads;
    floatX* params_memory = nullptr;
    floatX* grads_memory = nullptr;
    float* m_memory = nullptr;
    float* v_memory = nullptr;
    float* master_weights = nullptr;
    bool master_initialized = false;
    // batch the activations were sized for
    int B = 0, T = 0;
    ActivationTensors acts;
    void* acts_memory = nullptr;
    float* scratch_f32 = nullptr;   // column reductions, attention row terms, grad-norm partials
    size_t scratch_f32_floats = 0;
    int* inputs = nullptr;          // (B, T) device
    int* targets = nullptr;         // (B, T) device
    int* inputs_host = nullptr;     // pinned copy kept for the deterministic encoder backward
    int* targets_host = nullptr;    // pinned staging
    float* losses_host = nullptr;   // pinned (B, T)
    float* norm_host = nullptr;     // pinned (1)
    EncoderBackwardWorkspace enc_ws;
    // training state
    uint64_t rng_state = 13371337;  // seeds of stochastic rounding; advanced every backward and update
    uint64_t rng_state_last_update = 0;  // rng_state when the last update began (state file slots 22-23)
    cudaStream_t stream = nullptr;  // ctx->stream (not owned)
    PhaseTimer* timer = nullptr;    // -pt 1: per-phase GPU timing (nullptr: off)
    // opt.overlap_update: the update runs on its own stream, embeddings first, then layer by layer, then
    // the final LayerNorm; ready[0] / ready[1 + l] / ready[L + 1] mark each part done. While `pending`,
    // the next forward waits for each part just before it reads it; everything else joins first
    // (gpt2_update_join).
    struct {
        cudaStream_t stream = nullptr;
        cudaEvent_t start = nullptr;
        std::vector<cudaEvent_t> ready;  // (L + 2)
        bool pending = false;
    } update;
};

inline void gpt2_set_param_pointers(ParameterTensors* t, floatX* base, const size_t sizes[NUM_PARAMETER_TENSORS]) {
    floatX** slots = tensor_slots(t);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        slots[i] = base;
        base += sizes[i];
    }
}

inline bool gpt2_uses_master_weights(const GPT2* model) { return kFloatXIsBF16 && model->opt.use_master_weights; }

// Bytes of parameter + gradient + optimizer memory of one process.
inline size_t gpt2_state_bytes(const GPT2Config& cfg, bool master, const MultiGpuConfig* mp) {
    const ZeroPlan plan = zero_shard_plan(cfg, mp->zero_stage, mp->num_processes, 0);
    return plan.buffer_elements * sizeof(floatX) * 2 + plan.shard_size * sizeof(float) * (master ? 3 : 2);
}

inline size_t gpt2_scratch_floats(GpuContext& ctx, const GPT2Config& cfg, int B, int T) {
    const int BT = B * T, C = cfg.channels;
    size_t reduce = 0;
    for (int oc : {C, 3 * C, 4 * C}) {
        reduce = std::max(reduce, column_reduce_scratch_floats(ctx, BT, oc));
        reduce = std::max(reduce, matmul_bias_grad_scratch_floats(C, oc));
    }
    reduce = std::max(reduce, layernorm_backward_scratch_floats(ctx, BT, C));
    const size_t att = attention_backward_scratch_floats(B, T, cfg.num_heads);  // D; also cuDNN builds on sm_90a
    return std::max(reduce, att) + GLOBAL_NORM_BLOCKS + 64;
}

// Allocates parameters (uninitialized), gradients and optimizer state (this process's shard of it). The
// model launches on ctx's stream with ctx's handles, caches and flags; ctx must outlive it.
inline void gpt2_allocate_state(GPT2* model, const GPT2Config& cfg, const GPT2Options& opt, MultiGpuConfig* mp,
                                GpuContext* ctx) {
    model->config = cfg;
    model->opt = opt;
    model->ctx = ctx;
    model->stream = ctx->stream;
    std::string problem = gpt2_config_problem(cfg);
    if (!problem.empty()) fatal("bad model configuration: %s", problem.c_str());
    attention_check_shape(cfg.channels, cfg.num_heads);
    gpt2_param_sizes(cfg, model->param_sizes);
    model->num_parameters = gpt2_num_parameters(cfg);
    model->mp = mp;
    ZeroPlan plan = zero_shard_plan(cfg, mp->zero_stage, mp->num_processes, mp->process_rank);
    model->shard.size = plan.shard_size;
    model->shard.layout = plan.layout;
    model->shard.buffer_elements = plan.buffer_elements;
    model->shard.chunks = std::move(plan.chunks);
    model->shard.slices = std::move(plan.slices);
    // the padded layout's tail past the N parameters stays 0: its gradient sums to 0, its parameter is
    // never updated, and the all-gather copies that 0 around
    const size_t nb = model->shard.buffer_elements;
    const size_t ns = model->shard.size;
    cudaCheck(cudaMalloc(&model->params_memory, nb * sizeof(floatX)));
    cudaCheck(cudaMalloc(&model->grads_memory, nb * sizeof(floatX)));
    cudaCheck(cudaMalloc(&model->m_memory, ns * sizeof(float)));
    cudaCheck(cudaMalloc(&model->v_memory, ns * sizeof(float)));
    cudaCheck(cudaMemset(model->params_memory, 0, nb * sizeof(floatX)));
    cudaCheck(cudaMemset(model->grads_memory, 0, nb * sizeof(floatX)));
    cudaCheck(cudaMemset(model->m_memory, 0, ns * sizeof(float)));
    cudaCheck(cudaMemset(model->v_memory, 0, ns * sizeof(float)));
    if (gpt2_uses_master_weights(model)) {
        cudaCheck(cudaMalloc(&model->master_weights, ns * sizeof(float)));
        cudaCheck(cudaMemset(model->master_weights, 0, ns * sizeof(float)));  // the padding is written to state files
    }
    if (mp->zero_stage == 1) {
        std::vector<GlobalNormSpan> spans;
        for (const ZeroChunk& c : model->shard.chunks) spans.push_back({c.offset, c.size});
        model->shard.norm_spans = global_norm_spans_upload(spans);
    }
    gpt2_set_param_pointers(&model->params, model->params_memory, model->param_sizes);
    gpt2_set_param_pointers(&model->grads, model->grads_memory, model->param_sizes);
    cudaCheck(cudaMallocHost(&model->norm_host, sizeof(float)));
    if (opt.overlap_update) {
        cudaCheck(cudaStreamCreateWithFlags(&model->update.stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&model->update.start, cudaEventDisableTiming));
        model->update.ready.resize(cfg.num_layers + 2);
        for (cudaEvent_t& e : model->update.ready) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
}

// Waits for an update still running on the update stream: the compute stream waits for it, and with
// `host` the host too (before copies on another stream, or the host reading what the update wrote).
inline void gpt2_update_join(GPT2* model, bool host = true) {
    if (!model->update.pending) return;
    cudaCheck(cudaStreamWaitEvent(model->stream, model->update.ready.back(), 0));
    if (host) cudaCheck(cudaEventSynchronize(model->update.ready.back()));
    model->update.pending = false;
}

// llm.c's random initialisation, bit for bit (gpt2_init_params_random; docs/formats.md "Random
// initialisation"): N(0, 0.02) weights, residual projections N(0, 0.02/sqrt(2L)), zero biases, LayerNorm
// weights 1, wte rows >= V zero; mt19937 seeded with `seed` (llm.c: 42), drawn on the host on up to 32
// threads. Returns the threads used.
inline int gpt2_init_random(GPT2* model, uint64_t seed) {
    const size_t bytes = model->num_parameters * sizeof(floatX);
    std::unique_ptr<uint8_t[]> host(new uint8_t[bytes]);  // not zeroed here: the workers touch their pages
    const int threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
    const int used = gpt2_init_params_random(model->config, seed, kFloatXIsBF16 ? DType::BF16 : DType::FP32,
                                             host.get(), threads);
    cudaCheck(cudaMemcpy(model->params_memory, host.get(), bytes, cudaMemcpyHostToDevice));
    return used;
}

// Loads parameters from a v3/v5 checkpoint, converting to this build's precision.
inline void gpt2_load_params(GPT2* model, const char* path, const ModelFileInfo& info) {
    std::vector<uint8_t> host(model->num_parameters * sizeof(floatX));
    model_file_read_params(path, info, host.data(), kFloatXIsBF16 ? DType::BF16 : DType::FP32);
    cudaCheck(cudaMemcpy(model->params_memory, host.data(), host.size(), cudaMemcpyHostToDevice));
    model->master_initialized = false;  // master weights are (re)made from these on the next update
}

// Writes the parameters as v5 (bf16 build) or v3 (fp32 build): the exact bits on the GPU.
inline void gpt2_write_params(GPT2* model, const char* path) {
    gpt2_update_join(model);
    std::vector<uint8_t> host(model->num_parameters * sizeof(floatX));
    cudaCheck(cudaMemcpy(host.data(), model->params_memory, host.size(), cudaMemcpyDeviceToHost));
    model_file_write(path, model->config, host.data(), kFloatXIsBF16 ? DType::BF16 : DType::FP32,
                     kFloatXIsBF16 ? MODEL_FILE_VERSION_BF16 : MODEL_FILE_VERSION_FP32);
}

inline size_t gpt2_activation_bytes(GpuContext& ctx, const GPT2Config& cfg, int B, int T, int recompute) {
    return gpt2_activation_layout(cfg, B, T, recompute).total + gpt2_scratch_floats(ctx, cfg, B, T) * sizeof(float);
}

// GPU memory left free beside the activations, for what is allocated after them: cuDNN's workspace
// (cuDNN builds, at the first attention call), the autotunes' temporary buffers (at the first call of
// each GEMM / attention shape; they tune without them when they do not fit), what the CUDA, cuBLASLt,
// cuDNN and NCCL libraries allocate for themselves as they run, and the allocator's slack. (The cuBLASLt
// workspace is allocated before, by gpu_context_init, so the free memory measured here excludes it.)
constexpr size_t GPT2_ACTIVATION_MARGIN_BYTES = 512ull << 20;

// Allocates activations for micro-batch (B, T). Checks free GPU memory first and explains a shortfall.
inline void gpt2_allocate_activations(GPT2* model, int B, int T) {
    const GPT2Config& c = model->config;
    gpt2_check_seq_len(c, T);
    model->B = B;
    model->T = T;
    const ActivationLayout layout = gpt2_activation_layout(c, B, T, model->opt.recompute);
    model->scratch_f32_floats = gpt2_scratch_floats(*model->ctx, c, B, T);
    const size_t need = layout.total + model->scratch_f32_floats * sizeof(float);
    size_t free_bytes = 0, total_bytes = 0;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (need + GPT2_ACTIVATION_MARGIN_BYTES > free_bytes) {
        fatal("activations for -b %d -t %d -r %d need %.2f GiB, but only %.2f GiB of GPU memory is free "
              "(%.2f GiB total, %.2f GiB already used by parameters and optimizer state). "
              "Use a smaller -b (with -d to keep the total batch) or more recompute (-r 2).",
              B, T, model->opt.recompute, need / 1073741824.0, free_bytes / 1073741824.0, total_bytes / 1073741824.0,
              gpt2_state_bytes(c, gpt2_uses_master_weights(model), model->mp) / 1073741824.0);
    }
    cudaCheck(cudaMalloc(&model->acts_memory, layout.total));
    cudaCheck(cudaMemset(model->acts_memory, 0, layout.total));
    void** slots = reinterpret_cast<void**>(&model->acts);  // field i is ActivationTensor i
    uint8_t* base = static_cast<uint8_t*>(model->acts_memory);
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) slots[i] = base + layout.offset[i];
    cudaCheck(cudaMalloc(&model->scratch_f32, model->scratch_f32_floats * sizeof(float)));
    const size_t BT = (size_t)B * T;
    cudaCheck(cudaMalloc(&model->inputs, BT * sizeof(int)));
    cudaCheck(cudaMalloc(&model->targets, BT * sizeof(int)));
    cudaCheck(cudaMallocHost(&model->inputs_host, BT * sizeof(int)));
    cudaCheck(cudaMallocHost(&model->targets_host, BT * sizeof(int)));
    cudaCheck(cudaMallocHost(&model->losses_host, BT * sizeof(float)));
    encoder_backward_workspace_init(&model->enc_ws, (int)BT, c.padded_vocab_size, c.channels);
}

// Largest micro-batch B (for this T) whose activations fit in `free_bytes`.
inline int gpt2_estimate_max_batch(GpuContext& ctx, const GPT2Config& cfg, int T, int recompute, size_t free_bytes) {
    int best = 0;
    for (int b = 1; b <= 4096; b *= 2) {
        if (gpt2_activation_bytes(ctx, cfg, b, T, recompute) + GPT2_ACTIVATION_MARGIN_BYTES <= free_bytes) best = b;
        else break;
    }
    // refine linearly above the last power of two
    if (best > 0) {
        for (int b = best + 1; b < 2 * best; b++) {
            if (gpt2_activation_bytes(ctx, cfg, b, T, recompute) + GPT2_ACTIVATION_MARGIN_BYTES <= free_bytes) best = b;
            else break;
        }
    }
    return best;
}

inline void gpt2_free(GPT2* model) {
    gpt2_update_join(model);
    for (cudaEvent_t e : model->update.ready) cudaCheck(cudaEventDestroy(e));
    model->update.ready.clear();
    if (model->update.start) cudaCheck(cudaEventDestroy(model->update.start));
    if (model->update.stream) cudaCheck(cudaStreamDestroy(model->update.stream));
    model->update.start = nullptr;
    model->update.stream = nullptr;
    cudaFreeCheck(&model->params_memory);
    cudaFreeCheck(&model->grads_memory);
    cudaFreeCheck(&model->m_memory);
    cudaFreeCheck(&model->v_memory);
    cudaFreeCheck(&model->master_weights);
    global_norm_spans_free(&model->shard.norm_spans);
    cudaFreeCheck(&model->acts_memory);
    cudaFreeCheck(&model->scratch_f32);
    cudaFreeCheck(&model->inputs);
    cudaFreeCheck(&model->targets);
    for (void* p : {(void*)model->inputs_host, (void*)model->targets_host, (void*)model->losses_host, (void*)model->norm_host}) {
        if (p) cudaCheck(cudaFreeHost(p));
    }
    model->inputs_host = model->targets_host = nullptr;
    model->losses_host = model->norm_host = nullptr;
    encoder_backward_workspace_free(&model->enc_ws);
    model->stream = nullptr;  // the context's (gpu_context_free destroys it)
    model->ctx = nullptr;
}

// ----------------------------------------------------------------------------
// attention dispatch: the one place where USE_CUDNN chooses the implementation
//
// cuDNN builds for sm_90a (GPU_COMPUTE_CAPABILITY=90, LLMC_SM90A) run cuDNN's forward and
// llmc/attention.cuh's wgmma backward: both backwards are deterministic, and ours is faster in the lab
// at GPT-2's shapes (the times: dev/cuda/PERF.md row 22). The forward's statistics are the same quantity
// on both sides (natural-log log-sum-exp of the scaled scores, (B,NH,T) fp32;
// dev/cuda/attention_crosscheck checks the mixed pair against cuDNN's own backward). Other targets keep
// cuDNN's backward (attention.cuh's mma.sync backward is slower than cuDNN's there).
// -DGPT2_CUDNN_BACKWARD=1 forces cuDNN's backward (A/B builds: make USE_CUDNN=1
// EXTRA_NVCC_FLAGS=-DGPT2_CUDNN_BACKWARD=1; without USE_CUDNN=1 the flag changes nothing).
#if defined(ENABLE_CUDNN) && !defined(GPT2_CUDNN_BACKWARD)
#if defined(LLMC_SM90A)
#define GPT2_CUDNN_BACKWARD 0
#else
#define GPT2_CUDNN_BACKWARD 1
#endif
#endif

// What the binary runs, for the run table: "cuDNN flash attention", or the mixed pair.
inline std::string gpt2_attention_name() {
#if defined(ENABLE_CUDNN)
    if (GPT2_CUDNN_BACKWARD) return "cuDNN flash attention";
    return "cuDNN forward, attention.cuh wgmma backward";  // GPT2_CUDNN_BACKWARD is 0 only on sm_90a
#else
    return std::string("llmc/attention.cuh, ") + attention_engine_name();
#endif
}

inline void gpt2_attention_forward(GpuContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                                   int NH, cudaStream_t stream) {
#ifdef ENABLE_CUDNN
    attention_forward_cudnn(*ctx.cudnn, out, lse, qkv, B, T, NH, C, true, stream);
#else
    (void)ctx;
    attention_forward(out, lse, qkv, B, T, C, NH, stream);
#endif
}

inline void gpt2_attention_backward(GpuContext& ctx, floatX* dqkv, float* scratch, const floatX* dout,
                                    const floatX* qkv, const floatX* out, const float* lse, int B, int T, int C, int NH,
                                    cudaStream_t stream) {
#if defined(ENABLE_CUDNN)
    if constexpr (GPT2_CUDNN_BACKWARD) {
        attention_backward_cudnn(*ctx.cudnn, dqkv, dout, qkv, out, lse, B, T, NH, C, stream);
        return;
    }
#endif
    (void)ctx;
    attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, stream);
}

// ----------------------------------------------------------------------------
// forward / backward

// One transformer block: layer l's slices of the stacked parameters (w), of their gradients (g) and of
// the activations, for the batch (B, T) of the call. Forward and backward both address a layer
// through this, so the activation layout and the recompute levels are sliced in one place.
struct LayerParams {  // the NUM_LAYER_TENSORS per-layer tensors, in checkpoint order
    floatX *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};
static_assert(sizeof(LayerParams) == NUM_LAYER_TENSORS * sizeof(floatX*), "12 tensor pointers");

struct LayerView {
    LayerParams w, g;
    const floatX* residual;      // (B, T, C) input of the block: encoded, or layer l-1's residual3
    floatX* ln1;                 // (B, T, LD) (shared by all layers with recompute 2)
    float *ln1_mean, *ln1_rstd;  // (B, T)
    floatX* qkv;                 // (B, T, 3C)
    floatX* atty;                // (B, T, C)
    float* lse;                  // (B, NH, T)
    floatX* residual2;           // (B, T, C)
    floatX* ln2;                 // (B, T, LD) (shared with recompute 2)
    float *ln2_mean, *ln2_rstd;  // (B, T)
    floatX* fch;                 // (B, T, 4C)
    floatX* fch_gelu;            // (B, T, 4C) (shared with recompute >= 1)
    floatX* residual3;           // (B, T, C)
};

// Layer l of stacked tensors laid out as gpt2_param_sizes: each per-layer tensor is 1/L of its whole.
inline LayerParams gpt2_layer_slice(const ParameterTensors& t, const size_t sizes[NUM_PARAMETER_TENSORS], int L,
                                    int l) {
    LayerParams v;
    floatX** out = reinterpret_cast<floatX**>(&v);
    for (int j = 0; j < NUM_LAYER_TENSORS; j++) {
        const int i = PARAM_FIRST_LAYER_TENSOR + j;
        out[j] = tensor_slots(&t)[i] + (size_t)l * (sizes[i] / L);
    }
    return v;
}

inline LayerView gpt2_layer_view(GPT2* model, int l, int B, int T) {
    const GPT2Config& cfg = model->config;
    const size_t BT = (size_t)B * T, C = cfg.channels, btc = BT * C, btld = BT * gpt2_ln_ld(cfg);
    const bool ln_per_layer = model->opt.recompute < 2, gelu_per_layer = model->opt.recompute < 1;
    const ActivationTensors& a = model->acts;
    LayerView v;
    v.w = gpt2_layer_slice(model->params, model->param_sizes, cfg.num_layers, l);
    v.g = gpt2_layer_slice(model->grads, model->param_sizes, cfg.num_layers, l);
    v.residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * btc;
    v.ln1 = ln_per_layer ? a.ln1 + l * btld : a.ln1;
    v.ln1_mean = a.ln1_mean + l * BT;
    v.ln1_rstd = a.ln1_rstd + l * BT;
    v.qkv = a.qkv + l * 3 * btc;
    v.atty = a.atty + l * btc;
    v.lse = a.att_lse + l * BT * cfg.num_heads;
    v.residual2 = a.residual2 + l * btc;
    v.ln2 = ln_per_layer ? a.ln2 + l * btld : a.ln2;
    v.ln2_mean = a.ln2_mean + l * BT;
    v.ln2_rstd = a.ln2_rstd + l * BT;
    v.fch = a.fch + l * 4 * btc;
    v.fch_gelu = gelu_per_layer ? a.fch_gelu + l * 4 * btc : a.fch_gelu;
    v.residual3 = a.residual3 + l * btc;
    return v;
}

// Forward pass over inputs (B, T) from host memory (validated by the data loader). With targets,
// also the per-token losses (losses +=) and, when `for_training`, the logit gradients in place.
// `grad_accum_steps` sets dloss = 1 / (B*T*grad_accum_steps).
inline void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, bool for_training,
                         int grad_accum_steps = 1) {
    const GPT2Config& cfg = model->config;
    if (B > model->B || T != model->T) {
        fatal("forward with B=%d T=%d but activations were allocated for B=%d T=%d", B, T, model->B, model->T);
    }
    const int L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    const int BT = B * T;
    const int LD = gpt2_ln_ld(cfg);  // ln1 / ln2 row stride
    cudaStream_t s = model->stream;
    GpuContext& ctx = *model->ctx;
    ActivationTensors& a = model->acts;
    const ParameterTensors& p = model->params;

    cudaCheck(cudaStreamSynchronize(s));  // the pinned staging buffers may still feed an earlier copy
    PhaseTimer* tm = model->timer;
    phase_mark(tm, "inputs H2D", s);
    memcpy(model->inputs_host, inputs, BT * sizeof(int));
    cudaCheck(cudaMemcpyAsync(model->inputs, model->inputs_host, BT * sizeof(int), cudaMemcpyHostToDevice, s));
    if (targets) {
        memcpy(model->targets_host, targets, BT * sizeof(int));
        cudaCheck(cudaMemcpyAsync(model->targets, model->targets_host, BT * sizeof(int), cudaMemcpyHostToDevice, s));
    }

    const bool wait_update = model->update.pending;  // the last update is still running: wait per part
    auto wait_part = [&](int k) {
        if (wait_update) cudaCheck(cudaStreamWaitEvent(s, model->update.ready[k], 0));
    };
    model->update.pending = false;  // by the LM head, this stream has waited for all of it
    phase_mark(tm, "encoder fwd", s);
    wait_part(0);
    encoder_forward(a.encoded, model->inputs, p.wte, p.wpe, B, T, C, s);
    for (int l = 0; l < L; l++) {
        const LayerView v = gpt2_layer_view(model, l, B, T);
        wait_part(1 + l);
        phase_mark(tm, "layernorm fwd", s);
        layernorm_forward(v.ln1, v.ln1_mean, v.ln1_rstd, v.residual, v.w.ln1w, v.w.ln1b, BT, C, s, LD);
        phase_mark(tm, "matmul qkv fwd", s);
        matmul_forward(ctx, v.qkv, nullptr, v.ln1, v.w.qkvw, v.w.qkvb, BT, C, 3 * C, s, LD);
        phase_mark(tm, "attention fwd", s);
        gpt2_attention_forward(ctx, v.atty, v.lse, v.qkv, B, T, C, NH, s);
        phase_mark(tm, "matmul attproj fwd", s);
        // the residual add rides in the GEMM epilogue (llmc/matmul.cuh): residual2 = residual + attproj
        matmul_forward(ctx, v.residual2, nullptr, v.atty, v.w.attprojw, v.w.attprojb, BT, C, C, s, 0, v.residual);
        phase_mark(tm, "layernorm fwd", s);
        layernorm_forward(v.ln2, v.ln2_mean, v.ln2_rstd, v.residual2, v.w.ln2w, v.w.ln2b, BT, C, s, LD);
        phase_mark(tm, "matmul fc fwd", s);
        if (model->opt.gelu_fusion >= 1) {
            matmul_forward(ctx, v.fch_gelu, v.fch, v.ln2, v.w.fcw, v.w.fcb, BT, C, 4 * C, s, LD);
        } else {
            matmul_forward(ctx, v.fch, nullptr, v.ln2, v.w.fcw, v.w.fcb, BT, C, 4 * C, s, LD);
            phase_mark(tm, "gelu fwd", s);
            gelu_forward(v.fch_gelu, v.fch, (size_t)BT * 4 * C, s);
        }
        phase_mark(tm, "matmul fcproj fwd", s);
        matmul_forward(ctx, v.residual3, nullptr, v.fch_gelu, v.w.fcprojw, v.w.fcprojb, BT, 4 * C, C, s, 0,
                       v.residual2);
    }
    wait_part(L + 1);
    phase_mark(tm, "layernorm fwd", s);
    const floatX* residual3 = gpt2_layer_view(model, L - 1, B, T).residual3;
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual3, p.lnfw, p.lnfb, BT, C, s);
    phase_mark(tm, "lm head fwd", s);
    matmul_forward(ctx, a.output, nullptr, a.lnf, p.wte, nullptr, BT, C, Vp, s);

    if (targets) {
        const float dloss = 1.0f / ((float)BT * grad_accum_steps);
        phase_mark(tm, "classifier", s);
        fused_classifier(a.output, a.losses, model->targets, dloss, BT, V, Vp, for_training, s);
    }
    // the host groups the tokens for the embedding backward while the GPU runs the forward queued above
    if (for_training) encoder_backward_prepare(&model->enc_ws, model->inputs_host, BT, s);
}

// Zero the per-token losses (start of an optimizer step or of an evaluation).
inline void gpt2_zero_losses(GPT2* model) {
    cudaCheck(cudaMemsetAsync(model->acts.losses, 0, (size_t)model->B * model->T * sizeof(float), model->stream));
}

// Sum of the per-token losses so far, in double on the host (deterministic).
inline double gpt2_losses_sum(GPT2* model, int B, int T) {
    cudaCheck(cudaMemcpyAsync(model->losses_host, model->acts.losses, (size_t)B * T * sizeof(float),
                              cudaMemcpyDeviceToHost, model->stream));
    cudaCheck(cudaStreamSynchronize(model->stream));
    double sum = 0.0;
    for (int i = 0; i < B * T; i++) sum += model->losses_host[i];
    return sum;
}

// Backward pass after gpt2_forward(..., for_training=true) on the same batch. Parameter gradients: =
// on the first micro-step of an optimizer step (every element of grads_memory is written: the GPU
// test fills it with NaN first), += on the others. On the last micro-step (ZeRO-0, several processes)
// each layer's gradients start their all-reduce as soon as they are final; gpt2_reduce_gradients
// completes the reduction.
inline void gpt2_backward(GPT2* model, int B, int T, bool first_micro_step = true, bool last_micro_step = true) {
    const GPT2Config& cfg = model->config;
    const int L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, Vp = cfg.padded_vocab_size;
    const int BT = B * T;
    const size_t btc = (size_t)BT * C;
    const int LD = gpt2_ln_ld(cfg);  // ln1 / ln2 row stride
    cudaStream_t s = model->stream;
    GpuContext& ctx = *model->ctx;
    ActivationTensors& a = model->acts;
    const ParameterTensors& p = model->params;
    ParameterTensors& g = model->grads;
    const bool ln_per_layer = model->opt.recompute < 2;
    const bool gelu_per_layer = model->opt.recompute < 1;
    float* scratch = model->scratch_f32;
    gpt2_update_join(model, false);  // (a forward ran first and waited already; this is for other callers)
    const bool acc = !first_micro_step;  // parameter gradients += (else =)

    floatX* dresidual = a.scratch_btc;  // gradient of the residual stream (+=)
    floatX* dl_btc = a.scratch_btc2;
    floatX* dl_bt4c = a.scratch_bt4c;
    PhaseTimer* tm = model->timer;
    ctx.timer = tm;  // matmul_backward's own phases (bias gradients), for this pass only
    phase_mark(tm, "lm head bwd", s);
    cudaCheck(cudaMemsetAsync(dresidual, 0, btc * sizeof(floatX), s));

    // LM head (tied to wte) and the final LayerNorm
    matmul_backward(ctx, dl_btc, g.wte, nullptr, scratch, a.output, a.lnf, p.wte, nullptr, BT, C, Vp, s, 0, acc);
    phase_mark(tm, "layernorm bwd", s);
    // Each LayerNorm backward also sums the residual gradient it leaves behind over the rows: that is
    // the bias gradient of the projection (fcproj, attproj) whose output was added to that residual.
    const LayerView last = gpt2_layer_view(model, L - 1, B, T);
    layernorm_backward(ctx, dresidual, g.lnfw, g.lnfb, scratch, dl_btc, last.residual3, p.lnfw, a.lnf_mean,
                       a.lnf_rstd, BT, C, s, last.g.fcprojb, acc);

    for (int l = L - 1; l >= 0; l--) {
        const LayerView v = gpt2_layer_view(model, l, B, T);
        // MLP: recompute what was not kept
        phase_mark(tm, "recompute (gelu, layernorm)", s);
        if (!gelu_per_layer) gelu_forward(v.fch_gelu, v.fch, (size_t)BT * 4 * C, s);
        if (!ln_per_layer) {
            layernorm_recompute(v.ln2, v.residual2, v.ln2_mean, v.ln2_rstd, v.w.ln2w, v.w.ln2b, BT, C, s, LD);
        }
        const bool fused_dgelu = model->opt.gelu_fusion >= 2;
        phase_mark(tm, "matmul fcproj bwd", s);
        matmul_backward(ctx, dl_bt4c, v.g.fcprojw, nullptr, scratch, dresidual, v.fch_gelu,  // fcprojb: LN bwd
                        v.w.fcprojw, fused_dgelu ? v.fch : nullptr, BT, 4 * C, C, s, 0, acc);
        phase_mark(tm, "gelu bwd", s);
        if (!fused_dgelu) gelu_backward(dl_bt4c, v.fch, dl_bt4c, (size_t)BT * 4 * C, s);
        phase_mark(tm, "matmul fc bwd", s);
        matmul_backward(ctx, dl_btc, v.g.fcw, v.g.fcb, scratch, dl_bt4c, v.ln2, v.w.fcw, nullptr, BT, C, 4 * C, s, LD,
                        acc);
        phase_mark(tm, "layernorm bwd", s);
        layernorm_backward(ctx, dresidual, v.g.ln2w, v.g.ln2b, scratch, dl_btc, v.residual2, v.w.ln2w, v.ln2_mean,
                           v.ln2_rstd, BT, C, s, v.g.attprojb, acc);

        // attention
        phase_mark(tm, "matmul attproj bwd", s);
        matmul_backward(ctx, dl_btc, v.g.attprojw, nullptr, scratch, dresidual, v.atty, v.w.attprojw, nullptr, BT, C, C,
                        s, 0, acc);
        floatX* dqkv = dl_bt4c;  // (B, T, 3C) fits in the 4C scratch
        phase_mark(tm, "attention bwd", s);
        gpt2_attention_backward(ctx, dqkv, scratch, dl_btc, v.qkv, v.atty, v.lse, B, T, C, NH, s);
        phase_mark(tm, "recompute (gelu, layernorm)", s);
        if (!ln_per_layer) {
            layernorm_recompute(v.ln1, v.residual, v.ln1_mean, v.ln1_rstd, v.w.ln1w, v.w.ln1b, BT, C, s, LD);
        }
        phase_mark(tm, "matmul qkv bwd", s);
        matmul_backward(ctx, dl_btc, v.g.qkvw, v.g.qkvb, scratch, dqkv, v.ln1, v.w.qkvw, nullptr, BT, C, 3 * C, s, LD,
                        acc);
        phase_mark(tm, "layernorm bwd", s);
        floatX* prev_fcprojb = l > 0 ? gpt2_layer_slice(g, model->param_sizes, L, l - 1).fcprojb : nullptr;
        layernorm_backward(ctx, dresidual, v.g.ln1w, v.g.ln1b, scratch, dl_btc, v.residual, v.w.ln1w, v.ln1_mean,
                           v.ln1_rstd, BT, C, s, prev_fcprojb, acc);
        if (last_micro_step && model->mp->zero_stage == 0) {
            floatX* const* layer_grads = reinterpret_cast<floatX* const*>(&v.g);  // checkpoint order
            size_t counts[NUM_LAYER_TENSORS];
            for (int j = 0; j < NUM_LAYER_TENSORS; j++) counts[j] = model->param_sizes[PARAM_FIRST_LAYER_TENSOR + j] / L;
            multi_gpu_async_reduce(layer_grads, counts, NUM_LAYER_TENSORS, model->mp, s);
        }
    }
    const uint32_t seed = random_u32(&model->rng_state);
    phase_mark(tm, "encoder bwd", s);
    encoder_backward(g.wte, g.wpe, &model->enc_ws, dresidual, B, T, C, seed, s, acc);
    if (!acc && T < cfg.max_seq_len) {  // wpe rows no position of this batch reached: zero, as every row is written
        cudaCheck(cudaMemsetAsync(g.wpe + (size_t)T * C, 0, (size_t)(cfg.max_seq_len - T) * C * sizeof(floatX), s));
    }
    if (last_micro_step && model->mp->zero_stage == 0) {
        floatX* rest[] = {g.wte, g.wpe, g.lnfw, g.lnfb};
        const size_t counts[] = {model->param_sizes[PARAM_WTE], model->param_sizes[PARAM_WPE],
                                 model->param_sizes[PARAM_LNFW], model->param_sizes[PARAM_LNFB]};
        multi_gpu_async_reduce(rest, counts, 4, model->mp, s);
    }
    phase_mark(tm, "idle (host work, syncs)", s);
    ctx.timer = nullptr;  // the trainer may free its timer after the last step
}

// Completes the cross-process gradient reduction of an optimizer step (after its last backward):
// ZeRO-1 reduce-scatters every slice onto this process's run of it (one NCCL group);
// then the compute stream waits for NCCL.
inline void gpt2_reduce_gradients(GPT2* model) {
    phase_mark(model->timer, "gradient reduction (NCCL)", model->stream);
    if (model->mp->zero_stage == 1) {
        multi_gpu_async_reduce_scatter(model->grads_memory, model->shard.slices.data(), (int)model->shard.slices.size(),
                                       model->mp, model->stream);
    }
    multi_gpu_wait(model->mp, model->stream);
    phase_mark(model->timer, "idle (host work, syncs)", model->stream);
}

// ----------------------------------------------------------------------------
// optimizer

// Global L2 norm of the gradient averaged over processes (synchronizes). The buffers hold the sum
// over processes (llmc/multi_gpu.cuh), so the norm of the sum is scaled by 1/P in fp32. Under ZeRO-1 each
// process holds the reduced gradient of its chunks only: their sum of squares (one pass over all chunks,
// in the order of a single buffer, so one process gets ZeRO-0's bits) is then added across processes.
inline float gpt2_grad_norm(GPT2* model) {
    float* partials = model->scratch_f32;
    float* out = model->scratch_f32 + GLOBAL_NORM_BLOCKS;
    phase_mark(model->timer, "grad norm", model->stream);
    if (model->mp->zero_stage == 1) {
        global_norm_squared_spans(out, partials, model->grads_memory, model->shard.norm_spans, model->stream);
        multi_gpu_all_reduce_f32(out, 1, MultiGpuOp::sum, model->mp, model->stream);
    } else {
        global_norm_squared(out, partials, model->grads_memory, model->num_parameters, model->stream);
    }
    cudaCheck(cudaMemcpyAsync(model->norm_host, out, sizeof(float), cudaMemcpyDeviceToHost, model->stream));
    phase_mark(model->timer, "idle (host work, syncs)", model->stream);
    cudaCheck(cudaStreamSynchronize(model->stream));
    return sqrtf(*model->norm_host) * multi_gpu_mean_scale(model->mp);
}

// AdamW step `t` (1-based) with gradients scaled by grad_scale (clipping) and by 1/P (the buffers hold
// the sum over processes; one fp32 scale, so the mean is as exact for P = 3 as for P = 2), over this
// process's chunks (ZeRO-0: one chunk per tensor; ZeRO-1: its 1/P of every tensor of every layer, or its
// contiguous 1/P in the padded layout; then an all-gather gives every process all parameters). Seeds of
// stochastic rounding come from model->rng_state, one per tensor, drawn identically on every process;
// rounding positions are indices within the whole tensor, so the result does not depend on how the
// chunks are cut.
inline void gpt2_update(GPT2* model, float lr, float weight_decay, float grad_scale, int t) {
    const bool master = gpt2_uses_master_weights(model);
    const std::vector<ZeroChunk>& chunks = model->shard.chunks;
    model->rng_state_last_update = model->rng_state;
    // opt.overlap_update: on the update stream, in the order the next forward reads the parameters (ZeRO-0
    // only: ZeRO-1's all-gather stays in the step; not while -pt times the phases of the compute stream)
    const bool overlap = model->update.stream != nullptr && model->mp->zero_stage == 0 && model->timer == nullptr;
    cudaStream_t us = overlap ? model->update.stream : model->stream;
    if (overlap) {
        cudaCheck(cudaEventRecord(model->update.start, model->stream));  // gradients final, norm known
        cudaCheck(cudaStreamWaitEvent(us, model->update.start, 0));
    }
    phase_mark(model->timer, "adamw", model->stream);
    if (master && !model->master_initialized) {
        if (model->mp->zero_stage == 0) {
            copy_to_fp32(model->master_weights, model->params_memory, model->num_parameters, us);
        } else {
            for (const ZeroChunk& c : chunks) {
                copy_to_fp32(model->master_weights + c.shard_offset, model->params_memory + c.offset, c.size, us);
            }
        }
        model->master_initialized = true;
    }
    AdamWParams ap[NUM_PARAMETER_TENSORS];
    uint32_t seeds[NUM_PARAMETER_TENSORS];
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {  // one seed per tensor, drawn in tensor order
        ap[i].lr = lr;
        ap[i].weight_decay = param_tensor_is_2d(i) ? weight_decay : 0.0f;
        ap[i].grad_scale = grad_scale * multi_gpu_mean_scale(model->mp);
        ap[i].t = t;
        seeds[i] = random_u32(&model->rng_state);
    }
    // elements [first, first + count) of chunk c, which belongs to tensor i
    auto launch = [&](const ZeroChunk& c, size_t first, size_t count) {
        adamw_update(model->params_memory + c.offset + first,
                     master ? model->master_weights + c.shard_offset + first : nullptr,
                     model->grads_memory + c.offset + first, model->m_memory + c.shard_offset + first,
                     model->v_memory + c.shard_offset + first, count, (uint32_t)(c.position + first), ap[c.tensor],
                     seeds[c.tensor], us);
    };
    if (!overlap) {
        for (const ZeroChunk& c : chunks) launch(c, 0, c.size);  // chunks are in tensor order
    } else {  // ZeRO-0: chunk i is tensor i; layer l's slices of the 12 layer tensors together
        const int L = model->config.num_layers;
        launch(chunks[PARAM_WTE], 0, chunks[PARAM_WTE].size);
        launch(chunks[PARAM_WPE], 0, chunks[PARAM_WPE].size);
        cudaCheck(cudaEventRecord(model->update.ready[0], us));
        for (int l = 0; l < L; l++) {
            for (int j = 0; j < NUM_LAYER_TENSORS; j++) {
                const ZeroChunk& c = chunks[PARAM_FIRST_LAYER_TENSOR + j];
                const size_t per_layer = c.size / L;
                launch(c, (size_t)l * per_layer, per_layer);
            }
            cudaCheck(cudaEventRecord(model->update.ready[1 + l], us));
        }
        launch(chunks[PARAM_LNFW], 0, chunks[PARAM_LNFW].size);
        launch(chunks[PARAM_LNFB], 0, chunks[PARAM_LNFB].size);
        cudaCheck(cudaEventRecord(model->update.ready[L + 1], us));
        model->update.pending = true;
        return;
    }
    phase_mark(model->timer, "parameter all-gather (NCCL)", model->stream);
    multi_gpu_all_gather(model->params_memory, model->shard.slices.data(), (int)model->shard.slices.size(), model->mp,
                         model->stream);
    multi_gpu_wait(model->mp, model->stream);
    phase_mark(model->timer, "idle (host work, syncs)", model->stream);
}

// Copies optimizer state to the host (for the state file): m, v and, if kept, master weights.
inline void gpt2_optimizer_state_to_host(GPT2* model, std::vector<float>* m, std::vector<float>* v,
                                         std::vector<float>* master) {
    gpt2_update_join(model);
    const size_t n = model->shard.size;
    m->resize(n);
    v->resize(n);
    cudaCheck(cudaMemcpy(m->data(), model->m_memory, n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(v->data(), model->v_memory, n * sizeof(float), cudaMemcpyDeviceToHost));
    if (model->master_weights && model->master_initialized) {
        master->resize(n);
        cudaCheck(cudaMemcpy(master->data(), model->master_weights, n * sizeof(float), cudaMemcpyDeviceToHost));
    } else {
        master->clear();
    }
}

// This process's parameters in m/v/master order (its chunks back to back, llmc/zero_shards.h), as fp32:
// the master block of an FP32 build's state file (written, and checked on reading).
inline void gpt2_shard_params_to_host(GPT2* model, std::vector<float>* out) {
    gpt2_update_join(model);
    out->assign(model->shard.size, 0.0f);
    std::vector<floatX> buf;
    for (const ZeroChunk& c : model->shard.chunks) {
        buf.resize(c.size);
        cudaCheck(cudaMemcpy(buf.data(), model->params_memory + c.offset, c.size * sizeof(floatX),
                             cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < c.size; i++) (*out)[c.shard_offset + i] = (float)buf[i];
    }
}

// Index in the full parameter vector of element i of this process's shard.
inline size_t gpt2_shard_param_index(const GPT2* model, size_t i) {
    for (const ZeroChunk& c : model->shard.chunks) {
        if (i >= c.shard_offset && i < c.shard_offset + c.size) return c.offset + (i - c.shard_offset);
    }
    return i;
}

inline void gpt2_optimizer_state_from_host(GPT2* model, const float* m, const float* v, const float* master) {
    const size_t n = model->shard.size;
    cudaCheck(cudaMemcpy(model->m_memory, m, n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(model->v_memory, v, n * sizeof(float), cudaMemcpyHostToDevice));
    if (master && model->master_weights) {
        cudaCheck(cudaMemcpy(model->master_weights, master, n * sizeof(float), cudaMemcpyHostToDevice));
        model->master_initialized = true;
    }
}
