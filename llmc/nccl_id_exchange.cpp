// Rank 0 -> all ranks exchange of the 128-byte NCCL unique id over TCP or a shared directory.
// Protocols are described in nccl_id_exchange.h.
#include "llmc/nccl_id_exchange.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llmc/utils.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_s(double s) {
    if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Milliseconds left until deadline, rounded up so a poll never returns just before it; 0 when past.
int remaining_ms(double deadline) {
    double ms = std::ceil((deadline - now_s()) * 1000.0);
    if (ms <= 0) return 0;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

void check_common_args(int rank, int num_processes, double timeout_s, const char* what) {
    check_process_rank(what, rank, num_processes);
    if (!(timeout_s > 0)) fatal("%s: timeout must be > 0 seconds, got %g", what, timeout_s);
}

// "3, 5, 7" for the ranks 1..num_processes-1 not marked in arrived (at most 16 listed).
std::string missing_ranks(const std::vector<char>& arrived) {
    std::string s;
    int listed = 0, total = 0;
    for (size_t r = 1; r < arrived.size(); r++) {
        if (arrived[r]) continue;
        total++;
        if (listed < 16) {
            s += (listed ? ", " : "") + std::to_string(r);
            listed++;
        }
    }
    if (total > listed) s += ", ... (" + std::to_string(total) + " in all)";
    return s;
}

// ----------------------------------------------------------------------------
// TCP

// Version 2 magics (version 1 had no job nonce): a peer of the older format reads as "bad magic".
constexpr uint32_t TCP_MAGIC_HELLO = 0x4c4c4332;   // client -> rank 0
constexpr uint32_t TCP_MAGIC_ID = 0x4c4c4932;      // rank 0 -> client: the id
constexpr uint32_t TCP_MAGIC_REFUSE = 0x4c4c5232;  // rank 0 -> client of another job: no id
constexpr uint8_t TCP_ACK = 0x41;                 // client -> rank 0 after the id arrived
constexpr double TCP_HANDSHAKE_LIMIT_S = 10.0;    // a silent connection is dropped after this

struct TcpHello {
    uint32_t magic;
    int32_t num_processes;
    int32_t rank;
    uint32_t unused;
    uint64_t job;  // id_exchange_job_nonce of the client's run tag
};
struct TcpIdMsg {
    uint32_t magic;
    uint32_t id_len;
    int32_t num_processes;
    uint32_t unused;
    uint64_t job;  // rank 0's job nonce
    uint8_t id[NCCL_ID_BYTES];
};
static_assert(sizeof(TcpHello) == 24 && sizeof(TcpIdMsg) == 24 + NCCL_ID_BYTES, "wire layout");

enum class Io { ok, closed, timeout, error };

// Sends (POLLOUT) or receives (POLLIN) exactly n bytes before the deadline, across partial transfers
// and EINTR. A peer that closes the connection: Io::closed.
Io transfer_all(int fd, char* p, size_t n, double deadline, bool sending) {
    while (n > 0) {
        int ms = remaining_ms(deadline);
        if (ms == 0) return Io::timeout;
        pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
        int r = poll(&pfd, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Io::error;
        if (r == 0) return Io::timeout;
        ssize_t done = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (done < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (done < 0) return (errno == ECONNRESET || (sending && errno == EPIPE)) ? Io::closed : Io::error;
        if (done == 0 && !sending) return Io::closed;
        p += done;
        n -= (size_t)done;
    }
    return Io::ok;
}

Io send_all(int fd, const void* buf, size_t n, double deadline) {
    return transfer_all(fd, const_cast<char*>(static_cast<const char*>(buf)), n, deadline, true);
}

Io recv_all(int fd, void* buf, size_t n, double deadline) {
    return transfer_all(fd, static_cast<char*>(buf), n, deadline, false);
}

const char* io_str(Io io) {
    switch (io) {
        case Io::ok: return "ok";
        case Io::closed: return "connection closed by peer";
        case Io::timeout: return "timed out";
        default: return strerror(errno);
    }
}

struct Address {
    sockaddr_storage addr;
    socklen_t len;
};

Address resolve(const char* host, int port, int rank) {
    if (host == nullptr || host[0] == '\0') {
        fatal("rank %d: NCCL id exchange over TCP needs rank 0's IP address (-ps)", rank);
    }
    if (port < 1 || port > 65535) fatal("rank %d: TCP port must be in 1..65535, got %d", rank, port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string port_str = std::to_string(port);
    int rc = getaddrinfo(host, port_str.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        fatal("rank %d: cannot resolve server address '%s' (-ps): %s", rank, host, gai_strerror(rc));
    }
    Address a{};
    memcpy(&a.addr, res->ai_addr, res->ai_addrlen);
    a.len = res->ai_addrlen;
    freeaddrinfo(res);
    return a;
}

std::string peer_name(const sockaddr_storage& sa) {
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    getnameinfo(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa), host, sizeof(host), serv, sizeof(serv),
                NI_NUMERICHOST | NI_NUMERICSERV);
    return std::string(host) + ":" + serv;
}

void tcp_server(const uint8_t id[NCCL_ID_BYTES], int num_processes, const char* server_ip, int port,
                double timeout_s, const std::string& tag, PeerChannel* keep) {
    const uint64_t job = id_exchange_job_nonce(tag);
    Address a = resolve(server_ip, port, 0);
    int lfd = socket(a.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) fatal("rank 0: cannot create a TCP socket: %s", strerror(errno));
    int one = 1;
    if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        fatal("rank 0: setsockopt(SO_REUSEADDR) failed: %s", strerror(errno));
    }
    if (bind(lfd, reinterpret_cast<sockaddr*>(&a.addr), a.len) != 0) {
        fatal("rank 0: cannot listen on %s:%d: %s (is -ps an address of this host? is another run using "
              "port %d?)", server_ip, port, strerror(errno), port);
    }
    if (listen(lfd, SOMAXCONN) != 0) fatal("rank 0: listen on %s:%d failed: %s", server_ip, port, strerror(errno));

    const double deadline = now_s() + timeout_s;
    std::vector<char> arrived(num_processes, 0);
    int num_arrived = 0;
    TcpIdMsg msg{TCP_MAGIC_ID, (uint32_t)NCCL_ID_BYTES, num_processes, 0, job, {}};
    memcpy(msg.id, id, NCCL_ID_BYTES);

    while (num_arrived < num_processes - 1) {
        int ms = remaining_ms(deadline);
        int r = 0;
        if (ms > 0) {
            pollfd pfd{lfd, POLLIN, 0};
            r = poll(&pfd, 1, ms);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) fatal("rank 0: poll on %s:%d failed: %s", server_ip, port, strerror(errno));
        }
        if (r == 0) {
            fatal("rank 0: timed out after %.1f s waiting on %s:%d for the other ranks: %d of %d connected; "
                  "missing ranks: %s", timeout_s, server_ip, port, num_arrived, num_processes - 1,
                  missing_ranks(arrived).c_str());
        }
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof(peer);
        int cfd = accept4(lfd, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
            fatal("rank 0: accept on %s:%d failed: %s", server_ip, port, strerror(errno));
        }
        std::string who = peer_name(peer);
        double conn_deadline = std::min(deadline, now_s() + TCP_HANDSHAKE_LIMIT_S);
        TcpHello hello{};
        Io io = recv_all(cfd, &hello, sizeof(hello), conn_deadline);
        if (io != Io::ok || hello.magic != TCP_MAGIC_HELLO) {
            fprintf(stderr, "warning: rank 0: ignoring a connection from %s to port %d (%s)\n", who.c_str(), port,
                    io != Io::ok ? io_str(io) : "not an llm.c rank: bad magic");
            close(cfd);
            continue;
        }
        if (hello.job != job) {
            // Another job's rank found this port: tell it (it stops with a message) and keep waiting for ours.
            fprintf(stderr, "warning: rank 0: refusing rank %d from %s: its job nonce %016llx is not this job's "
                    "%016llx (run tag '%s'); another job uses port %d\n", hello.rank, who.c_str(),
                    (unsigned long long)hello.job, (unsigned long long)job, tag.c_str(), port);
            TcpIdMsg refuse{TCP_MAGIC_REFUSE, 0, num_processes, 0, job, {}};
            send_all(cfd, &refuse, sizeof(refuse), conn_deadline);
            close(cfd);
            continue;
        }
        if (hello.num_processes != num_processes) {
            fatal("rank 0: the rank connecting from %s runs with %d processes, rank 0 with %d (-pn must agree)",
                  who.c_str(), hello.num_processes, num_processes);
        }
        if (hello.rank < 1 || hello.rank >= num_processes) {
            fatal("rank 0: a client from %s claims rank %d, outside 1..%d (-pr)", who.c_str(), hello.rank,
                  num_processes - 1);
        }
        if (arrived[hello.rank]) {
            fatal("rank 0: rank %d connected twice (again from %s): every process needs its own -pr",
                  hello.rank, who.c_str());
        }
        uint8_t ack = 0;
        io = send_all(cfd, &msg, sizeof(msg), conn_deadline);
        if (io == Io::ok) io = recv_all(cfd, &ack, 1, conn_deadline);
        if (io != Io::ok || ack != TCP_ACK) {
            // The client retries the whole handshake on its side, so it is not counted yet.
            fprintf(stderr, "warning: rank 0: handshake with rank %d at %s failed (%s)\n", hello.rank, who.c_str(),
                    io != Io::ok ? io_str(io) : "bad ack");
            close(cfd);
            continue;
        }
        if (keep != nullptr) keep->fds[hello.rank] = cfd;
        else close(cfd);
        arrived[hello.rank] = 1;
        num_arrived++;
    }
    close(lfd);
}

// Non-blocking connect bounded by the deadline. Returns the connected (non-blocking) socket or -1 with err set.
int connect_before(const Address& a, double deadline, std::string* err) {
    int fd = socket(a.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) fatal("cannot create a TCP socket: %s", strerror(errno));
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len);
    if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
        *err = strerror(errno);
        close(fd);
        return -1;
    }
    if (rc != 0) {
        for (;;) {
            int ms = remaining_ms(deadline);
            pollfd pfd{fd, POLLOUT, 0};
            int r = ms > 0 ? poll(&pfd, 1, ms) : 0;
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                *err = r == 0 ? "connect timed out" : strerror(errno);
                close(fd);
                return -1;
            }
            break;
        }
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error != 0) {
            *err = strerror(so_error);
            close(fd);
            return -1;
        }
    }
    return fd;
}

