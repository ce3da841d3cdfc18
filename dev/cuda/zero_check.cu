/*
 * GPU check of llmc/multi_gpu.cuh on 2+ GPUs (one process per GPU): every collective against values known in
 * closed form, ordering through the streams (the inputs are written on the compute stream right before
 * each collective, never synchronised by hand), then the bandwidth of a GPT-2 124M-sized gradient reduction.
 *   ZeRO-0 all-reduce: buffer sizes that do not divide by the process count.
 *   ZeRO-1 reduce-scatter / all-gather over the plan of llmc/zero_shards.h, for a GPT-2 shape with
 *     C = 840 (every slice divides by P = 1..8: llm.c's layout) and one with C = 841 (no slice divides
 *     by 2..8: the padded layout): the reference says which rank owns element j of the parameter vector
 *     from the layout's rule alone (llm.c's: 1/P of each tensor of each layer, ranks in order; padded:
 *     j / ceil(N / P)), and the chunks must be exactly the elements this rank owns.
 *   Without a second GPU (any P, before the collectives): P ranks' AdamW updates simulated one after the
 *     other on this GPU, each over its chunks with its own m / v / master shard of the plan's size, must
 *     give bitwise the parameters, m and v of one whole-vector update, for P = 2..8 and both shapes.
 *   The ZeRO-1 gradient norm (llmc/global_norm.cuh, global_norm_squared_spans over the rank's chunks, then
 *     summed over ranks) against the closed form; spans that tile the buffer in order (one process) give
 *     bitwise the single-buffer global_norm_squared, and unaligned spans (scalar path) agree to 1e-4.
 *
 * Build (from the repo root; drop -DUSE_MPI/-I/-L/-lmpi without MPI):
 *   nvcc -O2 -std=c++17 -I. -DMULTI_GPU -DUSE_MPI -I/usr/lib/x86_64-linux-gnu/openmpi/include \
 *        dev/cuda/zero_check.cu llmc/nccl_id_exchange.cpp -lnccl -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi \
 *        -o zero_check
 * Run, one node with 2 GPUs:
 *   mpirun -np 2 ./zero_check
 *   ./zero_check -pn 2 -pr 0 -pi tcp -ps 127.0.0.1 & ./zero_check -pn 2 -pr 1 -pi tcp -ps 127.0.0.1
 *   ./zero_check -pn 2 -pr 0 -pi fs -pf /tmp & ./zero_check -pn 2 -pr 1 -pi fs -pf /tmp
 *   LLMC_NCCL_SINGLE=1 ./zero_check     (one GPU: the NCCL path with P = 1)
 * Flags: -pn -pr -pg -pi -ps -pf as train_gpt2cu, -pp TCP port. Exit code 0 only if every rank passed.
 * All values are small integers (exact in bf16), so every comparison is exact. Gradient reductions are
 * sums over the ranks (multi_gpu.cuh: the 1/P of the mean is applied in fp32 by the optimizer), so the
 * reference is the sum P*(j % 17) + P(P-1)/2, exact for every P; a mean through ncclAvg would not be
 * for P = 3, 5, 6, 7 (bf16(1/P) is rounded).
 */
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "llmc/adamw.cuh"
#include "llmc/global_norm.cuh"
#include "llmc/multi_gpu.cuh"

#ifndef MULTI_GPU
#error "zero_check needs -DMULTI_GPU (and NCCL)"
#endif

// value of element j "from rank r" before reduction: (j % 17) + r; the sum over P ranks is P*(j % 17) + P(P-1)/2
template <class T>
__global__ void fill_kernel(T* out, size_t n, size_t valid, int rank) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        out[j] = (T)(j < valid ? (float)(j % 17 + rank) : 0.f);
    }
}

// parameter after the update: element j of this rank's chunks gets ((base + j) % 251), base the chunk's
// place in the parameter vector
template <class T>
__global__ void fill_owned_kernel(T* out, size_t n, size_t base) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        out[j] = (T)(float)((base + j) % 251);
    }
}

template <class T>
__global__ void fill_value_kernel(T* out, size_t n, float value) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        out[j] = (T)value;
    }
}

