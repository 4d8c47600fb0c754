// The PostgreSQL page store's cache file (src/storage/pg_cache_file.hpp;
// docs/guarantees.md, "Stores in PostgreSQL") against a real server this
// process starts (support/pg_server.hpp): warm opens and other processes
// read from the file without a fetch; a handle at an old snapshot never gets
// a newer version, nor a new one an older (C3, C4); damaged, truncated,
// foreign and unusable files are misses or clear errors, never wrong pages
// (C1, C2); kill -9 mid-write and processes sharing one file leave nothing
// wrong; a reader on a standby shares the file; and the checker (check(),
// C2 and C3) runs after each.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "storage/checksum.hpp"
#include "storage/pg_store.hpp"
#include "support/child.hpp"
#include "support/expect_error.hpp"
#include "support/filled_commits.hpp"
#include "support/page_cache.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using storage::pg_store;

namespace {

constexpr std::uint64_t pages = 40;

struct Node {
    long value;
    Node* next;
};

// The slot count a cache file's header gives (docs/format.md), read as
// an outsider would.
std::uint64_t slot_count_of(const std::string& file) {
    std::uint64_t slots = 0;
    const int fd = ::open(file.c_str(), O_RDONLY);
    EXPECT_EQ(::pread(fd, &slots, sizeof slots, 24), ssize_t(sizeof slots)) << file;
    ::close(fd);
    return slots;
}

// Kills `c` (kill -9) `delay` after its `reports`-th report; the last
// report (0 if it ended before giving them all).
std::uint64_t kill_after(test::child& c, int reports, useconds_t delay) {
    std::uint64_t last = 0;
    for (int i = 0; i < reports; ++i) EXPECT_TRUE(c.receive(last)) << "report " << i;
    ::usleep(delay);
    c.kill();
    return last;
}

class PgCacheTest : public test::pg_test {
protected:
    void SetUp() override {
        pg_test::SetUp();
        file = dir.path("pg-pages");
    }
    // The URL of `store` with the cache file `cache_file` (it hides pg_test's
    // url, which names none). cache_mib=0: no in-memory cache, so every read
    // shows where it came from.
    std::string url(const std::string& store, const std::string& cache_file) const {
        return server->url(store, "&cache_mib=0&cache_file_mib=4&cache_file=" + cache_file);
    }
    std::unique_ptr<pg_store> open(bool read_only, const std::string& cache_file, const std::string& store = "") const {
        storage::options o;
        o.read_only = read_only;
        o.lock_timeout = std::chrono::seconds(10);
        return pg_store::open(url(store.empty() ? name : store, cache_file), o);
    }
    std::unique_ptr<pg_store> open(bool read_only = false) const { return open(read_only, file); }
    // `many` pages filled with 1 by a writer without the file (all cold);
    // then a reader with the file and `caches` (URL parameters), the costs
    // its clusters are judged by pinned (counts are exact).
    std::unique_ptr<pg_store> filled_then_reader(std::uint64_t many, const std::string& caches) const {
        {
            storage::options o;
            auto w = pg_store::open(server->url(name), o);
            test::commit_filled(*w, 1, many);
        }
        storage::options o;
        o.read_only = true;
        auto r = pg_store::open(server->url(name, caches + "&cache_file=" + file), o);
        r->pin_fetch_costs(500'000, 20'000);
        return r;
    }
    // The cache file opened again, as another process (a forger) would.
    std::unique_ptr<storage::pg_cache_file> open_file_again() const {
        std::string why;
        bool unusable = false;
        auto again = storage::pg_cache_file::open(file, 1, why, unusable);
        EXPECT_TRUE(again) << why;
        return again;
    }
    // A page of the file's slot area, flipped.
    void damage(off_t offset) const {
        const int fd = ::open(file.c_str(), O_RDWR);
        ASSERT_GE(fd, 0);
        unsigned char b = 0;
        ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
        b ^= 0x5a;
        ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
        ::close(fd);
    }

    test::temp_dir dir;
    std::string file;
};

// The point: a second open, and a second process, read warm pages
// from the file: no fetch from the server at all.
TEST_F(PgCacheTest, AWarmOpenAndAnotherProcessReadFromTheFileNotTheServer) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
        EXPECT_EQ(w->cache_file_path(), file);
        EXPECT_EQ(w->cache_counters().file_writes, pages);
    }
    {
        auto r = open(true);
        EXPECT_EQ(test::filled_problem(*r, 1), "");
        EXPECT_EQ(r->cache_counters().server_fetches, 0u);
        EXPECT_EQ(r->cache_counters().file_hits, pages);
        EXPECT_TRUE(r->check().empty());
    }
    test::child other([this](test::child&) {
        auto r = open(true);
        if (test::filled_problem(*r, 1) != "") return 1;
        return r->cache_counters().server_fetches == 0 ? 0 : 2;
    });
    EXPECT_EQ(other.exit_code(), 0);
}

// A big transaction's pages (spilled before its commit) reach the file too.
TEST_F(PgCacheTest, SpilledPagesOfACommitAreInTheFile) {
    {
        auto w = open();
        std::vector<std::byte> image(storage::page_size, std::byte{1});
        std::vector<storage::page_image> all;
        for (storage::page_no p = 0; p < pages; ++p) all.push_back({p, image.data()});
        w->spill(all);
        storage::meta_bytes meta{};
        meta[0] = std::byte{1};
        w->commit({}, meta);
    }
    auto r = open(true);
    EXPECT_EQ(test::filled_problem(*r, 1), "");
    EXPECT_EQ(r->cache_counters().server_fetches, 0u);
}

