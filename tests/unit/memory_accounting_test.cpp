// Everything a store costs counts (issue 13): store_stats::memory by kind
// adds up and follows the store, what grows with the store stays within its
// documented cost per page, the resident budget holds pages and metadata
// together, metadata past the budget is no_space naming it, and the index
// of log pages (storage/log_index.hpp) keeps N1 against a model.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <fstream>
#include <map>
#include <random>
#include <string>

#include "page/pager.hpp"
#include "storage/log_index.hpp"
#include "support/proc_status.hpp"
#include "support/store_fixture.hpp"

namespace accounting {
struct Node {
    Node* next;
    long id;
    long pad[6];  // 64 bytes: 64 a page
};
struct Page {
    long words[512];  // a page each
};
}  // namespace accounting

using accounting::Node;
using accounting::Page;

namespace {

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;

std::uint64_t sum_of_kinds(const steppe::store_memory& m) {
    return m.store_pages + m.cooling + m.heap + m.page_map + m.fault_space + m.residency + m.types + m.storage +
           m.transaction + m.buffers;
}

class MemoryAccountingTest : public steppe::test::store_fixture {
protected:
    steppe::store open_with(std::uint64_t budget) const {
        return store_fixture::open([=](steppe::open_options& o) { o.resident_budget = budget; });
    }
    static void add_nodes(steppe::store& s, long count, long per_commit) {
        Node** head = s.root<Node*>("list");
        for (long i = 0; i < count; ++i) {
            Node* n = s.make<Node>();
            n->id = i;
            n->next = *head;
            *head = n;
            if (per_commit && i % per_commit == per_commit - 1) s.commit();
        }
    }
};

// The kinds add up to the total, and each is there: a store of 64-byte
// nodes has a descriptor per page in the heap, a forward entry per page in
// the page map, side-table entries for the pages it touched.
TEST_P(MemoryAccountingTest, KindsAddUpAndFollowTheStore) {
    auto s = open_with(64 * MiB);
    add_nodes(s, 64 * 2000, 0);  // 2,000 pages, within the budget
    s.commit();
    const steppe::store_stats st = s.stats();
    const steppe::store_memory& m = st.memory;
    EXPECT_EQ(m.total(), sum_of_kinds(m));
    EXPECT_EQ(m.metadata(), m.total() - m.store_pages - m.cooling);
    EXPECT_GE(m.store_pages, 2000 * 4096u);
    EXPECT_LE(m.store_pages, (st.store_pages + 16) * 4096);
    EXPECT_GE(m.heap, 2000 * 52u) << "a 48-byte descriptor and a list position per page";
    EXPECT_GE(m.page_map, 2000 * 8u);
    EXPECT_GT(m.fault_space, 0u);
    EXPECT_GT(m.residency, 0u);
    EXPECT_GT(m.types, 0u);
    EXPECT_GT(m.storage, 0u);
    EXPECT_GT(m.buffers, 0u);
    EXPECT_LE(m.total(), st.resident_budget_pages * 4096);
    const std::string report = steppe::to_string(st);
    EXPECT_NE(report.find("memory"), std::string::npos) << report;
    EXPECT_NE(report.find("page map"), std::string::npos) << report;
}

// What grows with the store stays within its cost per page (docs/design.md,
// "What the budget counts"): at most 160 bytes of metadata per store page
// (4% of it) for a store of 64-byte objects built in commits, then reopened
// under the same budget and walked; the buffers within their batch bound.
TEST_P(MemoryAccountingTest, MetadataPerStorePageIsBounded) {
    constexpr long pages = 6000;
    constexpr std::uint64_t budget = 8 * MiB;  // 2,048 pages: a third of the store
    const auto grown = [](const steppe::store_memory& m) { return m.metadata() - m.types - m.buffers - m.residency; };
    {
        auto s = open_with(budget);
        add_nodes(s, 64 * pages, 64 * 1000);
        s.commit();
        const steppe::store_memory m = s.stats().memory;
        EXPECT_LE(grown(m), pages * 160u);
        EXPECT_LE(m.buffers, 2 * (budget / 16) + 256 * KiB) << "a batch of images each way, and the heap's commit pages";
    }
    auto s = open_with(budget);
    long seen = 0;
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) seen += n->id == pages * 64 - 1 - seen;
    EXPECT_EQ(seen, pages * 64);
    const steppe::store_stats st = s.stats();
    EXPECT_LE(grown(st.memory), pages * 160u);
    EXPECT_GT(st.evictions, 0u);
    EXPECT_LE(st.memory.total(), budget + budget / 8 + 64 * 4096);
}

