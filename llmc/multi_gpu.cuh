/*
 * Multi-GPU data parallelism, one process per GPU, through NCCL: start-up (mpi / tcp / fs), the
 * process group (MultiGpuConfig), gradient reduction overlapped with backward on a second stream,
 * ZeRO-1 reduce-scatter / all-gather over the shards of llmc/zero_shards.h, and small host-side
 * collectives.
 *
 * Without MULTI_GPU the same API is a single-process stub (every collective a no-op), so the trainer
 * needs no #ifdefs, and single-GPU runs do not depend on NCCL, MPI or the network. A build with NCCL
 * creates a communicator only when there is more than one process, or when LLMC_NCCL_SINGLE=1 asks
 * for the full NCCL path with one process (to test the start-up and the collectives on one GPU; every
 * collective is then an identity through NCCL).
 *
 * Start-up, multi_gpu_config_init(num_processes -pn, process_rank -pr, gpus_per_node -pg,
 *                                 init_method -pi, server_ip -ps, port, fs_path -pf, zero_stage -z):
 *   "mpi": needs USE_MPI. MPI_Init; rank and size come from MPI_COMM_WORLD (-pn/-pr may be left at
 *          1/0; a -pn > 1 that disagrees with mpirun is an error). Local GPU = number of lower ranks on
 *          the same host (hostnames exchanged with MPI_Allgather). Rank 0's id goes out by MPI_Bcast.
 *          Without MPI in the build: one process runs as single-GPU; more processes (or being started
 *          by mpirun with more than one) stop with a message pointing at -pi tcp / -pi fs.
 *   "tcp"/"fs": rank and size from -pr/-pn; local GPU = rank % gpus_per_node (ranks numbered node by
 *          node, as srun's default block distribution does). The id goes through
 *          llmc/nccl_id_exchange.h (port default NCCL_ID_DEFAULT_PORT; the run tag, which keeps jobs
 *          apart in both the tcp hello and the fs file names, from the environment, e.g.
 *          $SLURM_JOB_ID). Timeout MULTI_GPU_ID_TIMEOUT_S, or $LLMC_NCCL_ID_TIMEOUT_S.
 *   The flags are checked first by multi_gpu_check_args (the trainer calls it too, while parsing them).
 *   Every rank checks that its GPU exists before the id exchange (a rank failing after it would leave
 *   the others waiting). Then cudaSetDevice(local) and a non-blocking ncclCommInitRankConfig polled
 *   with ncclCommGetAsyncError for at most MULTI_GPU_INIT_TIMEOUT_S ($LLMC_NCCL_INIT_TIMEOUT_S): past
 *   it, or on an error, ncclCommAbort and a message naming the rank. Then a non-blocking nccl_stream
 *   and an event without timing. The communicator stays non-blocking: an NCCL call answering
 *   ncclInProgress is polled to completion (ncclCheckComm). Waits on the GPU are bounded by the
 *   caller's watchdog (llmc/watchdog.h, multi_gpu_abort for its abort).
 *   NVLink SHARP / multicast (NVLS) is never used: NCCL_NVLS_ENABLE is forced to 0 before NCCL starts.
 *   The trainer must link llmc/nccl_id_exchange.cpp when MULTI_GPU is defined.
 *
 * Gradients and parameters (every call is asynchronous: queued on nccl_stream after the work queued so
 * far on the compute stream; call multi_gpu_wait(cfg, compute) before the compute stream reads the results):
 *   multi_gpu_async_reduce(ptrs, counts, n, cfg, compute) (ZeRO-0): one ncclGroup over the n tensors,
 *     ptrs[i][0, counts[i]) = SUM over ranks (ncclAllReduce, ncclSum, in place).
 *   multi_gpu_async_reduce_scatter(buf, chunks, n, cfg, compute) (ZeRO-1): for each of the rank's chunks
 *     (llmc/zero_shards.h), buf[offset, offset + size) = SUM over ranks of that range, from one in-place
 *     ncclReduceScatter over the chunk's slice buf[slice_offset, slice_offset + P*size) (NCCL's in-place
 *     rule: recvbuff == sendbuff + rank*recvcount); the rest of each slice is left unspecified. One
 *     ncclGroup over all chunks (several past MULTI_GPU_GROUP_MAX_OPS).
 *     A sum, not ncclAvg: NCCL's average pre-multiplies by 1/P rounded to the element type, and
 *     bf16(1/3) = 0.33398 makes P = 3 gradients 0.2% too large (also 5, 6, 7). The caller scales by
 *     multi_gpu_mean_scale(cfg) = 1/P in fp32 where the gradient is read (the AdamW step, the norm).
 *   multi_gpu_all_gather(buf, chunks, n, cfg, compute) (ZeRO-1, after the update): every rank's chunk of
 *     each slice is copied to all ranks (ncclAllGather in place: sendbuff == recvbuff + rank*sendcount),
 *     grouped likewise; a no-op under ZeRO-0. Both ZeRO-1 calls check that the chunks have that shape.
 *   multi_gpu_all_reduce_f32(buf, n, op, cfg, stream): buf[0, n) = sum over ranks (the only op), queued on
 *     `stream` itself (for the loss and the ZeRO-1 partial grad norm).
 * Host side (blocking): multi_gpu_barrier (all ranks reach it, and the device is idle),
 *   multi_gpu_cpu_float_sum (sum of one float over ranks: val loss, eval counts),
 *   multi_gpu_cpu_float_sums (values[0, n) summed in place, n <= MULTI_GPU_HOST_SLOTS: the step's vote),
 *   multi_gpu_broadcast_int (rank 0's value to every rank: the resume step).
 */
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include "llmc/cuda_common.h"
#include "llmc/nccl_id_exchange.h"  // host only; also gives NCCL_ID_DEFAULT_PORT to single-GPU builds
#include "llmc/utils.h"
#include "llmc/zero_shards.h"  // host only: ZeroChunk