// A commit's pages go to the file: 1,024 pages in a file of 960 slots (4
// MiB, in whole groups of 64) wrap around its end (page p and p + 960
// share a slot, and the later page holds it), and a second commit of every
// third page rewrites theirs. A reader then finds every page in the file,
// each right, but the 64 displaced ones and, since a fetched page takes
// its slot back, the 64 that had displaced them.
TEST_F(PgCacheTest, ACommitsPagesGoToTheFileWrappingAtItsEnd) {
    constexpr std::uint64_t many = 1024, slots = (4 << 20) / storage::pg_cache_bytes_per_slot /
                                                 storage::pg_cache_group_slots * storage::pg_cache_group_slots;
    static_assert(slots == 960);
    {
        auto w = open();
        test::commit_filled(*w, 1, many);
        std::vector<std::byte> two(storage::page_size, std::byte{2});
        std::vector<storage::page_image> every_third;
        for (storage::page_no p = 0; p < many; p += 3) every_third.push_back({p, two.data()});
        storage::meta_bytes meta{};
        meta[0] = std::byte{2};
        w->commit(every_third, meta);
        EXPECT_EQ(w->cache_counters().file_writes, many + every_third.size());
    }
    auto r = open(true);
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < many; ++p) {
        r->read_page(p, page.data());
        ASSERT_EQ(page[storage::page_size - 1], std::byte(p % 3 == 0 ? 2 : 1)) << "page " << p;
    }
    EXPECT_EQ(r->cache_counters().file_hits, many - 2 * (many - slots));
    EXPECT_EQ(r->cache_counters().server_fetches, 2 * (many - slots));
    EXPECT_TRUE(r->check().empty());
}

// Pages the file has not seen are fetched once (a cluster a query), then
// served from the file by the next open.
TEST_F(PgCacheTest, AColdOpenFillsTheFileForTheNext) {
    {  // a writer without the file: it stays cold
        storage::options o;
        auto w = pg_store::open(server->url(name), o);
        test::commit_filled(*w, 1, pages);
    }
    {
        auto r = open(true);
        EXPECT_EQ(test::filled_problem(*r, 1), "");
        EXPECT_EQ(r->cache_counters().server_fetches, pages);  // read_page: no read-around
        EXPECT_EQ(r->cache_counters().pages_fetched, pages);
    }
    auto r = open(true);
    EXPECT_EQ(test::filled_problem(*r, 1), "");
    EXPECT_EQ(r->cache_counters().server_fetches, 0u);
    EXPECT_TRUE(r->check().empty());
}

// A store whose slots are no more than the device's read-ahead has them
// asked for whole at open (pg_cache_file::plan_reads), as a file store's
// main file is: the first operation's faults find them in the page cache.
// Seen from outside with mincore, the file dropped first as after a reboot.
TEST_F(PgCacheTest, AStoreSmallerThanTheReadAheadHasItsSlotsReadWholeAtOpen) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
    }
    if (test::device_read_ahead(file) < pages * storage::pg_cache_bytes_per_slot)
        GTEST_SKIP() << "the device's read-ahead here is under the store's " << pages << " slots";
    const std::size_t store_pages = pages * storage::pg_cache_bytes_per_slot / test::system_page_size();
    for (bool read_only : {true, false}) {
        test::drop_from_page_cache(file);
        ASSERT_LT(test::cached_pages(file), store_pages / 4) << "dropped";
        auto s = open(read_only);
        EXPECT_GE(test::cached_pages_settled(file), store_pages * 9 / 10) << (read_only ? "a reader" : "a writer");
        EXPECT_EQ(test::filled_problem(*s, 1), "");
        EXPECT_EQ(s->cache_counters().server_fetches, 0u);
    }
}

// A fault's cluster grows while its pages are used (fetch_worth.hpp) and
// shrinks while they are not; the costs it weighs are pinned (a round trip
// of 0.5 ms, 20 µs a page), so the counts do not depend on this machine. 1,024 pages in a file of 960 slots: the
// clusters' writes wrap around the end of the file, and the next open reads
// what they left, checked.
TEST_F(PgCacheTest, AFetchedClusterGrowsWhereItsPagesAreUsed) {
    constexpr std::uint64_t many = 1024;
    {  // a writer without the file: everything is cold
        storage::options o;
        auto w = pg_store::open(server->url(name), o);
        test::commit_filled(*w, 1, many);
    }
    std::vector<std::byte> page(storage::page_size);
    auto read_around = [&](pg_store& s, storage::page_no p) {
        storage::read_failure why;
        ASSERT_TRUE(s.read_page_nothrow(p, page.data(), &why, true)) << why.message;
        EXPECT_EQ(page[100], std::byte{1}) << "page " << p;
    };
    {
        auto strided = open(true);
        strided->pin_fetch_costs(500'000, 20'000);
        for (storage::page_no p = 0; p < many; p += 64) read_around(*strided, p);
        // A read goes on once its page's row has come, before the rest of
        // its cluster: a page outside the clusters, read alone, is served
        // after the last cluster's rows, so the counts below are whole.
        strided->read_page(40, page.data());
        const auto c = strided->cache_counters();
        EXPECT_EQ(c.server_fetches, many / 64 + 1) << "every read a fetch";
        EXPECT_LT(c.pages_fetched, many / 64 * pg_store::first_cluster + 1) << "none used: they shrank";
    }
    std::filesystem::remove(file);
    {
        auto scan = open(true);
        scan->pin_fetch_costs(500'000, 20'000);
        for (storage::page_no p = 0; p < many; ++p) read_around(*scan, p);
        const auto c = scan->cache_counters();
        // Every page used: 9 clusters of 32 (the first judgement waits for
        // 256 pages fetched beside faults), then of 64 (the limit, an eighth
        // of the file's 960 slots to a power of two): 21 fetches, where
        // clusters of 32 took 32. Without a memory cache (cache_mib=0) the
        // first cluster of 64 brings the last one of 32 again.
        EXPECT_LE(c.server_fetches, 21u);
        EXPECT_LE(c.pages_fetched, many + pg_store::first_cluster) << "none past the end";
        EXPECT_EQ(c.file_write_errors, 0u);
        EXPECT_GT(c.file_writes, 0u);
    }
    auto next = open(true);
    EXPECT_EQ(test::filled_problem(*next, 1), "");
    const std::uint64_t slots = slot_count_of(file);
    EXPECT_GE(next->cache_counters().file_hits, many - (many - slots) * 2) << "all but the slots the wrap reused";
    EXPECT_TRUE(next->check().empty());
}

