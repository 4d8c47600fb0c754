// Power loss at every write and sync of store creation, commit, checkpoint
// and recovery: for each crash point, every loss pattern of the unsynced
// writes (all kept, all lost, random subsets, a torn last write), then
// recovery must yield exactly the last completed commit or the one in flight.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "storage/storage.hpp"
#include "storage/wal_format.hpp"
#include "support/fault_env.hpp"
#include "support/store_model.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using steppe::test::fault_env;
using steppe::test::loss;
using steppe::test::simulated_crash;
using steppe::test::workload;

namespace {

constexpr std::uint64_t kTransactions = 24;

storage::options crash_options(storage::env* io, bool durable = true) {
    storage::options o;
    o.io = io;
    o.durable = durable;
    o.checkpoint_bytes = 6 * storage::page_frame_size;  // checkpoints happen mid-workload
    o.log_growth = 16 * 1024;                           // and the log grows several times
    return o;
}

struct pattern {
    loss mode;
    std::uint64_t seed;
};
const pattern kPatterns[] = {{loss::keep_all, 0},      {loss::drop_all, 0}, {loss::random_subset, 1},
                             {loss::random_subset, 2}, {loss::torn, 3},     {loss::torn, 4}};

// Runs the workload with a crash before I/O call `crash_at`; returns false if
// the workload finished first. `completed` is the last commit that returned.
bool run_until_crash(const std::string& path, fault_env& env, long crash_at, std::uint64_t& completed,
                     bool durable = true) {
    env.crash_after(crash_at);
    completed = 0;
    try {
        auto s = storage::storage::open(path, crash_options(&env, durable));
        completed = workload::committed_txn(*s);
        for (std::uint64_t t = completed + 1; t <= kTransactions; ++t) {
            workload::run_one(*s, t);
            completed = t;
        }
    } catch (const simulated_crash&) {
        return true;
    }
    return false;
}

void expect_one_of_two_states(const std::string& path, std::uint64_t completed, const std::string& where) {
    auto s = storage::storage::open(path, crash_options(nullptr));
    auto txn = workload::committed_txn(*s);
    EXPECT_TRUE(txn == completed || txn == completed + 1)
        << where << ": recovered txn " << txn << " but the last completed commit was " << completed;
    EXPECT_EQ(workload::verify(*s), "") << where;
    auto findings = s->check();
    EXPECT_TRUE(findings.empty()) << where << ": " << (findings.empty() ? "" : findings[0]);
}

// Runs the workload to each crash point in turn, under every loss pattern,
// and has `judge(path, completed, where)` look at what the loss left.
// Returns the crash points (the last I/O call + 1).
long at_every_crash_point(bool durable,
                          const std::function<void(const std::string&, std::uint64_t, const std::string&)>& judge) {
    long crash_points = 0;
    for (long crash_at = 0;; ++crash_at) {
        bool crashed = false;
        for (const auto& p : kPatterns) {
            test::temp_dir dir;
            auto path = dir.path("s.db");
            fault_env env;
            std::uint64_t completed;
            crashed = run_until_crash(path, env, crash_at, completed, durable);
            if (!crashed) break;
            env.power_loss(p.mode, p.seed + static_cast<std::uint64_t>(crash_at));
            judge(path, completed, "crash at I/O call " + std::to_string(crash_at) + ", " + to_string(p.mode));
            if (::testing::Test::HasFailure()) return crash_points;
        }
        if (!crashed) break;
        ++crash_points;
    }
    return crash_points;
}

TEST(PowerLoss, EveryCrashPointOfCreateCommitAndCheckpoint) {
    const long crash_points = at_every_crash_point(true, expect_one_of_two_states);
    std::printf("power loss: %ld crash points x %zu loss patterns = %ld recoveries checked\n", crash_points,
                std::size(kPatterns), crash_points * static_cast<long>(std::size(kPatterns)));
    EXPECT_GT(crash_points, 80);
}

// With durable = false a commit is not synced, so a power loss may take
// the last ones, never half of one, and what open then calls corrupt (the
// commit mark names a commit the loss took) steppe recover brings to a
// commit. Checkpoints did not sync either: a power loss kept a header
// without the pages it counted, or main-file pages that the log's
// differences no longer fit, and 186 of 500 such stores could not be
// recovered at all.
TEST(PowerLoss, WithoutDurableCommitsEveryCrashPointRecoversToACommit) {
    long salvaged = 0;
    const long crash_points =
        at_every_crash_point(false, [&](const std::string& path, std::uint64_t completed, const std::string& where) {
            std::unique_ptr<storage::storage> s;
            try {
                s = storage::storage::open(path, crash_options(nullptr));
            } catch (const error& e) {
                ASSERT_EQ(e.code(), errc::corrupt) << where << ": " << e.what();
                storage::options salvage = crash_options(nullptr);
                salvage.salvage = true;
                s = storage::storage::open(path, salvage);
                ++salvaged;
            }
            EXPECT_LE(workload::committed_txn(*s), completed + 1) << where;
            EXPECT_EQ(workload::verify(*s), "") << where;
            const auto findings = s->check();
            EXPECT_TRUE(findings.empty()) << where << ": " << (findings.empty() ? "" : findings[0]);
        });
    std::printf("power loss without durable commits: %ld crash points, %ld salvaged\n", crash_points, salvaged);
    EXPECT_GT(crash_points, 60);
}

// A crash during recovery (which rewrites the log header after an interrupted
// checkpoint) is recovered by the next open.
TEST(PowerLoss, CrashDuringRecoveryIsRecoveredByTheNextOpen) {
    long cases = 0;
    for (long crash_at = 0; crash_at < 200; crash_at += 3) {
        test::temp_dir dir;
        auto path = dir.path("s.db");
        fault_env env;
        std::uint64_t completed;
        if (!run_until_crash(path, env, crash_at, completed)) break;
        env.power_loss(loss::random_subset, static_cast<std::uint64_t>(crash_at));
        for (long recovery_crash = 0; recovery_crash < 8; ++recovery_crash) {
            fault_env again;
            again.crash_after(recovery_crash);
            try {
                auto s = storage::storage::open(path, crash_options(&again));
            } catch (const simulated_crash&) {
                again.power_loss(loss::torn, static_cast<std::uint64_t>(recovery_crash));
            }
        }
        expect_one_of_two_states(path, completed, "crash at " + std::to_string(crash_at) + " then in recovery");
        ++cases;
    }
    EXPECT_GT(cases, 20);
}

}  // namespace