#ifdef MULTI_GPU
#include <nccl.h>
#ifdef USE_MPI
#define OMPI_SKIP_MPICXX 1   // C API only: no deprecated C++ bindings, no -lmpi_cxx
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#endif

constexpr int MULTI_GPU_HOST_SLOTS = 8;  // floats in unified_buffer: the most one host-side collective moves

// Generous: on big clusters ranks can start minutes apart (container pulls, slow shared filesystems).
constexpr double MULTI_GPU_ID_TIMEOUT_S = 600.0;
// NCCL's own start-up (connections between ranks that all hold the id) is quick when every rank is alive.
constexpr double MULTI_GPU_INIT_TIMEOUT_S = 300.0;

struct MultiGpuConfig {
    int process_rank;      // global rank, 0..num_processes-1
    int num_processes;
    int local_device_idx;  // CUDA device this process uses
    int zero_stage;        // 0: replicated optimizer state; 1: optimizer state sharded across ranks
    bool use_nccl;         // collectives go through NCCL (num_processes > 1, or LLMC_NCCL_SINGLE=1)
#ifdef MULTI_GPU
    ncclComm_t nccl_comm;            // null unless use_nccl
    cudaStream_t nccl_stream;        // all gradient / parameter collectives run here
    cudaEvent_t compute_nccl_sync;   // orders nccl_stream against the compute stream (both ways)
    float* unified_buffer;           // MULTI_GPU_HOST_SLOTS device floats for the host-side collectives
#endif
};

enum class MultiGpuOp { sum };  // no average: see multi_gpu_async_reduce

// What turns a gradient summed over the ranks into their mean; applied in fp32.
inline float multi_gpu_mean_scale(const MultiGpuConfig* cfg) { return 1.0f / (float)cfg->num_processes; }