template <class T>
void launch_fill(T* out, size_t n, size_t valid, int rank, cudaStream_t s) {
    fill_kernel<<<1024, 256, 0, s>>>(out, n, valid, rank);
    cudaCheck(cudaGetLastError());
}

template <class T>
std::vector<float> to_host(const T* d, size_t n, cudaStream_t s) {
    std::vector<T> tmp(n);
    cudaCheck(cudaMemcpyAsync(tmp.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i++) out[i] = (float)tmp[i];
    return out;
}

int failures = 0;

void expect(bool ok, const MultiGpuConfig& cfg, const char* what, size_t at, float got, float want) {
    if (!ok) {
        if (failures < 20) {
            fprintf(stderr, "rank %d FAIL %s: element %zu is %.9g, expected %.9g\n", cfg.process_rank, what, at, got, want);
        }
        failures++;
    }
}

const size_t kSizes[] = {1, 37, 1000003, 4 * 768 * 768 + 5};  // none divisible by 2, 3, 4 or 8

template <class T>
void check_all_reduce(MultiGpuConfig* cfg, cudaStream_t compute, const char* name) {
    const int P = cfg->num_processes, n = (int)(sizeof(kSizes) / sizeof(kSizes[0]));
    std::vector<T*> bufs(n);
    std::vector<size_t> counts(kSizes, kSizes + n);
    for (int i = 0; i < n; i++) {
        cudaCheck(cudaMalloc(&bufs[i], counts[i] * sizeof(T)));
        launch_fill(bufs[i], counts[i], counts[i], cfg->process_rank, compute);
    }
    multi_gpu_async_reduce(bufs.data(), counts.data(), n, cfg, compute);
    multi_gpu_wait(cfg, compute);
    const float tri_p = P * (P - 1) / 2.0f;
    for (int i = 0; i < n; i++) {
        std::vector<float> h = to_host(bufs[i], counts[i], compute);
        for (size_t j = 0; j < counts[i]; j++) {
            float want = (float)P * (float)(j % 17) + tri_p;
            expect(h[j] == want, *cfg, name, j, h[j], want);
        }
    }
    for (T* b : bufs) cudaCheck(cudaFree(b));
}

// A GPT-2 shape whose every slice divides by 1..8 processes (C = 840 = 8*3*5*7); 27M parameters.
GPT2Config zero1_config() {
    GPT2Config c;
    c.max_seq_len = 16;
    c.vocab_size = 96;
    c.padded_vocab_size = 96;
    c.num_layers = 3;
    c.num_heads = 1;
    c.channels = 840;
    return c;
}

// Like zero1_config, but C = 841 = 29 * 29: no slice divides by 2..8, so ZeRO-1 uses the padded layout.
GPT2Config zero1_padded_config() {
    GPT2Config c = zero1_config();
    c.channels = 841;
    return c;
}

// The rank that owns parameter j under ZeRO-1. llm.c's layout: tensors in checkpoint order, the 12 block
// tensors cut into L layers, every such slice into P equal runs, rank r taking the r-th. Padded: the
// vector cut into runs of ceil(N / P), rank r taking the r-th.
std::vector<int> owners(const GPT2Config& cfg, int P) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    std::vector<int> owner;
    if (zero_shard_layout(cfg, P) == ZeroLayout::padded) {
        const size_t N = gpt2_num_parameters(cfg), S = (N + P - 1) / P;
        for (size_t j = 0; j < N; j++) owner.push_back((int)(j / S));
        return owner;
    }
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t layers = (i >= 2 && i <= 13) ? cfg.num_layers : 1, slice = sizes[i] / layers;
        for (size_t k = 0; k < sizes[i]; k++) owner.push_back((int)(k % slice / (slice / P)));
    }
    return owner;
}

double relative_error(float got, double want) { return std::fabs(got - want) / std::max(std::fabs(want), 1e-30); }

