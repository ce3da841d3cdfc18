/*
 * GPU check of llmc/multi_gpu.cuh on 2+ GPUs (one process per GPU): every collective against values known in
 * closed form, ordering through the streams (the inputs are written on the compute stream right before
 * each collective, never synchronised by hand), then the bandwidth of a GPT-2 124M-sized gradient reduction.
 *   ZeRO-0 all-reduce: buffer sizes that do not divide by the process count.
 *   ZeRO-1 reduce-scatter / all-gather over the chunk map of llmc/zero_shards.h, for a GPT-2 shape with
 *     C = 840 (every slice divides by P = 1..8): the reference says which rank owns element j of the
 *     parameter vector from llm.c's rule alone (1/P of each tensor of each layer, ranks in order), and
 *     the chunks must be exactly the elements this rank owns.
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

// parameter after the update: shard elements j get (j % 251), everything else -1 (must be overwritten)
template <class T>
__global__ void fill_shard_kernel(T* out, size_t n, size_t begin, size_t end) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        out[j] = (T)(j >= begin && j < end ? (float)(j % 251) : -1.f);
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
            fprintf(stderr, "rank %d FAIL %s: element %zu is %g, expected %g\n", cfg.process_rank, what, at, got, want);
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

// The rank that owns parameter j under llm.c's ZeRO-1: tensors in checkpoint order, the 12 block tensors
// cut into L layers, every such slice into P equal runs, rank r taking the r-th.
std::vector<int> owners(const GPT2Config& cfg, int P) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    std::vector<int> owner;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t layers = (i >= 2 && i <= 13) ? cfg.num_layers : 1, slice = sizes[i] / layers;
        for (size_t k = 0; k < sizes[i]; k++) owner.push_back((int)(k % slice / (slice / P)));
    }
    return owner;
}

double relative_error(float got, double want) { return std::fabs(got - want) / std::max(std::fabs(want), 1e-30); }

// grads: the reduced gradient (the sums) in this rank's chunks, anything elsewhere.
void check_norm(MultiGpuConfig* cfg, cudaStream_t compute, const floatX* grads, const std::vector<ZeroChunk>& chunks,
                const std::vector<int>& owner) {
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

    // spans tiling [0, N) in order, as one process's chunks do: the bits of the single-buffer norm
    spans.clear();
    for (const ZeroChunk& c : zero_shard_chunks(zero1_config(), 1, 1, 0)) spans.push_back({c.offset, c.size});
    norm_of(spans, out + 1);
    global_norm_squared(out + 2, partials, grads, N, compute);
    std::vector<float> h = to_host(out, 3, compute);
    expect(memcmp(&h[1], &h[2], sizeof(float)) == 0, *cfg, "spans over whole layers == single buffer (bitwise)", 0,
           h[1], h[2]);
    // unaligned spans (scalar loads): the same sum up to rounding
    norm_of({{0, 37}, {37, 1000003}, {1000040, N - 1000040}}, out + 1);
    h = to_host(out, 3, compute);
    expect(relative_error(h[1], h[2]) < 1e-4, *cfg, "unaligned spans vs single buffer (relative error < 1e-4)", 0,
           h[1], h[2]);
    cudaCheck(cudaFree(partials));
    cudaCheck(cudaFree(out));
}

template <class T>
void check_zero1(MultiGpuConfig* cfg, cudaStream_t compute, const char* name) {
    cfg->zero_stage = 1;
    const int P = cfg->num_processes, rank = cfg->process_rank;
    const GPT2Config mc = zero1_config();
    const size_t N = gpt2_num_parameters(mc);
    const std::vector<ZeroChunk> chunks = zero_shard_chunks(mc, 1, P, rank);
    const std::vector<int> owner = owners(mc, P);
    // the chunks are exactly this rank's elements, packed in order into N / P state elements
    std::vector<char> mine(N, 0);
    size_t packed = 0;
    for (const ZeroChunk& c : chunks) {
        expect(c.shard_offset == packed, *cfg, "chunk packing", c.offset, (float)c.shard_offset, (float)packed);
        packed += c.size;
        for (size_t j = c.offset; j < c.offset + c.size; j++) mine[j]++;
    }
    expect(packed * P == N, *cfg, "shard size", 0, (float)packed, (float)(N / P));
    for (size_t j = 0; j < N; j++) {
        const bool owned = owner[j] == rank;
        if (mine[j] != (char)owned) expect(false, *cfg, "chunk map vs owner", j, mine[j], owned);
    }

    T* buf = nullptr;
    cudaCheck(cudaMalloc(&buf, N * sizeof(T)));
    launch_fill(buf, N, N, rank, compute);
    multi_gpu_async_reduce_scatter(buf, chunks.data(), (int)chunks.size(), cfg, compute);
    multi_gpu_wait(cfg, compute);
    std::vector<float> h = to_host(buf, N, compute);
    const float tri_p = P * (P - 1) / 2.0f;
    for (size_t j = 0; j < N; j++) {
        if (owner[j] != rank) continue;
        const float want = (float)P * (float)(j % 17) + tri_p;
        if (h[j] != want) expect(false, *cfg, name, j, h[j], want);
    }
    if constexpr (std::is_same_v<T, floatX>) check_norm(cfg, compute, buf, chunks, owner);

    // parameter all-gather: every rank fills only its chunks, afterwards all hold everything
    fill_shard_kernel<<<1024, 256, 0, compute>>>(buf, N, 0, 0);  // all -1
    cudaCheck(cudaGetLastError());
    for (const ZeroChunk& c : chunks) {
        fill_shard_kernel<<<64, 256, 0, compute>>>(buf + c.offset, c.size, 0, c.size);
        cudaCheck(cudaGetLastError());
    }
    // every rank's chunk of a slice holds (k % 251), k counted from the chunk's start; the slices tile [0, N)
    std::vector<float> want(N, -2.f);
    for (const ZeroChunk& c : chunks) {
        for (int r = 0; r < P; r++) {
            for (size_t k = 0; k < c.size; k++) want[c.slice_offset + r * c.size + k] = (float)(k % 251);
        }
    }
    multi_gpu_all_gather(buf, chunks.data(), (int)chunks.size(), cfg, compute);
    multi_gpu_wait(cfg, compute);
    h = to_host(buf, N, compute);
    for (size_t j = 0; j < N; j++) {
        if (h[j] != want[j]) expect(false, *cfg, "all_gather", j, h[j], want[j]);
    }
    cudaCheck(cudaFree(buf));
    cfg->zero_stage = 0;
}

// Time of one 124M-parameter (d12) bf16 gradient reduction: stage 0 one all-reduce; stage 1 the grouped
// reduce-scatter + all-gather over the d12 chunk map (when P divides C = 768).
void bench(MultiGpuConfig* cfg, cudaStream_t compute) {
    GPT2Config d12;
    if (!gpt2_config_from_descriptor("d12", &d12)) fatal("no d12 descriptor");
    const size_t n = gpt2_num_parameters(d12);
    const int P = cfg->num_processes;
    const bool zero1 = zero_shard_problem(d12, P).empty();
    const std::vector<ZeroChunk> chunks = zero1 ? zero_shard_chunks(d12, 1, P, cfg->process_rank) : std::vector<ZeroChunk>();
    __nv_bfloat16* g = nullptr;
    cudaCheck(cudaMalloc(&g, n * sizeof(__nv_bfloat16)));
    cudaCheck(cudaMemsetAsync(g, 0, n * sizeof(__nv_bfloat16), compute));
    cudaEvent_t t0, t1;
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));
    for (int stage = 0; stage <= 1; stage++) {
        if (stage == 1 && !zero1) {
            if (cfg->process_rank == 0) printf("ZeRO-1 d12 bench skipped: %s\n", zero_shard_problem(d12, P).c_str());
            break;
        }
        cfg->zero_stage = stage;
        const int reps = 10;
        for (int r = -2; r < reps; r++) {  // two warm-up rounds
            if (r == 0) cudaCheck(cudaEventRecord(t0, compute));
            if (stage == 0) {
                multi_gpu_async_reduce(&g, &n, 1, cfg, compute);
            } else {
                multi_gpu_async_reduce_scatter(g, chunks.data(), (int)chunks.size(), cfg, compute);
                multi_gpu_all_gather(g, chunks.data(), (int)chunks.size(), cfg, compute);
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
                   stage == 0 ? "all-reduce" : "reduce-scatter + all-gather (d12 chunk map, one group each)", ms, busbw);
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
    const std::string zp = zero_shard_problem(zero1_config(), P);
    if (zp.empty()) {
        check_zero1<float>(&cfg, compute, "reduce_scatter fp32");
        check_zero1<__nv_bfloat16>(&cfg, compute, "reduce_scatter bf16");
    } else if (cfg.process_rank == 0) {
        printf("ZeRO-1 checks skipped for %d processes: %s\n", P, zp.c_str());
    }

    float total_failures = multi_gpu_cpu_float_sum((float)failures, &cfg);
    bench(&cfg, compute);
    if (cfg.process_rank == 0) printf("%s: %d processes, %.0f failed checks\n", total_failures == 0 ? "PASS" : "FAIL", P, total_failures);
    cudaCheck(cudaStreamDestroy(compute));
    multi_gpu_config_free(&cfg);
    return total_failures == 0 ? 0 : 1;
}
