// cuDNN fused causal attention (forward and deterministic backward) through the cuDNN frontend graph
// API. Shapes, layouts and what is overwritten: llmc/cudnn_att.h. Compiled on its own by mk/cudnn.mk
// (nvcc -x cu): the frontend headers are large, so only this object pays for them.
#if defined(ENABLE_FP32)
#error "llmc/cudnn_att.cpp: cuDNN fused attention is BF16 only; build with PRECISION=BF16, or USE_CUDNN=0 for FP32"
#endif

// nvcc compiles a .cu twice, for the device and for the host. Nothing here runs on the device, so the
// device pass skips the frontend headers entirely (saves about a third of the compile time).
#if !defined(__CUDA_ARCH__)

#include <cstring>  // before the frontend: its shim uses std::strlen without including it
#include <cudnn.h>
#include <cudnn_frontend.h>

#if CUDNN_FRONTEND_VERSION < 11200
#error "llmc/cudnn_att.cpp needs cuDNN frontend 1.12 or newer (written against 1.32): pip install -U nvidia-cudnn-frontend, then dev/cuda/vendor_cudnn_frontend.sh"
#endif

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "llmc/cudnn_att.h"

#define cudnnCheck(stmt) do { cudnnStatus_t s_ = (stmt); \
    if (s_ != CUDNN_STATUS_SUCCESS) check_failed_("cuDNN", cudnnGetErrorString(s_), #stmt, __FILE__, __LINE__); } while (0)

namespace {

namespace fe = cudnn_frontend;
using GraphPtr = std::shared_ptr<fe::graph::Graph>;

static_assert(kFloatXIsBF16, "cuDNN attention is built for bf16 activations");

// Every non-virtual tensor gets a fixed uid, so the variant pack at execute time is a small map of
// uid -> device pointer and needs no tensor handles from the build.
enum TensorUid : int64_t { kUidQ = 1, kUidK, kUidV, kUidO, kUidStats, kUidDO, kUidDQ, kUidDK, kUidDV };

struct AttentionShape {
    int B, T, NH, HS;
    const char* pass;  // "forward" / "backward": named in error messages
};

cudnnHandle_t cudnn_handle = nullptr;
void* cudnn_workspace = nullptr;  // shared by every graph; grown when a new graph needs more
size_t cudnn_workspace_bytes = 0;
std::map<std::tuple<int, int, int, int, bool>, GraphPtr> forward_graphs;  // (B, NH, T, HS, is_training)
std::map<std::tuple<int, int, int, int>, GraphPtr> backward_graphs;      // (B, NH, T, HS)

[[noreturn]] void attention_failed(const AttentionShape& s, const std::string& message, const char* stmt,
                                   const char* file, int line) {
    char shape[160];
    snprintf(shape, sizeof(shape), "attention %s, shape B=%d T=%d NH=%d HS=%d: ", s.pass, s.B, s.T, s.NH, s.HS);
    check_failed_("cuDNN frontend", (shape + message).c_str(), stmt, file, line);
}

// For frontend calls returning cudnn_frontend::error_t.
#define feCheck(stmt, shape) do { auto e_ = (stmt); \
    if (e_.is_bad()) attention_failed((shape), e_.get_message(), #stmt, __FILE__, __LINE__); } while (0)

void ensure_workspace(size_t bytes) {
    if (bytes <= cudnn_workspace_bytes) return;
    cudaCheck(cudaDeviceSynchronize());  // kernels already queued may still use the old buffer
    cudaFreeCheck(&cudnn_workspace);
    cudaCheck(cudaMalloc(&cudnn_workspace, bytes));
    cudnn_workspace_bytes = bytes;
}

// validate -> operation graph -> heuristics (mode A, fallback engines after it) -> first supported plan.
void finalize_graph(fe::graph::Graph& graph, const AttentionShape& s) {
    feCheck(graph.validate(), s);
    feCheck(graph.build_operation_graph(cudnn_handle), s);
    feCheck(graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), s);
    feCheck(graph.check_support(), s);
    feCheck(graph.build_plans(), s);
    int64_t workspace = 0;
    feCheck(graph.get_workspace_size(workspace), s);
    ensure_workspace((size_t)workspace);
}

GraphPtr new_graph() {
    auto graph = std::make_shared<fe::graph::Graph>();
    // bf16 in and out; softmax, accumulators and every intermediate in fp32
    graph->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return graph;
}

// Strides in elements. Q, K and V are views into (B, T, 3, NH, HS): logical (B, NH, T, HS).
struct AttentionLayout {
    std::vector<int64_t> dims, qkv_strides, o_strides, stats_dims, stats_strides;
    AttentionLayout(int64_t B, int64_t T, int64_t NH, int64_t HS)
        : dims{B, NH, T, HS},
          qkv_strides{T * 3 * NH * HS, HS, 3 * NH * HS, 1},
          o_strides{T * NH * HS, HS, NH * HS, 1},  // (B, T, NH, HS)
          stats_dims{B, NH, T, 1},
          stats_strides{NH * T, T, 1, 1} {}       // (B, NH, T)
};

std::shared_ptr<fe::graph::Tensor_attributes> add_input(fe::graph::Graph& graph, const char* name, TensorUid uid,
                                                        const std::vector<int64_t>& dims,
                                                        const std::vector<int64_t>& strides) {
    return graph.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides));
}

