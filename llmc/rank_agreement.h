/*
 * What the ranks of a data-parallel run must agree on, as host-only logic: the trainer moves the
 * numbers through collectives (llmc/multi_gpu.cuh), the host tests call these functions directly.
 * A decision taken from a rank's own view (its clock, its signal flag, its view of -o) can differ
 * between ranks, and a rank that leaves the loop alone leaves the others waiting in a collective.
 *
 * Resume (-y 1): rank 0 alone chooses the step, resume_choose_step(dir) (newest complete checkpoint
 *   in its view of -o, -1 for none), and broadcasts it. Every rank then lists the files it would read
 *   for that step, resume_missing_files(dir, step, rank): DONE_<step>, model_<step>.bin and its own
 *   state_<step>_<rank>.bin. The ranks sum "I miss files" (0/1); a non-zero sum stops every rank, each
 *   rank that misses files naming them first (resume_missing_message). So a node-local -o or a stale
 *   NFS view can no longer start some ranks fresh while rank 0 resumes.
 *
 * Per-step vote: every rank packs a StepVote into STEP_VOTE_SLOTS floats that ride in the step's loss
 *   all-reduce (a sum); step_vote_decide(sum, P) then gives every rank the same decision:
 *     loss            mean of the ranks' losses (NaN / inf on every rank if on one)
 *     stop_requests   ranks that saw SIGINT / SIGTERM since the start; > 0 = all stop after this step
 *     last_votes      ranks for which the next step is the last; must be 0 or P (else last_disagree)
 *   Counts are small integers, exact in an fp32 sum for P < 2^24.
 */
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "llmc/checkpoint.h"

// ----------------------------------------------------------------------------
// resume

inline int resume_choose_step(const std::string& dir) { return ckpt_find_latest(dir); }

// Files of `step` that `rank` reads on resume and cannot see in its view of dir (empty: all there).
inline std::vector<std::string> resume_missing_files(const std::string& dir, int step, int rank) {
    std::vector<std::string> missing;
    for (const std::string& p : {ckpt_done_path(dir, step), ckpt_model_path(dir, step), ckpt_state_path(dir, step, rank)}) {
        struct stat sb;
        if (stat(p.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) missing.push_back(p);
    }
    return missing;
}

inline std::string resume_missing_message(const std::vector<std::string>& missing, int step, int rank) {
    std::string s = "rank " + std::to_string(rank) + ": rank 0 chose to resume from step " + std::to_string(step) +
                    ", but this rank cannot see";
    for (size_t i = 0; i < missing.size(); i++) s += (i ? ", '" : " '") + missing[i] + "'";
    return s + " (is -o on a filesystem every node shares, and up to date?)";
}

// ----------------------------------------------------------------------------
// per-step vote

constexpr int STEP_VOTE_SLOTS = 3;

struct StepVote {
    float loss;           // this rank's mean loss of the step
    bool stop_requested;  // SIGINT / SIGTERM seen by this process
    bool next_is_last;    // the step after this one is this rank's last
};

struct StepDecision {
    float loss;
    int stop_requests;
    int last_votes;
    bool stop;           // every rank checkpoints and leaves after this step
    bool last_disagree;  // some ranks think the next step is the last, others do not
};

inline void step_vote_pack(const StepVote& v, float out[STEP_VOTE_SLOTS]) {
    out[0] = v.loss;
    out[1] = v.stop_requested ? 1.0f : 0.0f;
    out[2] = v.next_is_last ? 1.0f : 0.0f;
}

inline StepDecision step_vote_decide(const float sum[STEP_VOTE_SLOTS], int num_processes) {
    StepDecision d{};
    d.loss = sum[0] / (float)num_processes;
    d.stop_requests = (int)std::lround(sum[1]);
    d.last_votes = (int)std::lround(sum[2]);
    d.stop = d.stop_requests > 0;
    d.last_disagree = d.last_votes != 0 && d.last_votes != num_processes;
    return d;
}
