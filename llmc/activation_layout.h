/*
 * The activation buffer of the GPT-2 model, on the host (no CUDA): which tensors it holds, in which
 * order, and their bytes for a micro-batch (B, T). llmc/gpt2.cuh allocates one buffer of
 * ActivationLayout::total bytes and points the fields of ActivationTensors (one per ActivationTensor,
 * in the same order; static_asserts there) at the offsets.
 *
 * Each tensor's shape is one row of ACTIVATION_SHAPES: the layers it is kept for, the values per token
 * and the element type. A tensor without its row, or rows out of order, do not compile
 * (activation_shapes_complete below), so a new tensor cannot silently get 0 bytes.
 *
 * Recompute levels (-r) shrink what is kept per layer: 1 keeps one GELU output buffer shared by all
 * layers (fch_gelu), 2 also one ln1 and one ln2 buffer (their statistics stay per layer).
 */
#pragma once

#include <cstddef>

#include "llmc/model_file.h"  // GPT2Config

// The tensors in buffer order (= the field order of ActivationTensors, llmc/gpt2.cuh).
enum ActivationTensor : int {
    ACT_ENCODED, ACT_LN1, ACT_LN1_MEAN, ACT_LN1_RSTD, ACT_QKV, ACT_ATTY, ACT_ATT_LSE, ACT_RESIDUAL2,
    ACT_LN2, ACT_LN2_MEAN, ACT_LN2_RSTD, ACT_FCH, ACT_FCH_GELU, ACT_RESIDUAL3, ACT_LNF, ACT_LNF_MEAN,
    ACT_LNF_RSTD, ACT_LOSSES, ACT_OUTPUT, ACT_SCRATCH_BTC, ACT_SCRATCH_BTC2, ACT_SCRATCH_BT4C,
    NUM_ACTIVATION_TENSORS
};

// How many layers a tensor is kept for: one (not per layer), L, or L unless a recompute level keeps one
// buffer for all layers (-r 2 for ln1 / ln2, -r 1 and 2 for the GELU output).
enum class ActLayers { one, all, ln, gelu };
// Values per token (per row of B*T): C, the ln row stride LD (C plus the ones column of the biased
// matmuls, llmc/matmul.cuh), 3C, 4C, Vp, NH (one per head), or one.
enum class ActWidth { one, C, LD, C3, C4, Vp, NH };
enum class ActType { floatX, fp32 };

struct ActivationShape {
    ActivationTensor tensor;
    ActLayers layers;
    ActWidth width;
    ActType type;
};

