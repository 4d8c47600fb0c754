// evict_bench: how well eviction under a resident budget keeps what is used
// (issue 18 item 5), first in, first out (open_options::cooling off) against
// the cooling stage (on), counting page misses rather than timing them.
//
// A store of 64-byte records reached through an index array (512 pointers a
// page, so an index page is touched 8 times as often as a record page), as a
// lookup by key is. Random lookups, uniform or Zipf(0.9) over the records
// (ranks scattered over the keys by a hash), in a working set of 1.2x, 2x
// and 4x the pages the store holds under the budget. Per lookup:
//   misses    fills that read a page (store_stats::faults - rewarmed_pages)
//   rewarms   fills a cooling page served without a read
//   floor     uniform's: 1 - pages held / working set pages
//   lru       an LRU simulation's misses, as many pages held, on the same
//             page-access trace (index page, record page per lookup)
// and the time per lookup. Each run in a fresh process: a warm-up of twice
// the working set's pages in lookups, then the measured lookups; the median
// of --reps runs. With --direct yes the records' addresses are copied out
// of the index first, so a lookup touches its record's page only: the
// floor's own model (one page a lookup, uniform), which the index's pages
// otherwise break.
//
// Usage: evict_bench [--budget-mib M] [--lookups N] [--reps R] [--dir D]
//                    [--backend uffd|mprotect] [--direct yes|no]
#include <steppe/steppe.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_util.hpp"

namespace bench {
struct Record {
    long key;
    long payload[7];  // 64 bytes: 64 a page
};
}  // namespace bench

using bench::Record;
using bench_util::clock_type;
using bench_util::median;
using bench_util::seconds_since;

