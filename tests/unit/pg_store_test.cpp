// The PostgreSQL page store (src/storage/pg_store.hpp; docs/guarantees.md,
// "Stores in PostgreSQL") against a real server this process starts
// (support/pg_server.hpp): pages and meta round trips, both engines end to
// end, one writer and its fence (P2), readers' snapshots and collection
// (P3), damage named (P4), kill -9 of the writer and a crash of the server
// mid-commit losing nothing commit() returned, and clear errors for bad URLs.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "storage/backup.hpp"
#include "storage/pg_connection.hpp"
#include "storage/pg_store.hpp"
#include "support/child.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/filled_commits.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;

namespace {

constexpr std::uint64_t pages = 40;

struct Node {
    long value;
    Node* next;
};


long list_length(store& s) {
    long n = 0;
    for (Node* p = *s.find_root<Node*>("list"); p; p = p->next) ++n;
    return n;
}

// A store of this test's own (the server is the process's).
class PgStoreTest : public test::pg_test {
protected:
    // A writer waits for the lock a closed or killed writer's session held
    // until the server has seen that session end (milliseconds).
    std::unique_ptr<storage::storage> open(bool read_only = false,
                                           std::chrono::milliseconds lock_timeout = std::chrono::seconds(10)) {
        storage::options o;
        o.read_only = read_only;
        o.lock_timeout = lock_timeout;
        return storage::storage::open(url, o);
    }
    std::uint64_t versions() { return std::stoull(server->sql("SELECT count(*) FROM steppe_page WHERE store = '" + name + "'")); }
    // No autovacuum on steppe_page while it lives: what the table's
    // statistics and visibility map hold is what the test made.
    struct no_autovacuum {
        const test::pg_server& server;
        explicit no_autovacuum(const test::pg_server& s) : server(s) {
            server.sql("ALTER TABLE steppe_page SET (autovacuum_enabled = false)");
        }
        ~no_autovacuum() { server.sql("ALTER TABLE steppe_page RESET (autovacuum_enabled)"); }
    };
    // Commits pages 0..pages-1 filled with 1, then the second half again as
    // bytes that do not compress; returns those bytes (page p at p x 4 KiB).
    std::vector<std::byte> commit_half_as_noise(std::uint64_t seed) {
        std::vector<std::byte> noise(pages * storage::page_size);
        for (auto& b : noise) b = std::byte((seed = seed * 6364136223846793005 + 1442695040888963407) >> 56);
        auto s = open();
        test::commit_filled(*s, 1, pages);
        std::vector<storage::page_image> images;
        for (std::uint64_t p = pages / 2; p < pages; ++p) images.push_back({p, noise.data() + p * storage::page_size});
        s->commit(images, s->meta());
        return noise;
    }
    // A reader sees what commit_half_as_noise committed, and the store checks clean.
    void expect_half_as_noise(const std::vector<std::byte>& noise) {
        auto s = open(true);
        std::vector<std::byte> page(storage::page_size);
        for (std::uint64_t p = 0; p < pages; ++p) {
            s->read_page(p, page.data());
            if (p < pages / 2)
                EXPECT_EQ(page[100], std::byte{1}) << "page " << p;
            else
                EXPECT_EQ(std::memcmp(page.data(), noise.data() + p * storage::page_size, storage::page_size), 0)
                    << "page " << p;
        }
        EXPECT_TRUE(s->check().empty());
    }
    // How the image column is kept: attcompression (from PostgreSQL 14 on;
    // read through to_jsonb, so the statement parses on any version) and
    // attstorage, e.g. "lm" (lz4, in the row) or "e" (out of line).
    std::string image_column() {
        std::string column = server->sql(
            "SELECT coalesce(to_jsonb(a) ->> 'attcompression', '') || attstorage::text FROM pg_attribute a "
            "WHERE attrelid = 'steppe_page'::regclass AND attname = 'image'");
        column.erase(column.find_last_not_of('\n') + 1);
        return column;
    }
    // The plan of an index-only scan of this store's rows, as run.
    std::string index_only_scan_of_store() {
        return server->sql("SET enable_seqscan = off; SET enable_bitmapscan = off; EXPLAIN (ANALYZE, COSTS OFF, "
                           "TIMING OFF, SUMMARY OFF) SELECT page, txn FROM steppe_page WHERE store = '" + name + "'");
    }
};

TEST_F(PgStoreTest, PagesAndMetaSurviveReopening) {
    {
        auto s = open();
        EXPECT_EQ(s->page_count(), 0u);
        test::commit_filled(*s, 1, pages);
        test::commit_filled(*s, 2, pages / 2);  // half the pages change
        EXPECT_EQ(s->txn_seq(), 2u);
    }
    auto s = open();
    EXPECT_EQ(s->txn_seq(), 2u);
    EXPECT_EQ(s->page_count(), pages);
    std::vector<std::byte> page(storage::page_size);
    for (std::uint64_t p = 0; p < pages; ++p) {
        s->read_page(p, page.data());
        EXPECT_EQ(page[100], std::byte(p < pages / 2 ? 2 : 1)) << "page " << p;
    }
    EXPECT_EQ(s->meta()[0], std::byte{2});
    EXPECT_TRUE(s->check().empty());
    EXPECT_ERROR(errc::invalid_argument, "beyond the store's 40 pages", s->read_page(pages, page.data()));
}

// Page images are kept in their rows, compressed by lz4, where the server
// has lz4; elsewhere out of line, uncompressed. Either way an image that
// does not compress (random bytes) reads back as well as one that does.
TEST_F(PgStoreTest, PageImagesAreCompressedInTheirRowsWhereTheServerCan) {
    const std::vector<std::byte> noise = commit_half_as_noise(0x9e3779b97f4a7c15);
    const std::string column = image_column();
    ASSERT_TRUE(column == "lm" || column == "e") << column;
    if (column == "lm") {
        EXPECT_LT(std::stoul(server->sql("SELECT max(pg_column_size(image)) FROM steppe_page WHERE store = '" + name +
                                         "' AND page < " + std::to_string(pages / 2))),
                  512u);
    }
    expect_half_as_noise(noise);
}

// On a server without lz4 (built without it, or before PostgreSQL 14)
// steppe's tables keep page images out of line, uncompressed, and a store
// there works alike. Such a server is made here from this one: an event
// trigger refuses "SET COMPRESSION lz4" with the error a server without
// lz4 gives (0A000, "compression method lz4 not supported"). The tables are
// made again, the usual way, by the next open after this test.
TEST_F(PgStoreTest, OnAServerWithoutLz4ImagesStayOutOfLineAndServeAlike) {
    server->sql("DROP TABLE IF EXISTS steppe_page, steppe_store, steppe_reader");
    server->sql(
        "CREATE OR REPLACE FUNCTION steppe_test_no_lz4() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF current_query() ILIKE '%COMPRESSION lz4%' THEN RAISE EXCEPTION 'compression method lz4 not supported' "
        "USING ERRCODE = 'feature_not_supported'; END IF; END $$; "
        "CREATE EVENT TRIGGER steppe_test_no_lz4 ON ddl_command_start WHEN TAG IN ('ALTER TABLE') "
        "EXECUTE FUNCTION steppe_test_no_lz4()");
    struct tables_back {
        const test::pg_server& server;
        ~tables_back() {
            server.sql("DROP EVENT TRIGGER IF EXISTS steppe_test_no_lz4; DROP FUNCTION IF EXISTS steppe_test_no_lz4(); "
                       "DROP TABLE IF EXISTS steppe_page, steppe_store, steppe_reader");
        }
    } back{*server};
    const std::vector<std::byte> noise = commit_half_as_noise(0x2545f4914f6cdd1d);
    EXPECT_EQ(image_column(), "e") << "out of line, uncompressed";
    expect_half_as_noise(noise);
}

// A collection whose store the table's statistics have not seen (a bulk
// load before autoanalyze ran; here autovacuum is off and the statistics
// are of another store) ends at once. The planner took the store for one
// row and joined each version with the whole store's aggregate, re-run per
// row: after an OO1 huge load (93,717 pages) that collection ran 18
// minutes; on these 3,000 pages about 14 s, against 5 s of
// statement_timeout, where a merge join takes about 10 ms.
TEST_F(PgStoreTest, ACollectionUnderStatisticsThatNeverSawItsStoreEnds) {
    {
        storage::options o;
        test::commit_filled(*storage::storage::open(server->url(name + "_seen"), o), 1, 8);
    }
    no_autovacuum off(*server);
    server->sql("ANALYZE steppe_page");
    constexpr std::uint64_t many = 3000;
    storage::options o;
    o.lock_timeout = std::chrono::seconds(10);
    auto w = storage::storage::open(server->url(name, "&options=-c%20statement_timeout%3D5000"), o);
    test::commit_filled(*w, 1, many);
    test::commit_filled(*w, 2, many);
    w->checkpoint();  // collects: each page's version of commit 1 goes
    EXPECT_EQ(versions(), many);
    EXPECT_EQ(test::filled_problem(*w, 2), "");
    EXPECT_TRUE(w->check().empty());
}

// A bulk load (commits of half the store or more since the last VACUUM)
// is followed by VACUUM, so the next open's version map, an index-only
// scan, reads no heap tuple. Before, every open fetched each row's tuple
// until autovacuum came: 1 s against 79 ms on OO1 huge. Autovacuum is off
// here: only the store can have vacuumed. A small commit leaves its rows
// to autovacuum (no VACUUM in its latency); a load in chunks is vacuumed
// once its chunks add up to half the store. The commit does not wait for
// its VACUUM (the writer's next statement does, if it still runs), and the
// VACUUM never waits: a session holding the table's VACUUM lock (another
// writer's VACUUM, an ANALYZE) is passed over, and the commit returns at
// once.
TEST_F(PgStoreTest, ABulkLoadLeavesItsRowsVisibleToIndexOnlyScans) {
    auto w = open();  // makes the tables
    no_autovacuum off(*server);
    constexpr std::uint64_t many = 3000;
    test::commit_filled(*w, 1, many);
    w.reset();
    std::string plan = index_only_scan_of_store();
    EXPECT_NE(plan.find("Index Only Scan"), std::string::npos) << plan;
    EXPECT_NE(plan.find("Heap Fetches: 0"), std::string::npos) << plan;
    w = open();
    test::commit_filled(*w, 2, 100);
    w.reset();
    plan = index_only_scan_of_store();
    EXPECT_NE(plan.find("Index Only Scan"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("Heap Fetches: 0"), std::string::npos) << plan;
    // Chunks of 700 pages, each a quarter of the store at most: the third
    // brings the chunks since the last VACUUM (100 + 3 x 700) past half.
    w = open();
    for (std::uint8_t chunk = 3; chunk < 6; ++chunk) {
        std::vector<std::byte> image(storage::page_size, std::byte{chunk});
        std::vector<storage::page_image> pages_;
        for (std::uint64_t p = 0; p < 700; ++p) pages_.push_back({(chunk - 3) * 700 + p, image.data()});
        w->commit(pages_, w->meta());
    }
    // The writer still open: its VACUUM ends on its own, up to 10 s.
    for (int i = 0; i < 100 && (plan = index_only_scan_of_store()).find("Heap Fetches: 0") == std::string::npos; ++i)
        ::usleep(100'000);
    EXPECT_NE(plan.find("Heap Fetches: 0"), std::string::npos) << plan;
    // Another session holds the table's VACUUM lock (SHARE UPDATE
    // EXCLUSIVE, as a VACUUM or ANALYZE does) for 3 s: a bulk commit
    // does not wait for it.
    std::thread holder([&] {
        server->sql("BEGIN; LOCK TABLE steppe_page IN SHARE UPDATE EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT");
    });
    ::usleep(500'000);
    const auto start = std::chrono::steady_clock::now();
    test::commit_filled(*w, 6, many);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500))
        << "the commit waited for the lock holder";
    holder.join();
    w.reset();
    auto r = open(true);
    EXPECT_TRUE(r->check().empty());
}

// A statement sent without waiting (the VACUUM after a bulk load): the
// next statement on the connection, of any kind, waits for it and then
// runs as if it had not been there, whether it succeeded or failed.
TEST_F(PgStoreTest, AStatementSentWithoutWaitingIsWaitedForByTheNext) {
    auto w = open();  // makes the tables
    const storage::pg_address address = storage::parse_pg_address(server->url(name));
    storage::pg_connection c(address.conninfo, address.shown);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(c.send_detached("SELECT pg_sleep(0.3)"));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250)) << "it did not wait";
    EXPECT_EQ(c.exec("after", "SELECT 1 + 1").text(0, 0), "2");
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300)) << "the next waited";
    ASSERT_TRUE(c.send_detached("SELECT 1 / 0"));  // fails: dropped
    PGresult* r = c.try_exec_script("SELECT 3; SELECT 4");
    ASSERT_NE(r, nullptr) << c.error();
    EXPECT_EQ(storage::pg_result(r).text(0, 0), "4");
    ASSERT_TRUE(c.send_detached("VACUUM (SKIP_LOCKED, TRUNCATE false) steppe_page"));
    c.begin_copy("copy", "COPY steppe_reader (store, id) FROM STDIN");
    c.end_copy("copy");
    ASSERT_TRUE(c.send_detached("SELECT pg_sleep(0.1)"));
    EXPECT_TRUE(c.reconnect());  // a reset drops it
    EXPECT_EQ(c.exec("after a reset", "SELECT 5").text(0, 0), "5");
}

