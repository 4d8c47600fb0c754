#include "support/memory_cgroup.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace steppe::test {

std::string make_memory_group(std::uint64_t limit, const std::string& name) {
    std::ifstream self("/proc/self/cgroup");
    std::string line, group;
    while (std::getline(self, line))
        if (line.find(":memory:") != std::string::npos) group = line.substr(line.find(":memory:") + 8);
    fs::path dir = fs::path("/sys/fs/cgroup/memory") / fs::path(group).relative_path() /
                   ("steppe-" + name + "-" + std::to_string(::getpid()));
    std::error_code ec;
    if (group.empty() || !fs::create_directory(dir, ec)) return "";
    std::ofstream(dir / "memory.limit_in_bytes") << limit;
    return dir.string();
}

void join_memory_group(const std::string& dir) { std::ofstream(fs::path(dir) / "cgroup.procs") << ::getpid(); }

void remove_memory_group(const std::string& dir) {
    std::error_code ec;
    fs::remove(dir, ec);
}

}  // namespace steppe::test
