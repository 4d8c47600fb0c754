// A store opened read-only is mapped read-only (issue 14, item 5): reading
// works as before, under eviction too, and a write to any of its objects,
// resident or not, from any thread, ends the process (exit 71) with a
// message naming the store, the object's type and the field, after
// open_options::fatal_hook. Both fault backends.
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "support/store_fixture.hpp"

namespace read_only_test {
struct Part {
    long id;
    Part* next;
    char name[16];
};
class Gauge {
public:
    double level = 0;
    Part* part = nullptr;
    STEPPE_FIELDS(level, part)
};
}  // namespace read_only_test

using read_only_test::Gauge;
using read_only_test::Part;

namespace {

using Names = steppe::map<steppe::string, long>;

constexpr long parts = 2000;  // 16 pages of parts

// The message's words up to the object's type ("...: byte 0 of an object of type T").
std::string refused(const std::string& object) {
    return "steppe: fatal: the program wrote to 0x[0-9a-f]+ \\(page [0-9]+ of store .*s\\.db, which is open "
           "read-only\\): " +
           object + ".*may only be read";
}

class ReadOnlyTest : public steppe::test::store_fixture {
protected:
    void SetUp() override {
        auto s = open();
        Part** list = s.root<Part*>("list");
        for (long i = 0; i < parts; ++i) *list = s.make<Part>(Part{i, *list, "part"});
        *s.root<Part*>("far") = *list;  // its own page: following it first touches the part's page
        auto* names = s.root<Names>("names");
        for (long i = 0; i < 100; ++i) names->emplace("name " + std::to_string(i) + " long enough for the heap", i);
        s.root<Gauge>("gauge")->part = *list;
        s.commit();
    }
    steppe::store open_read_only(const std::function<void(steppe::open_options&)>& adjust = {}) const {
        return open([&](steppe::open_options& o) {
            o.read_only = true;
            if (adjust) adjust(o);
        });
    }
    static long walk(steppe::store& s) {
        long sum = 0;
        for (Part* p = *s.find_root<Part*>("list"); p; p = p->next) sum += p->id + p->name[0];
        return sum;
    }
};

constexpr long walked = parts * (parts - 1) / 2 + parts * 'p';

TEST_P(ReadOnlyTest, ReadingWorksAndIsMappedReadOnly) {
    auto s = open_read_only();
    EXPECT_EQ(walk(s), walked);
    EXPECT_EQ(s.find_root<Names>("names")->find("name 7 long enough for the heap")->second, 7);
    EXPECT_EQ(s.stats().write_tracking, "mprotect") << "pages stay PROT_READ";
    EXPECT_EQ(s.stats().dirty_pages, 0u);
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings.front();
    s.rollback();  // a reader may roll back (address-space reuse): pages come back read-only
    EXPECT_EQ(walk(s), walked);
}

TEST_P(ReadOnlyTest, AWriteToAResidentObjectEndsTheProcessNamingStoreTypeAndField) {
    EXPECT_EXIT(
        {
            auto s = open_read_only();
            Part* p = *s.find_root<Part*>("list");
            const long id = p->id;  // resident now
            p->id = id + 1;
            std::exit(0);
        },
        ::testing::ExitedWithCode(71),
        refused("byte 0 of an object of type read_only_test::Part, in field 1 'id' \\(long\\)"));
}

TEST_P(ReadOnlyTest, AWriteThatFirstTouchesAPageEndsTheProcessToo) {
    EXPECT_EXIT(
        {
            auto s = open_read_only();
            Part* far = *s.find_root<Part*>("far");  // its page not touched yet
            far->name[3] = 'x';
            std::exit(0);
        },
        ::testing::ExitedWithCode(71),
        refused("byte 19 of an object of type read_only_test::Part, in field 3 'name' \\(char ?\\[16\\]\\)"));
}

TEST_P(ReadOnlyTest, AWriteInsideAStoredContainerNamesTheNodeType) {
    EXPECT_EXIT(
        {
            auto s = open_read_only();
            auto* names = s.find_root<Names>("names");
            names->find("name 3 long enough for the heap")->second = 0;
            std::exit(0);
        },
        ::testing::ExitedWithCode(71), refused("byte [0-9]+ of an object of type std::_Rb_tree_node<std::pair<"));
}

TEST_P(ReadOnlyTest, AWriteToADeclaredClassNamesItsField) {
    EXPECT_EXIT(
        {
            auto s = open_read_only();
            s.find_root<Gauge>("gauge")->part = nullptr;
            std::exit(0);
        },
        ::testing::ExitedWithCode(71),
        refused("byte 8 of an object of type read_only_test::Gauge, in field 2 'part' \\(read_only_test::Part\\*\\)"));
}

TEST_P(ReadOnlyTest, AWriteFromAnotherThreadEndsTheProcess) {
    EXPECT_EXIT(
        {
            auto s = open_read_only();
            EXPECT_EQ(walk(s), walked);
            std::thread([&] { (*s.find_root<Part*>("list"))->next->next->id = -1; }).join();
            std::exit(0);
        },
        ::testing::ExitedWithCode(71), refused("byte 0 of an object of type read_only_test::Part"));
}

// A write through memcpy, as a library would do it, is a write all the same.
TEST_P(ReadOnlyTest, AWriteByALibraryCallIsCaughtToo) {
    EXPECT_EXIT(
        {
            auto s = open_read_only();
            Part* p = *s.find_root<Part*>("list");
            std::memcpy(p->name, "renamed", 8);
            std::exit(0);
        },
        ::testing::ExitedWithCode(71), refused("byte 16 of an object of type read_only_test::Part"));
}

void announce(const char* message) {
    const char prefix[] = "hook saw: ";
    (void)!::write(2, prefix, sizeof prefix - 1);
    (void)!::write(2, message, std::strlen(message));
}

TEST_P(ReadOnlyTest, TheFatalHookRunsFirst) {
    EXPECT_EXIT(
        {
            auto s = open_read_only([](steppe::open_options& o) { o.fatal_hook = announce; });
            (*s.find_root<Part*>("list"))->id = 0;
            std::exit(0);
        },
        ::testing::ExitedWithCode(71), "hook saw: steppe: fatal: the program wrote to");
}

// The resident budget drops pages and faults them in again: still read-only.
TEST_P(ReadOnlyTest, PagesEvictedAndLoadedAgainStayReadOnly) {
    constexpr long many = 60'000;  // about 470 pages, over a budget of 256
    {
        auto s = open();
        Part** list = s.root<Part*>("big");
        for (long i = 0; i < many; ++i) *list = s.make<Part>(Part{i, *list, "big"});
        s.commit();
    }
    const auto budget = [](steppe::open_options& o) { o.resident_budget = 1 << 20; };
    const auto walk_big = [](steppe::store& s) {
        long n = 0;
        for (Part* p = *s.find_root<Part*>("big"); p; p = p->next) n += p->id == many - 1 - n;
        return n;
    };
    {
        auto s = open_read_only(budget);
        EXPECT_EQ(walk_big(s), many);
        EXPECT_EQ(walk_big(s), many);
        EXPECT_GT(s.stats().evictions, 0u);
    }
    EXPECT_EXIT(
        {
            auto s = open_read_only(budget);
            walk_big(s);
            walk_big(s);
            (*s.find_root<Part*>("big"))->id = 0;  // evicted by the second walk, loaded again here
            std::exit(0);
        },
        ::testing::ExitedWithCode(71), refused("byte 0 of an object of type read_only_test::Part"));
}

STEPPE_BOTH_BACKENDS(ReadOnlyTest);

}  // namespace
