// Model-based random testing through steppe's public API (see model.hpp).
//
// The CI slice runs fixed seeds. Environment:
//   STEPPE_MODEL_SEEDS=N       sequences to run (default: the CI slice; Model.RandomSequencesInPostgreSQL
//                              runs them on stores in a PostgreSQL server the test starts)
//   STEPPE_MODEL_FIRST_SEED=S  first seed (default 1); seed s uses config_for_seed(s)
//   STEPPE_MODEL_OPS=L         abstract ops per sequence (default 120)
//   STEPPE_MODEL_SECONDS=T     keep running further seeds until T seconds have passed
//   STEPPE_MODEL_VERBOSE=1     print every step
//   STEPPE_MODEL_NO_SHRINK=1   report a failure without shrinking it
//   STEPPE_MODEL_KEEP_GOING=1  go on after a failure
//   STEPPE_MODEL_REPLAY=...    run exactly the op list a failure printed (Model.Replay)
//   STEPPE_MODEL_REAL_FSYNC=1  call the real fdatasync too (durability is otherwise simulated by the fault env)
//   STEPPE_MODEL_TIMEOUT_MS=T  how long a worker may take to answer one step (default 120000)
//   STEPPE_EXPOSE_KNOWN_BUGS=1 no workaround for open engine bugs (docs/guarantees.md, "Known bugs")
// A long run is one command, e.g.
//   STEPPE_MODEL_SEEDS=5000 STEPPE_MODEL_OPS=300 build/debug/tests/model/model_test --gtest_filter=Model.RandomSequences
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>

#include "model.hpp"
#include "support/fault_env.hpp"
#include "support/pg_server.hpp"
#include "support/temp_dir.hpp"

using namespace steppe_model;
using steppe::test::fault_env;
using steppe::test::loss;

namespace {

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atol(v) : fallback;
}
bool env_flag(const char* name) { return env_long(name, 0) != 0; }

// Reports a failing sequence: shrunk (unless told not to), as a C++-like op list.
void report_failure(const config& cfg, const std::vector<op>& ops, const outcome& o, std::uint64_t seed) {
    std::printf("seed %llu fails (%s) at op %zu: %s\n", static_cast<unsigned long long>(seed), o.category.c_str(),
                o.op_index, o.message.c_str());
    std::vector<op> minimal = ops;
    outcome last = o;
    if (!env_flag("STEPPE_MODEL_NO_SHRINK")) {
        minimal = shrink(cfg, ops, o, last, static_cast<std::size_t>(env_long("STEPPE_MODEL_SHRINK_RUNS", 3000)),
                         static_cast<double>(env_long("STEPPE_MODEL_SHRINK_SECONDS", 300)));
        std::printf("shrunk from %zu to %zu ops\n", o.op_index + 1, minimal.size());
    }
    std::string text = report(cfg, minimal, last);
    std::printf("%s", text.c_str());
    ADD_FAILURE() << "model test failure, seed " << seed << " (" << last.category << "):\n" << text;
}

// Runs the seeds the environment asks for (by default `seeds` of `length`
// ops), on files or, with `pg`, on stores in the test process's PostgreSQL
// server.
void random_sequences(bool pg, long default_seeds, long default_length) {
    const long first = env_long("STEPPE_MODEL_FIRST_SEED", 1);
    const long seeds = env_long("STEPPE_MODEL_SEEDS", default_seeds);
    const long length = env_long("STEPPE_MODEL_OPS", default_length);
    const long seconds = env_long("STEPPE_MODEL_SECONDS", 0);
    const bool verbose = env_flag("STEPPE_MODEL_VERBOSE");
    auto start = std::chrono::steady_clock::now();
    run_stats total;
    long failures = 0;
    for (long i = 0;; ++i) {
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (i >= seeds && (seconds == 0 || elapsed >= static_cast<double>(seconds))) break;
        auto seed = static_cast<std::uint64_t>(first + i);
        config cfg = config_for_seed(seed);
        cfg.pg = pg;
        std::vector<op> ops = generate(seed, static_cast<std::size_t>(length));
        if (verbose) std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed), describe(cfg).c_str());
        steppe::test::temp_dir dir;
        outcome o = run(cfg, ops, dir.dir().string(), &total, verbose);
        if (o.failed) {
            ++failures;
            report_failure(cfg, ops, o, seed);
            if (!env_flag("STEPPE_MODEL_KEEP_GOING")) break;
        }
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("model: %s\n  %ld failing sequences; %.1f s\n", total.summary().c_str(), failures, elapsed);
    ::testing::Test::RecordProperty("sequences", static_cast<int>(total.runs));
    EXPECT_GT(total.commits, 0u);
    // Crash points and power loss are only real if the store's writes go
    // through the fault env its workers open it with (open_with_env).
    if (!pg) {
        EXPECT_GE(total.tracked_io, 2 * total.commits / 3)
            << "steppe's commits no longer write through the storage env: the fault env sees nothing";
    }
}

