// Readers beside the writer (docs/guarantees.md, promise 4; storage.hpp,
// invariant 5), at the storage level and through the public API: a reader in
// another process keeps the snapshot of its open while the writer commits
// and checkpoints, a checkpoint waits for a reader behind and goes on once
// that reader is killed, refresh() moves to the newest commit, and the CLI
// reads a store a writer holds. Readers run in forked children (which open
// stores of their own) and talk to the test through pipes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <fcntl.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "storage/reader_table.hpp"
#include "storage/storage.hpp"
#include "storage/wal_format.hpp"
#include "support/child.hpp"
#include "support/cli.hpp"
#include "support/damage.hpp"
#include "support/expect_error.hpp"
#include "support/filled_commits.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;

namespace {

using test::child;

constexpr std::uint64_t pages = 40;

void commit_all(storage::storage& s, std::uint8_t txn) { test::commit_filled(s, txn, pages); }


class ReadersTest : public ::testing::Test {
protected:
    test::temp_dir dir;
    std::string path = dir.path("s.db");

    std::unique_ptr<storage::storage> open_writer() {
        storage::options o;
        o.durable = false;  // logic, not the disk
        o.checkpoint_bytes = 1ull << 40;  // checkpoints only when the test asks
        return storage::storage::open(path, o);
    }
    std::unique_ptr<storage::storage> open_reader() {
        storage::options o;
        o.read_only = true;
        return storage::storage::open(path, o);
    }
    // What a read-only open in another process says: "opened", or the
    // error's code (locked or not) and message.
    std::string reader_in_child() {
        return test::in_child([this]() -> std::string {
            try {
                open_reader();
                return "opened";
            } catch (const error& e) {
                return (e.code() == errc::locked ? "locked: " : e.code() == errc::corrupt ? "corrupt: " : "other: ") +
                       std::string(e.what());
            }
        });
    }
    // The store's files as of commit 1 put back under a reader table that
    // published commit 3 (a copy restored; the table is not part of a store).
    void restore_commit_1_under_a_table_of_commit_3() {
        {
            auto w = open_writer();
            commit_all(*w, 1);
            std::filesystem::copy_file(path, path + ".copy");
            std::filesystem::copy_file(path + "-wal", path + "-wal.copy");
            commit_all(*w, 2);
            commit_all(*w, 3);
        }
        std::filesystem::rename(path + ".copy", path);
        std::filesystem::rename(path + "-wal.copy", path + "-wal");
    }
    // A reader that opens at once, reports, checks its snapshot `txn` at
    // each go (reading every page) and reports again, `rounds` times.
    child reader(std::uint8_t txn, int rounds) {
        return child([this, txn, rounds](child& me) {
            auto r = open_reader();
            for (int i = 0; i < rounds; ++i) {
                if (std::string p = test::filled_problem(*r, txn); !p.empty()) {
                    std::fprintf(stderr, "reader, round %d: %s\n", i, p.c_str());
                    return 1;
                }
                me.report_and_wait();
            }
            return 0;
        });
    }
};

// Another program cutting NAME-shm short under a running writer: the
// writer's next touch of its mapping (a commit's publish) ends the process
// with a message naming the file, not a bare SIGBUS, and every commit that
// returned stays (common/shared_files.hpp).
TEST_F(ReadersTest, ATableCutShortUnderTheWriterEndsItNamingTheFile) {
    // Forked, not re-run: the child must use this test's directory (no store
    // is open here, so no steppe thread is running).
    GTEST_FLAG_SET(death_test_style, "fast");
    EXPECT_EXIT(
        {
            auto s = steppe::store::open(path);
            *s.root<long>("n") = 1;
            s.commit();
            if (::truncate((path + "-shm").c_str(), 0) != 0) std::_Exit(2);
            *s.root<long>("n") = 2;
            s.commit();
            std::_Exit(3);
        },
        ::testing::ExitedWithCode(71),
        "steppe: fatal: process [0-9]+ touched 0x[0-9a-f]+ in .*s.db-shm, the store's reader table, which another "
        "program cut short \\(truncated or emptied\\) while this process had it mapped. Every commit that returned "
        "is in the store");
    auto s = steppe::store::open(path);
    EXPECT_GE(*s.root<long>("n"), 1);
    EXPECT_TRUE(s.check().empty());
}

TEST_F(ReadersTest, AReaderKeepsItsSnapshotWhileTheWriterCommits) {
    auto w = open_writer();
    commit_all(*w, 1);
    child r = reader(1, 3);
    ASSERT_TRUE(r.wait_for_report());
    for (int t = 2; t <= 20; ++t) commit_all(*w, static_cast<std::uint8_t>(t));
    r.go();
    ASSERT_TRUE(r.wait_for_report());
    child late = reader(20, 1);
    ASSERT_TRUE(late.wait_for_report());
    late.go();
    EXPECT_EQ(late.exit_code(), 0);
    r.go();
    ASSERT_TRUE(r.wait_for_report());
    r.go();
    EXPECT_EQ(r.exit_code(), 0);
}

TEST_F(ReadersTest, ACheckpointWaitsForAReaderBehindAndGoesOnWhenItIsKilled) {
    auto w = open_writer();
    commit_all(*w, 1);
    child r = reader(1, 1);
    ASSERT_TRUE(r.wait_for_report());
    commit_all(*w, 2);
    auto e = test::error_of([&] { w->checkpoint(); });
    EXPECT_EQ(e.code(), errc::locked);
    EXPECT_NE(std::string(e.what()).find("reader process " + std::to_string(r.pid()) + " reads commit 1"),
              std::string::npos)
        << e.what();
    EXPECT_FALSE(w->try_checkpoint());
    ASSERT_EQ(w->describe().readers.size(), 1u);
    EXPECT_EQ(w->describe().readers[0].txn, 1u);
    EXPECT_TRUE(w->check().empty());
    r.kill();  // kill -9: the kernel drops its slot's lock
    EXPECT_TRUE(w->try_checkpoint());
    EXPECT_EQ(w->describe().wal_commits, 0u);
    EXPECT_TRUE(w->describe().readers.empty());
}

// A child forked from a reader, whose copy of the reader's handle is
// destroyed (its store closed, or left to go out of scope), does not let go
// of the reader's slot: the writer's checkpoint still waits for the reader,
// which goes on reading its snapshot whole. The child shares the slot's
// lock with its parent; a slot it cleared was skipped, and the checkpoint
// overwrote the parent's pages (a tester's finding).
TEST_F(ReadersTest, AChildForkedFromAReaderThatClosesItsCopyLeavesTheReadersSlot) {
    auto w = open_writer();
    commit_all(*w, 1);
    child r([this](child& me) {
        auto snapshot = open_reader();
        const std::string closed = test::in_child([&] {
            snapshot.reset();
            return std::string("closed");
        });
        if (closed != "closed") return 3;
        me.report_and_wait();  // the writer committed and tried to checkpoint
        return test::filled_problem(*snapshot, 1).empty() ? 0 : 1;
    });
    ASSERT_TRUE(r.wait_for_report()) << "the reader did not open, or its child did not close (see above)";
    commit_all(*w, 2);
    auto e = test::error_of([&] { w->checkpoint(); });
    EXPECT_EQ(e.code(), errc::locked) << e.what();
    EXPECT_NE(std::string(e.what()).find("reader process " + std::to_string(r.pid())), std::string::npos)
        << e.what();
    r.go();
    EXPECT_EQ(r.exit_code(), 0) << "1: the reader's snapshot changed under it, 3: its child failed; 128+: a signal";
}

// NAME-shm replaced under the writer by a copy of itself (copied, the copy
// renamed over it, as rsync saves a file): a reader opening now registers in
// the copy, which the writer does not look at, so the writer must not
// checkpoint over what such a reader reads. It refuses, naming the file,
// until it is opened again and takes the table at the path over.
TEST_F(ReadersTest, ATableReplacedUnderTheWriterHoldsCheckpointsBackUntilItReopens) {
    auto w = open_writer();
    commit_all(*w, 1);
    const std::string table = path + "-shm";
    std::filesystem::copy_file(table, table + ".copy");
    std::filesystem::rename(table + ".copy", table);
    child r = reader(1, 2);  // registers at commit 1, in the copy
    ASSERT_TRUE(r.wait_for_report());
    commit_all(*w, 2);
    auto e = test::error_of([&] { w->checkpoint(); });
    EXPECT_EQ(e.code(), errc::locked);
    EXPECT_NE(std::string(e.what()).find(table + " is no longer this writer's reader table (another program "
                                                 "replaced it)"),
              std::string::npos)
        << e.what();
    EXPECT_FALSE(w->try_checkpoint());
    r.go();  // reads its snapshot, commit 1, every page: nothing overwritten
    ASSERT_TRUE(r.wait_for_report());
    r.go();
    EXPECT_EQ(r.exit_code(), 0);
    w.reset();  // its close does not checkpoint either
    w = open_writer();
    EXPECT_TRUE(w->try_checkpoint());
    EXPECT_EQ(test::filled_problem(*w, 2), "");
    EXPECT_TRUE(w->check().empty());
}

// A reader that cannot use the reader table beside a writer is refused
// (locked) saying why, not only that a writer holds the store: the table
// deleted, a file that is no table put in its place, every slot held. The
// reader is another process (this one holds the writer).
TEST_F(ReadersTest, AReaderThatCannotUseTheTableBesideAWriterSaysWhy) {
    const std::string table = path + "-shm";
    auto w = open_writer();
    commit_all(*w, 1);
    EXPECT_EQ(reader_in_child(), "opened");
    std::filesystem::remove(table);
    std::string m = reader_in_child();
    EXPECT_EQ(m.rfind("locked: store " + path + " is locked by process ", 0), 0u) << m;
    EXPECT_NE(m.find("there is no reader table " + table + " (a writer still opening a store that had none: try "
                     "again; or deleted since the writer opened the store"),
              std::string::npos)
        << m;

    w.reset();
    w = open_writer();  // makes the table again
    EXPECT_EQ(reader_in_child(), "opened");
    {
        std::FILE* f = std::fopen((table + ".other").c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs("not a reader table\n", f);
        std::fclose(f);
    }
    std::filesystem::rename(table + ".other", table);
    m = reader_in_child();
    EXPECT_EQ(m.rfind("locked: ", 0), 0u) << m;
    EXPECT_NE(m.find(table + " is not a reader table of this version"), std::string::npos) << m;

    w.reset();
    w = open_writer();
    std::vector<std::unique_ptr<storage::reader_table>> slots;
    std::string why;
    for (std::uint32_t i = 0; i < storage::reader_slots; ++i) slots.push_back(storage::reader_table::for_reader(path, why));
    m = reader_in_child();
    EXPECT_EQ(m, "locked: " + table + ": all " + std::to_string(storage::reader_slots) +
                     " reader slots are held by live readers; close one and open again");
    slots.pop_back();
    EXPECT_EQ(reader_in_child(), "opened");
}

// The log a live writer uses damaged before commits it published: a
// reader is told so (corrupt, naming the byte and the commits), not that
// the store is locked, which no wait would end (a tester's finding). Commit
// 2 rewrote every page, so the writer's checkpoint copies none of the
// damaged frames, and readers open again after it, as the message says.
TEST_F(ReadersTest, AReaderBesideAWriterWhoseLogIsDamagedIsToldSo) {
    auto w = open_writer();
    commit_all(*w, 1);
    commit_all(*w, 2);
    EXPECT_EQ(reader_in_child(), "opened");
    test::flip_byte(path + "-wal", storage::wal_frames_offset + 20);
    const std::string m = reader_in_child();
    EXPECT_EQ(m.rfind("corrupt: " + path + "-wal: the log is damaged at byte " +
                          std::to_string(storage::wal_frames_offset) + " (",
                      0),
              0u)
        << m;
    EXPECT_NE(m.find("where commit 1 should be. The writer using the store published commits up to 2, and this "
                     "reader cannot read commits 1 to 2. Readers can open again once the writer has checkpointed "
                     "past the damage"),
              std::string::npos)
        << m;
    EXPECT_TRUE(w->try_checkpoint());
    EXPECT_EQ(reader_in_child(), "opened");
    EXPECT_EQ(test::filled_problem(*w, 2), "");
}

// Without a live writer the table may name commits the files no longer
// hold: the open judges the log itself, as a writer's would. A copy of the
// store from commit 1 put back under a table that published commit 3 opens
// at commit 1; real damage is named as recovery names it, not as damage
// under a live writer (a review's finding: both were refused as the latter).
TEST_F(ReadersTest, WithoutAWriterTheLogIsJudgedNotTheTable) {
    restore_commit_1_under_a_table_of_commit_3();
    ASSERT_TRUE(std::filesystem::exists(path + "-shm"));
    EXPECT_EQ(test::filled_problem(*open_reader(), 1), "");

    {
        auto w = open_writer();
        commit_all(*w, 2);
        commit_all(*w, 3);
    }
    test::flip_byte(path + "-wal", storage::wal_frames_offset + 20);  // commit 2's first frame
    auto e = test::error_of([&] { open_reader(); });
    EXPECT_EQ(e.code(), errc::corrupt) << e.what();
    const std::string m = e.what();
    EXPECT_NE(m.find("the log is damaged at byte " + std::to_string(storage::wal_frames_offset)), std::string::npos)
        << m;
    EXPECT_EQ(m.find("The writer using the store"), std::string::npos) << m;
    EXPECT_NE(m.find("`steppe recover " + path + "`"), std::string::npos) << m;
}

// A copy of the store from commit 1 put back under a table that published
// commit 3, while its next writer is still opening (it holds the locks and
// has not published yet; here the test holds them as such a writer does):
// the table's snapshot does not fit, and the mark, behind it, shows that
// these files are not what it was published over, so a reader is refused
// `locked` and told to try again, not `corrupt` (a tester's finding, with a
// writer held in its open by a debugger).
TEST_F(ReadersTest, AWriterStillOpeningARestoredCopyDoesNotMakeItCorrupt) {
    restore_commit_1_under_a_table_of_commit_3();
    const int lock_fd = ::open((path + "-lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    const int main_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(lock_fd, 0);
    ASSERT_GE(main_fd, 0);
    ASSERT_EQ(::flock(lock_fd, LOCK_EX | LOCK_NB), 0);
    ASSERT_EQ(::flock(main_fd, LOCK_EX | LOCK_NB), 0);
    const std::string m = reader_in_child();
    EXPECT_EQ(m.rfind("locked: ", 0), 0u) << m;
    EXPECT_NE(m.find("a writer is still opening it: try again"), std::string::npos) << m;
    ::close(main_fd);
    ::close(lock_fd);
    EXPECT_EQ(test::filled_problem(*open_reader(), 1), "");
}

// No reader's refresh can end what a replaced table holds back, so a commit
// that is due a checkpoint does not wait checkpoint_wait for one.
TEST_F(ReadersTest, ACommitDoesNotWaitForReadersOfAReplacedTable) {
    storage::options o;
    o.durable = false;
    o.checkpoint_bytes = 1;  // every commit is due a checkpoint
    o.checkpoint_wait = std::chrono::seconds(30);
    auto w = storage::storage::open(path, o);
    commit_all(*w, 1);
    const std::string table = path + "-shm";
    std::filesystem::copy_file(table, table + ".copy");
    std::filesystem::rename(table + ".copy", table);
    const auto start = std::chrono::steady_clock::now();
    commit_all(*w, 2);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    const storage::stats& st = w->counters();
    EXPECT_EQ(st.checkpoint_waits, 1u);
    EXPECT_EQ(st.checkpoint_waits_expired, 1u);
    EXPECT_EQ(test::filled_problem(*w, 2), "");
}

// A reader at the newest commit lets the checkpoint run; the writer then
// overwrites the log, and the reader reads its pages from the main file.
TEST_F(ReadersTest, AReaderAtTheNewestCommitLetsACheckpointRunAndReadsTheMainFileAfter) {
    auto w = open_writer();
    commit_all(*w, 1);
    child r = reader(1, 2);
    ASSERT_TRUE(r.wait_for_report());
    w->checkpoint();
    for (int t = 2; t <= 6; ++t) commit_all(*w, static_cast<std::uint8_t>(t));  // over the old log's frames
    r.go();
    ASSERT_TRUE(r.wait_for_report());
    EXPECT_FALSE(w->try_checkpoint()) << "the reader's snapshot is the main file's now: the next one waits";
    EXPECT_TRUE(w->check().empty());
    r.go();
    EXPECT_EQ(r.exit_code(), 0);
    EXPECT_TRUE(w->try_checkpoint());
}

// Checkpoint starvation (storage::options::checkpoint_wait): a reader that
// opens snapshot after snapshot is at an older commit at almost every instant
// a busy writer tries to checkpoint. The commit pauses until it has caught
// up, so checkpoints keep running while the reader goes on.
TEST_F(ReadersTest, AReaderRefreshingWithoutPauseDoesNotStarveCheckpoints) {
    storage::options o;
    o.durable = false;
    o.checkpoint_bytes = 256 << 10;  // 160 KiB a commit: an attempt every second commit
    o.checkpoint_wait = std::chrono::milliseconds(5000);
    auto w = storage::storage::open(path, o);
    commit_all(*w, 1);
    constexpr int last = 60;
    child r([this](child& me) {
        bool reported = false;
        for (;;) {  // until it has seen the last commit
            auto snapshot = open_reader();
            const auto txn = static_cast<std::uint8_t>(snapshot->txn_seq());
            if (std::string p = test::filled_problem(*snapshot, txn); !p.empty()) {
                std::fprintf(stderr, "reader: %s\n", p.c_str());
                return 1;
            }
            if (!reported) me.report_and_wait(), reported = true;
            if (txn == last) return 0;
        }
    });
    ASSERT_TRUE(r.wait_for_report());
    r.go();
    for (int t = 2; t <= last; ++t) commit_all(*w, static_cast<std::uint8_t>(t));
    EXPECT_EQ(r.exit_code(), 0);
    const storage::stats& st = w->counters();
    EXPECT_GE(st.checkpoint_waits, 1u) << "the reader never held a checkpoint back: the test shows nothing";
    EXPECT_EQ(st.checkpoint_waits_expired, 0u);
    EXPECT_GE(st.checkpoints, 20u) << st.checkpoints_deferred << " deferred, " << st.checkpoint_waits << " waits";
    EXPECT_TRUE(w->check().empty());
}

// A reader that keeps one snapshot defers every checkpoint; the writer waits
// for it once per checkpoint_bytes of log, not at every commit, and the
// first commit after the reader closes checkpoints at once.
TEST_F(ReadersTest, AReaderKeepingAnOldSnapshotCostsOneWaitPerCheckpointBytes) {
    storage::options o;
    o.durable = false;
    o.checkpoint_bytes = 256 << 10;
    o.checkpoint_wait = std::chrono::milliseconds(30);
    auto w = storage::storage::open(path, o);
    commit_all(*w, 1);
    child r = reader(1, 2);
    ASSERT_TRUE(r.wait_for_report());
    for (int t = 2; t <= 25; ++t) commit_all(*w, static_cast<std::uint8_t>(t));
    const storage::stats& st = w->counters();
    const std::uint64_t log_bytes = 24 * pages * storage::page_size;
    EXPECT_EQ(st.checkpoints, 0u);
    EXPECT_GE(st.checkpoint_waits, 2u);
    EXPECT_LE(st.checkpoint_waits, log_bytes / o.checkpoint_bytes + 1) << "it waited at more commits than it should";
    EXPECT_EQ(st.checkpoint_waits_expired, st.checkpoint_waits);
    r.go();
    ASSERT_TRUE(r.wait_for_report()) << "the reader's snapshot changed";
    r.go();
    EXPECT_EQ(r.exit_code(), 0);
    const std::uint64_t waits = st.checkpoint_waits;
    commit_all(*w, 26);
    EXPECT_EQ(st.checkpoints, 1u);
    EXPECT_EQ(st.checkpoint_waits, waits);
    EXPECT_EQ(w->describe().wal_commits, 0u);
    // A new log: the next reader behind makes the first deferred checkpoint
    // pause again, not only once the log passes the old log's mark.
    commit_all(*w, 27);
    child late = reader(27, 2);
    ASSERT_TRUE(late.wait_for_report());
    commit_all(*w, 28);
    commit_all(*w, 29);
    EXPECT_EQ(st.checkpoint_waits, waits + 1) << "the new log's first deferral paused";
    late.go();
    ASSERT_TRUE(late.wait_for_report());
    late.go();
    EXPECT_EQ(late.exit_code(), 0);
}

TEST_F(ReadersTest, AReaderOpeningAfterAWriterWasKilledReadsItsLastCommit) {
    child writer([this](child& me) {
        auto w = open_writer();
        commit_all(*w, 1);
        commit_all(*w, 2);
        me.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    writer.kill();
    child r = reader(2, 2);
    ASSERT_TRUE(r.wait_for_report());
    auto w = open_writer();  // beside the reader: recovery, and no checkpoint over it
    commit_all(*w, 3);
    EXPECT_FALSE(w->try_checkpoint());
    r.go();
    ASSERT_TRUE(r.wait_for_report());
    r.go();
    EXPECT_EQ(r.exit_code(), 0);
    EXPECT_TRUE(w->try_checkpoint());
}

// After a power loss NAME-shm (never synced) and the commit mark (written
// without a sync) can both be as of an older commit than the log, which
// is synced at every commit: here the main file and the table of commit 2,
// the log of commit 5. A read-only open trusted the table, whose snapshot
// fits those files, and showed commit 2, as did check and backup (a
// tester's finding). Commit 5 returned; the one before at most may be left out.
TEST_F(ReadersTest, APowerLossThatKeptAnOlderTableDoesNotHideCommitsFromReaders) {
    child writer([this](child& me) {
        auto w = open_writer();
        commit_all(*w, 1);
        commit_all(*w, 2);
        me.report_and_wait();  // the test copies the main file and the table as they are now
        for (std::uint8_t txn = 3; txn <= 5; ++txn) commit_all(*w, txn);
        me.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    std::filesystem::copy_file(path, path + ".at2");
    std::filesystem::copy_file(path + "-shm", path + "-shm.at2");
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    writer.kill();  // the power loss: what the disk kept of each file
    std::filesystem::rename(path + ".at2", path);
    std::filesystem::rename(path + "-shm.at2", path + "-shm");

    for (int open = 0; open < 2; ++open) {  // the reader that falls back to flocks leaves no trace for the next
        auto r = open_reader();
        EXPECT_GE(r->txn_seq(), 4u) << "a reader showed commit " << r->txn_seq() << " after commit 5 returned";
        EXPECT_EQ(test::filled_problem(*r, static_cast<std::uint8_t>(r->txn_seq())), "");
        EXPECT_TRUE(r->check().empty()) << r->check().front();
    }
    auto w = open_writer();
    EXPECT_EQ(w->txn_seq(), 5u);
}

// ---- The public API ----------------------------------------------------------------

struct Counter {
    long commit;
    long values[600];  // more than one page
};

long consistent_commit(steppe::store& s) {
    Counter* c = *s.find_root<Counter*>("counter");
    for (long v : c->values)
        if (v != c->commit) return -1;
    return c->commit;
}

TEST_F(ReadersTest, RefreshMovesAReadOnlyStoreToTheNewestCommit) {
    child writer([this](child& me) {
        auto s = steppe::store::open(path);
        Counter** c = s.root<Counter*>("counter");
        *c = s.make<Counter>();
        for (long t = 1; t <= 3; ++t) {
            (*c)->commit = t;
            for (long& v : (*c)->values) v = t;
            s.commit();
            me.report_and_wait();
        }
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    steppe::open_options ro;
    ro.read_only = true;
    auto r = steppe::store::open(path, ro);
    EXPECT_EQ(consistent_commit(r), 1);
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    EXPECT_EQ(consistent_commit(r), 1) << "the snapshot of the open";
    r.refresh();
    EXPECT_EQ(consistent_commit(r), 2);
    EXPECT_TRUE(r.check().empty());
    for (const char* command : {"info", "check", "roots", "stats"}) {
        auto out = test::run_cli(std::string(command) + " " + path);
        EXPECT_EQ(out.exit_code, 0) << command << ": " << out.out;
    }
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
    r.refresh();
    EXPECT_EQ(consistent_commit(r), 3);
    r.close();
    auto w = steppe::store::open(path);
    EXPECT_EQ(test::error_of([&] { w.refresh(); }).code(), errc::invalid_argument);
}

// Through the public API: a reader process keeping its snapshot makes the
// writer's automatic checkpoints wait, and store_stats (and STEPPE_STATS's
// text) say so: attempts put off, the commits' pauses, none run.
TEST_F(ReadersTest, StoreStatsCountTheCheckpointsReadersPutOffAndThePauses) {
    {
        auto s = steppe::store::open(path);
        Counter** c = s.root<Counter*>("counter");
        *c = s.make<Counter>();
        (*c)->commit = 1;
        for (long& v : (*c)->values) v = 1;
        s.commit();
    }
    child r([this](child& me) {
        steppe::open_options ro;
        ro.read_only = true;
        auto snapshot = steppe::store::open(path, ro);
        me.report_and_wait();  // holds commit 1 until told
        return consistent_commit(snapshot) == 1 ? 0 : 1;
    });
    ASSERT_TRUE(r.wait_for_report());
    steppe::open_options o;
    o.checkpoint_bytes = 64 << 10;  // a Counter's two pages a commit: past it within a few commits
    o.checkpoint_wait = std::chrono::milliseconds(20);
    o.checkpoint_on_close = false;
    auto w = steppe::store::open(path, o);
    Counter* c = *w.find_root<Counter*>("counter");
    for (long t = 2; t <= 40; ++t) {
        c->commit = t;
        for (long& v : c->values) v = t;
        w.commit();
    }
    const steppe::store_stats st = w.stats();
    EXPECT_EQ(st.checkpoints, 0u);
    EXPECT_GE(st.checkpoints_deferred, 1u);
    EXPECT_GE(st.checkpoint_waits, 1u);
    EXPECT_EQ(st.checkpoint_waits_expired, st.checkpoint_waits);
    EXPECT_NE(steppe::to_string(st).find("commits paused for readers"), std::string::npos) << steppe::to_string(st);
    r.go();
    EXPECT_EQ(r.exit_code(), 0);
    c->commit = 41;
    for (long& v : c->values) v = 41;
    w.commit();
    EXPECT_EQ(w.stats().checkpoints, 1u) << "the reader is gone: the next commit checkpoints";
}

}  // namespace