namespace {

std::uint64_t g_budget = std::uint64_t{32} << 20;
long g_lookups = 400'000;
int g_reps = 3;
std::string g_dir;
steppe::fault_backend g_backend = steppe::fault_backend::uffd;
bool g_direct = false;

constexpr long records_per_page = 4096 / sizeof(Record), pointers_per_page = 4096 / sizeof(Record*);
constexpr double max_share = 4.0;

std::string store_path() { return g_dir + "/evict_bench.db"; }

steppe::open_options options(bool budget, bool cooling) {
    steppe::open_options o;
    o.backend = g_backend;
    o.durable = false;
    o.resident_budget = budget ? g_budget : 0;
    o.cooling = cooling;
    return o;
}

// Records for a working set of max_share budgets, and their index.
long build_store() {
    const long records = static_cast<long>(max_share * static_cast<double>(g_budget / 4096)) * records_per_page;
    std::filesystem::remove(store_path());
    std::filesystem::remove(store_path() + "-wal");
    auto s = steppe::store::open(store_path(), options(false, true));
    Record** index = s.make_array<Record*>(static_cast<std::size_t>(records));
    for (long i = 0; i < records; ++i) {
        index[i] = s.make<Record>();
        index[i]->key = i;
    }
    *s.root<Record**>("index") = index;
    s.commit();
    return records;
}

// Keys of the lookups: uniform, or Zipf(theta) by rank with the ranks
// scattered over the keys, so the hot records do not share pages.
std::vector<long> make_keys(long records, long count, double theta, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<long> keys(static_cast<std::size_t>(count));
    if (theta == 0) {
        std::uniform_int_distribution<long> pick(0, records - 1);
        for (long& k : keys) k = pick(rng);
        return keys;
    }
    std::vector<double> cdf(static_cast<std::size_t>(records));
    double sum = 0;
    for (long r = 0; r < records; ++r) cdf[static_cast<std::size_t>(r)] = sum += 1.0 / std::pow(r + 1.0, theta);
    std::uniform_real_distribution<double> u(0, sum);
    for (long& k : keys) {
        const auto rank = static_cast<std::uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
        k = static_cast<long>((rank * 0x9E3779B97F4A7C15ull >> 17) % static_cast<std::uint64_t>(records));
    }
    return keys;
}

// Misses of an LRU cache of `capacity` pages on `trace` (after `warm` accesses uncounted).
std::uint64_t lru_misses(const std::vector<std::uintptr_t>& trace, std::size_t warm, std::size_t capacity) {
    std::list<std::uintptr_t> order;  // most recent first
    std::unordered_map<std::uintptr_t, std::list<std::uintptr_t>::iterator> where;
    where.reserve(capacity * 2);
    std::uint64_t misses = 0;
    for (std::size_t i = 0; i < trace.size(); ++i) {
        auto it = where.find(trace[i]);
        if (it != where.end()) {
            order.splice(order.begin(), order, it->second);
            continue;
        }
        if (i >= warm) ++misses;
        order.push_front(trace[i]);
        where[trace[i]] = order.begin();
        if (order.size() > capacity) {
            where.erase(order.back());
            order.pop_back();
        }
    }
    return misses;
}

// One run in this (fresh) process: {misses, rewarms, lru misses} per
// lookup, ns per lookup, pages held, working-set pages.
std::vector<double> run(double share, double theta, bool cooling, std::uint64_t seed) {
    auto s = steppe::store::open(store_path(), options(true, cooling));
    Record** index = *s.find_root<Record**>("index");
    const long budget_pages = static_cast<long>(g_budget / 4096);
    // Records (and index pages, unless direct) in the working set: share x
    // the budget's pages.
    const long share_pages = static_cast<long>(share * static_cast<double>(budget_pages));
    const long records = g_direct ? share_pages * records_per_page
                                  : share_pages * records_per_page * pointers_per_page /
                                        (pointers_per_page + records_per_page);
    const long ws_pages = records / records_per_page + (g_direct ? 0 : records / pointers_per_page);
    // Where a lookup starts: the index in the store, or a transient copy.
    std::vector<Record*> copied;
    if (g_direct) copied.assign(index, index + records);
    Record* const* const lookup_from = g_direct ? copied.data() : index;
    const long warm = 2 * ws_pages;
    const std::vector<long> keys = make_keys(records, warm + g_lookups, theta, seed);
    std::vector<std::uintptr_t> trace;
    trace.reserve(keys.size() * 2);
    auto note = [&](long key) {
        if (!g_direct) trace.push_back(reinterpret_cast<std::uintptr_t>(&index[key]) / 4096);
        trace.push_back(reinterpret_cast<std::uintptr_t>(lookup_from[key]) / 4096);
    };
    long sum = 0;
    for (long i = 0; i < warm; ++i) {
        note(keys[static_cast<std::size_t>(i)]);
        sum += lookup_from[keys[static_cast<std::size_t>(i)]]->key;
    }
    const steppe::store_stats before = s.stats();
    const auto t = clock_type::now();
    for (long i = warm; i < warm + g_lookups; ++i) sum += lookup_from[keys[static_cast<std::size_t>(i)]]->key;
    const double seconds = seconds_since(t);
    const steppe::store_stats after = s.stats();
    for (long i = warm; i < warm + g_lookups; ++i) note(keys[static_cast<std::size_t>(i)]);
    if (sum < 0) std::printf("impossible\n");
    const double held = static_cast<double>(after.memory.store_pages + after.memory.cooling) / 4096;
    const double rewarms = static_cast<double>(after.rewarmed_pages - before.rewarmed_pages);
    const double misses = static_cast<double>(after.faults - before.faults) - rewarms;
    const double lru = static_cast<double>(lru_misses(trace, static_cast<std::size_t>(warm) * (g_direct ? 1 : 2),
                                                      static_cast<std::size_t>(held)));
    const double n = static_cast<double>(g_lookups);
    return {misses / n, rewarms / n, lru / n, seconds * 1e9 / n, held, static_cast<double>(ws_pages)};
}

void report(double share, double theta) {
    const char* name = theta == 0 ? "uniform" : "zipf0.9";
    for (bool cooling : {false, true}) {
        std::vector<std::vector<double>> columns(6);
        for (int r = 0; r < g_reps; ++r) {
            const std::vector<double> v = bench_util::in_child([&] { return run(share, theta, cooling, 42 + r); });
            if (v.size() != columns.size()) continue;
            for (std::size_t c = 0; c < v.size(); ++c) columns[c].push_back(v[c]);
        }
        const double misses = median(columns[0]), rewarms = median(columns[1]), lru = median(columns[2]);
        const double held = median(columns[4]), ws = median(columns[5]);
        const double floor = 1 - held / ws;
        std::printf("| %s | %.1fx | %s | %.0f / %.0f | %.3f | %.3f | %.3f | %.2f | %.3f | %.2f | %.0f |\n", name,
                    share, cooling ? "cooling" : "FIFO", held, ws, misses, rewarms, floor, misses / floor, lru,
                    lru > 0 ? misses / lru : 0, median(columns[3]));
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--budget-mib") g_budget = std::stoull(value) << 20;
        else if (flag == "--lookups") g_lookups = std::stol(value);
        else if (flag == "--reps") g_reps = std::stoi(value);
        else if (flag == "--dir") g_dir = value;
        else if (flag == "--backend") g_backend = value == "mprotect" ? steppe::fault_backend::mprotect
                                                                       : steppe::fault_backend::uffd;
        else if (flag == "--direct") g_direct = value == "yes";
        else {
            std::fprintf(stderr, "usage: evict_bench [--budget-mib M] [--lookups N] [--reps R] [--dir D] "
                                 "[--backend uffd|mprotect] [--direct yes|no]\n");
            return 2;
        }
    }
    g_dir = bench_util::scratch_dir(g_dir);
    const long records = build_store();
    std::printf("evict_bench: %ld records (%ld pages) in %s, budget %llu MiB, %ld lookups, median of %d runs%s\n\n",
                records, records / records_per_page + records / pointers_per_page, store_path().c_str(),
                static_cast<unsigned long long>(g_budget >> 20), g_lookups, g_reps,
                g_direct ? ", lookups from a transient copy of the index" : "");
    std::printf("| access | working set | policy | pages held / working set | misses per lookup | rewarms per lookup "
                "| floor | misses / floor | LRU misses | misses / LRU | ns per lookup |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (double theta : {0.0, 0.9})
        for (double share : {1.2, 2.0, 4.0}) report(share, theta);
    return 0;
}
