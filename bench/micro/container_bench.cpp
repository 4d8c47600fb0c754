// container_bench: the real std::map and std::unordered_map in a store (over
// steppe::allocator) against the same containers with std::allocator.
//
//   hot lookups   1,000,000 random finds over 1,000,000 entries, resident,
//                 store and heap alternated; ratio of medians (goal <= 1.02)
//   cold load     the first pass over every entry in a fresh process: time per
//                 page faulted and per pointer swizzled
//
// Usage: container_bench [--entries N] [--runs R] [--dir D] [--prefetch 0|1]
#include <steppe/steppe.hpp>

#include "bench_util.hpp"
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using bench_util::clock_type;
using bench_util::median;
using bench_util::seconds_since;
long g_entries = 1000000;
int g_runs = 7;
std::string g_dir;
bool g_prefetch = true;


std::vector<long> random_keys(long n, std::uint64_t seed) {
    std::vector<long> keys(static_cast<std::size_t>(n));
    for (auto& k : keys) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        k = static_cast<long>((seed >> 33) % static_cast<std::uint64_t>(g_entries)) * 7;
    }
    return keys;
}

template <class Map>
void fill(Map& m) {
    for (long i = 0; i < g_entries; ++i) m.emplace(i * 7, i);
}

template <class Map>
long probe(const Map& m, const std::vector<long>& keys) {
    long sum = 0;
    for (long k : keys) sum += m.find(k)->second;
    return sum;
}

template <class StoreMap, class HeapMap>
void hot(const char* name, StoreMap& in_store, const HeapMap& in_heap) {
    auto keys = random_keys(1000000, 99);
    if (probe(in_store, keys) != probe(in_heap, keys)) std::printf("MISMATCH in %s\n", name);
    std::vector<double> ts, th;
    for (int r = 0; r < g_runs; ++r) {
        auto t = clock_type::now();
        volatile long a = probe(in_store, keys);
        ts.push_back(seconds_since(t));
        t = clock_type::now();
        volatile long b = probe(in_heap, keys);
        th.push_back(seconds_since(t));
        (void)a;
        (void)b;
    }
    std::printf("hot %-14s store %7.1f ms  heap %7.1f ms  ratio %.3f  (goal <= 1.02)\n", name, median(ts) * 1e3,
                median(th) * 1e3, median(ts) / median(th));
}

template <class StoreMap>
void cold(const char* name, const std::string& root) {
    auto in = bench_util::in_child([&root] {
        steppe::open_options o;
        o.read_only = true;
        o.prefetch = g_prefetch;
        auto s = steppe::store::open(g_dir + "/containers.db", o);
        auto* m = s.find_root<StoreMap>(root);
        auto t = clock_type::now();
        long sum = 0;
        for (const auto& [k, v] : *m) sum += v;
        double secs = seconds_since(t);
        auto st = s.stats();
        return std::vector<double>{secs, static_cast<double>(st.faults), static_cast<double>(st.pointers_swizzled),
                                   static_cast<double>(sum)};
    });
    if (in.size() < 4) return;
    std::printf("cold %-13s %7.1f ms for %.0f pages: %.2f us per page, %.1f ns per pointer (%.0f pointers), %.0f "
                "pointers per page\n",
                name, in[0] * 1e3, in[1], in[0] * 1e6 / in[1], in[0] * 1e9 / in[2], in[2], in[2] / in[1]);
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--entries") g_entries = std::atol(value.c_str());
        else if (flag == "--runs") g_runs = std::atoi(value.c_str());
        else if (flag == "--dir") g_dir = value;
        else if (flag == "--prefetch") g_prefetch = value != "0";
    }
    g_dir = bench_util::scratch_dir(g_dir);
    using store_map = steppe::map<long, long>;
    using store_umap = steppe::unordered_map<long, long>;
    try {
        std::printf("container_bench: %ld entries, %d runs, store in %s\n", g_entries, g_runs, g_dir.c_str());
        {
            steppe::open_options o;
            o.durable = false;
            auto s = steppe::store::open(g_dir + "/containers.db", o);
            auto* m = s.root<store_map>("map");
            auto* u = s.root<store_umap>("umap");
            fill(*m);
            fill(*u);
            s.commit();
            std::map<long, long> hm;
            std::unordered_map<long, long> hu;
            fill(hm);
            fill(hu);
            hot("std::map", *m, hm);
            hot("unordered_map", *u, hu);
        }
        cold<store_map>("std::map", "map");
        cold<store_umap>("unordered_map", "umap");
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "container_bench: %s\n", e.what());
        return 1;
    }
    std::filesystem::remove_all(g_dir);
    return 0;
}
