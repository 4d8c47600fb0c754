// main() of every test program: GoogleTest's, plus a report on a hang.
//
// ctest kills a test that runs past its timeout and shows only what the
// test had printed, which for a hang is nothing about where it hangs. So a
// test still running STEPPE_TEST_HANG_SECONDS (default 540: under the 600
// ctest is given in scripts/test) after it started prints,
// for itself and each child process, every thread's name, wait channel,
// system call and kernel stack, then kills the children (which may hold
// ctest's output pipe) and exits 124. The report runs in a SIGALRM
// handler, so it uses only open, read, write, getdents64 and kill (and
// glibc's backtrace, whose first call may allocate: the process ends anyway).
#include <gtest/gtest.h>

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/sigsafe.hpp"

namespace {

constexpr int default_hang_seconds = 540;

void say(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void copy_file(const char* path) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) (void)!::write(STDERR_FILENO, buf, size_t(n));
    ::close(fd);
}

// Calls f(name) for each entry of the directory `path` but . and ..
template <class F>
void for_each_entry(const char* path, F f) {
    int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    alignas(8) char buf[8192];
    long n;
    while ((n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long at = 0; at < n;) {
            auto* d = reinterpret_cast<dirent64*>(buf + at);
            if (std::strcmp(d->d_name, ".") != 0 && std::strcmp(d->d_name, "..") != 0) f(d->d_name);
            at += d->d_reclen;
        }
    }
    ::close(fd);
}

void describe_process(const char* pid) {
    char task_dir[64];
    steppe::common::fixed_message(task_dir, sizeof task_dir) << "/proc/" << pid << "/task";
    for_each_entry(task_dir, [&](const char* tid) {
        say("--- process ");
        say(pid);
        say(", thread ");
        say(tid);
        say("\n");
        for (const char* what : {"comm", "wchan", "syscall", "stack"}) {
            char path[128];
            steppe::common::fixed_message(path, sizeof path) << task_dir << "/" << tid << "/" << what;
            say(what);
            say(": ");
            copy_file(path);
            if (std::strcmp(what, "wchan") == 0) say("\n");
        }
    });
}

// The children of every thread of this process (one level: a test's own
// children are the processes it waits for).
template <class F>
void for_each_child(F f) {
    for_each_entry("/proc/self/task", [&](const char* tid) {
        char path[128];
        steppe::common::fixed_message(path, sizeof path) << "/proc/self/task/" << tid << "/children";
        int fd = ::open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        char list[1024];
        ssize_t n = ::read(fd, list, sizeof list - 1);
        ::close(fd);
        list[n > 0 ? n : 0] = '\0';
        for (char* p = list; *p;) {
            char* end = p;
            while (*end && *end != ' ') ++end;
            const bool last = *end == '\0';
            *end = '\0';
            if (*p) f(p);
            p = last ? end : end + 1;
        }
    });
}

void report_hang(int) {
    say("\nsteppe test: this test process is still running after its hang limit (STEPPE_TEST_HANG_SECONDS); "
        "what its threads and its children's threads are doing:\n");
    say("--- the user-space stack of the thread that took the alarm (addr2line -e PROGRAM turns the offsets into "
        "lines):\n");
    void* frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
    describe_process("self");
    for_each_child([](const char* pid) { describe_process(pid); });
    for_each_child([](const char* pid) { ::kill(::atoi(pid), SIGKILL); });
    ::_exit(124);
}

// The limit runs from each test's start, so a whole program run by hand
// (many tests) is not cut short; 0 turns it off (long model runs).
class hang_limit : public testing::EmptyTestEventListener {
public:
    explicit hang_limit(unsigned seconds) : seconds_(seconds) {
        struct sigaction sa {};
        sa.sa_handler = report_hang;
        ::sigemptyset(&sa.sa_mask);
        ::sigaction(SIGALRM, &sa, nullptr);
    }
    void OnTestStart(const testing::TestInfo&) override { ::alarm(seconds_); }
    void OnTestEnd(const testing::TestInfo&) override { ::alarm(0); }

private:
    unsigned seconds_;
};

}  // namespace

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    const char* text = std::getenv("STEPPE_TEST_HANG_SECONDS");
    if (const int seconds = text ? std::atoi(text) : default_hang_seconds; seconds > 0)
        testing::UnitTest::GetInstance()->listeners().Append(new hang_limit(unsigned(seconds)));
    return RUN_ALL_TESTS();
}
