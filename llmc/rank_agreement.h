/*
 * What the ranks of a data-parallel run must agree on, as host-only logic: the trainer moves the
 * numbers through collectives (llmc/multi_gpu.cuh), the host tests call these functions directly.
 * A decision taken from a rank's own view (its clock, its signal flag, its view of -o) can differ
 * between ranks, and a rank that leaves the loop alone leaves the others waiting in a collective.
 *
 * The collectives come in a RankComm (broadcast of a few bytes from rank 0, sum of a few floats): the
 * trainer's are NCCL's (llmc/train_step.cuh rank_comm_of), the tests' threads.
 *
 * Resume (-y 1): rank 0 alone chooses the step, resume_choose_step(dir) (newest complete checkpoint
 *   in its view of -o, -1 for none), and broadcasts it. Every rank then lists the files it would read
 *   for that step, resume_missing_files(dir, step, rank): DONE_<step>, model_<step>.bin and its own
 *   state_<step>_<rank>.bin. The ranks sum "I miss files" (0/1); a non-zero sum stops every rank, each
 *   rank that misses files naming them first (resume_missing_message). So a node-local -o or a stale
 *   NFS view can no longer start some ranks fresh while rank 0 resumes. resume_agree does all of it:
 *   a rank whose own read (before the processes were up) was of another step re-reads rank 0's step
 *   or, when rank 0 starts fresh, drops it; then every rank's host state (data loader position, outlier
 *   windows) is set from scratch for the agreed step (resume_restore_host: the fresh state, then the
 *   checkpoint's), so nothing a rank restored from a step the others do not use survives.
 *   ranks_agree_model: every rank holds rank 0's model shape (without -e, a resume takes the shape from
 *   the rank's own view of -o). resume_agree_rng: every rank takes rank 0's rounding RNG (llm.c's
 *   files hold one per rank, seeded 13371337 + rank; ZeRO-0 replicas must round alike).
 *
 * Skipping an update (-sl / -sg): step_skip_decide adds the step's loss and norm (the same on every
 *   rank) to this rank's outlier windows and, when skipping is on, takes rank 0's decision and
 *   z-scores on every rank: a rank whose windows differ cannot skip alone (under ZeRO-1 its missing
 *   all-gather would hang the others; under ZeRO-0 the replicas would differ).
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
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "llmc/checkpoint.h"

// ----------------------------------------------------------------------------
// the collectives

struct RankComm {
    int rank = 0, num_processes = 1;
    std::function<void(void* data, size_t bytes)> broadcast;  // data[0, bytes) = rank 0's (bytes <= 32)
    std::function<void(float* values, int n)> sum;            // values[0, n) = their sums over ranks (n <= 8)
};

// One process: every collective is the identity.
inline RankComm rank_comm_single() {
    RankComm c;
    c.broadcast = [](void*, size_t) {};
    c.sum = [](float*, int) {};
    return c;
}

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

// Rank 0's step on every rank; stops every rank when any lacks a file of it (each naming its own).
inline int resume_agree_step(const std::string& dir, int own_step, const RankComm& comm) {
    int step = own_step;
    comm.broadcast(&step, sizeof(step));
    std::vector<std::string> missing;
    if (step >= 0) missing = resume_missing_files(dir, step, comm.rank);
    if (!missing.empty()) fprintf(stderr, "%s\n", resume_missing_message(missing, step, comm.rank).c_str());
    float ranks_missing = missing.empty() ? 0.0f : 1.0f;
    comm.sum(&ranks_missing, 1);
    if (ranks_missing > 0.5f) {
        fatal("resume from step %d of %s: %d of %d ranks miss files of that step (named above); every rank stops",
              step, dir.c_str(), (int)std::lround(ranks_missing), comm.num_processes);
    }
    return step;
}

// What a resume restores on the host besides the optimizer: the train loader's position and shuffle,
// and the two outlier windows. `fresh` holds them as the set-up left them (a run that starts fresh).
struct ResumeHostState {
    DataLoaderState loader;
    OutlierDetector loss_outlier, norm_outlier;
};

inline ResumeHostState resume_host_state(const DataLoader* loader, const OutlierDetector& loss, const OutlierDetector& norm) {
    return ResumeHostState{dataloader_get_state(loader), loss, norm};
}

// The host state for checkpoint r (r.step < 0: none, a fresh start): first the fresh state, then r's,
// so a window or position of another checkpoint never survives (an llm.c file has no windows).
inline void resume_restore_host(const CheckpointRead& r, const ResumeHostState& fresh, DataLoader* loader,
                                OutlierDetector* loss, OutlierDetector* norm) {
    dataloader_set_state(loader, fresh.loader, "the start-up state");
    *loss = fresh.loss_outlier;
    *norm = fresh.norm_outlier;
    if (r.step < 0) return;
    run_state_restore_loader(r.rs, loader, r.state_path);
    if (r.rs.has_outliers) {
        *loss = r.rs.loss_outlier;
        *norm = r.rs.grad_norm_outlier;
    }
}

// After the processes are up: agrees on rank 0's step, makes *r that step's read on this rank (reread
// reads `step` into *r; rank 0 starting fresh empties it) and sets the host state for it. Returns the step.
inline int resume_agree(CheckpointRead* r, const std::string& dir, const ResumeHostState& fresh, DataLoader* loader,
                        OutlierDetector* loss, OutlierDetector* norm, const RankComm& comm,
                        const std::function<void(int step)>& reread) {
    const int step = resume_agree_step(dir, r->step, comm);
    if (step != r->step) {
        printf("resume: rank %d saw step %d as the newest checkpoint; taking rank 0's %s\n", comm.rank, r->step,
               step < 0 ? "fresh start" : ("step " + std::to_string(step)).c_str());
        if (step < 0) *r = CheckpointRead();
        else reread(step);
    }
    resume_restore_host(*r, fresh, loader, loss, norm);
    return step;
}

// Every rank must train rank 0's model shape; otherwise all stop, each rank that differs naming both.
inline void ranks_agree_model(const GPT2Config& mine, const std::string& source, const RankComm& comm) {
    GPT2Config rank0 = mine;
    comm.broadcast(&rank0, sizeof(rank0));
    const bool differs = memcmp(&rank0, &mine, sizeof(mine)) != 0;
    if (differs) {
        fprintf(stderr, "rank %d: model from %s is L%d C%d NH%d V%d maxT%d, rank 0's L%d C%d NH%d V%d maxT%d\n",
                comm.rank, source.c_str(), mine.num_layers, mine.channels, mine.num_heads, mine.padded_vocab_size,
                mine.max_seq_len, rank0.num_layers, rank0.channels, rank0.num_heads, rank0.padded_vocab_size,
                rank0.max_seq_len);
    }
    float ranks_differ = differs ? 1.0f : 0.0f;
    comm.sum(&ranks_differ, 1);
    if (ranks_differ > 0.5f) {
        fatal("%d of %d ranks have another model than rank 0 (named above): with -y 1 and no -e each rank takes the "
              "model from the newest checkpoint in its own view of -o; give -e, or one -o that every node shares",
              (int)std::lround(ranks_differ), comm.num_processes);
    }
}

// Every rank takes rank 0's stochastic-rounding RNG (after a resume: llm.c's files differ per rank).
inline void resume_agree_rng(uint64_t* rng_state, uint64_t* rng_state_last_update, const RankComm& comm) {
    uint64_t v[2] = {*rng_state, *rng_state_last_update};
    comm.broadcast(v, sizeof(v));
    *rng_state = v[0];
    *rng_state_last_update = v[1];
}

// ----------------------------------------------------------------------------
// skipping an update

struct StepSkip {
    double loss_z, norm_z;  // rank 0's when skipping is on; rounded to float, as llm.c's
    bool skip_loss, skip_norm;  // which z-score is over its limit (llm.c's rule, outlier_skip)
    bool skip;
};

// z-scores of this step's loss and norm (this rank's windows += them) and whether the update is skipped
// (-sl / -sg; 0 = off, negative limits on, as llm.c): with skipping on, rank 0's decision on every rank.
inline StepSkip step_skip_decide(OutlierDetector* loss_window, OutlierDetector* norm_window, float loss, float norm,
                                 float skip_loss_z, float skip_norm_z, const RankComm& comm) {
    StepSkip s{};
    s.loss_z = (float)outlier_detector_update(loss_window, loss);  // llm.c rounds the z-scores to float
    s.norm_z = (float)outlier_detector_update(norm_window, norm);
    s.skip_loss = outlier_skip((float)s.loss_z, skip_loss_z);
    s.skip_norm = outlier_skip((float)s.norm_z, skip_norm_z);
    if ((skip_loss_z != 0.0f || skip_norm_z != 0.0f) && comm.num_processes > 1) {
        unsigned char packed[2 * sizeof(double) + 2];
        memcpy(packed, &s.loss_z, sizeof(double));
        memcpy(packed + sizeof(double), &s.norm_z, sizeof(double));
        packed[2 * sizeof(double)] = s.skip_loss ? 1 : 0;
        packed[2 * sizeof(double) + 1] = s.skip_norm ? 1 : 0;
        comm.broadcast(packed, sizeof(packed));
        memcpy(&s.loss_z, packed, sizeof(double));
        memcpy(&s.norm_z, packed + sizeof(double), sizeof(double));
        s.skip_loss = packed[2 * sizeof(double)] != 0;
        s.skip_norm = packed[2 * sizeof(double) + 1] != 0;
    }
    s.skip = s.skip_loss || s.skip_norm;
    return s;
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
    d.last_disagree = d.last_votes != 0 && d.last_votes != num_processes;
    return d;
}