// grads: the reduced gradient (the sums) in this rank's chunks, anything elsewhere.
void check_norm(MultiGpuConfig* cfg, cudaStream_t compute, const GPT2Config& mc, const floatX* grads,
                const std::vector<ZeroChunk>& chunks, const std::vector<int>& owner) {
    const int P = cfg->num_processes;
    const size_t N = owner.size();
    float *partials = nullptr, *out = nullptr;
    cudaCheck(cudaMalloc(&partials, GLOBAL_NORM_BLOCKS * sizeof(float)));
    cudaCheck(cudaMalloc(&out, 3 * sizeof(float)));
    auto norm_of = [&](const std::vector<GlobalNormSpan>& spans, float* dst) {
        GlobalNormSpans table = global_norm_spans_upload(spans);
        global_norm_squared_spans(dst, partials, grads, table, compute);
        cudaCheck(cudaStreamSynchronize(compute));
        global_norm_spans_free(&table);
    };
    // this rank's chunks, summed over ranks: the squared norm of the whole summed gradient
    std::vector<GlobalNormSpan> spans;
    for (const ZeroChunk& c : chunks) spans.push_back({c.offset, c.size});
    norm_of(spans, out);
    multi_gpu_all_reduce_f32(out, 1, MultiGpuOp::sum, cfg, compute);
    double want = 0;
    for (size_t j = 0; j < N; j++) {
        const double g = (double)P * (double)(j % 17) + P * (P - 1) / 2.0;
        want += g * g;
    }
    const float got = to_host(out, 1, compute)[0];
    expect(relative_error(got, want) < 1e-4, *cfg, "ZeRO-1 grad norm^2 (relative error < 1e-4)", 0, got, (float)want);

    // spans tiling [0, N) in order, as one process's chunks of this shape do: the bits of the
    // single-buffer norm when every slice is a whole number of 16-byte loads (C a multiple of 8, as in
    // every shape the attention kernels take: head size 64); otherwise the spans are read with scalar
    // loads and only the value agrees (checked below)
    spans.clear();
    for (const ZeroChunk& c : zero_shard_chunks(mc, 1, 1, 0)) spans.push_back({c.offset, c.size});
    norm_of(spans, out + 1);
    global_norm_squared(out + 2, partials, grads, N, compute);
    std::vector<float> h = to_host(out, 3, compute);
    if (mc.channels % 8 == 0) {
        expect(memcmp(&h[1], &h[2], sizeof(float)) == 0, *cfg, "spans over whole layers == single buffer (bitwise)", 0,
               h[1], h[2]);
    } else {
        expect(relative_error(h[1], h[2]) < 1e-4, *cfg, "spans over whole layers vs single buffer (relative error < 1e-4)",
               0, h[1], h[2]);
    }
    // unaligned spans (scalar loads): the same sum up to rounding
    norm_of({{0, 37}, {37, 1000003}, {1000040, N - 1000040}}, out + 1);
    h = to_host(out, 3, compute);
    expect(relative_error(h[1], h[2]) < 1e-4, *cfg, "unaligned spans vs single buffer (relative error < 1e-4)", 0,
           h[1], h[2]);
    cudaCheck(cudaFree(partials));
    cudaCheck(cudaFree(out));
}

