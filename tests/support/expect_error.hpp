// Asserting on steppe::error in tests: the error a call throws, and what its
// message must say.
#pragma once

#include <gtest/gtest.h>
#include <steppe/error.hpp>

#include <functional>
#include <string>

namespace steppe::test {

// The error `f` throws; fails the test if it throws none.
inline steppe::error error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const steppe::error& e) {
        return e;
    }
    ADD_FAILURE() << "no steppe::error was thrown";
    return steppe::error(steppe::errc::unsupported, "(nothing thrown)");
}

}  // namespace steppe::test

// The call throws a steppe::error with code `want` whose message says `part`.
#define EXPECT_ERROR(want, part, ...)                                            \
    do {                                                                         \
        steppe::error e_ = steppe::test::error_of([&] { (void)(__VA_ARGS__); }); \
        EXPECT_EQ(e_.code(), want) << e_.what();                                 \
        EXPECT_CONTAINS(e_.what(), part);                                        \
    } while (0)

#define EXPECT_CONTAINS(text, part) \
    EXPECT_NE(std::string(text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"
