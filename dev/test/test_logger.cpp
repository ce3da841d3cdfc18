// Tests for llmc/logger.h: llm.c's main.log line format, truncation on a fresh start, trimming of
// steps >= the resume step, and no output on other processes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "llmc/logger.h"
#include "test_util.h"

namespace {

// The log's contents, or "<missing>" so that no file is told apart from an empty one.
std::string read_log(const std::string& p) {
    if (access(p.c_str(), R_OK) != 0) return "<missing>";
    return read_file(p);
}

// One logger session in dir as process `rank` resuming at `resume_step` (0: a fresh start):
// log(&lg) writes the lines; returns main.log after logger_free.
template <class Log>
std::string log_session(const TempDir& dir, int rank, int resume_step, Log&& log) {
    Logger lg;
    logger_init(&lg, dir.path.c_str(), rank, resume_step);
    log(&lg);
    logger_free(&lg);
    return read_log(dir.file("main.log"));
}

}  // namespace

TEST(Logger, LineFormatAndFlushPerLine) {
    TempDir dir("test_logger");
    Logger lg;
    logger_init(&lg, dir.path.c_str(), 0, 0);
    logger_log_val(&lg, 0, 10.98766f);
    logger_log_eval(&lg, 0, 0.25f);
    logger_log_train(&lg, 0, 10.5f, 6e-6f, 12.345f);
    // visible before close: every line is flushed
    EXPECT_EQ(read_log(dir.path + "/main.log"),
              "s:0 tel:10.9877\ns:0 eval:0.2500\ns:0 trl:10.5000 lr:0.000006 norm:12.35\n");
    logger_free(&lg);
}

TEST(Logger, FreshStartTruncates) {
    TempDir dir("test_logger");
    write_file(dir.path + "/main.log", "s:0 trl:1.0000 lr:0.1 norm:1.00\n");
    EXPECT_EQ(log_session(dir, 0, 0, [](Logger* lg) { logger_log_val(lg, 0, 2.0f); }), "s:0 tel:2.0000\n");
}

// llm.c's loop (train_gpt2.cu at f1e2ace): for step = 0..N: val (every -v and at N) logged "s:step",
// then, unless step == N, one update logged "s:step trl" (the loop index: update 1 is s:0).
TEST(Logger, TrainLinesNumberedByLoopIndexAsLlmc) {
    TempDir dir("test_logger");
    const std::string log = log_session(dir, 0, 0, [](Logger* lg) {
        const int N = 3, val_every = 2;
        for (int step = 0; step <= N; step++) {
            if (step % val_every == 0 || step == N) logger_log_val(lg, step, 5.0f - step);
            if (step == N) break;
            logger_log_train(lg, step, 5.5f - step, 1e-4f, 1.0f);
        }
    });
    EXPECT_EQ(log,
              "s:0 tel:5.0000\n"
              "s:0 trl:5.5000 lr:0.000100 norm:1.00\n"
              "s:1 trl:4.5000 lr:0.000100 norm:1.00\n"
              "s:2 tel:3.0000\n"
              "s:2 trl:3.5000 lr:0.000100 norm:1.00\n"
              "s:3 tel:2.0000\n");
}

TEST(Logger, ResumeDropsLinesTheResumedRunWritesAgain) {
    // Loop order: at step k log val/eval "s:k", save checkpoint k, update, log train "s:k".
    // Resuming from checkpoint 2 writes s:2 tel/eval and s:2 trl again: every s >= 2 goes.
    TempDir dir("test_logger");
    write_file(dir.path + "/main.log",
               "s:0 tel:5.0000\n"
               "s:0 trl:5.1000 lr:0.000100 norm:3.00\n"
               "s:1 trl:4.9000 lr:0.000200 norm:2.00\n"
               "some note\n"
               "s:2 tel:4.5000\n"
               "s:2 eval:0.2600\n"
               "s:2 trl:4.4000 lr:0.000300 norm:1.00\n"
               "s:3 trl:4.3000 lr:0.000300 norm:1.00\n"
               "s:4 tel:4.2000\n"
               "s:10 trl:4.3");  // a crashed run's partial last line
    const std::string log = log_session(dir, 0, 2, [](Logger* lg) {  // resume from checkpoint 2
        logger_log_val(lg, 2, 4.25f);
        logger_log_train(lg, 2, 4.0f, 3e-4f, 1.0f);
    });
    EXPECT_EQ(log,
              "s:0 tel:5.0000\n"
              "s:0 trl:5.1000 lr:0.000100 norm:3.00\n"
              "s:1 trl:4.9000 lr:0.000200 norm:2.00\n"
              "some note\n"
              "s:2 tel:4.2500\n"
              "s:2 trl:4.0000 lr:0.000300 norm:1.00\n");
    EXPECT_TRUE(temp_files_of(dir.file("main.log")).empty());
}

TEST(Logger, ResumeWithoutExistingLogCreatesIt) {
    TempDir dir("test_logger");
    EXPECT_EQ(log_session(dir, 0, 7, [](Logger* lg) { logger_log_train(lg, 7, 1.0f, 0.5f, 0.5f); }),
              "s:7 trl:1.0000 lr:0.500000 norm:0.50\n");
}

TEST(Logger, OnlyRankZeroWithADirectoryLogs) {
    TempDir dir("test_logger");
    EXPECT_EQ(log_session(dir, 1, 0, [](Logger* lg) { logger_log_val(lg, 0, 1.0f); }), "<missing>");
    Logger lg;
    logger_init(&lg, nullptr, 0, 0);
    logger_log_val(&lg, 0, 1.0f);  // no crash, no file
    logger_free(&lg);
}

TEST(Logger, UnwritableDirectoryIsAClearError) {
    Logger lg;
    EXPECT_EXIT(logger_init(&lg, "/nonexistent_dir_for_test", 0, 0), ::testing::ExitedWithCode(1),
                "cannot open '/nonexistent_dir_for_test/main.log'");
}
