// cuDNN fused causal attention (forward and deterministic backward) through the cuDNN frontend graph
// API. Shapes, layouts and what is overwritten: llmc/cudnn_att.h. Compiled on its own by mk/cudnn.mk
// (nvcc -x cu): the frontend headers are large, so only this object pays for them.
#if defined(ENABLE_FP32)
#error "llmc/cudnn_att.cpp: cuDNN fused attention is BF16 only; build with PRECISION=BF16, or USE_CUDNN=0 for FP32"
#endif

// The plan autotune's hash kernel (llmc/autotune.h) is the only device code here.
#include "llmc/autotune.h"

// nvcc compiles a .cu twice, for the device and for the host. Nothing below runs on the device, so the
// device pass skips the frontend headers entirely (saves about a third of the compile time).
#if !defined(__CUDA_ARCH__)

#include <cstring>  // before the frontend: its shim uses std::strlen without including it
#include <cudnn.h>
#include <cudnn_frontend.h>

#if CUDNN_FRONTEND_VERSION < 11200
#error "llmc/cudnn_att.cpp needs cuDNN frontend 1.12 or newer (written against 1.32): pip install -U nvidia-cudnn-frontend, then dev/cuda/vendor_cudnn_frontend.sh"
#endif

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

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

// A built graph and the execution plan it runs. With the autotune on, every plan cuDNN offers for the
// graph is built, and on the first call the fastest of those whose outputs are bitwise equal to the
// default plan's is kept (see plan_autotune); otherwise the default plan (the heuristic's first that
// builds) runs.
struct TunedGraph {
    GraphPtr graph;
    int64_t plan = 0;          // index of the plan executed
    int64_t default_plan = 0;  // the heuristic's choice
    bool tuned = false;        // the autotune has run (or had nothing to choose from)
    int equal_plans = 0;       // autotune record: plans bitwise equal to the default (itself included)
    float default_ms = 0, chosen_ms = 0;
};

}  // namespace

// Everything this file keeps between calls (llmc/cudnn_att.h): one per cudnn_state_create.
struct CudnnState {
    cudnnHandle_t handle = nullptr;
    void* workspace = nullptr;  // shared by every graph; grown when a new graph needs more
    size_t workspace_bytes = 0;
    bool autotune = true;
    cudaDeviceProp props{};
    std::map<std::tuple<int, int, int, int, bool>, TunedGraph> forward_graphs;  // (B, NH, T, HS, is_training)
    std::map<std::tuple<int, int, int, int>, TunedGraph> backward_graphs;      // (B, NH, T, HS)
};

