/*
 * Hands one opaque 128-byte blob (the ncclUniqueId) from rank 0 to every other rank, without MPI.
 * Host code only: no CUDA or NCCL headers. Both functions return with id[] equal on all ranks
 * (rank 0's input), or stop the process through fatal() with a message naming the peer / path.
 * num_processes == 1 returns at once. Arguments are checked (rank range, port, tag characters).
 *
 * TCP (id_exchange_tcp)
 *   Rank 0 binds server_ip:port (SO_REUSEADDR, not SO_REUSEPORT: a second server on the same port
 *   must fail loudly), then for each of the num_processes-1 clients: accept, read a hello
 *   {magic, num_processes, rank, job}, reply {magic, id length 128, num_processes, job, id}, wait for
 *   a 1-byte ack, close. Clients retry connecting (non-blocking connect, backoff up to 1 s) until timeout_s.
 *   Every send/recv is looped for partial transfers and EINTR and bounded by the deadline.
 *   Job nonce: job = id_exchange_job_nonce(run tag), the run tag chosen as for the fs exchange below
 *   ($LLMC_RUN_TAG, $SLURM_JOB_ID...). A hello from another job (different nonce) is answered with a
 *   refusal and not counted: rank 0 warns and keeps waiting, the foreign client stops with a message
 *   naming both nonces. A restarted Slurm job (new $SLURM_RESTART_COUNT) has a new tag, so a stale
 *   rank of the earlier attempt is refused too. Two hand-started jobs with no tag in the environment
 *   both have tag "default": give them different ports or set $LLMC_RUN_TAG.
 *   Checked: magic, length, job nonce, equal num_processes, client rank in range and not seen twice.
 *   A connection that sends garbage or nothing within 10 s is dropped with a warning, not counted.
 *   Rank 0's timeout message names the address, how many ranks arrived and which are missing.
 *   server_ip may be an IPv4/IPv6 literal or a host name.
 *
 * Shared filesystem (id_exchange_fs): files in DIR, TAG = run_tag (see below)
 *   DIR/ncclUniqueId.TAG.sync       {magic, nonce, num_processes, id}, written by rank 0
 *   DIR/ncclUniqueId.TAG.ack.R      {magic, nonce, R}, written by client R after reading .sync
 *   DIR/ncclUniqueId.TAG.go         {magic, nonce}, written by rank 0 once every client acked
 *   Every file is written to a temp name and renamed, so readers never see half a file.
 *   Rank 0: draw a fresh random 64-bit nonce N; remove an old .go; write .sync(N); wait until every
 *     client's .ack holds N (acks holding other nonces are stale and ignored); delete .sync, then write
 *     .go(N), then delete the acks. On timeout it deletes .sync before fatal().
 *   Client: poll .sync; whenever it holds a nonce not yet acked (and our num_processes), ack that
 *     nonce and remember that file's id; finish when .go holds the nonce last acked.
 *   Why a stale file from an earlier (killed) run is never used: a client may read and ack a stale
 *     .sync(S), but it only finishes on .go(S). Rank 0 deletes .sync(X) before it writes .go(X), so a
 *     .go(S) can only exist once .sync(S) is gone: a client that read .sync(S) and later sees .go(S)
 *     took part in run S while it was alive. Otherwise it keeps polling, sees the new .sync(N) and
 *     re-acks. No clocks are compared, so clock skew between nodes does not matter.
 *   A successful exchange leaves only the small .go file (removed by the next run's rank 0).
 *   The tag keeps different jobs sharing DIR apart: run_tag if non-empty, else $LLMC_RUN_TAG, else
 *     $SLURM_JOB_ID[.$SLURM_STEP_ID][.r$SLURM_RESTART_COUNT], else "default". Characters: [A-Za-z0-9._-].
 *     Two live runs with the same tag in the same DIR are not supported.
 *   Polling backs off from 5 ms to 200 ms. On NFS, attribute caching can add a few seconds of delay.
 *
 * Peer channel (optional last argument of both exchanges): the ranks stay linked without NCCL, so that a
 * rank that stops on an error tells the others at once. NCCL does not: a collective whose peer process
 * is gone waits forever (over NVLink and shared memory, at least), and an aborted communicator releases
 * only its own rank.
 *   tcp: the exchange's connections stay open (rank 0: one per other rank; the others: one to rank 0).
 *        A notice goes to rank 0, which passes it on to every other rank. A connection that ends without
 *        a goodbye counts as a failure of that rank (its process was killed or crashed), so even a
 *        kill -9 is noticed within a poll interval.
 *   fs:  a notice is the file DIR/ncclUniqueId.TAG.failed.<nonce of this exchange>; every rank polls for
 *        it (at most once a second). A process that dies without a word is not noticed (the watchdog
 *        bounds that wait). Rank 0 removes notices of earlier runs of the tag before the exchange.
 *   peer_channel_notify(ch, message)   this rank stops: every other rank gets `message` (bounded, best effort)
 *   peer_channel_poll(ch, ms, &msg)    waits up to ms; true when a peer failed, msg saying which and why
 *   peer_channel_close(ch)             the run ended normally: goodbye (tcp), close
 *
 * Peer watch: a thread that polls the channel (and an optional check of the caller's, e.g. NCCL's
 * asynchronous error) and ends the process when a peer failed; it also registers the fatal() hook
 * (llmc/utils.h), so this rank's own error reaches the peers. A peer's failure prints one line,
 * "peer failure: rank R stops because rank F failed: <F's message>" (or "... rank F ended without a
 * message ...", or "peer failure: rank R: NCCL reports ..."); not "error: ", so that a restart script
 * (scripts/mpi_launch.sh error_recurs) judges a run by the failing rank's own message. Then on_abort
 * runs (the communicator's abort; given PEER_WATCH_ABORT_GRACE_S, as it can block on a dead peer), then
 * _exit(1). Whichever thread stops the process first does so; a second one waits.
 *   peer_watch_start(ch, rank, on_abort, check)   ch may be null (MPI: no channel; on_abort then
 *                                                 includes MPI_Abort); check returns "" while all is well
 *   peer_watch_tell_peers(message)               notifies the peers without stopping this process (the
 *                                                 watchdog's abort, which stops the process itself)
 *   peer_watch_stop()                            before a normal end: joins the thread, clears the hook
 *
 * Start-up flags (id_exchange_args_problem, called by the trainer while it parses them, before any
 * CUDA call or process start-up): -pi tcp needs -ps, an IPv4 / IPv6 address or a host name that
 * resolves; -pi fs needs -pf, an existing directory this process can write in. "" when they are fine,
 * else the message, naming the flag.
 */
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <cstring>
#include <string>
#include <vector>