// The checks of the start-up flags, shared by both builds (and called by the trainer's flag parsing,
// before any CUDA call); every message names the flag.
inline void multi_gpu_check_args(int num_processes, int process_rank, int gpus_per_node, const char* init_method,
                                 int zero_stage) {
    if (init_method == nullptr ||
        (strcmp(init_method, "mpi") != 0 && strcmp(init_method, "tcp") != 0 && strcmp(init_method, "fs") != 0)) {
        fatal("-pi must be mpi, tcp or fs, got '%s'", init_method ? init_method : "(null)");
    }
    if (zero_stage != 0 && zero_stage != 1) fatal("-z %d: only ZeRO stages 0 and 1 are implemented", zero_stage);
    if (gpus_per_node < 1) fatal("-pg must be >= 1, got %d", gpus_per_node);
    check_process_rank("-pn/-pr", process_rank, num_processes);
}

// The NCCL in-place rules of the ZeRO-1 collectives: each chunk is this rank's 1/P of its slice.
inline void multi_gpu_check_chunks_(const ZeroChunk* chunks, int n, const MultiGpuConfig* cfg, const char* what) {
    const size_t P = (size_t)cfg->num_processes, r = (size_t)cfg->process_rank;
    for (int i = 0; i < n; i++) {
        const ZeroChunk& c = chunks[i];
        if (c.slice_size != c.size * P || c.offset != c.slice_offset + r * c.size) {
            fatal("%s: chunk %d (tensor %d, layer %d) is not rank %zu's 1/%zu of its slice of %zu elements",
                  what, i, c.tensor, c.layer, r, P, c.slice_size);
        }
    }
}

inline double wall_seconds_() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Test hook (dev/test/gpu/multi_gpu_stop_check.sh): a kernel that never ends, queued on `stream`, so that the
// next wait on it (or a collective queued behind it) blocks like one whose peer died.
__global__ void multi_gpu_hang_kernel_(const volatile int* never_set) {
    while (*never_set == 0) __nanosleep(1000000);
}
inline void multi_gpu_test_hang(cudaStream_t stream) {
    int* flag = nullptr;
    cudaCheck(cudaMalloc(&flag, sizeof(int)));
    cudaCheck(cudaMemsetAsync(flag, 0, sizeof(int), stream));
    multi_gpu_hang_kernel_<<<1, 1, 0, stream>>>(flag);
    cudaCheck(cudaGetLastError());
}

// LLMC_NCCL_SINGLE=1: run NCCL even with one process (tests the NCCL path on a single GPU).
inline bool multi_gpu_force_nccl_() {
    const char* v = getenv("LLMC_NCCL_SINGLE");
    return v != nullptr && strcmp(v, "1") == 0;
}

// Process count announced by an MPI launcher in the environment (1 when not started by one).
inline int multi_gpu_launcher_size_() {
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
        const char* v = getenv(var);
        if (v != nullptr && atoi(v) > 1) return atoi(v);
    }
    return 1;
}

#ifdef MULTI_GPU
// ============================================================================
// NCCL build

