#include "support/temp_dir.hpp"

#include <stdlib.h>

#include <stdexcept>

namespace steppe::test {

temp_dir::temp_dir() {
    auto base = std::filesystem::temp_directory_path() / "steppe-test-XXXXXX";
    std::string templ = base.string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    dir_ = templ;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> compaction_leftovers(const std::string& path) {
    const std::filesystem::path p(path);
    const std::string prefix = p.filename().string() + ".compact";
    std::vector<std::string> found;
    for (const auto& f : std::filesystem::directory_iterator(p.parent_path()))
        if (f.path().filename().string().rfind(prefix, 0) == 0) found.push_back(f.path().string());
    return found;
}

void remove_store_files(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    for (const std::string& f : compaction_leftovers(path)) std::filesystem::remove(f);
}

}  // namespace steppe::test