// The counters once the fetch thread's file writes have stopped (they
// follow the fault a fetch answered): up to 10 s.
storage::pg_cache_counters wait_for_file_writes(const pg_store& s) {
    auto before = s.cache_counters();
    for (int i = 0; i < 500; ++i) {
        ::usleep(20'000);
        const auto now = s.cache_counters();
        if (now.file_writes + now.file_write_errors == before.file_writes + before.file_write_errors) return now;
        before = now;
    }
    return before;
}

// A cluster that grows holds the smaller one before it (clusters are
// aligned): its pages still in the memory cache are not fetched again.
TEST_F(PgCacheTest, AGrownClusterDoesNotFetchWhatTheClusterBeforeBrought) {
    constexpr std::uint64_t many = 2048;
    // 64 MiB of slots: clusters may grow to 1,024 pages.
    auto scan = filled_then_reader(many, "&cache_mib=16&cache_file_mib=64");
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < many; ++p) {
        storage::read_failure why;
        ASSERT_TRUE(scan->read_page_nothrow(p, page.data(), &why, true)) << why.message;
        ASSERT_EQ(page[100], std::byte{1}) << "page " << p;
    }
    const auto c = wait_for_file_writes(*scan);
    EXPECT_EQ(c.pages_fetched, many) << "no page twice";
    // 9 clusters of 32, then 64, 128, 256, 512 and 1,024 pages, each but
    // the last aligned over the one before.
    EXPECT_LE(c.server_fetches, 14u);
    EXPECT_EQ(c.file_writes, many);
    EXPECT_EQ(c.file_runs_read, 0u) << "a new file's holes are not read before they are written";
}

// Reads every page of `many` once, in an order shuffled by `seed` (as
// lookups go), checking each; the cache counters after.
storage::pg_cache_counters read_shuffled(pg_store& s, storage::page_no many, std::byte fill, unsigned seed) {
    std::vector<storage::page_no> order(many);
    std::iota(order.begin(), order.end(), storage::page_no{0});
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p : order) {
        storage::read_failure why;
        EXPECT_TRUE(s.read_page_nothrow(p, page.data(), &why, true)) << why.message;
        EXPECT_EQ(page[100], fill) << "page " << p;
    }
    return s.cache_counters();
}

// Pages pushed out of a small memory cache are in the file: a cluster that
// covers them again (a later fault near them, the cluster grown since)
// reads them there, it does not fetch them again.
TEST_F(PgCacheTest, PagesPushedOutOfMemoryAreNotFetchedAgain) {
    constexpr std::uint64_t many = 2048;
    // 256 pages in memory, and so clusters of up to 256.
    auto scan = filled_then_reader(many, "&cache_mib=1&cache_file_mib=64");
    const auto c = read_shuffled(*scan, many, std::byte{1}, 7);
    EXPECT_EQ(c.pages_fetched, many) << "no page twice";
    EXPECT_GT(c.file_hits, 0u);
    EXPECT_TRUE(scan->check().empty());
}

// The marks that keep those pages out of a cluster are hints: with the file
// cut short under them, every page still reads right, and the clusters
// fetch what the file lost (a round trip a cluster, not one a page).
TEST_F(PgCacheTest, AFileCutShortUnderItsMarksCostsFetchesNotWrongPages) {
    constexpr std::uint64_t many = 2048;
    auto scan = filled_then_reader(many, "&cache_mib=1&cache_file_mib=64");
    const auto first = read_shuffled(*scan, many, std::byte{1}, 7);
    wait_for_file_writes(*scan);  // none lands past the cut
    ASSERT_EQ(::truncate(file.c_str(), 4096), 0);  // the header alone
    const auto second = read_shuffled(*scan, many, std::byte{1}, 8);
    EXPECT_GE(second.pages_fetched - first.pages_fetched, many - 256) << "all but what memory held";
    EXPECT_LE(second.server_fetches - first.server_fetches, 2 * first.server_fetches);
    EXPECT_TRUE(scan->check().empty());
}

// The same with the slots taken by another store's pages (two stores share
// the file, and the other's commit covers every slot): the marks are stale,
// every page still reads right, and the clusters fetch what the file lost
// (a fault whose page is marked but not in the file clears its cluster's
// marks).
TEST_F(PgCacheTest, AnotherStoresPagesUnderOurMarksCostFetchesNotWrongPages) {
    constexpr std::uint64_t many = 512;
    auto a = filled_then_reader(many, "&cache_mib=1&cache_file_mib=3");  // 704 slots; 256 pages in memory
    const auto first = read_shuffled(*a, many, std::byte{1}, 7);
    wait_for_file_writes(*a);
    {
        auto b = open(false, file, name + "_b");
        test::commit_filled(*b, 1, 800);
        test::commit_filled(*b, 2, 800);  // 800 pages in 704 slots: every slot is b's now, other bytes
    }
    const auto second = read_shuffled(*a, many, std::byte{1}, 8);
    EXPECT_GE(second.pages_fetched - first.pages_fetched, many - 256) << "all but what memory held";
    EXPECT_LE(second.server_fetches - first.server_fetches, 2 * first.server_fetches);
    EXPECT_TRUE(a->check().empty());
    EXPECT_EQ(test::filled_problem(*open(true, file, name + "_b"), 2), "");
}

// C3, C4: a reader that cached every page at commit 1 keeps reading commit 1
// after the writer's commit 2 rewrote the slots; a reader opened after it
// reads commit 2; and one whose slots are older than a commit made by a
// writer without the file (another machine) refetches only what changed.
TEST_F(PgCacheTest, AnOldSnapshotKeepsItsVersionsAndANewOneGetsTheNew) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    auto old_reader = open(true);
    EXPECT_EQ(test::filled_problem(*old_reader, 1), "");
    test::commit_filled(*w, 2, pages);
    EXPECT_EQ(test::filled_problem(*old_reader, 1), "");  // the slots hold commit 2: refetched at 1
    EXPECT_GT(old_reader->cache_counters().file_rejects, 0u);
    auto new_reader = open(true);
    EXPECT_EQ(test::filled_problem(*new_reader, 2), "");
    // The old reader's fetches at 1 left the slots of 2: all read there.
    EXPECT_EQ(new_reader->cache_counters().server_fetches, 0u);
    EXPECT_EQ(test::filled_problem(*old_reader, 1), "");
    w.reset();

    {  // a writer elsewhere: its commit does not reach this file
        storage::options o;
        auto elsewhere = pg_store::open(server->url(name), o);
        std::vector<std::byte> image(storage::page_size, std::byte{3});
        storage::page_image changed[] = {{5, image.data()}};
        elsewhere->commit(changed, elsewhere->meta());
    }
    auto third = open(true);
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < pages; ++p) {
        third->read_page(p, page.data());
        EXPECT_EQ(page[100], std::byte(p == 5 ? 3 : 2)) << "page " << p;
    }
    EXPECT_EQ(third->cache_counters().server_fetches, 1u);  // page 5's cluster only
    EXPECT_EQ(test::filled_problem(*new_reader, 2), "");
    EXPECT_TRUE(third->check().empty());
}