inline void nccl_check_(ncclResult_t r, const char* stmt, const char* file, int line) {
    std::string what = ncclGetErrorString(r);
    const char* last = ncclGetLastError(nullptr);
    if (last != nullptr && last[0] != '\0') what += std::string(" (") + last + ")";
    check_failed_("NCCL", what.c_str(), stmt, file, line);
}
#define ncclCheck(stmt) do { ncclResult_t r_ = (stmt); \
    if (r_ != ncclSuccess) nccl_check_(r_, #stmt, __FILE__, __LINE__); } while (0)

// A call on a non-blocking communicator may answer ncclInProgress: poll until it is done.
inline void nccl_settle_(ncclComm_t comm, ncclResult_t r, const char* stmt, const char* file, int line) {
    while (r == ncclInProgress) {
        usleep(100);
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
    }
    if (r != ncclSuccess) nccl_check_(r, stmt, file, line);
}
#define ncclCheckComm(comm, stmt) do { ncclResult_t r_ = (stmt); \
    if (r_ != ncclSuccess) nccl_settle_(comm, r_, #stmt, __FILE__, __LINE__); } while (0)

#ifdef USE_MPI
inline void mpi_check_(int err, const char* stmt, const char* file, int line) {
    char what[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, what, &len) != MPI_SUCCESS) snprintf(what, sizeof(what), "MPI error %d", err);
    check_failed_("MPI", what, stmt, file, line);
}
#define mpiCheck(stmt) do { int e_ = (stmt); \
    if (e_ != MPI_SUCCESS) mpi_check_(e_, #stmt, __FILE__, __LINE__); } while (0)

// Number of lower MPI ranks on this host: the local GPU index under mpirun.
inline int multi_gpu_mpi_local_rank_(int rank, int size) {
    constexpr int NAME = 256;
    char name[NAME] = {0};
    if (gethostname(name, NAME - 1) != 0) fatal("gethostname failed on MPI rank %d", rank);
    std::vector<char> all((size_t)size * NAME);
    mpiCheck(MPI_Allgather(name, NAME, MPI_CHAR, all.data(), NAME, MPI_CHAR, MPI_COMM_WORLD));
    int local = 0;
    for (int r = 0; r < rank; r++) local += strncmp(&all[(size_t)r * NAME], name, NAME) == 0;
    return local;
}
#endif

template <class T>
constexpr ncclDataType_t nccl_type_() {
    if constexpr (std::is_same_v<T, float>) return ncclFloat;
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return ncclBfloat16;
    else if constexpr (std::is_same_v<T, half>) return ncclHalf;
    else static_assert(sizeof(T) == 0, "no NCCL type for this element type");
}

inline double multi_gpu_env_seconds_(const char* var, double fallback) {
    const char* v = getenv(var);
    if (v == nullptr || v[0] == '\0') return fallback;
    char* end = nullptr;
    double t = strtod(v, &end);
    if (*end != '\0' || !(t > 0)) fatal("$%s must be a positive number of seconds, got '%s'", var, v);
    return t;
}

// The GPU this rank will use must exist: checked before the id exchange, so a bad -pg or
// CUDA_VISIBLE_DEVICES stops this rank before the others wait for it.
inline void multi_gpu_check_device_(const MultiGpuConfig& cfg) {
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
        fatal("%sno CUDA GPU found: train_gpt2cu needs an NVIDIA GPU of compute capability 8.0 or newer",
              cfg.num_processes > 1 ? ("rank " + std::to_string(cfg.process_rank) + ": ").c_str() : "");
    }
    if (cfg.local_device_idx >= device_count) {
        fatal("rank %d would use GPU %d of this node, but only %d are visible (check -pg, the number of "
              "processes per node, and CUDA_VISIBLE_DEVICES)", cfg.process_rank, cfg.local_device_idx, device_count);
    }
}

// ncclCommInitRank, non-blocking, polled until done or timeout_s has passed (then aborted).
inline ncclComm_t multi_gpu_comm_init_(int num_processes, const ncclUniqueId& id, int rank, double timeout_s) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, num_processes, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) nccl_check_(r, "ncclCommInitRankConfig", __FILE__, __LINE__);
    const double t0 = wall_seconds_();
    while (r == ncclInProgress) {
        if (wall_seconds_() - t0 > timeout_s) {
            ncclCommAbort(comm);
            fatal("rank %d: NCCL start-up (ncclCommInitRank of %d ranks) did not finish within %.0f s: a rank is "
                  "missing, stopped, or cannot reach this one (NCCL_SOCKET_IFNAME?); set the limit with "
                  "$LLMC_NCCL_INIT_TIMEOUT_S", rank, num_processes, timeout_s);
        }
        usleep(1000);
        ncclCheck(ncclCommGetAsyncError(comm, &r));
    }
    if (r != ncclSuccess) {
        ncclCommAbort(comm);
        nccl_check_(r, "ncclCommInitRankConfig (asynchronous)", __FILE__, __LINE__);
    }
    return comm;
}

