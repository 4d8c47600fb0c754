// Attacks on two changes to the PostgreSQL page store (src/storage/pg_store.hpp):
// P6's digest (format 2: the store row's sum of every page's newest commit
// number, moved by each commit, added up again at open, by every fetch
// against the version map, and by check()) and read-ahead's batched fetch
// (the hinted pages, runs of them, up to 256 a query).
//
// False positives: commits of every shape (spilled and given again, the
// same page twice in a row, growing the store, meta only), collections with
// readers at several snapshots, a connection cut before COMMIT, check()
// while a writer in another process commits and collects, an imported
// store, readers on a standby, the object engine, a reader whose
// registration was dropped. False negatives and wrong reads: version rows
// changed outside steppe (a commit number lowered, a version moved to
// another page, a store row restored from an older copy), with and without
// a cache file; damaged and unnamed versions among read-ahead pages; the
// writer's reads on another thread while it commits and collects; read-ahead
// batches whose session the server ends.
#include <gtest/gtest.h>
#include <steppe/error.hpp>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "storage/pg_store.hpp"
#include "support/child.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/filled_commits.hpp"
#include "support/pg_fixture.hpp"
#include "support/store_model.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using steppe::test::workload;

namespace {

bool long_run() {
    const char* v = std::getenv("STEPPE_LONG");
    return v && *v == '1';
}
int rounds(int usual, int long_rounds) { return long_run() ? long_rounds : usual; }

struct Node {
    long value;
    Node* next;
};

class PgDigestAttackTest : public test::pg_test {
protected:
    std::string one_line(const std::string& statement) {
        std::string out = server->sql(statement);
        while (!out.empty() && out.back() == '\n') out.pop_back();
        return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
    }
    // The store row's digest, and what the versions as stored add up to
    // (P6: each page's newest commit number times page + 1).
    std::string recorded_digest() { return one_line("SELECT digest FROM steppe_store WHERE name = '" + name + "'"); }
    std::string versions_digest() {
        return one_line("SELECT coalesce(sum(v.txn::numeric * (v.page + 1)), 0) FROM (SELECT DISTINCT ON (page) page, txn FROM steppe_page WHERE "
                        "store = '" + name + "' AND txn <= (SELECT txn FROM steppe_store WHERE name = '" + name +
                        "') ORDER BY page, txn DESC) v");
    }
    // P6 refused at open, for a reader and a writer, and by `steppe check`.
    void expect_refused(const std::string& at, const std::string& writer_says = "do not add up") {
        EXPECT_ERROR(errc::corrupt, "do not add up", open(at, true));
        EXPECT_ERROR(errc::corrupt, writer_says, open(at, false));
        auto check = test::run_cli("check '" + at + "'");
        EXPECT_EQ(check.exit_code, 1) << check.out;
        EXPECT_CONTAINS(check.out, "do not add up");
    }
    void expect_digest_adds_up() {
        EXPECT_EQ(recorded_digest(), versions_digest()) << "P6: the store row's digest drifted from its versions";
    }
};

// Commits `pages` (filled with `fill`), spilling `spilled` first (filled
// with fill + 1, so a spilled page given again must read as `fill`).
void commit_shaped(storage::storage& s, std::uint8_t fill, const std::vector<storage::page_no>& spilled,
                   const std::vector<storage::page_no>& pages) {
    std::vector<std::byte> given(storage::page_size, std::byte(fill)), first(storage::page_size, std::byte(fill + 1));
    std::vector<storage::page_image> spill, commit;
    for (auto p : spilled) spill.push_back({p, first.data()});
    for (auto p : pages) commit.push_back({p, given.data()});
    if (!spill.empty()) s.spill(spill);
    storage::meta_bytes meta = s.meta();
    meta[0] = std::byte(fill);
    s.commit(commit, meta);
}

// Every shape of commit, collections with readers at several snapshots:
// the digest moves exactly as the versions do, every handle's check() is
// clean, and a writer and a reader open again.
TEST_F(PgDigestAttackTest, TheDigestAddsUpThroughEveryShapeOfCommit) {
    auto w = open(url);
    std::vector<std::unique_ptr<storage::storage>> readers;
    // The model: what each page reads as.
    std::vector<std::uint8_t> model;
    auto apply = [&](std::uint8_t fill, const std::vector<storage::page_no>& spilled,
                     const std::vector<storage::page_no>& pages) {
        commit_shaped(*w, fill, spilled, pages);
        for (auto p : spilled) {
            if (model.size() <= p) model.resize(p + 1, 0);
            model[p] = std::uint8_t(fill + 1);
        }
        for (auto p : pages) {
            if (model.size() <= p) model.resize(p + 1, 0);
            model[p] = fill;
        }
        expect_digest_adds_up();
        EXPECT_EQ(w->check(), std::vector<std::string>{});
    };
    apply(1, {}, {0, 1, 2, 3});                  // first
    apply(2, {}, {2});                           // one page
    apply(3, {}, {2});                           // the same page again at once
    apply(4, {}, {});                            // meta only
    readers.push_back(open(url, true));
    apply(5, {10, 11, 3}, {3, 40});              // spilled, one given again; grows past a gap
    apply(6, {0, 1, 2, 3, 4, 5}, {});            // spilled only
    readers.push_back(open(url, true));
    w->checkpoint();
    apply(8, {}, {});                            // meta only
    apply(9, {7}, {7, 70});                      // a page spilled and given again, a new page past a gap
    readers.push_back(open(url, true));
    for (std::uint8_t t = 10; t < 20; ++t)
        apply(t, t % 2 ? std::vector<storage::page_no>{2} : std::vector<storage::page_no>{}, {2, storage::page_no(t)});
    w->checkpoint();
    readers.erase(readers.begin());  // the oldest reader goes: collection drops what only it held
    w->checkpoint();
    expect_digest_adds_up();
    for (auto& r : readers) {
        EXPECT_EQ(r->check(), std::vector<std::string>{});
        std::vector<std::byte> page(storage::page_size);
        for (storage::page_no p = 0; p < r->page_count(); ++p) r->read_page(p, page.data());
    }
    EXPECT_EQ(w->check(), std::vector<std::string>{});
    readers.clear();
    w.reset();
    for (bool read_only : {true, false}) {
        auto s = open(url, read_only);
        ASSERT_EQ(s->page_count(), model.size());
        std::vector<std::byte> page(storage::page_size);
        for (storage::page_no p = 0; p < model.size(); ++p) {
            s->read_page(p, page.data());
            EXPECT_EQ(page[0], std::byte(model[p])) << "page " << p;
        }
        EXPECT_EQ(s->check(), std::vector<std::string>{});
    }
}

// check() on a reader, and `steppe check URL`, while a writer in another
// process commits and collects after every commit: a sound store has no
// finding (check reads the store row and the versions at one instant).
TEST_F(PgDigestAttackTest, CheckWhileAWriterCommitsAndCollectsFindsNothing) {
    {
        auto s = open(url);
        workload::run(*s, 1, 3);
    }
    test::child writer([this](test::child& me) {
        auto s = open(url, false, 1);
        me.send(0);
        for (std::uint64_t txn = workload::committed_txn(*s) + 1;; ++txn) workload::run_one(*s, txn, txn % 3 == 0);
        return 0;
    });
    std::uint64_t started = 0;
    ASSERT_TRUE(writer.receive(started));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(long_run() ? 60 : 4);
    int checks = 0;
    while (std::chrono::steady_clock::now() < until) {
        auto r = open(url, true);
        for (int i = 0; i < 5; ++i, ++checks) {
            const auto findings = r->check();
            ASSERT_EQ(findings, std::vector<std::string>{}) << "check " << checks;
        }
        EXPECT_EQ(workload::verify(*r), "");
    }
    writer.kill();
    EXPECT_GT(checks, 5);
    // `steppe check URL` on a store of the page engine's while its writer
    // (another process) commits and collects after every commit.
    const std::string engine_url = server->url(name + "_engine");
    {
        auto s = store::open(engine_url);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 3000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    test::child engine_writer([engine_url](test::child& me) {
        open_options o;
        o.checkpoint_bytes = 1;
        auto s = store::open(engine_url, o);
        me.send(0);
        for (long round = 0;; ++round) {
            auto* head = s.root<Node*>("list");
            long n = 0;
            for (Node* at = *head; at && n < 200; at = at->next, ++n) at->value += 1;
            *head = s.make<Node>(Node{round, *head});
            s.commit();
        }
        return 0;
    });
    ASSERT_TRUE(engine_writer.receive(started));
    for (int i = 0; i < rounds(4, 40); ++i) {
        auto check = test::run_cli("check '" + engine_url + "'");
        EXPECT_EQ(check.exit_code, 0) << check.out;
    }
    engine_writer.kill();
}

// The writer's session ended by the server between commits, again and
// again: the commit that finds it gone runs on a new session, whose
// prepared commit statement must be there; the digest moves on right.
TEST_F(PgDigestAttackTest, ACommitAfterTheWritersSessionWasCutMovesTheDigestRight) {
    auto w = open(url, false, 1);
    workload::run(*w, 1, 2);
    for (std::uint64_t txn = 3; txn < 3 + std::uint64_t(rounds(6, 60)); ++txn) {
        server->terminate(backend_of(*w));
        ::usleep(20000);
        workload::run_one(*w, txn, txn % 2 == 0);
        expect_digest_adds_up();
    }
    EXPECT_EQ(w->check(), std::vector<std::string>{});
    EXPECT_EQ(workload::verify(*w), "");
    w.reset();
    auto r = open(url, true);
    EXPECT_EQ(workload::verify(*r), "");
    EXPECT_EQ(r->check(), std::vector<std::string>{});
}

// A newest version's commit number lowered by UPDATE (still the page's
// newest; the image and sum untouched): open refuses the store, a held
// handle is told when it reads the page (and its check() names it), with a
// cache file in the URL as without one; `steppe check` never says 0 findings.
TEST_F(PgDigestAttackTest, AVersionWhoseCommitNumberWasChangedIsNeverReadAsTheCommits) {
    test::temp_dir dir;
    for (bool with_file : {false, true}) {
        SCOPED_TRACE(with_file ? "with a cache file" : "without");
        const std::string store = name + (with_file ? "_f" : "_n");
        const std::string at = server->url(store, with_file ? "&cache_file=" + dir.path("cache") : "");
        {
            auto s = open(at);
            test::commit_filled(*s, 1, 8);
            test::commit_filled(*s, 2, 2);  // pages 0 and 1 at commit 2, the rest at 1
            std::vector<std::byte> image(storage::page_size, std::byte{5});
            const storage::page_image p9{9, image.data()};
            s->commit({&p9, 1}, s->meta());  // commit 3: page 9, its only version
            s->checkpoint();
        }
        {  // fill the cache file (if any) with every page
            auto r = open(at, true);
            std::vector<std::byte> page(storage::page_size);
            for (storage::page_no p = 0; p < r->page_count(); ++p) r->read_page(p, page.data());
        }
        auto held = open(at, true);
        server->sql("UPDATE steppe_page SET txn = 1 WHERE store = '" + store + "' AND page = 9");
        std::vector<std::byte> page(storage::page_size);
        if (!with_file) {
            EXPECT_ERROR(errc::corrupt, "page 9", held->read_page(9, page.data()));
        } else {  // the file's slot is the commit's image: reading it is right
            try {
                held->read_page(9, page.data());
                EXPECT_EQ(page[0], std::byte{5});
            } catch (const error& e) {
                EXPECT_EQ(e.code(), errc::corrupt) << e.what();
            }
        }
        EXPECT_FALSE(held->check().empty());
        held.reset();
        expect_refused(at);
    }
}

// The store row restored from an older copy than steppe_page (its txn,
// page count, meta and digest as at commit 3; steppe_page at commit 4,
// collected): no writer opens, and a reader at commit 3 reads no page of
// commit 4 as commit 3's and none that commit 4's collection took away.
TEST_F(PgDigestAttackTest, AStoreRowRestoredFromAnOlderCopyIsNeverReadAsWhole) {
    {
        auto s = open(url);
        test::commit_filled(*s, 1, 8);
        test::commit_filled(*s, 2, 8);
        test::commit_filled(*s, 3, 4);
    }
    server->sql("CREATE TABLE saved_row_" + name + " AS SELECT * FROM steppe_store WHERE name = '" + name + "'");
    {
        auto s = open(url);
        test::commit_filled(*s, 4, 8);
        s->checkpoint();  // no reader: commit 3's versions of pages 0-3 go
    }
    server->sql("UPDATE steppe_store s SET txn = o.txn, page_count = o.page_count, meta = o.meta, digest = o.digest "
                "FROM saved_row_" + name + " o WHERE s.name = '" + name + "'");
    expect_refused(url, "past the store's newest commit 3");
}

// Read-ahead among damaged versions: a reader opened before the damage is
// asked to read ahead every page (and pages past the store, and a burst
// far past the ring's size); a page whose image fails its sum, and one whose
// newest version was deleted, are never handed out, later reads of them say
// corrupt, every other page reads right, and the fetch thread lives on.
TEST_F(PgDigestAttackTest, ReadAheadNeverHandsOutADamagedOrUnnamedVersion) {
    constexpr storage::page_no pages = 600;  // more than one read-ahead query's 256
    {
        auto s = open(url);
        test::commit_filled(*s, 1, pages);
        test::commit_filled(*s, 2, 300);
    }
    auto held = open(url + "&cache_file_mib=0", true);
    server->sql("UPDATE steppe_page SET sum = sum # 1 WHERE store = '" + name + "' AND page = 100 AND txn = 2; "
                "DELETE FROM steppe_page WHERE store = '" + name + "' AND page = 200 AND txn = 2; "
                "UPDATE steppe_page SET image = set_byte(image, 9, 77) WHERE store = '" + name +
                "' AND page = 500 AND txn = 1");
    for (int burst = 0; burst < 3; ++burst) {
        for (storage::page_no p = 0; p < pages + 50; ++p) held->prefetch(p);
        for (storage::page_no p = 0; p < 5000; ++p) held->prefetch(p % 700);
        ::usleep(300000);  // let the fetch thread read ahead
    }
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < pages; ++p) {
        SCOPED_TRACE("page " + std::to_string(p));
        if (p == 100 || p == 200 || p == 500) {
            for (int again = 0; again < 2; ++again)
                EXPECT_ERROR(errc::corrupt, "page " + std::to_string(p), held->read_page(p, page.data()));
            continue;
        }
        held->read_page(p, page.data());
        EXPECT_EQ(page[0], std::byte(p < 300 ? 2 : 1));
    }
    EXPECT_GT(dynamic_cast<const storage::pg_store&>(*held).cache_counters().pages_fetched, 0u);
    const auto findings = held->check();
    EXPECT_GE(findings.size(), 3u) << ::testing::PrintToString(findings);
}

// A version moved to another page number: page 9's only version to page 6,
// which had none, so a sum of bare commit numbers is unchanged (it was, and
// page 6 read as page 9's image, page 9 as zeros, with no finding). Not
// read as the other page's: open refuses, a handle opened before the damage
// is told when it reads page 9, and its check() names both.
TEST_F(PgDigestAttackTest, AVersionMovedToAnotherPageIsNotReadAsThatPage) {
    {
        auto s = open(url);
        test::commit_filled(*s, 1, 4);
        std::vector<std::byte> image(storage::page_size, std::byte{9});
        const storage::page_image p9{9, image.data()};
        s->commit({&p9, 1}, s->meta());  // pages 4-8 never written
    }
    auto held = open(url, true);
    server->sql("UPDATE steppe_page SET page = 6 WHERE store = '" + name + "' AND page = 9");
    std::vector<std::byte> page(storage::page_size);
    held->read_page(6, page.data());  // its map names no version: zeros, as committed
    EXPECT_EQ(page[0], std::byte{0});
    EXPECT_ERROR(errc::corrupt, "page 9", held->read_page(9, page.data()));
    EXPECT_GE(held->check().size(), 2u);
    expect_refused(url);
}

}  // namespace

