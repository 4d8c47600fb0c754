// A reader that lacks classes of the objects in its store (docs/types.md,
// "Classes this program lacks"): gallery_writer stores Circles, Rects, Dots
// and Hexagons; this program has no vtable for Dot (no key function, and it
// constructs none) nor for Hexagon (its static library's object file is left
// out), and, built stripped (STEPPE_TEST_STRIPPED), for none of them. Pages
// of all of them load; only a use through the vtable of an object whose
// class is missing ends the process, naming the class, cause and fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <typeinfo>

#include "gallery.hpp"
#include "support/temp_dir.hpp"

namespace {

constexpr bool stripped = STEPPE_TEST_STRIPPED;
enum : int { circle = 0, rect = 1, dot = 2, hexagon = 3, other_dot = 5, other_hexagon = 6 };

// The cause the message gives for a class this program lacks.
std::string cause() { return stripped ? "the executable is stripped" : "no key function.*not linked in"; }

// The start of the message, and what the rest must name.
std::string ended_by(const char* cls, const char* symbol) {
    return std::string("steppe: fatal: an object of class ") + cls + " from store .*gallery.db was used through its "
           "vtable.*no vtable for the class \\(symbol " + symbol + "\\): .*" + cause() + ".*To fix it, ";
}

class MissingClass : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(std::system((std::string(GALLERY_WRITER) + " write " + path_).c_str()), 0);
    }
    steppe::store open(bool read_only = true) {
        // The classes this reader has but never makes: named, so open compares them.
        steppe::types::declare<geo::Circle, geo::Rect>();
        steppe::open_options o;
        o.read_only = read_only;
        return steppe::store::open(path_, o);
    }
    steppe::test::temp_dir dir_;
    std::string path_ = dir_.path("gallery.db");
};

TEST_F(MissingClass, PagesOfMissingClassesLoadAndEveryMemberReads) {
    auto store = open();
    auto* g = store.find_root<geo::Gallery>("gallery");
    ASSERT_NE(g, nullptr);
    int count = 0;
    for (geo::Shape* s = g->shapes[0]; s; s = s->next) ++count;
    EXPECT_EQ(count, geo::Gallery::count);
    for (int i = 0; i < geo::Gallery::count; ++i) EXPECT_STREQ(g->names[i]->label, geo::gallery_labels[i]) << i;
    // A downcast that reads no vtable reaches a missing class's own members.
    EXPECT_EQ(static_cast<geo::Dot*>(g->shapes[dot])->weight, 1);
    EXPECT_EQ(static_cast<geo::Hexagon*>(g->shapes[hexagon])->side, 4.0);
}

TEST_F(MissingClass, ClassesThisProgramHasWorkAmongThem) {
    if (stripped) GTEST_SKIP() << "a stripped program finds none of its classes' vtables";
    auto store = open();
    auto* g = store.find_root<geo::Gallery>("gallery");
    EXPECT_EQ(g->shapes[circle]->area(), 3.0);
    EXPECT_EQ(g->shapes[rect]->area(), 4.0);
    EXPECT_EQ(g->names[rect]->name(), "rect 2");
    EXPECT_EQ(g->names[circle]->name(), "circle");
    EXPECT_TRUE(typeid(*g->shapes[circle]) == typeid(geo::Circle));
    EXPECT_NE(dynamic_cast<geo::Rect*>(g->shapes[7]), nullptr);
    EXPECT_EQ(dynamic_cast<geo::Rect*>(g->shapes[circle]), nullptr);
}

TEST_F(MissingClass, VirtualCallOnAClassWithoutKeyFunctionEndsNamingIt) {
    EXPECT_EXIT(open().find_root<geo::Gallery>("gallery")->shapes[dot]->area(), ::testing::ExitedWithCode(71),
                ended_by("geo::Dot", "_ZTVN3geo3DotE"));
    // Through the secondary vptr, into a function returning a class (whose
    // `this` is not the first argument).
    EXPECT_EXIT(open().find_root<geo::Gallery>("gallery")->names[other_dot]->name(), ::testing::ExitedWithCode(71),
                ended_by("geo::Dot", "_ZTVN3geo3DotE"));
}

TEST_F(MissingClass, VirtualCallOnAClassLeftInItsStaticLibraryEndsNamingIt) {
    EXPECT_EXIT(open().find_root<geo::Gallery>("gallery")->shapes[hexagon]->corners(), ::testing::ExitedWithCode(71),
                ended_by("geo::Hexagon", "_ZTVN3geo7HexagonE"));
    EXPECT_EXIT(open().find_root<geo::Gallery>("gallery")->names[other_hexagon]->~Named(),
                ::testing::ExitedWithCode(71), ended_by("geo::Hexagon", "_ZTVN3geo7HexagonE"));
}