inline MultiGpuConfig multi_gpu_config_init(int num_processes, int process_rank, int gpus_per_node,
                                            const char* init_method, const char* server_ip, int port,
                                            const char* fs_path, int zero_stage) {
    multi_gpu_check_args(num_processes, process_rank, gpus_per_node, init_method, zero_stage);
    static_assert(sizeof(ncclUniqueId) == NCCL_ID_BYTES, "llmc/nccl_id_exchange.h assumes a 128-byte id");
    // Before NCCL reads its environment (ncclGetUniqueId already does): no NVLS / multicast.
    const char* nvls = getenv("NCCL_NVLS_ENABLE");
    if (nvls != nullptr && strcmp(nvls, "0") != 0) {
        fprintf(stderr, "note: NCCL_NVLS_ENABLE=%s overridden to 0 (NVLink multicast is not used)\n", nvls);
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);

    MultiGpuConfig cfg{};
    cfg.zero_stage = zero_stage;
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (strcmp(init_method, "mpi") == 0) {
#ifdef USE_MPI
        int initialized = 0;
        mpiCheck(MPI_Initialized(&initialized));
        if (!initialized) mpiCheck(MPI_Init(nullptr, nullptr));
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &cfg.process_rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &cfg.num_processes));
        if (num_processes > 1 && num_processes != cfg.num_processes) {
            fatal("-pn %d disagrees with the %d processes MPI started (with -pi mpi, -pn/-pr can be left out)",
                  num_processes, cfg.num_processes);
        }
        cfg.local_device_idx = multi_gpu_mpi_local_rank_(cfg.process_rank, cfg.num_processes);
        multi_gpu_check_device_(cfg);
        cfg.use_nccl = cfg.num_processes > 1 || multi_gpu_force_nccl_();
        if (cfg.use_nccl) {
            if (cfg.process_rank == 0) ncclCheck(ncclGetUniqueId(&id));
            mpiCheck(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
        }
#else
        int launched = multi_gpu_launcher_size_();
        if (num_processes > 1 || launched > 1) {
            fatal("-pi mpi needs a build with MPI, and this one has none (NO_USE_MPI=1)%s: start the processes "
                  "yourself with -pi tcp -ps <rank 0 IP> or -pi fs -pf <shared dir>, plus -pn/-pr/-pg",
                  launched > 1 ? (", but mpirun started " + std::to_string(launched) + " processes").c_str() : "");
        }
        cfg.process_rank = 0;
        cfg.num_processes = 1;
        cfg.local_device_idx = 0;
#endif
    } else {
        cfg.process_rank = process_rank;
        cfg.num_processes = num_processes;
        cfg.local_device_idx = process_rank % gpus_per_node;
        multi_gpu_check_device_(cfg);
        cfg.use_nccl = num_processes > 1 || multi_gpu_force_nccl_();
        if (cfg.use_nccl) {
            if (process_rank == 0) ncclCheck(ncclGetUniqueId(&id));
            uint8_t* blob = reinterpret_cast<uint8_t*>(&id);
            double timeout_s = multi_gpu_env_seconds_("LLMC_NCCL_ID_TIMEOUT_S", MULTI_GPU_ID_TIMEOUT_S);
            if (strcmp(init_method, "tcp") == 0) {
                id_exchange_tcp(blob, process_rank, num_processes, server_ip, port, timeout_s, nullptr);
            } else {
                id_exchange_fs(blob, process_rank, num_processes, fs_path, timeout_s, nullptr);
            }
        }
    }

    multi_gpu_check_device_(cfg);  // the mpi build without MPI reaches here unchecked
    cudaCheck(cudaSetDevice(cfg.local_device_idx));
    if (cfg.use_nccl) {
        cfg.nccl_comm = multi_gpu_comm_init_(cfg.num_processes, id, cfg.process_rank,
                                             multi_gpu_env_seconds_("LLMC_NCCL_INIT_TIMEOUT_S", MULTI_GPU_INIT_TIMEOUT_S));
        cudaCheck(cudaStreamCreateWithFlags(&cfg.nccl_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&cfg.compute_nccl_sync, cudaEventDisableTiming));
        cudaCheck(cudaMalloc(&cfg.unified_buffer, MULTI_GPU_HOST_SLOTS * sizeof(float)));
    }
    return cfg;
}

