// A fresh directory under $TMPDIR for one test, removed with everything in it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace steppe::test {

class temp_dir {
public:
    temp_dir();
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    const std::filesystem::path& dir() const { return dir_; }

private:
    std::filesystem::path dir_;
};

// What a compaction of the store at `path` left beside it, if it was killed
// (NAME.compact-ID, storage/backup.cpp).
std::vector<std::string> compaction_leftovers(const std::string& path);
// The store's main file, log, reader table and compaction leftovers, removed.
void remove_store_files(const std::string& path);

}  // namespace steppe::test
