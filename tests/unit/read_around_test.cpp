// The cluster a page-cache miss reads (storage/read_around.hpp): it grows
// while the pages it brings in are used, up to the device's read-ahead, goes
// back down when they are not, and counts only hits inside the clusters it
// read.
#include "storage/read_around.hpp"

#include <gtest/gtest.h>

namespace {

using steppe::storage::read_around;
constexpr std::uint64_t page = 4096;

// `misses` misses at fresh places (a new 8 MiB stretch each), each followed
// by `hits_per_miss` hits on pages of the cluster it read (or, with
// `inside` false, on pages far from every cluster).
std::uint64_t run(read_around& r, int misses, std::uint64_t hits_per_miss, bool inside = true) {
    static std::uint64_t next = 0;
    for (int i = 0; i < misses; ++i) {
        const std::uint64_t offset = (next++ << 23) + 5 * page;
        const read_around::range c = r.miss(offset);
        EXPECT_LE(c.start, offset);
        EXPECT_LT(offset, c.start + c.bytes);
        EXPECT_EQ(c.start % c.bytes, 0u);
        for (std::uint64_t h = 0; h < hits_per_miss; ++h)
            r.hit(inside ? c.start + (h % (c.bytes / page)) * page : (std::uint64_t{1} << 50) + h * page);
    }
    return r.bytes();
}

TEST(ReadAround, GrowsWhileItsPagesAreUsedUpToTheDevicesReadAhead) {
    read_around r(8 << 20);
    EXPECT_EQ(r.bytes(), read_around::start_bytes);
    // A cold walk: a sixteenth of each cluster's pages are used.
    for (int round = 0; round < 20; ++round) run(r, read_around::window, r.bytes() / page / 16);
    EXPECT_EQ(r.bytes(), std::uint64_t{8} << 20);
}

TEST(ReadAround, GoesBackDownWhenNothingItReadsIsUsed) {
    read_around r(8 << 20);
    for (int round = 0; round < 20; ++round) run(r, read_around::window, r.bytes() / page / 16);
    ASSERT_GT(r.bytes(), read_around::start_bytes);
    run(r, 20 * read_around::window, 0);  // random page reads past memory
    EXPECT_EQ(r.bytes(), read_around::min_bytes);
}

TEST(ReadAround, HitsOutsideItsClustersDoNotCount) {
    read_around r(8 << 20);
    // Plenty of hits, but on pages some other read-ahead brought in.
    for (int round = 0; round < 20; ++round) run(r, read_around::window, 1000, false);
    EXPECT_EQ(r.bytes(), read_around::start_bytes);
}

TEST(ReadAround, SettlesWhereItsUseIsBetweenItsThresholds) {
    read_around r(8 << 20);
    // 4 hits per window of 4 misses: 4 of 128 pages asked for at 128 KiB
    // (the growth mark, 1/32, is met), 4 of 256 at 256 KiB (neither mark).
    for (int round = 0; round < 20; ++round) run(r, read_around::window, 1);
    EXPECT_EQ(r.bytes(), std::uint64_t{256} << 10);
}

TEST(ReadAround, TheLimitIsTheDevicesReadAheadClamped) {
    EXPECT_EQ(read_around(0).limit(), read_around::start_bytes) << "unknown device: the cluster stays as it was";
    EXPECT_EQ(read_around(4096).limit(), read_around::start_bytes);
    EXPECT_EQ(read_around(std::uint64_t{1} << 30).limit(), read_around::max_bytes);
    // A limit that is no power of two (a cache file of 1,008 slots: an
    // eighth is 516,096 bytes) would break the clusters' alignment.
    EXPECT_EQ(read_around(516096).limit(), std::uint64_t{256} << 10);
    read_around small(128 << 10);
    run(small, 50 * read_around::window, 1000);
    EXPECT_EQ(small.bytes(), std::uint64_t{128} << 10) << "never past the limit";
}

}  // namespace