namespace {

long list_length(store&& s) {
    long n = 0;
    Node* const* head = s.find_root<Node*>("list");
    for (const Node* at = head ? *head : nullptr; at; at = at->next) ++n;
    return n;
}

// A store imported from a file (`steppe import FILE URL`: big spilled
// transactions) adds up and checks clean; so do readers on a streaming
// standby (their version map loaded there) while the writer on the primary
// commits and collects, at their snapshots and at new ones.
TEST_F(PgDigestAttackTest, AnImportedStoreAndReadersOnAStandbyCheckClean) {
    test::temp_dir dir;
    const std::string file = dir.path("list.steppe");
    {
        auto s = store::open(file);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 20000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    auto imported = test::run_cli("import '" + file + "' '" + url + "'");
    ASSERT_EQ(imported.exit_code, 0) << imported.out;
    expect_digest_adds_up();
    auto check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 0) << check.out;
    {
        open_options o;
        o.read_only = true;
        EXPECT_EQ(list_length(store::open(url, o)), 20000);
    }
    std::string why;
    if (!server->start_standby(why)) GTEST_SKIP() << why;
    const std::string standby = server->url_with_standby(name, "&pages_from=standby");
    auto first = open(standby, true);
    EXPECT_EQ(first->check(), std::vector<std::string>{});
    {
        open_options o;
        o.checkpoint_bytes = 1;
        auto w = store::open(url, o);
        for (int c = 0; c < 10; ++c) {
            auto* head = w.root<Node*>("list");
            long n = 0;
            for (Node* at = *head; at && n < 500; at = at->next, ++n) at->value = -at->value;
            for (int i = 0; i < 100; ++i) *head = w.make<Node>(Node{i, *head});
            w.commit();
        }
    }
    expect_digest_adds_up();
    server->wait_for_standby();
    auto second = open(standby, true);
    EXPECT_EQ(second->check(), std::vector<std::string>{});
    EXPECT_EQ(first->check(), std::vector<std::string>{});
    std::vector<std::byte> page(storage::page_size);
    for (auto* r : {first.get(), second.get()})
        for (storage::page_no p = 0; p < r->page_count(); ++p) r->read_page(p, page.data());
    first.reset();
    second.reset();
    open_options o;
    o.read_only = true;
    EXPECT_EQ(list_length(store::open(standby, o)), 21000);
    check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 0) << check.out;
}

}  // namespace

