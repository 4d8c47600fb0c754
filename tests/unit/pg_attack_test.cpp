// Attacks on the PostgreSQL page store (src/storage/pg_store.hpp) from
// outside, against a real server this process starts (support/pg_server.hpp):
// kill -9 of the writer at random instants of its commits, spills and
// collections; the server stopped like a power cut (pg_ctl stop -m
// immediate) at random instants while a writer commits and a reader reads;
// the writer's and a reader's connections cut by the server
// (pg_terminate_backend) mid-commit and mid-fault; readers killed while
// registered, then collection; readers in other processes walking while a
// writer commits; crafted damage in steppe_page and steppe_store rows; odd
// store names, wrong passwords, missing databases, a read-only server.
// After every attack: every commit whose commit() returned is there, the
// store equals the workload's model of its newest commit
// (support/store_model.hpp), and check() is clean or names the damage.
//
// Random instants come from a seed printed on failure (STEPPE_SEED=N
// replays it); STEPPE_LONG=1 runs many more rounds of each loop.
#include <gtest/gtest.h>
#include <steppe/error.hpp>
#include <steppe/steppe.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/pg_store.hpp"
#include "support/child.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/filled_commits.hpp"
#include "support/pg_fixture.hpp"
#include "support/store_model.hpp"

using namespace steppe;
using steppe::test::workload;

namespace {

constexpr std::uint64_t failed = ~std::uint64_t{0};  // a child's report: what follows went wrong

bool long_run() {
    const char* v = std::getenv("STEPPE_LONG");
    return v && *v == '1';
}
int rounds(int usual, int long_rounds) { return long_run() ? long_rounds : usual; }

class PgAttackTest : public test::pg_test {
protected:
    void SetUp() override {
        pg_test::SetUp();
        if (IsSkipped()) return;
        const char* s = std::getenv("STEPPE_SEED");
        seed = s && *s ? std::strtoull(s, nullptr, 10) : std::random_device{}();
        rng.seed(seed);
        std::printf("STEPPE_SEED=%llu\n", static_cast<unsigned long long>(seed));
    }
    using pg_test::open;
    std::unique_ptr<storage::storage> open(bool read_only = false) { return open(url, read_only); }
    // A statement's one number (psql may print a warning line before it:
    // pg_terminate_backend of a backend that has just gone).
    int number_of(const std::string& statement) {
        std::string out = server->sql(statement);
        while (!out.empty() && out.back() == '\n') out.pop_back();
        return std::stoi(out.substr(out.rfind('\n') + 1));
    }
    std::uint64_t versions() {
        return std::stoull(server->sql("SELECT count(*) FROM steppe_page WHERE store = '" + name + "'"));
    }
    std::string newest_txn() { return server->sql("SELECT txn FROM steppe_store WHERE name = '" + name + "'"); }
    std::chrono::microseconds random_delay(int max_us) {
        return std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_us)(rng));
    }
    void sleep_random(int max_us) { ::usleep(useconds_t(random_delay(max_us).count())); }
    // The store as a fresh writer finds it: every commit up to at least
    // `returned` (at most one more, the one in flight), the model's pages,
    // no finding.
    void expect_whole(std::uint64_t returned) {
        auto s = open();
        const std::uint64_t txn = workload::committed_txn(*s);
        EXPECT_GE(txn, returned) << "a commit whose commit() returned is lost";
        EXPECT_LE(txn, returned + 1);
        EXPECT_EQ(s->txn_seq(), txn) << "the store row's txn and the meta disagree";
        EXPECT_EQ(workload::verify(*s), "");
        EXPECT_EQ(s->check(), std::vector<std::string>{});
    }
    // In a reader process: opens the store at `at` read-only and compares
    // the whole snapshot with the model of the commit its meta names;
    // reports that commit to the test, or `failed` (and false) on a difference.
    bool walk_snapshot(test::child& me, const std::string& at) {
        auto r = open(at, true);
        const std::string problem = workload::verify(*r);
        if (!problem.empty()) {
            std::fprintf(stderr, "reader: %s\n", problem.c_str());
            me.send(failed);
            return false;
        }
        me.send(workload::committed_txn(*r));
        return true;
    }
    // Waits until the server has seen every session but the test's own
    // (psql's) and `others` end.
    void wait_for_sessions(int others) {
        for (int i = 0; i < 250; ++i) {
            if (number_of("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> "
                          "pg_backend_pid()") <= others)
                return;
            ::usleep(20000);
        }
        ADD_FAILURE() << "sessions of killed processes did not end";
    }

    // Commits 1 and 2, then a writer in another process that commits on and
    // collects after every commit.
    test::child collecting_writer();

    std::uint64_t seed = 0;
    std::mt19937_64 rng;
};

// A writer that commits the workload (every third transaction half spilled),
// reporting each commit() that returned. `checkpoint_bytes` 1 collects after
// every commit.
test::child committing_writer(const std::string& url, std::uint64_t checkpoint_bytes, bool report_failure) {
    return test::child([url, checkpoint_bytes, report_failure](test::child& me) {
        storage::options o;
        o.lock_timeout = std::chrono::seconds(10);
        o.checkpoint_bytes = checkpoint_bytes;
        auto s = storage::storage::open(url, o);
        for (std::uint64_t txn = workload::committed_txn(*s) + 1;; ++txn) {
            try {
                workload::run_one(*s, txn, txn % 3 == 0);
            } catch (const error& e) {
                if (!report_failure) throw;
                me.send(failed);
                return 0;
            }
            me.send(txn);
        }
    });
}

