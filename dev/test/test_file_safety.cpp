// Tests for how the project opens files (llmc/utils.h): every reader opens regular files only, so a
// FIFO (or a folder, a device) given as an input is refused by name instead of blocking the reader
// forever; every writer creates a new temporary file under a random name (never through a link
// planted at a fixed name) and renames it over the target (replacing a link there, never writing
// through it); main.log (llmc/logger.h) likewise. Each FIFO check runs in a death-test child with an
// alarm: a reader that blocks is killed by SIGALRM, which fails the check instead of hanging it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "llmc/dataloader.h"
#include "llmc/eval_loader.h"
#include "llmc/logger.h"
#include "llmc/model_file.h"
#include "llmc/run_state.h"
#include "llmc/tokenizer.h"
#include "llmc/utils.h"
#include "debug_state.h"
#include "test_util.h"

namespace {

constexpr unsigned kHangSeconds = 10;  // a reader still waiting on a FIFO after this is killed

struct Dirs {
    TempDir dir{"test_file_safety"};
    TempDir outside{"test_file_safety"};
    std::string victim = outside.path + "/victim.txt";
    Dirs() { write_file(victim, "victim\n"); }
    std::string fifo(const std::string& name) const {
        const std::string p = dir.file(name);
        if (mkfifo(p.c_str(), 0644) != 0) abort();
        return p;
    }
    std::string link_to_victim(const std::string& name) const {
        const std::string p = dir.file(name);
        if (symlink(victim.c_str(), p.c_str()) != 0) abort();
        return p;
    }
};

bool is_regular_file(const std::string& p) {
    struct stat sb;
    return lstat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

}  // namespace

// ----------------------------------------------------------------------------
// inputs: regular files only

TEST(Inputs, FifoIsRefusedNotWaitedOn) {
    Dirs d;
    const std::string fifo = d.fifo("input.bin");
    // the generic open names the path; a reader of a file of ours names its kind too ("model file '...'")
    const char* refused = "'.*/input.bin' is a FIFO \\(named pipe\\), not a regular file";
    GPT2Config cfg;
    ASSERT_TRUE(gpt2_config_from_descriptor("custom:L1,C64,NH1", &cfg));
    EXPECT_EXIT({ alarm(kHangSeconds); fopen_check(fifo.c_str(), "rb"); }, testing::ExitedWithCode(1), refused);
    EXPECT_EXIT({ alarm(kHangSeconds); model_file_read_header(fifo.c_str()); }, testing::ExitedWithCode(1), refused);
    EXPECT_EXIT({ alarm(kHangSeconds); run_state_peek(fifo); }, testing::ExitedWithCode(1), refused);
    EXPECT_EXIT({ alarm(kHangSeconds); debug_state_read(fifo.c_str(), cfg); }, testing::ExitedWithCode(1), refused);
    EXPECT_EXIT({ alarm(kHangSeconds); Tokenizer t; tokenizer_init(&t, fifo.c_str()); }, testing::ExitedWithCode(1), refused);
    EXPECT_EXIT({ alarm(kHangSeconds); EvalLoader el; eval_loader_init(&el, fifo.c_str(), 4, 64, 0, 1); },
                testing::ExitedWithCode(1), refused);
    EXPECT_EXIT({ alarm(kHangSeconds); DataLoader dl; dataloader_init(&dl, fifo.c_str(), "-i", 1, 4, 0, 1, false); },
                testing::ExitedWithCode(1), refused);
    // an append or a write to a FIFO would block as well (until a reader comes)
    EXPECT_EXIT({ alarm(kHangSeconds); fopen_check(fifo.c_str(), "ab"); }, testing::ExitedWithCode(1),
                "cannot open '.*/input.bin'|not a regular file");
}

TEST(Inputs, FolderIsRefusedByName) {
    Dirs d;
    EXPECT_EXIT(fopen_check(d.dir.path.c_str(), "rb"), testing::ExitedWithCode(1),
                "is a directory, not a regular file: refusing to read it");
}

TEST(Inputs, MissingFileIsNullForTheCallerToName) {
    Dirs d;
    errno = 0;
    EXPECT_EQ(fopen_input(d.dir.file("missing").c_str()), nullptr);
    EXPECT_EQ(errno, ENOENT);
    EXPECT_EXIT(fopen_check(d.dir.file("missing").c_str(), "rb"), testing::ExitedWithCode(1),
                "cannot open '.*/missing' \\(mode rb\\): No such file or directory");
}

TEST(Inputs, LinkToARegularFileIsRead) {
    Dirs d;
    const std::string link = d.link_to_victim("data.txt");
    FilePtr fp(fopen_check(link.c_str(), "rb"));
    char buf[16] = {};
    EXPECT_EQ(fread(buf, 1, sizeof(buf), fp.get()), 7u);
    EXPECT_STREQ(buf, "victim\n");
    // and it reads blocking (O_NONBLOCK is only for the open)
    EXPECT_EQ(fcntl(fileno(fp.get()), F_GETFL) & O_NONBLOCK, 0);
}

// ----------------------------------------------------------------------------
// outputs: never through a link

TEST(Outputs, OpenForWritingRefusesALink) {
    Dirs d;
    const std::string link = d.link_to_victim("out.txt");
    for (const char* mode : {"wb", "ab", "r+b"}) {
        EXPECT_EXIT(fopen_check(link.c_str(), mode), testing::ExitedWithCode(1),
                    "cannot open '.*/out.txt' for writing: it is a symbolic link");
    }
    EXPECT_EQ(read_file(d.victim), "victim\n");
}

// Earlier builds wrote every such file to "<path>.tmp" with fopen(.., "wb"), so a link planted there
// redirected the write to any file the process may write.
TEST(Outputs, AtomicFileNeverWritesThroughALink) {
    Dirs d;
    const std::string path = d.dir.file("out.bin");
    d.link_to_victim("out.bin.tmp");  // the fixed name of earlier builds
    AtomicFile f = atomic_file_open(path);
    EXPECT_EQ(f.tmp_path.compare(0, path.size() + 5, path + ".tmp."), 0) << f.tmp_path;
    fwrite_check("new\n", 1, 4, f.fp, f.tmp_path.c_str());
    atomic_file_commit(f);
    EXPECT_EQ(read_file(d.victim), "victim\n");
    EXPECT_EQ(read_file(path), "new\n");
    EXPECT_EQ(temp_files_of(path), std::vector<std::string>{path + ".tmp"});  // the planted link only

    // a link at the target itself is replaced by the new file
    const std::string target = d.link_to_victim("target.bin");
    AtomicFile g = atomic_file_open(target);
    fwrite_check("new\n", 1, 4, g.fp, g.tmp_path.c_str());
    atomic_file_commit(g);
    EXPECT_EQ(read_file(d.victim), "victim\n");
    EXPECT_TRUE(is_regular_file(target));
    EXPECT_EQ(read_file(target), "new\n");
}

TEST(Outputs, AtomicFileNamesAreNewEachTimeAndMode0644) {
    Dirs d;
    const std::string path = d.dir.file("out.bin");
    const mode_t old_umask = umask(022);
    AtomicFile a = atomic_file_open(path), b = atomic_file_open(path);
    umask(old_umask);
    EXPECT_NE(a.tmp_path, b.tmp_path);
    struct stat sb;
    ASSERT_EQ(stat(a.tmp_path.c_str(), &sb), 0);
    EXPECT_EQ(sb.st_mode & 0777, 0644u);
    atomic_file_commit(a);
    atomic_file_commit(b);
    EXPECT_TRUE(temp_files_of(path).empty());
}

TEST(Outputs, AtomicFileDroppedUncommittedDeletesItsTemporaryFile) {
    Dirs d;
    const std::string path = d.dir.file("out.bin");
    {
        AtomicFile f = atomic_file_open(path);
        fwrite_check("half", 1, 4, f.fp, f.tmp_path.c_str());
    }  // as when fatal() throws (fuzz builds) between open and commit
    EXPECT_TRUE(temp_files_of(path).empty());
    EXPECT_FALSE(is_regular_file(path));
}

// main.log: a fresh start replaces a link at main.log (never truncating what it points to), a resume
// refuses one (its lines are not read from elsewhere), and a link at main.log.tmp (earlier builds'
// temporary name on resume) is never written through.
TEST(Outputs, LogNeverWritesThroughALink) {
    Dirs d;
    d.link_to_victim("main.log");
    d.link_to_victim("main.log.tmp");
    Logger lg;
    logger_init(&lg, d.dir.path.c_str(), 0, 0);
    logger_log_val(&lg, 0, 1.0f);
    logger_free(&lg);
    EXPECT_EQ(read_file(d.victim), "victim\n");
    EXPECT_TRUE(is_regular_file(d.dir.file("main.log")));
    EXPECT_EQ(read_file(d.dir.file("main.log")), "s:0 tel:1.0000\n");
    // resume: trimmed and appended to (still a regular file of ours)
    logger_init(&lg, d.dir.path.c_str(), 0, 1);
    logger_log_val(&lg, 1, 2.0f);
    logger_free(&lg);
    EXPECT_EQ(read_file(d.dir.file("main.log")), "s:0 tel:1.0000\ns:1 tel:2.0000\n");
    EXPECT_EQ(read_file(d.victim), "victim\n");
    // resume with a link at main.log
    ASSERT_EQ(unlink(d.dir.file("main.log").c_str()), 0);
    d.link_to_victim("main.log");
    EXPECT_EXIT(logger_init(&lg, d.dir.path.c_str(), 0, 1), testing::ExitedWithCode(1),
                "main.log' is a symbolic link: the log in -o is rewritten on resume");
    // a FIFO at main.log on resume: refused, not waited on
    ASSERT_EQ(unlink(d.dir.file("main.log").c_str()), 0);
    d.fifo("main.log");
    EXPECT_EXIT({ alarm(kHangSeconds); logger_init(&lg, d.dir.path.c_str(), 0, 1); }, testing::ExitedWithCode(1),
                "main.log' is a FIFO \\(named pipe\\), not a regular file");
    EXPECT_EQ(read_file(d.victim), "victim\n");
}
