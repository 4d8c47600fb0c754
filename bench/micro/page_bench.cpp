// page_bench: what the page engine costs, next to its baselines, in one run.
//
//   hot traversal   the same parts graph walked resident in a store and in
//                   ordinary heap memory (alternated; ratio of medians)
//   cold fault      first walk in a fresh process minus a hot walk, per page
//                   faulted: fault + read (OS page cache, and disk after
//                   dropping caches when permitted) + checksum + swizzle
//   bare fault      userfaultfd SIGBUS + UFFDIO_COPY with a fill that does nothing
//   page read       storage::read_page (pread + checksum) from the page cache
//   swizzle         cold fault - bare fault - page read, per page and per pointer
//   commit          per dirty page incl. unswizzling, log write and fdatasync
//
//   budget curve    lookups and traversals per second under a resident
//                   budget as the working set grows past it, vs uncapped
//   big update      one durable transaction that writes every part (and
//                   allocates nothing) under the budget, vs uncapped: time,
//                   pages spilled to the log, the process's peak RSS
//
// Usage: page_bench [--parts N] [--runs R] [--dir D] [--backend uffd|mprotect]
//                   [--budget-mib M] [--only curve] [--keep yes]
//   --budget-mib  the budget of the curve (default: a quarter of the store)
//   --only curve  build (or reuse) the store and run only the budget curve
//   --only update the same with only the big update
//   --uncapped no the big update only under the budget (a store bigger than
//                 memory could not be rewritten uncapped)
//   --keep yes    keep the store in --dir, and reuse it if it has --parts parts
//   --reps R      runs per curve point (default 3; 1 with --only curve)
//   --shares a,b  the working-set sizes of the curve, in budgets
// A store larger than memory: page_bench --parts 120000000 --budget-mib 1024
//   --only curve --dir /var/tmp/big --keep yes   (8.6 GiB store, 1 GiB budget)
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "storage/storage.hpp"
#include "vm/vm.hpp"

namespace bench {

struct Part {
    int id;
    char type[10];
    int x, y;
    long build;
    Part* to[3];
};
struct Graph {
    long count;
    Part** index;
};

}  // namespace bench

using bench::Graph;
using bench::Part;
using bench_util::clock_type;
using bench_util::in_child;
using bench_util::median;
using bench_util::seconds_since;

namespace {

long g_parts = 200000;
int g_runs = 7;
std::string g_dir;
steppe::fault_backend g_backend = steppe::fault_backend::uffd;
bool g_prefetch = true;
std::uint64_t g_budget = 0;  // bytes; 0 = the default
bool g_update_uncapped = true;


// Connections as OO1 makes them: 90 % to the nearest 1 % of ids, 10 % anywhere.
// `every_chunk` runs after each 1,048,576 parts of each pass (a store commits
// there, so building a store larger than memory needs no giant transaction).
template <class Alloc>
Graph build(Alloc&& alloc_part, Part** index, const std::function<void()>& every_chunk = [] {}) {
    constexpr long chunk = 1 << 20;
    for (long i = 0; i < g_parts; ++i) {
        if (i % chunk == chunk - 1) every_chunk();
        Part* p = alloc_part();
        p->id = static_cast<int>(i);
        p->x = static_cast<int>(i * 7 % 100000);
        p->y = static_cast<int>(i * 13 % 100000);
        index[i] = p;
    }
    std::uint64_t x = 42;
    long near = std::max(1L, g_parts / 100);
    for (long i = 0; i < g_parts; ++i) {
        if (i % chunk == chunk - 1) every_chunk();
        for (auto& link : index[i]->to) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            long target = (x >> 20) % 10 < 9 ? (i + static_cast<long>((x >> 33) % near) + g_parts - near / 2) % g_parts
                                              : static_cast<long>((x >> 24) % g_parts);
            link = index[target];
        }
    }
    return {g_parts, index};
}

// Seven levels of connections from every 64th part, as in OO1's traversal.
long traverse(const Part* p, int depth) {
    long sum = p->x;
    if (depth == 0) return sum;
    for (const Part* q : p->to) sum += traverse(q, depth - 1);
    return sum;
}
long walk(const Graph& g) {
    long sum = 0;
    for (long i = 0; i < g.count; i += 64) sum += traverse(g.index[i], 4);
    for (long i = 0; i < g.count; ++i)
        for (const Part* q : g.index[i]->to) sum += q->y;
    return sum;
}