// A store in tables an earlier steppe made (images out of line and
// uncompressed, a key without sum) is written, read and checked alike, and
// its tables are left as they were. The tables are made again, the new way,
// by the next open after this test.
TEST_F(PgStoreTest, TablesMadeByAnEarlierSteppeStillServe) {
    server->sql("DROP TABLE IF EXISTS steppe_page, steppe_store, steppe_reader");
    server->sql(
        "CREATE TABLE steppe_store (name text PRIMARY KEY, id integer GENERATED ALWAYS AS IDENTITY UNIQUE, "
        "store_id text NOT NULL, format integer NOT NULL, txn bigint NOT NULL, page_count bigint NOT NULL, "
        "meta bytea NOT NULL, fence bigint NOT NULL, digest numeric NOT NULL DEFAULT 0); "
        "CREATE TABLE steppe_page (store text NOT NULL, page bigint NOT NULL, txn bigint NOT NULL, "
        "sum integer NOT NULL, image bytea NOT NULL, PRIMARY KEY (store, page, txn)); "
        "ALTER TABLE steppe_page ALTER COLUMN image SET STORAGE EXTERNAL; "
        "CREATE TABLE steppe_reader (store text NOT NULL, id integer NOT NULL, txn bigint NOT NULL, "
        "since timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (store, id)); "
        "CREATE SEQUENCE IF NOT EXISTS steppe_reader_id AS integer CYCLE");
    {
        auto s = open();
        test::commit_filled(*s, 1, pages);
        test::commit_filled(*s, 2, pages / 2);
    }
    auto s = open(true);
    std::vector<std::byte> page(storage::page_size);
    for (std::uint64_t p = 0; p < pages; ++p) {
        s->read_page(p, page.data());
        EXPECT_EQ(page[100], std::byte(p < pages / 2 ? 2 : 1)) << "page " << p;
    }
    EXPECT_TRUE(s->check().empty());
    std::string column = server->sql(
        "SELECT attstorage::text || (SELECT count(*) FROM pg_index WHERE indrelid = 'steppe_page'::regclass AND "
        "indnatts > indnkeyatts)::text FROM pg_attribute WHERE attrelid = 'steppe_page'::regclass AND attname = 'image'");
    column.erase(column.find_last_not_of('\n') + 1);
    EXPECT_EQ(column, "e0") << "left as they were";
    s.reset();
    server->sql("DROP TABLE steppe_page, steppe_store, steppe_reader");
}