test::child PgAttackTest::collecting_writer() {
    {
        auto s = open();
        workload::run(*s, 1, 2);
    }
    return committing_writer(url, 1, false);
}

// kill -9 of the writer at random instants: in a commit's COPY, its COMMIT,
// a spill, the collection after it, or between two commits.
TEST_F(PgAttackTest, KillingTheWriterAtRandomInstantsLosesNoReturnedCommit) {
    std::uint64_t returned = 0;
    for (int round = 0, n = rounds(12, 300); round < n; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        auto writer = committing_writer(url, round % 2 ? 1 : 64ull << 20, false);
        std::uint64_t got = 0;
        ASSERT_TRUE(writer.receive(got));  // at least one commit per round: the store grows
        returned = got;
        sleep_random(30000);
        writer.kill();
        while (writer.receive(got)) returned = got;
        expect_whole(returned);
        if (HasFailure()) return;
    }
    EXPECT_GT(returned, 12u);
}

// kill -9 of a writer at a random instant of a big commit (1,000 pages, 4
// MiB sent in COPY chunks, half of them spilled first): the store is at the
// commit before or at that one, whole, never part of it.
TEST_F(PgAttackTest, KillingTheWriterMidABigCommitLeavesItWholeOrAbsent) {
    constexpr std::uint64_t big = 1000;
    std::chrono::microseconds took;
    {
        auto s = open();
        const auto start = std::chrono::steady_clock::now();
        test::commit_filled(*s, 1, big);
        took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    }
    std::uint64_t returned = 1;
    for (int round = 0, n = rounds(4, 40); round < n; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        test::child writer([this](test::child& me) {
            auto s = open();
            me.send(s->txn_seq());
            for (std::uint64_t txn = s->txn_seq() + 1;; ++txn) {
                std::vector<std::byte> image(storage::page_size, std::byte(txn));
                std::vector<storage::page_image> pages;
                for (std::uint64_t p = 0; p < big; ++p) pages.push_back({p, image.data()});
                storage::meta_bytes meta{};
                meta[0] = std::byte(txn);
                s->spill({pages.data(), big / 2});
                s->commit({pages.data() + big / 2, big / 2}, meta);
                me.send(txn);
            }
            return 0;
        });
        std::uint64_t got = 0;
        ASSERT_TRUE(writer.receive(got));  // opened
        if (round % 2) {  // every other round lets one commit finish first, however loaded the machine
            ASSERT_TRUE(writer.receive(got));
            returned = std::max(returned, got);
        }
        sleep_random(int(3 * took.count()));  // some way into the first or second commit
        writer.kill();
        while (writer.receive(got)) returned = got;
        auto s = open(url + "&cache_mib=0", true);
        EXPECT_GE(s->txn_seq(), returned);
        EXPECT_LE(s->txn_seq(), returned + 1);
        EXPECT_EQ(test::filled_problem(*s, std::uint8_t(s->txn_seq())), "");
        EXPECT_EQ(s->check(), std::vector<std::string>{});
        if (HasFailure()) return;
    }
    EXPECT_GT(returned, 1u) << "no commit was ever let finish";
}

// The server stopped like a power cut at random instants while a writer
// commits, spills and collects (after every commit) and a reader in another
// process walks snapshot after snapshot; then started again. Every returned
// commit is there; the reader saw only committed snapshots, or was told.
TEST_F(PgAttackTest, AServerCrashAtRandomInstantsLosesNoReturnedCommitAndShowsNoReaderAMix) {
    {
        auto s = open();
        workload::run(*s, 1, 3);
    }
    std::uint64_t returned = 3;
    for (int round = 0, n = rounds(3, 40); round < n; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        auto writer = committing_writer(url, round % 2 ? 1 : 64ull << 20, true);
        test::child reader([this](test::child& me) {
            for (;;) {
                try {
                    if (!walk_snapshot(me, url + "&cache_mib=0&fault_wait_s=30")) return 1;
                } catch (const error& e) {
                    if (e.code() != errc::io) {  // the server away, or the snapshot no longer kept: told
                        std::fprintf(stderr, "reader: %s\n", e.what());
                        me.send(failed);
                        return 1;
                    }
                    ::usleep(20000);
                }
            }
        });
        std::uint64_t got = 0, seen = 0;
        ASSERT_TRUE(writer.receive(got));
        ASSERT_NE(got, failed);
        returned = got;
        ASSERT_TRUE(reader.receive(seen));
        sleep_random(40000);
        server->crash();
        while (writer.receive(got) && got != failed) returned = got;
        EXPECT_EQ(got, failed) << "the writer went on past the crash";
        EXPECT_EQ(writer.exit_code(), 0);
        ::usleep(std::uint32_t(random_delay(200000).count()));
        server->start();
        ::usleep(100000);
        reader.kill();
        while (reader.receive(seen)) EXPECT_NE(seen, failed) << "a reader saw what was never committed";
        expect_whole(returned);
        if (HasFailure()) return;
    }
}