// C1: a flipped byte anywhere in a slot (its check, key, claim or image) is a
// miss; the page comes from the server and is right.
TEST_F(PgCacheTest, DamagedSlotsAreMissesNeverHandedOut) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
    }
    // Every slot, each at another byte: the check, the key, the claim, the image.
    const std::uint64_t slots = slot_count_of(file);
    for (std::uint64_t i = 0; i < slots; ++i) {
        const off_t at = off_t(i * 97 % storage::pg_cache_bytes_per_slot);  // in the header, then the image
        damage(at < 64 ? off_t(4096 + i * 64) + at : off_t(4096 + slots * 64 + i * 4096) + at - 64);
    }
    auto r = open(true);
    EXPECT_EQ(test::filled_problem(*r, 1), "");
    EXPECT_EQ(r->cache_counters().file_hits, 0u);
    EXPECT_GT(r->cache_counters().server_fetches, 0u);
    EXPECT_TRUE(r->check().empty());
    EXPECT_EQ(test::filled_problem(*open(true), 1), "");  // the refetch rewrote them
}

// A commit's versions are the newest there are: a slot that claims a newer
// version of one of its pages (a database restored to an earlier point,
// its commit numbers used again) is replaced by the commit, and the next
// reader finds every page in the file.
TEST_F(PgCacheTest, ACommitReplacesASlotClaimingANewerVersion) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    auto forged = open_file_again();
    ASSERT_TRUE(forged);
    std::vector<std::byte> image(storage::page_size, std::byte{9});
    ASSERT_TRUE(forged->put(w->cache_key(), 3, 99, 99, image.data()));
    test::commit_filled(*w, 2, pages);
    EXPECT_TRUE(w->check().empty());
    auto r = open(true);
    EXPECT_EQ(test::filled_problem(*r, 2), "");
    EXPECT_EQ(r->cache_counters().file_hits, pages);
    EXPECT_EQ(r->cache_counters().server_fetches, 0u);
}

// The checker (C2, C3): a slot that claims too much, or holds other bytes
// than its version, is named; and a handle whose version map knows the page
// does not believe the false claim (C4).
TEST_F(PgCacheTest, TheCheckerNamesAFalseClaim) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    test::commit_filled(*w, 2, pages);
    auto forged = open_file_again();
    ASSERT_TRUE(forged);
    std::vector<std::byte> image(storage::page_size, std::byte{1});
    ASSERT_TRUE(forged->put(w->cache_key(), 3, 1, 2, image.data()));  // commit 2 wrote page 3: a false claim
    image[0] = std::byte{9};
    ASSERT_TRUE(forged->put(w->cache_key(), 4, 2, 2, image.data()));  // not commit 2's bytes
    auto findings = w->check();
    ASSERT_EQ(findings.size(), 2u);
    EXPECT_NE(findings[0].find("cached page 3"), std::string::npos) << findings[0];
    EXPECT_NE(findings[0].find("(C3)"), std::string::npos) << findings[0];
    EXPECT_NE(findings[1].find("cached page 4"), std::string::npos) << findings[1];
    EXPECT_NE(findings[1].find("(C2)"), std::string::npos) << findings[1];
    // Page 4's forgery has its true version and a sound check: only the
    // server can tell it (check() above); the file is the user's own (0600).
    auto r = open(true);
    std::vector<std::byte> page(storage::page_size);
    r->read_page(3, page.data());
    EXPECT_EQ(page[0], std::byte{2});
    EXPECT_EQ(r->cache_counters().file_rejects, 1u);
}

// A torn slot, as kill -9 while a slot is rewritten leaves it: commit 2's
// image half written over commit 1's, commit 1's header not yet rewritten.
// Each part is sound bytes of a real slot; together they are a miss (C1),
// and the page read is commit 2's.
TEST_F(PgCacheTest, ATornSlotIsAMiss) {
    auto w = open();
    test::commit_filled(*w, 1, pages);
    const std::uint64_t slots = slot_count_of(file);
    auto slot_of_page_7 = [&] {  // its header and its image
        std::vector<char> bytes(4096 + slots * storage::pg_cache_bytes_per_slot);
        FILE* f = std::fopen(file.c_str(), "r");
        bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
        std::fclose(f);
        for (std::uint64_t s = 0; s < slots; ++s) {
            const std::size_t header = 4096 + s * 64, image = 4096 + slots * 64 + s * 4096;
            std::uint64_t page = 0;
            std::memcpy(&page, bytes.data() + header + 40, 8);
            if (page == 7 && image + 4096 <= bytes.size() && bytes[image] != 0)
                return std::tuple(s, std::vector<char>(bytes.begin() + header, bytes.begin() + header + 64),
                                  std::vector<char>(bytes.begin() + image, bytes.begin() + image + 4096));
        }
        return std::tuple(slots, std::vector<char>(), std::vector<char>());
    };
    const auto [slot, header, image] = slot_of_page_7();
    ASSERT_LT(slot, slots);
    test::commit_filled(*w, 2, pages);
    const int fd = ::open(file.c_str(), O_RDWR);
    ASSERT_EQ(::pwrite(fd, image.data() + 2048, 2048, off_t(4096 + slots * 64 + slot * 4096 + 2048)), 2048);
    ASSERT_EQ(::pwrite(fd, header.data(), 64, off_t(4096 + slot * 64)), 64);
    ::close(fd);
    auto r = open(true);
    EXPECT_EQ(test::filled_problem(*r, 2), "");
    EXPECT_EQ(r->cache_counters().file_rejects, 1u);
    EXPECT_EQ(r->cache_counters().server_fetches, 1u);
}

