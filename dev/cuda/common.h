/*
 * Shared helpers of the kernel lab (dev/cuda/<op>.cu, each the lab of llmc/<op>.cuh):
 *   - fresh random inputs, generated on the GPU from a per-run seed (LAB_SEED=<n> repeats a run); the CPU
 *     reference reads those exact (bf16-rounded) values back, so both sides start from the same numbers
 *   - poison (all bytes 0xFF: NaN in bf16 and fp32) so elements a kernel forgot to write show up
 *   - host copies (whole tensors, chosen rows, chosen columns), GPU counts of NaN/Inf and of differing bits
 *   - Accumulated: a += output's start values, restore before each run, and the bitwise rerun check
 *   - check_close: one line per tensor with max and mean error against a CPU reference
 *   - time_ms: median of LAB_REPS (20) cudaEvent-timed runs, each after flushing L2
 *   - a final table: ms, achieved GB/s or TFLOP/s, percent of the H200's measured ceilings
 *     (LAB_PEAK_GBS / LAB_PEAK_TFLOPS override them on another GPU)
 *
 * Tolerances (check_close): an element passes when |got - ref| <= rtol * |ref| + atol_frac * max|ref|;
 * a tensor passes when every element passes, none is NaN/Inf, and ||got - ref|| / ||ref|| <= rel_l2.
 *
 * Each lab program is one translation unit, so the state below (a function-local static) is per program.
 * It includes the program's GpuContext (llmc/gpu_context.cuh), made by lab_init and freed by lab_finish:
 * the launchers that need one get lab_ctx().
 */
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "llmc/cuda_common.h"
#include "llmc/gpu_context.cuh"

// Measured on the H200 (the ceilings the percentages are against)
constexpr double LAB_PEAK_GBS_DEFAULT = 4300.0;    // device-to-device copy, GB/s
constexpr double LAB_PEAK_TFLOPS_DEFAULT = 790.0;  // large bf16 cuBLAS GEMM, fp32 accumulate, TFLOP/s

// bf16 outputs: rounding alone costs up to 2^-8 relative (half an ulp); allow 2.5x that, a floor of
// 1e-3 of the largest |ref| for elements that cancel to ~0, and 1e-2 relative error norm.
struct Tol {
    double rtol;
    double atol_frac;
    double rel_l2;
};
constexpr Tol TOL_BF16 = {1e-2, 1e-3, 1e-2};
// stochastic rounding may move a value by a whole ulp (2^-7 relative)
constexpr Tol TOL_BF16_SR = {2e-2, 1e-3, 1.5e-2};
// fp32 outputs computed in fp32 (fast-math exp/log/rsqrt cost a few ulp each)
constexpr Tol TOL_FP32 = {1e-4, 1e-6, 1e-5};

// ----------------------------------------------------------------------------
// state of the running program

struct LabRow {
    std::string kernel, shape;
    float ms;
    double bytes, flops;
};

struct LabState {
    std::string program;
    uint64_t seed = 0;
    uint64_t fills = 0;     // one fresh stream of random numbers per fill
    uint64_t host_rng = 1;  // host integers (tokens, targets, sampled rows)
    int passed = 0, failed = 0;
    int reps = 20;
    double peak_gbs = LAB_PEAK_GBS_DEFAULT, peak_tflops = LAB_PEAK_TFLOPS_DEFAULT;
    std::vector<LabRow> rows;
    std::vector<void*> allocations;
    void* l2_flush = nullptr;
    size_t l2_flush_bytes = 0;
    unsigned long long* d_counter = nullptr;
    GpuContext ctx;  // the program's; default options (TF32 allowed, autotune on)
};

inline LabState& lab() {
    static LabState state;
    return state;
}

inline GpuContext& lab_ctx() { return lab().ctx; }

