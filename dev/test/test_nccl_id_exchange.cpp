// Tests for llmc/nccl_id_exchange: several local processes (fork) hand a random 128-byte id from rank 0 to
// the others over TCP on 127.0.0.1 and over a temp directory; stale files of earlier runs are not used;
// missing peers and bad peers end in a clear fatal() message. Timeouts are 1-3 s so the suite is quick.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "llmc/nccl_id_exchange.h"
#include "llmc/utils.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

using Id = std::vector<uint8_t>;

Id random_id() {
    std::random_device rd;
    Id id(NCCL_ID_BYTES);
    for (auto& b : id) b = (uint8_t)rd();
    return id;
}

// A port that was free a moment ago (bind to port 0, read it back, release it).
int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(bind(fd, (sockaddr*)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd, (sockaddr*)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

struct Child {
    pid_t pid;
    std::string err_path;
};
struct Result {
    int exit_code;  // -1 when killed by a signal
    std::string err;
};

// Runs fn in a child process (stderr to a file); its return value is the exit code.
Child spawn(const std::string& dir, const std::string& name, std::function<int()> fn) {
    std::string err_path = dir + "/stderr." + name;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        close(fd);
        int rc = fn();
        fflush(stderr);
        _exit(rc);
    }
    EXPECT_GT(pid, 0);
    return {pid, err_path};
}

// Waits for the child (killing it after limit_s so a hang fails instead of blocking the suite).
Result join(const Child& c, double limit_s = 20) {
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    for (;;) {
        pid_t r = waitpid(c.pid, &status, WNOHANG);
        if (r == c.pid) break;
        if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(limit_s)) {
            kill(c.pid, SIGKILL);
            waitpid(c.pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(c.err_path)};
}

// Exit codes of the rank functions: 0 = got the expected id, 2 = got some other id; fatal() gives 1.
int tcp_rank(const Id& expected, int rank, int n, int port, double timeout_s, const char* tag = "job") {
    Id id(NCCL_ID_BYTES, 0);
    if (rank == 0) id = expected;
    id_exchange_tcp(id.data(), rank, n, "127.0.0.1", port, timeout_s, tag);
    return id == expected ? 0 : 2;
}

int fs_rank(const Id& expected, int rank, int n, const std::string& dir, double timeout_s, const char* tag) {
    Id id(NCCL_ID_BYTES, 0);
    if (rank == 0) id = expected;
    id_exchange_fs(id.data(), rank, n, dir.c_str(), timeout_s, tag);
    return id == expected ? 0 : 2;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Joins every child; each must exit 0 (a failure names the child's stderr file, then note and its stderr).
void expect_all_exit_0(const std::vector<Child>& kids, const std::string& note = "") {
    for (const Child& k : kids) {
        Result res = join(k);
        EXPECT_EQ(res.exit_code, 0) << k.err_path << ": " << note << res.err;
    }
}

class IdExchange : public ::testing::Test {
protected:
    void SetUp() override {
        fs::create_directory(logs);
        fs::create_directory(shared);
    }

    std::vector<std::string> shared_files() const {
        std::vector<std::string> names;
        for (auto& e : fs::directory_iterator(shared)) names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }

    // Starts ranks first..last-1 of an n-process TCP exchange on port, each expecting id (children r<rank>).
    void spawn_tcp_ranks(std::vector<Child>& kids, const Id& id, int first, int last, int n, int port) {
        for (int r = first; r < last; r++) {
            kids.push_back(spawn(logs, "r" + std::to_string(r), [&id, r, n, port] { return tcp_rank(id, r, n, port, 3); }));
        }
    }

    TempDir dir{"test_nccl_id"};  // removed with the fixture, after TearDown
    std::string tmp = dir.path;
    std::string logs = tmp + "/logs";  // child stderr files, kept out of the exchange directory
    std::string shared = tmp + "/shared";
};

// ----------------------------------------------------------------------------
// TCP

TEST_F(IdExchange, TcpFourRanksGetRank0sId) {
    const int n = 4, port = free_port();
    Id id = random_id();
    std::vector<Child> kids;
    spawn_tcp_ranks(kids, id, 0, n, n, port);
    expect_all_exit_0(kids);
}

TEST_F(IdExchange, TcpClientsRetryUntilRank0Listens) {
    const int n = 3, port = free_port();
    Id id = random_id();
    std::vector<Child> kids;
    spawn_tcp_ranks(kids, id, 1, n, n, port);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // clients see "connection refused" first
    spawn_tcp_ranks(kids, id, 0, 1, n, port);
    expect_all_exit_0(kids);
}

TEST_F(IdExchange, TcpRank0TimesOutNamingTheMissingRank) {
    const int n = 3, port = free_port();
    Id id = random_id();
    Child r0 = spawn(logs, "r0", [&] { return tcp_rank(id, 0, n, port, 1.0); });
    Child r1 = spawn(logs, "r1", [&] { return tcp_rank(id, 1, n, port, 3); });
    Result res0 = join(r0), res1 = join(r1);
    EXPECT_EQ(res0.exit_code, 1);
    EXPECT_TRUE(contains(res0.err, "rank 0: timed out")) << res0.err;
    EXPECT_TRUE(contains(res0.err, "127.0.0.1:" + std::to_string(port))) << res0.err;
    EXPECT_TRUE(contains(res0.err, "1 of 2 connected")) << res0.err;
    EXPECT_TRUE(contains(res0.err, "missing ranks: 2")) << res0.err;
    EXPECT_EQ(res1.exit_code, 0) << res1.err;  // rank 1 arrived and got the id
}

TEST_F(IdExchange, TcpClientTimesOutWithoutRank0) {
    const int port = free_port();
    Id id = random_id();
    auto t0 = std::chrono::steady_clock::now();
    Result res = join(spawn(logs, "r1", [&] { return tcp_rank(id, 1, 2, port, 1.0); }));
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(res.exit_code, 1);
    EXPECT_TRUE(contains(res.err, "rank 1: timed out")) << res.err;
    EXPECT_TRUE(contains(res.err, "127.0.0.1:" + std::to_string(port))) << res.err;
    EXPECT_LT(took, 5.0);
}

TEST_F(IdExchange, TcpDisagreeingProcessCountsAreReported) {
    const int port = free_port();
    Id id = random_id();
    Child r0 = spawn(logs, "r0", [&] { return tcp_rank(id, 0, 2, port, 3); });
    Child r1 = spawn(logs, "r1", [&] { return tcp_rank(id, 1, 3, port, 1.0); });
    Result res0 = join(r0), res1 = join(r1);
    EXPECT_EQ(res0.exit_code, 1);
    EXPECT_TRUE(contains(res0.err, "-pn must agree")) << res0.err;
    EXPECT_EQ(res1.exit_code, 1);
}

TEST_F(IdExchange, TcpDuplicateRankIsReported) {
    const int n = 3, port = free_port();
    Id id = random_id();
    Child r0 = spawn(logs, "r0", [&] { return tcp_rank(id, 0, n, port, 3); });
    Child a = spawn(logs, "a", [&] { return tcp_rank(id, 1, n, port, 1.0); });
    Child b = spawn(logs, "b", [&] { return tcp_rank(id, 1, n, port, 1.0); });
    Result res0 = join(r0);
    join(a);
    join(b);
    EXPECT_EQ(res0.exit_code, 1);
    EXPECT_TRUE(contains(res0.err, "rank 1 connected twice")) << res0.err;
}

// A hand-made rank 0 that speaks the wire format (see nccl_id_exchange.cpp) in odd ways.
class FakeServer {
public:
    explicit FakeServer(int port) {
        lfd_ = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        EXPECT_EQ(bind(lfd_, (sockaddr*)&a, sizeof(a)), 0);
        listen(lfd_, 4);
    }
    ~FakeServer() { close(lfd_); }
    // Accepts one client, reads its 24-byte hello, sends reply in pieces of `chunk` bytes.
    bool serve_once(const std::vector<uint8_t>& reply, size_t chunk) {
        pollfd pfd{lfd_, POLLIN, 0};
        if (poll(&pfd, 1, 5000) != 1) return false;
        int fd = accept(lfd_, nullptr, nullptr);
        uint8_t hello[24];
        size_t got = 0;
        while (got < sizeof(hello)) {
            ssize_t r = recv(fd, hello + got, sizeof(hello) - got, 0);
            if (r <= 0) break;
            got += r;
        }
        for (size_t i = 0; i < reply.size(); i += chunk) {
            send(fd, reply.data() + i, std::min(chunk, reply.size() - i), MSG_NOSIGNAL);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        uint8_t ack = 0;
        recv(fd, &ack, 1, 0);  // wait for the client to finish
        close(fd);
        return got == sizeof(hello);
    }

private:
    int lfd_;
};

constexpr uint32_t WIRE_MAGIC_ID = 0x4c4c4932;

std::vector<uint8_t> wire_reply(uint32_t magic, uint32_t len, int32_t n, const Id& id,
                                uint64_t job = id_exchange_job_nonce("job")) {
    std::vector<uint8_t> m(24 + NCCL_ID_BYTES, 0);
    memcpy(m.data(), &magic, 4);
    memcpy(m.data() + 4, &len, 4);
    memcpy(m.data() + 8, &n, 4);
    memcpy(m.data() + 16, &job, 8);
    memcpy(m.data() + 24, id.data(), NCCL_ID_BYTES);
    return m;
}

// Rank 1 of 2 over TCP (tag "job") against a FakeServer rank 0 that answers with wire_reply(magic, ...,
// job) carrying a fresh id, sent in pieces of `chunk` bytes.
struct FakeRank0Run {
    int port;     // where the fake rank 0 listened
    bool served;  // it got rank 1's whole hello
    Result res;   // how rank 1 ended
};
FakeRank0Run rank1_against_fake_rank0(const std::string& logs, uint32_t magic, size_t chunk,
                                      uint64_t job = id_exchange_job_nonce("job")) {
    const int port = free_port();
    Id id = random_id();
    FakeServer server(port);
    Child c = spawn(logs, "r1", [&] { return tcp_rank(id, 1, 2, port, 3); });
    const bool served = server.serve_once(wire_reply(magic, NCCL_ID_BYTES, 2, id, job), chunk);
    return {port, served, join(c)};
}

TEST_F(IdExchange, TcpClientReassemblesAReplySentByteByByte) {
    const FakeRank0Run run = rank1_against_fake_rank0(logs, WIRE_MAGIC_ID, 1);
    EXPECT_TRUE(run.served);
    EXPECT_EQ(run.res.exit_code, 0) << run.res.err;
}

TEST_F(IdExchange, TcpClientRejectsABadHeader) {
    const FakeRank0Run run = rank1_against_fake_rank0(logs, 0x12345678, 64);
    EXPECT_EQ(run.res.exit_code, 1);
    EXPECT_TRUE(contains(run.res.err, "bad header")) << run.res.err;
    EXPECT_TRUE(contains(run.res.err, "127.0.0.1:" + std::to_string(run.port))) << run.res.err;
}

TEST_F(IdExchange, TcpRank0RefusesAnotherJobsRankAndWaitsForItsOwn) {
    const int port = free_port();
    Id id = random_id();
    Child r0 = spawn(logs, "r0", [&] { return tcp_rank(id, 0, 2, port, 3, "jobA"); });
    Result foreign = join(spawn(logs, "b1", [&] { return tcp_rank(id, 1, 2, port, 3, "jobB"); }));
    Child own = spawn(logs, "a1", [&] { return tcp_rank(id, 1, 2, port, 3, "jobA"); });
    Result res0 = join(r0), res_own = join(own);
    EXPECT_EQ(foreign.exit_code, 1);
    EXPECT_TRUE(contains(foreign.err, "belongs to another job")) << foreign.err;
    EXPECT_TRUE(contains(foreign.err, "run tag 'jobB'")) << foreign.err;
    EXPECT_EQ(res0.exit_code, 0) << res0.err;
    EXPECT_TRUE(contains(res0.err, "refusing rank 1")) << res0.err;
    EXPECT_EQ(res_own.exit_code, 0) << res_own.err;
}

TEST_F(IdExchange, TcpTagComesFromTheEnvironmentWhenNotGiven) {
    const int port = free_port();
    Id id = random_id();
    setenv("LLMC_RUN_TAG", "envjob", 1);
    Child r0 = spawn(logs, "r0", [&] { return tcp_rank(id, 0, 2, port, 3, nullptr); });
    Result foreign = join(spawn(logs, "b1", [&] { return tcp_rank(id, 1, 2, port, 3, "other"); }));
    Result own = join(spawn(logs, "a1", [&] { return tcp_rank(id, 1, 2, port, 3, "envjob"); }));
    unsetenv("LLMC_RUN_TAG");
    Result res0 = join(r0);
    EXPECT_EQ(foreign.exit_code, 1) << foreign.err;
    EXPECT_EQ(own.exit_code, 0) << own.err;
    EXPECT_EQ(res0.exit_code, 0) << res0.err;
}

TEST_F(IdExchange, TcpClientRejectsAReplyOfAnotherJob) {
    const FakeRank0Run run = rank1_against_fake_rank0(logs, WIRE_MAGIC_ID, 64, id_exchange_job_nonce("other"));
    EXPECT_EQ(run.res.exit_code, 1);
    EXPECT_TRUE(contains(run.res.err, "belongs to another job")) << run.res.err;
}

TEST_F(IdExchange, JobNoncesOfDifferentTagsDiffer) {
    EXPECT_NE(id_exchange_job_nonce("123"), id_exchange_job_nonce("124"));
    EXPECT_NE(id_exchange_job_nonce("123.0"), id_exchange_job_nonce("123.0.r1"));
    EXPECT_EQ(id_exchange_job_nonce("abc"), id_exchange_job_nonce(std::string("abc")));
}

// ----------------------------------------------------------------------------
// Shared filesystem

TEST_F(IdExchange, FsFourRanksGetRank0sIdAndLeaveOnlyTheGoFile) {
    const int n = 4;
    Id id = random_id();
    std::vector<Child> kids;
    for (int r = 0; r < n; r++) {
        kids.push_back(
            spawn(logs, "r" + std::to_string(r), [&, r] { return fs_rank(id, r, n, shared, 3, "run1"); }));
    }
    expect_all_exit_0(kids);
    EXPECT_EQ(shared_files(), std::vector<std::string>{"ncclUniqueId.run1.go"});
}

TEST_F(IdExchange, FsStaleFilesOfEarlierRunsAreNotUsed) {
    // Earlier run A completed (leaves its .go); earlier run B's rank 0 was killed after writing its .sync.
    Id id_a = random_id(), id_b = random_id(), id_new = random_id();
    Child a0 = spawn(logs, "a0", [&] { return fs_rank(id_a, 0, 2, shared, 3, "job"); });
    Child a1 = spawn(logs, "a1", [&] { return fs_rank(id_a, 1, 2, shared, 3, "job"); });
    ASSERT_EQ(join(a0).exit_code, 0);
    ASSERT_EQ(join(a1).exit_code, 0);
    Child b0 = spawn(logs, "b0", [&] { return fs_rank(id_b, 0, 4, shared, 30, "job"); });
    const fs::path sync = fs::path(shared) / "ncclUniqueId.job.sync";
    for (int i = 0; i < 400 && !fs::exists(sync); i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(fs::exists(sync));
    kill(b0.pid, SIGKILL);
    join(b0);
    ASSERT_TRUE(fs::exists(sync));  // the stale id file stays behind

    // The new run's clients start first and see B's stale file before the new rank 0 exists.
    const int n = 4;
    std::vector<Child> kids;
    for (int r = 1; r < n; r++) {
        kids.push_back(spawn(logs, "r" + std::to_string(r), [&, r] { return fs_rank(id_new, r, n, shared, 3, "job"); }));
    }
    const fs::path ack1 = fs::path(shared) / "ncclUniqueId.job.ack.1";
    for (int i = 0; i < 400 && !fs::exists(ack1); i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(fs::exists(ack1)) << "clients should have acknowledged the stale file";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kids.push_back(spawn(logs, "r0", [&] { return fs_rank(id_new, 0, n, shared, 3, "job"); }));
    expect_all_exit_0(kids, "exit 2 means a stale id was used; ");
    EXPECT_EQ(shared_files(), std::vector<std::string>{"ncclUniqueId.job.go"});
}

TEST_F(IdExchange, FsRunTagsKeepConcurrentRunsApart) {
    Id id_x = random_id(), id_y = random_id();
    std::vector<Child> kids;
    for (int r = 0; r < 3; r++) {
        kids.push_back(spawn(logs, "x" + std::to_string(r), [&, r] { return fs_rank(id_x, r, 3, shared, 3, "x"); }));
        kids.push_back(spawn(logs, "y" + std::to_string(r), [&, r] { return fs_rank(id_y, r, 3, shared, 3, "y"); }));
    }
    expect_all_exit_0(kids);
}

TEST_F(IdExchange, FsClientTimesOutWithoutRank0) {
    Id id = random_id();
    Result res = join(spawn(logs, "r1", [&] { return fs_rank(id, 1, 2, shared, 1.0, "t"); }));
    EXPECT_EQ(res.exit_code, 1);
    EXPECT_TRUE(contains(res.err, "rank 1: timed out")) << res.err;
    EXPECT_TRUE(contains(res.err, "ncclUniqueId.t.sync")) << res.err;
    EXPECT_TRUE(contains(res.err, shared)) << res.err;
}

TEST_F(IdExchange, FsMissingPeerTimesOutOnBothSides) {
    const int n = 3;
    Id id = random_id();
    Child r0 = spawn(logs, "r0", [&] { return fs_rank(id, 0, n, shared, 1.0, "t"); });
    Child r1 = spawn(logs, "r1", [&] { return fs_rank(id, 1, n, shared, 1.5, "t"); });
    Result res0 = join(r0), res1 = join(r1);
    EXPECT_EQ(res0.exit_code, 1);
    EXPECT_TRUE(contains(res0.err, "rank 0: timed out")) << res0.err;
    EXPECT_TRUE(contains(res0.err, "1 of 2 other ranks acknowledged")) << res0.err;
    EXPECT_TRUE(contains(res0.err, "missing ranks: 2")) << res0.err;
    EXPECT_EQ(res1.exit_code, 1);
    EXPECT_TRUE(contains(res1.err, "waiting for rank 0 to confirm")) << res1.err;
    EXPECT_TRUE(contains(res1.err, "1 of 2 other ranks have acknowledged")) << res1.err;
    EXPECT_FALSE(fs::exists(fs::path(shared) / "ncclUniqueId.t.sync"));  // rank 0 removed its id file
}

TEST_F(IdExchange, FsDisagreeingProcessCountsAreNamedInTheTimeout) {
    Id id = random_id();
    Child r0 = spawn(logs, "r0", [&] { return fs_rank(id, 0, 2, shared, 1.0, "t"); });
    Child r1 = spawn(logs, "r1", [&] { return fs_rank(id, 1, 3, shared, 1.0, "t"); });
    Result res0 = join(r0), res1 = join(r1);
    EXPECT_EQ(res0.exit_code, 1);
    EXPECT_EQ(res1.exit_code, 1);
    EXPECT_TRUE(contains(res1.err, "written for 2 processes")) << res1.err;
}

// ----------------------------------------------------------------------------
// Arguments and tags

TEST_F(IdExchange, BadArgumentsAreFatal) {
    Id id = random_id();
    Result r = join(spawn(logs, "a", [&] { return tcp_rank(id, 2, 2, free_port(), 1); }));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "-pr")) << r.err;
    r = join(spawn(logs, "b", [&] { return fs_rank(id, 1, 2, tmp + "/no_such_dir", 1, "t"); }));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "no_such_dir")) << r.err;
    r = join(spawn(logs, "c", [&] { return fs_rank(id, 1, 2, shared, 1, "../evil"); }));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "[A-Za-z0-9._-]")) << r.err;
    r = join(spawn(logs, "d", [&] {
        Id x(NCCL_ID_BYTES);
        id_exchange_tcp(x.data(), 1, 2, "", 12345, 1, nullptr);
        return 0;
    }));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "-ps")) << r.err;
}

