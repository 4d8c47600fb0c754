// The cluster a fault's fetch brings from PostgreSQL (storage/fetch_worth.hpp):
// it grows while the pages fetched beside a fault are used, however late, by
// more than their cost against a round trip's, goes down when they are not,
// and never moves without a limit above the start.
#include "storage/fetch_worth.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using steppe::storage::fetch_worth;
using steppe::storage::page_no;

constexpr std::uint64_t us = 1000;

// `fetches` fault fetches of whole clusters at fresh places (from `next`,
// 2,048 pages apart: 128 fetches before two share a mark word), each taking a
// 0.5 ms trip and 20 µs a page; a share `used_per_32` / 32 of the pages
// fetched beside the fault is used, `late` fetches after it came.
std::uint64_t run(fetch_worth& w, page_no& next, int fetches, std::uint64_t used_per_32, int late = 0) {
    std::vector<std::vector<page_no>> waiting;
    for (int i = 0; i < fetches; ++i) {
        const page_no fault = (next++ << 11) + 5;
        const page_no first = w.cluster_first(fault);
        EXPECT_LE(first, fault);
        EXPECT_LT(fault, first + w.pages());
        EXPECT_EQ(first % w.pages(), 0u);
        std::vector<page_no> brought;
        for (page_no p = first; p < first + w.pages(); ++p)
            if (p != fault) {
                w.fetched(p);
                brought.push_back(p);
            }
        w.timed(16, 500 * us, 15 * 20 * us);  // a hint's small fetch: the trip
        w.timed(w.pages(), 500 * us + w.pages() * 1300, (w.pages() - 1) * 20 * us);
        w.judge();
        waiting.push_back(brought);
        if (int(waiting.size()) > late) {
            const auto& due = waiting[waiting.size() - 1 - late];
            for (std::size_t k = 0; k < due.size(); ++k)
                if (k % 32 < used_per_32) w.used(due[k]);
        }
    }
    return w.pages();
}

TEST(FetchWorthTest, GrowsWhilePagesAreUsedEvenLate) {
    fetch_worth w;
    page_no next = 0;
    w.set_limit(256);
    EXPECT_EQ(w.pages(), fetch_worth::start_pages);
    // A sixth used, 12 fetches later (a file's read-around looks back 8):
    // worth 80 µs a page against 20, less while the uses are still to come.
    EXPECT_EQ(run(w, next, 60, 5, 12), 256u);
    EXPECT_NEAR(double(w.trip_ns()), 500.0 * us, 1.0 * us) << "the trip from small fetches only";
    EXPECT_EQ(w.page_ns(), 20 * us);
}

TEST(FetchWorthTest, ShrinksWhereFetchedPagesAreNotUsed) {
    fetch_worth w;
    page_no next = 0;
    w.set_limit(1024);
    run(w, next, 40, 32);
    EXPECT_GT(w.pages(), fetch_worth::start_pages);
    EXPECT_EQ(run(w, next, 400, 0), fetch_worth::min_pages);
}

TEST(FetchWorthTest, AShareNearItsCostKeepsTheCluster) {
    fetch_worth w;
    page_no next = 0;
    w.set_limit(1024);
    // 1 in 31 used: worth 16 µs a page against 20.
    EXPECT_EQ(run(w, next, 100, 1), fetch_worth::start_pages);
}

TEST(FetchWorthTest, WithoutALimitAboveTheStartTheClusterStays) {
    fetch_worth w;  // no cache file
    page_no next = 0;
    EXPECT_EQ(run(w, next, 60, 32), fetch_worth::start_pages);
    EXPECT_EQ(run(w, next, 400, 0), fetch_worth::start_pages);
    w.set_limit(100000);
    EXPECT_EQ(w.limit(), fetch_worth::max_pages);
    w.set_limit(100);
    EXPECT_EQ(w.limit(), 64u) << "a power of two";
}

TEST(FetchWorthTest, APageCountsOnceAndOnlyIfFetchedBeside) {
    fetch_worth w;
    w.set_limit(64);
    w.timed(8, 500 * us, 0);
    w.timed(32, 500 * us, 31 * 20 * us);
    for (page_no p = 0; p < 300; ++p) w.fetched(p);
    for (int i = 0; i < 10; ++i)
        for (page_no p = 0; p < 10; ++p) w.used(p);  // 10 pages, used 10 times each: 10 uses
    for (page_no p = 1000; p < 1100; ++p) w.used(p);  // never fetched: no use
    w.judge();  // 10 of 300: worth 17 µs, within [10, 40]: stays
    EXPECT_EQ(w.pages(), fetch_worth::start_pages);
    for (page_no p = 10; p < 20; ++p) w.forget(p);  // fetched again, not beside a fault
    for (page_no p = 10; p < 20; ++p) w.used(p);
    // A page 2^18 on shares a word with page p: its use is not p's, and
    // fetching it drops the word's older marks (counted unused).
    const page_no alias = page_no{1} << 18;
    w.used(alias + 25);
    w.fetched(alias + 26);
    w.used(25);
    w.used(alias + 26);  // 11 uses of 301
    for (int i = 0; i < 5; ++i) w.judge();
    EXPECT_EQ(w.pages(), fetch_worth::start_pages) << "11 uses of 301: worth 18 µs";
    for (page_no p = 30; p < 200; ++p) w.used(p);  // now worth enough
    w.judge();
    EXPECT_EQ(w.pages(), 64u);
}

TEST(FetchWorthTest, PinnedCostsAreKept) {
    fetch_worth w;
    w.pin(300 * us, 10 * us);
    w.timed(8, 900 * us, 0);
    w.timed(100, 900 * us, 99 * 50 * us);
    EXPECT_EQ(w.trip_ns(), 300 * us);
    EXPECT_EQ(w.page_ns(), 10 * us);
}

}  // namespace