void tcp_client(uint8_t id[NCCL_ID_BYTES], int rank, int num_processes, const char* server_ip, int port,
                double timeout_s, const std::string& tag, PeerChannel* keep) {
    const uint64_t job = id_exchange_job_nonce(tag);
    Address a = resolve(server_ip, port, rank);
    const double deadline = now_s() + timeout_s;
    double backoff = 0.05;
    int attempts = 0;
    std::string last_err = "none";
    for (;;) {
        if (remaining_ms(deadline) == 0) {
            fatal("rank %d: timed out after %.1f s reaching rank 0 at %s:%d (%d attempts, last error: %s); "
                  "is rank 0 running, and is -ps its address?", rank, timeout_s, server_ip, port, attempts,
                  last_err.c_str());
        }
        attempts++;
        int fd = connect_before(a, deadline, &last_err);
        if (fd >= 0) {
            TcpHello hello{TCP_MAGIC_HELLO, num_processes, rank, 0, job};
            TcpIdMsg msg{};
            Io io = send_all(fd, &hello, sizeof(hello), deadline);
            if (io == Io::ok) io = recv_all(fd, &msg, sizeof(msg), deadline);
            if (io == Io::ok) {
                if (msg.magic == TCP_MAGIC_REFUSE || (msg.magic == TCP_MAGIC_ID && msg.job != job)) {
                    fatal("rank %d: the rank 0 at %s:%d belongs to another job (its job nonce %016llx, this "
                          "rank's %016llx from run tag '%s'): give each job its own port (-pp) or run tag "
                          "($LLMC_RUN_TAG, or $SLURM_JOB_ID under Slurm)", rank, server_ip, port,
                          (unsigned long long)msg.job, (unsigned long long)job, tag.c_str());
                }
                if (msg.magic != TCP_MAGIC_ID || msg.id_len != NCCL_ID_BYTES) {
                    fatal("rank %d: %s:%d answered with a bad header (magic 0x%08x, length %u): not an llm.c "
                          "rank 0, or a different version", rank, server_ip, port, msg.magic, msg.id_len);
                }
                if (msg.num_processes != num_processes) {
                    fatal("rank %d: rank 0 at %s:%d runs with %d processes, this rank with %d (-pn must agree)",
                          rank, server_ip, port, msg.num_processes, num_processes);
                }
                uint8_t ack = TCP_ACK;
                io = send_all(fd, &ack, 1, deadline);
                if (io == Io::ok && keep != nullptr) keep->fds[0] = fd;
                else close(fd);
                if (io != Io::ok) {
                    fatal("rank %d: could not confirm the id to rank 0 at %s:%d (%s)", rank, server_ip, port,
                          io_str(io));
                }
                memcpy(id, msg.id, NCCL_ID_BYTES);
                return;
            }
            last_err = std::string("handshake: ") + io_str(io);
            close(fd);
        }
        sleep_s(std::min(backoff, std::max(0.0, deadline - now_s())));
        backoff = std::min(backoff * 2, 1.0);
    }
}