inline std::string strfmt(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

inline double env_or(const char* name, double fallback) {
    const char* s = getenv(name);
    if (s == nullptr || *s == '\0') return fallback;
    char* end = nullptr;
    const double v = strtod(s, &end);
    if (*end != '\0' || !(v > 0)) fatal("environment variable %s='%s' must be a positive number", name, s);
    return v;
}

template <class T>
T* lab_alloc(size_t n) {
    void* p = nullptr;
    cudaCheck(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    lab().allocations.push_back(p);
    return (T*)p;
}

inline void lab_sync() { cudaCheck(cudaDeviceSynchronize()); }

inline void lab_init(const char* program) {
    LabState& L = lab();
    L.program = program;
    cudaCheck(cudaSetDevice(0));
    gpu_context_init(&L.ctx);
    const cudaDeviceProp& p = L.ctx.props;
    const char* s = getenv("LAB_SEED");
    if (s != nullptr && *s != '\0') {
        char* end = nullptr;
        L.seed = strtoull(s, &end, 10);
        if (*end != '\0') fatal("LAB_SEED='%s' must be an unsigned integer", s);
    } else {
        L.seed = (uint64_t)std::chrono::high_resolution_clock::now().time_since_epoch().count() % 1000000007ull;
    }
    L.host_rng = rng_seed(L.seed, 12345);
    L.reps = (int)env_or("LAB_REPS", 20);
    L.peak_gbs = env_or("LAB_PEAK_GBS", LAB_PEAK_GBS_DEFAULT);
    L.peak_tflops = env_or("LAB_PEAK_TFLOPS", LAB_PEAK_TFLOPS_DEFAULT);
    L.l2_flush_bytes = std::max<size_t>((size_t)2 * p.l2CacheSize, 64ull << 20);
    L.l2_flush = lab_alloc<char>(L.l2_flush_bytes);
    L.d_counter = lab_alloc<unsigned long long>(1);
    printf("== %s | %s, sm_%d%d, %d SMs, L2 %d MiB | %s | seed %llu (LAB_SEED=%llu repeats it)\n", program, p.name,
           p.major, p.minor, p.multiProcessorCount, p.l2CacheSize >> 20, PRECISION_MODE_NAME,
           (unsigned long long)L.seed, (unsigned long long)L.seed);
    printf("   ceilings: %.0f GB/s memory, %.0f TFLOP/s bf16 matmul\n", L.peak_gbs, L.peak_tflops);
}

// ----------------------------------------------------------------------------
// random inputs (on the GPU: big tensors are generated where they live)

__host__ __device__ inline uint64_t lab_hash64(uint64_t x) {  // splitmix64 finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

template <class T>
__global__ void lab_fill_uniform_kernel(T* out, size_t n, float lo, float hi, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float u = (float)(lab_hash64(seed ^ lab_hash64(i)) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        out[i] = (T)(lo + (hi - lo) * u);  // round-to-nearest into T
    }
}

inline int lab_grid(size_t n) { return (int)std::max<size_t>(1, std::min<size_t>((n + 255) / 256, 8192)); }

// out[0, n) = uniform in [lo, hi), rounded to T. Every call draws fresh numbers.
template <class T>
void fill_uniform(T* out, size_t n, float lo, float hi) {
    if (n == 0) return;
    const uint64_t seed = lab_hash64(lab().seed * 0x100000001B3ull + ++lab().fills);
    lab_fill_uniform_kernel<<<lab_grid(n), 256>>>(out, n, lo, hi, seed);
    cudaCheckLaunch();
}

// A new device tensor of n elements, filled by fill_uniform.
template <class T>
T* lab_uniform(size_t n, float lo, float hi) {
    T* d = lab_alloc<T>(n);
    fill_uniform(d, n, lo, hi);
    return d;
}

inline uint32_t host_random_below(uint32_t n) { return random_below(&lab().host_rng, n); }
inline uint32_t host_random_u32() { return random_u32(&lab().host_rng); }

// Sorted distinct row indices: all of [0, N) when N <= k, else the first, the last and k-2 random ones.
inline std::vector<int> sample_rows(int N, int k) {
    std::vector<int> rows;
    if (N <= k) {
        for (int i = 0; i < N; i++) rows.push_back(i);
        return rows;
    }
    rows.push_back(0);
    rows.push_back(N - 1);
    while ((int)rows.size() < k) rows.push_back((int)host_random_below((uint32_t)N));
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
}

// ----------------------------------------------------------------------------
// poison, copies, GPU-side counts

// All bytes 0xFF: NaN for bf16 and fp32, -1 for int.
template <class T>
void poison(T* d, size_t n) {
    cudaCheck(cudaMemset(d, 0xFF, n * sizeof(T)));
}

template <class T>
void copy_device(T* dst, const T* src, size_t n) {
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice));
}

// The bits of a float (bitwise comparisons: immune to fast-math assumptions about NaN and -0).
inline uint32_t float_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof(b));
    return b;
}

// Rounds like the GPU's (T)float conversion (round to nearest even), back to float.
inline float round_floatX(float x) { return (float)(floatX)x; }

template <class T>
std::vector<float> download(const T* d, size_t n, size_t offset = 0) {
    std::vector<T> tmp(n);
    cudaCheck(cudaMemcpy(tmp.data(), d + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i++) out[i] = (float)tmp[i];
    return out;
}

// rows of a row-major (?, row_len) matrix, concatenated
template <class T>
std::vector<float> download_rows(const T* d, size_t row_len, const std::vector<int>& rows) {
    std::vector<float> out;
    out.reserve(rows.size() * row_len);
    for (int r : rows) {
        std::vector<float> row = download(d, row_len, (size_t)r * row_len);
        out.insert(out.end(), row.begin(), row.end());
    }
    return out;
}

template <class T>
__global__ void lab_gather_cols_kernel(T* out, const T* in, const int* cols, int num_cols, size_t num_rows, size_t row_len) {
    const size_t n = (size_t)num_cols * num_rows;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = in[(i % num_rows) * row_len + cols[i / num_rows]];
    }
}

