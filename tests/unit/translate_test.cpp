// translate module: the page map's invariants P1 and P2 (page_map.hpp),
// checked by page_map::check_invariants() after reservations, touches,
// retirements, arena switches and address-space reuse rounds.
#include "translate/page_map.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using steppe::translate::page_map;
using steppe::translate::page_size;
using steppe::translate::unit;
using findings = std::vector<std::string>;

// Every arena page fills with zeros: the map, not the contents, is under test.
bool fill_zero(void*, std::uintptr_t, std::byte* out) noexcept {
    std::memset(out, 0, page_size);
    return true;
}

constexpr std::uint64_t store_pages = 4096;

class PageMapTest : public ::testing::Test {
protected:
    // The smallest address space: 64 arenas of 16 pages, so a few units fill one.
    std::unique_ptr<steppe::vm::fault_space> space =
        steppe::vm::fault_space::create(steppe::vm::choose_backend(steppe::vm::backend_kind::uffd), &fill_zero, nullptr);
    page_map map{*space, store_pages, page_map::max_arenas * page_map::min_arena_pages * page_size};

    findings check() const { return map.check_invariants(store_pages); }
    void touch(std::uintptr_t v) { (void)*reinterpret_cast<volatile const char*>(v); }
};

TEST_F(PageMapTest, HoldAfterReservingAndTouching) {
    EXPECT_EQ(check(), findings{}) << "empty";
    const std::uintptr_t small = map.reserve({10, 1});
    const std::uintptr_t large = map.reserve({20, 3});
    ASSERT_NE(small, 0u);
    ASSERT_NE(large, 0u);
    EXPECT_EQ(map.reserve({10, 1}), small) << "a page is mapped at most once";
    touch(small);
    touch(large + 2 * page_size);
    EXPECT_EQ(map.touch(large + page_size).page, 21u);
    EXPECT_EQ(check(), findings{});
}

TEST_F(PageMapTest, HoldAfterRetiringAUnit) {
    map.reserve({5, 2});
    map.reserve({7, 1});
    touch(map.virtual_of(6));
    map.retire(5);
    EXPECT_EQ(map.virtual_of(5), 0u);
    EXPECT_EQ(check(), findings{});
    const std::uintptr_t again = map.reserve({5, 1});
    EXPECT_NE(again, 0u) << "a retired page may be reserved again, elsewhere";
    EXPECT_EQ(check(), findings{});
}

TEST_F(PageMapTest, HoldAcrossArenaSwitchesAndReuseRounds) {
    // Units of 3 pages + a guard: four fill an arena of 16, so 40 span ten arenas.
    for (std::uint64_t u = 0; u < 40; ++u) {
        ASSERT_NE(map.reserve({100 + 3 * u, 3}), 0u) << "unit " << u;
        touch(map.virtual_of(100 + 3 * u));
    }
    EXPECT_EQ(check(), findings{}) << "after filling arenas";
    for (int round = 0; round < 3; ++round) {
        // Only the last few units are used this epoch: the rest is reclaimed.
        for (std::uint64_t u = 36; u < 40; ++u) map.use(100 + 3 * u);
        map.start_epoch();
        EXPECT_EQ(check(), findings{}) << "after reuse round " << round;
        for (std::uint64_t u = 0; u < 8; ++u) {
            ASSERT_NE(map.reserve({1000 + 3 * u, 3}), 0u);
            touch(map.virtual_of(1000 + 3 * u));
        }
        EXPECT_EQ(check(), findings{}) << "after reserving into reclaimed arenas, round " << round;
    }
}

}  // namespace
