// Tests for llmc/outlier_detector.h: the z-scores of -sl / -sg and of the step line are llm.c's, bit for
// bit (dev/test/data/outlier_llmc.txt holds what llm.c's own detector returned for two long series), its
// skip rule, and that the detectors resume exactly through a run state file (llmc/run_state.h),
// including files of earlier builds that did not save the running sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "dev/test/test_util.h"
#include "llmc/outlier_detector.h"
#include "llmc/run_state.h"

namespace {

bool same_bits_or_both_nan(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return memcmp(&a, &b, sizeof(double)) == 0;
}

struct LlmcOutlierPoint {
    double x, z;
};

// Series `which` of dev/test/data/outlier_llmc.txt (lines "series x z", hexadecimal floats or nan;
// '#' lines are comments); empty when the file is missing.
std::vector<LlmcOutlierPoint> llmc_series(int which) {
    std::istringstream in(read_file(repo_root() + "/dev/test/data/outlier_llmc.txt"));
    std::vector<LlmcOutlierPoint> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        int series = -1;
        std::string x, z;
        fields >> series >> x >> z;
        if (series == which) out.push_back({strtod(x.c_str(), nullptr), strtod(z.c_str(), nullptr)});
    }
    return out;
}

// The two series, read once (.at() below: a missing file fails the tests, it cannot crash them).
const std::vector<LlmcOutlierPoint> kLlmcOutlierSeries0 = llmc_series(0);
const std::vector<LlmcOutlierPoint> kLlmcOutlierSeries1 = llmc_series(1);

// llm.c's z-score of 3.7 after 64 x 2.9 and 64 x 3.1 (mean 3, std 0.1): a 7-sigma value against the
// window before it (the same C program as the file's series).
constexpr double kLlmcSevenSigmaZ = 0x1.7b2ef7c5cbc71p+2;

void expect_llmc_series(const std::vector<LlmcOutlierPoint>& series, size_t expect_size, const char* name) {
    ASSERT_EQ(series.size(), expect_size) << name << ": dev/test/data/outlier_llmc.txt is missing or cut";
    OutlierDetector d;
    outlier_detector_init(&d);
    int finite = 0;
    for (size_t i = 0; i < series.size(); i++) {
        const double z = outlier_detector_update(&d, series[i].x);
        ASSERT_TRUE(same_bits_or_both_nan(z, series[i].z))
            << name << " value " << i << ": x " << series[i].x << " z " << z << ", llm.c's " << series[i].z;
        finite += std::isfinite(z);
    }
    EXPECT_GT(finite, 100) << name;  // the data exercise the z-scores, not only the warm-up
}

// The step line prints the z-score as llm.c does: rounded to float, "%+.2f".
std::string printed(double z) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%+.2f", (float)z);
    return buf;
}

}  // namespace

TEST(OutlierDetector, MatchesLlmcBitForBit) {
    expect_llmc_series(kLlmcOutlierSeries0, 600, "loss-like series");
    expect_llmc_series(kLlmcOutlierSeries1, 700, "grad-norm-like series");
}

// The new value is in the window its z-score is taken against (llm.c): a value 7 standard deviations
// above the previous window scores 5.92, not 7.
TEST(OutlierDetector, NewValueJoinsTheWindowFirst) {
    OutlierDetector d;
    outlier_detector_init(&d);
    for (int i = 0; i < OUTLIER_WINDOW; i++) {
        EXPECT_TRUE(std::isnan(outlier_detector_update(&d, i % 2 ? 3.1 : 2.9))) << i;
    }
    const double z = outlier_detector_update(&d, 3.7);
    EXPECT_TRUE(same_bits_or_both_nan(z, kLlmcSevenSigmaZ)) << z;
    EXPECT_EQ(printed(z), "+5.92");
    EXPECT_EQ(printed(std::nan("")), "+nan");  // the warm-up's "(+nanz)"
}

