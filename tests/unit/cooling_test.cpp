// The cooling stage of eviction (src/page/cooling.hpp; pager.hpp T5, T2,
// R7, R8): clean pages the evictors take keep their bytes a while, a touch
// meanwhile puts them back without a read, writes to such a page are kept
// like any other, and the pages nobody touched are the ones that leave.
// Counts, not times: store_stats::faults counts every fill, rewarmed_pages
// those a cooling page served.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/store_fixture.hpp"
#include "vm/vm.hpp"

namespace cooling_test {
struct Block {  // one page: block i of the array is page i of its unit
    long id;
    long payload[511];
};
}  // namespace cooling_test

using cooling_test::Block;

namespace {

constexpr std::uint64_t kBudget = std::uint64_t{4} << 20;  // 1,024 pages; a sixteenth of them cool
constexpr std::uint64_t kBudgetPages = kBudget / 4096;
constexpr long kBlocks = 4 * kBudgetPages;

Block* blocks(steppe::store& s) { return *s.find_root<Block*>("blocks"); }

bool block_ok(const Block& b, long i, long added) {
    return b.id == i + added && b.payload[0] == 3 * i && b.payload[510] == -i;
}

class CoolingTest : public steppe::test::store_fixture {
protected:
    void SetUp() override {
        auto s = steppe::store::open(path, options());
        Block* blocks = s.make_array<Block>(kBlocks);
        for (long i = 0; i < kBlocks; ++i) {
            blocks[i].id = i;
            blocks[i].payload[0] = 3 * i;
            blocks[i].payload[510] = -i;
        }
        *s.root<Block*>("blocks") = blocks;
        s.commit();
    }

    steppe::store open_under_budget(bool cooling = true) const {
        return open([cooling](steppe::open_options& o) {
            o.resident_budget = kBudget;
            o.cooling = cooling;
        });
    }

    static void expect_sound(const steppe::store& s, const char* when) {
        const std::vector<std::string> findings = s.check();
        EXPECT_TRUE(findings.empty()) << when << ": " << findings.size() << " findings, the first: " << findings[0];
    }