// The writer's session ended by the server (a network cut) at random
// instants: in a commit (the handle reconnects and commits on a new session,
// or, the COMMIT's answer lost, is poisoned and the program reopens), in a
// collection, between commits. Nothing returned is lost.
TEST_F(PgAttackTest, CuttingTheWritersConnectionMidCommitLosesNoReturnedCommit) {
    test::child writer([this](test::child& me) -> int {
        auto s = open(url, false, 1);
        me.send(0);
        me.send(std::uint64_t(backend_of(*s)));
        for (;;) {
            const std::uint64_t txn = workload::committed_txn(*s) + 1;
            try {
                workload::run_one(*s, txn, txn % 3 == 0);
            } catch (const error& e) {
                if (e.code() != errc::io && e.code() != errc::poisoned) throw;
                s.reset();  // the program's answer to an unknown outcome: reopen
                s = open(url, false, 1);
                me.send(0);
                me.send(std::uint64_t(backend_of(*s)));
                continue;
            }
            me.send(txn);
            me.send(std::uint64_t(backend_of(*s)));
        }
    });
    std::uint64_t returned = 0, txn = 0, pid = 0;
    const int cuts = rounds(25, 400);
    for (int cut = 0; cut < cuts; ++cut) {
        ASSERT_TRUE(writer.receive(txn) && writer.receive(pid)) << "the writer died";
        returned = std::max(returned, txn);
        sleep_random(6000);
        server->terminate(int(pid));
    }
    for (int more = 0; more < 5; ++more) {  // the writer goes on after the cuts
        ASSERT_TRUE(writer.receive(txn) && writer.receive(pid)) << "the writer died";
        returned = std::max(returned, txn);
    }
    writer.kill();
    while (writer.receive(txn) && writer.receive(pid)) returned = std::max(returned, txn);
    EXPECT_GT(returned, std::uint64_t(cuts) / 2);
    expect_whole(returned);
}

// The row's move and COMMIT travel in one round trip. A session ended while
// the server runs the move (here by a trigger on the store row, once) has
// certainly not committed: the server says so before it hangs up, so the
// commit reconnects and goes through, where a lost answer to COMMIT would
// poison the handle. A move the server refuses with the session alive is an
// error, and the store stays at its previous commit.
TEST_F(PgAttackTest, ASessionEndedDuringTheRowsMoveIsRetriedNotPoisoned) {
    auto w = open();
    test::commit_filled(*w, 1, 4);
    server->sql("CREATE SEQUENCE cut_once");
    auto trip = [&](const std::string& body) {
        server->sql("CREATE OR REPLACE FUNCTION cut_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.name = '" +
                    name + "' AND NEW.txn <> OLD.txn AND nextval('cut_once') = 1 THEN " + body +
                    " END IF; RETURN NEW; END $$");
    };
    trip("PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(1);");
    server->sql("CREATE TRIGGER cut_move BEFORE UPDATE ON steppe_store FOR EACH ROW EXECUTE FUNCTION cut_move()");
    test::commit_filled(*w, 2, 4);
    EXPECT_EQ(number_of("SELECT last_value FROM cut_once"), 2);  // the move ran twice: cut, then again
    EXPECT_EQ(test::filled_problem(*w, 2), "");
    server->sql("ALTER SEQUENCE cut_once RESTART");
    trip("RAISE EXCEPTION 'refused by a test' USING ERRCODE = '40P01';");
    EXPECT_ERROR(errc::io, "refused by a test", test::commit_filled(*w, 3, 4));
    server->sql("DROP TRIGGER cut_move ON steppe_store");
    test::commit_filled(*w, 3, 4);  // the handle goes on
    w.reset();
    EXPECT_EQ(test::filled_problem(*open(true), 3), "");
    // A writer's open whose lock is taken but whose fence moves no row (the
    // row gone between the statement's parts; here a trigger skips it) is a
    // clear error, not a row of NULLs read as a store.
    server->sql("CREATE OR REPLACE FUNCTION cut_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.name = '" +
                name + "' AND NEW.fence <> OLD.fence THEN RETURN NULL; END IF; RETURN NEW; END $$");
    server->sql("CREATE TRIGGER cut_move BEFORE UPDATE ON steppe_store FOR EACH ROW EXECUTE FUNCTION cut_move()");
    EXPECT_ERROR(errc::not_found, "deleted or replaced while this writer opened it", open());
    server->sql("DROP TRIGGER cut_move ON steppe_store");
    EXPECT_EQ(test::filled_problem(*open(), 3), "");
}

// A writer stopped (SIGSTOP) at a random instant of its commits, its session
// ended by the server while it sleeps, and its store taken over by another
// writer that commits: woken, the first writer can commit nothing more
// (locked, or poisoned when its COMMIT's answer was lost), and every commit
// it saw return is at or before the new writer's first.
TEST_F(PgAttackTest, AWriterTakenOverAtARandomInstantCommitsNothingAfter) {
    {
        auto s = open();
        workload::run(*s, 1, 2);
    }
    for (int round = 0, n = rounds(3, 60); round < n; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        test::child old_writer([this](test::child& me) -> int {
            auto s = open(url, false, 1);
            me.send(std::uint64_t(backend_of(*s)));
            for (std::uint64_t txn = workload::committed_txn(*s) + 1;; ++txn) {
                try {
                    workload::run_one(*s, txn, txn % 3 == 0);
                } catch (const error& e) {
                    // io only for a COMMIT whose answer was lost, and saying so.
                    if (e.code() == errc::io && !std::strstr(e.what(), "whether commit")) {
                        std::fprintf(stderr, "old writer: %s\n", e.what());
                        return 1;
                    }
                    me.send(failed);
                    me.send(std::uint64_t(e.code()));
                    return 0;
                }
                me.send(txn);
            }
        });
        std::uint64_t pid = 0, got = 0, returned = 0;
        ASSERT_TRUE(old_writer.receive(pid));
        ASSERT_TRUE(old_writer.receive(got));
        sleep_random(20000);
        ::kill(old_writer.pid(), SIGSTOP);
        server->terminate(int(pid));
        auto taker = open();
        const std::uint64_t taken_at = workload::committed_txn(*taker);
        workload::run(*taker, taken_at + 1, taken_at + 3);
        ::kill(old_writer.pid(), SIGCONT);
        std::uint64_t code = 0;
        while (old_writer.receive(got) && got != failed) returned = got;
        ASSERT_EQ(got, failed) << "the old writer went on committing";
        ASSERT_TRUE(old_writer.receive(code));
        EXPECT_TRUE(errc(code) == errc::locked || errc(code) == errc::poisoned || errc(code) == errc::io)
            << to_string(errc(code));
        EXPECT_EQ(old_writer.exit_code(), 0);
        EXPECT_LE(returned, taken_at) << "a commit of the old writer returned after the store was taken over";
        EXPECT_EQ(workload::committed_txn(*taker), taken_at + 3);
        EXPECT_EQ(workload::verify(*taker), "");
        taker.reset();
        expect_whole(taken_at + 3);
        if (HasFailure()) return;
    }
}