// A file cut short (in its images, in its slot headers, in its header, to
// nothing) serves what is left and is made again when its header is gone.
TEST_F(PgCacheTest, ATruncatedFileIsMissesNotErrors) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
    }
    const std::uint64_t slots = slot_count_of(file);
    for (off_t size : {off_t(4096 + slots * 64 + 10 * 4096 + 100), off_t(4096 + 10 * 64 + 10), off_t(20), off_t(0)}) {
        ASSERT_EQ(::truncate(file.c_str(), size), 0);
        auto r = open(true);
        EXPECT_EQ(test::filled_problem(*r, 1), "") << "cut to " << size;
        EXPECT_EQ(r->cache_file_path(), file);
        EXPECT_TRUE(r->check().empty());
    }
}

// C2: two stores in one file, and a store dropped and made again under the
// same name with the same commit numbers, never read each other's pages.
TEST_F(PgCacheTest, StoresSharingAFileOrANameNeverMix) {
    {
        auto a = open(false, file, name + "_a");
        auto b = open(false, file, name + "_b");
        test::commit_filled(*a, 1, pages);
        test::commit_filled(*b, 1, pages);
        test::commit_filled(*b, 2, pages);
    }
    EXPECT_EQ(test::filled_problem(*open(true, file, name + "_a"), 1), "");
    EXPECT_EQ(test::filled_problem(*open(true, file, name + "_b"), 2), "");
    // Dropped and made again: commit 1 again, other bytes. Then a copy of
    // its rows under another name keeping its store_id (as a script might).
    server->sql("DELETE FROM steppe_page WHERE store = '" + name + "_a'; DELETE FROM steppe_store WHERE name = '" +
                name + "_a'");
    {
        auto a = open(false, file, name + "_a");
        test::commit_filled(*a, 7, pages / 2);
    }
    auto a = open(true, file, name + "_a");
    EXPECT_EQ(a->txn_seq(), 1u);
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < pages / 2; ++p) {
        a->read_page(p, page.data());
        EXPECT_EQ(page[0], std::byte{7}) << "page " << p;
    }
    const std::string from = name + "_b", to = name + "_c";
    server->sql("INSERT INTO steppe_page SELECT '" + to + "', page, txn, sum, image FROM steppe_page WHERE store = '" +
                from + "'; INSERT INTO steppe_store (name, store_id, format, txn, page_count, meta, fence, digest) "
                "SELECT '" + to + "', store_id, format, txn, page_count, meta, fence, digest FROM steppe_store WHERE name = '" + from + "'");
    auto c = open(false, file, name + "_c");
    EXPECT_EQ(test::filled_problem(*c, 2), "");
    EXPECT_EQ(c->cache_counters().file_hits, 0u);  // another row: b's slots are not its
    test::commit_filled(*c, 3, pages);
    EXPECT_EQ(test::filled_problem(*open(true, file, name + "_b"), 2), "");
    EXPECT_TRUE(a->check().empty());
}

// C2: a database taken back to an earlier point (a restore of a backup, a
// point-in-time recovery) keeps the store's identity, and its next commit
// reuses a commit number the file already holds other bytes for. The
// version map's sums tell them apart.
TEST_F(PgCacheTest, AStoreTakenBackInTimeIsNotServedItsOldFuture) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
        test::commit_filled(*w, 2, pages);  // the slots hold commit 2's bytes
    }
    server->sql("DELETE FROM steppe_page WHERE store = '" + name + "' AND txn = 2; UPDATE steppe_store SET txn = 1, "
                "digest = " + std::to_string(pages * (pages + 1) / 2) + " WHERE name = '" + name + "'");  // P6: as of commit 1
    {  // commit 2 again, other bytes, by a writer without the file
        storage::options o;
        auto elsewhere = pg_store::open(server->url(name), o);
        std::vector<std::byte> image(storage::page_size, std::byte{9});
        std::vector<storage::page_image> all;
        for (storage::page_no p = 0; p < pages; ++p) all.push_back({p, image.data()});
        elsewhere->commit(all, elsewhere->meta());
        ASSERT_EQ(elsewhere->txn_seq(), 2u);
    }
    auto r = open(true);
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < pages; ++p) {
        r->read_page(p, page.data());
        EXPECT_EQ(page[0], std::byte{9}) << "page " << p;
    }
    EXPECT_EQ(r->cache_counters().file_hits, 0u);
    EXPECT_EQ(r->cache_counters().file_rejects, pages);
    // Its fetches replaced the slots of the old commit 2 (same number,
    // another sum: C2), so the next reader finds the new ones there.
    wait_for_file_writes(*r);
    auto next = open(true);
    for (storage::page_no p = 0; p < pages; ++p) {
        next->read_page(p, page.data());
        EXPECT_EQ(page[0], std::byte{9}) << "page " << p;
    }
    EXPECT_EQ(next->cache_counters().file_hits, pages);
}

// A cache file that cannot be one: /dev/null behind a symlink serves nothing
// and breaks nothing; another program's file is left alone with a clear
// error; a directory that cannot hold the file is a clear error when named
// and no cache file when it is only the default.
// A crafted header, sound by its own check, that claims more slots than
// any file may have (2^40, whose copy of headers would be 64 TiB) or a
// count that is not whole groups: the file is made again at the size the
// URL asks for, and every page reads right.
TEST_F(PgCacheTest, AHeaderClaimingImpossibleSlotsIsMadeAgain) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
    }
    const std::uint64_t made = slot_count_of(file);
    for (std::uint64_t claimed : {std::uint64_t{1} << 40, made + 1}) {
        const int fd = ::open(file.c_str(), O_RDWR);
        ASSERT_GE(fd, 0);
        std::byte header[36];
        ASSERT_EQ(::pread(fd, header, sizeof header, 0), ssize_t(sizeof header));
        std::memcpy(header + 24, &claimed, sizeof claimed);
        const std::uint32_t check = storage::crc32c(0, header, 32);
        std::memcpy(header + 32, &check, sizeof check);
        ASSERT_EQ(::pwrite(fd, header, sizeof header, 0), ssize_t(sizeof header));
        ::close(fd);
        auto r = open(true);
        EXPECT_EQ(test::filled_problem(*r, 1), "") << claimed << " slots";
        EXPECT_EQ(r->cache_file_path(), file);
        EXPECT_EQ(slot_count_of(file), made) << claimed << " slots";
    }
}