template <class T>
void check_zero1(MultiGpuConfig* cfg, cudaStream_t compute, const GPT2Config& mc, const char* name) {
    cfg->zero_stage = 1;
    const int P = cfg->num_processes, rank = cfg->process_rank;
    const size_t N = gpt2_num_parameters(mc);
    const ZeroPlan plan = zero_shard_plan(mc, 1, P, rank);
    const std::vector<ZeroChunk>& chunks = plan.chunks;
    const std::vector<int> owner = owners(mc, P);
    // the chunks are exactly this rank's elements, in order within the plan's shard size
    std::vector<char> mine(N, 0);
    size_t packed = 0;
    for (const ZeroChunk& c : chunks) {
        expect(c.shard_offset >= packed, *cfg, "chunk packing", c.offset, (float)c.shard_offset, (float)packed);
        packed = c.shard_offset + c.size;
        for (size_t j = c.offset; j < c.offset + c.size; j++) mine[j]++;
    }
    expect(packed <= plan.shard_size && plan.shard_size * P >= N, *cfg, "shard size", 0, (float)packed,
           (float)plan.shard_size);
    for (size_t j = 0; j < N; j++) {
        const bool owned = owner[j] == rank;
        if (mine[j] != (char)owned) expect(false, *cfg, "chunk map vs owner", j, mine[j], owned);
    }

    const size_t nb = plan.buffer_elements;  // the padded layout's runs reach past N
    T* buf = nullptr;
    cudaCheck(cudaMalloc(&buf, nb * sizeof(T)));
    launch_fill(buf, nb, N, rank, compute);
    multi_gpu_async_reduce_scatter(buf, plan.slices.data(), (int)plan.slices.size(), cfg, compute);
    multi_gpu_wait(cfg, compute);
    std::vector<float> h = to_host(buf, N, compute);
    const float tri_p = P * (P - 1) / 2.0f;
    for (size_t j = 0; j < N; j++) {
        if (owner[j] != rank) continue;
        const float want = (float)P * (float)(j % 17) + tri_p;
        if (h[j] != want) expect(false, *cfg, name, j, h[j], want);
    }
    if constexpr (std::is_same_v<T, floatX>) check_norm(cfg, compute, mc, buf, chunks, owner);

    // parameter all-gather: every rank fills only its chunks (element j: j % 251), the rest -1; afterwards
    // every rank holds j % 251 everywhere, as every element has exactly one owner
    fill_value_kernel<<<1024, 256, 0, compute>>>(buf, nb, -1.f);
    cudaCheck(cudaGetLastError());
    for (const ZeroChunk& c : chunks) {
        fill_owned_kernel<<<64, 256, 0, compute>>>(buf + c.offset, c.size, c.offset);
        cudaCheck(cudaGetLastError());
    }
    multi_gpu_all_gather(buf, plan.slices.data(), (int)plan.slices.size(), cfg, compute);
    multi_gpu_wait(cfg, compute);
    h = to_host(buf, N, compute);
    for (size_t j = 0; j < N; j++) {
        const float want = (float)(j % 251);
        if (h[j] != want) expect(false, *cfg, "all_gather", j, h[j], want);
    }
    cudaCheck(cudaFree(buf));
    cfg->zero_stage = 0;
}