namespace {

// The writer's own reads (another thread of it, faulting pages the cache
// does not hold) while it commits and collects after every commit: never
// `corrupt` (P6's check of a fetch against a version map a commit is
// moving), never zeros for a page every commit has written.
TEST_F(PgDigestAttackTest, AWriterReadingOnAnotherThreadWhileItCommitsGetsNoZerosNorCorrupt) {
    auto w = open(url + "&cache_mib=0", false, 1);
    test::commit_filled(*w, 1, 40);
    std::atomic<bool> stop{false};
    std::atomic<int> zeros{0}, failures{0}, reads{0};
    std::string first_failure;
    auto reading = [&] {
        std::vector<std::byte> page(storage::page_size);
        for (storage::page_no p = 0; !stop.load(); p = (p + 7) % 40, ++reads) {
            storage::read_failure why;
            if (!w->read_committed_page_nothrow(p, page.data(), &why)) {
                if (failures++ == 0) first_failure = why.message;  // racy, but only read after a failure
                continue;
            }
            if (page[0] == std::byte{0}) ++zeros;
            else if (p >= 20 && page[0] != std::byte{1}) ++failures;
        }
    };
    std::thread one(reading), two(reading);
    for (std::uint8_t txn = 2; txn < 2 + rounds(120, 250); ++txn) test::commit_filled(*w, txn, 20);
    stop = true;
    one.join();
    two.join();
    EXPECT_EQ(failures.load(), 0) << first_failure;
    EXPECT_EQ(zeros.load(), 0);
    EXPECT_GT(reads.load(), 0);
    EXPECT_EQ(w->check(), std::vector<std::string>{});
}

}  // namespace