// ----------------------------------------------------------------------------
// Shared filesystem

constexpr uint32_t FS_MAGIC_ID = 0x4c4c4653;   // .sync
constexpr uint32_t FS_MAGIC_ACK = 0x4c4c4641;  // .ack.R
constexpr uint32_t FS_MAGIC_GO = 0x4c4c4647;   // .go

struct FsIdFile {
    uint32_t magic;
    uint32_t id_len;
    uint64_t nonce;
    int32_t num_processes;
    int32_t unused;
    uint8_t id[NCCL_ID_BYTES];
};
struct FsAckFile {
    uint32_t magic;
    int32_t rank;
    uint64_t nonce;
};
struct FsGoFile {
    uint32_t magic;
    uint32_t unused;
    uint64_t nonce;
};
static_assert(sizeof(FsIdFile) == 24 + NCCL_ID_BYTES && sizeof(FsAckFile) == 16 && sizeof(FsGoFile) == 16,
              "file layouts");

// Reads exactly sizeof(T) bytes from a file that must be exactly that long; false if absent or different.
template <class T>
bool read_small_file(const std::string& path, T* out) {
    FILE* fp = fopen_input(path.c_str());  // a FIFO there is refused, not waited on
    if (fp == nullptr) return false;
    bool ok = fread(out, sizeof(T), 1, fp) == 1 && fgetc(fp) == EOF;
    fclose(fp);
    return ok;
}

