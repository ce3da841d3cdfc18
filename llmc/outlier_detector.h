/*
 * Rolling z-score of a scalar series (train loss, grad norm), used by -sl / -sg to skip updates on
 * spikes and for the "(+1.23z)" fields of the step line.
 *
 *   void   outlier_detector_init(OutlierDetector*)
 *   double outlier_detector_update(OutlierDetector*, double x)
 *          returns (x - mean) / std of the last OUTLIER_WINDOW values seen BEFORE x, then adds x to
 *          the window (dropping the oldest). Choices:
 *          - NaN until the window holds OUTLIER_WINDOW values (llm.c does the same). Every comparison
 *            with NaN is false, so "z > threshold" never skips an update while warming up.
 *          - x not finite (a NaN/inf loss): returns +inf (always an outlier) and x is NOT added, so
 *            one bad step cannot poison the statistics.
 *          - std == 0 (a constant window): 0 if x equals the mean, else +/-inf.
 * mean and std are recomputed from the window each call (population std, two passes, 128 doubles):
 * exact, and free of the cancellation of running sum/sum-of-squares.
 */
#pragma once

#include <cmath>
#include <limits>

constexpr int OUTLIER_WINDOW = 128;

struct OutlierDetector {
    double buffer[OUTLIER_WINDOW];
    int count;  // values in the window (<= OUTLIER_WINDOW)
    int index;  // slot the next value goes to
};

inline void outlier_detector_init(OutlierDetector* d) {
    for (int i = 0; i < OUTLIER_WINDOW; i++) d->buffer[i] = 0.0;
    d->count = 0;
    d->index = 0;
}

inline double outlier_detector_update(OutlierDetector* d, double x) {
    if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();
    double z = std::numeric_limits<double>::quiet_NaN();
    if (d->count == OUTLIER_WINDOW) {
        double mean = 0.0;
        for (int i = 0; i < OUTLIER_WINDOW; i++) mean += d->buffer[i];
        mean /= OUTLIER_WINDOW;
        double var = 0.0;
        for (int i = 0; i < OUTLIER_WINDOW; i++) var += (d->buffer[i] - mean) * (d->buffer[i] - mean);
        double std = std::sqrt(var / OUTLIER_WINDOW);
        if (std > 0.0) z = (x - mean) / std;
        else z = (x == mean) ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), x - mean);
    }
    d->buffer[d->index] = x;
    d->index = (d->index + 1) % OUTLIER_WINDOW;
    if (d->count < OUTLIER_WINDOW) d->count++;
    return z;
}