TEST_F(MissingClass, VirtualCallOnAClassOfAStrippedProgramEndsNamingIt) {
    if (!stripped) GTEST_SKIP() << "this build is not stripped";
    EXPECT_EXIT(open().find_root<geo::Gallery>("gallery")->shapes[circle]->area(), ::testing::ExitedWithCode(71),
                ended_by("geo::Circle", "_ZTVN3geo6CircleE") + "do not strip the executable, or link it with -rdynamic");
}

// The casts' results are used: the compiler may drop a dynamic_cast whose
// result is not (the runtime's __dynamic_cast is declared pure).
TEST_F(MissingClass, DynamicCastOfAMissingClassEndsNamingIt) {
    EXPECT_EXIT(std::exit(dynamic_cast<geo::Rect*>(open().find_root<geo::Gallery>("gallery")->shapes[dot]) ? 1 : 2),
                ::testing::ExitedWithCode(71), ended_by("geo::Dot", "_ZTVN3geo3DotE"));
    EXPECT_EXIT(
        std::exit(dynamic_cast<geo::Shape*>(open().find_root<geo::Gallery>("gallery")->names[hexagon]) ? 1 : 2),
        ::testing::ExitedWithCode(71), ended_by("geo::Hexagon", "_ZTVN3geo7HexagonE"));
}

TEST_F(MissingClass, TypeidOfAMissingClassSaysItIsMissing) {
    auto store = open();
    auto* g = store.find_root<geo::Gallery>("gallery");
    EXPECT_STREQ(typeid(*g->shapes[dot]).name(), "steppe: missing class geo::Dot");
    EXPECT_STREQ(typeid(*g->names[other_hexagon]).name(), "steppe: missing class geo::Hexagon");
    EXPECT_TRUE(typeid(*g->shapes[dot]) == typeid(*g->names[other_dot]));
    EXPECT_FALSE(typeid(*g->shapes[dot]) == typeid(*g->shapes[hexagon]));
    EXPECT_FALSE(typeid(*g->shapes[dot]) == typeid(geo::Dot));
    // dynamic_cast<void*> reads offset-to-top, which the stand-in has as 0:
    // a Named inside a Dot stays where it is (docs/types.md).
    EXPECT_EQ(dynamic_cast<void*>(g->names[dot]), static_cast<void*>(g->names[dot]));
    EXPECT_NE(static_cast<void*>(g->names[dot]), static_cast<void*>(g->shapes[dot]));
    if (stripped) {
        EXPECT_STREQ(typeid(*g->shapes[rect]).name(), "steppe: missing class geo::Rect");
    }
}

TEST_F(MissingClass, FatalHookRunsBeforeTheProcessEnds) {
    EXPECT_EXIT(
        {
            steppe::open_options o;
            o.read_only = true;
            o.fatal_hook = [](const char* message) {
                const char seen[] = "hook saw: ";
                (void)!::write(STDERR_FILENO, seen, sizeof seen - 1);
                (void)!::write(STDERR_FILENO, message, std::strlen(message));
            };
            steppe::store::open(path_, o).find_root<geo::Gallery>("gallery")->shapes[dot]->corners();
        },
        ::testing::ExitedWithCode(71), "hook saw: steppe: fatal: an object of class geo::Dot");
}

// The reader writes members of Dots and Hexagons (so their pages are
// committed with their vptrs in stand-ins) and the program that has the
// classes still calls their virtual functions.
TEST_F(MissingClass, CommitByAReaderThatLacksTheClassKeepsItsObjectsUsable) {
    {
        auto store = open(false);
        auto* g = store.find_root<geo::Gallery>("gallery");
        for (int i : {dot, other_dot}) {
            std::strcpy(g->names[i]->label, "dot seen");
            static_cast<geo::Dot*>(g->shapes[i])->weight = 7;
        }
        for (int i : {hexagon, other_hexagon}) std::strcpy(g->names[i]->label, "hexagon seen");
        store.commit();
    }
    EXPECT_EQ(std::system((std::string(GALLERY_WRITER) + " verify " + path_).c_str()), 0);
    auto store = open();
    auto* g = store.find_root<geo::Gallery>("gallery");
    EXPECT_STREQ(g->names[other_dot]->label, "dot seen");
    EXPECT_STREQ(typeid(*g->shapes[other_dot]).name(), "steppe: missing class geo::Dot");
}

}  // namespace