GraphPtr build_forward_graph(const AttentionShape& s, bool is_training) {
    const AttentionLayout L(s.B, s.T, s.NH, s.HS);
    GraphPtr graph = new_graph();
    try {
        auto Q = add_input(*graph, "Q", kUidQ, L.dims, L.qkv_strides);
        auto K = add_input(*graph, "K", kUidK, L.dims, L.qkv_strides);
        auto V = add_input(*graph, "V", kUidV, L.dims, L.qkv_strides);
        auto options = fe::graph::SDPA_attributes()
                           .set_name("attention_forward")
                           .set_generate_stats(is_training)
                           .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)  // causal: key j <= query i
                           .set_diagonal_band_right_bound(0)
                           .set_attn_scale(1.0f / sqrtf((float)s.HS));
        auto [O, stats] = graph->sdpa(Q, K, V, options);
        O->set_output(true).set_uid(kUidO).set_dim(L.dims).set_stride(L.o_strides);
        if (is_training) {
            stats->set_output(true).set_uid(kUidStats).set_data_type(fe::DataType_t::FLOAT)
                .set_dim(L.stats_dims).set_stride(L.stats_strides);
        }
        finalize_graph(*graph, s);
    } catch (const std::exception& e) {  // the frontend throws when no SDPA implementation fits
        attention_failed(s, e.what(), "build_forward_graph", __FILE__, __LINE__);
    }
    return graph;
}

GraphPtr build_backward_graph(const AttentionShape& s) {
    const AttentionLayout L(s.B, s.T, s.NH, s.HS);
    GraphPtr graph = new_graph();
    try {
        auto Q = add_input(*graph, "Q", kUidQ, L.dims, L.qkv_strides);
        auto K = add_input(*graph, "K", kUidK, L.dims, L.qkv_strides);
        auto V = add_input(*graph, "V", kUidV, L.dims, L.qkv_strides);
        auto O = add_input(*graph, "O", kUidO, L.dims, L.o_strides);
        auto dO = add_input(*graph, "dO", kUidDO, L.dims, L.o_strides);
        auto stats = add_input(*graph, "stats", kUidStats, L.stats_dims, L.stats_strides);
        stats->set_data_type(fe::DataType_t::FLOAT);
        auto options = fe::graph::SDPA_backward_attributes()
                           .set_name("attention_backward")
                           .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                           .set_diagonal_band_right_bound(0)
                           .set_attn_scale(1.0f / sqrtf((float)s.HS))
                           // fixed-order dQ accumulation: bitwise reproducible runs. On Hopper this
                           // takes a dP workspace of about B*NH*T*T*2 bytes.
                           .set_deterministic_algorithm(true);
        auto [dQ, dK, dV] = graph->sdpa_backward(Q, K, V, O, dO, stats, options);
        // gradients written straight into the (B, T, 3, NH, HS) layout of the QKV output
        dQ->set_output(true).set_uid(kUidDQ).set_dim(L.dims).set_stride(L.qkv_strides);
        dK->set_output(true).set_uid(kUidDK).set_dim(L.dims).set_stride(L.qkv_strides);
        dV->set_output(true).set_uid(kUidDV).set_dim(L.dims).set_stride(L.qkv_strides);
        finalize_graph(*graph, s);
    } catch (const std::exception& e) {
        attention_failed(s, e.what(), "build_backward_graph", __FILE__, __LINE__);
    }
    return graph;
}

