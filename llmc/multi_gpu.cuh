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
 *   ncclInProgress is polled to completion (ncclCheckLocked). Waits on the GPU are bounded by the
 *   caller's watchdog (llmc/watchdog.h, multi_gpu_abort for its abort).
 *   NVLink SHARP / multicast (NVLS) is never used: NCCL_NVLS_ENABLE is forced to 0 before NCCL starts.
 *   The trainer must link llmc/nccl_id_exchange.cpp when MULTI_GPU is defined.
 *
 * Failure of one rank (more than one process): right after the id exchange a peer watch starts
 *   (llmc/nccl_id_exchange.h): tcp / fs keep a channel between the ranks (mpi: MPI_Abort ends the job).
 *   Any error of this rank after that point (fatal(), a failed CUDA / NCCL check) is sent to the peers,
 *   this rank's communicator is aborted and the process exits 1; a peer that hears of it, or whose
 *   communicator reports an asynchronous error (polled once a second), prints "peer failure: rank R
 *   stops because rank F failed: <F's message>" and does the same. So every rank ends within seconds
 *   instead of waiting for its watchdog. The watchdog's own abort (multi_gpu_abort) tells the peers too.
 *   Before the exchange there is no channel: a rank that fails then leaves the others to the exchange's
 *   own timeout (which is why every check that can fail on one rank runs before it).
 * One thread at a time on the communicator (NCCL's rule): the main thread holds a process-wide lock
 *   for each NCCL call sequence and releases it while it polls; the thread that aborts (watchdog, peer
 *   watch, or the fatal hook) takes it, marks the communicator aborted and calls ncclCommAbort. The
 *   main thread never touches an aborted communicator: it waits for the aborting thread, which ends
 *   the process with exit code 1 and its message.
 *
 * Gradients and parameters (every call is asynchronous: queued on nccl_stream after the work queued so
 * far on the compute stream; call multi_gpu_wait(cfg, compute) before the compute stream reads the results):
 *   multi_gpu_async_reduce(ptrs, counts, n, cfg, compute) (ZeRO-0): one ncclGroup over the n tensors,
 *     ptrs[i][0, counts[i]) = SUM over ranks (ncclAllReduce, ncclSum, in place).
 *   multi_gpu_async_reduce_scatter(buf, slices, n, cfg, compute) (ZeRO-1): for each slice
 *     (llmc/zero_shards.h ZeroSlice: P runs of `count` from `offset`), this rank's run
 *     buf[offset + rank*count, + count) = SUM over ranks of that run, from one in-place ncclReduceScatter
 *     over buf[offset, offset + P*count) (NCCL's in-place rule: recvbuff == sendbuff + rank*recvcount);
 *     the other runs are left unspecified. One ncclGroup over all slices (several past
 *     MULTI_GPU_GROUP_MAX_OPS). The padded layout's one slice reaches past the N parameters: buf must
 *     hold ZeroPlan::buffer_elements.
 *     A sum, not ncclAvg: NCCL's average pre-multiplies by 1/P rounded to the element type, and
 *     bf16(1/3) = 0.33398 makes P = 3 gradients 0.2% too large (also 5, 6, 7). The caller scales by
 *     multi_gpu_mean_scale(cfg) = 1/P in fp32 where the gradient is read (the AdamW step, the norm).
 *   multi_gpu_all_gather(buf, slices, n, cfg, compute) (ZeRO-1, after the update): every rank's run of
 *     each slice is copied to all ranks (ncclAllGather in place: sendbuff == recvbuff + rank*sendcount),
 *     grouped likewise; a no-op under ZeRO-0.
 *   multi_gpu_all_reduce_f32(buf, n, op, cfg, stream): buf[0, n) = sum over ranks (the only op), queued on
 *     `stream` itself (for the loss and the ZeRO-1 partial grad norm).
 * Host side (blocking): multi_gpu_barrier (all ranks reach it, and the device is idle),
 *   multi_gpu_cpu_float_sum (sum of one float over ranks: val loss, eval counts),
 *   multi_gpu_cpu_float_sums (values[0, n) summed in place, n <= MULTI_GPU_HOST_SLOTS: the step's vote),
 *   multi_gpu_broadcast_bytes (rank 0's bytes, at most MULTI_GPU_HOST_SLOTS floats' worth, to every
 *   rank: the resume step, RNG and model shape, the step's skip decision), multi_gpu_broadcast_int.
 *   multi_gpu_broadcast_params(buf, n, cfg, stream): buf[0, n) = rank 0's, on the GPU (a resume that
 *   starts fresh: every rank takes rank 0's initial weights).
 * multi_gpu_abort(cfg): for a watchdog on another thread; tells the peers that this rank stops, then
 *   aborts this rank's communicator, which ends this rank's pending NCCL work so the process can exit.
 *   It does not release the peers' collectives: they stop when the notice reaches them (or on their
 *   own watchdog).
 */
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include "llmc/comm_guard.h"
#include "llmc/cuda_common.h"
#include "llmc/nccl_id_exchange.h"  // host only; also gives NCCL_ID_DEFAULT_PORT to single-GPU builds
#include "llmc/utils.h"
#include "llmc/zero_shards.h"  // host only: ZeroSlice

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
// How long an abort from another thread waits for the main thread to leave an NCCL call (non-blocking
// calls return at once; only a call that hangs inside NCCL keeps it out, and then the process exits anyway).
constexpr double MULTI_GPU_ABORT_WAIT_S = 5.0;

struct MultiGpuConfig {
    int process_rank;      // global rank, 0..num_processes-1
    int num_processes;
    int local_device_idx;  // CUDA device this process uses
    int zero_stage;        // 0: replicated optimizer state; 1: optimizer state sharded across ranks
    bool use_nccl;         // collectives go through NCCL (num_processes > 1, or LLMC_NCCL_SINGLE=1)
#ifdef MULTI_GPU
    // the communicator itself is process-wide (multi_gpu_comm_()), shared with the threads that may abort it
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

inline double wall_seconds_() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#ifdef LLMC_TEST_HOOKS
// Test hook, test builds only (make EXTRA_NVCC_FLAGS=-DLLMC_TEST_HOOKS; dev/test/gpu/multi_gpu_stop_check.sh):
// a kernel that never ends, queued on `stream`, so that the next wait on it (or a collective queued
// behind it) blocks like one whose peer died.
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
#endif

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

// The process's one communicator, and what lets another thread abort it safely (see the header and
// llmc/comm_guard.h). Allocated once and never freed: no destructor can run while a thread still uses
// it at exit.
struct MultiGpuComm_ {
    CommGuard guard;                  // handle: the ncclComm_t
    PeerChannel channel;              // tcp / fs start-up: the link to the other ranks
    bool channel_open = false;
};
inline MultiGpuComm_& multi_gpu_comm_() {
    static MultiGpuComm_* c = new MultiGpuComm_();
    return *c;
}

// The main thread's hold on the communicator for one sequence of NCCL calls.
struct MultiGpuCommLock : CommHold {
    MultiGpuCommLock() : CommHold(&multi_gpu_comm_().guard) {}
    ncclComm_t comm() const { return static_cast<ncclComm_t>(handle()); }
    void set_comm(ncclComm_t c) { g->handle = c; }
};

// A call on a non-blocking communicator may answer ncclInProgress: poll until it is done.
inline void nccl_settle_(MultiGpuCommLock& lk, ncclResult_t r, const char* stmt, const char* file, int line) {
    while (r == ncclInProgress) {
        lk.pause_us(100);
        if (ncclCommGetAsyncError(lk.comm(), &r) != ncclSuccess) break;
    }
    if (r != ncclSuccess) nccl_check_(r, stmt, file, line);
}
#define ncclCheckLocked(lk, stmt) do { ncclResult_t r_ = (stmt); \
    if (r_ != ncclSuccess) nccl_settle_(lk, r_, #stmt, __FILE__, __LINE__); } while (0)

// Aborts the communicator, from any thread, once per process (llmc/comm_guard.h comm_guard_abort).
inline void multi_gpu_abort_comm_(double wait_s) {
    comm_guard_abort(&multi_gpu_comm_().guard, wait_s, [](void* c) { ncclCommAbort(static_cast<ncclComm_t>(c)); });
}

// The peer watch's check: an asynchronous error of the communicator (e.g. ncclRemoteError when a peer
// is gone), "" while all is well. Skipped while the main thread is inside an NCCL call.
inline std::string multi_gpu_async_problem_() {
    return comm_guard_try(&multi_gpu_comm_().guard, [](void* c) -> std::string {
        const ncclComm_t comm = static_cast<ncclComm_t>(c);
        ncclResult_t r = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess || r == ncclSuccess || r == ncclInProgress) return "";
        const char* last = ncclGetLastError(comm);
        return std::string("NCCL reports an error on this rank's communicator: ") + ncclGetErrorString(r) +
               (last != nullptr && last[0] != '\0' ? std::string(" (") + last + ")" : std::string()) +
               " (a peer process stopped, or the network between the ranks failed)";
    });
}

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

// ncclCommInitRank, non-blocking, polled until done or timeout_s has passed (then aborted). The
// communicator is the process's (multi_gpu_comm_()) from its first moment, so an abort reaches it.
inline void multi_gpu_comm_init_(int num_processes, const ncclUniqueId& id, int rank, double timeout_s) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    MultiGpuCommLock lk;
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, num_processes, id, rank, &config);
    lk.set_comm(comm);
    if (r != ncclSuccess && r != ncclInProgress) nccl_check_(r, "ncclCommInitRankConfig", __FILE__, __LINE__);
    const double t0 = wall_seconds_();
    while (r == ncclInProgress) {
        if (wall_seconds_() - t0 > timeout_s) {
            lk.set_comm(nullptr);
            ncclCommAbort(comm);
            fatal("rank %d: NCCL start-up (ncclCommInitRank of %d ranks) did not finish within %.0f s: a rank is "
                  "missing, stopped, or cannot reach this one (NCCL_SOCKET_IFNAME?); set the limit with "
                  "$LLMC_NCCL_INIT_TIMEOUT_S", rank, num_processes, timeout_s);
        }
        lk.pause_us(1000);
        ncclCheck(ncclCommGetAsyncError(comm, &r));
    }
    if (r != ncclSuccess) {
        lk.set_comm(nullptr);
        ncclCommAbort(comm);
        nccl_check_(r, "ncclCommInitRankConfig (asynchronous)", __FILE__, __LINE__);
    }
}

// From the id exchange on, an error of this rank reaches the others, and theirs reach it (see the header).
inline void multi_gpu_start_peer_watch_(int rank, bool use_mpi) {
    MultiGpuComm_& g = multi_gpu_comm_();
    auto on_abort = [use_mpi] {
        multi_gpu_abort_comm_(MULTI_GPU_ABORT_WAIT_S);
#ifdef USE_MPI
        if (use_mpi) MPI_Abort(MPI_COMM_WORLD, 1);  // mpirun ends every other rank
#else
        (void)use_mpi;
#endif
    };
    peer_watch_start(g.channel_open ? &g.channel : nullptr, rank, on_abort, multi_gpu_async_problem_);
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
    const bool use_mpi = strcmp(init_method, "mpi") == 0;
    MultiGpuComm_& g = multi_gpu_comm_();
    if (use_mpi) {
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
            PeerChannel* keep = num_processes > 1 ? &g.channel : nullptr;
            if (strcmp(init_method, "tcp") == 0) {
                id_exchange_tcp(blob, process_rank, num_processes, server_ip, port, timeout_s, nullptr, keep);
            } else {
                id_exchange_fs(blob, process_rank, num_processes, fs_path, timeout_s, nullptr, keep);
            }
            g.channel_open = keep != nullptr;
        }
    }
    if (cfg.num_processes > 1) multi_gpu_start_peer_watch_(cfg.process_rank, use_mpi);

    multi_gpu_check_device_(cfg);  // the mpi build without MPI reaches here unchecked
    cudaCheck(cudaSetDevice(cfg.local_device_idx));
    if (cfg.use_nccl) {
        multi_gpu_comm_init_(cfg.num_processes, id, cfg.process_rank,
                             multi_gpu_env_seconds_("LLMC_NCCL_INIT_TIMEOUT_S", MULTI_GPU_INIT_TIMEOUT_S));
        cudaCheck(cudaStreamCreateWithFlags(&cfg.nccl_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&cfg.compute_nccl_sync, cudaEventDisableTiming));
        cudaCheck(cudaMalloc(&cfg.unified_buffer, MULTI_GPU_HOST_SLOTS * sizeof(float)));
    }
    return cfg;
}

inline void multi_gpu_config_free(MultiGpuConfig* cfg) {
    MultiGpuComm_& g = multi_gpu_comm_();
    g.guard.finishing = true;  // a faster peer may close its end while this one finalizes: no asynchronous-error stop
    if (cfg->use_nccl && cfg->nccl_stream != nullptr) {
        cudaCheck(cudaStreamSynchronize(cfg->nccl_stream));
        {
            MultiGpuCommLock lk;
            if (lk.comm() != nullptr) {
                ncclCheckLocked(lk, ncclCommFinalize(lk.comm()));
                const ncclResult_t r = ncclCommDestroy(lk.comm());  // after a finalize, in progress is done enough
                if (r != ncclSuccess && r != ncclInProgress) nccl_check_(r, "ncclCommDestroy", __FILE__, __LINE__);
                lk.set_comm(nullptr);
            }
        }
        cudaCheck(cudaStreamDestroy(cfg->nccl_stream));
        cudaCheck(cudaEventDestroy(cfg->compute_nccl_sync));
        cudaFreeCheck(&cfg->unified_buffer);
        cfg->nccl_stream = nullptr;
        cfg->compute_nccl_sync = nullptr;
    }
    // after the last collective: from here on a peer that ends is no failure
    peer_watch_stop();
    if (g.channel_open) {
        peer_channel_close(&g.channel);
        g.channel_open = false;
    }
#ifdef USE_MPI
    int initialized = 0, finalized = 0;
    mpiCheck(MPI_Initialized(&initialized));
    mpiCheck(MPI_Finalized(&finalized));
    if (initialized && !finalized) mpiCheck(MPI_Finalize());
#endif
}

// For a watchdog on another thread: the peers hear that this rank stops, then this rank's communicator
// is aborted, which ends its pending NCCL work so that the process can exit. The peers' collectives are
// not released by it: they stop when the notice reaches them (or on their own watchdog).
// Reads nothing of cfg: the watchdog may fire while the start-up is still filling it in.
inline void multi_gpu_abort(MultiGpuConfig* cfg) {
    (void)cfg;
    peer_watch_tell_peers("stopped: one of its waits passed the -wt limit (its log names the step and the wait)");
    multi_gpu_abort_comm_(MULTI_GPU_ABORT_WAIT_S);
}

#ifdef LLMC_TEST_HOOKS
// Test hook (test builds only): the next host-side collective (queued on nccl_stream) never completes.
inline void multi_gpu_test_hang_collectives(MultiGpuConfig* cfg, cudaStream_t compute) {
    multi_gpu_test_hang(cfg->use_nccl ? cfg->nccl_stream : compute);
}
#endif

// Returns once every rank has called it and this device is idle.
inline void multi_gpu_barrier(const MultiGpuConfig* cfg) {
    if (cfg->use_nccl) {
        MultiGpuCommLock lk;
        ncclCheckLocked(lk, ncclAllReduce(cfg->unified_buffer, cfg->unified_buffer, 1, ncclFloat, ncclSum, lk.comm(),
                                          cfg->nccl_stream));
    }
    cudaCheck(cudaDeviceSynchronize());
}

// values[0, n) = their sums over all ranks (blocking; for a few host-side numbers per step).
inline void multi_gpu_cpu_float_sums(float* values, int n, MultiGpuConfig* cfg) {
    if (n < 1 || n > MULTI_GPU_HOST_SLOTS) fatal("multi_gpu_cpu_float_sums: n = %d outside 1..%d", n, MULTI_GPU_HOST_SLOTS);
    if (!cfg->use_nccl) return;
    float* buf = cfg->unified_buffer;
    cudaCheck(cudaMemcpyAsync(buf, values, n * sizeof(float), cudaMemcpyHostToDevice, cfg->nccl_stream));
    {
        MultiGpuCommLock lk;
        ncclCheckLocked(lk, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, lk.comm(), cfg->nccl_stream));
    }
    cudaCheck(cudaMemcpyAsync(values, buf, n * sizeof(float), cudaMemcpyDeviceToHost, cfg->nccl_stream));
    cudaCheck(cudaStreamSynchronize(cfg->nccl_stream));
}

