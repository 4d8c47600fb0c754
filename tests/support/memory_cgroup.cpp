#include "support/memory_cgroup.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace steppe::test {

std::string in_child(const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    pid_t child = ::fork();
    if (child < 0) return "fork failed";
    if (child == 0) {
        ::close(fds[0]);
        std::string report;
        try {
            report = body();
        } catch (const std::exception& e) {
            report = std::string("0|0|") + e.what();
        }
        if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(2);
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string report;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    return report.empty() ? "the child reported nothing" : report;
}

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
