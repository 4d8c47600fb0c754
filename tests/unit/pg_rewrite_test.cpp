// Compaction of stores in PostgreSQL: a rewrite is one commit
// (storage::commit_rewrite), with zero versions for the pages it leaves out
// (P7, src/storage/pg_store.hpp), so the store shrinks, readers keep their
// snapshots and refresh to the rewritten store, a kill leaves the old store
// or the new one, and check() names a page past the store's end that still
// has data. Migration of such a store: unit/migrate_test.cpp.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "storage/pg_store.hpp"
#include "support/child.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/pg_fixture.hpp"

using namespace steppe;

namespace {

struct Node {
    long value;
    Node* next;
};

constexpr long kept_nodes = 2000;

// The list holds kept_nodes nodes, values kept_nodes-1 .. 0, after a
// commit that destroyed the four fifths of the nodes between them.
void build(const std::string& url) {
    auto s = store::open(url);
    Node** head = s.root<Node*>("list");
    for (long i = 0; i < kept_nodes * 5; ++i) *head = s.make<Node>(Node{i, *head});
    s.commit();
    Node** link = head;
    while (Node* n = *link) {
        if (n->value % 5 != 0) {
            *link = n->next;
            s.destroy(n);
            continue;
        }
        n->value /= 5;
        link = &n->next;
    }
    s.commit();
}

// -1 if the list is as build made it, else the index of the first wrong node.
long first_wrong(store& s) {
    long expect = kept_nodes - 1;
    for (Node* p = *s.find_root<Node*>("list"); p; p = p->next, --expect)
        if (p->value != expect) return kept_nodes - 1 - expect;
    return expect == -1 ? -1 : kept_nodes;
}

class PgRewriteTest : public test::pg_test {
protected:
    std::uint64_t rows(const std::string& where = "") {
        return std::stoull(server->sql("SELECT count(*) FROM steppe_page WHERE store = '" + name + "'" + where));
    }
};

TEST_F(PgRewriteTest, CompactionShrinksTheStoreAndKeepsItsObjects) {
    build(url);
    const std::uint64_t pages_before = open(url, true)->page_count();
    compact_report r = compact(url, {.collect = true});
    EXPECT_EQ(r.pages_before, pages_before);
    EXPECT_LT(r.pages_after, pages_before / 2) << "four fifths of the nodes were garbage";
    EXPECT_LT(r.bytes_after, r.bytes_before);
    {
        auto files = open(url, true);
        EXPECT_EQ(files->page_count(), r.pages_after);
        EXPECT_EQ(files->check(), std::vector<std::string>{});
    }
    // Nothing reads a page past the end, and every page past it has a zero
    // version as its newest (P7); no reader kept the old versions.
    EXPECT_EQ(rows(" AND page >= " + std::to_string(r.pages_after) + " AND length(image) > 0"), 0u);
    auto s = store::open(url);
    EXPECT_EQ(first_wrong(s), -1);
    EXPECT_TRUE(s.check().empty());
    // The compacted store goes on: a commit, a reopen, a second compaction.
    *s.find_root<Node*>("list") = s.make<Node>(Node{kept_nodes, *s.find_root<Node*>("list")});
    s.commit();
    s.close();
    compact(url);
    auto again = store::open(url);
    EXPECT_EQ((*again.find_root<Node*>("list"))->value, kept_nodes);
    EXPECT_TRUE(again.check().empty());
    auto cli = test::run_cli("check '" + url + "'");
    EXPECT_EQ(cli.exit_code, 0) << cli.out;
}

TEST_F(PgRewriteTest, AReaderKeepsItsSnapshotThroughACompactionAndRefreshesToIt) {
    build(url);
    test::child reader([&](test::child& self) {
        auto s = store::open(url, {.create = false, .read_only = true});
        const bool before = first_wrong(s) == -1;
        self.report_and_wait();  // the store is compacted now
        const bool kept = first_wrong(s) == -1 && s.check().empty();
        s.refresh();
        const bool after = first_wrong(s) == -1 && s.check().empty();
        return before && kept && after ? 0 : 2 + !before + 2 * !kept + 4 * !after;
    });
    ASSERT_TRUE(reader.wait_for_report());
    const std::uint64_t before = rows();
    compact_report r = compact(url, {.collect = true});
    EXPECT_LT(r.pages_after, r.pages_before);
    EXPECT_GT(rows(" AND length(image) > 0"), r.pages_after) << "the reader's versions are kept";
    reader.go();
    EXPECT_EQ(reader.exit_code(), 0) << "(2 +1: its first walk, +2: its walk after the compaction, +4: after refresh)";
    EXPECT_GT(before, 0u);
    open(url)->checkpoint();  // the reader is gone: collection drops what only it read
    EXPECT_EQ(rows(" AND length(image) > 0 AND page >= " + std::to_string(r.pages_after)), 0u);
    EXPECT_EQ(server->sql("SELECT count(*) FROM (SELECT page FROM steppe_page WHERE store = '" + name +
                          "' GROUP BY page HAVING count(*) > 1) p"),
              "0\n")
        << "one version of each page is left";
    EXPECT_EQ(open(url, true)->check(), std::vector<std::string>{});
}

TEST_F(PgRewriteTest, TheObjectEngineCompactsThere) {
    struct Item {
        std::int64_t value;
        objects::ref<Item> next;
    };
    {
        // Every third item on the chain, the rest on a root then removed:
        // unreachable once that is committed.
        auto s = objects::store::open(url);
        objects::ref<Item> lists[2];
        for (int i = 0; i < 9000; ++i) {
            objects::ref<Item>& list = lists[i % 3 != 0];
            objects::ref<Item> it = s.make<Item>();
            it.mut()->value = i;
            it.mut()->next = list;
            list = it;
        }
        s.set_root("chain", lists[0]);
        s.set_root("dropped", lists[1]);
        s.commit();
        s.remove_root("dropped");
        s.commit();
    }
    compact_report r = compact(url, {.collect = true});
    EXPECT_LT(r.pages_after, r.pages_before);
    auto s = objects::store::open(url);
    std::int64_t expect = 8997;
    for (auto it = s.find_root<Item>("chain"); it; it = it->next, expect -= 3) ASSERT_EQ(it->value, expect);
    EXPECT_EQ(expect, -3);
    EXPECT_TRUE(s.check().empty());
}

// kill -9 of `steppe compact URL` at instants spread over its run: the store
// is the old one or the compacted one, whole (one PostgreSQL transaction).
TEST_F(PgRewriteTest, AKilledCompactionLeavesTheOldStoreOrTheNew) {
    build(url);
    const std::uint64_t pages_before = open(url, true)->page_count();
    int old_seen = 0, new_seen = 0;
    for (int i = 0; i < 6; ++i) {
        const std::string cli = std::getenv("STEPPE_CLI");
        std::fflush(nullptr);
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::execl(cli.c_str(), cli.c_str(), "compact", "--collect", url.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::usleep(useconds_t(20000 * i));
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        auto s = store::open(url, {.lock_timeout = std::chrono::seconds(10)});
        EXPECT_EQ(first_wrong(s), -1) << "kill " << i;
        EXPECT_TRUE(s.check().empty()) << "kill " << i;
        s.close();
        const std::uint64_t pages = open(url, true)->page_count();
        (pages == pages_before ? old_seen : new_seen)++;
        if (pages != pages_before) break;  // compacted: the rest would compact nothing
    }
    std::printf("old store after %d kills, compacted after %d\n", old_seen, new_seen);
    auto cli = test::run_cli("check '" + url + "'");
    EXPECT_EQ(cli.exit_code, 0) << cli.out;
}

// The server crashes (as pg_ctl stop -m immediate) at instants spread over
// `steppe compact`: once it is back, the store is the old one or the
// compacted one, whole.
TEST_F(PgRewriteTest, AServerCrashDuringACompactionLeavesTheOldStoreOrTheNew) {
    build(url);
    const std::uint64_t pages_before = open(url, true)->page_count();
    const std::string cli = std::getenv("STEPPE_CLI");
    bool compacted = false;
    int crashes = 0;
    for (int i = 0; i < 5 && !compacted; ++i, ++crashes) {
        std::fflush(nullptr);
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::execl(cli.c_str(), cli.c_str(), "compact", "--collect", url.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::usleep(useconds_t(15000 * i));
        server->crash();
        int status = 0;
        ::waitpid(pid, &status, 0);
        server->start();
        auto s = store::open(url, {.lock_timeout = std::chrono::seconds(10)});
        EXPECT_EQ(first_wrong(s), -1) << "crash " << i;
        EXPECT_TRUE(s.check().empty()) << "crash " << i;
        s.close();
        compacted = open(url, true)->page_count() != pages_before;
        // A compaction the CLI reports done is in the store; one it reports
        // failed may be too (the crash after COMMIT, whose outcome the CLI
        // cannot know then).
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            EXPECT_TRUE(compacted) << "crash " << i;
        }
    }
    std::printf("%d server crashes, the store %s\n", crashes, compacted ? "compacted after the last" : "old after each");
    EXPECT_EQ(open(url, true)->check(), std::vector<std::string>{});
}

// Compaction is the writer: beside another process's writer it is refused,
// naming the lock, and changes nothing.
TEST_F(PgRewriteTest, ACompactionBesideAWriterIsRefused) {
    build(url);
    test::child writer([&](test::child& self) {
        auto s = store::open(url);
        self.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    const std::uint64_t before = rows();
    EXPECT_ERROR(errc::locked, "another writer", compact(url));
    EXPECT_EQ(rows(), before);
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// The edges: a store made but never committed to, and a migration's dry
// run, which writes nothing.
TEST_F(PgRewriteTest, AnEmptyStoreCompactsAndADryRunWritesNothing) {
    store::open(url).close();
    compact(url, {.collect = true});
    EXPECT_EQ(open(url, true)->check(), std::vector<std::string>{});
    {
        auto s = store::open(url);
        EXPECT_EQ(*s.root<Node*>("list"), nullptr);
    }
    build(url);
    const std::uint64_t before = rows(), txn = open(url, true)->txn_seq();
    migrate_report m = migrate(url, migration{}, {.dry_run = true});
    EXPECT_GT(m.compaction.pages_after, 0u);
    EXPECT_EQ(rows(), before);
    EXPECT_EQ(open(url, true)->txn_seq(), txn);
}

// P7 attacked: a page past the store's end given an image by hand, in
// place of its zero version (same commit number), changes the digest
// (P6: a zero version weighs twice), so no open reads the store; once
// `steppe recover` takes the versions as they are, check names the page.
// Its zero version deleted is P6's too.
TEST_F(PgRewriteTest, APagePastTheEndWithDataIsAFinding) {
    build(url);
    compact_report r = compact(url, {.collect = true});
    ASSERT_LT(r.pages_after + 2, r.pages_before);
    const std::string where = "store = '" + name + "' AND page = ";
    const std::string past = std::to_string(r.pages_after + 1);
    server->sql("UPDATE steppe_page SET (sum, image) = (SELECT sum, image FROM steppe_page WHERE store = '" + name +
                "' AND length(image) > 0 LIMIT 1) WHERE " + where + past);
    EXPECT_ERROR(errc::corrupt, "do not add up", open(url, true));
    auto recover = test::run_cli("recover '" + url + "'");
    EXPECT_EQ(recover.exit_code, 0) << recover.out;
    std::vector<std::string> findings = open(url, true)->check();
    ASSERT_EQ(findings.size(), 1u) << ::testing::PrintToString(findings);
    EXPECT_CONTAINS(findings[0], "page " + past + " is past the store's " + std::to_string(r.pages_after) + " pages");
    EXPECT_CONTAINS(findings[0], "not a zero version (P7)");
    auto cli = test::run_cli("check '" + url + "'");
    EXPECT_EQ(cli.exit_code, 1) << cli.out;

    server->sql("DELETE FROM steppe_page WHERE " + where + std::to_string(r.pages_after));
    EXPECT_ERROR(errc::corrupt, "do not add up", open(url, true));
}

// A version emptied by hand into the shape of a zero version (empty image,
// sum 0) is not read as zeros: a zero version weighs twice in the digest
// (P6), so the store no longer adds up.
TEST_F(PgRewriteTest, AVersionEmptiedByHandIsCorruptNotZeros) {
    build(url);
    server->sql("UPDATE steppe_page SET sum = 0, image = ''::bytea WHERE store = '" + name +
                "' AND (page, txn) = (SELECT page, txn FROM steppe_page WHERE store = '" + name +
                "' ORDER BY txn DESC, page LIMIT 1)");
    EXPECT_ERROR(errc::corrupt, "do not add up", open(url, true));
    EXPECT_ERROR(errc::corrupt, "do not add up", store::open(url, {.create = false, .read_only = true}));
}

}  // namespace
