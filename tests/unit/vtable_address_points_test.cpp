// The vtable table relinks a token only to the same address point of the
// class's vtable group (types/vtables.hpp): an offset that is no address
// point here is refused at relink, and one recorded with another
// offset-to-top at open; the two-program cases are in
// tests/vtable/grown_class_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/bytes.hpp"
#include "support/expect_error.hpp"
#include "types/vtables.hpp"

namespace points_test {

struct L {
    virtual ~L();
    long x = 1;
};
struct R {
    virtual ~R();
    virtual long r() const { return 2; }
    long y = 2;
};
struct D : L, R {
    ~D() override;
};
L::~L() = default;
R::~R() = default;
D::~D() = default;

}  // namespace points_test

namespace steppe::types {
namespace {

std::uint64_t token(std::uint32_t index, std::uint32_t offset) { return (std::uint64_t{index} << 32) | offset; }

std::uintptr_t vptr_of(const void* object) { return *static_cast<const std::uintptr_t*>(object); }

// A table of D's vtable group, and the offsets of D's two address points in it.
class AddressPoints : public ::testing::Test {
protected:
    AddressPoints() {
        symbol_ = vtable_symbol_of(reinterpret_cast<const void*>(vptr_of(&d_)));
        table_.index_of(symbol_);
        primary_ = static_cast<std::uint32_t>(vptr_of(&d_) - table_.address(0));
        secondary_ = static_cast<std::uint32_t>(vptr_of(static_cast<points_test::R*>(&d_)) - table_.address(0));
    }
    // The table as a program that recorded `offset` with `offset_to_top` wrote it.
    vtable_table written_with(std::uint32_t offset, std::int64_t offset_to_top) {
        vtable_table t;
        t.note_address_point(t.index_of(symbol_), offset, offset_to_top);
        return vtable_table::decode(t.encode());
    }
    points_test::D d_;
    std::string symbol_;
    vtable_table table_;
    std::uint32_t primary_ = 0, secondary_ = 0;
};

TEST_F(AddressPoints, ATokenRelinksOnlyToAnAddressPointOfTheClass) {
    ASSERT_NE(table_.address(0), 0u);
    EXPECT_EQ(table_.relink(token(0, primary_)), vptr_of(&d_));
    EXPECT_EQ(table_.relink(token(0, secondary_)), vptr_of(static_cast<points_test::R*>(&d_)));
    EXPECT_FALSE(table_.moved_address_point(token(0, secondary_)));
    for (std::uint32_t offset : {0u, 8u, primary_ + 8, secondary_ + 8, secondary_ - 8, secondary_ + 1, 1u << 20}) {
        EXPECT_EQ(table_.relink(token(0, offset)), 0u) << offset;
        EXPECT_TRUE(table_.moved_address_point(token(0, offset))) << offset;
    }
}

TEST_F(AddressPoints, RecordedAddressPointsThatStillAreOnesOpen) {
    vtable_table t = written_with(secondary_, -static_cast<std::int64_t>(sizeof(points_test::L)));
    EXPECT_EQ(t.learned(), 2u);
    EXPECT_TRUE(t.knows_address_point(0, secondary_));
    EXPECT_NO_THROW(t.require_same_address_points("test.db"));
}

TEST_F(AddressPoints, ARecordedAddressPointThatMovedIsATypeMismatchAtOpen) {
    EXPECT_ERROR(errc::type_mismatch,
                 "test.db: the store holds objects of class points_test::D with a vtable pointer to " + symbol_ +
                     " + " + std::to_string(secondary_ + 8) + " (an address point with offset-to-top -16), which "
                     "in this program is no address point of the class's vtable group: the class's vtable group "
                     "changed shape",
                 written_with(secondary_ + 8, -16).require_same_address_points("test.db"));
    EXPECT_ERROR(errc::type_mismatch, "which in this program is an address point with offset-to-top -16",
                 written_with(secondary_, -32).require_same_address_points("test.db"));
}

// Version 1: the names alone; its tokens are checked at relink only.
TEST_F(AddressPoints, AVersion1TableIsReadWithoutAddressPoints) {
    common::byte_writer w;
    w.put(std::uint32_t{1});
    w.put(symbol_);
    vtable_table t = vtable_table::decode(w.take());
    EXPECT_EQ(t.learned(), 1u);
    EXPECT_NO_THROW(t.require_same_address_points("test.db"));
    EXPECT_NE(t.relink(token(0, secondary_)), 0u);
    EXPECT_EQ(t.relink(token(0, secondary_ + 8)), 0u);
}

TEST_F(AddressPoints, ABadRecordedAddressPointIsCorrupt) {
    for (std::uint32_t offset : {0u, 8u, 20u}) {
        common::byte_writer w;
        for (std::uint32_t word : {~0u, 2u, 1u}) w.put(word);
        w.put(symbol_);
        w.put(std::uint32_t{1});
        w.put(offset);
        w.put(std::int64_t{0});
        EXPECT_ERROR(errc::corrupt, "a bad address point", vtable_table::decode(w.take()));
    }
    common::byte_writer later;
    for (std::uint32_t word : {~0u, 3u, 0u}) later.put(word);
    EXPECT_ERROR(errc::version, "version 3", vtable_table::decode(later.take()));
}

}  // namespace
}  // namespace steppe::types
