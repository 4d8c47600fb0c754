// Small pieces every steppe benchmark uses: timing, medians, a fresh process
// to measure cold behaviour in, and a scratch directory on a real disk.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace bench_util {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Runs f in a forked process (nothing of a store is mapped there yet) and
// returns the numbers it produced (at most 16), or none if it died.
inline std::vector<double> in_child(const std::function<std::vector<double>()>& f) {
    int fds[2];
    if (::pipe(fds) != 0) std::exit(2);
    pid_t child = ::fork();
    if (child == 0) {
        auto v = f();
        (void)!::write(fds[1], v.data(), std::min<std::size_t>(v.size(), 16) * sizeof(double));
        ::_exit(0);
    }
    ::close(fds[1]);
    std::vector<double> v(16);
    ssize_t n = ::read(fds[0], v.data(), v.size() * sizeof(double));
    ::close(fds[0]);
    ::waitpid(child, nullptr, 0);
    v.resize(n > 0 ? static_cast<std::size_t>(n) / sizeof(double) : 0);
    return v;
}

// `dir` if given, else a new directory under /var/tmp (a disk, not tmpfs).
// Bytes this process has caused to be read from storage (/proc/self/io).
inline std::uint64_t read_bytes() {
    std::ifstream io("/proc/self/io");
    std::string key;
    std::uint64_t value = 0;
    while (io >> key >> value)
        if (key == "read_bytes:") return value;
    return 0;
}

// The process's peak resident memory (VmHWM), in bytes, since it started
// or since the last reset_peak_rss().
inline std::uint64_t peak_rss() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
        std::uint64_t kib = 0;
        if (key == "VmHWM:" && status >> kib) return kib << 10;
        status.ignore(1 << 10, '\n');
    }
    return 0;
}
// The peak is counted from here (clear_refs 5 resets VmHWM to the current RSS).
inline void reset_peak_rss() {
    int fd = ::open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
        (void)!::write(fd, "5", 1);
        ::close(fd);
    }
}

inline std::string scratch_dir(const std::string& dir) {
    if (!dir.empty()) return dir;
    char templ[] = "/var/tmp/steppe-bench-XXXXXX";
    if (!::mkdtemp(templ)) std::exit(2);
    return templ;
}

// Drops the OS page cache (needs root); false if not permitted.
inline bool drop_caches() {
    ::sync();
    std::ofstream f("/proc/sys/vm/drop_caches");
    return static_cast<bool>(f << "3\n");
}

// The file `from` read and written to `to` with 1 MiB buffers, then fsync
// (what `cp` and a sync do); seconds taken.
inline double plain_copy(const std::string& from, const std::string& to) {
    auto t = clock_type::now();
    int in = ::open(from.c_str(), O_RDONLY);
    int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0) std::exit(2);
    std::vector<char> buffer(1 << 20);
    for (ssize_t n; (n = ::read(in, buffer.data(), buffer.size())) > 0;)
        if (::write(out, buffer.data(), static_cast<std::size_t>(n)) != n) std::exit(2);
    if (::fsync(out) != 0) std::exit(2);
    ::close(in);
    ::close(out);
    return seconds_since(t);
}

}  // namespace bench_util
