// The page engine's residency (pager.hpp: states S0-S6, transitions T1-T14,
// invariants R1-R6): store::check() runs their checkers, with those of the
// page map, the fault space and the residency ring, so a store under a small
// resident budget and a small address space is checked after evictions,
// spills, commits, rollbacks and reuse rounds, between operations and in the
// middle of transactions.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "page/page_bits.hpp"
#include "page/reuse_history.hpp"
#include "support/store_fixture.hpp"

namespace residency {
struct Node {
    long value;
    Node* next;
    long payload[30];  // 256 bytes: 16 nodes per page
};
// Its constructor writes nothing: the object is the zeroed memory make()
// hands out, and its page stays as it was installed.
struct Lazy {
    long v[64];
    Lazy() {}
    STEPPE_FIELDS(v)
};
}  // namespace residency

using residency::Lazy;
using residency::Node;

namespace {

constexpr std::uint64_t kBudget = 256 * 4096;        // the smallest budget
constexpr std::uint64_t kLimit = std::uint64_t{4} << 20;  // the smallest address space: arenas of 16 pages
constexpr long kPerPage = 4096 / sizeof(Node);
constexpr long kNodes = 4 * 256 * kPerPage;          // 1,024 pages: 4x the budget, 4x the limit

class ResidencyTest : public steppe::test::store_fixture {
protected:
    // With the smallest address space, walks need reuse rounds; without
    // it, a transaction may touch every page.
    steppe::store open(bool small_address_space = false) const {
        return store_fixture::open([=](steppe::open_options& o) {
            o.resident_budget = kBudget;
            if (small_address_space) o.address_space_limit = kLimit;
        });
    }

    // No finding of any checker: the engine's state is as the diagram says.
    static void expect_sound(const steppe::store& s, const std::string& when) {
        const std::vector<std::string> findings = s.check();
        EXPECT_TRUE(findings.empty()) << when << ": " << findings.size() << " findings, the first: " << findings[0];
    }

    // Adds `count` nodes to the list, committing every `per_commit` (0: never).
    static void add_nodes(steppe::store& s, long count, long per_commit) {
        Node** head = s.root<Node*>("list");
        for (long i = 0; i < count; ++i) {
            *head = s.make<Node>(Node{i, *head, {}});
            if (per_commit && i % per_commit == per_commit - 1) s.commit();
        }
    }

    // Walks the list in chunks, committing or rolling back between them (a
    // walk of 4x the limit needs reuse rounds); returns the nodes seen.
    static long walk(steppe::store& s, long added, bool commit_between) {
        long seen = 0;
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next, ++seen) {
            n->value += added;
            if (seen % (16 * kPerPage) == 16 * kPerPage - 1) commit_between ? s.commit() : s.rollback();
        }
        return seen;
    }
};

TEST_P(ResidencyTest, CheckersHoldThroughEvictionsSpillsCommitsRollbacksAndReuse) {
    auto s = open(true);
    add_nodes(s, kNodes, 16 * kPerPage);
    s.commit();
    expect_sound(s, "after building 4x the budget in small commits");
    EXPECT_EQ(walk(s, 1, true), kNodes);
    expect_sound(s, "after a walk writing every node, committing between chunks");
    s.reuse_address_space();
    expect_sound(s, "after a reuse round");
    EXPECT_EQ(walk(s, 0, false), kNodes);
    expect_sound(s, "after a walk rolling back between chunks");

    s.reuse_address_space();  // room for one transaction of new pages under the limit
    add_nodes(s, 192 * kPerPage, 0);
    expect_sound(s, "in a transaction of 192 new pages (spilled past half the budget)");
    s.rollback();
    expect_sound(s, "after rolling it back");
    add_nodes(s, 192 * kPerPage, 0);
    s.commit();
    expect_sound(s, "after committing one");

    const steppe::store_stats st = s.stats();
    EXPECT_GT(st.evictions, 0u);
    EXPECT_GT(st.spilled_pages, 0u);
    EXPECT_GT(st.reuse_rounds, 1u);
}

// The eviction thread writes pages out from under a transaction that only
// writes existing pages: checked in the middle of it, after a rollback,
// and after a commit of the same.
TEST_P(ResidencyTest, CheckersHoldWhileWrittenPagesAreSpilled) {
    auto s = open();
    add_nodes(s, kNodes, 16 * kPerPage);
    s.commit();
    long seen = 0;
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next, ++seen) n->value += 1;
    EXPECT_EQ(seen, kNodes);
    EXPECT_GT(s.stats().spilled_pages, 0u) << "the eviction thread spilled written pages";
    expect_sound(s, "with written pages spilled");
    s.rollback();
    expect_sound(s, "after the rollback");
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) n->value += 1;
    s.commit();
    expect_sound(s, "after the commit");
}