inline void multi_gpu_config_free(MultiGpuConfig* cfg) {
    if (cfg->use_nccl && cfg->nccl_comm != nullptr) {
        cudaCheck(cudaStreamSynchronize(cfg->nccl_stream));
        ncclCheckComm(cfg->nccl_comm, ncclCommFinalize(cfg->nccl_comm));
        const ncclResult_t r = ncclCommDestroy(cfg->nccl_comm);  // after a finalize, in progress is done enough
        if (r != ncclSuccess && r != ncclInProgress) nccl_check_(r, "ncclCommDestroy", __FILE__, __LINE__);
        cudaCheck(cudaStreamDestroy(cfg->nccl_stream));
        cudaCheck(cudaEventDestroy(cfg->compute_nccl_sync));
        cudaFreeCheck(&cfg->unified_buffer);
        cfg->nccl_comm = nullptr;
        cfg->nccl_stream = nullptr;
        cfg->compute_nccl_sync = nullptr;
    }
#ifdef USE_MPI
    int initialized = 0, finalized = 0;
    mpiCheck(MPI_Initialized(&initialized));
    mpiCheck(MPI_Finalized(&finalized));
    if (initialized && !finalized) mpiCheck(MPI_Finalize());
#endif
}

// For a watchdog on another thread: ends the communicator's pending work so no rank waits on this one.
inline void multi_gpu_abort(MultiGpuConfig* cfg) {
    if (cfg->use_nccl && cfg->nccl_comm != nullptr) ncclCommAbort(cfg->nccl_comm);
}

// Test hook: the next host-side collective (queued on nccl_stream) never completes.
inline void multi_gpu_test_hang_collectives(MultiGpuConfig* cfg, cudaStream_t compute) {
    multi_gpu_test_hang(cfg->use_nccl ? cfg->nccl_stream : compute);
}

// Returns once every rank has called it and this device is idle.
inline void multi_gpu_barrier(const MultiGpuConfig* cfg) {
    if (cfg->use_nccl) {
        ncclCheckComm(cfg->nccl_comm, ncclAllReduce(cfg->unified_buffer, cfg->unified_buffer, 1, ncclFloat, ncclSum,
                                                    cfg->nccl_comm, cfg->nccl_stream));
    }
    cudaCheck(cudaDeviceSynchronize());
}

// values[0, n) = their sums over all ranks (blocking; for a few host-side numbers per step).
inline void multi_gpu_cpu_float_sums(float* values, int n, MultiGpuConfig* cfg) {
    if (n < 1 || n > MULTI_GPU_HOST_SLOTS) fatal("multi_gpu_cpu_float_sums: n = %d outside 1..%d", n, MULTI_GPU_HOST_SLOTS);
    if (!cfg->use_nccl) return;
    float* buf = cfg->unified_buffer;
    cudaCheck(cudaMemcpyAsync(buf, values, n * sizeof(float), cudaMemcpyHostToDevice, cfg->nccl_stream));
    ncclCheckComm(cfg->nccl_comm, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, cfg->nccl_comm, cfg->nccl_stream));
    cudaCheck(cudaMemcpyAsync(values, buf, n * sizeof(float), cudaMemcpyDeviceToHost, cfg->nccl_stream));
    cudaCheck(cudaStreamSynchronize(cfg->nccl_stream));
}

