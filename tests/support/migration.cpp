#include "support/migration.hpp"

#include <gtest/gtest.h>
#include <steppe/error.hpp>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

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

bool expect_old_or_new(const std::string& what, const std::function<void()>& open_new,
                       const std::string& verify_old) {
    try {
        open_new();
        return true;
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::type_mismatch) << what << ": " << e.what();
    }
    EXPECT_EQ(run_program(verify_old), 0) << what << ": neither the new store nor the old";
    return false;
}

}  // namespace steppe::test