// R3: a page freed and handed out again in the same shape in one
// transaction keeps its address, so the residency ring may still name it
// from before; an evictor that meets it there must not drop it while it is
// new: its next fill would read its former life from the file instead of
// the zeros make() handed out.
TEST_P(ResidencyTest, ANewPageAtAFreedPagesAddressIsNotEvicted) {
    {
        auto s = open();
        Lazy* old = s.make<Lazy>();
        old->v[0] = 7;
        s.set_root("lazy", old);
        add_nodes(s, kNodes, 16 * kPerPage);
        s.commit();
    }
    auto s = open();
    Lazy* old = s.find_root<Lazy>("lazy");
    ASSERT_EQ(old->v[0], 7);  // faulted in first: the oldest in the ring
    s.destroy(old);
    Lazy* fresh = s.make<Lazy>();
    ASSERT_EQ(fresh, old) << "the heap handed the freed page out again, at the same address";
    s.set_root("lazy", fresh);
    long seen = 0;
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) ++seen;  // 4x the budget: evictions
    EXPECT_EQ(seen, kNodes);
    EXPECT_GT(s.stats().evictions, 0u);
    expect_sound(s, "after evictions with a new page in the ring");
    EXPECT_EQ(fresh->v[0], 0) << "make() handed out zeroed memory";
}

STEPPE_BOTH_BACKENDS(ResidencyTest);

// The pager's per-page marks are bits sharing words: threads marking and
// clearing pages whose bits share words lose none of each other's changes,
// and exchange reports what the bit was.
TEST(PageBits, ThreadsChangingBitsOfTheSameWordsLoseNothing) {
    constexpr std::uint64_t pages = 1u << 16;
    steppe::page::page_bits bits(pages);
    ASSERT_TRUE(bits.mapped());
    constexpr int threads = 4;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&bits, t] {
            // Thread t owns the pages p with p % threads == t: every word is shared.
            for (int round = 0; round < 3; ++round)
                for (std::uint64_t p = static_cast<std::uint64_t>(t); p < pages; p += threads) {
                    const bool set = round != 1 || p % 3 == 0;  // round 1 clears two pages in three
                    const bool was = bits.exchange(p, set, std::memory_order_acq_rel);
                    if (was != (round != 0)) std::abort();  // set by round 0, and by round 1 unless cleared
                    if (round == 1 && !set && bits.exchange(p, true, std::memory_order_acq_rel)) std::abort();
                }
        });
    for (std::thread& w : workers) w.join();
    for (std::uint64_t p = 0; p < pages; ++p) ASSERT_TRUE(bits.test(p, std::memory_order_acquire)) << p;
    for (std::uint64_t p = 0; p < pages; p += 2) bits.exchange(p, false, std::memory_order_release);
    for (std::uint64_t p = 0; p < pages; ++p) ASSERT_EQ(bits.test(p, std::memory_order_acquire), p % 2 == 1) << p;
}

// What eviction learns of pages that come back (page/reuse_history.hpp): a
// page read in again while it is still among the last pages that left gets
// four more turns of the ring a level, and a level more each time it comes
// back in time (three at most); one that left longer ago, or never, gets
// none; a touch while cooling counts as coming back.
TEST(ReuseHistory, APageGetsMoreTurnsEachTimeItComesBackSoonAndNoneWhenLate) {
    constexpr std::uint64_t capacity = 4;
    constexpr unsigned per_level = steppe::page::reuse_history::chances_per_level;
    steppe::page::reuse_history history(capacity, 1u << 20);
    ASSERT_TRUE(history.mapped());
    const auto chances = [&history](std::uint64_t page) {
        unsigned n = 0;
        while (history.take_chance(page)) ++n;
        return n;
    };
    EXPECT_FALSE(history.take_chance(7)) << "never left";
    history.came_back(7);
    EXPECT_EQ(chances(7), 0u) << "read for the first time";

    for (unsigned level = 1; level <= 4; ++level) {
        history.left(7);
        history.came_back(7);
        EXPECT_EQ(chances(7), std::min(level, steppe::page::reuse_history::max_level) * per_level) << level;
    }
    history.came_back(7);
    EXPECT_EQ(chances(7), 0u) << "coming back again without leaving";

    history.left(9);
    for (std::uint64_t other = 100; other < 100 + capacity; ++other) history.left(other);
    history.came_back(9);
    EXPECT_EQ(chances(9), 0u) << capacity << " pages left after it: out of the history";
    history.came_back(100 + capacity - 1);
    EXPECT_EQ(chances(100 + capacity - 1), per_level) << "the newest of the history";
    history.left(9);
    history.came_back(9);
    EXPECT_EQ(chances(9), per_level) << "back in time now: its first level";

    history.touched(11);
    EXPECT_TRUE(history.take_chance(11)) << "touched while cooling";
    history.left(11);
    EXPECT_FALSE(history.take_chance(11)) << "a page that leaves loses the chances it had left";
    history.came_back(11);
    EXPECT_EQ(chances(11), 2 * per_level) << "and earns its next level's by coming back";
}

// Faulting threads and the eviction thread use it at once: every page that
// left and came back before the history turned over is marked, whatever
// other threads do to its neighbours and to the history's ring at once.
TEST(ReuseHistory, ThreadsLeavingAndComingBackLoseNoMarkWithinTheHistory) {
    constexpr int threads = 4;
    constexpr std::uint64_t pages = 1u << 14;
    steppe::page::reuse_history history(pages * threads, pages);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&history, t] {
            for (std::uint64_t p = static_cast<std::uint64_t>(t); p < pages; p += threads) {
                history.left(p);
                history.came_back(p);
            }
        });
    for (std::thread& w : workers) w.join();
    for (std::uint64_t p = 0; p < pages; ++p) {
        for (unsigned i = 0; i < steppe::page::reuse_history::chances_per_level; ++i)
            ASSERT_TRUE(history.take_chance(p)) << p;
        ASSERT_FALSE(history.take_chance(p)) << p;
    }
}

}  // namespace