steppe::open_options options(bool durable = false) {
    steppe::open_options o;
    o.backend = g_backend;
    o.durable = durable;
    o.prefetch = g_prefetch;
    o.resident_budget = g_budget;
    return o;
}

std::string store_path() { return g_dir + "/page_bench.db"; }

void build_store() {
    std::filesystem::remove(store_path());
    std::filesystem::remove(store_path() + "-wal");
    auto s = steppe::store::open(store_path(), options(true));
    auto* g = s.root<Graph>("graph");
    Part** index = s.make_array<Part*>(static_cast<std::size_t>(g_parts));
    *g = build([&] { return s.make<Part>(); }, index, [&] { s.commit(); });
    s.commit();
}


bool drop_caches() {
    ::sync();
    std::ofstream f("/proc/sys/vm/drop_caches");
    if (!f) return false;
    f << "3\n";
    return static_cast<bool>(f.flush());
}

// {cold walk s, hot walk s, faults, pointers swizzled}
std::vector<double> cold_then_hot() {
    steppe::open_options o = options();
    o.read_only = true;
    auto s = steppe::store::open(store_path(), o);
    auto* g = s.find_root<Graph>("graph");
    auto t = clock_type::now();
    volatile long sink = walk(*g);
    double cold = seconds_since(t);
    t = clock_type::now();
    sink = walk(*g);
    double hot = seconds_since(t);
    (void)sink;
    auto st = s.stats();
    return {cold, hot, static_cast<double>(st.faults), static_cast<double>(st.pointers_swizzled),
            static_cast<double>(st.prefetched_pages), static_cast<double>(st.prefetch_hits)};
}

double bare_fault_seconds(std::size_t pages) {
    auto space = steppe::vm::fault_space::create(
        steppe::vm::backend_kind::uffd, [](void*, std::uintptr_t, std::byte*) noexcept { return true; }, nullptr);
    std::uintptr_t base = space->reserve(pages * 4096);
    auto t = clock_type::now();
    for (std::size_t i = 0; i < pages; ++i) (void)*reinterpret_cast<volatile char*>(base + i * 4096);
    return seconds_since(t) / static_cast<double>(pages);
}

double read_seconds_per_page() {
    steppe::storage::options o;
    o.read_only = true;
    auto st = steppe::storage::storage::open(store_path(), o);
    std::vector<std::byte> page(steppe::storage::page_size);
    auto t = clock_type::now();
    for (std::uint64_t p = 1; p < st->page_count(); ++p) st->read_page(p, page.data());
    return seconds_since(t) / static_cast<double>(st->page_count() - 1);
}

void report_hot() {
    std::vector<Part*> heap_index(static_cast<std::size_t>(g_parts));
    Graph transient = build([] { return new Part(); }, heap_index.data());
    auto s = steppe::store::open(store_path(), options());
    Graph persistent = *s.find_root<Graph>("graph");
    long a = walk(transient), b = walk(persistent);  // also makes every page resident
    if (a != b) std::printf("MISMATCH: transient %ld, store %ld\n", a, b);
    std::vector<double> t_store, t_heap;
    for (int r = 0; r < g_runs; ++r) {
        auto t = clock_type::now();
        volatile long x = walk(persistent);
        t_store.push_back(seconds_since(t));
        t = clock_type::now();
        x = walk(transient);
        t_heap.push_back(seconds_since(t));
        (void)x;
    }
    double ms = median(t_store) * 1e3, mh = median(t_heap) * 1e3;
    std::printf("hot traversal      store %8.2f ms   heap %8.2f ms   ratio %.3f   (goal <= 1.02)\n", ms, mh, ms / mh);
    for (Part* p : heap_index) delete p;
}

