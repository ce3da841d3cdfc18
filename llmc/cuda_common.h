/*
 * Shared CUDA utilities: the precision switch (floatX), error-check macros, 128-bit packed
 * loads/stores, warp/block reductions and stochastic rounding. Included by every layer header.
 *
 * Precision is chosen in exactly one place: ENABLE_FP32 at compile time makes floatX float, anything
 * else (the Makefile passes ENABLE_BF16) __nv_bfloat16. Everything else tests `kFloatXIsBF16` with
 * `if constexpr`; llmc/cudnn_att.cpp alone refuses ENABLE_FP32 with an #error (it is bf16 only).
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "llmc/rand.h"
#include "llmc/utils.h"

// ----------------------------------------------------------------------------
// Precision

#if defined(ENABLE_FP32)
typedef float floatX;
#define PRECISION_MODE_NAME "FP32"
#else
typedef __nv_bfloat16 floatX;
#define PRECISION_MODE_NAME "BF16"
#endif
constexpr bool kFloatXIsBF16 = std::is_same<floatX, __nv_bfloat16>::value;

// ----------------------------------------------------------------------------
// Error checks: print the failing statement, file and line, exit 1.

[[noreturn]] inline void check_failed_(const char* lib, const char* what, const char* stmt, const char* file, int line) {
    fflush(stdout);
    fprintf(stderr, "[%s error] %s\n  in: %s\n  at %s:%d\n", lib, what, stmt, file, line);
    char message[1024];
    snprintf(message, sizeof(message), "%s error: %s (%s at %s:%d)", lib, what, stmt, file, line);
    fatal_run_hook_(message);  // llmc/utils.h: the other processes of a multi-GPU run hear of it
    exit(EXIT_FAILURE);
}

#define cudaCheck(stmt) do { cudaError_t e_ = (stmt); \
    if (e_ != cudaSuccess) check_failed_("CUDA", cudaGetErrorString(e_), #stmt, __FILE__, __LINE__); } while (0)

#define cublasCheck(stmt) do { cublasStatus_t s_ = (stmt); \
    if (s_ != CUBLAS_STATUS_SUCCESS) check_failed_("cuBLAS", cublasGetStatusString(s_), #stmt, __FILE__, __LINE__); } while (0)

// After a kernel launch: catches bad launch configurations immediately.
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())

// cudaFree that tolerates nullptr and nulls the pointer.
template <class T>
inline void cudaFreeCheck(T** ptr) {
    if (*ptr != nullptr) cudaCheck(cudaFree(*ptr));
    *ptr = nullptr;
}

// ----------------------------------------------------------------------------
// Dynamic shared memory

// Lets `kernel` be launched with `bytes` of dynamic shared memory: raises its limit when that is
// above the 48 KB default and above what was allowed before. The limit is CUDA's own per-kernel state
// (one per CUDA context, i.e. per process and device), so it is read back from CUDA, not kept here.
template <class Kernel>
inline void allow_dynamic_smem(Kernel kernel, size_t bytes) {
    if (bytes <= 48 * 1024) return;
    cudaFuncAttributes attr;
    cudaCheck(cudaFuncGetAttributes(&attr, kernel));
    if (bytes > (size_t)attr.maxDynamicSharedSizeBytes) {
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    }
}

__host__ __device__ inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

// GPU time of what a launch queues on one stream, between two CUDA events: the one timing helper of
// the autotunes (llmc/autotune.h) and the kernel labs (dev/cuda).
class GpuTimer {
  public:
    GpuTimer() {
        cudaCheck(cudaEventCreate(&start_));
        cudaCheck(cudaEventCreate(&stop_));
    }
    ~GpuTimer() {
        cudaCheck(cudaEventDestroy(start_));
        cudaCheck(cudaEventDestroy(stop_));
    }
    GpuTimer(const GpuTimer&) = delete;
    GpuTimer& operator=(const GpuTimer&) = delete;

    // Milliseconds of launch() (waits for it).
    template <class F>
    float ms(F&& launch, cudaStream_t stream = 0) {
        cudaCheck(cudaEventRecord(start_, stream));
        launch();
        cudaCheck(cudaEventRecord(stop_, stream));
        cudaCheck(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, start_, stop_));
        return ms;
    }
    // Median of `reps` back-to-back runs after `warmup` untimed ones (operands stay in L2).
    template <class F>
    float median_ms(F&& launch, int warmup = 3, int reps = 20, cudaStream_t stream = 0) {
        for (int r = 0; r < warmup; r++) launch();
        std::vector<float> times(reps);
        for (int r = 0; r < reps; r++) times[r] = ms(launch, stream);
        std::sort(times.begin(), times.end());
        return times[reps / 2];
    }

  private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// ----------------------------------------------------------------------------
// 128-bit packed vectors: the unit of every memory-bound kernel.

template <class ElementType>
struct alignas(16) Packed128 {
    static constexpr int size = 16 / sizeof(ElementType);
    ElementType payload[size];

    Packed128() = default;
    __device__ explicit Packed128(int4 bits) { memcpy(&payload, &bits, sizeof(bits)); }
    __device__ ElementType& operator[](int index) { return payload[index]; }
    __device__ const ElementType& operator[](int index) const { return payload[index]; }
    __device__ int4 get_bits() const {
        int4 bits;
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
};
typedef Packed128<floatX> x128;

template <class T> __device__ Packed128<T> load128(const T* address) {
    return Packed128<T>{*reinterpret_cast<const int4*>(address)};
}
// streaming load: data read once, don't keep it in cache
template <class T> __device__ Packed128<T> load128cs(const T* address) {
    return Packed128<T>{__ldcs(reinterpret_cast<const int4*>(address))};
}
template <class T> __device__ void store128(T* target, Packed128<T> value) {
    *reinterpret_cast<int4*>(target) = value.get_bits();
}
template <class T> __device__ void store128cs(T* target, Packed128<T> value) {
    __stcs(reinterpret_cast<int4*>(target), value.get_bits());
}

// ----------------------------------------------------------------------------
// Asynchronous global -> shared copies (cp.async, sm_80+): the copy skips the registers, and the
// issuing thread goes on until it waits for its own committed groups.

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
// 16 bytes (both addresses 16-byte aligned), cached in L2 only; !valid writes 16 zero bytes instead
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid = true) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
// 4 bytes (both addresses 4-byte aligned), cached in L1 too; !valid writes 4 zero bytes instead
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid = true) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// wait until at most N of this thread's committed groups are still in flight
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ----------------------------------------------------------------------------
// Reductions

constexpr int WARP_SIZE = 32;

__device__ inline float warp_reduce_sum(float val) {
    for (int offset = 16; offset > 0; offset >>= 1) val += __shfl_xor_sync(0xffffffff, val, offset);
    return val;
}
__device__ inline float warp_reduce_max(float val) {
    for (int offset = 16; offset > 0; offset >>= 1) val = fmaxf(val, __shfl_xor_sync(0xffffffff, val, offset));
    return val;
}

// Reduction over the whole block (blockDim.x a multiple of 32, <= 1024) with a warp reduction above;
// `identity` fills the lanes past the last warp. Every thread gets the result. Fixed reduction order,
// so the result is deterministic.
template <float (*WarpReduce)(float)>
__device__ inline float block_reduce(float val, float identity) {
    __shared__ float shared[WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    val = WarpReduce(val);
    __syncthreads();  // protect `shared` from a previous call
    if (lane == 0) shared[warp] = val;
    __syncthreads();
    val = (lane < num_warps) ? shared[lane] : identity;
    return WarpReduce(val);
}
__device__ inline float block_reduce_sum(float val) { return block_reduce<warp_reduce_sum>(val, 0.f); }
__device__ inline float block_reduce_max(float val) { return block_reduce<warp_reduce_max>(val, -INFINITY); }

// ----------------------------------------------------------------------------
// Stochastic rounding fp32 -> bf16.
// Rounding up with probability equal to the dropped fraction keeps E[bf16(x)] = x, so small AdamW
// updates are not lost. The random bits come from a counter-based hash of (thread position, seed),
// so results are reproducible run to run and resumable from the seed alone.

__device__ __host__ inline uint32_t hash_u32(uint32_t position, uint32_t seed) {
    // integer hash in the style of a counter-based generator: multiply, xor-shift rounds
    uint32_t h = position * 0x9E3779B1u ^ seed;
    h ^= h >> 16; h *= 0x7FEB352Du;
    h ^= h >> 15; h *= 0x846CA68Bu;
    h ^= h >> 16;
    h += seed * 0x632BE5ABu;
    h ^= h >> 13; h *= 0x5BD1E995u;
    h ^= h >> 15;
    return h;
}

__device__ inline void stochastic_round(float in, __nv_bfloat16* out, uint32_t position, uint32_t seed) {
    const uint32_t bits = __float_as_uint(in);
    const uint32_t threshold = hash_u32(position, seed) & 0xFFFFu;
    // low 16 bits are what bf16 drops: round up when they exceed the random threshold
    const uint32_t rounded = ((bits & 0xFFFFu) > threshold) ? bits + 0x10000u : bits;
    *out = __ushort_as_bfloat16((unsigned short)(rounded >> 16));
}
__device__ inline void stochastic_round(float in, float* out, uint32_t, uint32_t) { *out = in; }
