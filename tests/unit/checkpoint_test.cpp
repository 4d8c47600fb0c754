// Checkpoints through the public API: store::checkpoint(), the checkpoint a
// clean close makes (open_options::checkpoint_on_close), store::close(), and
// what each leaves in the main file and the log (storage::describe()).
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "storage/storage.hpp"
#include "support/store_fixture.hpp"

namespace checkpoints {
struct Node {
    long value;
    Node* next;
};
}  // namespace checkpoints

using checkpoints::Node;
namespace fs = std::filesystem;

namespace {

class CheckpointTest : public steppe::test::store_fixture {
protected:
    // `commits` commits of `per_commit` nodes each, pushed on the list "list".
    void build(steppe::store& s, int commits, long per_commit = 1000) {
        Node** head = s.root<Node*>("list");
        for (int c = 0; c < commits; ++c) {
            for (long i = 0; i < per_commit; ++i) *head = s.make<Node>(Node{count_, *head}), ++count_;
            s.commit();
        }
    }
    // `n` more nodes pushed on "list", not committed: count_ counts them
    // only once the test commits them.
    void build_uncommitted(steppe::store& s, long n) const {
        Node** head = s.find_root<Node*>("list");
        for (long i = 0; i < n; ++i) *head = s.make<Node>(Node{count_ + i, *head});
    }
    // The log and main file as a reader sees them (no writer may hold the store).
    steppe::storage::info describe() const {
        return steppe::storage::storage::open(path, {.create = false, .read_only = true})->describe();
    }
    // The list holds count_ nodes, newest first, and check() finds nothing.
    void expect_whole(const std::string& store_path) const {
        const long n = count_;
        pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            int rc = 0;
            try {
                steppe::open_options o = options();
                o.read_only = true;
                o.create = false;
                auto s = steppe::store::open(store_path, o);
                long expect = n - 1;
                for (Node* p = *s.find_root<Node*>("list"); p; p = p->next, --expect)
                    if (p->value != expect) rc = 1;
                if (expect != -1 || !s.check().empty()) rc = 1;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "child: %s\n", e.what());
                rc = 2;
            }
            ::_exit(rc);
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << store_path << " does not hold the " << n << " nodes committed, or check() has findings";
    }
    long count_ = 0;
};

TEST_P(CheckpointTest, CleanCloseLeavesEveryCommitInTheMainFileAndNoneInTheLog) {
    {
        auto s = open();
        build(s, 3);
    }
    auto i = describe();
    EXPECT_EQ(i.txn_seq, 3u);
    EXPECT_EQ(i.wal_commits, 0u) << "the close checkpointed";
    EXPECT_EQ(i.wal_pages, 0u);
    EXPECT_EQ(i.wal_bytes_used, 0u);
    EXPECT_GE(i.main_file_bytes, (steppe::storage::physical_page(i.page_count - 1) + 1) * steppe::storage::page_size)
        << "the main file has room for every page";
    expect_whole(path);
}

TEST_P(CheckpointTest, CheckpointOnCloseOffLeavesTheCommitsInTheLog) {
    {
        auto s = open([](steppe::open_options& o) { o.checkpoint_on_close = false; });
        build(s, 3);
    }
    auto i = describe();
    EXPECT_EQ(i.wal_commits, 3u);
    EXPECT_GT(i.wal_pages, 0u);
    expect_whole(path);
    { auto s = open(); }  // a writable open checkpoints them
    EXPECT_EQ(describe().wal_commits, 0u);
    expect_whole(path);
}

TEST_P(CheckpointTest, CheckpointEmptiesTheLogAndTheStoreGoesOn) {
    auto s = open([](steppe::open_options& o) { o.checkpoint_on_close = false; });
    build(s, 2);
    s.checkpoint();
    s.checkpoint();  // nothing left to copy: harmless
    long sum = 0;
    for (Node* p = *s.find_root<Node*>("list"); p; p = p->next) sum += p->value;
    EXPECT_EQ(sum, count_ * (count_ - 1) / 2) << "objects stay readable across a checkpoint";
    build(s, 1);
    s.close();
    auto i = describe();
    EXPECT_EQ(i.txn_seq, 3u);
    EXPECT_EQ(i.wal_commits, 1u) << "only the commit after the checkpoint is in the log";
    expect_whole(path);
}

