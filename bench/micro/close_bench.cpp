// close_bench: what a clean close costs when the log holds a big commit.
//
//   commit       the durable commit of an array of N MiB (the log holds it:
//                N stays under checkpoint_bytes, 64 MiB, past which the
//                commit would checkpoint by itself)
//   close        store::close() with checkpoint_on_close: every page of the
//                log copied into the main file, two fdatasyncs of it, the
//                log reset and synced
//   close, off   store::close() with checkpoint_on_close = false (the
//                commit stays in the log; the next writable open pays)
//
// Each run is a fresh store in a fresh process; durable throughout.
// Usage: close_bench [--mib N[,N...]] [--runs R] [--dir D]
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"

using bench_util::clock_type;
using bench_util::median;
using bench_util::seconds_since;

namespace {

// Seconds for the commit and for the close of a store whose log holds `mib` MiB.
std::vector<double> commit_and_close(const std::string& path, std::uint64_t mib, bool checkpoint_on_close) {
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    steppe::open_options o;
    o.checkpoint_on_close = checkpoint_on_close;
    auto s = steppe::store::open(path, o);
    std::uint64_t words = (mib << 20) / sizeof(std::uint64_t);
    auto* a = s.make_array<std::uint64_t>(words);
    for (std::uint64_t i = 0; i < words; ++i) a[i] = i * 0x9E3779B97F4A7C15ull;
    s.set_root("array", a);
    auto t = clock_type::now();
    s.commit();
    double commit = seconds_since(t);
    t = clock_type::now();
    s.close();
    return {commit, seconds_since(t)};
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::uint64_t> sizes = {1, 16, 60};
    int runs = 5;
    std::string dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--mib")) {
            sizes.clear();
            std::stringstream list(argv[i + 1]);
            for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::stoull(item));
        } else if (!std::strcmp(argv[i], "--runs")) {
            runs = std::atoi(argv[i + 1]);
        } else if (!std::strcmp(argv[i], "--dir")) {
            dir = argv[i + 1];
        } else {
            std::fprintf(stderr, "usage: close_bench [--mib N[,N...]] [--runs R] [--dir D]\n");
            return 2;
        }
    }
    const std::string root = bench_util::scratch_dir(dir), path = root + "/close.db";
    std::printf("%8s %12s %12s %12s %14s\n", "MiB", "commit ms", "close ms", "close/commit", "close, off ms");
    for (std::uint64_t mib : sizes) {
        std::vector<double> commit, close, off;
        for (int r = 0; r < runs; ++r) {  // alternated, so disk noise hits both alike
            auto on = bench_util::in_child([&] { return commit_and_close(path, mib, true); });
            auto without = bench_util::in_child([&] { return commit_and_close(path, mib, false); });
            if (on.size() != 2 || without.size() != 2) {
                std::fprintf(stderr, "close_bench: a run failed\n");
                return 1;
            }
            commit.push_back(on[0]);
            close.push_back(on[1]);
            off.push_back(without[1]);
        }
        std::printf("%8llu %12.1f %12.1f %12.2f %14.2f\n", static_cast<unsigned long long>(mib), median(commit) * 1e3,
                    median(close) * 1e3, median(close) / median(commit), median(off) * 1e3);
    }
    if (dir.empty()) std::filesystem::remove_all(root);  // made for this run
    else
        for (const char* suffix : {"", "-wal", "-lock"}) std::filesystem::remove(path + suffix);
    return 0;
}