// Sum of `value` over all ranks (blocking; for rare host-side numbers such as the val loss).
inline float multi_gpu_cpu_float_sum(float value, MultiGpuConfig* cfg) {
    multi_gpu_cpu_float_sums(&value, 1, cfg);
    return value;
}

// data[0, bytes) = rank 0's, on every rank (blocking).
inline void multi_gpu_broadcast_bytes(void* data, size_t bytes, MultiGpuConfig* cfg) {
    if (bytes > MULTI_GPU_HOST_SLOTS * sizeof(float)) {
        fatal("multi_gpu_broadcast_bytes: %zu bytes, at most %zu", bytes, MULTI_GPU_HOST_SLOTS * sizeof(float));
    }
    if (!cfg->use_nccl || bytes == 0) return;
    uint8_t* buf = reinterpret_cast<uint8_t*>(cfg->unified_buffer);
    cudaCheck(cudaMemcpyAsync(buf, data, bytes, cudaMemcpyHostToDevice, cfg->nccl_stream));
    {
        MultiGpuCommLock lk;
        ncclCheckLocked(lk, ncclBroadcast(buf, buf, bytes, ncclUint8, 0, lk.comm(), cfg->nccl_stream));
    }
    cudaCheck(cudaMemcpyAsync(data, buf, bytes, cudaMemcpyDeviceToHost, cfg->nccl_stream));
    cudaCheck(cudaStreamSynchronize(cfg->nccl_stream));
}