TEST_F(PgCacheTest, UnusableFilesAreNoCacheOrClearErrors) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
    }
    const std::string null_link = dir.path("null-link");
    std::filesystem::create_symlink("/dev/null", null_link);
    {
        auto r = open(true, null_link);
        EXPECT_EQ(r->cache_file_path(), "");
        EXPECT_NE(r->cache_file_note().find("not a regular file"), std::string::npos) << r->cache_file_note();
        EXPECT_EQ(test::filled_problem(*r, 1), "");
    }
    const std::string foreign = dir.path("notes.txt");
    {
        FILE* f = std::fopen(foreign.c_str(), "w");
        std::fputs("my notes\n", f);
        std::fclose(f);
    }
    EXPECT_ERROR(errc::invalid_argument, "is not a steppe page cache file", open(true, foreign));
    std::string kept(64, '\0');
    FILE* f = std::fopen(foreign.c_str(), "r");
    kept.resize(std::fread(kept.data(), 1, kept.size(), f));
    std::fclose(f);
    EXPECT_EQ(kept, "my notes\n");
    // Under a regular file, no directory can be made, even by root.
    EXPECT_ERROR(errc::invalid_argument, "cache file cannot be used", open(true, foreign + "/sub/pg-pages"));
    ::setenv("XDG_CACHE_HOME", (foreign + "/sub").c_str(), 1);
    storage::options o;
    o.read_only = true;
    auto r = pg_store::open(server->url(name, "&cache_mib=0&cache_file_mib=4"), o);
    ::unsetenv("XDG_CACHE_HOME");
    EXPECT_EQ(r->cache_file_path(), "");
    EXPECT_NE(r->cache_file_note().find("mkdir"), std::string::npos) << r->cache_file_note();
    EXPECT_EQ(test::filled_problem(*r, 1), "");
}

// A writer killed at random instants while it commits and writes slots:
// whatever it left in the file, every page read is of the commit read.
TEST_F(PgCacheTest, KillingAWriterMidSlotLeavesNothingWrong) {
    for (int round = 0; round < 5; ++round) {
        test::child writer([this](test::child& me) {
            auto s = open();
            for (std::uint64_t t = s->txn_seq() + 1;; ++t) {
                test::commit_filled(*s, std::uint8_t(t), pages);
                me.send(t);
            }
            return 0;
        });
        const std::uint64_t returned = kill_after(writer, 3 + round * 2, useconds_t(round * 700));
        auto r = open(true);
        ASSERT_GE(r->txn_seq(), returned);
        EXPECT_EQ(test::filled_problem(*r, std::uint8_t(r->txn_seq())), "");
        EXPECT_TRUE(r->check().empty());
    }
}

// C1 for the fetch thread's writes: a reader killed while it writes
// fetched clusters into the file (several slots a pwritev) leaves slots
// that are whole or misses, never a wrong page.
TEST_F(PgCacheTest, KillingAReaderMidClusterLeavesNothingWrong) {
    constexpr std::uint64_t many = 1024;
    {
        storage::options o;
        auto w = pg_store::open(server->url(name), o);
        test::commit_filled(*w, 1, many);
    }
    for (int round = 0; round < 5; ++round) {
        std::filesystem::remove(file);
        test::child reader([this](test::child& me) {
            auto r = open(true);
            std::vector<std::byte> page(storage::page_size);
            storage::read_failure why;
            for (storage::page_no p = 0; p < many; ++p) {
                if (!r->read_page_nothrow(p, page.data(), &why, true)) return 1;
                if (p % 64 == 0) me.send(p);
            }
            return 0;
        });
        kill_after(reader, 2 + round * 2, useconds_t(round * 300));
        auto r = open(true);
        EXPECT_EQ(test::filled_problem(*r, 1), "") << "round " << round;
        EXPECT_GT(r->cache_counters().file_hits, 0u) << "the killed reader's clusters serve";
        EXPECT_TRUE(r->check().empty());
    }
}

// One writer process and two reader processes on one file at once: each
// reader opens again and again, and every snapshot it reads is whole.
TEST_F(PgCacheTest, ProcessesSharingAFileAtOnceReadWholeSnapshots) {
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
    }
    test::child writer([this](test::child&) {
        auto s = open();
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        for (std::uint64_t t = 2; std::chrono::steady_clock::now() < end; ++t)
            test::commit_filled(*s, std::uint8_t(t), pages);
        return 0;
    });
    auto reader = [this](test::child&) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        int opens = 0;
        while (std::chrono::steady_clock::now() < end) {
            auto r = open(true);
            const std::string problem = test::filled_problem(*r, std::uint8_t(r->txn_seq()));
            if (!problem.empty()) {
                std::fprintf(stderr, "%s\n", problem.c_str());
                return 1;
            }
            ++opens;
        }
        return opens > 3 ? 0 : 2;
    };
    test::child first(reader), second(reader);
    EXPECT_EQ(writer.exit_code(), 0);
    EXPECT_EQ(first.exit_code(), 0);
    EXPECT_EQ(second.exit_code(), 0);
    EXPECT_TRUE(open(true)->check().empty());
}

// A reader whose pages come from a streaming standby (P5) shares the file
// with the primary's writer: the same server identity and store row.
TEST_F(PgCacheTest, AReaderOnAStandbySharesTheFile) {
    std::string why;
    if (!server->start_standby(why)) GTEST_SKIP() << why;
    {
        auto w = open();
        test::commit_filled(*w, 1, pages);
        test::commit_filled(*w, 2, pages / 2);
    }
    server->wait_for_standby();
    storage::options o;
    o.read_only = true;
    auto r = pg_store::open(
        server->url_with_standby(name, "&pages_from=standby&cache_mib=0&cache_file_mib=4&cache_file=" + file), o);
    std::vector<std::byte> page(storage::page_size);
    for (storage::page_no p = 0; p < pages; ++p) {
        r->read_page(p, page.data());
        EXPECT_EQ(page[0], std::byte(p < pages / 2 ? 2 : 1)) << "page " << p;
    }
    EXPECT_EQ(r->cache_counters().server_fetches, 0u);
    EXPECT_EQ(r->cache_counters().file_hits, pages);
}