namespace {

// Read-ahead batches whose fetch connection the server ends (a failed
// batch): the fetch thread lives on, reconnects for the next fault, and
// every page reads right; hints past the store are dropped.
TEST_F(PgDigestAttackTest, TheFetchThreadOutlivesReadAheadBatchesWhoseSessionWasCut) {
    constexpr storage::page_no pages = 700;
    {
        auto s = open(url);
        test::commit_filled(*s, 1, pages);
        test::commit_filled(*s, 2, 100);
    }
    auto r = open(url + "&cache_mib=1&application_name=ahead", true);  // 256 pages: reads ahead again and again
    const std::string cut = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = "
                            "'ahead' AND pid <> " + std::to_string(backend_of(*r));
    std::vector<std::byte> page(storage::page_size);
    for (int round = 0; round < rounds(6, 60); ++round) {
        for (storage::page_no p = 0; p < pages + 100; ++p) r->prefetch(p);
        if (round % 2 == 0) server->sql(cut);
        for (storage::page_no p = 0; p < pages; p += 3) {
            r->read_page(p, page.data());
            ASSERT_EQ(page[0], std::byte(p < 100 ? 2 : 1)) << "page " << p << ", round " << round;
        }
    }
    EXPECT_EQ(r->check(), std::vector<std::string>{});
}

// A reader whose registration was dropped (by hand here; a collection does
// it when its session ends) while the writer commits and collects: its
// reads say its snapshot is no longer kept (io), never corrupt nor another
// commit's page, and its check() names nothing on the sound store.
TEST_F(PgDigestAttackTest, AReaderWhoseRegistrationWasDroppedIsToldNotCorrupt) {
    auto w = open(url, false, 1);
    test::commit_filled(*w, 1, 50);
    auto r = open(url + "&cache_mib=0", true);
    server->sql("DELETE FROM steppe_reader WHERE store = '" + name + "'");
    for (std::uint8_t txn = 2; txn < 6; ++txn) test::commit_filled(*w, txn, 50);
    std::vector<std::byte> page(storage::page_size);
    EXPECT_ERROR(errc::io, "no longer kept", r->read_page(7, page.data()));
    EXPECT_EQ(r->check(), std::vector<std::string>{});
    EXPECT_EQ(w->check(), std::vector<std::string>{});
    auto again = open(url, true);
    EXPECT_EQ(test::filled_problem(*again, 5), "");
}

}  // namespace

