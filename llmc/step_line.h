/*
 * What rank 0 prints for one optimizer step, in print order, host only. llm.c's tools read these lines:
 * its dev/loss_checker_ci.py finds "step    1/N" and reads the loss from columns 20-28 of that line and
 * the 9 after it, so between two step lines nothing may appear that llm.c does not print there (its
 * "skipping update ..." line before a step line, -lg's GPU line after one, val / eval / sample lines).
 *
 *   struct StepLine                 the step line's numbers (step is 1-based, as printed)
 *   std::string step_line(const StepLine&)
 *        llm.c's step line, its format exactly (the z-scores are floats, NaN while the windows fill:
 *        "(+nanz)")
 *   std::string step_output(const StepLine&, const std::string& notes)
 *        the text of one step: notes (lines of ours: -ma 1's autotune summaries, which the run's first
 *        step completes; "" on the other steps) BEFORE the step line, so the step lines stay adjacent
 */
#pragma once

#include <cstdio>
#include <string>

struct StepLine {
    int step = 0;          // 1-based
    int num_steps = 0;
    float loss = 0.0f, loss_z = 0.0f;
    float norm = 0.0f, norm_z = 0.0f;
    float lr = 0.0f;
    float ms = 0.0f;
    double mfu_percent = 0.0;
    float tok_per_s = 0.0f;
};

inline std::string step_line(const StepLine& s) {
    char buf[512];
    snprintf(buf, sizeof(buf),
             "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n",
             s.step, s.num_steps, s.loss, s.loss_z, s.norm, s.norm_z, s.lr, s.ms, s.mfu_percent, s.tok_per_s);
    return buf;
}

inline std::string step_output(const StepLine& s, const std::string& notes) {
    std::string out = notes;
    if (!out.empty() && out.back() != '\n') out += '\n';
    return out + step_line(s);
}