// Many processes opening writers at once on a database steppe has never
// used (its tables made by the first) and creating one store exclusively:
// every open of a store of its own succeeds, exactly one exclusive create.
TEST_F(PgAttackTest, FirstOpensAtOnceInAFreshDatabase) {
    server->sql("CREATE DATABASE fresh");
    std::string base = url;
    base.replace(base.find("/postgres?"), 10, "/fresh?");
    const std::string shared = base.substr(0, base.find("store=")) + "store=shared";
    std::vector<std::unique_ptr<test::child>> openers;
    for (int i = 0; i < 6; ++i)
        openers.push_back(std::make_unique<test::child>([&, i](test::child& me) {
            me.report_and_wait();  // all start together
            {
                auto s = open(base.substr(0, base.find("store=")) + "store=own" + std::to_string(i));
                workload::run(*s, 1, 2);
            }
            storage::options o;
            o.exclusive_create = true;
            try {
                storage::storage::open(shared, o);
                return 0;
            } catch (const error& e) {
                return e.code() == errc::exists ? 10 : e.code() == errc::locked ? 11 : 12;
            }
        }));
    for (auto& o : openers) ASSERT_TRUE(o->wait_for_report());
    for (auto& o : openers) o->go();
    int made = 0;
    for (auto& o : openers) {
        const int rc = o->exit_code();
        EXPECT_TRUE(rc == 0 || rc == 10) << "exit " << rc;
        made += rc == 0;
    }
    EXPECT_EQ(made, 1);
    for (int i = 0; i < 6; ++i) {
        auto s = open(base.substr(0, base.find("store=")) + "store=own" + std::to_string(i), true);
        EXPECT_EQ(workload::committed_txn(*s), 2u);
        EXPECT_EQ(workload::verify(*s), "");
    }
}

// A fault's fetch connection ended by the server at random instants while
// a reader in another process walks its snapshot, page by page (no cache),
// until that many cuts have landed: the fetch thread reconnects and every
// page is the snapshot's.
TEST_F(PgAttackTest, CuttingTheFetchConnectionMidFaultLosesNothing) {
    {
        auto s = open();
        workload::run(*s, 1, 30);
    }
    const int cuts_wanted = rounds(15, 300);
    // The walker walks until this file appears (a walk may be faster than
    // the gap between two cuts, so a fixed number of walks could end first).
    const std::string stop = "/tmp/steppe-walker-stop-" + std::to_string(::getpid());
    ::unlink(stop.c_str());
    test::child reader([this, stop](test::child& me) {
        auto r = open(url + "&cache_mib=0&application_name=walker", true);
        me.send(std::uint64_t(backend_of(*r)));
        for (std::uint64_t i = 0; ::access(stop.c_str(), F_OK) != 0; ++i) {
            const std::string problem = workload::verify(*r);
            if (!problem.empty()) {
                std::fprintf(stderr, "reader: %s\n", problem.c_str());
                return 1;
            }
            me.send(i);
        }
        return 0;
    });
    std::uint64_t control = 0, walked = 0;
    ASSERT_TRUE(reader.receive(control));
    const std::string cut = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = "
                            "'walker' AND pid <> " +
                            std::to_string(control);
    int cuts = 0;
    while (reader.receive(walked)) {
        if (cuts >= cuts_wanted) {
            std::fclose(std::fopen(stop.c_str(), "w"));
            continue;
        }
        sleep_random(3000);
        cuts += number_of(cut);
    }
    ::unlink(stop.c_str());
    EXPECT_EQ(reader.exit_code(), 0);
    EXPECT_GE(cuts, cuts_wanted);
    EXPECT_GT(walked, 0u);
    // The writer's own fetch connection, cut between two reads of pages it does not cache.
    auto w = open(url + "&cache_mib=0&application_name=wfetch");
    std::vector<std::byte> page(storage::page_size);
    for (int i = 0; i < 3; ++i) {
        server->sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'wfetch' AND "
                    "pid <> " +
                    std::to_string(backend_of(*w)));
        EXPECT_EQ(workload::verify(*w), "");
    }
    workload::run(*w, 31, 33);
    EXPECT_EQ(workload::verify(*w), "");
}