TEST_F(PgStoreTest, SpilledPagesAreReadBackCommittedOrDiscarded) {
    auto s = open();
    test::commit_filled(*s, 1, 4);
    std::vector<std::byte> nine(storage::page_size, std::byte{9}), page(storage::page_size);
    std::vector<storage::page_image> spilled{{1, nine.data()}, {6, nine.data()}};
    s->spill(spilled);
    EXPECT_TRUE(s->is_pending(6));
    s->read_page(6, page.data());
    EXPECT_EQ(page[0], std::byte{9});
    {
        storage::read_failure why;
        ASSERT_TRUE(s->read_committed_page_nothrow(1, page.data(), &why)) << why.message;
        EXPECT_EQ(page[0], std::byte{1});
    }
    s->discard_pending();
    EXPECT_FALSE(s->is_pending(6));
    s->spill(spilled);
    storage::meta_bytes meta{};
    s->commit({}, meta);  // the spilled pages are the transaction
    s.reset();
    s = open(true);
    EXPECT_EQ(s->page_count(), 7u);
    s->read_page(6, page.data());
    EXPECT_EQ(page[0], std::byte{9});
    s->read_page(1, page.data());
    EXPECT_EQ(page[0], std::byte{9});
}

// The page engine, end to end: a list built, committed and walked in a
// fresh process (its own address space and swizzling).
TEST_F(PgStoreTest, ThePageEngineStoresAListThere) {
    {
        auto s = store::open(url);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 20000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    test::child reader([this](test::child&) {
        open_options o;
        o.read_only = true;
        auto s = store::open(url, o);
        long expect = 19999;
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next, --expect)
            if (n->value != expect) return 1;
        // What the server served shows in the store's stats: the pages came
        // from it or from the cache file the writer's commits filled.
        const store_stats st = s.stats();
        if (st.server_round_trips < 3 || st.server_pages_fetched + st.cache_file_hits == 0 ||
            to_string(st).find(" round trips, ") == std::string::npos)
            return 3;
        return expect == -1 && s.check().empty() ? 0 : 2;
    });
    EXPECT_EQ(reader.exit_code(), 0);
}