TEST_P(CheckpointTest, CheckpointWithUncommittedChangesIsRefused) {
    auto s = open([](steppe::open_options& o) { o.checkpoint_on_close = false; });
    build(s, 1);
    auto refused = [&](const char* what) {
        try {
            s.checkpoint();
            ADD_FAILURE() << "checkpoint() accepted " << what;
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << what;
            EXPECT_NE(std::string(e.what()).find("commit() or rollback() first"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        }
    };
    (*s.find_root<Node*>("list"))->value = -5;
    refused("a written object");
    s.rollback();
    s.make<Node>();
    refused("a new object");
    s.rollback();
    s.destroy(*s.find_root<Node*>("list"));
    refused("a destroyed object");
    s.rollback();
    s.set_root("other", *s.find_root<Node*>("list"));
    refused("a new root");
    s.rollback();
    s.checkpoint();
    s.close();
    EXPECT_EQ(describe().wal_commits, 0u);
    expect_whole(path);
}

// A transaction past the resident budget has sent pages to the log ahead of
// its commit; a checkpoint (which resets the log) must not lose them.
TEST_P(CheckpointTest, CheckpointIsRefusedWhileATransactionHasSpilledPages) {
    auto s = open([](steppe::open_options& o) {
        o.checkpoint_on_close = false;
        o.resident_budget = 1 << 20;  // 256 pages
    });
    build(s, 1);
    build_uncommitted(s, 200'000);  // 16-byte nodes: ~780 pages
    ASSERT_GT(s.stats().spilled_pages, 0u);
    EXPECT_THROW(s.checkpoint(), steppe::error);
    s.commit();
    count_ += 200'000;
    s.checkpoint();
    s.close();
    EXPECT_EQ(describe().wal_commits, 0u);
    expect_whole(path);
}

TEST_P(CheckpointTest, CheckpointOfAReadOnlyStoreIsInvalidArgument) {
    {
        auto s = open([](steppe::open_options& o) { o.checkpoint_on_close = false; });
        build(s, 1);
    }
    auto s = open([](steppe::open_options& o) { o.read_only = true; });
    try {
        s.checkpoint();
        FAIL() << "a read-only store checkpointed";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
    }
    s.close();
    EXPECT_EQ(describe().wal_commits, 1u) << "a read-only close writes nothing";
}

TEST_P(CheckpointTest, CloseReleasesTheStoreAtOnceAndTwiceIsHarmless) {
    auto s = open();
    build(s, 1);
    s.close();
    s.close();
    auto again = open();  // the lock is free
    EXPECT_EQ(again.roots().size(), 1u);
    steppe::store moved = std::move(again);
    again.close();  // moved from: nothing to close
    moved.close();
    expect_whole(path);
}

TEST_P(CheckpointTest, CloseDiscardsUncommittedChangesAndCheckpointsTheCommittedState) {
    {
        auto s = open([](steppe::open_options& o) { o.resident_budget = 1 << 20; });
        build(s, 2);
        (*s.find_root<Node*>("list"))->value = -1;
        build_uncommitted(s, 200'000);  // spills: its frames follow the last commit in the log
        ASSERT_GT(s.stats().spilled_pages, 0u);
    }
    auto i = describe();
    EXPECT_EQ(i.txn_seq, 2u);
    EXPECT_EQ(i.wal_commits, 0u);
    expect_whole(path);
}

// A commit of more than 1,024 pages sends its first chunks to the log before
// it meets a transient pointer on its last page; closing then drops them and
// checkpoints the commit before.
TEST_P(CheckpointTest, CloseAfterAFailedCommit) {
    {
        auto s = open();
        build(s, 1);
        Node** head = s.find_root<Node*>("list");
        build_uncommitted(s, 300'000);  // 1,172 pages
        Node on_stack{0, nullptr};
        (*head)->next = &on_stack;  // the newest node: on the last page unswizzled
        EXPECT_THROW(s.commit(), steppe::error);
    }
    auto i = describe();
    EXPECT_EQ(i.txn_seq, 1u);
    EXPECT_EQ(i.wal_commits, 0u);
    expect_whole(path);
}

TEST_P(CheckpointTest, TheMainFileAloneIsACopyAfterACleanClose) {
    {
        auto s = open();
        build(s, 3);
    }
    const std::string copy = dir.path("copy.db");
    fs::copy_file(path, copy);
    expect_whole(copy);
}

STEPPE_BOTH_BACKENDS(CheckpointTest);

}  // namespace
