// kill -9 during the checkpoint a clean close makes. Each round a child opens
// the store (finishing whatever checkpoint the previous kill interrupted),
// rewrites a 4 MiB array in one durable commit that stays in the log, reports
// it, and closes the store: the close copies the commit into the main file.
// The parent kills the child at a random instant of that close (the first
// round, not killed, measures how long a close takes), then a fresh process
// opens the store read-only (so the next child, not the checker, meets what
// the kill left) and finds the reported commit, every word of it, and a clean
// check(). STEPPE_CLOSE_KILL_ITERATIONS sets the number of kills (default 30).
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "support/temp_dir.hpp"

namespace close_crash {
struct Root {
    std::uint64_t txn;  // the last transaction committed
    std::uint64_t* words;
};
}  // namespace close_crash

using close_crash::Root;

namespace {

constexpr std::uint64_t kWords = (4u << 20) / sizeof(std::uint64_t);  // 1,024 pages

std::uint64_t word(std::uint64_t txn, std::uint64_t i) {
    std::uint64_t z = txn * 0x9E3779B97F4A7C15ull + i;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    return z ^ (z >> 29);
}

steppe::open_options options(bool read_only = false) {
    steppe::open_options o;
    o.durable = true;
    o.read_only = read_only;
    o.create = !read_only;
    return o;
}

// The child: one commit, reported with its number, then the close, whose
// duration in microseconds it reports if it lives that long.
[[noreturn]] void commit_then_close(const std::string& path, int report) {
    try {
        auto s = steppe::store::open(path, options());
        Root* r = s.root<Root>("root");
        if (!r->words) r->words = s.make_array<std::uint64_t>(kWords);
        std::uint64_t t = r->txn + 1;
        for (std::uint64_t i = 0; i < kWords; ++i) r->words[i] = word(t, i);
        r->txn = t;
        s.commit();
        if (::write(report, &t, sizeof t) != sizeof t) ::_exit(3);
        auto start = std::chrono::steady_clock::now();
        s.close();
        std::uint64_t us = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
        if (::write(report, &us, sizeof us) != sizeof us) ::_exit(3);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        ::_exit(2);
    }
    ::_exit(0);
}

// In a fresh process: "" if the store holds transaction `txn` whole and
// check() finds nothing, else what differs.
std::string verify(const std::string& path, std::uint64_t txn) {
    int answer[2];
    if (::pipe(answer) != 0) return "pipe failed";
    pid_t checker = ::fork();
    if (checker == 0) {
        ::close(answer[0]);
        std::string diff;
        try {
            auto s = steppe::store::open(path, options(true));
            Root* r = s.find_root<Root>("root");
            if (!r || r->txn != txn)
                diff = "found txn " + std::to_string(r ? r->txn : 0) + ", expected " + std::to_string(txn);
            for (std::uint64_t i = 0; diff.empty() && i < kWords; ++i)
                if (r->words[i] != word(txn, i)) diff = "word " + std::to_string(i) + " differs";
            if (diff.empty())
                if (auto findings = s.check(); !findings.empty()) diff = "check(): " + findings[0];
        } catch (const std::exception& e) {
            diff = std::string("open threw: ") + e.what();
        }
        (void)!::write(answer[1], diff.data(), diff.size());
        ::_exit(0);
    }
    ::close(answer[1]);
    std::string diff;
    char buf[512];
    for (ssize_t n; (n = ::read(answer[0], buf, sizeof buf)) > 0;) diff.append(buf, static_cast<std::size_t>(n));
    ::close(answer[0]);
    int status = 0;
    ::waitpid(checker, &status, 0);
    if (!WIFEXITED(status)) return "the checker died, status " + std::to_string(status);
    return diff;
}

TEST(CloseKillNine, AKillDuringTheCloseCheckpointLosesNoCommit) {
    const char* env = std::getenv("STEPPE_CLOSE_KILL_ITERATIONS");
    const long iterations = env && *env ? std::atol(env) : 30;
    steppe::test::temp_dir dir;
    const std::string path = dir.path("s.db");
    std::mt19937_64 rng(2024);
    std::uint64_t close_us = 0, closes_completed = 0, killed_in_close = 0;
    for (long i = 0; i <= iterations; ++i) {
        int report[2];
        ASSERT_EQ(::pipe(report), 0);
        std::fflush(stdout);
        pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            ::close(report[0]);
            commit_then_close(path, report[1]);
        }
        ::close(report[1]);
        std::uint64_t txn = 0, us = 0;
        ASSERT_EQ(::read(report[0], &txn, sizeof txn), static_cast<ssize_t>(sizeof txn))
            << "round " << i << ": the child did not commit (see its message above)";
        if (i == 0) {  // the calibration round: the close runs to its end
            ASSERT_EQ(::read(report[0], &us, sizeof us), static_cast<ssize_t>(sizeof us));
            close_us = us;
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % (close_us + close_us / 4 + 1)));
            ::kill(child, SIGKILL);
            if (::read(report[0], &us, sizeof us) == sizeof us) ++closes_completed;
            else ++killed_in_close;
        }
        ::close(report[0]);
        int status = 0;
        ::waitpid(child, &status, 0);
        ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
            << "round " << i << ": the child ended with status " << status;
        std::string diff = verify(path, txn);
        ASSERT_EQ(diff, "") << "round " << i << ": after commit " << txn << " and a kill during the close";
    }
    EXPECT_GT(killed_in_close, 0u) << "no kill landed inside a close";
    std::printf("close kill -9: a close of a 4 MiB commit took %llu us; %llu kills inside the close, %llu after it, "
                "no commit lost\n",
                static_cast<unsigned long long>(close_us), static_cast<unsigned long long>(killed_in_close),
                static_cast<unsigned long long>(closes_completed));
}

}  // namespace