// Readers killed while registered, and while registering, at random
// instants: collection keeps what the live readers read, drops what only
// the dead ones held once the server has seen them go, and no registration
// outlives its session.
TEST_F(PgAttackTest, ReadersKilledWhileRegisteredThenCollection) {
    auto w = open(url, false, 64ull << 20);
    workload::run(*w, 1, 10);
    auto reader_at = [this](test::child& me) {
        auto r = open(true);
        me.send(workload::committed_txn(*r));
        me.report_and_wait();  // killed here, or told to verify
        return workload::verify(*r).empty() ? 0 : 1;
    };
    std::vector<std::unique_ptr<test::child>> readers;
    std::vector<std::uint64_t> at;
    for (int i = 0; i < 6; ++i) {
        readers.push_back(std::make_unique<test::child>(reader_at));
        std::uint64_t txn = 0;
        ASSERT_TRUE(readers.back()->receive(txn));
        at.push_back(txn);
        workload::run(*w, 11 + 5 * std::uint64_t(i), 15 + 5 * std::uint64_t(i));
    }
    // Readers killed mid-open, at random instants of their registration.
    for (int i = 0, n = rounds(8, 100); i < n; ++i) {
        test::child half([this](test::child&) {
            auto r = open(true);
            return 0;
        });
        sleep_random(8000);
        half.kill();
    }
    // Kill the readers at commits 10, 20 and 30 (every other); the others live.
    for (std::size_t i = 0; i < readers.size(); i += 2) readers[i]->kill();
    wait_for_sessions(2 + 3 * 2);  // the writer's two sessions (control, fetch) and the live readers'
    w->checkpoint();
    EXPECT_EQ(w->describe().readers.size(), 3u) << "registrations of killed readers outlived their sessions";
    for (std::size_t i = 1; i < readers.size(); i += 2) {
        ASSERT_TRUE(readers[i]->wait_for_report());
        readers[i]->go();
        EXPECT_EQ(readers[i]->exit_code(), 0) << "the reader at commit " << at[i] << " lost its snapshot";
    }
    wait_for_sessions(2);
    w->checkpoint();
    EXPECT_EQ(w->describe().readers.size(), 0u);
    // Only the newest version of each page is left.
    EXPECT_EQ(versions(), std::stoull(server->sql("SELECT count(DISTINCT page) FROM steppe_page WHERE store = '" +
                                                  name + "'")));
    EXPECT_EQ(workload::verify(*w), "");
    EXPECT_EQ(w->check(), std::vector<std::string>{});
}

// Readers in other processes open, walk and close over and over while a
// writer commits and collects after every commit: every snapshot one sees
// is exactly a committed state (the workload's model of the commit its meta
// names), never a mix, never a collected version's zeros.
TEST_F(PgAttackTest, ReadersInOtherProcessesSeeOnlyCommittedSnapshots) {
    auto writer = collecting_writer();
    std::vector<std::unique_ptr<test::child>> readers;
    for (int i = 0; i < 3; ++i)
        readers.push_back(std::make_unique<test::child>([this, i](test::child& me) {
            for (;;)
                if (!walk_snapshot(me, url + (i == 0 ? "&cache_mib=0" : ""))) return 1;
        }));
    ::usleep(long_run() ? 30000000 : 1500000);
    struct seen {
        std::uint64_t snapshots = 0, first = failed, last = 0;
        void add(std::uint64_t txn) {
            ++snapshots;
            first = std::min(first, txn);
            last = txn;
        }
        bool enough() const { return snapshots > 2 && last > first; }
    };
    std::vector<seen> seen_by(readers.size());
    std::uint64_t got = 0;
    // On a loaded machine a reader may have walked only a snapshot or two by
    // now: it goes on, beside the writer, until it has seen three and a
    // newer commit (or said nothing for 60 s), and only then do they stop.
    for (std::size_t i = 0; i < readers.size(); ++i)
        while (!seen_by[i].enough() && readers[i]->receive_within(got, 60)) {
            ASSERT_NE(got, failed) << "a reader saw what was never committed";
            seen_by[i].add(got);
        }
    writer.kill();
    std::uint64_t returned = 0;
    while (writer.receive(got)) returned = got;
    for (std::size_t i = 0; i < readers.size(); ++i) {
        readers[i]->kill();
        while (readers[i]->receive(got)) {
            ASSERT_NE(got, failed) << "a reader saw what was never committed";
            seen_by[i].add(got);
        }
        EXPECT_GT(seen_by[i].snapshots, 2u);
        EXPECT_GT(seen_by[i].last, seen_by[i].first) << "the reader never saw a newer commit";
    }
    expect_whole(returned);
}

// Readers in other processes whose sessions (the registration's or the
// fetch's) the server ends at random instants while a writer commits and
// collects after every commit: a reader whose registration went is told
// ("is no longer kept", io) and opens again; none is handed a mix.
TEST_F(PgAttackTest, ReadersWhoseSessionsAreCutWhileAWriterCollectsAreToldNotMisled) {
    auto writer = collecting_writer();
    std::vector<std::unique_ptr<test::child>> readers;
    for (int i = 0; i < 2; ++i)
        readers.push_back(std::make_unique<test::child>([this](test::child& me) -> int {
            for (;;) {
                try {
                    if (!walk_snapshot(me, url + "&cache_mib=0&application_name=cut_reader")) return 1;
                } catch (const error& e) {
                    if (e.code() != errc::io) {
                        std::fprintf(stderr, "reader: %s\n", e.what());
                        me.send(failed);
                        return 1;
                    }
                    me.send(failed - 1);  // told
                }
            }
        }));
    int cuts = 0;
    for (int i = 0, n = rounds(25, 400); i < n; ++i) {
        sleep_random(60000);
        cuts += number_of("SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity WHERE "
                          "application_name = 'cut_reader' ORDER BY random() LIMIT 1) v");
    }
    writer.kill();
    std::uint64_t returned = 0, got = 0;
    while (writer.receive(got)) returned = got;
    std::uint64_t walks = 0, told = 0;
    for (auto& r : readers) {
        r->kill();
        while (r->receive(got)) {
            ASSERT_NE(got, failed) << "a reader saw what was never committed";
            ++(got == failed - 1 ? told : walks);
        }
    }
    std::printf("%d sessions cut, %llu walks, %llu times told\n", cuts, static_cast<unsigned long long>(walks),
                static_cast<unsigned long long>(told));
    EXPECT_GT(cuts, 0);
    EXPECT_GT(walks, 2u);
    expect_whole(returned);
}

