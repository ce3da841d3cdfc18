/*
 * Bounded waits for the multi-process trainer: a thread that ends the process when the main thread
 * stays too long inside one named wait (a collective, or a stream wait that depends on one). A rank
 * whose peer died would otherwise wait in NCCL forever.
 *
 *   watchdog_start(wd, timeout_s, on_fire)  starts the thread; on_fire (may be empty) runs before the
 *                                            exit: the trainer passes multi_gpu_abort (llmc/multi_gpu.cuh),
 *                                            which tells the peers and aborts this rank's communicator; it
 *                                            is safe while the main thread polls that communicator (both
 *                                            take its lock; the main thread then never touches it again)
 *   watchdog_enter(wd, step, what)           the main thread starts waiting on `what` ("the step's vote
 *                                            (all-reduce)") during step `step`; what must outlive the wait
 *   watchdog_leave(wd)                       the wait finished
 *   watchdog_stop(wd)                        joins the thread (nothing fires after it)
 * When a wait lasts timeout_s, the thread prints one line to stderr naming the step, the wait and the
 * timeout, runs on_fire for at most WATCHDOG_ABORT_GRACE_S (an abort can itself block on a dead
 * peer), then _exit(1): exit handlers and destructors are skipped, they could wait on the GPU too.
 * Sections do not nest. A timeout <= 0 (or NaN) disables the watchdog (enter / leave are then no-ops).
 * The deadline is a steady_clock time point, a 64-bit count of nanoseconds: about 9.2e9 s in all, so a
 * timeout past it would wrap around and fire at once. The trainer refuses -wt above
 * WATCHDOG_MAX_TIMEOUT_S (about 31 years); a longer one passed here waits as if it were that.
 */
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

constexpr double WATCHDOG_ABORT_GRACE_S = 10.0;
constexpr double WATCHDOG_MAX_TIMEOUT_S = 1e9;

struct Watchdog {
    double timeout_s = 0.0;
    std::function<void()> on_fire;
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    bool running = false;
    bool in_wait = false;
    long generation = 0;  // bumped by every enter, so a finished wait never fires late
    int step = 0;
    const char* what = "";
    std::chrono::steady_clock::time_point since;
};

inline void watchdog_fire_(Watchdog* wd, int step, const char* what) {
    fprintf(stderr, "watchdog: step %d: %s did not finish within %.0f s (a peer process died or hangs, or "
            "the timeout is too short for this run: set it with -wt); aborting the communicator and exiting\n",
            step, what, wd->timeout_s);
    fflush(stderr);
    if (wd->on_fire) {
        std::atomic<bool> done{false};
        std::thread([&] { wd->on_fire(); done = true; }).detach();
        auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(WATCHDOG_ABORT_GRACE_S);
        while (!done && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    _exit(1);
}

inline void watchdog_loop_(Watchdog* wd) {
    std::unique_lock<std::mutex> lock(wd->mu);
    while (wd->running) {
        if (!wd->in_wait) {
            wd->cv.wait(lock);
            continue;
        }
        const long gen = wd->generation;
        const double timeout_s = std::min(wd->timeout_s, WATCHDOG_MAX_TIMEOUT_S);
        const auto deadline = wd->since + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(timeout_s));
        wd->cv.wait_until(lock, deadline, [&] { return !wd->running || !wd->in_wait || wd->generation != gen; });
        if (wd->running && wd->in_wait && wd->generation == gen && std::chrono::steady_clock::now() >= deadline) {
            const int step = wd->step;
            const char* what = wd->what;
            lock.unlock();
            watchdog_fire_(wd, step, what);
        }
    }
}

inline void watchdog_start(Watchdog* wd, double timeout_s, std::function<void()> on_fire) {
    wd->timeout_s = timeout_s;
    wd->on_fire = std::move(on_fire);
    if (!(timeout_s > 0)) {
        wd->timeout_s = 0.0;  // NaN too: enter / leave test timeout_s <= 0
        return;
    }
    wd->running = true;
    wd->thread = std::thread(watchdog_loop_, wd);
}

inline void watchdog_enter(Watchdog* wd, int step, const char* what) {
    if (wd->timeout_s <= 0) return;
    std::lock_guard<std::mutex> lock(wd->mu);
    wd->in_wait = true;
    wd->generation++;
    wd->step = step;
    wd->what = what;
    wd->since = std::chrono::steady_clock::now();
    wd->cv.notify_all();
}

inline void watchdog_leave(Watchdog* wd) {
    if (wd->timeout_s <= 0) return;
    std::lock_guard<std::mutex> lock(wd->mu);
    wd->in_wait = false;
    wd->cv.notify_all();
}

inline void watchdog_stop(Watchdog* wd) {
    if (!wd->thread.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(wd->mu);
        wd->running = false;
        wd->cv.notify_all();
    }
    wd->thread.join();
}

// Enters on construction, leaves on destruction: one wait of the main thread.
struct WatchdogWait {
    Watchdog* wd;
    WatchdogWait(Watchdog* w, int step, const char* what) : wd(w) { watchdog_enter(wd, step, what); }
    ~WatchdogWait() { watchdog_leave(wd); }
    WatchdogWait(const WatchdogWait&) = delete;
    WatchdogWait& operator=(const WatchdogWait&) = delete;
};