// A store in PostgreSQL is not loaded ahead (each page would be a fetch
// beside the program's): the option says so, and the store works as without it.
TEST_F(PgStoreTest, AStoreThereIsNotLoadedAhead) {
    {
        auto s = store::open(url);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 2000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    open_options o;
    o.load_ahead = true;
    auto s = store::open(url, o);
    EXPECT_EQ(s.stats().load_ahead, "not started: the store is not in a file");
    long sum = 0;
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) sum += n->value;
    EXPECT_EQ(sum, 1999L * 2000 / 2);
    EXPECT_EQ(s.stats().loaded_ahead_pages, 0u);
}

// Fork and the fetch thread (storage::hold_threads_for_fork): a child
// forked while the thread fetches (here every fault, with no cache, past a
// budget that keeps evicting) inherits none of the locks it takes inside a
// pass: under an allocator without fork handlers (GCC 12's ASan) it would
// wait forever in its first allocation.
// Children forked while a thread walks a list through faults (and so the
// fetch thread works) can allocate: no lock of the fetch thread is held
// across the fork. `params` name the caches: with a cache file the
// clusters grow, and a fault answered at its own row may fork while the
// rest of its cluster still streams in.
void children_forked_while_fetching_can_allocate(const std::string& url, const std::string& params) {
    constexpr long nodes = 200000;  // ~800 pages: 3 times the budget
    {
        auto s = store::open(url);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < nodes; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    open_options o;
    o.read_only = true;
    o.resident_budget = 1 << 20;
    auto s = store::open(url + params, o);
    Node* const head = *s.find_root<Node*>("list");
    std::atomic<bool> stop{false};
    std::atomic<long> walks{0}, wrong{0};
    std::thread walker([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            long expect = nodes - 1;
            for (Node* n = head; n; n = n->next, --expect)
                if (n->value != expect) ++wrong;
            ++walks;
        }
    });
    while (walks.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::uint64_t faults_before = s.stats().faults;
    const test::forked_children children = test::fork_allocating_children(40);
    stop = true;
    walker.join();
    EXPECT_EQ(children.hung, 0) << "children that never finished allocating";
    EXPECT_EQ(children.failed, 0);
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(s.stats().faults, faults_before) << "no fetch while the children were forked: the test shows nothing";
}

TEST_F(PgStoreTest, ChildrenForkedWhileTheFetchThreadWorksCanAllocate) {
    children_forked_while_fetching_can_allocate(url, "&cache_mib=0&cache_file_mib=0");
}

TEST_F(PgStoreTest, ChildrenForkedWhileGrownClustersStreamInCanAllocate) {
    test::temp_dir dir;
    children_forked_while_fetching_can_allocate(url, "&cache_mib=1&cache_file=" + dir.path("pg-pages"));
}

struct Item {
    std::int64_t value;
    objects::ref<Item> next;
};

TEST_F(PgStoreTest, TheObjectEngineStoresAChainThere) {
    {
        auto s = objects::store::open(url);
        objects::ref<Item> head;
        for (int i = 0; i < 5000; ++i) {
            objects::ref<Item> it = s.make<Item>();
            it.mut()->value = i;
            it.mut()->next = head;
            head = it;
        }
        s.set_root("chain", head);
        s.commit();
    }
    auto s = objects::store::open(url);
    std::int64_t expect = 4999;
    for (auto it = s.find_root<Item>("chain"); it; it = it->next, --expect) ASSERT_EQ(it->value, expect);
    EXPECT_EQ(expect, -1);
    EXPECT_TRUE(s.check().empty());
}

TEST_F(PgStoreTest, OneWriterAtATimeAndReadersBesideIt) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    EXPECT_ERROR(errc::locked, "held by another writer", open(false, std::chrono::milliseconds(0)));
    auto r = open(true);
    test::commit_filled(*w, 2, pages);
    test::commit_filled(*w, 3, pages);
    EXPECT_EQ(test::filled_problem(*r, 1), "");  // its snapshot, whatever the writer did since
    w->checkpoint();                           // collection keeps what the reader needs (P3)
    EXPECT_EQ(test::filled_problem(*r, 1), "");
    auto r2 = open(true);
    EXPECT_EQ(test::filled_problem(*r2, 3), "");
    EXPECT_EQ(w->describe().readers.size(), 2u);
    EXPECT_TRUE(w->check().empty());
}

