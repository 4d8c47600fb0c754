// A class whose vtable group changed shape between the program that wrote a
// store and the one that reads it (grown.hpp; docs/types.md, "Virtual
// functions and virtual bases"): where a secondary address point moved, the
// store is refused at open, whichever program wrote it, rather than a vptr
// landing on other slots; where only slots after the primary address point
// moved, the objects read and their virtual functions are this program's.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "grown.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

namespace {

class GrownClass : public ::testing::Test {
protected:
    // Runs the grown program on `store`; its exit code, with its output in `out`.
    int grown(const std::string& how, const std::string& which, const std::string& store, std::string& out) {
        const std::string output = dir_.path("output");
        int status = std::system(
            (std::string(GROWN_PROGRAM) + " " + how + " " + which + " " + store + " > " + output).c_str());
        std::ostringstream text;
        text << std::ifstream(output).rdbuf();
        out = text.str();
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    steppe::test::temp_dir dir_;
    std::string path_ = dir_.path("grown.db");
    std::string grown_path_ = dir_.path("written_by_grown.db");
};

const char* const changed_shape = "the class's vtable group changed shape (virtual functions added or removed";

TEST_F(GrownClass, ASecondaryAddressPointMovedIsRefusedWhenTheGrownProgramReads) {
    grown::write("mi", path_);
    std::string out;
    EXPECT_EQ(grown("read", "mi", path_, out), 3) << out;
    EXPECT_NE(out.find("refused (8): " + path_ + ": the store holds objects of class grown::D with a vtable pointer "
                                                 "to _ZTVN5grown1DE + "),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(changed_shape), std::string::npos) << out;
}

TEST_F(GrownClass, ASecondaryAddressPointMovedIsRefusedWhenTheGrownProgramWrote) {
    std::string out;
    ASSERT_EQ(grown("write", "mi", grown_path_, out), 0) << out;
    EXPECT_ERROR(steppe::errc::type_mismatch, "objects of class grown::D with a vtable pointer to _ZTVN5grown1DE",
                 grown::read("mi", grown_path_));
    EXPECT_ERROR(steppe::errc::type_mismatch, changed_shape, grown::read("mi", grown_path_));
}

TEST_F(GrownClass, ADiamondWhoseDerivedClassGrewIsRefusedBothWays) {
    grown::write("diamond", path_);
    std::string out;
    EXPECT_EQ(grown("read", "diamond", path_, out), 3) << out;
    EXPECT_NE(out.find(changed_shape), std::string::npos) << out;
    ASSERT_EQ(grown("write", "diamond", grown_path_, out), 0) << out;
    EXPECT_ERROR(steppe::errc::type_mismatch, "objects of class grown::Part", grown::read("diamond", grown_path_));
}

TEST_F(GrownClass, AVirtualFunctionAddedInTheMiddleOfASingleInheritanceClassReadsBothWays) {
    grown::write("single", path_);
    std::string out;
    EXPECT_EQ(grown("read", "single", path_, out), 0) << out;
    EXPECT_EQ(out, "f=10 h=30\n");
    ASSERT_EQ(grown("write", "single", grown_path_, out), 0) << out;
    EXPECT_EQ(grown::read("single", grown_path_), "f=10 h=30");
}

TEST_F(GrownClass, EachProgramReadsTheStoreItWrote) {
    grown::write("mi", path_);
    EXPECT_EQ(grown::read("mi", path_), "r1=201 r2=202 l=100");
    std::string out;
    ASSERT_EQ(grown("write", "mi", grown_path_, out), 0) << out;
    EXPECT_EQ(grown("read", "mi", grown_path_, out), 0) << out;
    EXPECT_EQ(out, "r1=201 r2=202 l=100\n");
}

}  // namespace
