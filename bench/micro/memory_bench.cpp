// memory_bench: what a store costs the process in memory against its
// resident budget (issue 13), in three phases, each in a fresh process:
//
//   build    a list of 64-byte nodes as big as --store-mib, committed every
//            500,000 nodes
//   rewrite  every node written in one transaction, one commit
//   open     the store opened, nothing touched: what open alone costs
//   walk     every node read and checked
//
// For each budget (and the default budget, "default"), each phase prints its
// peak RSS (VmHWM), the goal (1.25 x budget + 16 MiB), the time, and the
// store's memory by kind (store_stats::memory) at its end.
//
// Usage: memory_bench [--store-mib N] [--budgets-mib 64,256,0] [--dir D] [--keep yes]
//                     [--phases build,rewrite,open,walk]
//   --budgets-mib  0 is the default budget (half of what the process may use)
//   --keep yes     keep the store (and --dir)
//   --phases       the phases to run, in their order; without build, the
//                  store a run with --keep yes left in --dir (the same
//                  --store-mib) is used: open,open,open times opens alone
//                  (walk checks the values rewrite leaves)
#include <steppe/steppe.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace memory_bench {
struct Node {
    Node* next;
    std::uint64_t id;
    std::uint64_t value;
    std::uint64_t pad[5];  // 64 bytes: 64 nodes per page
};
}  // namespace memory_bench

using memory_bench::Node;

namespace {

constexpr std::uint64_t MiB = 1 << 20;
constexpr long commit_every = 500'000;

std::uint64_t g_store_mib = 1024;
std::vector<std::uint64_t> g_budgets_mib = {64, 256};
std::string g_dir;
bool g_keep = false;
std::vector<std::string> g_phases = {"build", "rewrite", "open", "walk"};

long node_count() { return static_cast<long>(g_store_mib * MiB / sizeof(Node)); }
std::string store_path() { return g_dir + "/memory.db"; }

steppe::store open_store(std::uint64_t budget_mib) {
    steppe::open_options o;
    o.resident_budget = budget_mib * MiB;
    return steppe::store::open(store_path(), o);
}

// What a phase reports: peak RSS, seconds, nodes right, then memory by kind.
std::vector<double> report(steppe::store& s, bench_util::clock_type::time_point t0, long ok) {
    const steppe::store_stats st = s.stats();
    const steppe::store_memory& m = st.memory;
    return {static_cast<double>(bench_util::peak_rss()), bench_util::seconds_since(t0), static_cast<double>(ok),
            static_cast<double>(st.resident_budget_pages * 4096), static_cast<double>(m.store_pages),
            static_cast<double>(m.heap), static_cast<double>(m.page_map), static_cast<double>(m.fault_space),
            static_cast<double>(m.residency), static_cast<double>(m.types), static_cast<double>(m.storage),
            static_cast<double>(m.transaction), static_cast<double>(m.buffers)};
}

std::vector<double> build(std::uint64_t budget_mib) {
    std::filesystem::remove(store_path());
    std::filesystem::remove(store_path() + "-wal");
    bench_util::reset_peak_rss();
    auto t0 = bench_util::clock_type::now();
    auto s = open_store(budget_mib);
    Node** head = s.root<Node*>("head");
    const long n = node_count();
    for (long i = 0; i < n; ++i) {
        Node* node = s.make<Node>();
        node->id = static_cast<std::uint64_t>(i);
        node->value = static_cast<std::uint64_t>(i) * 7;
        node->next = *head;
        *head = node;
        if ((i + 1) % commit_every == 0) s.commit();
    }
    s.commit();
    return report(s, t0, n);
}

std::vector<double> rewrite(std::uint64_t budget_mib) {
    bench_util::reset_peak_rss();
    auto t0 = bench_util::clock_type::now();
    auto s = open_store(budget_mib);
    long seen = 0;
    for (Node* node = *s.find_root<Node*>("head"); node; node = node->next, ++seen) node->value += 1;
    s.commit();
    return report(s, t0, seen);
}

std::vector<double> open_only(std::uint64_t budget_mib) {
    bench_util::reset_peak_rss();
    auto t0 = bench_util::clock_type::now();
    auto s = open_store(budget_mib);
    return report(s, t0, 0);
}

// Every node, checked: ids count down from the last one made, values were
// raised by one (the rewrite).
std::vector<double> walk(std::uint64_t budget_mib) {
    bench_util::reset_peak_rss();
    auto t0 = bench_util::clock_type::now();
    auto s = open_store(budget_mib);
    long ok = 0, expect = node_count() - 1;
    for (Node* node = *s.find_root<Node*>("head"); node; node = node->next, --expect)
        if (node->id == static_cast<std::uint64_t>(expect) && node->value == node->id * 7 + 1) ++ok;
    return report(s, t0, expect == -1 ? ok : -1);
}

void print(const char* phase, std::uint64_t budget_mib, const std::vector<double>& r) {
    if (r.size() < 13) {
        std::printf("%-8s budget %5s MiB: the child died\n", phase, budget_mib ? std::to_string(budget_mib).c_str() : "dflt");
        return;
    }
    const auto mib = [](double b) { return b / MiB; };
    const double budget = r[3], goal = 1.25 * budget + 16 * MiB;
    std::printf("%-8s budget %7.0f MiB  peak RSS %7.1f MiB  goal %7.1f MiB %-4s  %8.3f s", phase, mib(budget),
                mib(r[0]), mib(goal), r[0] <= goal ? "met" : "MISS", r[1]);  // ms: an open takes a few
    if (std::strcmp(phase, "open") != 0) std::printf("  nodes ok %ld", static_cast<long>(r[2]));
    std::printf("\n");
    std::printf("         memory at the end (MiB): store pages %.1f, heap %.1f, page map %.1f, fault space %.1f, "
                "residency %.1f, types %.2f, storage %.1f, transaction %.1f, buffers %.1f\n",
                mib(r[4]), mib(r[5]), mib(r[6]), mib(r[7]), mib(r[8]), mib(r[9]), mib(r[10]), mib(r[11]), mib(r[12]));
    std::fflush(stdout);
}

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) out.push_back(item);
    return out;
}