// A close's collection (the engines call try_checkpoint as they close)
// runs only where this handle committed: the collection's DELETE reads
// every version of the store, 0.25-0.7 s on OO1 huge, which every close of
// a writer that only read paid. What an earlier writer left uncollected
// stays until a handle commits, or checkpoint() is asked for.
TEST_F(PgStoreTest, OnlyAWriterThatCommittedCollectsWhenItCloses) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
        test::commit_filled(*w, 2, pages);
    }  // no collection: as if it had been killed
    ASSERT_EQ(versions(), 2 * pages);
    {
        auto w = open();
        const std::uint64_t before = w->server_counters().round_trips;
        EXPECT_TRUE(w->try_checkpoint());
        EXPECT_EQ(w->server_counters().round_trips, before) << "nothing sent";
        EXPECT_EQ(versions(), 2 * pages);
        w->checkpoint();  // asked for: collects what the earlier writer left
        EXPECT_EQ(versions(), pages);
    }
    auto w = open();
    test::commit_filled(*w, 3, pages);
    EXPECT_TRUE(w->try_checkpoint());
    EXPECT_EQ(versions(), pages) << "commit 3's pages made commit 2's old";
    EXPECT_EQ(test::filled_problem(*w, 3), "");
}

// Open reads the version map on the fetch connection while the control
// connection registers (or takes the lock), and keeps it only if no commit
// came between (pg_store::take_speculated_versions); else it reads the map
// again at its snapshot, one round trip more. Readers opened while a writer
// commits at random instants take both ways (seen in their round trips),
// and every one of them opens (no digest refused) and reads one whole
// commit, checked.
TEST_F(PgStoreTest, AVersionMapReadAheadOfTheSnapshotIsKeptOnlyIfNoCommitCameBetween) {
    test::commit_filled(*open(), 1, pages);
    std::atomic<bool> done{false};
    std::thread writer([&] {
        auto w = open();
        std::uint8_t txn = 1;
        for (unsigned seed = 1; !done.load();) {
            test::commit_filled(*w, ++txn, pages);
            seed = seed * 1103515245 + 12345;
            std::this_thread::sleep_for(std::chrono::microseconds((seed >> 16) % 8000));
        }
    });
    storage::options o;
    o.read_only = true;
    int kept = 0, read_again = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((kept < 3 || read_again < 3) && std::chrono::steady_clock::now() < deadline) {
        try {
            auto r = storage::pg_store::open(url, o);
            const std::uint64_t trips = r->cache_counters().round_trips;
            EXPECT_TRUE(trips == 2 || trips == 3) << trips;
            (trips == 2 ? kept : read_again)++;
            EXPECT_EQ(test::filled_problem(*r, std::uint8_t(r->meta()[0])), "");
        } catch (const std::exception& e) {
            ADD_FAILURE() << "a reader's open failed: " << e.what();
            break;
        }
    }
    done = true;
    writer.join();
    EXPECT_GE(kept, 3) << "opens that kept the map read ahead";
    EXPECT_GE(read_again, 3) << "opens that read it again after a commit came between";
    EXPECT_TRUE(open(true)->check().empty());
}

// Open's round trips after the connections: for a store that exists, one
// on the control connection (settings, the commit statement, P2's lock and
// fence, or a reader's registration) and, at the same time, one on the
// fetch connection (its statement prepared and the version map read, in
// one pipeline). At 5 ms a round trip, each one in turn is 5 ms of every
// open.
TEST_F(PgStoreTest, AnExistingStoreOpensInOneRoundTripPerConnection) {
    storage::options o;
    test::commit_filled(*open(), 1, pages);
    auto fence = [&] { return std::stoll(server->sql("SELECT fence FROM steppe_store WHERE name = '" + name + "'")); };
    const long long before = fence();
    auto w = storage::pg_store::open(url, o);
    EXPECT_EQ(w->cache_counters().round_trips, 2u);
    EXPECT_EQ(fence(), before + 1);  // P2: the fence moved
    // A commit: the row locked, COPY's start and end, the row moved and COMMIT
    // (the statement for that was prepared in open's round trip).
    const std::uint64_t opened = w->cache_counters().round_trips;
    test::commit_filled(*w, 2, pages);
    EXPECT_EQ(w->cache_counters().round_trips - opened, 4u);
    EXPECT_TRUE(w->check().empty());
    o.read_only = true;
    auto r = storage::pg_store::open(url, o);
    EXPECT_EQ(r->cache_counters().round_trips, 2u);
    EXPECT_EQ(test::filled_problem(*r, 2), "");
    o.read_only = false;
    o.durable = false;  // one SET more, in the same round trip
    w.reset();
    w = storage::pg_store::open(url, o);
    EXPECT_EQ(w->cache_counters().round_trips, 2u);
    test::commit_filled(*w, 3, pages);
    // exclusive_create refused an existing store before touching it: no fence taken.
    const long long held = fence();
    w.reset();
    o.exclusive_create = true;
    EXPECT_ERROR(errc::exists, "exists already", storage::pg_store::open(url, o));
    EXPECT_EQ(fence(), held);
}

