// A forked child process that talks to the test through pipes (readers,
// writers and killed processes in the multi-process tests).
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <stdexcept>
#include <vector>

namespace steppe::test {

// A child process: runs `body` with a pipe to the test (`talk`), exits with
// its result. The test says "go" by writing a byte.
class child {
public:
    explicit child(const std::function<int(child&)>& body) {
        if (::pipe(up_) != 0 || ::pipe(down_) != 0) throw std::runtime_error("pipe");
        std::fflush(nullptr);
        // fork fails for a moment on a loaded machine (ctest -j beside
        // PostgreSQL servers and kill tests: EAGAIN, ENOMEM). Unchecked,
        // the test went on as the parent of no child and waited for a
        // report that never came (a hang before this helper; "did not
        // report" with nothing to say why after it).
        for (int tries = 1; (pid_ = ::fork()) < 0; ++tries) {
            const int err = errno;
            if ((err != EAGAIN && err != ENOMEM) || tries == 100) {
                for (int fd : {up_[0], up_[1], down_[0], down_[1]}) ::close(fd);
                throw std::runtime_error("fork failed " + std::to_string(tries) + " times: " + std::strerror(err));
            }
            ::usleep(50000);
        }
        // Each side keeps its own ends only, so a side that dies is seen.
        ::close(pid_ == 0 ? up_[0] : up_[1]);
        ::close(pid_ == 0 ? down_[1] : down_[0]);
        if (pid_ == 0) {
            int rc = 99;
            try {
                rc = body(*this);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "child: %s\n", e.what());
            }
            std::fflush(nullptr);
            ::_exit(rc);
        }
    }
    ~child() { kill(); }
    // In the child: tells the test, then waits for its go.
    void report_and_wait() {
        char c = 1;
        (void)!::write(up_[1], &c, 1);
        (void)!::read(down_[0], &c, 1);
    }
    // In the child: a number for the test (not mixed with reports).
    void send(std::uint64_t v) { (void)!::write(up_[1], &v, sizeof v); }
    // In the test: the child's next number; false once the child is gone.
    bool receive(std::uint64_t& v) { return ::read(up_[0], &v, sizeof v) == ssize_t(sizeof v); }
    // As receive, but false too when the child sends nothing for `limit_seconds`.
    bool receive_within(std::uint64_t& v, int limit_seconds) { return says_within(limit_seconds) && receive(v); }
    // In the test: false once the child is gone, or when it has said
    // nothing for `limit` (then what it is doing is printed, and it is
    // killed), so a child that hangs fails the test instead of the test
    // hanging until ctest's timeout, which shows nothing.
    bool wait_for_report(int limit_seconds = 240) {
        if (!says_within(limit_seconds)) {
            std::fprintf(stderr, "child %d said nothing for %d s:\n", int(pid_), limit_seconds);
            describe(pid_);
            kill();
            return false;
        }
        char c;
        if (::read(up_[0], &c, 1) == 1) return true;
        // Gone without a word: say how it ended (a signal leaves no message).
        const int code = exit_code(10);
        std::fprintf(stderr, "child ended before it reported: %s %d\n", code >= 128 ? "signal" : "exit code",
                     code >= 128 ? code - 128 : code);
        return false;
    }
    void go() {
        char c = 1;
        (void)!::write(down_[1], &c, 1);
    }
    int exit_code(int limit_seconds = 240) {
        if (pid_ <= 0) return code_;  // reaped already (waitpid(-1) would take any child)
        int status = 0;
        for (int waited_ms = 0; ::waitpid(pid_, &status, WNOHANG) == 0; waited_ms += 10) {
            if (waited_ms >= limit_seconds * 1000) {
                std::fprintf(stderr, "child %d did not end in %d s:\n", int(pid_), limit_seconds);
                describe(pid_);
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                break;
            }
            ::usleep(10000);
        }
        pid_ = -1;
        return code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    void kill() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    pid_t pid() const { return pid_; }

    // What a process's threads are doing, from /proc (their kernel stacks
    // need root), for a test that found it hung.
    static void describe(pid_t pid) {
        const std::string task = "/proc/" + std::to_string(pid) + "/task";
        std::error_code ec;
        for (const auto& t : std::filesystem::directory_iterator(task, ec)) {
            std::fprintf(stderr, "  thread %s:", t.path().filename().c_str());
            for (const char* what : {"comm", "wchan", "syscall", "stack"}) {
                std::ifstream in(t.path() / what);
                std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
                std::fprintf(stderr, " %s: %s\n", what, text.c_str());
            }
        }
    }

private:
    // Whether the child has something to read (or has gone) within `limit_seconds`.
    bool says_within(int limit_seconds) {
        pollfd p{up_[0], POLLIN, 0};
        int ready;
        while ((ready = ::poll(&p, 1, limit_seconds * 1000)) < 0 && errno == EINTR) {
        }
        return ready > 0;
    }
    int up_[2], down_[2];
    pid_t pid_ = -1;
    int code_ = 128 + SIGKILL;  // exit_code's answer once reaped (kill() reaps it killed)
};

// Forks `rounds` children, one at a time, each making 2,000 allocations and
// exiting, while the test's other threads keep a store's threads busy: a
// child that inherited a lock one of them held inside a pass (an allocator
// without fork handlers, as GCC 12's AddressSanitizer's) waits forever in
// its first allocation. How many never finished (killed after 20 s) and
// how many ended otherwise than exit(0).
struct forked_children {
    int hung = 0, failed = 0;
};
inline forked_children fork_allocating_children(int rounds) {
    forked_children out;
    for (int round = 0; round < rounds; ++round) {
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        if (pid == 0) {
            std::vector<std::unique_ptr<char[]>> blocks;
            for (int k = 0; k < 2000; ++k) blocks.emplace_back(new char[16 + 97 * (k % 50)]);
            ::_exit(0);
        }
        int status = 0, waited_ms = 0;
        while (::waitpid(pid, &status, WNOHANG) == 0 && waited_ms < 20'000) {
            ::usleep(1000);
            ++waited_ms;
        }
        if (waited_ms >= 20'000) {
            ++out.hung;
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            ++out.failed;
        }
    }
    return out;
}

// What `body` returns, run in a forked child (limits set there stay there);
// an exception's message as "0|0|MESSAGE"; "the child reported nothing" if
// it died first (the OOM killer).
inline std::string in_child(const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    pid_t pid = ::fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        ::close(fds[0]);
        std::string report;
        try {
            report = body();
        } catch (const std::exception& e) {
            report = std::string("0|0|") + e.what();
        }
        if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(2);
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string report;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return report.empty() ? "the child reported nothing" : report;
}

}  // namespace steppe::test
