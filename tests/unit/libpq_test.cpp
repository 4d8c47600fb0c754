// The PostgreSQL client library is loaded when a store in PostgreSQL is
// first opened, not linked (src/storage/libpq.hpp): a program whose stores
// are files never maps it, and one that opens a store in PostgreSQL where
// libpq cannot be loaded gets `unsupported` naming the file and what to
// install. This executable does not link libpq, as a user's program need not.
#include <gtest/gtest.h>
#include <steppe/error.hpp>
#include <steppe/steppe.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "storage/libpq.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace {

bool maps_libpq() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line))
        if (line.find("/libpq.so") != std::string::npos) return true;
    return false;
}

struct Node {
    long value;
    Node* next;
};

TEST(Libpq, AProgramWhoseStoresAreFilesNeverLoadsIt) {
    steppe::test::temp_dir dir;
    const std::string path = dir.path("s.db");
    {
        auto s = steppe::store::open(path);
        Node** head = s.root<Node*>("list");
        for (long i = 0; i < 1000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    steppe::open_options read_only;
    read_only.read_only = true;
    auto s = steppe::store::open(path, read_only);
    long sum = 0;
    for (Node* n = *s.root<Node*>("list"); n; n = n->next) sum += n->value;
    EXPECT_EQ(sum, 999 * 1000 / 2);
    EXPECT_TRUE(s.check().empty());
    EXPECT_FALSE(steppe::storage::libpq_loaded());
    EXPECT_FALSE(maps_libpq()) << "libpq is mapped into a process that never opened a store in PostgreSQL";
}

// The tool links no libpq either: `steppe info` of a file starts without it.
TEST(Libpq, TheCliDoesNotLinkIt) {
    FILE* pipe = ::popen(("ldd " + steppe::test::cli_path() + " 2>&1").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    ASSERT_EQ(::pclose(pipe), 0) << out;
    EXPECT_NE(out.find("libc.so"), std::string::npos) << out;  // ldd read it
    EXPECT_EQ(out.find("libpq"), std::string::npos) << out;
}

// In a child (the library is loaded once per process): no server is needed,
// as the library is looked for before any connection.
void open_in_postgresql_without_libpq(const char* library) {
    ::setenv("STEPPE_LIBPQ", library, 1);
    try {
        steppe::store::open("postgresql://localhost/steppe?store=s");
        std::fprintf(stderr, "opened\n");
        std::_Exit(1);
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "%s: %s\n", steppe::to_string(e.code()), e.what());
        std::_Exit(e.code() == steppe::errc::unsupported && !steppe::storage::libpq_loaded() && !maps_libpq() ? 0 : 2);
    }
}

TEST(LibpqDeathTest, AStoreInPostgreSQLWithoutTheLibraryIsUnsupportedNamingIt) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(open_in_postgresql_without_libpq("/nonexistent/libpq.so.5"), testing::ExitedWithCode(0),
                "unsupported: a store in PostgreSQL needs the PostgreSQL client library, and "
                "/nonexistent/libpq.so.5 could not be loaded: .*No such file.*STEPPE_LIBPQ names it");
}

TEST(LibpqDeathTest, ALibraryThatIsNotLibpqIsUnsupportedSayingSo) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // A real library, but not libpq: libm has none of its functions. (A libpq
    // older than 14 is refused the same way, naming its version: not tested,
    // as no such library is installed here.)
    EXPECT_EXIT(open_in_postgresql_without_libpq("libm.so.6"), testing::ExitedWithCode(0),
                "unsupported: a store in PostgreSQL needs the PostgreSQL client library, and libm.so.6 is not it "
                "\\(it has no PQlibVersion\\).*STEPPE_LIBPQ names it");
}

// A failed load is not remembered: once the library can be found, the next
// open loads it (here, STEPPE_LIBPQ unset: the system's libpq.so.5, which
// the tests' setup installs).
void load_after_a_failed_load() {
    ::setenv("STEPPE_LIBPQ", "/nonexistent/libpq.so.5", 1);
    try {
        steppe::storage::libpq();
        std::_Exit(1);
    } catch (const steppe::error& e) {
        if (e.code() != steppe::errc::unsupported) std::_Exit(2);
    }
    ::unsetenv("STEPPE_LIBPQ");
    try {
        const steppe::storage::libpq_functions& f = steppe::storage::libpq();
        std::fprintf(stderr, "loaded libpq %d\n", f.PQlibVersion());
        std::_Exit(steppe::storage::libpq_loaded() && maps_libpq() ? 0 : 3);
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        std::_Exit(4);
    }
}

TEST(LibpqDeathTest, AFailedLoadIsTriedAgainByTheNextOpen) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(load_after_a_failed_load(), testing::ExitedWithCode(0), "loaded libpq [1-9][0-9]*");
}

}  // namespace
