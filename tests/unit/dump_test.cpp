// `steppe dump` (engine::dump, types/json_dump.hpp): every object the roots
// reach, one JSON object per line, fields by name and decoded by type, for
// both engines; the output parsed back as JSON where python3 is at hand.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

namespace so = steppe::objects;

// Named (not anonymous) so the dump's type names are plain.
namespace dumped {

enum class Color : std::uint8_t { red = 1, blue = 2 };
struct Inner {
    float f;
    std::int16_t s;
};
struct Part {
    int id;
    double x;
    bool on;
    char name[8];
    Part* next;
    std::uint16_t small[3];
    Color c;
    Inner in;
};
struct Item {
    std::int64_t value;
    so::ref<Item> next;
    so::ref<so::array<std::int32_t>> nums;
};

}  // namespace dumped

namespace {

using namespace dumped;

// Every line of `out` is valid JSON (python3's parser), or the check is skipped.
void expect_json_lines(const std::string& out, const steppe::test::temp_dir& dir) {
    if (std::system("python3 -c 'import json' >/dev/null 2>&1") != 0) {
        std::printf("(python3 is not installed: the lines are not parsed)\n");
        return;
    }
    std::string file = dir.path("dump.jsonl");
    std::ofstream(file) << out;
    std::string cmd = "python3 -c 'import json,sys\nfor l in open(sys.argv[1]): json.loads(l)' " + file;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << out;
}

TEST(Dump, APageEngineStoreFieldByField) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("parts.db");
    {
        auto s = steppe::store::open(path);
        Part* b = s.make<Part>(Part{2, -1.5, false, "bee", nullptr, {7, 8, 9}, Color::blue, {0.25f, -3}});
        Part* a = s.make<Part>(Part{1, 3.25, true, "ant", b, {1, 2, 3}, Color::red, {1.5f, 4}});
        s.set_root("first", a);
        s.commit();
        a->id = 99;  // not committed: not dumped
    }
    steppe::test::cli_result r = steppe::test::run_cli("dump " + path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_CONTAINS(r.out, "{\"root\":\"first\",\"type\":\"dumped::Part\",\"id\":\"p:");
    EXPECT_CONTAINS(r.out, "\"value\":{\"id\":1,\"x\":3.25,\"on\":true,\"name\":\"ant\",\"next\":\"p:");
    EXPECT_CONTAINS(r.out, "\"small\":[1,2,3],\"c\":1,\"in\":{\"f\":1.5,\"s\":4}}");
    EXPECT_CONTAINS(r.out, "{\"id\":2,\"x\":-1.5,\"on\":false,\"name\":\"bee\",\"next\":null,\"small\":[7,8,9],\"c\":2,"
                           "\"in\":{\"f\":0.25,\"s\":-3}}");
    EXPECT_EQ(r.out.find("99"), std::string::npos);
    expect_json_lines(r.out, dir);
}

TEST(Dump, AnObjectEngineStoreByReference) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("items.ods");
    {
        auto s = so::store::open(path);
        auto head = s.root<Item>("head");
        head.mut()->value = 5;
        auto nums = s.make_array<std::int32_t>(3);
        (*nums.mut())[1] = -42;
        head.mut()->next = s.make<Item>(Item{6, {}, nums});
        s.make<Item>(Item{7, {}, {}});  // reached by nothing: not stored, not dumped
        s.commit();
    }
    steppe::test::cli_result r = steppe::test::run_cli("dump " + path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_CONTAINS(r.out, "{\"root\":\"head\",\"type\":\"dumped::Item\",\"id\":\"o:");
    EXPECT_CONTAINS(r.out, "\"value\":{\"value\":5,\"next\":\"o:");
    EXPECT_CONTAINS(r.out, "\"value\":{\"value\":6,\"next\":null,\"nums\":\"o:");
    EXPECT_CONTAINS(r.out, "\"type\":\"int\",\"count\":3,\"value\":[0,-42,0]}");
    EXPECT_EQ(r.out.find("\"value\":7"), std::string::npos);
    expect_json_lines(r.out, dir);
}

}  // namespace