void report_cold() {
    double bare = bare_fault_seconds(20000);
    double read = read_seconds_per_page();
    std::vector<double> per_fault, per_pointer_ns, pages, cold_ms, pointers_per_page;
    for (int r = 0; r < std::max(3, g_runs / 2); ++r) {
        auto v = in_child(cold_then_hot);
        if (v.size() < 4) continue;
        double f = (v[0] - v[1]) / v[2];
        per_fault.push_back(f);
        per_pointer_ns.push_back((f - bare - read) * 1e9 / (v[3] / v[2]));
        pages.push_back(v[2]);
        cold_ms.push_back(v[0] * 1e3);
        pointers_per_page.push_back(v[3] / v[2]);
    }
    double f = median(per_fault);
    std::printf("cold walk          %8.1f ms, %.0f pages faulted, %.0f pointers per page\n", median(cold_ms),
                median(pages), median(pointers_per_page));
    std::printf("cold fault         %8.2f us per page (page cache) = %.2fx the bare fault (goal <= 2x)\n", f * 1e6,
                f / bare);
    std::printf("  bare uffd fault  %8.2f us\n", bare * 1e6);
    std::printf("  page read        %8.2f us (pread + crc32c, page cache)\n", read * 1e6);
    std::printf("  swizzle (rest)   %8.2f us per page, %.1f ns per pointer\n", (f - bare - read) * 1e6,
                median(per_pointer_ns));
    if (!drop_caches()) {
        std::printf("cold fault (disk)  not measured: dropping the OS caches is not permitted here\n");
        return;
    }
    // From disk, with and without read-ahead of the pages a faulted page points to (alternated).
    std::vector<double> with, without, hits_share;
    for (int r = 0; r < 3; ++r) {
        for (bool prefetch : {true, false}) {
            g_prefetch = prefetch;
            drop_caches();
            auto v = in_child(cold_then_hot);
            if (v.size() < 6) continue;
            (prefetch ? with : without).push_back(v[0] * 1e3);
            if (prefetch && v[4] > 0) hits_share.push_back(v[5] / v[4]);
        }
    }
    g_prefetch = true;
    if (with.empty() || without.empty()) return;
    std::printf("cold walk (disk)   %8.1f ms with prefetching, %.1f ms without (%.2fx); %.0f %% of read-ahead used\n",
                median(with), median(without), median(without) / median(with),
                hits_share.empty() ? 0.0 : median(hits_share) * 100);
}

void report_commit() {
    for (bool durable : {false, true}) {
        auto s = steppe::store::open(store_path(), options(durable));
        Graph g = *s.find_root<Graph>("graph");
        std::vector<double> per_page;
        std::uint64_t pages = 0;
        for (int r = 0; r < g_runs; ++r) {
            for (long i = 0; i < g.count; i += 37) g.index[i]->build += 1;  // every page of parts, and more
            auto before = s.stats().pages_committed;
            auto t = clock_type::now();
            s.commit();
            double secs = seconds_since(t);
            pages = s.stats().pages_committed - before;
            per_page.push_back(secs / static_cast<double>(pages));
        }
        std::printf("commit (%s) %6.2f us per dirty page, %llu pages per commit\n",
                    durable ? "durable" : "no sync", median(per_page) * 1e6, static_cast<unsigned long long>(pages));
    }
}

std::vector<double> parse_list(const std::string& csv) {
    std::vector<double> v;
    std::stringstream in(csv);
    for (std::string item; std::getline(in, item, ',');) v.push_back(std::stod(item));
    return v;
}

// True when `dir` already holds a page_bench store of --parts parts (--keep yes).
bool store_holds_parts(const std::string& dir) {
    g_dir = dir;
    if (!std::filesystem::exists(store_path())) return false;
    steppe::open_options o = options();
    o.read_only = true;
    auto s = steppe::store::open(store_path(), o);
    const Graph* g = s.find_root<Graph>("graph");
    return g && g->count == g_parts;
}

void timed(const char* what, const std::function<void()>& f) {
    auto t = clock_type::now();
    f();
    std::printf("%-18s %8.1f s\n", what, seconds_since(t));
}

// Opens the store read-only, runs `pass` once to load its working set, then
// times it again (best of 5): {operations per second, faults, evictions, bytes read from
// the disk}. `pass(graph)` does `operations` operations, the same each time.
std::vector<double> load_then_time(long operations, const std::function<long(const Graph&)>& pass) {
    steppe::open_options o = options();
    o.read_only = true;
    auto s = steppe::store::open(store_path(), o);
    Graph g = *s.find_root<Graph>("graph");
    volatile long sink = pass(g);
    std::vector<double> secs;  // the fastest of 5 timed passes: the machine is shared
    for (int r = 0; r < 5; ++r) {
        auto t = clock_type::now();
        sink = pass(g);
        secs.push_back(seconds_since(t));
    }
    (void)sink;
    auto st = s.stats();
    return {static_cast<double>(operations) / *std::min_element(secs.begin(), secs.end()), static_cast<double>(st.faults),
            static_cast<double>(st.evictions), static_cast<double>(bench_util::read_bytes())};
}

