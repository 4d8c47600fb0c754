// churn_bench: one transaction that makes and destroys objects, under a
// small resident budget and under one it never comes near, and the cost of
// find_root. A spill counted what the one before left unspilled (freed
// pages, pages handed out again) at once, so from the first spill on every
// allocation spilled; 10 times the work took 85 times as long (stop 54).
//
//   same   makes and destroys arrays of 1..32 longs, keeping nothing
//   grow   each slot's array grows 1, 2, 4 .. 32 longs, each buffer replacing
//          the one before (how a vector grows)
//
// Prints, per pattern and budget, the median of --rounds runs (each in a
// fresh process on a new store): seconds, pages spilled, store pages; then
// ns per find_root.
//
// Usage: churn_bench [--slots N] [--rounds R] [--dir D]
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

std::vector<double> churn(const std::string& path, long slots, std::uint64_t budget, bool grow) {
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    steppe::open_options o;
    o.resident_budget = budget;
    const auto start = bench_util::clock_type::now();
    auto s = steppe::store::open(path, o);
    long** kept = *s.root<long**>("kept") = s.make_array<long*>(static_cast<std::size_t>(slots));
    for (long i = 0; i < slots; ++i) {
        long* previous = nullptr;
        for (long length = 1; length <= 32; length *= 2) {
            long* a = s.make_array<long>(static_cast<std::size_t>(length));
            a[0] = i;
            if (!grow) {
                s.destroy(a, static_cast<std::size_t>(length));
                continue;
            }
            if (previous) s.destroy(previous, static_cast<std::size_t>(length / 2));
            previous = a;
        }
        kept[i] = previous;
    }
    s.commit();
    const double seconds = bench_util::seconds_since(start);
    const auto st = s.stats();
    return {seconds, static_cast<double>(st.spilled_pages), static_cast<double>(st.store_pages)};
}

double find_root_ns(const std::string& path) {
    auto s = steppe::store::open(path);
    constexpr int calls = 200'000;
    const auto start = bench_util::clock_type::now();
    long found = 0;
    for (int i = 0; i < calls; ++i) found += s.find_root<long**>("kept") != nullptr;
    return bench_util::seconds_since(start) * 1e9 / calls + (found == calls ? 0 : 1e9);
}

}  // namespace

int main(int argc, char** argv) {
    long slots = 6000;
    int rounds = 3;
    std::string dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--slots")) slots = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    }
    const std::string path = bench_util::scratch_dir(dir) + "/churn.db";
    std::printf("%-5s %-10s %10s %10s %12s\n", "kind", "budget", "seconds", "spilled", "store pages");
    for (const bool grow : {false, true})
        for (const std::uint64_t mib : {std::uint64_t{8}, std::uint64_t{4096}}) {
            std::vector<double> secs, spilled, pages;
            for (int r = 0; r < rounds; ++r) {
                const std::vector<double> v = bench_util::in_child([&] { return churn(path, slots, mib << 20, grow); });
                if (v.size() != 3) return 1;
                secs.push_back(v[0]);
                spilled.push_back(v[1]);
                pages.push_back(v[2]);
            }
            std::printf("%-5s %6llu MiB %10.3f %10.0f %12.0f\n", grow ? "grow" : "same",
                        static_cast<unsigned long long>(mib), bench_util::median(secs), bench_util::median(spilled),
                        bench_util::median(pages));
        }
    std::printf("find_root: %.0f ns a call\n", find_root_ns(path));
    return 0;
}
