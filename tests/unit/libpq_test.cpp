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

TEST(LibpqDeathTest, ALibraryWithoutLibpqsFunctionsIsUnsupportedNamingTheFirstMissing) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // A real library, but not libpq: libm has none of its functions.
    EXPECT_EXIT(open_in_postgresql_without_libpq("libm.so.6"), testing::ExitedWithCode(0),
                "unsupported: a store in PostgreSQL needs the function PQbackendPID of the PostgreSQL client "
                "library, which libm.so.6 lacks");
}

}  // namespace