template <class T>
void write_small_file(const std::string& path, const T& v) {
    AtomicFile f = atomic_file_open(path);
    fwrite_check(&v, sizeof(T), 1, f.fp, f.tmp_path.c_str());
    atomic_file_commit(f);
}

void remove_if_present(const std::string& path, bool must_succeed) {
    if (remove(path.c_str()) != 0 && errno != ENOENT && must_succeed) {
        fatal("cannot remove '%s': %s", path.c_str(), strerror(errno));
    }
}

uint64_t fresh_nonce() {
    std::random_device rd;
    uint64_t n = ((uint64_t)rd() << 32) ^ rd();
    n ^= (uint64_t)std::chrono::system_clock::now().time_since_epoch().count() * 0x9E3779B97F4A7C15ull;
    n ^= (uint64_t)getpid() << 17;
    return n == 0 ? 1 : n;  // 0 means "nothing acked yet" on the client side
}

// Polling interval: starts short so local runs are quick, grows to spare a shared filesystem.
struct Backoff {
    double s = 0.005;
    void wait(double deadline) {
        sleep_s(std::min(s, std::max(0.0, deadline - now_s())));
        s = std::min(s * 1.5, 0.2);
    }
};

// Removes DIR/<name of base>.failed.* (peer notices of earlier runs of this tag).
void remove_old_notices(const char* dir, const std::string& base) {
    const std::string prefix = base.substr(base.rfind('/') + 1) + ".failed.";
    DIR* d = opendir(dir);
    if (d == nullptr) return;
    while (dirent* e = readdir(d)) {
        if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) remove_if_present(std::string(dir) + "/" + e->d_name, false);
    }
    closedir(d);
}

std::string fs_notice_path(const std::string& base, uint64_t nonce) {
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)nonce);
    return base + ".failed." + hex;
}

uint64_t fs_server(const uint8_t id[NCCL_ID_BYTES], int num_processes, const std::string& base, const char* dir,
                   double timeout_s) {
    const uint64_t nonce = fresh_nonce();
    remove_if_present(base + ".go", true);
    remove_old_notices(dir, base);
    FsIdFile f{FS_MAGIC_ID, (uint32_t)NCCL_ID_BYTES, nonce, num_processes, 0, {}};
    memcpy(f.id, id, NCCL_ID_BYTES);
    write_small_file(base + ".sync", f);

    const double deadline = now_s() + timeout_s;
    std::vector<char> acked(num_processes, 0);
    int num_acked = 0;
    Backoff backoff;
    for (;;) {
        for (int r = 1; r < num_processes; r++) {
            FsAckFile ack{};
            if (!acked[r] && read_small_file(base + ".ack." + std::to_string(r), &ack) &&
                ack.magic == FS_MAGIC_ACK && ack.nonce == nonce && ack.rank == r) {
                acked[r] = 1;
                num_acked++;
            }
        }
        if (num_acked == num_processes - 1) break;
        if (remaining_ms(deadline) == 0) {
            remove_if_present(base + ".sync", false);
            fatal("rank 0: timed out after %.1f s waiting in '%s' (tag files %s.*): %d of %d other ranks "
                  "acknowledged the id; missing ranks: %s", timeout_s, dir, base.c_str(), num_acked,
                  num_processes - 1, missing_ranks(acked).c_str());
        }
        backoff.wait(deadline);
    }
    // Order matters: .sync must be gone before .go appears (see the header).
    remove_if_present(base + ".sync", true);
    write_small_file(base + ".go", FsGoFile{FS_MAGIC_GO, 0, nonce});
    for (int r = 1; r < num_processes; r++) remove_if_present(base + ".ack." + std::to_string(r), false);
    return nonce;
}