AttentionShape make_shape(int B, int T, int NH, int C, const char* pass) {
    if (B <= 0 || T <= 0 || NH <= 0 || C <= 0 || C % NH != 0) {
        fatal("cuDNN attention %s: bad shape B=%d T=%d NH=%d C=%d (C must be a multiple of NH)", pass, B, T, NH, C);
    }
    return AttentionShape{B, T, NH, C / NH, pass};
}

}  // namespace

void create_cudnn() {
    if (cudnn_handle != nullptr) return;
    // the frontend headers are compiled against CUDNN_MAJOR; a different major at run time would misbehave
    const size_t runtime_version = cudnnGetVersion();
    if (runtime_version / 10000 != CUDNN_MAJOR) {
        fatal("cuDNN version mismatch: built against cuDNN %d.%d, but the loaded library is %zu.%zu",
              CUDNN_MAJOR, CUDNN_MINOR, runtime_version / 10000, (runtime_version / 100) % 100);
    }
    cudnnCheck(cudnnCreate(&cudnn_handle));
}

void destroy_cudnn() {
    forward_graphs.clear();
    backward_graphs.clear();
    cudaFreeCheck(&cudnn_workspace);
    cudnn_workspace_bytes = 0;
    if (cudnn_handle != nullptr) cudnnCheck(cudnnDestroy(cudnn_handle));
    cudnn_handle = nullptr;
}

void attention_forward_cudnn(floatX* out, float* stats, const floatX* inp, int B, int T, int NH, int C,
                             bool is_training, cudaStream_t stream) {
    const AttentionShape s = make_shape(B, T, NH, C, "forward");
    create_cudnn();  // no-op once the handle exists
    if (is_training && stats == nullptr) attention_failed(s, "is_training needs a stats buffer", "stats", __FILE__, __LINE__);

    const auto key = std::make_tuple(B, NH, T, s.HS, is_training);
    auto it = forward_graphs.find(key);
    if (it == forward_graphs.end()) it = forward_graphs.emplace(key, build_forward_graph(s, is_training)).first;

    floatX* qkv = const_cast<floatX*>(inp);
    std::unordered_map<int64_t, void*> pointers = {
        {kUidQ, qkv}, {kUidK, qkv + C}, {kUidV, qkv + 2 * C}, {kUidO, out}};
    if (is_training) pointers[kUidStats] = stats;

    cudnnCheck(cudnnSetStream(cudnn_handle, stream));
    feCheck(it->second->execute(cudnn_handle, pointers, cudnn_workspace), s);
}

void attention_backward_cudnn(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* out,
                              const float* stats, int B, int T, int NH, int C, cudaStream_t stream) {
    const AttentionShape s = make_shape(B, T, NH, C, "backward");
    create_cudnn();

    const auto key = std::make_tuple(B, NH, T, s.HS);
    auto it = backward_graphs.find(key);
    if (it == backward_graphs.end()) it = backward_graphs.emplace(key, build_backward_graph(s)).first;

    floatX* qkv = const_cast<floatX*>(inp);
    std::unordered_map<int64_t, void*> pointers = {
        {kUidQ, qkv}, {kUidK, qkv + C}, {kUidV, qkv + 2 * C},
        {kUidO, const_cast<floatX*>(out)}, {kUidDO, const_cast<floatX*>(dout)},
        {kUidStats, const_cast<float*>(stats)},
        {kUidDQ, dinp}, {kUidDK, dinp + C}, {kUidDV, dinp + 2 * C}};

    cudnnCheck(cudnnSetStream(cudnn_handle, stream));
    feCheck(it->second->execute(cudnn_handle, pointers, cudnn_workspace), s);
}

#endif  // !defined(__CUDA_ARCH__)
