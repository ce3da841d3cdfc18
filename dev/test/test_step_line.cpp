// Tests for llmc/step_line.h: the step line is llm.c's, and a run's output as the trainer prints it
// (notes of the first step, skip lines, val lines) reads in llm.c's loss checker, re-implemented here
// from llm.c's dev/loss_checker_ci.py: find the first line containing "step    1/10", then read the loss
// from columns [20, 28) of that line and the 9 lines after it, each as a float.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "llmc/step_line.h"

namespace {

// llm.c's loss checker; false (with why) where the Python script would print an error and exit 1
bool llmc_loss_checker(const std::string& output, std::vector<double>* losses, std::string* why) {
    std::vector<std::string> lines;
    std::istringstream in(output);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    size_t start = lines.size();
    for (size_t i = 0; i < lines.size(); i++) {
        if (lines[i].find("step    1/10") != std::string::npos) {
            start = i;
            break;
        }
    }
    if (start == lines.size()) {
        *why = "no 'step    1/10' line";
        return false;
    }
    for (size_t i = start; i < start + 10 && i < lines.size(); i++) {
        const std::string field = lines[i].size() > 20 ? lines[i].substr(20, 8) : "";
        size_t a = field.find_first_not_of(" \t"), b = field.find_last_not_of(" \t");
        const std::string num = a == std::string::npos ? "" : field.substr(a, b - a + 1);
        char* end = nullptr;
        const double v = strtod(num.c_str(), &end);
        if (num.empty() || *end != '\0') {  // Python's float() would raise
            *why = "line " + std::to_string(i - start) + " after step 1 is not a step line: '" + lines[i] + "'";
            return false;
        }
        losses->push_back(v);
    }
    return true;
}

StepLine sample(int step, float loss) {
    StepLine s;
    s.step = step;
    s.num_steps = 10;
    s.loss = loss;
    s.loss_z = NAN;
    s.norm = 1.5f;
    s.norm_z = NAN;
    s.lr = 1e-4f;
    s.ms = 123.456f;
    s.mfu_percent = 12.34;
    s.tok_per_s = 4567.0f;
    return s;
}

}  // namespace

TEST(StepLine, IsLlmcsFormat) {
    StepLine s = sample(1, 5.270009f);
    EXPECT_EQ(step_line(s),
              "step    1/10 | loss 5.270009 (+nanz)| norm 1.5000 (+nanz)| lr 1.00e-04 | 123.46 ms | 12.3% bf16 MFU | 4567 tok/s\n");
    s.step = 18865;
    s.num_steps = 18865;
    s.loss_z = -1.234f;
    s.norm_z = 5.92473f;
    EXPECT_EQ(step_line(s), "step 18865/18865 | loss 5.270009 (-1.23z)| norm 1.5000 (+5.92z)| lr 1.00e-04 | 123.46 ms | "
                            "12.3% bf16 MFU | 4567 tok/s\n");
}

// The output of llm.c's GPU CI run (-x 10 -v 200 -s 200: val loss before step 1, 10 steps, val and a
// sample after), with -ma 1's autotune summaries on the first step: the checker reads the 10 losses.
TEST(StepLine, LlmcLossCheckerReadsOurOutput) {
    const float want[10] = {5.270009f, 4.060681f, 3.320085f, 2.717550f, 2.181066f,
                            1.653923f, 1.168050f, 0.736873f, 0.401021f, 0.187493f};
    std::string out = "+----+\n| table |\n+----+\nval loss 5.325531\n";
    for (int i = 0; i < 10; i++) {
        std::string notes;
        if (i == 0) {
            notes = "cuBLASLt autotune: 9 GEMM shapes, 2 use a faster algorithm than the heuristic's (same bits); one call of "
                    "each: 1.000 -> 0.900 ms\ncuDNN attention autotune (plans bitwise equal to the default; one call, "
                    "default -> chosen):\n  forward B=1 T=64 NH=12: 3 plans, 2 equal, 0.010 -> 0.009 ms";
        }
        out += step_output(sample(i + 1, want[i]), notes);
    }
    out += "val loss 0.5\ngenerating:\n---\nsome text\n---\ntotal average iteration time: 12.0 ms\n";
    std::vector<double> got;
    std::string why;
    ASSERT_TRUE(llmc_loss_checker(out, &got, &why)) << why << "\n" << out;
    ASSERT_EQ(got.size(), 10u);
    for (int i = 0; i < 10; i++) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

// A step without notes is just its step line; notes never follow the step line.
TEST(StepLine, NotesComeFirst) {
    const StepLine s = sample(3, 2.5f);
    EXPECT_EQ(step_output(s, ""), step_line(s));
    EXPECT_EQ(step_output(s, "a\nb"), "a\nb\n" + step_line(s));
    EXPECT_EQ(step_output(s, "a\n"), "a\n" + step_line(s));
}