TEST_F(PgStoreTest, CollectionDropsWhatNoLiveReaderNeeds) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    test::child reader([this](test::child& me) {
        auto r = open(true);
        me.report_and_wait();  // killed here
        return 0;
    });
    ASSERT_TRUE(reader.wait_for_report());
    for (std::uint8_t t = 2; t <= 4; ++t) test::commit_filled(*w, t, pages);
    w->checkpoint();
    EXPECT_EQ(versions(), 4 * pages);  // the reader at commit 1 keeps every version since
    reader.kill();                     // its session ends, and its advisory lock with it
    for (int i = 0; i < 100 && server->sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                                           "'client backend'") != "3\n";
         ++i)
        ::usleep(20000);  // the server notices the dead client's sockets
    w->checkpoint();
    EXPECT_EQ(versions(), pages);
    EXPECT_EQ(w->describe().readers.size(), 0u);
    EXPECT_EQ(test::filled_problem(*open(true), 4), "");
}

// P3: a reader whose session the server ended has lost its registration,
// and the writer may have collected the versions its snapshot reads: it is
// told so, never handed a newer version or zeros.
TEST_F(PgStoreTest, AReaderThatLostItsRegistrationIsToldNotGivenOtherData) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    auto r = open(true);
    test::commit_filled(*w, 2, pages);
    auto* pg = dynamic_cast<storage::pg_store*>(r.get());
    ASSERT_NE(pg, nullptr);
    server->sql("SELECT pg_terminate_backend(" + std::to_string(pg->backend_pid()) + ")");
    for (int i = 0; i < 100 && w->describe().readers.size() != 0; ++i) {
        w->checkpoint();  // drops the registration once the server has let go of its lock
        ::usleep(20000);
    }
    w->checkpoint();
    ASSERT_EQ(versions(), pages);  // commit 1's versions are gone
    std::vector<std::byte> page(storage::page_size);
    EXPECT_ERROR(errc::io, "is no longer kept", r->read_page(5, page.data()));
}

// P2: a writer whose session the server ended (a network cut, seen by the
// server) and whose store another writer took cannot commit, even over a
// new connection; the other writer's commits stand.
TEST_F(PgStoreTest, AWriterWhoseStoreWasTakenOverCannotCommit) {
    auto old_writer = open();
    test::commit_filled(*old_writer, 1, pages);
    auto* pg = dynamic_cast<storage::pg_store*>(old_writer.get());
    ASSERT_NE(pg, nullptr);
    server->sql("SELECT pg_terminate_backend(" + std::to_string(pg->backend_pid()) + ")");
    auto new_writer = open();
    test::commit_filled(*new_writer, 2, pages);
    EXPECT_ERROR(errc::locked, "another writer took the store over", test::commit_filled(*old_writer, 9, pages));
    test::commit_filled(*new_writer, 3, pages);
    new_writer.reset();
    EXPECT_EQ(test::filled_problem(*open(true), 3), "");
}

// Nor read: once the new writer has collected, the old writer's commit has
// no versions left, and a read of a page it does not hold in memory is
// told so (its fetch checks the fence, as a reader's checks its
// registration), never handed zeros.
TEST_F(PgStoreTest, AWriterWhoseStoreWasTakenOverIsToldNotGivenZeros) {
    storage::options o;
    o.lock_timeout = std::chrono::seconds(10);
    auto old_writer = storage::storage::open(url + "&cache_mib=0", o);
    test::commit_filled(*old_writer, 1, pages);
    test::commit_filled(*old_writer, 2, pages);
    auto* pg = dynamic_cast<storage::pg_store*>(old_writer.get());
    ASSERT_NE(pg, nullptr);
    server->sql("SELECT pg_terminate_backend(" + std::to_string(pg->backend_pid()) + ")");
    auto new_writer = open();
    test::commit_filled(*new_writer, 3, pages);
    new_writer->checkpoint();  // no reader: only commit 3's versions stay
    std::vector<std::byte> page(storage::page_size);
    EXPECT_ERROR(errc::locked, "another writer took the store over", old_writer->read_page(0, page.data()));
    EXPECT_EQ(test::filled_problem(*new_writer, 3), "");
}

// A writer killed at random instants while committing: every commit that
// returned is there, the store is whole, and the next writer goes on at once.
TEST_F(PgStoreTest, KillingTheWriterLosesNoReturnedCommit) {
    for (int round = 0; round < 5; ++round) {
        test::child writer([this](test::child& me) {
            auto s = open();
            for (std::uint64_t t = s->txn_seq() + 1;; ++t) {
                test::commit_filled(*s, std::uint8_t(t), pages);
                me.send(t);
            }
            return 0;
        });
        std::uint64_t returned = 0;
        for (int i = 0; i < 3 + round * 2; ++i) ASSERT_TRUE(writer.receive(returned));
        writer.kill();
        auto s = open();  // no lease to wait out: the killed session's lock is gone
        ASSERT_GE(s->txn_seq(), returned);
        EXPECT_EQ(test::filled_problem(*s, std::uint8_t(s->txn_seq())), "");
        EXPECT_TRUE(s->check().empty());
    }
}

