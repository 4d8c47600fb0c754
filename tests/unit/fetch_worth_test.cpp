// The cluster a fault's fetch brings from PostgreSQL (storage/fetch_worth.hpp):
// it grows while the pages fetched beside a fault are used, however late, by
// more than their cost against a round trip's, goes down when they are not,
// and never moves without a limit above the start.
#include "storage/fetch_worth.hpp"

#include <gtest/gtest.h>

namespace {

using steppe::storage::fetch_worth;
using steppe::storage::page_no;

constexpr std::uint64_t us = 1000;

// `fetches` fault fetches of whole clusters at fresh places, each taking a
// 0.5 ms trip and 20 µs a page; a share `used_per_32` / 32 of the pages
// fetched beside the fault is used, `late` fetches after it came.
std::uint64_t run(fetch_worth& w, int fetches, std::uint64_t used_per_32, int late = 0) {
    static page_no next = 0;
    std::vector<std::vector<page_no>> waiting;
    for (int i = 0; i < fetches; ++i) {
        const page_no fault = (next++ << 16) + 5;
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
    w.set_limit(256);
    EXPECT_EQ(w.pages(), fetch_worth::start_pages);
    // A sixth used, 12 fetches later (a file's read-around looks back 8):
    // worth 80 µs a page against 20, less while the uses are still to come.
    EXPECT_EQ(run(w, 60, 5, 12), 256u);
    EXPECT_NEAR(double(w.trip_ns()), 500.0 * us, 1.0 * us) << "the trip from small fetches only";
    EXPECT_EQ(w.page_ns(), 20 * us);
}

TEST(FetchWorthTest, ShrinksWhereFetchedPagesAreNotUsed) {
    fetch_worth w;
    w.set_limit(1024);
    run(w, 40, 32);
    EXPECT_GT(w.pages(), fetch_worth::start_pages);
    EXPECT_EQ(run(w, 400, 0), fetch_worth::min_pages);
}

TEST(FetchWorthTest, AShareNearItsCostKeepsTheCluster) {
    fetch_worth w;
    w.set_limit(1024);
    // 1 in 31 used: worth 16 µs a page against 20.
    EXPECT_EQ(run(w, 100, 1), fetch_worth::start_pages);
}

TEST(FetchWorthTest, WithoutALimitAboveTheStartTheClusterStays) {
    fetch_worth w;  // no cache file
    EXPECT_EQ(run(w, 60, 32), fetch_worth::start_pages);
    EXPECT_EQ(run(w, 400, 0), fetch_worth::start_pages);
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
}

}  // namespace