TEST(OutlierDetector, ConstantWindowScoresZero) {
    OutlierDetector d;
    outlier_detector_init(&d);
    for (int i = 0; i < OUTLIER_WINDOW; i++) outlier_detector_update(&d, 4.0);
    EXPECT_EQ(outlier_detector_update(&d, 4.0), 0.0);
    EXPECT_GT(outlier_detector_update(&d, 5.0), 0.0);  // the window now holds the 5.0: finite, positive
}

// llm.c's -sl / -sg test: threshold 0 is off, negative thresholds are on, a NaN z-score never skips,
// and the comparison is of floats.
TEST(OutlierDetector, SkipRuleIsLlmcs) {
    EXPECT_FALSE(outlier_skip(100.0f, 0.0f));
    EXPECT_TRUE(outlier_skip(5.5f, 5.0f));
    EXPECT_FALSE(outlier_skip(5.0f, 5.0f));
    EXPECT_TRUE(outlier_skip(-0.5f, -1.0f));   // negative threshold: on
    EXPECT_FALSE(outlier_skip(-1.5f, -1.0f));
    EXPECT_FALSE(outlier_skip(NAN, -1.0f));    // warm-up
    EXPECT_FALSE(outlier_skip(INFINITY, 1.0f));
    EXPECT_FALSE(outlier_skip((float)(5.0 + 1e-9), 5.0f));  // rounded to float first, as llm.c
}

namespace {

// Detectors fed the first n values of llm.c's series (loss: series 0, norm: series 1).
RunState detectors_after(size_t n) {
    RunState rs;
    rs.has_outliers = true;
    outlier_detector_init(&rs.loss_outlier);
    outlier_detector_init(&rs.grad_norm_outlier);
    for (size_t i = 0; i < n; i++) {
        outlier_detector_update(&rs.loss_outlier, kLlmcOutlierSeries0.at(i).x);
        outlier_detector_update(&rs.grad_norm_outlier, kLlmcOutlierSeries1.at(i).x);
    }
    return rs;
}

// The z-scores of both detectors for values n..end of the series, against llm.c's.
void expect_continues_as_llmc(RunState rs, size_t n, const char* what) {
    for (size_t i = n; i < 600; i++) {
        const double zl = outlier_detector_update(&rs.loss_outlier, kLlmcOutlierSeries0.at(i).x);
        const double zn = outlier_detector_update(&rs.grad_norm_outlier, kLlmcOutlierSeries1.at(i).x);
        ASSERT_TRUE(same_bits_or_both_nan(zl, kLlmcOutlierSeries0.at(i).z)) << what << ": loss value " << i;
        ASSERT_TRUE(same_bits_or_both_nan(zn, kLlmcOutlierSeries1.at(i).z)) << what << ": norm value " << i;
    }
}

// The state file as an earlier build wrote it: slot 7 = 1, per detector count, index (which ran
// ahead while the window filled), window, no sums; checksum over the whole file.
std::vector<uint8_t> earlier_build_file(const std::vector<uint8_t>& now, const RunState& rs) {
    std::vector<uint8_t> out(now.begin(), now.begin() + FILE_HEADER_BYTES);  // no body, no shuffle section
    int32_t* h = (int32_t*)out.data();
    h[RUN_STATE_OUTLIER_SLOT] = 1;
    run_state_put_u64_(h, RUN_STATE_CHECKSUM_SLOT, 0);
    for (const OutlierDetector* d : {&rs.loss_outlier, &rs.grad_norm_outlier}) {
        const int32_t count = d->count, index = d->count < OUTLIER_WINDOW ? d->count : d->index;
        const uint8_t* c = (const uint8_t*)&count;
        const uint8_t* x = (const uint8_t*)&index;
        const uint8_t* w = (const uint8_t*)d->buffer;
        out.insert(out.end(), c, c + 4);
        out.insert(out.end(), x, x + 4);
        out.insert(out.end(), w, w + sizeof(d->buffer));
    }
    Checksum64 ck;
    checksum_init(&ck);
    checksum_update(&ck, out.data(), out.size());
    run_state_put_u64_((int32_t*)out.data(), RUN_STATE_CHECKSUM_SLOT, checksum_final(&ck));
    return out;
}

}  // namespace