// A store of the page engine: a list of 20,000 nodes over some 80 pages.
struct Node {
    long value;
    Node* next;
};
void build_list(const std::string& url) {
    auto s = store::open(url);
    auto* head = s.root<Node*>("list");
    for (long i = 0; i < 20000; ++i) *head = s.make<Node>(Node{i, *head});
    s.commit();
}

// Damage crafted in steppe_page rows: each is named by `steppe check URL`
// (exit 1), and a read of it fails with corrupt, never handing out the bytes.
TEST_F(PgAttackTest, DamagedPageRowsAreNamedAndNeverRead) {
    build_list(url);
    std::vector<int> victims;  // four pages of the list's
    for (std::string rest = server->sql("SELECT page FROM steppe_page WHERE store = '" + name +
                                        "' ORDER BY page DESC OFFSET 2 LIMIT 4");
         !rest.empty(); rest.erase(0, rest.find('\n') + 1))
        victims.push_back(std::stoi(rest));
    ASSERT_EQ(victims.size(), 4u);
    // A wrong sum; a short image; a long one; a bit flipped.
    const char* damage[] = {"sum = sum # 1", "image = substring(image from 1 for 100)", "image = image || '\\x00'::bytea",
                            "image = set_byte(image, 4000, get_byte(image, 4000) # 4)"};
    for (int i = 0; i < 4; ++i)
        server->sql(std::string("UPDATE steppe_page SET ") + damage[i] + " WHERE store = '" + name +
                    "' AND page = " + std::to_string(victims[std::size_t(i)]));
    // And a sound version of commit 0, which no commit is.
    const std::string first = std::to_string(number_of("SELECT min(page) FROM steppe_page WHERE store = '" + name + "'"));
    server->sql("INSERT INTO steppe_page SELECT store, page, 0, sum, image FROM steppe_page WHERE store = '" + name +
                "' AND page = " + first);
    auto check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 1) << check.out;
    for (int p : victims) EXPECT_CONTAINS(check.out, "page " + std::to_string(p) + " version of commit 1");
    EXPECT_CONTAINS(check.out, "is 100 bytes, not 4096");
    EXPECT_CONTAINS(check.out, "is 4097 bytes, not 4096");
    EXPECT_CONTAINS(check.out, "page " + first + " version of commit 0 is of commit 0");
    EXPECT_EQ(check.out.find(" 0 findings"), std::string::npos) << check.out;
    for (bool read_only : {true, false}) {
        auto s = open(url + "&cache_mib=0", read_only);
        std::vector<std::byte> page(storage::page_size);
        for (int p : victims)
            EXPECT_ERROR(errc::corrupt, "page " + std::to_string(p) + " (version of commit 1",
                         s->read_page(storage::page_no(p), page.data()));
        s->read_page(storage::page_no(victims[0] + 1), page.data());  // its neighbour reads
        EXPECT_EQ(s->check().size(), 5u);
    }
}

// A version past the store row's commit (P1 broken: the store row restored
// from an older copy than steppe_page, or a row added by hand), with a sum
// that fits its image: named by check, never read, and no writer opens,
// since its next commit would take the version for its own.
TEST_F(PgAttackTest, AVersionPastTheStoreRowIsNamedNotReadAndNotAdopted) {
    build_list(url);
    {
        auto other = open(server->url("other"));
        workload::run(*other, 1, 10);
    }
    server->sql("INSERT INTO steppe_page SELECT '" + name + "', 1, 2, sum, image FROM steppe_page WHERE store = "
                "'other' AND page = 8 AND txn = 1");
    auto check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 1) << check.out;
    EXPECT_CONTAINS(check.out, "page 1 version of commit 2 is past the store's newest commit 1");
    std::vector<std::byte> page(storage::page_size), committed(storage::page_size), stray(storage::page_size);
    {
        auto s = open(url + "&cache_mib=0", true);
        s->read_page(1, committed.data());
        open(server->url("other"), true)->read_page(8, stray.data());
        ASSERT_NE(committed, stray);
    }
    EXPECT_ERROR(errc::corrupt, "page 1 has a version of commit 2, past the store's newest commit 1", open());
    EXPECT_EQ(newest_txn(), "1\n");
    auto s = open(url + "&cache_mib=0", true);
    s->read_page(1, page.data());
    EXPECT_EQ(page, committed);
}

// Damage to the store's own row: open fails with corrupt (or version) naming
// it, `steppe check URL` reports it as a finding, never "0 findings", and so
// does check() on a handle opened before the damage.
TEST_F(PgAttackTest, ADamagedStoreRowIsCorruptNotReadAsAStore) {
    struct damage {
        const char* set;
        errc code;
        const char* says;
    };
    const damage cases[] = {
        {"page_count = -5", errc::corrupt, "-5 pages"},
        {"page_count = 4294967297", errc::corrupt, "4294967297 pages"},
        {"meta = '\\x00'::bytea", errc::corrupt, "meta of 1 bytes"},
        {"meta = meta || '\\x00'::bytea", errc::corrupt, "meta of 257 bytes"},
        {"txn = -3", errc::corrupt, "commit -3"},
        {"format = 3", errc::version, "format 3"},
        {"digest = digest + 1", errc::corrupt, "do not add up to the store row's digest"},
        {"digest = -1", errc::corrupt, "its digest is -1"},
    };
    for (const damage& d : cases) {
        SCOPED_TRACE(d.set);
        const std::string store = name + std::to_string(&d - cases);
        const std::string at = server->url(store);
        auto held = open(at);
        workload::run(*held, 1, 3);
        server->sql(std::string("UPDATE steppe_store SET ") + d.set + " WHERE name = '" + store + "'");
        const auto findings = held->check();
        held.reset();
        ASSERT_FALSE(findings.empty());
        EXPECT_CONTAINS(findings[0], d.says);
        EXPECT_ERROR(d.code, d.says, open(at, true));
        EXPECT_ERROR(d.code, d.says, open(at, false));
        auto check = test::run_cli("check '" + at + "'");
        EXPECT_EQ(check.exit_code, 1) << check.out;
        EXPECT_CONTAINS(check.out, "1 finding");
        EXPECT_CONTAINS(check.out, d.says);
    }
}