inline constexpr ActivationShape ACTIVATION_SHAPES[] = {
    // tensor           layers           per token      element               shape
    {ACT_ENCODED,       ActLayers::one,  ActWidth::C,   ActType::floatX},  // (B, T, C)
    {ACT_LN1,           ActLayers::ln,   ActWidth::LD,  ActType::floatX},  // (L, B, T, LD)
    {ACT_LN1_MEAN,      ActLayers::all,  ActWidth::one, ActType::fp32},    // (L, B, T)
    {ACT_LN1_RSTD,      ActLayers::all,  ActWidth::one, ActType::fp32},    // (L, B, T)
    {ACT_QKV,           ActLayers::all,  ActWidth::C3,  ActType::floatX},  // (L, B, T, 3C)
    {ACT_ATTY,          ActLayers::all,  ActWidth::C,   ActType::floatX},  // (L, B, T, C)
    {ACT_ATT_LSE,       ActLayers::all,  ActWidth::NH,  ActType::fp32},    // (L, B, NH, T)
    {ACT_RESIDUAL2,     ActLayers::all,  ActWidth::C,   ActType::floatX},  // (L, B, T, C)
    {ACT_LN2,           ActLayers::ln,   ActWidth::LD,  ActType::floatX},  // (L, B, T, LD)
    {ACT_LN2_MEAN,      ActLayers::all,  ActWidth::one, ActType::fp32},    // (L, B, T)
    {ACT_LN2_RSTD,      ActLayers::all,  ActWidth::one, ActType::fp32},    // (L, B, T)
    {ACT_FCH,           ActLayers::all,  ActWidth::C4,  ActType::floatX},  // (L, B, T, 4C)
    {ACT_FCH_GELU,      ActLayers::gelu, ActWidth::C4,  ActType::floatX},  // (L, B, T, 4C)
    {ACT_RESIDUAL3,     ActLayers::all,  ActWidth::C,   ActType::floatX},  // (L, B, T, C)
    {ACT_LNF,           ActLayers::one,  ActWidth::C,   ActType::floatX},  // (B, T, C)
    {ACT_LNF_MEAN,      ActLayers::one,  ActWidth::one, ActType::fp32},    // (B, T)
    {ACT_LNF_RSTD,      ActLayers::one,  ActWidth::one, ActType::fp32},    // (B, T)
    {ACT_LOSSES,        ActLayers::one,  ActWidth::one, ActType::fp32},    // (B, T)
    {ACT_OUTPUT,        ActLayers::one,  ActWidth::Vp,  ActType::floatX},  // (B, T, Vp)
    {ACT_SCRATCH_BTC,   ActLayers::one,  ActWidth::C,   ActType::floatX},  // (B, T, C)
    {ACT_SCRATCH_BTC2,  ActLayers::one,  ActWidth::C,   ActType::floatX},  // (B, T, C)
    {ACT_SCRATCH_BT4C,  ActLayers::one,  ActWidth::C4,  ActType::floatX},  // (B, T, 4C)
};

// One row per tensor, row i for tensor i.
constexpr bool activation_shapes_complete() {
    if (sizeof(ACTIVATION_SHAPES) / sizeof(ACTIVATION_SHAPES[0]) != NUM_ACTIVATION_TENSORS) return false;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
        if (ACTIVATION_SHAPES[i].tensor != i) return false;
    }
    return true;
}
static_assert(activation_shapes_complete(), "ACTIVATION_SHAPES needs one row per ActivationTensor, in enum order");

struct ActivationLayout {
    size_t bytes[NUM_ACTIVATION_TENSORS];   // each rounded up to 256
    size_t offset[NUM_ACTIVATION_TENSORS];  // from the start of the buffer, tensors back to back in enum order
    size_t total;
};

// The layout for micro-batch (B, T) at recompute level `recompute`; floatx_bytes: sizeof(floatX) of the
// build, ln_ld: the row stride of ln1 / ln2 (llmc/gpt2.cuh gpt2_ln_ld).
inline ActivationLayout activation_layout(const GPT2Config& cfg, int B, int T, int recompute, size_t floatx_bytes,
                                          size_t ln_ld) {
    const size_t L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, Vp = cfg.padded_vocab_size;
    const size_t BT = (size_t)B * T;
    ActivationLayout layout;
    layout.total = 0;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
        const ActivationShape& s = ACTIVATION_SHAPES[i];
        size_t layers = 1;
        switch (s.layers) {
            case ActLayers::one: layers = 1; break;
            case ActLayers::all: layers = L; break;
            case ActLayers::ln: layers = recompute >= 2 ? 1 : L; break;
            case ActLayers::gelu: layers = recompute >= 1 ? 1 : L; break;
        }
        size_t width = 1;
        switch (s.width) {
            case ActWidth::one: width = 1; break;
            case ActWidth::C: width = C; break;
            case ActWidth::LD: width = ln_ld; break;
            case ActWidth::C3: width = 3 * C; break;
            case ActWidth::C4: width = 4 * C; break;
            case ActWidth::Vp: width = Vp; break;
            case ActWidth::NH: width = NH; break;
        }
        const size_t element = s.type == ActType::floatX ? floatx_bytes : sizeof(float);
        layout.bytes[i] = (layers * BT * width * element + 255) / 256 * 256;
        layout.offset[i] = layout.total;
        layout.total += layout.bytes[i];
    }
    return layout;
}