// P ranks' AdamW updates simulated one after the other on this GPU (no collective needed), each over its
// chunks of the plan with its own m / v / master of the plan's shard size, against one update of the whole
// vector (ZeRO-0's chunks): parameters, master weights, m and v must be the same bits for P = 2..8, in
// llm.c's layout (C = 840) and the padded one (C = 841). Seeds are drawn per tensor as gpt2_update draws
// them; rounding positions are the chunks' places in their tensors, so a wrong offset, position or shard
// offset changes bits.
void check_simulated_shards(const MultiGpuConfig& cfg, cudaStream_t s) {
    for (const GPT2Config& mc : {zero1_config(), zero1_padded_config()}) {
        const size_t N = gpt2_num_parameters(mc);
        uint64_t rng = 1234;
        std::vector<floatX> p0(N), g(N);
        std::vector<float> m0(N), v0(N), master0(N);
        for (size_t j = 0; j < N; j++) {
            p0[j] = (floatX)(random_f32(&rng) - 0.5f);
            master0[j] = (float)p0[j];
            g[j] = (floatX)(random_f32(&rng) - 0.5f);
            m0[j] = 0.01f * (random_f32(&rng) - 0.5f);
            v0[j] = 1e-4f * random_f32(&rng);
        }
        floatX *d_p = nullptr, *d_g = nullptr;
        float *d_m = nullptr, *d_v = nullptr, *d_master = nullptr;
        cudaCheck(cudaMalloc(&d_p, N * sizeof(floatX)));
        cudaCheck(cudaMalloc(&d_g, N * sizeof(floatX)));
        cudaCheck(cudaMalloc(&d_m, N * sizeof(float)));
        cudaCheck(cudaMalloc(&d_v, N * sizeof(float)));
        cudaCheck(cudaMalloc(&d_master, N * sizeof(float)));
        cudaCheck(cudaMemcpy(d_g, g.data(), N * sizeof(floatX), cudaMemcpyHostToDevice));
        // s is a non-blocking stream, so neither direction of the plain cudaMemcpy calls around the updates
        // is ordered with it: a copy from pageable memory may return before its DMA has landed (the kernels
        // then read part old data, as seen from element 3 * 2^20 of a 14.6 MB copy on), and a copy back does
        // not wait for the kernels. The device is synchronized before and after.
        auto update = [&](const std::vector<ZeroChunk>& chunks, floatX* p, float* master, float* m, float* v) {
            cudaCheck(cudaDeviceSynchronize());
            uint64_t seeds = 13371337;
            size_t k = 0;
            for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
                AdamWParams ap;
                ap.lr = 1e-3f;
                ap.weight_decay = param_tensor_is_2d(i) ? 0.1f : 0.0f;
                ap.grad_scale = 0.5f;
                ap.t = 3;
                const uint32_t seed = random_u32(&seeds);
                for (; k < chunks.size() && chunks[k].tensor == i; k++) {
                    const ZeroChunk& c = chunks[k];
                    adamw_update(p + c.offset, master + c.shard_offset, d_g + c.offset, m + c.shard_offset,
                                 v + c.shard_offset, c.size, (uint32_t)c.position, ap, seed, s);
                }
            }
            cudaCheck(cudaStreamSynchronize(s));
        };
        // the whole vector
        cudaCheck(cudaMemcpy(d_p, p0.data(), N * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_m, m0.data(), N * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_v, v0.data(), N * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_master, master0.data(), N * sizeof(float), cudaMemcpyHostToDevice));
        update(zero_shard_chunks(mc, 0, 1, 0), d_p, d_master, d_m, d_v);
        const std::vector<floatX> want_p = [&] {
            std::vector<floatX> h(N);
            cudaCheck(cudaMemcpy(h.data(), d_p, N * sizeof(floatX), cudaMemcpyDeviceToHost));
            return h;
        }();
        std::vector<float> want_m(N), want_v(N), want_master(N);
        cudaCheck(cudaMemcpy(want_m.data(), d_m, N * sizeof(float), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(want_v.data(), d_v, N * sizeof(float), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(want_master.data(), d_master, N * sizeof(float), cudaMemcpyDeviceToHost));

        for (int P = 2; P <= 8; P++) {
            cudaCheck(cudaMemcpy(d_p, p0.data(), N * sizeof(floatX), cudaMemcpyHostToDevice));
            std::vector<float> got_m(N, NAN), got_v(N, NAN), got_master(N, NAN);
            for (int r = 0; r < P; r++) {
                const ZeroPlan plan = zero_shard_plan(mc, 1, P, r);
                const size_t S = plan.shard_size;
                std::vector<float> m(S, 0.f), v(S, 0.f), master(S, 0.f);  // the padding stays 0
                for (const ZeroChunk& c : plan.chunks) {
                    for (size_t k = 0; k < c.size; k++) {
                        m[c.shard_offset + k] = m0[c.offset + k];
                        v[c.shard_offset + k] = v0[c.offset + k];
                        master[c.shard_offset + k] = master0[c.offset + k];
                    }
                }
                // d_m / d_v / d_master hold N >= S floats: reused as this rank's shard buffers
                cudaCheck(cudaMemcpy(d_m, m.data(), S * sizeof(float), cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(d_v, v.data(), S * sizeof(float), cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(d_master, master.data(), S * sizeof(float), cudaMemcpyHostToDevice));
                update(plan.chunks, d_p, d_master, d_m, d_v);
                cudaCheck(cudaMemcpy(m.data(), d_m, S * sizeof(float), cudaMemcpyDeviceToHost));
                cudaCheck(cudaMemcpy(v.data(), d_v, S * sizeof(float), cudaMemcpyDeviceToHost));
                cudaCheck(cudaMemcpy(master.data(), d_master, S * sizeof(float), cudaMemcpyDeviceToHost));
                for (const ZeroChunk& c : plan.chunks) {
                    for (size_t k = 0; k < c.size; k++) {
                        got_m[c.offset + k] = m[c.shard_offset + k];
                        got_v[c.offset + k] = v[c.shard_offset + k];
                        got_master[c.offset + k] = master[c.shard_offset + k];
                    }
                }
            }
            std::vector<floatX> got_p(N);
            cudaCheck(cudaMemcpy(got_p.data(), d_p, N * sizeof(floatX), cudaMemcpyDeviceToHost));
            const std::string what = "simulated P = " + std::to_string(P) + " shards, C = " + std::to_string(mc.channels);
            int bad = 0;
            for (size_t j = 0; j < N && bad < 5; j++) {
                const struct { const char* name; const void* got; const void* want; size_t bytes; } fields[] = {
                    {"parameter", &got_p[j], &want_p[j], sizeof(floatX)}, {"m", &got_m[j], &want_m[j], 4},
                    {"v", &got_v[j], &want_v[j], 4}, {"master", &got_master[j], &want_master[j], 4}};
                for (const auto& f : fields) {
                    if (memcmp(f.got, f.want, f.bytes) == 0) continue;
                    bad++;
                    const float got = f.bytes == 4 ? *(const float*)f.got : (float)*(const floatX*)f.got;
                    const float want = f.bytes == 4 ? *(const float*)f.want : (float)*(const floatX*)f.want;
                    expect(false, cfg, (what + ": " + f.name + " bits").c_str(), j, got, want);
                }
            }
        }
        if (cfg.process_rank == 0) {
            printf("ZeRO-1 AdamW, P = 2..8 shards simulated on one GPU, C = %d: compared bitwise with one "
                   "whole-vector update\n", mc.channels);
        }
        for (void* ptr : {(void*)d_p, (void*)d_g, (void*)d_m, (void*)d_v, (void*)d_master}) cudaCheck(cudaFree(ptr));
    }
}

// Time of one 124M-parameter (d12) bf16 gradient reduction: stage 0 one all-reduce; stage 1 the
// reduce-scatter + all-gather of the d12 plan (grouped per slice in llm.c's layout, one each when padded).
void bench(MultiGpuConfig* cfg, cudaStream_t compute) {
    GPT2Config d12;
    if (!gpt2_config_from_descriptor("d12", &d12)) fatal("no d12 descriptor");
    const size_t n = gpt2_num_parameters(d12);
    const int P = cfg->num_processes;
    const ZeroPlan plan = zero_shard_plan(d12, 1, P, cfg->process_rank);
    __nv_bfloat16* g = nullptr;
    cudaCheck(cudaMalloc(&g, plan.buffer_elements * sizeof(__nv_bfloat16)));
    cudaCheck(cudaMemsetAsync(g, 0, plan.buffer_elements * sizeof(__nv_bfloat16), compute));
    cudaEvent_t t0, t1;
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));
    for (int stage = 0; stage <= 1; stage++) {
        cfg->zero_stage = stage;
        const int reps = 10;
        for (int r = -2; r < reps; r++) {  // two warm-up rounds
            if (r == 0) cudaCheck(cudaEventRecord(t0, compute));
            if (stage == 0) {
                multi_gpu_async_reduce(&g, &n, 1, cfg, compute);
            } else {
                multi_gpu_async_reduce_scatter(g, plan.slices.data(), (int)plan.slices.size(), cfg, compute);
                multi_gpu_all_gather(g, plan.slices.data(), (int)plan.slices.size(), cfg, compute);
            }
            multi_gpu_wait(cfg, compute);
        }
        cudaCheck(cudaEventRecord(t1, compute));
        cudaCheck(cudaEventSynchronize(t1));
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, t0, t1));
        ms /= reps;
        // bus bandwidth as nccl-tests defines it: an all-reduce moves 2(P-1)/P of the buffer per rank
        double busbw = 2.0 * (P - 1) / P * n * sizeof(__nv_bfloat16) / (ms * 1e-3) / 1e9;
        if (cfg->process_rank == 0) {
            printf("ZeRO-%d 124M bf16 gradient %s: %.3f ms, bus bandwidth %.1f GB/s\n", stage,
                   stage == 0 ? "all-reduce"
                   : plan.layout == ZeroLayout::llmc ? "reduce-scatter + all-gather (d12, llm.c's layout, one group each)"
                                                     : "reduce-scatter + all-gather (d12, padded layout, one of each)",
                   ms, busbw);
        }
    }
    cfg->zero_stage = 0;
    cudaCheck(cudaEventDestroy(t0));
    cudaCheck(cudaEventDestroy(t1));
    cudaCheck(cudaFree(g));
}