// Rank 0's value, on every rank (blocking).
inline int multi_gpu_broadcast_int(int value, MultiGpuConfig* cfg) {
    multi_gpu_broadcast_bytes(&value, sizeof(value), cfg);
    return value;
}

// buf[0, n) = rank 0's, in place on the GPU; `stream` waits for it (and it for `stream`'s work so far).
template <class T>
void multi_gpu_broadcast_params(T* buf, size_t n, MultiGpuConfig* cfg, cudaStream_t stream) {
    if (!cfg->use_nccl) return;
    cudaCheck(cudaEventRecord(cfg->compute_nccl_sync, stream));
    cudaCheck(cudaStreamWaitEvent(cfg->nccl_stream, cfg->compute_nccl_sync, 0));
    {
        MultiGpuCommLock lk;
        ncclCheckLocked(lk, ncclBroadcast(buf, buf, n, nccl_type_<T>(), 0, lk.comm(), cfg->nccl_stream));
    }
    cudaCheck(cudaEventRecord(cfg->compute_nccl_sync, cfg->nccl_stream));
    cudaCheck(cudaStreamWaitEvent(stream, cfg->compute_nccl_sync, 0));
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
    MultiGpuCommLock lk;
    ncclCheck(ncclGroupStart());
    for (int i = 0; i < n; i++) {
        ncclCheckLocked(lk, ncclAllReduce(ptrs[i], ptrs[i], counts[i], nccl_type_<T>(), ncclSum, lk.comm(),
                                          cfg->nccl_stream));
    }
    ncclCheckLocked(lk, ncclGroupEnd());
}

