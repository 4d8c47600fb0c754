// The stand-ins for vtables this executable lacks (types/missing_class.hpp),
// through the vtable table that makes and finds them; the two-program cases
// are in tests/vtable/missing_reader_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "types/vtables.hpp"

namespace steppe::types {
namespace {

// A table of symbols this executable does not have, with their stand-ins.
vtable_table missing(std::initializer_list<const char*> symbols) {
    vtable_table t;
    for (const char* s : symbols) t.index_of(s);
    t.stand_in_for_missing("test.db", nullptr);
    return t;
}

std::uint64_t token(std::uint32_t index, std::uint32_t offset) { return (std::uint64_t{index} << 32) | offset; }

// What a virtual call through slot `slot` of `vptr` does.
[[noreturn]] void call_slot(std::uintptr_t vptr, int slot) {
    reinterpret_cast<void (* const*)()>(vptr)[slot]();
    std::abort();
}

TEST(MissingClass, TokensGoToTheStandInAndBack) {
    vtable_table t = missing({"_ZTVN4lost13SomethingElseE", "_ZTV7Nowhere"});
    EXPECT_EQ(t.address(0), 0u);
    for (std::uint64_t k : {token(0, 16), token(1, 16), token(1, 72), token(1, missing_classes::size - 8)}) {
        std::uintptr_t v = t.relink(k);
        ASSERT_NE(v, 0u);
        EXPECT_EQ(t.stand_in_token(v), k);
    }
    EXPECT_NE(t.relink(token(0, 16)), t.relink(token(1, 16)));
    EXPECT_EQ(t.stand_in_token(reinterpret_cast<std::uintptr_t>(&t)), std::nullopt);
}

TEST(MissingClass, TokensNoVtableGroupHasRelinkToNothing) {
    vtable_table t = missing({"_ZTV7Nowhere"});
    EXPECT_EQ(t.relink(token(1, 16)), 0u);                        // past the table
    EXPECT_EQ(t.relink(token(0, 8)), 0u);                         // no room for offset-to-top and RTTI
    EXPECT_EQ(t.relink(token(0, 20)), 0u);                        // not a word
    EXPECT_EQ(t.relink(token(0, missing_classes::size)), 0u);       // past the stand-in
}

TEST(MissingClass, TheWordsBeforeAnAddressPointAreOffsetToTopAndTheStandInsRtti) {
    vtable_table t = missing({"_ZTVN4lost13SomethingElseE"});
    const auto* words = reinterpret_cast<const std::intptr_t*>(t.relink(token(0, 40)));
    EXPECT_EQ(words[-2], 0);
    const auto* rtti = reinterpret_cast<const std::type_info*>(words[-1]);
    EXPECT_STREQ(rtti->name(), "steppe: missing class lost::SomethingElse");
    EXPECT_FALSE(*rtti == typeid(int));
    // Another address point of the same group has the same RTTI.
    EXPECT_EQ(reinterpret_cast<const std::intptr_t*>(t.relink(token(0, 16)))[-1], words[-1]);
}

TEST(MissingClass, ACopyOfTheTableSharesItsStandIns) {
    vtable_table t = missing({"_ZTV7Nowhere"});
    vtable_table copy = t;
    EXPECT_EQ(copy.relink(token(0, 16)), t.relink(token(0, 16)));
}

TEST(MissingClassDeathTest, AnySlotEndsTheProcessNamingTheClassAndCause) {
    vtable_table t = missing({"_ZTVN4lost13SomethingElseE", "_ZTV7Nowhere"});
    EXPECT_EXIT(call_slot(t.relink(token(0, 16)), 0), ::testing::ExitedWithCode(71),
                "steppe: fatal: an object of class lost::SomethingElse from store test.db was used through its "
                "vtable .*symbol _ZTVN4lost13SomethingElseE.*no key function.*To fix it, give the class a key "
                "function");
    EXPECT_EXIT(call_slot(t.relink(token(1, 48)), 900), ::testing::ExitedWithCode(71), "class Nowhere from");
}

TEST(MissingClassDeathTest, PastTheLastTrapTheMessageCannotNameTheClass) {
    EXPECT_EXIT(
        {
            std::vector<std::string> symbols(1025, "_ZTV7Nowhere");
            symbols.back() = "_ZTV4Last";
            missing_classes many(symbols, "a.db", nullptr);
            for (std::uint32_t i = 0; i < 1024; ++i) ASSERT_NE(many.address_point(i, 16), 0u);
            call_slot(many.address_point(1024, 16), 3);
        },
        ::testing::ExitedWithCode(71), "a class this executable has no vtable for. More than 1024");
}

TEST(MissingClassDeathTest, AFreedTrapServesTheNextStandIn) {
    auto first = std::make_unique<missing_classes>(std::vector<std::string>{"_ZTV5First"}, "a.db", nullptr);
    ASSERT_NE(first->address_point(0, 16), 0u);
    first.reset();
    missing_classes second({"", "_ZTV6Second"}, "a.db", nullptr);
    EXPECT_EQ(second.address_point(0, 16), 0u);  // found here: no stand-in
    EXPECT_EXIT(call_slot(second.address_point(1, 16), 0), ::testing::ExitedWithCode(71), "class Second from");
}

}  // namespace
}  // namespace steppe::types