namespace {

struct Item {
    std::int64_t value;
    objects::ref<Item> next;
};

// The object engine on a store in PostgreSQL, collecting after every
// commit, with a reader open across the commits that refreshes: the digest
// adds up after each commit, and every check (the writer's, the reader's,
// `steppe check URL`) is clean.
TEST_F(PgDigestAttackTest, TheObjectEngineCommittingAndCollectingKeepsTheDigestRight) {
    objects::options wo;
    wo.checkpoint_bytes = 1;
    auto w = objects::store::open(url, wo);
    objects::ref<Item> head;
    for (int i = 0; i < 3000; ++i) {
        objects::ref<Item> it = w.make<Item>();
        it.mut()->value = i;
        it.mut()->next = head;
        head = it;
    }
    w.set_root("chain", head);
    w.commit();
    objects::options ro;
    ro.read_only = true;
    auto r = objects::store::open(url, ro);
    for (int c = 1; c <= 8; ++c) {
        int n = 0;
        for (auto it = w.find_root<Item>("chain"); it && n < 300 * c; it = it->next, ++n) it.mut()->value += 1;
        w.commit();
        expect_digest_adds_up();
        if (c % 3 == 0) r.refresh();
        EXPECT_EQ(r.check(), std::vector<std::string>{}) << "commit " << c;
    }
    EXPECT_EQ(w.check(), std::vector<std::string>{});
    r.refresh();
    std::int64_t sum = 0;
    for (auto it = r.find_root<Item>("chain"); it; it = it->next) sum += it->value;
    EXPECT_EQ(sum, std::int64_t(2999) * 3000 / 2 + 300 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8));
    auto check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 0) << check.out;
}

}  // namespace
