/*
 * A communicator that one thread uses and another may abort (host only). NCCL's rule is one thread at
 * a time per communicator, and ncclCommAbort frees it: a watchdog that aborts while the main thread
 * polls the same communicator (ncclCommGetAsyncError) can crash the process instead of ending it with
 * its message. The communicator is an opaque handle and the abort a callback, so llmc/multi_gpu.cuh uses
 * this with NCCL and dev/test/test_comm_guard.cpp with a fake.
 *
 *   CommGuard g                      the handle (void*, null: none), its lock, and two flags
 *   CommHold hold(&g)                the using thread's hold for one sequence of calls (the lock); once
 *                                    another thread has aborted, it never returns (comm_guard_park_):
 *                                    that thread is ending the process
 *   hold.pause_us(us)                unlock, sleep, relock (a poll loop lets an aborting thread in)
 *   comm_guard_abort(&g, wait_s, abort_fn)
 *                                    from any thread, once per guard: marks it aborted, waits at most
 *                                    wait_s for the hold (a call that never returns is left alone: the
 *                                    caller exits anyway), then abort_fn(handle) and handle = null.
 *                                    Returns false when another thread aborted first. The lock is
 *                                    recursive: an error inside a hold may abort on the same thread.
 *   comm_guard_try(&g, fn)           fn(handle) if the guard is free, not aborted, not finishing and has
 *                                    a handle, else nothing (the peer watch's poll of NCCL's errors);
 *                                    returns fn's result or ""
 *   g.finishing = true               the run is shutting down (comm_guard_try stops polling)
 */
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

struct CommGuard {
    std::recursive_timed_mutex mu;
    void* handle = nullptr;              // guarded by mu
    std::atomic<bool> aborted{false};    // set once, by the aborting thread, before it takes mu
    std::atomic<bool> finishing{false};
};

[[noreturn]] inline void comm_guard_park_() {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1000));
}

struct CommHold {
    CommGuard* g;
    std::unique_lock<std::recursive_timed_mutex> lock;
    explicit CommHold(CommGuard* guard) : g(guard), lock(guard->mu) { park_if_aborted(); }
    void* handle() const { return g->handle; }
    void park_if_aborted() {
        if (g->aborted.load()) {
            lock.unlock();
            comm_guard_park_();
        }
    }
    void pause_us(int us) {
        lock.unlock();
        usleep(us);
        lock.lock();
        park_if_aborted();
    }
};

inline bool comm_guard_abort(CommGuard* g, double wait_s, const std::function<void(void*)>& abort_fn) {
    if (g->aborted.exchange(true)) return false;
    std::unique_lock<std::recursive_timed_mutex> lock(g->mu, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::duration<double>(wait_s))) return true;
    if (g->handle != nullptr) abort_fn(g->handle);
    g->handle = nullptr;
    return true;
}

inline std::string comm_guard_try(CommGuard* g, const std::function<std::string(void*)>& fn) {
    std::unique_lock<std::recursive_timed_mutex> lock(g->mu, std::try_to_lock);
    if (!lock.owns_lock() || g->aborted.load() || g->finishing.load() || g->handle == nullptr) return "";
    return fn(g->handle);
}
