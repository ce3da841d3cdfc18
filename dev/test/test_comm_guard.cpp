// Tests for llmc/comm_guard.h with a fake communicator: an abort from another thread while the using
// thread polls never lets that thread touch the handle again (it waits for the aborting thread, which
// ends the process with exit code 1); an abort waits at most its limit for a hold that never ends; an
// error inside a hold can abort on the same thread; the error poll skips a busy, aborted or finishing guard.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "llmc/comm_guard.h"

namespace {

struct FakeComm {
    std::atomic<bool> freed{false};  // set by the abort: any later use is a use after free
};

void free_fake(void* c) { static_cast<FakeComm*>(c)->freed = true; }

// The using thread polls in holds (as nccl_settle_ does) while another thread aborts after delay_us and
// then ends the process. Exit 1: clean; exit 3: the handle was used after the abort. `unguarded` aborts
// without the guard's lock (what the watchdog did before).
[[noreturn]] void poll_while_aborted(int delay_us, bool unguarded) {
    static CommGuard g;
    static FakeComm comm;
    g.handle = &comm;
    std::thread([delay_us, unguarded] {
        usleep(delay_us);
        if (unguarded) free_fake(&comm);
        else comm_guard_abort(&g, 5.0, free_fake);
        usleep(20000);  // the using thread gets every chance to misbehave
        fprintf(stderr, "aborted cleanly\n");
        _exit(1);
    }).detach();
    for (;;) {
        CommHold hold(&g);
        for (int k = 0; k < 20; k++) {
            FakeComm* c = static_cast<FakeComm*>(hold.handle());
            if (c == nullptr || c->freed) {
                fprintf(stderr, "used after the abort\n");
                _exit(3);
            }
            usleep(5);  // an NCCL call on the communicator
            if (c->freed) {
                fprintf(stderr, "used after the abort\n");
                _exit(3);
            }
            hold.pause_us(20);
        }
    }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(CommGuardDeathTest, AnAbortWhileTheOwnerPollsEndsCleanly) {
    for (int delay_us : {0, 100, 1000, 3000, 10000, 30000}) {
        SCOPED_TRACE(delay_us);
        EXPECT_EXIT(poll_while_aborted(delay_us, false), ::testing::ExitedWithCode(1), "aborted cleanly");
    }
}

// What the guard prevents: the same race without it uses the freed communicator.
TEST(CommGuardDeathTest, WithoutTheGuardTheOwnerUsesTheFreedCommunicator) {
    EXPECT_EXIT(poll_while_aborted(1000, true), ::testing::ExitedWithCode(3), "used after the abort");
}

TEST(CommGuard, AnAbortWaitsAtMostItsLimitForAHoldThatNeverEnds) {
    static CommGuard& g = *new CommGuard();  // never destroyed: a thread keeps it locked to the end
    static FakeComm comm;
    g.handle = &comm;
    std::atomic<bool> holding{false};
    std::thread([&] {
        CommHold hold(&g);
        holding = true;
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(100));  // an NCCL call that never returns
    }).detach();
    while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(comm_guard_abort(&g, 0.2, free_fake));
    EXPECT_LT(seconds_since(t0), 2.0);
    EXPECT_FALSE(comm.freed);  // left alone: the caller exits without the abort
    EXPECT_FALSE(comm_guard_abort(&g, 0.2, free_fake));  // once per guard
}

TEST(CommGuard, AnErrorInsideAHoldAbortsOnTheSameThread) {
    CommGuard g;
    FakeComm comm;
    g.handle = &comm;
    CommHold hold(&g);  // e.g. a failed NCCL check inside a locked call runs the fatal() hook
    EXPECT_TRUE(comm_guard_abort(&g, 0.1, free_fake));
    EXPECT_TRUE(comm.freed);
    EXPECT_EQ(g.handle, nullptr);
}

TEST(CommGuard, ThePollSkipsABusyAbortedOrFinishingGuard) {
    CommGuard g;
    FakeComm comm;
    auto poll = [&] { return comm_guard_try(&g, [](void*) { return std::string("error seen"); }); };
    EXPECT_EQ(poll(), "");  // no communicator yet
    g.handle = &comm;
    EXPECT_EQ(poll(), "error seen");
    std::string while_held;
    {
        CommHold hold(&g);
        std::thread([&] { while_held = poll(); }).join();
    }
    EXPECT_EQ(while_held, "");
    g.finishing = true;
    EXPECT_EQ(poll(), "");
    g.finishing = false;
    comm_guard_abort(&g, 0.1, free_fake);
    EXPECT_EQ(poll(), "");
}