namespace {

[[noreturn]] void attention_failed(const AttentionShape& s, const std::string& message, const char* stmt,
                                   const char* file, int line) {
    char shape[160];
    snprintf(shape, sizeof(shape), "attention %s, shape B=%d T=%d NH=%d HS=%d: ", s.pass, s.B, s.T, s.NH, s.HS);
    check_failed_("cuDNN frontend", (shape + message).c_str(), stmt, file, line);
}

// For frontend calls returning cudnn_frontend::error_t.
#define feCheck(stmt, shape) do { auto e_ = (stmt); \
    if (e_.is_bad()) attention_failed((shape), e_.get_message(), #stmt, __FILE__, __LINE__); } while (0)

void ensure_workspace(CudnnState& st, size_t bytes) {
    if (bytes <= st.workspace_bytes) return;
    cudaCheck(cudaDeviceSynchronize());  // kernels already queued may still use the old buffer
    cudaFreeCheck(&st.workspace);
    cudaCheck(cudaMalloc(&st.workspace, bytes));
    st.workspace_bytes = bytes;
}

// validate -> operation graph -> heuristics (mode A, fallback engines after it) -> the first supported
// plan, or with the autotune on every plan that builds (the first of them stays the default).
TunedGraph finalize_graph(CudnnState& st, GraphPtr graph, const AttentionShape& s) {
    feCheck(graph->validate(), s);
    feCheck(graph->build_operation_graph(st.handle), s);
    feCheck(graph->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), s);
    feCheck(graph->check_support(), s);
    feCheck(graph->build_plans(st.autotune ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), s);
    TunedGraph tg;
    tg.graph = graph;
    std::string default_name;
    feCheck(graph->get_plan_name(default_name), s);
    const int64_t count = graph->get_execution_plan_count();
    for (int64_t i = 0; i < count; i++) {
        std::string name;
        if (graph->get_plan_name_at_index(i, name).is_good() && name == default_name) {
            tg.default_plan = i;
            break;
        }
    }
    tg.plan = tg.default_plan;
    tg.tuned = !st.autotune;
    int64_t workspace = 0;
    feCheck(graph->get_workspace_size_plan_at_index(tg.default_plan, workspace), s);
    ensure_workspace(st, (size_t)workspace);
    return tg;
}

// Picks tg.plan on the call's own data with llmc/autotune.h's autotune_choose, as llmc/matmul.cuh
// does for cuBLASLt: the candidates are the default plan, then each other plan that needs no more
// workspace than it; one that fails to run is dropped. So the numbers are the default plan's whatever
// the timing says, and runs stay reproducible across processes. The outputs ([pointer, bytes]) are
// poisoned (0xFF bytes, NaN) before each trial, so a plan that leaves any of them unwritten cannot pass
// as equal; no plan reads them.
void plan_autotune(CudnnState& st, TunedGraph& tg, std::unordered_map<int64_t, void*>& pointers,
                   const std::vector<AutotuneOutput>& outputs, const AttentionShape& s, cudaStream_t stream) {
    tg.tuned = true;
    fe::graph::Graph& g = *tg.graph;
    int64_t default_ws = 0;
    feCheck(g.get_workspace_size_plan_at_index(tg.default_plan, default_ws), s);
    std::vector<int64_t> plans = {tg.default_plan};  // candidate i runs plan plans[i]
    for (int64_t i = 0; i < g.get_execution_plan_count(); i++) {
        int64_t ws = 0;
        if (i == tg.default_plan || g.get_workspace_size_plan_at_index(i, ws).is_bad() || ws > default_ws) continue;
        plans.push_back(i);
    }
    auto poison = [&]() {
        for (const AutotuneOutput& o : outputs) cudaCheck(cudaMemsetAsync(const_cast<void*>(o.ptr), 0xFF, o.bytes, stream));
    };
    auto run = [&](int c) {
        auto e = g.execute_plan_at_index(st.handle, pointers, st.workspace, plans[c]);
        if (c == 0) feCheck(e, s);
        return e.is_good();  // not: e.g. a plan that did not build
    };
    const AutotuneChoice choice = autotune_choose(st.props, (int)plans.size(), outputs, poison, run, stream);
    tg.equal_plans = (int)choice.equal.size();
    tg.plan = plans[choice.chosen()];
    tg.default_ms = choice.ms[0];
    tg.chosen_ms = choice.ms[choice.pick];
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

struct QKVInputs {
    std::shared_ptr<fe::graph::Tensor_attributes> Q, K, V;
};

QKVInputs add_qkv_inputs(fe::graph::Graph& graph, const AttentionLayout& L) {
    return {add_input(graph, "Q", kUidQ, L.dims, L.qkv_strides), add_input(graph, "K", kUidK, L.dims, L.qkv_strides),
            add_input(graph, "V", kUidV, L.dims, L.qkv_strides)};
}

// Both passes: causal (key j <= query i) and scores scaled by 1/sqrt(HS).
template <class SdpaAttributes>
SdpaAttributes& causal_scaled(SdpaAttributes& options, int HS) {
    return options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(0)
        .set_attn_scale(1.0f / sqrtf((float)HS));
}

TunedGraph build_forward_graph(CudnnState& st, const AttentionShape& s, bool is_training) {
    const AttentionLayout L(s.B, s.T, s.NH, s.HS);
    GraphPtr graph = new_graph();
    try {
        const QKVInputs in = add_qkv_inputs(*graph, L);
        auto options = fe::graph::SDPA_attributes().set_name("attention_forward").set_generate_stats(is_training);
        auto [O, stats] = graph->sdpa(in.Q, in.K, in.V, causal_scaled(options, s.HS));
        O->set_output(true).set_uid(kUidO).set_dim(L.dims).set_stride(L.o_strides);
        if (is_training) {
            stats->set_output(true).set_uid(kUidStats).set_data_type(fe::DataType_t::FLOAT)
                .set_dim(L.stats_dims).set_stride(L.stats_strides);
        }
        return finalize_graph(st, graph, s);
    } catch (const std::exception& e) {  // the frontend throws when no SDPA implementation fits
        attention_failed(s, e.what(), "build_forward_graph", __FILE__, __LINE__);
    }
}

TunedGraph build_backward_graph(CudnnState& st, const AttentionShape& s) {
    const AttentionLayout L(s.B, s.T, s.NH, s.HS);
    GraphPtr graph = new_graph();
    try {
        const QKVInputs in = add_qkv_inputs(*graph, L);
        auto O = add_input(*graph, "O", kUidO, L.dims, L.o_strides);
        auto dO = add_input(*graph, "dO", kUidDO, L.dims, L.o_strides);
        auto stats = add_input(*graph, "stats", kUidStats, L.stats_dims, L.stats_strides);
        stats->set_data_type(fe::DataType_t::FLOAT);
        auto options = fe::graph::SDPA_backward_attributes()
                           .set_name("attention_backward")
                           // fixed-order dQ accumulation: bitwise reproducible runs. On Hopper this
                           // takes a dP workspace of about B*NH*T*T*2 bytes.
                           .set_deterministic_algorithm(true);
        auto [dQ, dK, dV] = graph->sdpa_backward(in.Q, in.K, in.V, O, dO, stats, causal_scaled(options, s.HS));
        // gradients written straight into the (B, T, 3, NH, HS) layout of the QKV output
        dQ->set_output(true).set_uid(kUidDQ).set_dim(L.dims).set_stride(L.qkv_strides);
        dK->set_output(true).set_uid(kUidDK).set_dim(L.dims).set_stride(L.qkv_strides);
        dV->set_output(true).set_uid(kUidDV).set_dim(L.dims).set_stride(L.qkv_strides);
        return finalize_graph(st, graph, s);
    } catch (const std::exception& e) {
        attention_failed(s, e.what(), "build_backward_graph", __FILE__, __LINE__);
    }
}

AttentionShape make_shape(int B, int T, int NH, int C, const char* pass) {
    if (B <= 0 || T <= 0 || NH <= 0 || C <= 0 || C % NH != 0) {
        fatal("cuDNN attention %s: bad shape B=%d T=%d NH=%d C=%d (C must be a multiple of NH)", pass, B, T, NH, C);
    }
    return AttentionShape{B, T, NH, C / NH, pass};
}

}  // namespace

CudnnState* cudnn_state_create(const cudaDeviceProp& props, bool autotune) {
    // the frontend headers are compiled against CUDNN_MAJOR; a different major at run time would misbehave
    const size_t runtime_version = cudnnGetVersion();
    if (runtime_version / 10000 != CUDNN_MAJOR) {
        fatal("cuDNN version mismatch: built against cuDNN %d.%d, but the loaded library is %zu.%zu",
              CUDNN_MAJOR, CUDNN_MINOR, runtime_version / 10000, (runtime_version / 100) % 100);
    }
    CudnnState* st = new CudnnState();
    st->autotune = autotune;
    st->props = props;
    cudnnCheck(cudnnCreate(&st->handle));
    return st;
}

std::string cudnn_version_string() {
    const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
    char buf[96];
    snprintf(buf, sizeof(buf), "%zu.%zu.%zu (built against %d.%d.%d)", v / 10000, (v / 100) % 100, v % 100,
             CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
    return buf;
}

void cudnn_state_destroy(CudnnState* st) {
    if (st == nullptr) return;
    st->forward_graphs.clear();
    st->backward_graphs.clear();
    cudaFreeCheck(&st->workspace);
    if (st->handle != nullptr) cudnnCheck(cudnnDestroy(st->handle));
    delete st;
}

void attention_forward_cudnn(CudnnState& st, floatX* out, float* stats, const floatX* inp, int B, int T, int NH, int C,
                             bool is_training, cudaStream_t stream) {
    const AttentionShape s = make_shape(B, T, NH, C, "forward");
    if (is_training && stats == nullptr) attention_failed(s, "is_training needs a stats buffer", "stats", __FILE__, __LINE__);

    const auto key = std::make_tuple(B, NH, T, s.HS, is_training);
    auto it = st.forward_graphs.find(key);
    if (it == st.forward_graphs.end()) {
        it = st.forward_graphs.emplace(key, build_forward_graph(st, s, is_training)).first;
    }

    floatX* qkv = const_cast<floatX*>(inp);
    std::unordered_map<int64_t, void*> pointers = {
        {kUidQ, qkv}, {kUidK, qkv + C}, {kUidV, qkv + 2 * C}, {kUidO, out}};
    if (is_training) pointers[kUidStats] = stats;

    cudnnCheck(cudnnSetStream(st.handle, stream));
    TunedGraph& tg = it->second;
    if (!tg.tuned) {
        std::vector<AutotuneOutput> outputs = {{out, (size_t)B * T * C * sizeof(floatX)}};
        if (is_training) outputs.push_back({stats, (size_t)B * NH * T * sizeof(float)});
        plan_autotune(st, tg, pointers, outputs, s, stream);
    }
    feCheck(tg.graph->execute_plan_at_index(st.handle, pointers, st.workspace, tg.plan), s);
}

void attention_backward_cudnn(CudnnState& st, floatX* dinp, const floatX* dout, const floatX* inp, const floatX* out,
                              const float* stats, int B, int T, int NH, int C, cudaStream_t stream) {
    const AttentionShape s = make_shape(B, T, NH, C, "backward");

    const auto key = std::make_tuple(B, NH, T, s.HS);
    auto it = st.backward_graphs.find(key);
    if (it == st.backward_graphs.end()) it = st.backward_graphs.emplace(key, build_backward_graph(st, s)).first;

    floatX* qkv = const_cast<floatX*>(inp);
    std::unordered_map<int64_t, void*> pointers = {
        {kUidQ, qkv}, {kUidK, qkv + C}, {kUidV, qkv + 2 * C},
        {kUidO, const_cast<floatX*>(out)}, {kUidDO, const_cast<floatX*>(dout)},
        {kUidStats, const_cast<float*>(stats)},
        {kUidDQ, dinp}, {kUidDK, dinp + C}, {kUidDV, dinp + 2 * C}};

    cudnnCheck(cudnnSetStream(st.handle, stream));
    TunedGraph& tg = it->second;
    if (!tg.tuned) plan_autotune(st, tg, pointers, {{dinp, (size_t)B * T * 3 * C * sizeof(floatX)}}, s, stream);
    feCheck(tg.graph->execute_plan_at_index(st.handle, pointers, st.workspace, tg.plan), s);
}

std::string cudnn_autotune_summary(const CudnnState& st) {
    if (!st.autotune) return "cuDNN attention autotune: off";
    std::string out = "cuDNN attention autotune (plans bitwise equal to the default; one call, default -> chosen):";
    auto add = [&](const char* pass, const TunedGraph& tg, int B, int T, int NH) {
        if (!tg.tuned) return;
        char buf[256];
        snprintf(buf, sizeof(buf), "\n  %s B=%d T=%d NH=%d: %lld plans, %d equal, %.3f -> %.3f ms, plan %lld (default %lld)",
                 pass, B, T, NH, (long long)tg.graph->get_execution_plan_count(), tg.equal_plans, tg.default_ms,
                 tg.chosen_ms, (long long)tg.plan, (long long)tg.default_plan);
        out += buf;
    };
    for (const auto& kv : st.forward_graphs) {
        add(std::get<4>(kv.first) ? "forward" : "forward (inference)", kv.second, std::get<0>(kv.first),
            std::get<2>(kv.first), std::get<1>(kv.first));
    }
    for (const auto& kv : st.backward_graphs) {
        add("backward", kv.second, std::get<0>(kv.first), std::get<2>(kv.first), std::get<1>(kv.first));
    }
    return out;
}

#endif  // !defined(__CUDA_ARCH__)