// The fault path end to end: a reader opened before the server stopped
// walks a list the file holds, every page served by the file.
TEST_F(PgCacheTest, FaultsAreServedFromTheFileWhileTheServerIsDown) {
    const std::string store_url = url(name, file);
    {
        auto s = store::open(store_url);
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 20000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    test::child walker([&](test::child& me) {
        open_options o;
        o.read_only = true;
        o.fatal_hook = [](const char* message) { (void)!::write(2, message, std::strlen(message)); };
        auto s = store::open(store_url + "&fault_wait_s=1", o);
        me.report_and_wait();
        long n = 0;
        for (Node* p = *s.find_root<Node*>("list"); p; p = p->next) ++n;
        return n == 20000 ? 0 : 1;
    });
    ASSERT_TRUE(walker.wait_for_report());
    server->crash();
    walker.go();
    const int code = walker.exit_code();
    server->start();
    EXPECT_EQ(code, 0);
}

// The cache file's read-around (pg_cache_file::find): a fault's read of a
// slot that is not in the page cache asks the kernel for the cluster of
// slots around it, so a cold process waits for the disk once a cluster;
// a read without read-around (open's, the fetch thread's) brings only its
// slot; a slot never written (a hole) is not read around. What the kernel
// holds is seen with mincore. No server: the file alone.
class PgCacheFileTest : public ::testing::Test {
protected:
    static constexpr std::uint64_t slots = 1024;
    void SetUp() override {
        std::string why;
        bool unusable = false;
        file = storage::pg_cache_file::open(path, slots, why, unusable);
        ASSERT_TRUE(file) << why;
        key.server = 1;
        key.row = 1;
    }
    // Every page's slot written (version 1), made durable and dropped from
    // the page cache, as after a reboot.
    void fill_and_drop() {
        std::vector<std::byte> image(storage::page_size);
        for (storage::page_no p = 0; p < slots; ++p) {
            std::memset(image.data(), int(p % 251) + 1, image.size());
            ASSERT_TRUE(file->put(key, p, 1, 1, image.data()));
        }
        drop();
    }
    void drop() const { test::drop_from_page_cache(path); }
    std::size_t cached() const { return test::cached_pages(path); }
    std::size_t cached_settled() const { return test::cached_pages_settled(path); }
    storage::pg_cache_file::lookup find(storage::page_no page, bool read_around) {
        return file->find(key, page, 1, versions, image.data(), read_around);
    }

    test::temp_dir dir;
    std::string path = dir.path("pg-pages");
    std::unique_ptr<storage::pg_cache_file> file;
    storage::pg_cache_key key{};
    storage::pg_version_map versions;  // never loaded: slots are judged by their claims (C4)
    std::vector<std::byte> image = std::vector<std::byte>(storage::page_size);
};

TEST_F(PgCacheFileTest, AFaultsMissBringsTheSlotsAroundItIn) {
    fill_and_drop();
    const std::size_t before = cached_settled();
    ASSERT_EQ(find(900, false), storage::pg_cache_file::lookup::hit);
    EXPECT_EQ(image[0], std::byte(900 % 251 + 1));
    const std::size_t one = cached_settled();
    EXPECT_LE(one - before, 3u) << "a read without read-around brings its image and its headers' page alone";
    ASSERT_EQ(find(300, true), storage::pg_cache_file::lookup::hit);
    EXPECT_EQ(image[0], std::byte(300 % 251 + 1));
    const std::size_t around = cached_settled();
    EXPECT_GE(around - one, 30u) << "a fault's miss brings the 128 KiB cluster around its slot";
    // The slots brought in read right, from the page cache.
    for (storage::page_no p = 295; p < 305; ++p) {
        ASSERT_EQ(find(p, true), storage::pg_cache_file::lookup::hit) << "page " << p;
        EXPECT_EQ(image[100], std::byte(p % 251 + 1)) << "page " << p;
    }
}

// From outside, under read-around: a byte flipped in one slot's image
// makes that page a rejected slot and no other; a file cut short in the
// middle of a slot leaves the slots before the cut hits and every other a
// miss; nothing read is another page's image.
TEST_F(PgCacheFileTest, DamagedOrCutShortUnderReadAroundAreMissesOnly) {
    fill_and_drop();
    const off_t slot_at = file->image_at(100);
    {
        const int fd = ::open(path.c_str(), O_RDWR);
        ASSERT_GE(fd, 0);
        unsigned char b = 0;
        ASSERT_EQ(::pread(fd, &b, 1, slot_at + 1000), 1);
        b ^= 0x5a;
        ASSERT_EQ(::pwrite(fd, &b, 1, slot_at + 1000), 1);
        ::close(fd);
    }
    drop();
    std::uint64_t hits = 0, rejected = 0;
    for (storage::page_no p = 0; p < slots; ++p) {
        const auto found = find(p, true);
        if (found == storage::pg_cache_file::lookup::hit) {
            ++hits;
            EXPECT_EQ(image[4000], std::byte(p % 251 + 1)) << "page " << p;
        }
        if (found == storage::pg_cache_file::lookup::rejected) ++rejected;
    }
    EXPECT_EQ(rejected, 1u);
    EXPECT_EQ(hits, slots - 1);
    ASSERT_EQ(::truncate(path.c_str(), slot_at + off_t(storage::page_size / 2)), 0);  // slot 100's image cut
    drop();
    hits = 0;
    for (storage::page_no p = 0; p < slots; ++p) {
        const auto found = find(p, true);
        EXPECT_NE(found, storage::pg_cache_file::lookup::rejected) << "page " << p << ": a cut slot is absent";
        if (found == storage::pg_cache_file::lookup::hit) {
            ++hits;
            EXPECT_EQ(image[4000], std::byte(p % 251 + 1)) << "page " << p;
        }
    }
    EXPECT_EQ(hits, 100u) << "the slots before the cut";
}

// plan_reads, from the store's page count: none for an empty store; slots
// no more than the device's read-ahead are asked for whole, wrapping at the file's end (the
// key puts page 0's slot in the middle); a store larger, that fits in
// memory, has a miss bring the read-ahead around it, not 128 KiB.
TEST_F(PgCacheFileTest, OpenPlansReadsByTheStoresSize) {
    fill_and_drop();
    const std::uint64_t read_ahead = std::min<std::uint64_t>(test::device_read_ahead(path), 8 << 20);
    if (read_ahead < slots * storage::pg_cache_bytes_per_slot)
        GTEST_SKIP() << "the device's read-ahead here is " << read_ahead << " bytes, under " << slots << " slots";
    file->plan_reads(key, 0);  // an empty store (a new one) asks for nothing of the others' slots
    EXPECT_LE(cached_settled(), 2u);
    file->plan_reads(key, slots);
    EXPECT_GE(cached_settled(), slots * storage::pg_cache_bytes_per_slot / test::system_page_size() * 9 / 10);
    for (storage::page_no p : {0, 1, 511, 1023}) {
        ASSERT_EQ(find(p, true), storage::pg_cache_file::lookup::hit) << "page " << p;
        EXPECT_EQ(image[100], std::byte(p % 251 + 1)) << "page " << p;
    }
    // A store of 4 x the read-ahead in a file of its own: clusters start at the read-ahead.
    const std::string big_path = dir.path("big-pages");
    const std::uint64_t big = 4 * read_ahead / storage::pg_cache_bytes_per_slot / storage::pg_cache_group_slots *
                              storage::pg_cache_group_slots;
    std::string why;
    bool unusable = false;
    auto big_file = storage::pg_cache_file::open(big_path, big, why, unusable);
    ASSERT_TRUE(big_file) << why;
    std::vector<std::byte> fill(storage::page_size, std::byte{7});
    for (storage::page_no p = 0; p < big; ++p) ASSERT_TRUE(big_file->put(key, p, 1, 1, fill.data()));
    test::drop_from_page_cache(big_path);
    big_file->plan_reads(key, big);
    const std::size_t before = test::cached_pages_settled(big_path);
    const std::size_t header_pages = big * storage::pg_cache_slot_header_size / test::system_page_size();
    EXPECT_LE(before, header_pages + 8) << "a store larger than the read-ahead is not asked for whole (its "
                                           "headers are)";
    ASSERT_EQ(big_file->find(key, big / 2, 1, versions, image.data(), true), storage::pg_cache_file::lookup::hit);
    EXPECT_GE(test::cached_pages_settled(big_path) - before, read_ahead / test::system_page_size() * 9 / 10)
        << "one miss brings the device's read-ahead around it (" << read_ahead << " bytes)";
}

// C1's copy of the headers, attacked by a second opener of the file (as
// another process): a slot it rewrites after this one copied the header
// is judged by the file's header, never the copy's; a slot it fills is
// found. The copy costs a page for each group of 64 slots looked in.
TEST_F(PgCacheFileTest, AHeaderCopiedBeforeAnotherWriterChangedTheSlotIsNeverTrusted) {
    fill_and_drop();
    std::string why;
    bool unusable = false;
    auto other = storage::pg_cache_file::open(path, slots, why, unusable);
    ASSERT_TRUE(other) << why;
    EXPECT_EQ(file->header_copy_bytes(), slots / storage::pg_cache_group_slots) << "a byte a group, no page";
    ASSERT_EQ(find(5, false), storage::pg_cache_file::lookup::hit);
    EXPECT_EQ(file->header_copy_bytes(), storage::page_size + slots / storage::pg_cache_group_slots)
        << "page 5's group copied";
    // The same image, now known newest through commit 9: the copy's claim
    // (through 1) does not serve snapshot 7, the file's does.
    ASSERT_TRUE(other->put(key, 5, 1, 9, image.data()));
    EXPECT_EQ(file->find(key, 5, 7, versions, image.data(), false), storage::pg_cache_file::lookup::hit);
    EXPECT_EQ(image[0], std::byte(5 % 251 + 1));
    std::vector<std::byte> two(storage::page_size, std::byte{0xee});
    ASSERT_TRUE(other->put(key, 5, 2, 2, two.data()));  // a newer version over the copied slot
    EXPECT_EQ(find(5, false), storage::pg_cache_file::lookup::rejected) << "version 2 is not the newest at 1";
    EXPECT_EQ(file->find(key, 5, 2, versions, image.data(), false), storage::pg_cache_file::lookup::hit);
    EXPECT_EQ(image[0], std::byte{0xee});
    // Another page takes the slot. (With the same bytes, the copy's header
    // would be as good: its check is over the image's bytes, which would be
    // version 2's.)
    std::vector<std::byte> four(storage::page_size, std::byte{0x44});
    ASSERT_TRUE(other->put(key, 5 + slots, 1, 1, four.data()));
    EXPECT_EQ(file->find(key, 5, 2, versions, image.data(), false), storage::pg_cache_file::lookup::absent);
    // Another store's page, found; then page 5 again, and its image alone
    // changed from outside: a mix, never handed out.
    storage::pg_cache_key their = key;
    their.row = 2;
    ASSERT_TRUE(other->put(their, 7, 1, 1, four.data()));
    EXPECT_EQ(file->find(their, 7, 1, versions, image.data(), false), storage::pg_cache_file::lookup::hit);
    ASSERT_TRUE(other->put(key, 5, 2, 2, two.data()));
    ASSERT_EQ(file->find(key, 5, 2, versions, image.data(), false), storage::pg_cache_file::lookup::hit);
    const int fd = ::open(path.c_str(), O_WRONLY);
    std::vector<std::byte> three(storage::page_size, std::byte{0x33});
    ASSERT_EQ(::pwrite(fd, three.data(), three.size(), file->image_at(file->slot_of(key, 5))), ssize_t(three.size()));
    ::close(fd);
    EXPECT_EQ(file->find(key, 5, 2, versions, image.data(), false), storage::pg_cache_file::lookup::rejected);
    EXPECT_EQ(file->header_copy_bytes(), 2 * storage::page_size + slots / storage::pg_cache_group_slots)
        << "page 5's group, and their page 7's";
}

TEST_F(PgCacheFileTest, ASlotNeverWrittenIsNotReadAround) {
    drop();
    const std::size_t before = cached_settled();
    for (storage::page_no p : {10, 500, 1000}) EXPECT_EQ(find(p, true), storage::pg_cache_file::lookup::absent);
    // The kernel may make a hole's image block and its headers' page zero pages while it
    // answers RWF_NOWAIT; the 32 of a cluster around it, never.
    EXPECT_LE(cached_settled() - before, 2u * 3) << "holes are not read around";
}

}  // namespace
