/*
 * Per-phase GPU timing of a training step (trainer flag -pt 1), for finding where the time goes
 * without a profiler. phase_mark(t, "name", stream) records a CUDA event: the GPU time from that event
 * to the next mark is charged to "name". phase_timer_end_step() waits for the last event, adds each
 * interval to its phase and starts the next step; phase_timer_print() prints ms/step per phase.
 * Events are recorded between launches on one stream, so they change no results; with the timer
 * off (nullptr) every call is a no-op.
 */
#pragma once

#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "llmc/utils.h"

struct PhaseTimer {
    std::vector<cudaEvent_t> events;  // pool, reused every step
    std::vector<int> event_phase;     // phase of the interval that starts at events[i]
    int marks = 0;                    // events recorded in this step
    std::vector<std::string> names;
    std::vector<double> total_ms;     // per phase, over the timed steps
    int steps = 0;
};

inline void phase_timer_init(PhaseTimer* t, int max_marks = 8192) {
    t->events.resize(max_marks);
    t->event_phase.resize(max_marks);
    for (cudaEvent_t& e : t->events) {
        if (cudaEventCreate(&e) != cudaSuccess) fatal("-pt: cannot create CUDA events for the phase timer");
    }
}

inline void phase_timer_free(PhaseTimer* t) {
    for (cudaEvent_t e : t->events) cudaEventDestroy(e);
    t->events.clear();
}

inline void phase_mark(PhaseTimer* t, const char* name, cudaStream_t stream) {
    if (t == nullptr) return;
    if (t->marks >= (int)t->events.size()) fatal("-pt: more than %zu phase marks in one step", t->events.size());
    int id = (int)(std::find(t->names.begin(), t->names.end(), name) - t->names.begin());
    if (id == (int)t->names.size()) {
        t->names.push_back(name);
        t->total_ms.push_back(0.0);
    }
    t->event_phase[t->marks] = id;
    if (cudaEventRecord(t->events[t->marks], stream) != cudaSuccess) fatal("-pt: cudaEventRecord failed");
    t->marks++;
}

// Name of the phase now being charged ("" when off or before the first mark).
inline std::string phase_timer_current(const PhaseTimer* t) {
    if (t == nullptr || t->marks == 0) return std::string();
    return t->names[t->event_phase[t->marks - 1]];
}

// Closes the step (a final mark), waits for it, and charges every interval to its phase.
// count = false drops the step (warm-up).
inline void phase_timer_end_step(PhaseTimer* t, cudaStream_t stream, bool count) {
    if (t == nullptr) return;
    phase_mark(t, "(end)", stream);
    if (cudaEventSynchronize(t->events[t->marks - 1]) != cudaSuccess) fatal("-pt: cudaEventSynchronize failed");
    if (count) {
        for (int i = 0; i + 1 < t->marks; i++) {
            float ms = 0.0f;
            if (cudaEventElapsedTime(&ms, t->events[i], t->events[i + 1]) != cudaSuccess) fatal("-pt: cudaEventElapsedTime failed");
            t->total_ms[t->event_phase[i]] += ms;
        }
        t->steps++;
    }
    t->marks = 0;
}

inline void phase_timer_print(const PhaseTimer* t) {
    if (t == nullptr || t->steps == 0) return;
    double total = 0.0;
    for (double v : t->total_ms) total += v;
    std::vector<int> order(t->names.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int)i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return t->total_ms[a] > t->total_ms[b]; });
    printf("GPU time per step by phase (-pt 1), mean over %d steps:\n", t->steps);
    printf("  %-28s %10s %7s\n", "phase", "ms/step", "share");
    for (int i : order) {
        if (t->names[i] == "(end)") continue;
        printf("  %-28s %10.3f %6.1f%%\n", t->names[i].c_str(), t->total_ms[i] / t->steps,
               total > 0 ? 100.0 * t->total_ms[i] / total : 0.0);
    }
    printf("  %-28s %10.3f\n", "total", total / t->steps);
}