// columns of a row-major (num_rows, row_len) matrix, each column's num_rows values concatenated
// (gathered on the GPU: one strided host copy per element would be slow)
template <class T>
std::vector<float> download_cols(const T* d, size_t num_rows, size_t row_len, const std::vector<int>& cols) {
    const size_t n = cols.size() * num_rows;
    T* tmp = nullptr;
    int* d_cols = nullptr;
    cudaCheck(cudaMalloc(&tmp, std::max<size_t>(n, 1) * sizeof(T)));
    cudaCheck(cudaMalloc(&d_cols, std::max<size_t>(cols.size(), 1) * sizeof(int)));
    cudaCheck(cudaMemcpy(d_cols, cols.data(), cols.size() * sizeof(int), cudaMemcpyHostToDevice));
    lab_gather_cols_kernel<<<lab_grid(n), 256>>>(tmp, d, d_cols, (int)cols.size(), num_rows, row_len);
    cudaCheckLaunch();
    std::vector<float> out = download(tmp, n);
    cudaCheck(cudaFree(tmp));
    cudaCheck(cudaFree(d_cols));
    return out;
}

template <class T>
void upload(T* d, const std::vector<float>& h) {
    std::vector<T> tmp(h.size());
    for (size_t i = 0; i < h.size(); i++) tmp[i] = (T)h[i];
    cudaCheck(cudaMemcpy(d, tmp.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

inline void upload_ints(int* d, const std::vector<int>& h) {
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
}

__host__ __device__ inline bool lab_nonfinite(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof(bits));  // bit test: immune to fast-math assumptions about NaN
    return (bits & 0x7F800000u) == 0x7F800000u;
}

template <class T>
__global__ void lab_count_nonfinite_kernel(const T* x, size_t n, unsigned long long* count) {
    unsigned long long local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        local += lab_nonfinite((float)x[i]) ? 1 : 0;
    }
    if (local) atomicAdd(count, local);
}

__global__ void lab_count_diff_kernel(const uint8_t* a, const uint8_t* b, size_t n, unsigned long long* count) {
    unsigned long long local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        local += a[i] != b[i] ? 1 : 0;
    }
    if (local) atomicAdd(count, local);
}

inline unsigned long long read_counter() {
    unsigned long long h = 0;
    cudaCheck(cudaMemcpy(&h, lab().d_counter, sizeof(h), cudaMemcpyDeviceToHost));
    return h;
}

// number of NaN/Inf elements in a device tensor
template <class T>
size_t count_nonfinite(const T* d, size_t n) {
    cudaCheck(cudaMemset(lab().d_counter, 0, sizeof(unsigned long long)));
    lab_count_nonfinite_kernel<<<lab_grid(n), 256>>>(d, n, lab().d_counter);
    cudaCheckLaunch();
    return (size_t)read_counter();
}

// number of differing bytes between two device buffers of n elements (0: bitwise equal)
template <class T>
size_t count_bit_differences(const T* a, const T* b, size_t n) {
    cudaCheck(cudaMemset(lab().d_counter, 0, sizeof(unsigned long long)));
    const size_t bytes = n * sizeof(T);
    lab_count_diff_kernel<<<lab_grid(bytes), 256>>>((const uint8_t*)a, (const uint8_t*)b, bytes, lab().d_counter);
    cudaCheckLaunch();
    return (size_t)read_counter();
}

// An accumulated (+=) output under test: `live` is the buffer the kernel updates, `start` its random
// start values (restore() copies them into live before each run), `first` a copy of a first run's
// result (keep_first()) that a second run from the same start must match bit for bit
// (bit_differences() counts the bytes that differ). Default-constructed: no tensor, every call a no-op.
template <class T>
struct Accumulated {
    size_t n = 0;
    T* live = nullptr;
    T* start = nullptr;
    T* first = nullptr;

    Accumulated() = default;
    Accumulated(size_t n_, float lo, float hi)
        : n(n_), live(lab_alloc<T>(n_)), start(lab_uniform<T>(n_, lo, hi)), first(lab_alloc<T>(n_)) {}
    void restore() const {
        if (n) copy_device(live, start, n);
    }
    void keep_first() const {
        if (n) copy_device(first, live, n);
    }
    size_t bit_differences() const { return n ? count_bit_differences(live, first, n) : 0; }
};

// ----------------------------------------------------------------------------
// CPU references shared by several labs (in double)