// The server stopped like a power cut mid-commit and started again: nothing
// commit() returned is lost; the commit in flight is all there or absent.
TEST_F(PgStoreTest, AServerCrashMidCommitLosesNoReturnedCommit) {
    test::child writer([this](test::child& me) {
        auto s = open();
        for (std::uint64_t t = 1;; ++t) {
            try {
                test::commit_filled(*s, std::uint8_t(t), pages);
            } catch (const error& e) {
                me.send(~std::uint64_t{0});  // the failure, reported
                return 0;
            }
            me.send(t);
        }
    });
    std::uint64_t returned = 0, got = 0;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(writer.receive(returned));
    server->crash();
    while (writer.receive(got) && got != ~std::uint64_t{0}) returned = got;
    EXPECT_EQ(writer.exit_code(), 0);
    server->start();
    auto s = open();
    EXPECT_GE(s->txn_seq(), returned);
    EXPECT_LE(s->txn_seq(), returned + 1);
    EXPECT_EQ(test::filled_problem(*s, std::uint8_t(s->txn_seq())), "");
    EXPECT_TRUE(s->check().empty());
}

TEST_F(PgStoreTest, ADamagedPageVersionIsNamedNeverHandedOut) {
    {
        auto s = open();
        test::commit_filled(*s, 1, pages);
    }
    server->sql("UPDATE steppe_page SET image = overlay(image placing '\\xff'::bytea from 100) WHERE store = '" + name +
                "' AND page = 7");
    auto s = open(true);
    std::vector<std::byte> page(storage::page_size);
    s->read_page(6, page.data());
    EXPECT_ERROR(errc::corrupt, "page 7 (version of commit 1", s->read_page(7, page.data()));
    auto findings = s->check();
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_NE(findings[0].find("page 7 version of commit 1 fails its checksum"), std::string::npos) << findings[0];
}

