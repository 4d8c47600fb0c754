// kill -9 at random instants: a child process commits the workload's
// transactions and reports each one that returned; the parent kills it with
// SIGKILL after a random delay, reopens, and requires exactly the last
// reported commit or the one in flight. STEPPE_KILL_ITERATIONS sets the
// number of kills (default: a CI slice).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "storage/storage.hpp"
#include "storage/wal_format.hpp"
#include "support/store_model.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using steppe::test::workload;

namespace {

long iterations() {
    const char* v = std::getenv("STEPPE_KILL_ITERATIONS");
    return v ? std::atol(v) : 200;
}

storage::options kill_options() {
    storage::options o;
    o.checkpoint_bytes = 16 * storage::page_frame_size;
    return o;
}

[[noreturn]] void child_commits(const std::string& path, int report) {
    auto s = storage::storage::open(path, kill_options());
    for (std::uint64_t t = workload::committed_txn(*s) + 1;; ++t) {
        workload::run_one(*s, t);
        if (::write(report, &t, sizeof t) != sizeof t) ::_exit(3);
    }
}

TEST(KillNine, RandomKillsLeaveTheLastOrInFlightCommit) {
    test::temp_dir dir;
    auto path = dir.path("s.db");
    std::mt19937_64 rng(12345);
    long kills = 0;
    std::uint64_t last_reported = 0;
    for (long i = 0; i < iterations(); ++i) {
        int report[2];
        ASSERT_EQ(::pipe(report), 0);
        pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            ::close(report[0]);
            child_commits(path, report[1]);
        }
        ::close(report[1]);
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
        ::kill(child, SIGKILL);
        int status;
        ::waitpid(child, &status, 0);
        ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended on its own, status " << status;
        std::uint64_t t;
        while (::read(report[0], &t, sizeof t) == sizeof t) last_reported = t;
        ::close(report[0]);
        ++kills;

        auto s = storage::storage::open(path, kill_options());
        auto txn = workload::committed_txn(*s);
        ASSERT_TRUE(txn == last_reported || txn == last_reported + 1)
            << "kill " << i << ": recovered txn " << txn << ", last reported " << last_reported;
        ASSERT_EQ(workload::verify(*s), "") << "kill " << i;
        last_reported = txn;
    }
    std::printf("kill -9: %ld kills, %llu commits survived in order\n", kills,
                static_cast<unsigned long long>(last_reported));
}

}  // namespace