constexpr size_t NCCL_ID_BYTES = 128;        // sizeof(ncclUniqueId); multi_gpu.cuh static_asserts it
constexpr int NCCL_ID_DEFAULT_PORT = 12345;  // -pi tcp port when -pp is not given (llm.c's fixed port)

constexpr double PEER_WATCH_ABORT_GRACE_S = 10.0;  // longest wait for on_abort before _exit(1)
constexpr const char* PEER_FAILURE_PREFIX = "peer failure: ";  // a line about another rank's failure

// The links that stay after an exchange (see the header comment). Not copyable: it owns sockets.
struct PeerChannel {
    int rank = 0, num_processes = 1;
    std::vector<int> fds;        // tcp: rank 0: fds[r] is rank r's connection (fds[0] unused); others: fds[0]
                                 // is the one to rank 0; -1 once closed
    std::vector<char> said_bye;  // tcp: that peer ended normally
    std::string fail_path;       // fs: this run's notice file ("" for tcp)
    double next_fs_check = 0.0;  // fs: polls the file at most once a second
    std::mutex send_mu;          // notices may be sent by two threads
    PeerChannel() = default;
    PeerChannel(const PeerChannel&) = delete;
    PeerChannel& operator=(const PeerChannel&) = delete;
};

void id_exchange_tcp(uint8_t id[NCCL_ID_BYTES], int rank, int num_processes, const char* server_ip,
                     int port, double timeout_s, const char* run_tag, PeerChannel* keep = nullptr);

void id_exchange_fs(uint8_t id[NCCL_ID_BYTES], int rank, int num_processes, const char* dir,
                    double timeout_s, const char* run_tag, PeerChannel* keep = nullptr);

void peer_channel_notify(PeerChannel* ch, const std::string& message);
bool peer_channel_poll(PeerChannel* ch, int timeout_ms, std::string* message);
void peer_channel_close(PeerChannel* ch);

void peer_watch_start(PeerChannel* ch, int rank, std::function<void()> on_abort, std::function<std::string()> check);
void peer_watch_tell_peers(const std::string& message);
void peer_watch_stop();

// The tag id_exchange_fs uses for run_tag (nullptr or "" = from the environment, as described above).
std::string id_exchange_fs_tag(const char* run_tag);

// 64-bit job nonce of a run tag (FNV-1a), carried by the TCP hello and reply.
uint64_t id_exchange_job_nonce(const std::string& tag);

// A host name: dot-separated labels of 1-63 letters, digits, '-' and '_' (RFC 1123, plus the '_' of some
// container and cluster names), not starting or ending with '-', 253 characters at most (a trailing
// dot allowed); digits and dots alone must be an IPv4 address instead.
inline bool id_exchange_is_host_name(const char* s) {
    const size_t n = strlen(s);
    if (n == 0 || n > 253 || strspn(s, "0123456789.") == n) return false;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        if (ch == '.') {
            if (label == 0 || s[i - 1] == '-') return false;
            label = 0;
            continue;
        }
        const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '_' && !(ch == '-' && label > 0)) return false;
        if (++label > 63) return false;
    }
    return s[n - 1] != '-';
}

inline std::string id_exchange_args_problem(const char* init_method, const char* server_ip, const char* fs_path) {
    const std::string ip = server_ip != nullptr ? server_ip : "", dir = fs_path != nullptr ? fs_path : "";
    if (strcmp(init_method, "tcp") == 0) {
        if (ip.empty()) return "-pi tcp needs -ps <rank 0's IP address or host name>, the address the ranks meet at";
        unsigned char addr[sizeof(in6_addr)];
        if (inet_pton(AF_INET, ip.c_str(), addr) == 1 || inet_pton(AF_INET6, ip.c_str(), addr) == 1) return "";
        if (!id_exchange_is_host_name(ip.c_str())) {
            return "-ps '" + ip + "' is neither an IPv4 address (like 10.0.0.1), an IPv6 address, nor a host name";
        }
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        const int rc = getaddrinfo(ip.c_str(), nullptr, &hints, &res);
        if (res != nullptr) freeaddrinfo(res);
        if (rc != 0) return "-ps '" + ip + "': cannot resolve the host name: " + gai_strerror(rc);
    } else if (strcmp(init_method, "fs") == 0) {
        if (dir.empty()) return "-pi fs needs -pf <a directory every process sees> to exchange the NCCL id in";
        struct stat st;
        if (stat(dir.c_str(), &st) != 0) return "-pf '" + dir + "': " + strerror(errno) + " (it must be an existing directory)";
        if (!S_ISDIR(st.st_mode)) return "-pf '" + dir + "' is not a directory";
        if (access(dir.c_str(), W_OK | X_OK) != 0) return "-pf '" + dir + "': cannot write files there: " + strerror(errno);
    }
    return "";
}
