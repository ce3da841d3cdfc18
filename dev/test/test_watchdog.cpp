// Tests for llmc/watchdog.h: a wait that outlasts the timeout ends the process with exit code 1 and a
// message naming the step and the wait, after running the abort callback; waits that finish in time,
// and a disabled watchdog, never fire; a callback that blocks does not keep the process alive.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "llmc/watchdog.h"

namespace {

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

void hang_in_a_wait(bool blocking_abort) {
    Watchdog wd;
    watchdog_start(&wd, 0.3, [blocking_abort] {
        fprintf(stderr, "abort callback ran\n");
        if (blocking_abort) for (;;) sleep_s(1);
    });
    watchdog_enter(&wd, 7, "the step's vote (all-reduce)");
    sleep_s(30);  // the "collective" never finishes
    watchdog_leave(&wd);
    watchdog_stop(&wd);
    exit(0);
}

}  // namespace

TEST(WatchdogDeathTest, AWaitPastTheTimeoutAbortsAndExitsNamingStepAndWait) {
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EXIT(hang_in_a_wait(false), ::testing::ExitedWithCode(1),
                "watchdog: step 7: the step's vote \\(all-reduce\\) did not finish within 0 s");
    EXPECT_EXIT(hang_in_a_wait(false), ::testing::ExitedWithCode(1), "abort callback ran");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

TEST(WatchdogDeathTest, ABlockingAbortDoesNotKeepTheProcessAlive) {
    EXPECT_EXIT(hang_in_a_wait(true), ::testing::ExitedWithCode(1), "abort callback ran");
}

TEST(Watchdog, WaitsThatFinishInTimeNeverFire) {
    Watchdog wd;
    bool fired = false;
    watchdog_start(&wd, 0.3, [&] { fired = true; });
    for (int i = 0; i < 20; i++) {
        WatchdogWait w(&wd, i, "short wait");
        sleep_s(0.05);
    }
    sleep_s(0.5);  // idle between waits is not counted
    {
        WatchdogWait w(&wd, 99, "another short wait");
        sleep_s(0.2);
    }
    watchdog_stop(&wd);
    EXPECT_FALSE(fired);
}

// A timeout past what the clock's 64-bit nanoseconds hold (about 9.2e9 s) used to wrap the deadline
// into the past: the first wait fired at once and the process exited 1. Now it waits as if it were
// WATCHDOG_MAX_TIMEOUT_S; NaN disables the watchdog like 0.
void short_wait_with_timeout(double timeout_s) {
    Watchdog wd;
    watchdog_start(&wd, timeout_s, [] {});
    {
        WatchdogWait w(&wd, 3, "a short wait");
        sleep_s(0.3);
    }
    watchdog_stop(&wd);
    exit(0);
}

TEST(WatchdogDeathTest, HugeTimeoutsDoNotFireAtOnce) {
    for (double t : {1e9, 9.3e9, 1e10, 1e300, (double)INFINITY, (double)NAN}) {
        EXPECT_EXIT(short_wait_with_timeout(t), ::testing::ExitedWithCode(0), "") << t;
    }
}

TEST(Watchdog, ZeroTimeoutDisablesIt) {
    Watchdog wd;
    watchdog_start(&wd, 0, [] { _exit(3); });
    watchdog_enter(&wd, 1, "anything");
    sleep_s(0.2);
    watchdog_leave(&wd);
    watchdog_stop(&wd);
    EXPECT_FALSE(wd.thread.joinable());
}