// Saved mid-run and read back, the detectors (windows and running sums) continue exactly as the
// uninterrupted llm.c detector: during the warm-up, right at the full window, and long after it.
TEST(OutlierDetectorResume, StateFileContinuesBitForBit) {
    TempDir dir("test_outlier_detector");
    const std::string path = dir.file("state.bin");
    for (size_t n : {50, 128, 129, 450}) {
        const RunState rs = detectors_after(n);
        run_state_write(path, rs, {});
        EXPECT_EQ(read_bytes(path).size(), (size_t)FILE_HEADER_BYTES + 2 * (8 + 1024 + 16));
        const RunState got = run_state_read(path, {}, 1, 0);
        ASSERT_TRUE(got.has_outliers);
        expect_continues_as_llmc(got, n, ("resumed after " + std::to_string(n)).c_str());
    }
}

// A file of an earlier build (no running sums) still resumes: the sums are recomputed from the window,
// exactly while it fills (the sums of a detector that has dropped nothing), and to within rounding
// once it is full, with a note saying so.
TEST(OutlierDetectorResume, EarlierBuildsFilesResume) {
    TempDir dir("test_outlier_detector");
    const std::string now_path = dir.file("now.bin"), old_path = dir.file("old.bin");
    for (size_t n : {50, 127}) {
        const RunState rs = detectors_after(n);
        run_state_write(now_path, rs, {});
        write_file(old_path, earlier_build_file(read_bytes(now_path), rs));
        const RunState got = run_state_read(old_path, {}, 1, 0);
        ASSERT_TRUE(got.has_outliers);
        EXPECT_EQ(got.loss_outlier.index, 0);
        expect_continues_as_llmc(got, n, ("earlier build's file after " + std::to_string(n)).c_str());
    }
    const RunState rs = detectors_after(450);
    run_state_write(now_path, rs, {});
    write_file(old_path, earlier_build_file(read_bytes(now_path), rs));
    testing::internal::CaptureStderr();
    RunState got = run_state_read(old_path, {}, 1, 0);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("old.bin' was written by an earlier build, without the z-score windows' running sums"),
              std::string::npos) << err;
    EXPECT_EQ(memcmp(got.loss_outlier.buffer, rs.loss_outlier.buffer, sizeof(rs.loss_outlier.buffer)), 0);
    EXPECT_EQ(got.loss_outlier.index, rs.loss_outlier.index);
    EXPECT_NEAR(got.loss_outlier.sum, rs.loss_outlier.sum, 1e-9 * std::fabs(rs.loss_outlier.sum));
    for (size_t i = 450; i < 600; i++) {
        const double z = outlier_detector_update(&got.loss_outlier, kLlmcOutlierSeries0.at(i).x);
        if (std::isfinite(kLlmcOutlierSeries0.at(i).z)) {
            EXPECT_NEAR(z, kLlmcOutlierSeries0.at(i).z, 1e-6) << i;
        }
    }
}

TEST(OutlierDetectorResume, BadOutlierSlotIsRefused) {
    TempDir dir("test_outlier_detector");
    const std::string path = dir.file("state.bin");
    run_state_write(path, detectors_after(10), {});
    std::vector<uint8_t> b = read_bytes(path);
    ((int32_t*)b.data())[RUN_STATE_OUTLIER_SLOT] = 3;
    write_file(path, b);
    EXPECT_EXIT(run_state_read(path, {}, 1, 0), ::testing::ExitedWithCode(1),
                "state.bin' is corrupted \\(header slot 7 = 3, must be 0 to 2\\)");
}
