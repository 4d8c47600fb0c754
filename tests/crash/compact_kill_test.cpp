// `steppe compact --collect` killed with SIGKILL at random instants
// (docs/guarantees.md, "Compaction"): afterwards the store opens, check()
// finds nothing, everything the roots reach is as it was, and the store is
// the old one or the new one whole: its page count is the old store's or the
// compacted store's, nothing between (the collect frees 300 objects, so the
// two differ). Then a compaction of the survivor goes through.
// The same at every I/O call of a compaction in turn (the old store's
// checkpoint, the new file, the swap), as a power loss there leaves the
// files (tests/support/fault_env.hpp), until a compaction runs through.
// STEPPE_COMPACT_KILLS sets the number of kills (default 24), at instants up to 1.5 times what one compaction took.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "engine/open_internal.hpp"
#include "storage/storage.hpp"
#include "support/power_loss.hpp"
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
    steppe::test::remove_store_files(to);
    for (const char* suffix : {"", "-wal"})
        if (fs::exists(from + suffix)) fs::copy_file(from + suffix, to + suffix);
}

// A store built and 80 % deleted (`original`), what it holds, and its page
// count before and after `steppe compact --collect`; `path` is where each
// run compacts a fresh copy of it.
class CompactKill : public ::testing::Test {
protected:
    steppe::test::temp_dir dir;
    const std::string original = dir.path("original.db"), path = dir.path("s.db");
    std::string contents;
    std::uint64_t old_pages = 0, new_pages = 0;

    // Builds the store; compacts a copy by `compact`, which returns how long it took.
    void prepare(long items, long junk, const std::function<void()>& compact) {
        compact_model::build(original, items, junk);
        contents = compact_model::fingerprint(original);
        old_pages = page_count(original);
        copy_store(original, path);
        compact();
        new_pages = page_count(path);
        ASSERT_LT(new_pages, old_pages);
    }

    // The store at `path` is the old one or the new one: its page count is
    // one of the two, it checks clean and holds `contents`.
    void expect_old_or_new(const std::string& after) {
        std::uint64_t pages = page_count(path);
        ASSERT_TRUE(pages == old_pages || pages == new_pages) << after << ": " << pages << " pages";
        auto s = steppe::store::open(path, {.create = false});
        EXPECT_EQ(s.check(), std::vector<std::string>{}) << after;
        EXPECT_EQ(compact_model::fingerprint(s), contents) << after;
    }
};

TEST_F(CompactKill, AKillAtAnyInstantLeavesTheOldStoreOrTheNewOne) {
    std::chrono::steady_clock::duration took{};
    int status = 0;
    prepare(3000, 300, [&] {
        auto started = std::chrono::steady_clock::now();
        ::waitpid(start_compaction(path), &status, 0);
        took = std::chrono::steady_clock::now() - started;
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    });
    const char* kills_env = std::getenv("STEPPE_COMPACT_KILLS");
    const int kills = kills_env ? std::atoi(kills_env) : 24;
    const auto span = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    int olds = 0, news = 0;
    steppe::test::kill_at_random_instants(
        kills, span, [&] { copy_store(original, path); }, [&] { return start_compaction(path); },
        [&](int i) {
            (page_count(path) == old_pages ? olds : news)++;
            expect_old_or_new("kill " + std::to_string(i));
        });
    std::printf("%d kills over %lld us: %d left the old store, %d the new one\n", kills,
                static_cast<long long>(span), olds, news);
    ::waitpid(start_compaction(path), &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the survivor compacts";
    EXPECT_EQ(page_count(path), new_pages);
    EXPECT_EQ(compact_model::fingerprint(path), contents);
}

TEST_F(CompactKill, APowerLossAtEveryIoCallLeavesTheOldStoreOrTheNewOne) {
    prepare(300, 30, [&] { steppe::compact(path, {.collect = true}); });
    long calls = steppe::test::power_loss_at_each_call(
        [&] { copy_store(original, path); },
        [&](steppe::test::fault_env& io) { steppe::detail::compact_with_env(path, {.collect = true}, &io); },
        [&](const std::string& what, bool through) {
            expect_old_or_new(what);
            if (through) {
                EXPECT_EQ(page_count(path), new_pages);
            }
        });
    if (calls >= 0) std::printf("a power loss at each of the %ld I/O calls of a compaction\n", calls);
}

}  // namespace