TEST_F(PgStoreTest, ToolsReadAStoreInPostgreSQL) {
    {
        auto s = store::open(url);
        *s.root<Node*>("list") = s.make<Node>(Node{7, nullptr});
        s.commit();
    }
    auto info = test::run_cli("info '" + url + "'");
    EXPECT_EQ(info.exit_code, 0) << info.out;
    EXPECT_NE(info.out.find("PostgreSQL tables, version 2"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("bytes of page images in steppe_page"), std::string::npos) << info.out;
    EXPECT_EQ(info.out.find("-wal"), std::string::npos) << "a store in PostgreSQL has no log: " << info.out;
    EXPECT_EQ(info.out.find("commit mark"), std::string::npos) << info.out;
    auto check = test::run_cli("check '" + url + "'");
    EXPECT_EQ(check.exit_code, 0) << check.out;
    EXPECT_NE(check.out.find("0 findings"), std::string::npos) << check.out;
}

TEST_F(PgStoreTest, AReaderRefreshesToTheNewestCommit) {
    test::child writer([this](test::child& me) {
        auto s = store::open(url);
        auto* head = s.root<Node*>("list");
        *head = s.make<Node>(Node{1, *head});
        s.commit();
        me.report_and_wait();
        *head = s.make<Node>(Node{2, *head});
        s.commit();
        me.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    open_options o;
    o.read_only = true;
    auto r = store::open(url, o);
    EXPECT_EQ(list_length(r), 1);
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    EXPECT_EQ(list_length(r), 1);  // its snapshot
    r.refresh();
    EXPECT_EQ(list_length(r), 2);
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// A page fault while the server restarts waits for it (fault_wait_s); past
// that wait the process ends with a message naming the server, as any
// fault that cannot be served does (docs/guarantees.md, promise 5).
class PgFaultTest : public PgStoreTest {
protected:
    void build_list() {
        auto s = store::open(url);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 20000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    // A reader that opens, reports, and at the test's go walks the list.
    test::child walker(const std::string& wait) {
        return test::child([this, wait](test::child& me) {
            open_options o;
            o.read_only = true;
            o.fatal_hook = [](const char* message) { (void)!::write(2, message, std::strlen(message)); };
            auto s = store::open(url + "&cache_mib=0&fault_wait_s=" + wait, o);
            me.report_and_wait();
            return list_length(s) == 20000 ? 0 : 1;
        });
    }
};

TEST_F(PgFaultTest, AFaultWaitsForARestartingServer) {
    build_list();
    auto reader = walker("30");
    ASSERT_TRUE(reader.wait_for_report());
    server->crash();
    reader.go();
    ::usleep(500000);
    server->start();
    EXPECT_EQ(reader.exit_code(), 0);
}

TEST_F(PgFaultTest, AFaultPastItsWaitEndsTheProcessNamingTheServer) {
    build_list();
    auto reader = walker("1");
    ASSERT_TRUE(reader.wait_for_report());
    server->crash();
    reader.go();
    EXPECT_EQ(reader.exit_code(), 71);  // the fatal path; its message (on stderr) names the URL
    server->start();
}

TEST_F(PgStoreTest, ImportAndBackupCarryAStoreThereAndBack) {
    test::temp_dir dir;
    const std::string file = dir.path("local.db"), back = dir.path("back.db");
    {
        auto s = store::open(file);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 3000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    auto imported = test::run_cli("import '" + file + "' '" + url + "'");
    EXPECT_EQ(imported.exit_code, 0) << imported.out;
    storage::options reader;
    reader.read_only = true;
    EXPECT_EQ(storage::storage::open(url, reader)->txn_seq(), 1u);  // one commit
    auto again = test::run_cli("import '" + file + "' '" + url + "'");
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_CONTAINS(again.out, "holds a store already");
    auto backed_up = test::run_cli("backup '" + url + "' '" + back + "'");
    EXPECT_EQ(backed_up.exit_code, 0) << backed_up.out;
    {
        open_options o;
        o.read_only = true;
        auto s = store::open(back, o);
        EXPECT_EQ(list_length(s), 3000);
        EXPECT_TRUE(s.check().empty());
    }
    EXPECT_ERROR(errc::unsupported, "lives in PostgreSQL", storage::backup(back, server->url("other")));
}

// Opening `url` fails with one of `codes`, and neither the error nor the
// CLI's `command` on it shows `secret`.
void expect_refused_hiding(const std::string& url, const storage::options& o, const std::string& secret,
                           const std::string& command, std::initializer_list<errc> codes) {
    try {
        storage::storage::open(url, o);
        ADD_FAILURE() << "opened";
    } catch (const error& e) {
        EXPECT_NE(std::find(codes.begin(), codes.end(), e.code()), codes.end()) << e.what();
        EXPECT_EQ(std::string(e.what()).find(secret), std::string::npos) << e.what();
    }
    auto cli = test::run_cli(command + " '" + url + "'");
    EXPECT_NE(cli.exit_code, 0);
    EXPECT_EQ(cli.out.find(secret), std::string::npos) << cli.out;
}

// Passwords are never printed, however the URL spells them. libpq
// percent-decodes query keywords ("%70assword=" is password=), sslpassword
// is one too, and a '?' before the '@' is in the user part ("u:pa?ss@h":
// password pa?ss). Each of these was printed. No server is needed: the
// address is parsed, then a connection to a closed port fails.
TEST(PgUrlTest, PasswordsAreNeverShownHoweverTheyAreSpelled) {
    EXPECT_EQ(storage::pg_shown_url("postgresql://h/db?store=s&%70assword=SECRET&%73slpassword=SECRET"),
              "postgresql://h/db?store=s&%70assword=***&%73slpassword=***");
    EXPECT_EQ(storage::pg_shown_url("postgresql://h/db?sslpassword=SECRET&store=s&PASSWORD=SECRET&p%61ssword=SECRET"),
              "postgresql://h/db?sslpassword=***&store=s&PASSWORD=***&p%61ssword=***");
    EXPECT_EQ(storage::pg_shown_url("postgresql://u:pa?ss=SECRET@h/db?store=s"), "postgresql://u@h/db?store=s");
    EXPECT_EQ(storage::pg_shown_url("postgresql://u:SECRET@h/db?store=s&application_name=a@b"),
              "postgresql://u@h/db?store=s&application_name=a@b");
    EXPECT_EQ(storage::pg_shown_url("postgresql://h/db?store=s&%zzpassword=SECRET"),
              "postgresql://h/db?store=s&%zzpassword=***")
        << "a keyword libpq cannot decode may be any; its value stays hidden";
    EXPECT_EQ(storage::pg_shown_url("postgresql://h/db?store=s&user=password"), "postgresql://h/db?store=s&user=password");
    storage::options o;
    o.create = true;
    for (const std::string url : {"postgresql://127.0.0.1:1/db?store=s&%70assword=SECRET&connect_timeout=2",
                                  "postgresql://127.0.0.1:1/db?store=s&sslpassword=SECRET&connect_timeout=2",
                                  "postgresql://u:pa?SECRET@127.0.0.1:1/db?store=s&connect_timeout=2",
                                  // libpq quotes a part it cannot decode whole: refused before it sees one
                                  "postgresql://127.0.0.1:1/db?store=s&password=SECRET%zz&connect_timeout=2",
                                  "postgresql://u:SECRET%0@127.0.0.1:1/db?store=s&connect_timeout=2"}) {
        SCOPED_TRACE(url);
        expect_refused_hiding(url, o, "SECRET", "info", {errc::io, errc::invalid_argument});
    }
}

TEST_F(PgStoreTest, BadURLsAndMissingStoresAreClearErrors) {
    storage::options o;
    o.create = false;
    EXPECT_ERROR(errc::not_found, "does not exist", storage::storage::open(server->url("never_made"), o));
    EXPECT_ERROR(errc::invalid_argument, "store=NAME", storage::storage::open("postgresql:///postgres", o));
    EXPECT_ERROR(errc::invalid_argument, "store=NAME", storage::storage::open(server->url("a b"), o));
    EXPECT_ERROR(errc::io, "cannot connect to the PostgreSQL server",
                 storage::storage::open("postgresql:///postgres?host=/nonexistent&store=x", o));
    EXPECT_EQ(storage::parse_pg_address("postgresql://u:secret@h/db?store=s").shown, "postgresql://u@h/db?store=s");
    // A malformed URL's message names it without its password too, in the
    // library's errors and in everything the CLI prints.
    for (const std::string bad : {"postgresql://u:secret@h/db?cache_mib=x&store=s",
                                  "postgresql://u:secret@h/db?pages_from=nowhere&store=s",
                                  "postgresql://u@h/db?password=secret&fault_wait_s=-1&store=s",
                                  "postgresql://u:secret@h/db"}) {
        SCOPED_TRACE(bad);
        expect_refused_hiding(bad, o, "secret", "check", {errc::invalid_argument});
    }
    o.create = true;
    o.exclusive_create = true;
    storage::storage::open(url, o).reset();
    EXPECT_ERROR(errc::exists, "exists already", storage::storage::open(url, o));
}

}  // namespace