// Sum of `value` over all ranks (blocking; for rare host-side numbers such as the val loss).
inline float multi_gpu_cpu_float_sum(float value, MultiGpuConfig* cfg) {
    multi_gpu_cpu_float_sums(&value, 1, cfg);
    return value;
}

// Rank 0's value, on every rank (blocking).
inline int multi_gpu_broadcast_int(int value, MultiGpuConfig* cfg) {
    if (!cfg->use_nccl) return value;
    static_assert(sizeof(int) == sizeof(float), "the int travels in one slot of unified_buffer");
    int* buf = reinterpret_cast<int*>(cfg->unified_buffer);
    cudaCheck(cudaMemcpyAsync(buf, &value, sizeof(int), cudaMemcpyHostToDevice, cfg->nccl_stream));
    ncclCheckComm(cfg->nccl_comm, ncclBroadcast(buf, buf, 1, ncclInt32, 0, cfg->nccl_comm, cfg->nccl_stream));
    cudaCheck(cudaMemcpyAsync(&value, buf, sizeof(int), cudaMemcpyDeviceToHost, cfg->nccl_stream));
    cudaCheck(cudaStreamSynchronize(cfg->nccl_stream));
    return value;
}

// nccl_stream waits for everything queued on `compute` so far.
inline void multi_gpu_follow_compute_(MultiGpuConfig* cfg, cudaStream_t compute) {
    cudaCheck(cudaEventRecord(cfg->compute_nccl_sync, compute));
    cudaCheck(cudaStreamWaitEvent(cfg->nccl_stream, cfg->compute_nccl_sync, 0));
}

template <class T>
void multi_gpu_async_reduce(T* const* ptrs, const size_t* counts, int n, MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl) return;
    multi_gpu_follow_compute_(cfg, compute);
    ncclCheck(ncclGroupStart());
    for (int i = 0; i < n; i++) {
        ncclCheckComm(cfg->nccl_comm, ncclAllReduce(ptrs[i], ptrs[i], counts[i], nccl_type_<T>(), ncclSum,
                                                    cfg->nccl_comm, cfg->nccl_stream));
    }
    ncclCheckComm(cfg->nccl_comm, ncclGroupEnd());
}

// NCCL's documentation caps a group at 2048 operations; a deep model has 12 L + 4 chunks. Every rank cuts
// its chunk list (the same length on all ranks) at the same places.
constexpr int MULTI_GPU_GROUP_MAX_OPS = 1024;

// op(i) for i in [0, n), in ncclGroups of at most MULTI_GPU_GROUP_MAX_OPS calls.
template <class F>
void multi_gpu_grouped_(int n, MultiGpuConfig* cfg, F op) {
    for (int i0 = 0; i0 < n; i0 += MULTI_GPU_GROUP_MAX_OPS) {
        ncclCheck(ncclGroupStart());
        for (int i = i0; i < n && i < i0 + MULTI_GPU_GROUP_MAX_OPS; i++) op(i);
        ncclCheckComm(cfg->nccl_comm, ncclGroupEnd());
    }
}

template <class T>
void multi_gpu_async_reduce_scatter(T* buf, const ZeroChunk* chunks, int n, MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl) return;
    multi_gpu_check_chunks_(chunks, n, cfg, "multi_gpu_async_reduce_scatter");
    multi_gpu_follow_compute_(cfg, compute);
    multi_gpu_grouped_(n, cfg, [&](int i) {
        const ZeroChunk& c = chunks[i];
        ncclCheckComm(cfg->nccl_comm, ncclReduceScatter(buf + c.slice_offset, buf + c.offset, c.size, nccl_type_<T>(),
                                                        ncclSum, cfg->nccl_comm, cfg->nccl_stream));
    });
}

