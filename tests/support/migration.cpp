#include "support/migration.hpp"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/expect_error.hpp"

namespace steppe::test {

int run_program(const std::string& command) {
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::size_t store_files_hash(const std::string& path) {
    std::string all;
    for (const char* suffix : {"", "-wal"}) {
        std::ifstream in(path + suffix, std::ios::binary);
        all += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) + "|";
    }
    return std::hash<std::string>{}(all);
}

void migration_test::SetUp() {
    ASSERT_EQ(run_v1("write " + path), 0);
    ASSERT_EQ(run_v1("verify " + path), 0);
}

void migration_test::expect_refused(const migration& m, errc code, std::initializer_list<std::string> parts) {
    const std::size_t before = store_files_hash(path);
    error e = error_of([&] { steppe::migrate(path, m); });
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& part : parts) EXPECT_CONTAINS(e.what(), part);
    expect_untouched(before);
}

void migration_test::expect_untouched(std::size_t before) {
    EXPECT_EQ(store_files_hash(path), before);
    EXPECT_EQ(compaction_leftovers(path), std::vector<std::string>{});
    EXPECT_EQ(run_v1("verify " + path), 0);
}

bool migration_test::expect_old_or_new(const std::string& what, const std::function<void()>& open_new) {
    try {
        open_new();
        return true;
    } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::type_mismatch) << what << ": " << e.what();
    }
    EXPECT_EQ(run_v1("verify " + path), 0) << what << ": neither the new store nor the old";
    return false;
}

void migration_test::keep_original() { std::filesystem::copy_file(path, dir.path("original")); }

void migration_test::restore() {
    remove_store_files(path);
    std::filesystem::copy_file(dir.path("original"), path);
}

}  // namespace steppe::test