// NCCL's documentation caps a group at 2048 operations; a deep model has 12 L + 4 slices. Every rank cuts
// its slice list (the same on all ranks) at the same places.
constexpr int MULTI_GPU_GROUP_MAX_OPS = 1024;

// op(i) for i in [0, n), in ncclGroups of at most MULTI_GPU_GROUP_MAX_OPS calls.
template <class F>
void multi_gpu_grouped_(int n, MultiGpuCommLock& lk, F op) {
    for (int i0 = 0; i0 < n; i0 += MULTI_GPU_GROUP_MAX_OPS) {
        ncclCheck(ncclGroupStart());
        for (int i = i0; i < n && i < i0 + MULTI_GPU_GROUP_MAX_OPS; i++) op(i);
        ncclCheckLocked(lk, ncclGroupEnd());
    }
}

template <class T>
void multi_gpu_async_reduce_scatter(T* buf, const ZeroSlice* slices, int n, MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl) return;
    multi_gpu_follow_compute_(cfg, compute);
    const size_t r = (size_t)cfg->process_rank;
    MultiGpuCommLock lk;
    multi_gpu_grouped_(n, lk, [&](int i) {
        const ZeroSlice& s = slices[i];
        ncclCheckLocked(lk, ncclReduceScatter(buf + s.offset, buf + s.offset + r * s.count, s.count, nccl_type_<T>(),
                                              ncclSum, lk.comm(), cfg->nccl_stream));
    });
}