uint64_t fs_client(uint8_t id[NCCL_ID_BYTES], int rank, int num_processes, const std::string& base, const char* dir,
                   double timeout_s) {
    const double deadline = now_s() + timeout_s;
    uint64_t acked_nonce = 0;
    uint8_t acked_id[NCCL_ID_BYTES];
    int foreign_num_processes = -1;
    Backoff backoff;
    for (;;) {
        FsIdFile f{};
        if (read_small_file(base + ".sync", &f) && f.magic == FS_MAGIC_ID && f.id_len == NCCL_ID_BYTES) {
            if (f.num_processes != num_processes) {
                foreign_num_processes = f.num_processes;
            } else if (f.nonce != acked_nonce) {
                write_small_file(base + ".ack." + std::to_string(rank), FsAckFile{FS_MAGIC_ACK, rank, f.nonce});
                acked_nonce = f.nonce;
                memcpy(acked_id, f.id, NCCL_ID_BYTES);
            }
        }
        FsGoFile go{};
        if (acked_nonce != 0 && read_small_file(base + ".go", &go) && go.magic == FS_MAGIC_GO &&
            go.nonce == acked_nonce) {
            memcpy(id, acked_id, NCCL_ID_BYTES);
            return acked_nonce;
        }
        if (remaining_ms(deadline) == 0) {
            if (acked_nonce == 0) {
                std::string extra;
                if (foreign_num_processes >= 0) {
                    extra = "; found one written for " + std::to_string(foreign_num_processes) +
                            " processes, this rank has " + std::to_string(num_processes) + " (-pn must agree)";
                }
                fatal("rank %d: timed out after %.1f s waiting for rank 0's id file %s.sync in '%s'%s; is rank 0 "
                      "running with the same -pf directory and run tag?", rank, timeout_s, base.c_str(), dir,
                      extra.c_str());
            }
            int peers = 0;
            for (int r = 1; r < num_processes; r++) {
                FsAckFile ack{};
                if (read_small_file(base + ".ack." + std::to_string(r), &ack) && ack.nonce == acked_nonce) peers++;
            }
            fatal("rank %d: timed out after %.1f s waiting for rank 0 to confirm the id in '%s': %d of %d other "
                  "ranks have acknowledged it (a rank is missing, or rank 0 stopped)", rank, timeout_s, dir,
                  peers, num_processes - 1);
        }
        backoff.wait(deadline);
    }
}

// ----------------------------------------------------------------------------
// Peer channel

constexpr uint32_t PEER_MAGIC = 0x4c4c5057;     // every notice on a kept tcp connection, and the fs notice file
constexpr int32_t PEER_FAILED = 1;              // the origin rank stops on an error; text says why
constexpr int32_t PEER_BYE = 2;                 // the sender ended normally: its connection closing is no failure
constexpr uint32_t PEER_TEXT_MAX = 4096;
constexpr double PEER_SEND_LIMIT_S = 2.0;       // a notice that cannot be sent in this time is dropped

struct PeerMsg {
    uint32_t magic;
    int32_t kind;
    int32_t origin;  // the rank the notice is about
    uint32_t len;    // bytes of text that follow
};
static_assert(sizeof(PeerMsg) == 16, "wire layout");

void channel_init(PeerChannel* ch, int rank, int num_processes) {
    ch->rank = rank;
    ch->num_processes = num_processes;
    ch->fds.assign(rank == 0 ? num_processes : 1, -1);
    ch->said_bye.assign(ch->fds.size(), 0);
    ch->fail_path.clear();
    ch->next_fs_check = 0.0;
}

Io peer_send(int fd, int32_t kind, int32_t origin, const std::string& text, double deadline) {
    const uint32_t len = (uint32_t)std::min<size_t>(text.size(), PEER_TEXT_MAX);
    PeerMsg m{PEER_MAGIC, kind, origin, len};
    Io io = send_all(fd, &m, sizeof(m), deadline);
    if (io == Io::ok && len > 0) io = send_all(fd, text.data(), len, deadline);
    return io;
}