// The compute stream waits for every collective queued so far on nccl_stream.
inline void multi_gpu_wait(MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl) return;
    cudaCheck(cudaEventRecord(cfg->compute_nccl_sync, cfg->nccl_stream));
    cudaCheck(cudaStreamWaitEvent(compute, cfg->compute_nccl_sync, 0));
}

template <class T>
void multi_gpu_all_gather(T* buf, const ZeroChunk* chunks, int n, MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl || cfg->zero_stage == 0) return;
    multi_gpu_check_chunks_(chunks, n, cfg, "multi_gpu_all_gather");
    multi_gpu_follow_compute_(cfg, compute);
    multi_gpu_grouped_(n, cfg, [&](int i) {
        const ZeroChunk& c = chunks[i];
        ncclCheckComm(cfg->nccl_comm, ncclAllGather(buf + c.offset, buf + c.slice_offset, c.size, nccl_type_<T>(),
                                                    cfg->nccl_comm, cfg->nccl_stream));
    });
}

inline void multi_gpu_all_reduce_f32(float* buf, size_t n, MultiGpuOp op, MultiGpuConfig* cfg, cudaStream_t stream) {
    if (!cfg->use_nccl) return;
    (void)op;
    ncclCheckComm(cfg->nccl_comm, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, cfg->nccl_comm, stream));
}

#else
// ============================================================================
// Single-process build (no NCCL): same API, every collective is the identity.

inline MultiGpuConfig multi_gpu_config_init(int num_processes, int process_rank, int gpus_per_node,
                                            const char* init_method, const char* server_ip, int port,
                                            const char* fs_path, int zero_stage) {
    (void)server_ip;
    (void)port;
    (void)fs_path;
    multi_gpu_check_args(num_processes, process_rank, gpus_per_node, init_method, zero_stage);
    int launched = multi_gpu_launcher_size_();
    if (num_processes > 1 || launched > 1) {
        fatal("this build has no NCCL (NO_MULTI_GPU=1) and runs one process, but %s %d: rebuild with NCCL",
              num_processes > 1 ? "-pn is" : "mpirun started", num_processes > 1 ? num_processes : launched);
    }
    cudaCheck(cudaSetDevice(0));
    if (multi_gpu_force_nccl_()) fatal("LLMC_NCCL_SINGLE=1 needs a build with NCCL (this one has NO_MULTI_GPU=1)");
    return MultiGpuConfig{0, 1, 0, zero_stage, false};
}

inline void multi_gpu_config_free(MultiGpuConfig*) {}
inline void multi_gpu_abort(MultiGpuConfig*) {}
inline void multi_gpu_test_hang_collectives(MultiGpuConfig*, cudaStream_t compute) { multi_gpu_test_hang(compute); }
inline void multi_gpu_barrier(const MultiGpuConfig*) { cudaCheck(cudaDeviceSynchronize()); }
inline void multi_gpu_cpu_float_sums(float*, int, MultiGpuConfig*) {}
inline float multi_gpu_cpu_float_sum(float value, MultiGpuConfig*) { return value; }
inline int multi_gpu_broadcast_int(int value, MultiGpuConfig*) { return value; }
template <class T>
void multi_gpu_async_reduce(T* const*, const size_t*, int, MultiGpuConfig*, cudaStream_t) {}
template <class T>
void multi_gpu_async_reduce_scatter(T*, const ZeroChunk*, int, MultiGpuConfig*, cudaStream_t) {}
inline void multi_gpu_wait(MultiGpuConfig*, cudaStream_t) {}
template <class T>
void multi_gpu_all_gather(T*, const ZeroChunk*, int, MultiGpuConfig*, cudaStream_t) {}
inline void multi_gpu_all_reduce_f32(float*, size_t, MultiGpuOp, MultiGpuConfig*, cudaStream_t) {}

#endif  // MULTI_GPU