std::vector<std::uint64_t> parse_list(const std::string& text) {
    std::vector<std::uint64_t> out;
    for (const std::string& item : split(text)) out.push_back(std::stoull(item));
    return out;
}

using phase_fn = std::vector<double> (*)(std::uint64_t budget_mib);
phase_fn phase_named(const std::string& name) {
    if (name == "build") return build;
    if (name == "rewrite") return rewrite;
    if (name == "open") return open_only;
    if (name == "walk") return walk;
    return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    bool usage = argc % 2 == 0;  // flags come in pairs
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--store-mib") g_store_mib = std::stoull(value);
        else if (flag == "--budgets-mib") g_budgets_mib = parse_list(value);
        else if (flag == "--dir") g_dir = value;
        else if (flag == "--keep") g_keep = value == "yes";
        else if (flag == "--phases") g_phases = split(value);
        else usage = true;
    }
    if (usage || g_phases.empty() || !std::all_of(g_phases.begin(), g_phases.end(), phase_named)) {
        std::fprintf(stderr, "usage: memory_bench [--store-mib N] [--budgets-mib 64,256,0] [--dir D] [--keep yes] "
                             "[--phases build,rewrite,open,walk]\n");
        return 2;
    }
    g_dir = bench_util::scratch_dir(g_dir);
    std::filesystem::create_directories(g_dir);
    std::printf("memory_bench: a %llu MiB store (%ld nodes of 64 bytes, a commit every %ld) in %s\n",
                static_cast<unsigned long long>(g_store_mib), node_count(), commit_every, g_dir.c_str());
    for (std::uint64_t budget : g_budgets_mib) {
        for (const std::string& phase : g_phases)
            print(phase.c_str(), budget, bench_util::in_child([&] { return phase_named(phase)(budget); }));
    }
    if (!g_keep) std::filesystem::remove_all(g_dir);
}