// The rank at the other end of ch->fds[i].
int peer_of(const PeerChannel* ch, size_t i) { return ch->rank == 0 ? (int)i : 0; }

std::string ended_without_message(int rank) {
    return "rank " + std::to_string(rank) + " ended without a message (killed, crashed, or its node or network failed)";
}

// Sends a failure notice about `origin` to every open connection except skip (-1: none); holds send_mu.
void tcp_broadcast_failure(PeerChannel* ch, int origin, const std::string& text, int skip) {
    const double deadline = now_s() + PEER_SEND_LIMIT_S;
    for (size_t i = 0; i < ch->fds.size(); i++) {
        if (ch->fds[i] < 0 || (int)i == skip || ch->said_bye[i]) continue;
        peer_send(ch->fds[i], PEER_FAILED, origin, text, deadline);
    }
}

// Reads one notice from ch->fds[i] (readable). Returns true with *text when it reports a failure (or the
// connection ended without a goodbye); a goodbye closes the connection and returns false.
bool tcp_read_notice(PeerChannel* ch, size_t i, int* origin, std::string* text) {
    const int fd = ch->fds[i];
    const double deadline = now_s() + PEER_SEND_LIMIT_S;
    PeerMsg m{};
    Io io = recv_all(fd, &m, sizeof(m), deadline);
    if (io == Io::ok && m.magic == PEER_MAGIC && m.kind == PEER_BYE) {
        std::lock_guard<std::mutex> lock(ch->send_mu);
        ch->said_bye[i] = 1;
        close(fd);
        ch->fds[i] = -1;
        return false;
    }
    *origin = peer_of(ch, i);
    if (io == Io::ok && m.magic == PEER_MAGIC && m.kind == PEER_FAILED && m.len <= PEER_TEXT_MAX) {
        std::string t(m.len, '\0');
        if (m.len == 0 || recv_all(fd, &t[0], m.len, deadline) == Io::ok) {
            *origin = m.origin;
            *text = t;
            return true;
        }
    }
    *text = ended_without_message(*origin);
    std::lock_guard<std::mutex> lock(ch->send_mu);
    close(fd);
    ch->fds[i] = -1;
    return true;
}

bool tcp_poll(PeerChannel* ch, int timeout_ms, std::string* message) {
    std::vector<pollfd> pfds;
    std::vector<size_t> index;
    {
        std::lock_guard<std::mutex> lock(ch->send_mu);
        for (size_t i = 0; i < ch->fds.size(); i++) {
            if (ch->fds[i] < 0) continue;
            pfds.push_back({ch->fds[i], POLLIN, 0});
            index.push_back(i);
        }
    }
    if (pfds.empty()) {
        sleep_s(timeout_ms / 1000.0);
        return false;
    }
    int r = poll(pfds.data(), pfds.size(), timeout_ms);
    if (r <= 0) return false;  // timeout, or EINTR: the caller polls again
    for (size_t k = 0; k < pfds.size(); k++) {
        if (pfds[k].revents == 0) continue;
        int origin = -1;
        std::string text;
        if (!tcp_read_notice(ch, index[k], &origin, &text)) continue;
        if (ch->rank == 0) {  // pass it on: rank 0 is the only link between the others
            std::lock_guard<std::mutex> lock(ch->send_mu);
            tcp_broadcast_failure(ch, origin, text, (int)index[k]);
        }
        *message = text;
        return true;
    }
    return false;
}

bool fs_poll(PeerChannel* ch, int timeout_ms, std::string* message) {
    sleep_s(timeout_ms / 1000.0);
    if (ch->fail_path.empty() || now_s() < ch->next_fs_check) return false;
    ch->next_fs_check = now_s() + 1.0;
    FILE* fp = fopen(ch->fail_path.c_str(), "rb");
    if (fp == nullptr) return false;
    PeerMsg m{};
    std::string text;
    bool ok = fread(&m, sizeof(m), 1, fp) == 1 && m.magic == PEER_MAGIC && m.len <= PEER_TEXT_MAX;
    if (ok) {
        text.assign(m.len, '\0');
        ok = m.len == 0 || fread(&text[0], 1, m.len, fp) == m.len;
    }
    fclose(fp);
    *message = ok ? text : "a rank reported a failure in '" + ch->fail_path + "' (unreadable notice)";
    return true;
}