// P6: a page's newest version deleted (by hand, or lost with steppe_page
// restored from an older copy than steppe_store) is not read as the page:
// its older version would be, or zeros if it had none. Open refuses the
// store, naming the digest; a handle opened before the damage is told
// when it reads the page, and its check() names the page; `steppe check`
// reports it; `steppe recover` takes the versions as they are.
TEST_F(PgAttackTest, ADeletedNewestVersionIsCorruptNeverAnOlderPageOrZeros) {
    const std::string only = server->url(name + "_only");
    {
        auto s = open();
        test::commit_filled(*s, 1, 8);
        test::commit_filled(*s, 2, 8);
        test::commit_filled(*open(only), 1, 8);
    }
    auto held = open(url, true);  // no cache (cache_file_mib=0; 16 MiB in memory, but nothing read yet)
    server->sql("DELETE FROM steppe_page WHERE store = '" + name + "' AND page = 3 AND txn = 2; DELETE FROM "
                "steppe_page WHERE store = '" + name + "_only' AND page = 5");
    std::vector<std::byte> page(storage::page_size);
    EXPECT_ERROR(errc::corrupt, "page 3 at commit 2: steppe_page holds the version of commit 1 there, not that of "
                 "commit 2", held->read_page(3, page.data()));
    EXPECT_ERROR(errc::corrupt, "a version row was deleted", held->read_page(3, page.data()));  // again: not cached
    held->read_page(4, page.data());
    EXPECT_EQ(page[0], std::byte{2});
    auto findings = held->check();
    ASSERT_EQ(findings.size(), 2u) << ::testing::PrintToString(findings);
    EXPECT_CONTAINS(findings[0], "page 3 at commit 2 is the version of commit 2");
    EXPECT_CONTAINS(findings[1], "do not add up to the store row's digest (P6: recorded 72, found 68)");
    held.reset();
    for (const std::string& at : {url, only}) {
        SCOPED_TRACE(at);
        EXPECT_ERROR(errc::corrupt, "a page's newest version is missing from steppe_page", open(at, true));
        EXPECT_ERROR(errc::corrupt, "do not add up to the store row's digest", open(at, false));
        auto check = test::run_cli("check '" + at + "'");
        EXPECT_EQ(check.exit_code, 1) << check.out;
        EXPECT_CONTAINS(check.out, "do not add up");
        auto recover = test::run_cli("recover '" + at + "'");
        EXPECT_EQ(recover.exit_code, 0) << recover.out;
        EXPECT_CONTAINS(recover.out, "the store now holds its versions as they are");
        auto s = open(at, true);
        EXPECT_EQ(s->check(), std::vector<std::string>{});
    }
    auto s = open(url, true);
    s->read_page(3, page.data());
    EXPECT_EQ(page[0], std::byte{1}) << "recovered: the older version, as the report says";
    open(only, true)->read_page(5, page.data());
    EXPECT_EQ(page[0], std::byte{0}) << "recovered: zeros, as the report says";
}

// P6 the other way: a version added by hand (copied from another page, its
// sum fitting its image) is not taken for a commit's.
TEST_F(PgAttackTest, AVersionAddedByHandIsCorruptNotRead) {
    {
        auto s = open();
        test::commit_filled(*s, 1, 8);
        std::vector<std::byte> image(storage::page_size, std::byte{7});
        const storage::page_image zero{0, image.data()};
        s->commit({&zero, 1}, s->meta());
    }
    auto held = open(url, true);
    server->sql("INSERT INTO steppe_page SELECT store, 1, txn, sum, image FROM steppe_page WHERE store = '" + name +
                "' AND page = 0 AND txn = 2");
    std::vector<std::byte> page(storage::page_size);
    EXPECT_ERROR(errc::corrupt, "steppe_page holds the version of commit 2 there", held->read_page(1, page.data()));
    EXPECT_ERROR(errc::corrupt, "steppe_page holds versions no commit made", open(url, true));
    EXPECT_ERROR(errc::corrupt, "steppe_page holds versions no commit made", open(url, false));
    auto check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 1) << check.out;
    EXPECT_CONTAINS(check.out, "recorded 37, found 39");
}

