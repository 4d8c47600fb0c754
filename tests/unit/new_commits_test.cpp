// store::wait_for_commit (docs/guarantees.md, "Readers beside the writer"):
// a read-only store is told of a commit made after its snapshot by a writer
// in another process, on a file store (the reader table's futex) and on a
// store in PostgreSQL (LISTEN/NOTIFY), for both engines; it is not told of a
// checkpoint or of nothing; a writable store is refused. Then, readers that
// fetch their pages from a streaming standby (pg_store.hpp, P5): every
// snapshot they see is a committed one, and they go on reading while the
// primary is down.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "support/child.hpp"
#include "support/expect_error.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using namespace std::chrono_literals;

namespace {

struct Link {
    long value;
    Link* next;
};

// The list a writer keeps: values n, n-1, ..., 1 from the head. The length
// of a sound snapshot's list, or -1 when the list is not one a commit left.
long committed_length(store& s) {
    Link** head = s.find_root<Link*>("list");
    if (!head) return 0;
    long n = 0, expect = *head ? (*head)->value : 0;
    for (Link* p = *head; p; p = p->next, --expect, ++n)
        if (p->value != expect) return -1;
    return expect == 0 ? n : -1;
}

// A writer in another process: at each go it adds one link and commits,
// then reports; `rounds` times.
test::child list_writer(const std::string& where, int rounds) {
    return test::child([where, rounds](test::child& me) {
        auto s = store::open(where);
        Link** head = s.root<Link*>("list");
        me.report_and_wait();
        for (int i = 0; i < rounds; ++i) {
            *head = s.make<Link>(Link{*head ? (*head)->value + 1 : 1, *head});
            s.commit();
            me.report_and_wait();
        }
        return 0;
    });
}

using kind = test::store_kind;

class NewCommitsTest : public test::file_or_pg_test {};

TEST_P(NewCommitsTest, AReaderIsToldOfEachCommitAndRefreshesToIt) {
    test::child writer = list_writer(where, 3);
    ASSERT_TRUE(writer.wait_for_report());
    store r = open_reader();
    EXPECT_FALSE(r.wait_for_commit()) << "no commit yet: just a look";
    EXPECT_FALSE(r.wait_for_commit(50ms));
    for (long round = 1; round <= 3; ++round) {
        writer.go();
        // Long enough that a reader nobody woke would fail the test's timeout, not pass.
        EXPECT_TRUE(r.wait_for_commit(60s)) << "round " << round;
        EXPECT_TRUE(r.wait_for_commit()) << "still newer: it does not move the snapshot";
        EXPECT_EQ(committed_length(r), round - 1) << "its snapshot";
        r.refresh();
        EXPECT_EQ(committed_length(r), round);
        ASSERT_TRUE(writer.wait_for_report());
        EXPECT_FALSE(r.wait_for_commit()) << "refreshed to the newest";
    }
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

TEST_P(NewCommitsTest, ACheckpointIsNotANewCommit) {
    {
        auto w = store::open(where);
        *w.root<Link*>("list") = w.make<Link>(Link{1, nullptr});
        w.commit();
    }
    store r = open_reader();
    test::child checkpointer([this](test::child& me) {
        auto w = store::open(where);
        w.checkpoint();
        me.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(checkpointer.wait_for_report());
    EXPECT_FALSE(r.wait_for_commit(200ms));
    checkpointer.go();
    EXPECT_EQ(checkpointer.exit_code(), 0);
    EXPECT_EQ(committed_length(r), 1);
}

TEST_P(NewCommitsTest, AWritableStoreIsRefused) {
    auto w = store::open(where);
    EXPECT_EQ(test::error_of([&] { w.wait_for_commit(); }).code(), errc::invalid_argument);
}

struct Counter {
    std::int64_t n;
};

TEST_P(NewCommitsTest, TheObjectEngineIsToldToo) {
    test::child writer([this](test::child& me) {
        objects::store w = objects::store::open(where);
        for (std::int64_t n = 1; n <= 2; ++n) {
            w.root<Counter>("counter").mut()->n = n;
            w.commit();
            me.report_and_wait();
        }
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    objects::options ro;
    ro.read_only = true;
    objects::store r = objects::store::open(where, ro);
    EXPECT_FALSE(r.wait_for_commit());
    writer.go();
    EXPECT_TRUE(r.wait_for_commit(60s));
    EXPECT_EQ(r.find_root<Counter>("counter")->n, 1) << "its snapshot";
    r.refresh();
    EXPECT_EQ(r.find_root<Counter>("counter")->n, 2);
    EXPECT_FALSE(r.wait_for_commit());
    ASSERT_TRUE(writer.wait_for_report());
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// A file store with no reader table (deleted while nobody had the store
// open): the reader shares a flock that keeps writers out, so it is never
// told of a commit, and none can be made while it waits.
TEST(NewCommitsWithoutATable, TheReaderWaitsItOutAndNoWriterCommitsMeanwhile) {
    test::temp_dir dir;
    const std::string path = dir.path("s.db");
    {
        auto w = store::open(path);
        *w.root<Link*>("list") = w.make<Link>(Link{1, nullptr});
        w.commit();
    }
    ASSERT_EQ(::unlink((path + "-shm").c_str()), 0);
    open_options ro;
    ro.read_only = true;
    store r = store::open(path, ro);
    test::child writer([&path](test::child&) {
        try {
            store::open(path);
        } catch (const error& e) {
            return e.code() == errc::locked ? 0 : 2;
        }
        return 1;
    });
    EXPECT_EQ(writer.exit_code(), 0) << "a writer opened beside a reader without a table";
    EXPECT_FALSE(r.wait_for_commit(100ms));
    EXPECT_EQ(committed_length(r), 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, NewCommitsTest, ::testing::Values(kind::file, kind::postgresql),
                         [](const auto& info) { return info.param == kind::file ? "file" : "postgresql"; });

using PgReaderTest = test::pg_test;

// A reader's server gone: wait_for_commit says so (io) rather than "no commit".
TEST_F(PgReaderTest, WaitingForACommitOnALostConnectionIsAnError) {
    {
        auto w = store::open(server->url(name));
        w.commit();
    }
    open_options o;
    o.read_only = true;
    store r = store::open(server->url(name), o);
    server->crash();
    EXPECT_EQ(test::error_of([&] { r.wait_for_commit(10s); }).code(), errc::io);
    server->start();
}

// Readers whose pages come from a streaming standby (pages_from=standby).
class PgStandbyTest : public PgReaderTest {
protected:
    void SetUp() override {
        PgReaderTest::SetUp();
        if (IsSkipped()) return;
        std::string why;
        if (!server->start_standby(why)) GTEST_SKIP() << why;
    }
    store open_reader(const std::string& extra = "") {
        open_options o;
        o.read_only = true;
        return store::open(server->url_with_standby(name, "&pages_from=standby" + extra), o);
    }
};

// The writer commits without pause; a reader on the standby follows it
// (wait_for_commit, refresh) and checks every snapshot it lands on.
TEST_F(PgStandbyTest, EverySnapshotAReaderOnTheStandbySeesIsACommittedOne) {
    constexpr int commits = 40;
    test::child writer([this](test::child& me) {
        auto s = store::open(server->url(name));
        Link** head = s.root<Link*>("list");
        s.commit();
        me.report_and_wait();
        for (int c = 0; c < commits; ++c) {
            for (int i = 0; i < 50; ++i) *head = s.make<Link>(Link{*head ? (*head)->value + 1 : 1, *head});
            s.commit();
        }
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    store r = open_reader("&cache_mib=1");
    writer.go();
    long seen = 0, snapshots = 0;
    while (seen < commits * 50) {
        ASSERT_TRUE(r.wait_for_commit(60s)) << "after " << seen << " links";
        r.refresh();
        long n = committed_length(r);
        ASSERT_NE(n, -1) << "a snapshot no commit left";
        ASSERT_EQ(n % 50, 0) << "a commit's links seen in part";
        ASSERT_GE(n, seen) << "a snapshot older than the last one";
        seen = n;
        ++snapshots;
    }
    EXPECT_EQ(writer.exit_code(), 0);
    EXPECT_GE(snapshots, 1);
    EXPECT_TRUE(r.check().empty());
}

// The reader registered on the primary; its pages then come from the
// standby alone: it walks the whole list while the primary is down.
TEST_F(PgStandbyTest, AReaderOnTheStandbyReadsWhileThePrimaryIsDown) {
    {
        auto w = store::open(server->url(name));
        Link** head = w.root<Link*>("list");
        for (long i = 1; i <= 20000; ++i) *head = w.make<Link>(Link{i, *head});
        w.commit();
    }
    store r = open_reader("&cache_mib=0");
    server->crash();
    EXPECT_EQ(committed_length(r), 20000);
    server->start();
    r.close();
}

// P5: a standby that has not replayed the reader's registration (replay
// paused) is not read from: the open waits for it, and past fault_wait_s
// fails naming the lag, rather than reading an older commit's pages.
TEST_F(PgStandbyTest, AStandbyBehindTheSnapshotIsWaitedForNeverRead) {
    {
        auto w = store::open(server->url(name));
        *w.root<Link*>("list") = w.make<Link>(Link{1, nullptr});
        w.commit();
    }
    server->wait_for_standby();
    server->standby_sql("SELECT pg_wal_replay_pause()");
    {
        auto w = store::open(server->url(name));
        Link** head = w.root<Link*>("list");
        *head = w.make<Link>(Link{2, *head});
        w.commit();
    }
    auto e = test::error_of([&] { open_reader("&fault_wait_s=1"); });
    EXPECT_EQ(e.code(), errc::io);
    EXPECT_NE(std::string(e.what()).find("has not replayed this reader's registration"), std::string::npos) << e.what();
    server->standby_sql("SELECT pg_wal_replay_resume()");
    store r = open_reader();
    EXPECT_EQ(committed_length(r), 2);
}

TEST_F(PgStandbyTest, AWriterGivenTheStandbyURLCommitsOnThePrimary) {
    {
        auto w = store::open(server->url_with_standby(name, "&pages_from=standby"));
        *w.root<Link*>("list") = w.make<Link>(Link{1, nullptr});
        w.commit();
    }
    server->wait_for_standby();
    store r = open_reader();
    EXPECT_EQ(committed_length(r), 1);
}

}  // namespace