// `count` OO1-style lookups (read x, y and type of a random part) among the
// first `span` parts.
std::vector<double> lookups(long span, long count) {
    return load_then_time(count, [=](const Graph& g) {
        std::uint64_t x = 7;
        long sum = 0;
        for (long i = 0; i < count; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const Part* p = g.index[static_cast<long>((x >> 33) % static_cast<std::uint64_t>(span))];
            sum += p->x + p->y + p->type[0];
        }
        return sum;
    });
}

// OO1 traversals (seven levels, 3,280 visits) from `roots` random parts of
// the whole store.
std::vector<double> traversals(long roots) {
    return load_then_time(roots, [=](const Graph& g) {
        std::uint64_t x = 11;
        long sum = 0;
        for (long i = 0; i < roots; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            sum += traverse(g.index[static_cast<long>((x >> 33) % static_cast<std::uint64_t>(g.count))], 7);
        }
        return sum;
    });
}

// Runs `work` uncapped and under `budget` (alternated, medians of `reps`) and
// prints one line of the curve; returns the uncapped run's faults (the
// working set in pages).
double curve_point(const char* what, double share, std::uint64_t budget, int reps,
                   const std::function<std::vector<double>()>& work) {
    std::vector<double> ratio, faults, evictions, free_faults, free_rate, read_mib;
    for (int r = 0; r < reps; ++r) {
        g_budget = 0;
        auto free_run = in_child(work);
        g_budget = budget;
        auto capped = in_child(work);
        g_budget = 0;
        if (free_run.size() < 4 || capped.size() < 4) continue;
        ratio.push_back(free_run[0] / capped[0]);
        free_rate.push_back(free_run[0]);
        free_faults.push_back(free_run[1]);
        faults.push_back(capped[1]);
        evictions.push_back(capped[2]);
        read_mib.push_back(capped[3] / 1048576.0);
    }
    if (ratio.empty()) return 0;
    double ws = median(free_faults) * 4096 / static_cast<double>(budget);
    std::printf("  %-10s share %4.2f, working set %5.2fx budget: capped %6.2fx the time of uncapped (%.0f/s), "
                "%8.0f faults, %8.0f evictions, %7.1f MiB read\n",
                what, share, ws, median(ratio), median(free_rate), median(faults), median(evictions),
                median(read_mib));
    return median(free_faults);
}

std::uint64_t store_pages() {
    steppe::open_options o = options();
    o.read_only = true;
    return steppe::store::open(store_path(), o).stats().store_pages;
}

// The budget asked for, else a quarter of the store (at least 1 MiB).
std::uint64_t default_budget(std::uint64_t budget) {
    return budget ? budget : std::max<std::uint64_t>(store_pages() * 4096 / 4, 1 << 20);
}

// Lookups and traversals per second under a resident budget (--budget-mib, or
// a quarter of the store), as the working set grows past it, next to the same
// runs with no budget.
void report_budget_curve(std::uint64_t budget, int reps, const std::vector<double>& shares) {
    const std::uint64_t pages = store_pages();
    budget = default_budget(budget);
    std::printf("budget curve       store %.1f MiB, resident budget %.1f MiB (%.1fx smaller); medians of %d, capped vs uncapped\n",
                pages * 4096 / 1048576.0, budget / 1048576.0, pages * 4096.0 / static_cast<double>(budget), reps);
    // A lookup among `span` parts touches span parts (64 bytes each) and span
    // index slots (8 bytes): the working set is span * 72 bytes. A traversal
    // touches about 3,280 pages (its visits are spread over the store).
    double parts_per_budget = static_cast<double>(budget) / 72;
    double traversals_per_budget = static_cast<double>(budget) / 4096 / 3280;
    for (double share : shares) {
        long span = std::min(g_parts, static_cast<long>(parts_per_budget * share));
        curve_point("lookups", share, budget, reps, [span] { return lookups(span, std::max(100000L, span / 16)); });
    }
    for (double share : shares) {
        long roots = std::max(1L, static_cast<long>(traversals_per_budget * share));
        curve_point("traversals", share, budget, reps, [roots] { return traversals(roots); });
    }
}