// Format 1 (before P6's digest): a reader is told to let a writer open it
// first; the writer brings the tables and the store row up to date, adding
// the digest up from the versions as they are; then everything checks.
TEST_F(PgAttackTest, AFormatOneStoreIsBroughtUpToDateByItsFirstWriter) {
    {
        auto s = open();
        test::commit_filled(*s, 1, 8);
        test::commit_filled(*s, 2, 4);
    }
    server->sql("ALTER TABLE steppe_store DROP COLUMN digest; UPDATE steppe_store SET format = 1");
    EXPECT_ERROR(errc::version, "open the store once for writing", open(url, true));
    {
        auto s = open();
        EXPECT_EQ(s->check(), std::vector<std::string>{});
        test::commit_filled(*s, 3, 2);
    }
    EXPECT_EQ(server->sql("SELECT format, digest FROM steppe_store WHERE name = '" + name + "'"), "2|49\n");
    auto r = open(url, true);
    EXPECT_EQ(r->check(), std::vector<std::string>{});
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < 8; ++p) {
        r->read_page(p, page.data());
        EXPECT_EQ(page[0], std::byte(p < 2 ? 3 : p < 4 ? 2 : 1)) << "page " << p;
    }
}

// A store whose row in steppe_store is gone while its page versions remain
// is damage, not a new empty store: a writer's open says so, rather than
// making a store over the old versions, whose commits would then show them.
TEST_F(PgAttackTest, AStoreRowGoneWhilePagesRemainIsCorruptNotANewStore) {
    {
        auto s = open();
        workload::run(*s, 1, 10);
    }
    server->sql("DELETE FROM steppe_store WHERE name = '" + name + "'");
    EXPECT_ERROR(errc::corrupt, "its row in steppe_store is gone", open());
    EXPECT_EQ(newest_txn(), "") << "a new store row was made over the old versions";
    storage::options o;
    o.create = false;
    o.read_only = true;
    EXPECT_ERROR(errc::not_found, "does not exist", storage::storage::open(url, o));
}

// Store names: every allowed character, the longest name, names differing
// in case only; anything else is refused before a server is asked.
TEST_F(PgAttackTest, OddStoreNamesWorkOrAreRefusedClearly) {
    const std::string longest(63, 'z');
    for (const std::string& odd : {std::string("a.b-c_D9"), std::string("-.-"), longest, std::string("Cad"),
                                   std::string("cad")}) {
        auto s = open(server->url(odd));
        workload::run(*s, 1, odd == "cad" ? 5 : 3);
    }
    for (const std::string& odd : {std::string("a.b-c_D9"), std::string("-.-"), longest, std::string("Cad")}) {
        auto s = open(server->url(odd), true);
        EXPECT_EQ(workload::committed_txn(*s), 3u) << odd;
        EXPECT_EQ(workload::verify(*s), "") << odd;
        EXPECT_EQ(s->check(), std::vector<std::string>{});
    }
    EXPECT_EQ(workload::committed_txn(*open(server->url("cad"), true)), 5u);
    for (const std::string& bad : {longest + "z", std::string("caf\xc3\xa9"), std::string("a'b"), std::string("a;b"),
                                   std::string("a%20b"), std::string("a\tb"), std::string("")}) {
        SCOPED_TRACE(bad);
        EXPECT_ERROR(errc::invalid_argument, "store=NAME", open(server->url(bad)));
    }
}

// A wrong password, a database that does not exist: io naming what the
// server said, and never the password.
TEST_F(PgAttackTest, AWrongPasswordOrAMissingDatabaseIsAClearErrorWithoutThePassword) {
    server->sql("CREATE ROLE pw LOGIN SUPERUSER PASSWORD 'right-one'");
    server->add_hba_line("local all pw scram-sha-256");
    const std::string base = server->url(name);
    auto with_user = [&](const std::string& params) {
        std::string u = base;
        u.replace(u.find("user=steppe"), 11, params);
        return u;
    };
    for (const std::string& at : {with_user("user=pw&password=not-the-one"),
                                  "postgresql://pw:not-the-one@" + with_user("").substr(std::strlen("postgresql://"))}) {
        SCOPED_TRACE(at);
        try {
            open(at);
            ADD_FAILURE() << "a wrong password opened the store";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), errc::io);
            EXPECT_CONTAINS(std::string(e.what()), "password authentication failed");
            EXPECT_EQ(std::string(e.what()).find("not-the-one"), std::string::npos) << e.what();
        }
        // The CLI's finding is the library's message, and its summary line
        // names the store as the library does, without the password.
        auto check = test::run_cli("check '" + at + "'");
        EXPECT_EQ(check.exit_code, 1);
        const std::string finding = check.out.substr(0, check.out.find('\n'));
        EXPECT_CONTAINS(finding, "password authentication failed");
        EXPECT_EQ(check.out.find("not-the-one"), std::string::npos) << check.out;
    }
    auto right = open(with_user("user=pw&password=right-one"));
    workload::run(*right, 1, 2);
    right.reset();
    std::string missing = base;
    missing.replace(missing.find("/postgres?"), 10, "/no_such_db?");
    EXPECT_ERROR(errc::io, "database \"no_such_db\" does not exist", open(missing));
}

// A server that is read-only (default_transaction_read_only, as a hot
// standby is): opens and commits fail with errors that say so; a commit
// that failed left the store at its previous commit, and the handle commits
// once the server takes writes again.
TEST_F(PgAttackTest, AReadOnlyServerIsAClearErrorAndTheStoreGoesOnAfter) {
    auto w = open();
    workload::run(*w, 1, 5);
    server->set("default_transaction_read_only", "on");
    ::usleep(200000);  // sessions see the reload
    EXPECT_ERROR(errc::io, "read-only transaction", workload::run_one(*w, 6));
    EXPECT_ERROR(errc::io, "read-only transaction", open(server->url("other")));
    EXPECT_ERROR(errc::io, "read-only transaction", open(true));
    server->set("default_transaction_read_only", "");
    ::usleep(200000);
    EXPECT_EQ(workload::committed_txn(*open(true)), 5u);
    workload::run(*w, 6, 8);
    w.reset();
    expect_whole(8);
}

}  // namespace