    // Forward over every block, then back: the pages the forward pass took
    // out last are still cooling when the backward pass meets them first.
    // Returns how many blocks read wrong; `added` is written to each on the
    // way back when `write` (then the id reads i + added afterwards).
    static long there_and_back(steppe::store& s, bool write, long added) {
        Block* b = blocks(s);
        long wrong = 0;
        for (long i = 0; i < kBlocks; ++i) wrong += !block_ok(b[i], i, 0);
        for (long i = kBlocks - 1; i >= 0; --i) {
            wrong += !block_ok(b[i], i, 0);
            if (write) b[i].id += added;
        }
        return wrong;
    }
};

TEST_P(CoolingTest, RetouchedCoolingPagesComeBackWithTheirContentsWithoutARead) {
    auto s = open_under_budget();
    EXPECT_EQ(there_and_back(s, false, 0), 0);
    const steppe::store_stats st = s.stats();
    EXPECT_GT(st.cooled_pages, 0u);
    // The pool holds a sixteenth of the budget (64 pages). Walking back, each
    // fault rewarms one page while every other fault cools two more, which
    // push the oldest cooling pages out: the walk meets half the pool's
    // pages (32) before the rest are gone. A quarter is the floor asserted,
    // so one extra eviction does not fail it; without cooling it is 0.
    EXPECT_GE(st.rewarmed_pages, kBudgetPages / 64) << "faults " << st.faults << ", cooled " << st.cooled_pages;
    EXPECT_LE(st.rewarmed_pages, st.cooled_pages);
    expect_sound(s, "after the walk there and back");
}

TEST_P(CoolingTest, OffEveryRetouchReadsAgain) {
    auto s = open_under_budget(false);
    EXPECT_EQ(there_and_back(s, false, 0), 0);
    const steppe::store_stats st = s.stats();
    EXPECT_EQ(st.cooled_pages, 0u);
    EXPECT_EQ(st.rewarmed_pages, 0u);
    expect_sound(s, "after the walk there and back, FIFO");
}

// Every tracking variant the backend offers here (and, for uffd, pages held
// by protecting them instead of moving them): the copy a cooling page keeps
// is taken where the fault space decides the page is clean.
TEST_P(CoolingTest, WritesToRewarmedPagesAreCommittedOnEveryTrackingVariant) {
    long added = 0;
    for (steppe::vm::tracking_kind tracking : steppe::vm::supported_tracking(
             GetParam() == steppe::fault_backend::uffd ? steppe::vm::backend_kind::uffd
                                                       : steppe::vm::backend_kind::mprotect)) {
        for (const char* move : {"1", "0"}) {
            SCOPED_TRACE(std::string(steppe::vm::to_string(tracking)) + ", STEPPE_UFFD_MOVE=" + move);
            ::setenv("STEPPE_WRITE_TRACKING", steppe::vm::to_string(tracking), 1);
            ::setenv("STEPPE_UFFD_MOVE", move, 1);
            {
                auto s = open_under_budget();
                Block* b = blocks(s);
                // Under a heavy load the eviction thread may fall so far
                // behind that no page cools before the walk comes back (a
                // CI run beside two builds): the walk is rolled back and
                // tried again, so each variant writes rewarmed pages.
                for (int attempt = 0; attempt < 5; ++attempt) {
                    const std::uint64_t rewarmed = s.stats().rewarmed_pages;
                    long wrong = 0;
                    for (long i = 0; i < kBlocks; ++i) wrong += !block_ok(b[i], i, added);
                    for (long i = kBlocks - 1; i >= 0; --i) {
                        wrong += !block_ok(b[i], i, added);
                        b[i].id += 1;
                    }
                    EXPECT_EQ(wrong, 0);
                    if (s.stats().rewarmed_pages > rewarmed) break;
                    s.rollback();
                }
                EXPECT_GT(s.stats().rewarmed_pages, 0u);
                s.commit();
                expect_sound(s, "after the commit");
            }
            ::unsetenv("STEPPE_WRITE_TRACKING");
            ::unsetenv("STEPPE_UFFD_MOVE");
            ++added;
            in_fresh_process([added](steppe::store& s) {
                Block* b = blocks(s);
                for (long i = 0; i < kBlocks; ++i) ASSERT_TRUE(block_ok(b[i], i, added)) << "block " << i;
            });
        }
    }
}

// A rollback forgets the pool (R8): the committed contents come back.
TEST_P(CoolingTest, WritesToRewarmedPagesRollBack) {
    {
        auto s = open_under_budget();
        EXPECT_EQ(there_and_back(s, true, 1000), 0);
        s.rollback();
        expect_sound(s, "after the rollback");
        EXPECT_EQ(there_and_back(s, false, 0), 0) << "the committed contents after the rollback";
    }
    in_fresh_process([](steppe::store& s) {
        Block* b = blocks(s);
        for (long i = 0; i < kBlocks; ++i) ASSERT_TRUE(block_ok(b[i], i, 0)) << "block " << i;
    });
}

// A hot set touched between runs of a cold scan: with cooling its pages
// are met again while they cool and never read again; without, they are
// read again as the ring turns over (at every third turn once they have
// come back: the next test).
std::uint64_t misses_of_hot_and_cold(steppe::store& s) {
    constexpr long hot = 64, run = 32;
    Block* b = blocks(s);
    long sum = 0;
    for (long i = 0; i < hot; ++i) sum += b[i].id;
    const steppe::store_stats before = s.stats();
    for (long cold = hot; cold < kBlocks; cold += run) {
        for (long i = cold; i < cold + run && i < kBlocks; ++i) sum += b[i].id;
        for (long i = 0; i < hot; ++i) sum += b[i].id;
    }
    EXPECT_EQ(sum, kBlocks * (kBlocks - 1) / 2 + hot * (hot - 1) / 2 * ((kBlocks - hot) / run));
    const steppe::store_stats after = s.stats();
    return (after.faults - before.faults) - (after.rewarmed_pages - before.rewarmed_pages);
}

constexpr std::uint64_t cold_pages = kBlocks - 64;

TEST_P(CoolingTest, PagesNobodyTouchesAreEvictedFirst) {
    std::uint64_t cooled = 0, fifo = 0;
    {
        auto s = open_under_budget(true);
        cooled = misses_of_hot_and_cold(s);
        expect_sound(s, "after the scan");
    }
    {
        auto s = open_under_budget(false);
        fifo = misses_of_hot_and_cold(s);
    }
    // Each cold page is read once (and its unit's guard never); with
    // cooling the hot set is not read again, with FIFO it is, several times.
    EXPECT_LE(cooled, cold_pages + 8) << "FIFO: " << fifo;
    EXPECT_GE(fifo, cold_pages + 64) << "cooling: " << cooled;
}

// Without cooling, a page read in again soon after it left gets two more
// turns of the ring (page/reuse_history.hpp): the scan turns the ring over
// about four times, and the hot set is read again twice instead of at every
// turn (measured without the history: cold_pages + 256).
TEST_P(CoolingTest, WithoutCoolingPagesThatComeBackStayLonger) {
    auto s = open_under_budget(false);
    const std::uint64_t misses = misses_of_hot_and_cold(s);
    EXPECT_LE(misses, cold_pages + 2 * 64 + 8);
    EXPECT_GE(misses, cold_pages);
    expect_sound(s, "after the scan");
}

STEPPE_BOTH_BACKENDS(CoolingTest);

}  // namespace