int main(int argc, char** argv) {
    int pn = 1, pr = 0, pg = 8, port = NCCL_ID_DEFAULT_PORT;
    const char *pi = "mpi", *ps = "", *pf = "";
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) fatal("flag %s needs a value", argv[i]);
        const char* f = argv[i];
        const char* v = argv[i + 1];
        if (!strcmp(f, "-pn")) pn = atoi(v);
        else if (!strcmp(f, "-pr")) pr = atoi(v);
        else if (!strcmp(f, "-pg")) pg = atoi(v);
        else if (!strcmp(f, "-pp")) port = atoi(v);
        else if (!strcmp(f, "-pi")) pi = v;
        else if (!strcmp(f, "-ps")) ps = v;
        else if (!strcmp(f, "-pf")) pf = v;
        else fatal("unknown flag %s (known: -pn -pr -pg -pi -ps -pf -pp)", f);
    }
    MultiGpuConfig cfg = multi_gpu_config_init(pn, pr, pg, pi, ps, port, pf, 0);
    if (!cfg.use_nccl) fatal("zero_check needs at least 2 processes, or LLMC_NCCL_SINGLE=1 for the NCCL path on one GPU");
    const int P = cfg.num_processes;
    printf("rank %d of %d on GPU %d\n", cfg.process_rank, P, cfg.local_device_idx);
    cudaStream_t compute;
    cudaCheck(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));

    // host-side helpers
    float sum = multi_gpu_cpu_float_sum((float)(cfg.process_rank + 1), &cfg);
    expect(sum == P * (P + 1) / 2.0f, cfg, "cpu_float_sum", 0, sum, P * (P + 1) / 2.0f);
    multi_gpu_barrier(&cfg);

    // device float all-reduce on the compute stream (loss / grad norm path)
    float* d = nullptr;
    cudaCheck(cudaMalloc(&d, 3 * sizeof(float)));
    launch_fill(d, 3, 3, cfg.process_rank, compute);
    multi_gpu_all_reduce_f32(d, 3, MultiGpuOp::sum, &cfg, compute);
    std::vector<float> h = to_host(d, 3, compute);
    for (int j = 0; j < 3; j++) {
        float want = P * (float)(j % 17) + P * (P - 1) / 2.0f;
        expect(h[j] == want, cfg, "all_reduce_f32 sum", j, h[j], want);
    }
    cudaCheck(cudaFree(d));

    check_all_reduce<float>(&cfg, compute, "all_reduce fp32");
    check_all_reduce<__nv_bfloat16>(&cfg, compute, "all_reduce bf16");
    for (const GPT2Config& mc : {zero1_config(), zero1_padded_config()}) {
        check_zero1<float>(&cfg, compute, mc, "reduce_scatter fp32");
        check_zero1<__nv_bfloat16>(&cfg, compute, mc, "reduce_scatter bf16");
        if (cfg.process_rank == 0) {
            printf("ZeRO-1 collectives, C = %d, %d processes: %s\n", mc.channels, P,
                   zero_layout_name(zero_shard_layout(mc, P)));
        }
    }
    check_simulated_shards(cfg, compute);

    float total_failures = multi_gpu_cpu_float_sum((float)failures, &cfg);
    bench(&cfg, compute);
    if (cfg.process_rank == 0) printf("%s: %d processes, %.0f failed checks\n", total_failures == 0 ? "PASS" : "FAIL", P, total_failures);
    cudaCheck(cudaStreamDestroy(compute));
    multi_gpu_config_free(&cfg);
    return total_failures == 0 ? 0 : 1;
}
