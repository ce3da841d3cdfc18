/*
 * Rolling z-score of a scalar series (train loss, grad norm), used by -sl / -sg to skip updates on
 * spikes and for the "(+1.23z)" fields of the step line. The numbers are llm.c's, bit for bit
 * (llmc/outlier_detector.h and train_gpt2.cu at f1e2ace; dev/test/test_outlier_detector.cpp checks
 * them against values its detector produced):
 *
 *   void   outlier_detector_init(OutlierDetector*)
 *   double outlier_detector_update(OutlierDetector*, double x)
 *          NaN for the first OUTLIER_WINDOW values (the window fills). After that x first replaces
 *          the oldest value of the window, then the z-score of x is taken against the window that
 *          now holds x: (x - mean) / sqrt(sum_sq / N - mean^2), from running sums updated with
 *          += x and -= oldest (so their rounding accumulates over the run, as in llm.c). A zero
 *          std gives 0; a negative variance from cancellation gives NaN. Nothing is special-cased:
 *          a NaN x stays in the sums and every later z-score is NaN (the trainer stops on a
 *          non-finite loss or norm before it gets here).
 *   bool   outlier_skip(float z, float threshold)
 *          llm.c's -sl / -sg test, on the z-score rounded to float as llm.c rounds it: threshold 0
 *          is off, any other threshold (negative ones too) skips when z > threshold; a non-finite z
 *          (warm-up, NaN) never skips.
 *
 * The whole struct is run state (llmc/run_state.h saves and restores it), so a resumed run continues
 * with the same running sums, bit for bit.
 */
#pragma once

#include <cmath>
#include <limits>

constexpr int OUTLIER_WINDOW = 128;

struct OutlierDetector {
    double buffer[OUTLIER_WINDOW];  // the window; while filling, value k is in slot k
    int count;                      // values in the window (<= OUTLIER_WINDOW)
    int index;                      // once full: the slot of the oldest value (the next replaced)
    double sum, sum_sq;             // running sums of the window's values and of their squares
};

inline void outlier_detector_init(OutlierDetector* d) {
    for (int i = 0; i < OUTLIER_WINDOW; i++) d->buffer[i] = 0.0;
    d->count = 0;
    d->index = 0;
    d->sum = 0.0;
    d->sum_sq = 0.0;
}

inline double outlier_detector_update(OutlierDetector* d, double x) {
    if (d->count < OUTLIER_WINDOW) {
        d->buffer[d->count++] = x;
        d->sum += x;
        d->sum_sq += x * x;
        return std::numeric_limits<double>::quiet_NaN();
    }
    const double oldest = d->buffer[d->index];
    d->sum -= oldest;
    d->sum_sq -= oldest * oldest;
    d->buffer[d->index] = x;
    d->sum += x;
    d->sum_sq += x * x;
    d->index = (d->index + 1) % OUTLIER_WINDOW;
    const double mean = d->sum / OUTLIER_WINDOW;
    const double std = std::sqrt(d->sum_sq / OUTLIER_WINDOW - mean * mean);
    if (std == 0.0) return 0.0;
    return (x - mean) / std;
}

inline bool outlier_skip(float z, float threshold) {
    return std::isfinite(z) && threshold != 0.0f && z > threshold;
}

// Running sums recomputed from the window, oldest value first: what the sums of a detector that never
// dropped a value hold (exact while filling); used for run state files written before the sums were
// saved (llmc/run_state.h).
inline void outlier_detector_recompute_sums(OutlierDetector* d) {
    d->sum = 0.0;
    d->sum_sq = 0.0;
    const int first = d->count < OUTLIER_WINDOW ? 0 : d->index;
    for (int k = 0; k < d->count; k++) {
        const double x = d->buffer[(first + k) % OUTLIER_WINDOW];
        d->sum += x;
        d->sum_sq += x * x;
    }
}