// The compute stream waits for every collective queued so far on nccl_stream.
inline void multi_gpu_wait(MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl) return;
    cudaCheck(cudaEventRecord(cfg->compute_nccl_sync, cfg->nccl_stream));
    cudaCheck(cudaStreamWaitEvent(compute, cfg->compute_nccl_sync, 0));
}

template <class T>
void multi_gpu_all_gather(T* buf, const ZeroSlice* slices, int n, MultiGpuConfig* cfg, cudaStream_t compute) {
    if (!cfg->use_nccl || cfg->zero_stage == 0) return;
    multi_gpu_follow_compute_(cfg, compute);
    const size_t r = (size_t)cfg->process_rank;
    MultiGpuCommLock lk;
    multi_gpu_grouped_(n, lk, [&](int i) {
        const ZeroSlice& s = slices[i];
        ncclCheckLocked(lk, ncclAllGather(buf + s.offset + r * s.count, buf + s.offset, s.count, nccl_type_<T>(),
                                          lk.comm(), cfg->nccl_stream));
    });
}

inline void multi_gpu_all_reduce_f32(float* buf, size_t n, MultiGpuOp op, MultiGpuConfig* cfg, cudaStream_t stream) {
    if (!cfg->use_nccl) return;
    (void)op;
    MultiGpuCommLock lk;
    ncclCheckLocked(lk, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, lk.comm(), stream));
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
#ifdef LLMC_TEST_HOOKS
inline void multi_gpu_test_hang_collectives(MultiGpuConfig*, cudaStream_t compute) { multi_gpu_test_hang(compute); }
#endif
inline void multi_gpu_barrier(const MultiGpuConfig*) { cudaCheck(cudaDeviceSynchronize()); }
inline void multi_gpu_cpu_float_sums(float*, int, MultiGpuConfig*) {}
inline float multi_gpu_cpu_float_sum(float value, MultiGpuConfig*) { return value; }
inline void multi_gpu_broadcast_bytes(void*, size_t, MultiGpuConfig*) {}
inline int multi_gpu_broadcast_int(int value, MultiGpuConfig*) { return value; }
template <class T>
void multi_gpu_broadcast_params(T*, size_t, MultiGpuConfig*, cudaStream_t) {}
template <class T>
void multi_gpu_async_reduce(T* const*, const size_t*, int, MultiGpuConfig*, cudaStream_t) {}
template <class T>
void multi_gpu_async_reduce_scatter(T*, const ZeroSlice*, int, MultiGpuConfig*, cudaStream_t) {}
inline void multi_gpu_wait(MultiGpuConfig*, cudaStream_t) {}
template <class T>
void multi_gpu_all_gather(T*, const ZeroSlice*, int, MultiGpuConfig*, cudaStream_t) {}
inline void multi_gpu_all_reduce_f32(float*, size_t, MultiGpuOp, MultiGpuConfig*, cudaStream_t) {}

#endif  // MULTI_GPU