// A transaction that makes many times the budget keeps the store's whole
// memory, pages and metadata, near the budget: the pages give up what the
// metadata takes.
TEST_P(MemoryAccountingTest, PagesAndMetadataTogetherKeepTheBudget) {
    constexpr std::uint64_t budget = 4 * MiB;
    auto s = open_with(budget);
    add_nodes(s, 64 * 10'000, 0);  // 40 MiB in one transaction: 10x the budget
    const steppe::store_memory m = s.stats().memory;
    EXPECT_GT(s.stats().spilled_pages, 4 * budget / 4096);
    EXPECT_GT(m.metadata(), 0u);
    // The ring may run 1/8 over before faults wait, the new pages up to half
    // of what is left: the whole at most 1.25 x the budget and 64 pages.
    EXPECT_LE(m.total(), budget + budget / 4 + steppe::page::pager::min_pages * 4096) << m.total();
    s.commit();
    EXPECT_LE(s.stats().memory.transaction, 64 * KiB) << "the transaction's page lists go with it";
}

// When the store's own memory outgrows the budget, eviction can do no more:
// make is no_space naming the budget, and the store is usable after a
// rollback.
TEST_P(MemoryAccountingTest, MetadataPastTheBudgetIsNoSpaceNamingIt) {
    auto s = open_with(1 * MiB);  // the smallest budget
    Page** last = s.root<Page*>("last");
    s.commit();  // the root outlives the rollback
    long made = 0;
    try {
        for (; made < 200'000; ++made) *last = s.make<Page>();
        FAIL() << "200,000 pages of metadata fit in a 1 MiB budget";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::no_space) << e.what();
        EXPECT_NE(std::string(e.what()).find("resident budget of 1024 KiB"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("heap"), std::string::npos) << e.what();
    }
    EXPECT_GT(made, 1000);
    s.rollback();
    *last = s.make<Page>();
    (*last)->words[7] = 7;
    s.commit();
    EXPECT_TRUE(s.check().empty());
}

STEPPE_BOTH_BACKENDS(MemoryAccountingTest);

// N1 and lookups against a std::map, over batches of random pages, repeats
// included (the newest entry wins).
TEST(LogIndex, MatchesAMapOverRandomSpills) {
    steppe::storage::log_index index;
    std::map<std::uint32_t, std::uint64_t> model;
    std::mt19937 random(13);
    std::uint64_t offset = 0;
    for (int spill = 0; spill < 300; ++spill) {
        std::vector<steppe::storage::log_index::entry> batch(1 + random() % 64);
        for (auto& e : batch) {
            e = {static_cast<std::uint32_t>(random() % 5000), static_cast<std::uint32_t>(offset), ++offset};
            model[e.page] = e.where;
        }
        index.add(batch);
        ASSERT_EQ(index.distinct(), model.size());
    }
    EXPECT_TRUE(index.check().empty());
    for (std::uint32_t page = 0; page < 5000; ++page) {
        steppe::storage::log_index::entry e;
        const bool found = index.find(page, e);
        ASSERT_EQ(found, model.count(page) == 1) << page;
        if (found) {
            EXPECT_EQ(e.where, model[page]) << page;
        }
    }
    const auto newest = index.newest();
    ASSERT_EQ(newest.size(), model.size());
    auto it = model.begin();
    for (const auto& e : newest) {
        EXPECT_EQ(e.page, it->first);
        EXPECT_EQ(e.where, it->second);
        ++it;
    }
    EXPECT_LE(index.memory_bytes(), model.size() * 16 * 3) << "16 bytes an entry, runs up to twice their size";
    index.clear();
    EXPECT_TRUE(index.empty());
}

// A merge frees the chunks it has read, so building a big index spill by
// spill, as a transaction rewriting a whole store does, never holds much more
// than the index: with whole vectors the last merge held twice the index
// (the new run beside both halves), the peak of an 8 GiB rewrite under a
// 64 MiB budget.
TEST(LogIndex, AMergeHoldsLittleMoreThanTheIndex) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "a sanitizer's allocator keeps freed memory (AddressSanitizer's quarantine): the peak is not the index's";
#else
    constexpr std::uint32_t pages = 1u << 21;  // 2 M entries, 32 MiB: the spills of a rewrite of 8 GiB
    constexpr std::uint32_t batch_pages = 1024;  // an eviction batch under a 64 MiB budget
    steppe::storage::log_index index;
    std::vector<steppe::storage::log_index::entry> batch(batch_pages);
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM starts again from VmRSS
    const std::uint64_t before = steppe::test::proc_status_bytes("VmHWM:");
    for (std::uint32_t first = 0; first < pages; first += batch_pages) {
        for (std::uint32_t i = 0; i < batch_pages; ++i) batch[i] = {first + i, first + i, std::uint64_t{first + i} << 12};
        index.add(batch);
    }
    const std::uint64_t peak = steppe::test::proc_status_bytes("VmHWM:") - before;
    ASSERT_EQ(index.distinct(), pages);
    for (std::uint32_t page : {0u, 1u, 4095u, pages / 2 + 7, pages - 1}) {
        steppe::storage::log_index::entry e;
        ASSERT_TRUE(index.find(page, e)) << page;
        EXPECT_EQ(e.where, std::uint64_t{page} << 12);
    }
    EXPECT_TRUE(index.check().empty());
    const std::uint64_t held = index.memory_bytes();
    EXPECT_GE(held, std::uint64_t{pages} * 16);
    EXPECT_LE(peak, held + held / 4) << "the index holds " << (held >> 20) << " MiB; building it peaked "
                                     << (peak >> 20) << " MiB above where it started";
#endif
}

// A commit's spilled pages move to the committed index: into an empty one
// without a copy, into one with entries as newer than all of them; either
// way the result matches a model, N1 holds, and the spilled index is empty.
TEST(LogIndex, AbsorbTakesEveryEntryAsNewer) {
    for (const bool committed_before : {false, true}) {
        steppe::storage::log_index committed, spilled;
        std::map<std::uint32_t, std::uint64_t> model;
        std::mt19937 random(committed_before ? 7 : 8);
        std::uint64_t offset = 0;
        const auto batch_into = [&](steppe::storage::log_index& index) {
            std::vector<steppe::storage::log_index::entry> batch(1 + random() % 64);
            for (auto& e : batch) {
                e = {static_cast<std::uint32_t>(random() % 3000), static_cast<std::uint32_t>(offset), ++offset};
                model[e.page] = e.where;
            }
            index.add(batch);
        };
        for (int spill = 0; committed_before && spill < 40; ++spill) batch_into(committed);
        for (int spill = 0; spill < 60; ++spill) batch_into(spilled);
        const std::uint64_t spilled_bytes = spilled.memory_bytes();
        committed.absorb(std::move(spilled));
        EXPECT_TRUE(spilled.empty());
        EXPECT_EQ(spilled.memory_bytes(), 0u);
        if (!committed_before) {
            EXPECT_EQ(committed.memory_bytes(), spilled_bytes) << "moved, not copied";
        }
        EXPECT_TRUE(committed.check().empty());
        ASSERT_EQ(committed.distinct(), model.size());
        for (const auto& [page, where] : model) {
            steppe::storage::log_index::entry e;
            ASSERT_TRUE(committed.find(page, e)) << page;
            EXPECT_EQ(e.where, where) << page << (committed_before ? " (committed before)" : "");
        }
    }
}

}  // namespace