// tanh GELU and its derivative (llmc/gelu.cuh; the matmul lab's fused GELU epilogues)
inline double gelu_ref(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad_ref(double x) {
    const double k = std::sqrt(2.0 / M_PI);
    const double t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// ----------------------------------------------------------------------------
// checks: one line each, counted

inline bool check(const std::string& what, bool ok, const std::string& detail = "") {
    printf("%s  %-58s %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
    (ok ? lab().passed : lab().failed)++;
    return ok;
}

inline bool check_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref,
                        Tol tol) {
    if (got.size() != ref.size()) {
        return check(what, false, strfmt("size mismatch: got %zu values, reference %zu", got.size(), ref.size()));
    }
    double max_ref = 0;
    for (double r : ref) max_ref = std::max(max_ref, std::fabs(r));
    const double atol = tol.atol_frac * (max_ref > 0 ? max_ref : 1.0);
    size_t nonfinite = 0, bad = 0, worst = 0;
    double worst_ratio = -1, max_err = 0, sum_err = 0, sum_err2 = 0, sum_ref2 = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (lab_nonfinite(got[i])) {
            if (nonfinite++ == 0) worst = i, worst_ratio = INFINITY;
            continue;
        }
        const double err = std::fabs((double)got[i] - ref[i]);
        const double ratio = err / (atol + tol.rtol * std::fabs(ref[i]));
        if (ratio > 1) bad++;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
        max_err = std::max(max_err, err);
        sum_err += err;
        sum_err2 += err * err;
        sum_ref2 += ref[i] * ref[i];
    }
    const size_t n = got.size();
    const double rel_l2 = std::sqrt(sum_err2 / (sum_ref2 > 0 ? sum_ref2 : 1.0));
    const bool ok = n > 0 && nonfinite == 0 && bad == 0 && rel_l2 <= tol.rel_l2;
    std::string detail = strfmt("max err %.2e, worst %.2f of tol, mean err %.2e, relL2 %.1e", max_err, worst_ratio,
                                n ? sum_err / n : 0.0, rel_l2);
    if (!ok && n > 0) {
        detail += strfmt("\n      %zu of %zu over tol (rtol %.0e, atol %.1e), %zu NaN/Inf; worst [%zu] got %.6g want %.6g",
                         bad, n, tol.rtol, atol, nonfinite, worst, got[worst], ref[worst]);
    }
    return check(what, ok, detail);
}

// ----------------------------------------------------------------------------
// timing and the final table

// Median over LAB_REPS runs of launch(), after one warm-up. setup() (optional, untimed) runs before each,
// then L2 is flushed, so every run starts from DRAM as it would inside a training step.
inline float time_ms(const std::function<void()>& launch, const std::function<void()>& setup = nullptr) {
    LabState& L = lab();
    if (setup) setup();
    launch();
    lab_sync();
    GpuTimer timer;
    std::vector<float> times;
    for (int r = 0; r < L.reps; r++) {
        if (setup) setup();
        cudaCheck(cudaMemsetAsync(L.l2_flush, r & 0xFF, L.l2_flush_bytes));
        times.push_back(timer.ms(launch));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// bytes: the operation's minimum DRAM traffic (every input read once, every output written once);
// flops > 0 makes it a compute row (TFLOP/s against the matmul ceiling).
inline void report(const std::string& kernel, const std::string& shape, float ms, double bytes, double flops = 0) {
    lab().rows.push_back({kernel, shape, ms, bytes, flops});
}

// Prints the table and the summary line, frees what lab_alloc gave out; returns the exit code.
inline int lab_finish() {
    LabState& L = lab();
    printf("\n%-30s %-28s %9s %9s %8s %6s\n", "kernel", "shape", "ms", "GB/s", "TFLOP/s", "%peak");
    for (const LabRow& r : L.rows) {
        const double gbs = r.bytes / (r.ms * 1e-3) / 1e9;
        if (r.flops > 0) {
            const double tflops = r.flops / (r.ms * 1e-3) / 1e12;
            printf("%-30s %-28s %9.4f %9.0f %8.1f %5.1f%%\n", r.kernel.c_str(), r.shape.c_str(), r.ms, gbs, tflops,
                   100 * tflops / L.peak_tflops);
        } else {
            printf("%-30s %-28s %9.4f %9.0f %8s %5.1f%%\n", r.kernel.c_str(), r.shape.c_str(), r.ms, gbs, "-",
                   100 * gbs / L.peak_gbs);
        }
    }
    for (void* p : L.allocations) cudaCheck(cudaFree(p));
    L.allocations.clear();
    gpu_context_free(&L.ctx);
    printf("%s: %d checks passed, %d failed (seed %llu)\n", L.program.c_str(), L.passed, L.failed,
           (unsigned long long)L.seed);
    return L.failed == 0 ? 0 : 1;
}