TEST(Model, RandomSequences) { random_sequences(false, 40, 120); }

// The same on stores in PostgreSQL (config::pg): a CI slice of a few seeds,
// the server crashed in commits and between steps.
TEST(Model, RandomSequencesInPostgreSQL) {
    std::string why;
    if (!steppe::test::pg_server::get(why)) GTEST_SKIP() << "no PostgreSQL server here: " << why;
    random_sequences(true, 4, 80);
}

TEST(Model, Replay) {
    const char* text = std::getenv("STEPPE_MODEL_REPLAY");
    if (!text) GTEST_SKIP() << "set STEPPE_MODEL_REPLAY to the string a failure printed";
    config cfg;
    std::vector<op> ops;
    ASSERT_TRUE(decode(text, cfg, ops)) << "cannot parse STEPPE_MODEL_REPLAY";
    steppe::test::temp_dir dir;
    run_stats stats;
    outcome o = run(cfg, ops, dir.dir().string(), &stats, true);
    if (o.failed) report_failure(cfg, ops, o, 0);
    std::printf("%s\n", stats.summary().c_str());
}

// The harness itself: a worker that loses writes, or whose commits do
// nothing, is caught, and the failure shrinks to a handful of ops.
void expect_caught(int sabotage, std::size_t max_ops) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        config cfg = config_for_seed(seed);
        cfg.sabotage = sabotage;
        std::vector<op> ops = generate(seed, 60);
        steppe::test::temp_dir dir;
        outcome o = run(cfg, ops, dir.dir().string());
        if (!o.failed) continue;
        outcome last;
        std::vector<op> minimal = shrink(cfg, ops, o, last, 400, 60);
        EXPECT_LE(minimal.size(), max_ops) << report(cfg, minimal, last);
        std::printf("sabotage %d caught (%s); shrunk to:\n%s", sabotage, o.category.c_str(),
                    report(cfg, minimal, last).c_str());
        return;
    }
    ADD_FAILURE() << "sabotage " << sabotage << " went unnoticed in 20 sequences";
}

TEST(ModelSelfTest, CatchesALostWriteAndShrinksIt) { expect_caught(1, 5); }
TEST(ModelSelfTest, CatchesACommitThatDoesNothingAndShrinksIt) { expect_caught(2, 5); }

// The harness itself: the fault env's kill mode, which the workers die by.
// A simulated power loss keeps synced writes and loses unsynced ones; kill
// -9 keeps both; an armed crash stops the process before the n-th I/O call.
std::string contents(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void put(steppe::storage::file& f, std::uint64_t at, std::string_view text) {
    f.write_at(at, std::as_bytes(std::span(text.data(), text.size())));
}

// Runs `body` in a child, which must die by SIGKILL.
void in_child_killed(const std::function<void()>& body) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        body();
        ::_exit(2);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

void write_then_crash(const std::string& dir, std::optional<loss> how) {
    in_child_killed([&] {
        fault_env env;
        auto f = env.open(dir + "/f", steppe::storage::open_mode::create_new, 0600);
        put(*f, 0, "durable.");
        f->sync();
        put(*f, 0, "LOST");
        put(*f, 8, "-and-more");
        env.kill_now(how, 1);
    });
}

TEST(FaultEnvKill, PowerLossLosesOnlyUnsyncedWrites) {
    steppe::test::temp_dir dir;
    write_then_crash(dir.dir().string(), loss::drop_all);
    EXPECT_EQ(contents(dir.path("f")), "durable.");
    std::filesystem::remove(dir.path("f"));
    write_then_crash(dir.dir().string(), loss::keep_all);
    EXPECT_EQ(contents(dir.path("f")), "LOSTble.-and-more");
}

TEST(FaultEnvKill, KillKeepsWhatWasWritten) {
    steppe::test::temp_dir dir;
    write_then_crash(dir.dir().string(), std::nullopt);
    EXPECT_EQ(contents(dir.path("f")), "LOSTble.-and-more");
}

TEST(FaultEnvKill, ArmedCrashStopsBeforeTheNthCall) {
    steppe::test::temp_dir dir;
    in_child_killed([&] {
        fault_env env;
        auto f = env.open(dir.path("f"), steppe::storage::open_mode::create_new, 0600);
        env.kill_after(2, loss::drop_all, 0);
        put(*f, 0, "a");  // call 0
        f->sync();        // call 1
        put(*f, 1, "b");  // call 2: never happens
    });
    EXPECT_EQ(contents(dir.path("f")), "a");
}

}  // namespace
