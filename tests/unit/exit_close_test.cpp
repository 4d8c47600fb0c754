// A store held in a global object is closed by exit() after main returns,
// after the library's own static objects made later are destroyed (a
// tester's finding: glibc aborted "corrupted size vs. prev_size" in
// ~pager, the list of open stores having been destroyed first). The
// program (exit_close_program.cpp) commits a value, writes another without
// committing and returns: it exits 0, and the store holds the committed
// value, for both engines and both fault backends.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <string>

#include "support/migration.hpp"
#include "support/temp_dir.hpp"

namespace {

struct counter {
    long value;
};

class ExitCloseTest : public ::testing::TestWithParam<std::string> {
protected:
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");

    int run(long value) const {
        return steppe::test::run_program(std::string(EXIT_CLOSE_PROGRAM_PATH) + " " + GetParam() + " '" + path + "' " +
                                         std::to_string(value));
    }
    long committed_value() const {
        if (GetParam() == "objects") {
            auto s = steppe::objects::store::open(path);
            return s.root<counter>("value")->value;
        }
        auto s = steppe::store::open(path);
        return *s.root<long>("value");
    }
};

TEST_P(ExitCloseTest, GlobalStoreClosesCleanlyAtExitKeepingOnlyItsCommits) {
    ASSERT_EQ(run(1), 0) << "the store made by the program";
    EXPECT_EQ(committed_value(), 1);
    ASSERT_EQ(run(2), 0) << "the store reopened by the program";
    EXPECT_EQ(committed_value(), 2);
}

INSTANTIATE_TEST_SUITE_P(Engines, ExitCloseTest, ::testing::Values("uffd", "mprotect", "objects"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