// Adds 1 to every part's x in one transaction and commits it (durably):
// {update seconds, commit seconds, pages spilled, evictions, peak RSS}.
std::vector<double> update_every_part() {
    auto s = steppe::store::open(store_path(), options(true));
    Graph g = *s.find_root<Graph>("graph");
    auto t = clock_type::now();
    for (long i = 0; i < g.count; ++i) g.index[i]->x += 1;
    double update = seconds_since(t);
    auto st = s.stats();
    t = clock_type::now();
    s.commit();
    return {update, seconds_since(t), static_cast<double>(st.spilled_pages), static_cast<double>(st.evictions),
            static_cast<double>(bench_util::peak_rss())};
}

// One transaction writing every part of the store (each run adds 1 to every
// x), under `budget` and uncapped, alternated; medians of `reps`.
void report_big_update(std::uint64_t budget, int reps) {
    std::vector<std::vector<double>> runs[2];
    const int first = g_update_uncapped ? 0 : 1;
    for (int r = 0; r < reps; ++r)
        for (int capped = first; capped < 2; ++capped) {
            g_budget = capped ? budget : 0;
            runs[capped].push_back(in_child(update_every_part));
        }
    g_budget = 0;
    std::printf("big update         every part written in one transaction, medians of %d\n", reps);
    for (int capped = first; capped < 2; ++capped) {
        auto column = [&](std::size_t i) {
            std::vector<double> v;
            for (const auto& run : runs[capped])
                if (run.size() == 5) v.push_back(run[i]);
            return median(v);
        };
        std::printf("  %-8s update %7.2f s, commit %6.2f s, %9.0f pages spilled, %9.0f evictions, peak RSS %7.1f MiB\n",
                    capped ? "capped" : "uncapped", column(0), column(1), column(2), column(3), column(4) / 1048576.0);
    }
}


}  // namespace

int main(int argc, char** argv) {
    std::uint64_t curve_budget = 0;
    bool curve_only = false, update_only = false, keep = false;
    int reps = 0;
    std::vector<double> shares = {0.25, 0.5, 0.9, 1.5, 2.0, 4.0};
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--parts") g_parts = std::atol(value.c_str());
        else if (flag == "--runs") g_runs = std::atoi(value.c_str());
        else if (flag == "--dir") g_dir = value;
        else if (flag == "--backend") g_backend = value == "mprotect" ? steppe::fault_backend::mprotect : steppe::fault_backend::uffd;
        else if (flag == "--budget-mib") curve_budget = std::stoull(value) << 20;
        else if (flag == "--only") curve_only = value == "curve", update_only = value == "update";
        else if (flag == "--keep") keep = value == "yes";
        else if (flag == "--reps") reps = std::atoi(value.c_str());
        else if (flag == "--shares") shares = parse_list(value);
        else if (flag == "--uncapped") g_update_uncapped = value != "no";
    }
    bool reuse = keep && !g_dir.empty() && store_holds_parts(g_dir);
    g_dir = bench_util::scratch_dir(g_dir);
    try {
        std::printf("page_bench: %ld parts, %d runs, backend %s, store in %s\n", g_parts, g_runs,
                    g_backend == steppe::fault_backend::uffd ? "uffd" : "mprotect", g_dir.c_str());
        if (reuse) std::printf("reusing the store in %s\n", g_dir.c_str());
        else timed("build + commit", build_store);
        if (!curve_only && !update_only) {
            report_hot();
            report_cold();
            report_commit();
        }
        const int point_reps = reps > 0 ? reps : curve_only || update_only ? 1 : 3;
        if (!update_only) report_budget_curve(curve_budget, point_reps, shares);
        if (!curve_only) report_big_update(default_budget(curve_budget), point_reps);
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "page_bench: %s\n", e.what());
        return 1;
    }
    if (!keep) std::filesystem::remove_all(g_dir);
    return 0;
}