// Never fatal(): this runs while the process is already stopping on an error.
void fs_notify(PeerChannel* ch, const std::string& text) {
    const std::string tmp = ch->fail_path + ".tmp." + std::to_string(ch->rank);
    FILE* fp = fopen(tmp.c_str(), "wb");
    if (fp == nullptr) return;
    const uint32_t len = (uint32_t)std::min<size_t>(text.size(), PEER_TEXT_MAX);
    PeerMsg m{PEER_MAGIC, PEER_FAILED, ch->rank, len};
    bool ok = fwrite(&m, sizeof(m), 1, fp) == 1 && (len == 0 || fwrite(text.data(), 1, len, fp) == len);
    ok = fflush(fp) == 0 && ok;
    fsync(fileno(fp));
    fclose(fp);
    if (!ok || rename(tmp.c_str(), ch->fail_path.c_str()) != 0) remove(tmp.c_str());
}

// ----------------------------------------------------------------------------
// Peer watch (one per process)

struct PeerWatch {
    PeerChannel* ch = nullptr;
    int rank = 0;
    std::function<void()> on_abort;
    std::function<std::string()> check;
    std::thread thread;
    std::atomic<bool> stop{false};
};
// Set by peer_watch_start, cleared by peer_watch_stop; never freed (a stopping thread may still hold it).
std::atomic<PeerWatch*> g_watch{nullptr};
std::atomic<bool> g_stopping{false};     // a thread is ending the process

[[noreturn]] void park_forever() {
    for (;;) sleep_s(1000.0);
}

// Ends the process with exit code 1: line to stderr (unless empty), the peers told `notice` (unless
// empty), the watch's on_abort bounded by PEER_WATCH_ABORT_GRACE_S. A second caller waits for the first.
[[noreturn]] void stop_process(PeerWatch* w, const std::string& line, const std::string& notice) {
    if (g_stopping.exchange(true)) park_forever();
    if (!line.empty()) fprintf(stderr, "%s\n", line.c_str());
    fflush(stdout);
    fflush(stderr);
    if (w != nullptr && w->ch != nullptr && !notice.empty()) peer_channel_notify(w->ch, notice);
    if (w != nullptr && w->on_abort) {
        std::thread([] {  // the abort can block on a dead peer: the process ends anyway
            sleep_s(PEER_WATCH_ABORT_GRACE_S);
            fprintf(stderr, "error: the NCCL abort did not return within %.0f s; exiting without it\n",
                    PEER_WATCH_ABORT_GRACE_S);
            _exit(1);
        }).detach();
        w->on_abort();
    }
    fflush(stderr);
    _exit(1);
}

void on_fatal(const char* message) {
    PeerWatch* w = g_watch.load();
    if (w == nullptr) return;
    stop_process(w, "", "rank " + std::to_string(w->rank) + " failed: " + message);
}

void watch_loop(PeerWatch* w) {
    double next_check = now_s() + 1.0;
    while (!w->stop.load()) {
        std::string msg;
        if (w->ch != nullptr) {
            if (peer_channel_poll(w->ch, 200, &msg)) {
                stop_process(w, PEER_FAILURE_PREFIX + std::string("rank ") + std::to_string(w->rank) + " stops because " + msg, "");
            }
        } else {
            sleep_s(0.2);
        }
        if (w->check && now_s() >= next_check) {
            next_check = now_s() + 1.0;
            const std::string problem = w->check();
            if (!problem.empty()) {
                const std::string notice = "rank " + std::to_string(w->rank) + ": " + problem;
                stop_process(w, PEER_FAILURE_PREFIX + notice, notice);
            }
        }
    }
}

}  // namespace

// ----------------------------------------------------------------------------

void id_exchange_tcp(uint8_t id[NCCL_ID_BYTES], int rank, int num_processes, const char* server_ip, int port,
                     double timeout_s, const char* run_tag, PeerChannel* keep) {
    check_common_args(rank, num_processes, timeout_s, "NCCL id exchange (tcp)");
    if (keep != nullptr) channel_init(keep, rank, num_processes);
    if (num_processes == 1) return;
    const std::string tag = id_exchange_fs_tag(run_tag);
    if (rank == 0) {
        tcp_server(id, num_processes, server_ip, port, timeout_s, tag, keep);
    } else {
        tcp_client(id, rank, num_processes, server_ip, port, timeout_s, tag, keep);
    }
}

uint64_t id_exchange_job_nonce(const std::string& tag) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
    for (unsigned char c : tag) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

