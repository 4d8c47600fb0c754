// `steppe compact --collect` killed with SIGKILL at random instants
// (docs/guarantees.md, "Compaction"): afterwards the store opens, check()
// finds nothing, everything the roots reach is as it was, and the store is
// the old one or the new one whole: its page count is the old store's or the
// compacted store's, nothing between (the collect frees 300 objects, so the
// two differ). Then a compaction of the survivor goes through.
// STEPPE_COMPACT_KILLS sets the number of kills (default 24), at instants up to 1.5 times what one compaction took.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "storage/storage.hpp"
#include "support/compact_model.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

std::string cli_path() {
    if (const char* p = std::getenv("STEPPE_CLI")) return p;
    return (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "tools" / "steppe").string();
}

pid_t start_compaction(const std::string& path) {
    pid_t child = ::fork();
    if (child == 0) {
        std::string cli = cli_path();
        ::execl(cli.c_str(), cli.c_str(), "compact", "--collect", path.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    return child;
}

std::uint64_t page_count(const std::string& path) {
    auto s = steppe::storage::storage::open(path, {.create = false, .read_only = true});
    return s->page_count();
}

// The store's files as `build` left them, copied to `to`.
void copy_store(const std::string& from, const std::string& to) {
    for (const char* suffix : {"", "-wal", ".compact", "-shm"}) fs::remove(to + suffix);
    for (const char* suffix : {"", "-wal"})
        if (fs::exists(from + suffix)) fs::copy_file(from + suffix, to + suffix);
}

TEST(CompactKill, AKillAtAnyInstantLeavesTheOldStoreOrTheNewOne) {
    steppe::test::temp_dir dir;
    const std::string original = dir.path("original.db"), path = dir.path("s.db");
    compact_model::build(original, 3000, 300);
    const std::string contents = compact_model::fingerprint(original);
    const std::uint64_t old_pages = page_count(original);

    copy_store(original, path);
    auto started = std::chrono::steady_clock::now();
    int status = 0;
    ::waitpid(start_compaction(path), &status, 0);
    const auto took = std::chrono::steady_clock::now() - started;
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const std::uint64_t new_pages = page_count(path);
    ASSERT_LT(new_pages, old_pages);

    const char* kills_env = std::getenv("STEPPE_COMPACT_KILLS");
    const int kills = kills_env ? std::atoi(kills_env) : 24;
    std::mt19937_64 random(std::random_device{}());
    const auto span = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    int olds = 0, news = 0;
    for (int i = 0; i < kills; ++i) {
        copy_store(original, path);
        pid_t child = start_compaction(path);
        std::this_thread::sleep_for(std::chrono::microseconds(random() % (span * 3 / 2 + 1)));
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        std::uint64_t pages = page_count(path);
        ASSERT_TRUE(pages == old_pages || pages == new_pages) << "kill " << i << ": " << pages << " pages";
        (pages == old_pages ? olds : news)++;
        auto s = steppe::store::open(path, {.create = false});
        EXPECT_EQ(s.check(), std::vector<std::string>{}) << "kill " << i;
        EXPECT_EQ(compact_model::fingerprint(s), contents) << "kill " << i;
    }
    std::printf("%d kills over %lld us: %d left the old store, %d the new one\n", kills,
                static_cast<long long>(span), olds, news);
    ::waitpid(start_compaction(path), &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the survivor compacts";
    EXPECT_EQ(page_count(path), new_pages);
    EXPECT_EQ(compact_model::fingerprint(path), contents);
}

}  // namespace