TEST_F(IdExchange, SingleProcessReturnsAtOnce) {
    Id id = random_id(), copy = id;
    id_exchange_tcp(id.data(), 0, 1, "", 0, 1, nullptr);        // no address needed, nothing opened
    id_exchange_fs(id.data(), 0, 1, "", 1, nullptr);
    EXPECT_EQ(id, copy);
}

TEST_F(IdExchange, TagComesFromArgumentThenEnvironment) {
    Result r = join(spawn(logs, "env", [&] {
        unsetenv("LLMC_RUN_TAG");
        unsetenv("SLURM_JOB_ID");
        unsetenv("SLURM_STEP_ID");
        unsetenv("SLURM_RESTART_COUNT");
        if (id_exchange_fs_tag(nullptr) != "default") return 10;
        setenv("SLURM_JOB_ID", "4242", 1);
        setenv("SLURM_STEP_ID", "0", 1);
        if (id_exchange_fs_tag("") != "4242.0") return 11;
        setenv("SLURM_RESTART_COUNT", "2", 1);
        if (id_exchange_fs_tag(nullptr) != "4242.0.r2") return 12;
        setenv("LLMC_RUN_TAG", "mine", 1);
        if (id_exchange_fs_tag(nullptr) != "mine") return 13;
        if (id_exchange_fs_tag("explicit") != "explicit") return 14;
        return 0;
    }));
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

// ----------------------------------------------------------------------------
// Peer channel and watch: a rank that stops on an error after the exchange (the NCCL communicator
// would exist by then) makes every other rank stop within seconds, naming it; a killed rank is noticed
// over TCP; a normal end is no failure. on_abort stands in for the communicator's abort.

enum class Then { fail, die, finish, wait, check_fails };

// A line beginning "error: ": what scripts/mpi_launch.sh error_recurs takes for an error a restart repeats.
bool has_error_line(const std::string& log) { return log.rfind("error: ", 0) == 0 || contains(log, "\nerror: "); }

// One rank: exchange (keeping the channel), start the watch, then `then` after delay_s.
int peer_rank(bool tcp, int rank, int n, int port, const std::string& dir, Then then, double delay_s) {
    static PeerChannel ch;  // outlives the watch thread (the process ends through _exit)
    Id id(NCCL_ID_BYTES, 0);
    if (tcp) id_exchange_tcp(id.data(), rank, n, "127.0.0.1", port, 5, "peers", &ch);
    else id_exchange_fs(id.data(), rank, n, dir.c_str(), 5, "peers", &ch);
    const auto t0 = std::chrono::steady_clock::now();
    peer_watch_start(&ch, rank, [rank] { fprintf(stderr, "abort ran on rank %d\n", rank); },
                     [then, t0, delay_s]() -> std::string {
                         const bool due = std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(delay_s);
                         return then == Then::check_fails && due ? "NCCL reports an error (test)" : "";
                     });
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    switch (then) {
        case Then::fail: fatal("disk full on rank %d", rank);
        case Then::die: raise(SIGKILL); return 9;
        case Then::finish:
            peer_watch_stop();
            peer_channel_close(&ch);
            return 0;
        case Then::wait:
        case Then::check_fails:
            std::this_thread::sleep_for(std::chrono::seconds(30));  // a collective that never returns
            return 0;
    }
    return 8;
}

struct PeerRun {
    std::vector<Result> results;
    double seconds;
};

// Runs n ranks (rank r does thens[r] after delays[r]) and joins them all.
PeerRun run_peers(const std::string& logs, const std::string& dir, bool tcp, const std::vector<Then>& thens,
                  const std::vector<double>& delays) {
    const int n = (int)thens.size(), port = free_port();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Child> kids;
    for (int r = 0; r < n; r++) {
        kids.push_back(spawn(logs, "p" + std::to_string(r), [=] { return peer_rank(tcp, r, n, port, dir, thens[r], delays[r]); }));
    }
    PeerRun out;
    for (const Child& k : kids) out.results.push_back(join(k, 25));
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

TEST_F(IdExchange, FatalRunsTheHookWithTheMessageBeforeExiting) {
    static std::string got;
    EXPECT_EXIT(
        {
            fatal_set_hook([](const char* m) {
                fprintf(stderr, "hook got [%s]\n", m);
                _exit(3);
            });
            fatal("cannot open '%s'", "main.log");
        },
        ::testing::ExitedWithCode(3), "error: cannot open 'main.log'\nhook got \\[cannot open 'main.log'\\]");
    // without a hook: exit code 1, as always
    EXPECT_EXIT(fatal("plain"), ::testing::ExitedWithCode(1), "error: plain");
}

TEST_F(IdExchange, PeerTcpOneRankFailsEveryOtherStopsWithItsMessage) {
    for (int failing : {2, 0}) {  // a client (its notice goes through rank 0), then rank 0 itself
        SCOPED_TRACE("failing rank " + std::to_string(failing));
        std::vector<Then> thens(3, Then::wait);
        thens[failing] = Then::fail;
        PeerRun run = run_peers(logs, shared, true, thens, {0.3, 0.3, 0.3});
        EXPECT_LT(run.seconds, 10.0);  // not the 30 s the waiting ranks would otherwise sleep
        for (int r = 0; r < 3; r++) {
            const Result& res = run.results[r];
            EXPECT_EQ(res.exit_code, 1) << res.err;
            EXPECT_TRUE(contains(res.err, "abort ran on rank " + std::to_string(r))) << res.err;
            if (r == failing) {
                EXPECT_TRUE(contains(res.err, "error: disk full on rank " + std::to_string(r))) << res.err;
            } else {
                EXPECT_TRUE(contains(res.err, "peer failure: rank " + std::to_string(r) + " stops because rank " +
                                                  std::to_string(failing) + " failed: disk full on rank " +
                                                  std::to_string(failing))) << res.err;
                EXPECT_FALSE(has_error_line(res.err)) << res.err;  // the error is the failing rank's
            }
        }
    }
}

TEST_F(IdExchange, PeerTcpAKilledRankIsNoticed) {
    PeerRun run = run_peers(logs, shared, true, {Then::wait, Then::die, Then::wait}, {0.3, 0.3, 0.3});
    EXPECT_LT(run.seconds, 10.0);
    EXPECT_EQ(run.results[1].exit_code, -1);  // killed by the signal
    for (int r : {0, 2}) {
        EXPECT_EQ(run.results[r].exit_code, 1) << run.results[r].err;
        EXPECT_TRUE(contains(run.results[r].err, "stops because rank 1 ended without a message")) << run.results[r].err;
        EXPECT_FALSE(has_error_line(run.results[r].err)) << run.results[r].err;  // a kill: transient for a restart
    }
}

TEST_F(IdExchange, PeerTcpANormalEndIsNoFailure) {
    // rank 0 closes first; the others keep watching a while after its goodbye
    PeerRun run = run_peers(logs, shared, true, {Then::finish, Then::finish, Then::finish}, {0.2, 1.5, 0.8});
    for (const Result& res : run.results) {
        EXPECT_EQ(res.exit_code, 0) << res.err;
        EXPECT_FALSE(contains(res.err, "abort ran")) << res.err;
    }
}

TEST_F(IdExchange, PeerWatchCheckStopsTheRankAndTellsThePeers) {
    PeerRun run = run_peers(logs, shared, true, {Then::wait, Then::check_fails}, {0.3, 0.3});
    EXPECT_LT(run.seconds, 10.0);
    EXPECT_EQ(run.results[1].exit_code, 1);
    EXPECT_TRUE(contains(run.results[1].err, "peer failure: rank 1: NCCL reports an error (test)")) << run.results[1].err;
    EXPECT_EQ(run.results[0].exit_code, 1);
    EXPECT_TRUE(contains(run.results[0].err, "peer failure: rank 0 stops because rank 1: NCCL reports an error (test)"))
        << run.results[0].err;
}

TEST_F(IdExchange, PeerFsOneRankFailsEveryOtherStopsAndOldNoticesAreIgnored) {
    // a notice of an earlier run of the tag (another nonce) must not stop this one
    write_file(shared + "/ncclUniqueId.peers.failed.0123456789abcdef", std::string(16, 'x') + "old failure");
    PeerRun ok = run_peers(logs, shared, false, {Then::finish, Then::finish}, {1.5, 1.5});
    for (const Result& res : ok.results) EXPECT_EQ(res.exit_code, 0) << res.err;
    EXPECT_FALSE(fs::exists(shared + "/ncclUniqueId.peers.failed.0123456789abcdef"));  // rank 0 removed it

    PeerRun run = run_peers(logs, shared, false, {Then::wait, Then::wait, Then::fail}, {0.3, 0.3, 0.3});
    EXPECT_LT(run.seconds, 10.0);
    EXPECT_EQ(run.results[2].exit_code, 1);
    for (int r : {0, 1}) {
        EXPECT_EQ(run.results[r].exit_code, 1) << run.results[r].err;
        EXPECT_TRUE(contains(run.results[r].err, "stops because rank 2 failed: disk full on rank 2")) << run.results[r].err;
    }
}

// The start-up's check of -pi's companions: what would otherwise fail only after the GPU and the NCCL
// start-up (no -ps / -pf, an address that is none, a missing directory) is named at once.
TEST(IdExchangeArgs, TcpNeedsAnAddressFsAnExistingDirectory) {
    EXPECT_EQ(id_exchange_args_problem("mpi", "", ""), "");
    EXPECT_EQ(id_exchange_args_problem("mpi", "not an address", "/nonexistent"), "");  // unused with mpi
    for (const char* ok : {"127.0.0.1", "10.1.2.3", "::1", "fe80::1", "localhost"}) {
        EXPECT_EQ(id_exchange_args_problem("tcp", ok, ""), "") << ok;
    }
    EXPECT_EQ(id_exchange_args_problem("tcp", "", "").find("-pi tcp needs -ps"), 0u);
    for (const char* bad : {"not an ip!", "999.1.1.1", "1.2.3", "-node1", "node1-", "a..b", " 10.0.0.1", "10.0.0.1 ",
                            "host:12345"}) {
        EXPECT_EQ(id_exchange_args_problem("tcp", bad, ""),
                  "-ps '" + std::string(bad) + "' is neither an IPv4 address (like 10.0.0.1), an IPv6 address, nor a "
                  "host name") << bad;
    }
    for (const char* name : {"node-1", "gpu_node.cluster.local", "a.b.c.", "x1"}) EXPECT_TRUE(id_exchange_is_host_name(name)) << name;
    EXPECT_FALSE(id_exchange_is_host_name(std::string(64, 'a').c_str()));  // a label of 64
    EXPECT_EQ(id_exchange_args_problem("tcp", "no-such-host.invalid", "").find("-ps 'no-such-host.invalid': cannot "
                                                                             "resolve the host name"), 0u);
    TempDir dir("test_id_args");
    EXPECT_EQ(id_exchange_args_problem("fs", "", dir.path.c_str()), "");
    EXPECT_EQ(id_exchange_args_problem("fs", "", "").find("-pi fs needs -pf"), 0u);
    EXPECT_EQ(id_exchange_args_problem("fs", "", (dir.path + "/missing").c_str()),
              "-pf '" + dir.path + "/missing': No such file or directory (it must be an existing directory)");
    const std::string file = dir.write("f", "x");
    EXPECT_EQ(id_exchange_args_problem("fs", "", file.c_str()), "-pf '" + file + "' is not a directory");
}

}  // namespace
