/*
 * GPU check of llmc/zero.cuh on 2+ GPUs (one process per GPU): every collective against values known in
 * closed form, with buffer sizes that do not divide by the process count, ordering through the streams
 * (the inputs are written on the compute stream right before each collective, never synchronised by hand),
 * then the bandwidth of a GPT-2 124M-sized gradient reduction.
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
 * sums over the ranks (zero.cuh: the 1/P of the mean is applied in fp32 by the optimizer), so the
 * reference is the sum P*(j % 17) + P(P-1)/2, exact for every P; a mean through ncclAvg would not be
 * for P = 3, 5, 6, 7 (bf16(1/P) is rounded).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llmc/zero.cuh"

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
void check_reduce(MultiGpuConfig* cfg, cudaStream_t compute, int zero_stage, const char* name) {
    cfg->zero_stage = zero_stage;
    const int P = cfg->num_processes, n = (int)(sizeof(kSizes) / sizeof(kSizes[0]));
    std::vector<T*> bufs(n);
    std::vector<size_t> counts(kSizes, kSizes + n);
    for (int i = 0; i < n; i++) {
        size_t padded = multi_gpu_padded_size(counts[i], cfg);
        cudaCheck(cudaMalloc(&bufs[i], padded * sizeof(T)));
        launch_fill(bufs[i], padded, counts[i], cfg->process_rank, compute);
    }
    multi_gpu_async_reduce(bufs.data(), counts.data(), n, cfg, compute);
    multi_gpu_wait(cfg, compute);
    const float tri_p = P * (P - 1) / 2.0f;
    for (int i = 0; i < n; i++) {
        size_t padded = multi_gpu_padded_size(counts[i], cfg);
        std::vector<float> h = to_host(bufs[i], padded, compute);
        Shard s = multi_gpu_get_shard(counts[i], cfg);
        for (size_t j = s.offset; j < s.offset + s.size; j++) {
            float want = j < counts[i] ? (float)P * (float)(j % 17) + tri_p : 0.f;
            expect(h[j] == want, *cfg, name, j, h[j], want);
        }
    }

    // ZeRO-1 parameter all-gather: every rank fills only its shard, afterwards all hold everything.
    if (zero_stage == 1) {
        for (int i = 0; i < n; i++) {
            size_t padded = multi_gpu_padded_size(counts[i], cfg);
            Shard s = multi_gpu_get_shard(counts[i], cfg);
            fill_shard_kernel<<<1024, 256, 0, compute>>>(bufs[i], padded, s.offset, s.offset + s.size);
            cudaCheck(cudaGetLastError());
        }
        multi_gpu_all_gather(bufs.data(), counts.data(), n, cfg, compute);
        multi_gpu_wait(cfg, compute);
        for (int i = 0; i < n; i++) {
            size_t padded = multi_gpu_padded_size(counts[i], cfg);
            std::vector<float> h = to_host(bufs[i], padded, compute);
            for (size_t j = 0; j < padded; j++) expect(h[j] == (float)(j % 251), *cfg, "all_gather", j, h[j], j % 251);
        }
    }
    for (T* b : bufs) cudaCheck(cudaFree(b));
    cfg->zero_stage = 0;
}

// Time of one 124M-parameter bf16 gradient reduction (stage 0: all-reduce; stage 1: reduce-scatter + all-gather).
void bench(MultiGpuConfig* cfg, cudaStream_t compute) {
    const size_t n = 124475904;
    const int P = cfg->num_processes;
    __nv_bfloat16* g = nullptr;
    cfg->zero_stage = 1;
    cudaCheck(cudaMalloc(&g, multi_gpu_padded_size(n, cfg) * sizeof(__nv_bfloat16)));
    cudaCheck(cudaMemsetAsync(g, 0, multi_gpu_padded_size(n, cfg) * sizeof(__nv_bfloat16), compute));
    cudaEvent_t t0, t1;
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));
    for (int stage = 0; stage <= 1; stage++) {
        cfg->zero_stage = stage;
        const int reps = 10;
        for (int r = -2; r < reps; r++) {  // two warm-up rounds
            if (r == 0) cudaCheck(cudaEventRecord(t0, compute));
            multi_gpu_async_reduce(&g, &n, 1, cfg, compute);
            if (stage == 1) multi_gpu_all_gather(g, n, cfg, compute);
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
                   stage == 0 ? "all-reduce" : "reduce-scatter + all-gather", ms, busbw);
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
    cfg.zero_stage = 1;
    Shard s = multi_gpu_get_shard(10, &cfg);
    size_t want_size = (10 + P - 1) / P;
    expect(s.size == want_size && s.offset == want_size * cfg.process_rank, cfg, "get_shard", 10, s.size, want_size);
    cfg.zero_stage = 0;

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

    check_reduce<float>(&cfg, compute, 0, "all_reduce fp32");
    check_reduce<__nv_bfloat16>(&cfg, compute, 0, "all_reduce bf16");
    check_reduce<float>(&cfg, compute, 1, "reduce_scatter fp32");
    check_reduce<__nv_bfloat16>(&cfg, compute, 1, "reduce_scatter bf16");

    float total_failures = multi_gpu_cpu_float_sum((float)failures, &cfg);
    bench(&cfg, compute);
    if (cfg.process_rank == 0) printf("%s: %d processes, %.0f failed checks\n", total_failures == 0 ? "PASS" : "FAIL", P, total_failures);
    cudaCheck(cudaStreamDestroy(compute));
    multi_gpu_config_free(&cfg);
    return total_failures == 0 ? 0 : 1;
}
