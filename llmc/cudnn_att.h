/*
 * Causal self-attention through cuDNN's fused (flash) SDPA kernels, built with the cuDNN frontend
 * graph API in llmc/cudnn_att.cpp (its own object: the frontend headers take long to compile).
 * BF16 only; scale 1/sqrt(HS) with HS = C / NH.
 *
 * Layouts (all row-major):
 *   inp   (B, T, 3, NH, HS)  the QKV matmul output, read in place by strides (no permute kernels)
 *   out   (B, T, NH, HS)     = overwritten
 *   stats (B, NH, T) fp32    = softmax log-sum-exp (natural log, of the scaled scores), written only
 *                            when is_training; the backward pass needs it
 *   dinp  (B, T, 3, NH, HS)  = overwritten: dQ, dK, dV, the input gradient of the QKV matmul output
 * The backward is cuDNN's deterministic algorithm, so results are bitwise reproducible. The trainer
 * calls it on targets other than sm_90a only: there llmc/attention.cuh's backward is faster and reads
 * the same out and stats (llmc/gpt2.cuh, attention dispatch).
 *
 * Graphs are built once per shape on first use and cached; the first call with a new shape is slow
 * (tens to hundreds of ms), later calls only launch. Plan autotune (on unless created with autotune false;
 * train_gpt2cu -ma 0): on a graph's first call, the fastest of cuDNN's plans whose outputs are bitwise
 * equal to the default plan's is kept, as llmc/matmul.cuh does for cuBLASLt, so the numbers do not
 * depend on the timing. One workspace buffer, grown when a new graph
 * needs more. Any cuDNN error prints the shape and cuDNN's message, then exits with status 1.
 *
 * All of that (handle, graph cache, workspace, autotune flag, the device's properties) is one
 * CudnnState, opaque outside llmc/cudnn_att.cpp: made by cudnn_state_create, freed by
 * cudnn_state_destroy, held by the program's GpuContext (llmc/gpu_context.cuh: ctx.cudnn, USE_CUDNN
 * builds) or by a lab; the attention calls take it explicitly.
 */
#pragma once

#include <string>
#include "llmc/cuda_common.h"

struct CudnnState;

// The cuDNN handle (after a library version check) for the current device, an empty graph cache and no
// workspace yet. props: the device's (the autotune's L2 flush and hash grid). autotune: see above.
CudnnState* cudnn_state_create(const cudaDeviceProp& props, bool autotune);
void cudnn_state_destroy(CudnnState* st);  // frees the handle, the cached graphs and the workspace; nullptr: no-op
// "9.19.0 (built against 9.19.0)": the loaded library's version and the headers' (they may differ in the
// minor version, e.g. a newer libcudnn on LD_LIBRARY_PATH)
std::string cudnn_version_string();

void attention_forward_cudnn(CudnnState& st,
                             floatX* out,         // (B, T, NH, HS)
                             float* stats,        // (B, NH, T), may be nullptr when !is_training
                             const floatX* inp,   // (B, T, 3, NH, HS)
                             int B, int T, int NH, int C, bool is_training, cudaStream_t stream);

void attention_backward_cudnn(CudnnState& st,
                              floatX* dinp,          // (B, T, 3, NH, HS)
                              const floatX* dout,    // (B, T, NH, HS)
                              const floatX* inp,     // (B, T, 3, NH, HS)
                              const floatX* out,     // (B, T, NH, HS), from the forward
                              const float* stats,    // (B, NH, T), from the forward with is_training
                              int B, int T, int NH, int C, cudaStream_t stream);

// Lines on what the autotune chose per graph (plans, how many bitwise equal, default -> chosen time).
std::string cudnn_autotune_summary(const CudnnState& st);