std::string id_exchange_fs_tag(const char* run_tag) {
    std::string tag, source = "the run tag";
    if (run_tag != nullptr && run_tag[0] != '\0') {
        tag = run_tag;
    } else if (const char* t = getenv("LLMC_RUN_TAG"); t != nullptr && t[0] != '\0') {
        tag = t;
        source = "$LLMC_RUN_TAG";
    } else if (const char* job = getenv("SLURM_JOB_ID"); job != nullptr && job[0] != '\0') {
        tag = job;
        if (const char* step = getenv("SLURM_STEP_ID"); step != nullptr && step[0] != '\0') {
            tag += std::string(".") + step;
        }
        if (const char* rc = getenv("SLURM_RESTART_COUNT"); rc != nullptr && rc[0] != '\0') {
            tag += std::string(".r") + rc;
        }
        source = "$SLURM_JOB_ID/$SLURM_STEP_ID/$SLURM_RESTART_COUNT";
    } else {
        tag = "default";
    }
    bool ok = !tag.empty() && tag.size() <= 100;
    for (char c : tag) ok = ok && (isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-');
    if (!ok) fatal("%s '%s' must be 1-100 characters from [A-Za-z0-9._-]", source.c_str(), tag.c_str());
    return tag;
}

void id_exchange_fs(uint8_t id[NCCL_ID_BYTES], int rank, int num_processes, const char* dir, double timeout_s,
                    const char* run_tag, PeerChannel* keep) {
    check_common_args(rank, num_processes, timeout_s, "NCCL id exchange (fs)");
    if (keep != nullptr) channel_init(keep, rank, num_processes);
    if (num_processes == 1) return;
    if (dir == nullptr || dir[0] == '\0') {
        fatal("rank %d: NCCL id exchange over a shared filesystem needs a directory (-pf)", rank);
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        fatal("rank %d: shared directory '%s' (-pf) is not reachable on this node: %s", rank, dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) fatal("rank %d: '%s' (-pf) is not a directory", rank, dir);
    std::string base = std::string(dir) + "/ncclUniqueId." + id_exchange_fs_tag(run_tag);
    const uint64_t nonce = rank == 0 ? fs_server(id, num_processes, base, dir, timeout_s)
                                     : fs_client(id, rank, num_processes, base, dir, timeout_s);
    if (keep != nullptr) keep->fail_path = fs_notice_path(base, nonce);
}

// ----------------------------------------------------------------------------
// Peer channel and watch

void peer_channel_notify(PeerChannel* ch, const std::string& message) {
    if (ch == nullptr || ch->num_processes < 2) return;
    std::lock_guard<std::mutex> lock(ch->send_mu);
    if (!ch->fail_path.empty()) fs_notify(ch, message);
    else tcp_broadcast_failure(ch, ch->rank, message, -1);
}

bool peer_channel_poll(PeerChannel* ch, int timeout_ms, std::string* message) {
    if (ch->num_processes < 2) {
        sleep_s(timeout_ms / 1000.0);
        return false;
    }
    return ch->fail_path.empty() ? tcp_poll(ch, timeout_ms, message) : fs_poll(ch, timeout_ms, message);
}

void peer_channel_close(PeerChannel* ch) {
    std::lock_guard<std::mutex> lock(ch->send_mu);
    const double deadline = now_s() + PEER_SEND_LIMIT_S;
    for (size_t i = 0; i < ch->fds.size(); i++) {
        if (ch->fds[i] < 0) continue;
        peer_send(ch->fds[i], PEER_BYE, ch->rank, "", deadline);
        close(ch->fds[i]);
        ch->fds[i] = -1;
    }
}

void peer_watch_start(PeerChannel* ch, int rank, std::function<void()> on_abort, std::function<std::string()> check) {
    if (g_watch.load() != nullptr) fatal("internal: peer_watch_start called twice");
    PeerWatch* w = new PeerWatch();
    w->ch = ch;
    w->rank = rank;
    w->on_abort = std::move(on_abort);
    w->check = std::move(check);
    g_watch = w;
    fatal_set_hook(on_fatal);
    if (w->ch != nullptr || w->check) w->thread = std::thread(watch_loop, w);
}

void peer_watch_tell_peers(const std::string& message) {
    PeerWatch* w = g_watch.load();
    if (w != nullptr && w->ch != nullptr) peer_channel_notify(w->ch, "rank " + std::to_string(w->rank) + ": " + message);
}

void peer_watch_stop() {
    PeerWatch* w = g_watch.load();
    if (w == nullptr) return;
    fatal_set_hook(nullptr);
    w->stop = true;
    if (w->thread.joinable()) w->thread.join();
    g_watch = nullptr;
}
