// reuse_bench: what an address-space reuse round costs.
//
//   round        store::reuse_address_space() with every page of the store
//                resident: discarding them and scanning the page map
//   empty round  a second round at once: nothing was used, every arena is
//                reclaimed
//   refault      a walk after a round minus a hot walk, per page: the page
//                faults in again from the OS page cache and is swizzled again
//
// Usage: reuse_bench [--pages N] [--runs R] [--dir D] [--backend uffd|mprotect]
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace reuse_bench {
struct Node {
    long value;
    Node* next;
    long payload[6];  // 64 bytes: 64 nodes per page
};
}  // namespace reuse_bench

using reuse_bench::Node;
using bench_util::clock_type;
using bench_util::median;
using bench_util::seconds_since;

namespace {

constexpr long per_page = 4096 / sizeof(Node);

long g_pages = 20000;
int g_runs = 5;
std::string g_dir;
steppe::fault_backend g_backend = steppe::fault_backend::automatic;

steppe::open_options options() {
    steppe::open_options o;
    o.durable = false;
    o.backend = g_backend;
    return o;
}

void build(const std::string& path) {
    auto s = steppe::store::open(path, options());
    Node** head = s.root<Node*>("list");
    for (long i = 0; i < g_pages * per_page; ++i) {
        *head = s.make<Node>(Node{i, *head, {}});
        if (i % (256 * per_page) == 0) s.commit();
    }
    s.commit();
}

// Sums the list, touching every page.
long walk(steppe::store& s) {
    long sum = 0;
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) sum += n->value;
    return sum;
}

void usage() {
    std::fprintf(stderr, "usage: reuse_bench [--pages N] [--runs R] [--dir D] [--backend uffd|mprotect]\n");
    std::exit(2);
}

void parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) usage();
        std::string v = argv[++i];
        if (a == "--pages") g_pages = std::atol(v.c_str());
        else if (a == "--runs") g_runs = std::atoi(v.c_str());
        else if (a == "--dir") g_dir = v;
        else if (a == "--backend" && v == "uffd") g_backend = steppe::fault_backend::uffd;
        else if (a == "--backend" && v == "mprotect") g_backend = steppe::fault_backend::mprotect;
        else usage();
    }
}

}  // namespace

int main(int argc, char** argv) {
    parse(argc, argv);
    std::string dir = bench_util::scratch_dir(g_dir);
    std::string path = dir + "/reuse.db";
    build(path);
    auto s = steppe::store::open(path, options());
    const long expect = walk(s);  // every page resident
    std::vector<double> round, empty, refault;
    for (int r = 0; r < g_runs; ++r) {
        auto t = clock_type::now();
        if (walk(s) != expect) return 1;
        double hot = seconds_since(t);
        t = clock_type::now();
        s.reuse_address_space();
        round.push_back(seconds_since(t));
        t = clock_type::now();
        if (walk(s) != expect) return 1;
        refault.push_back((seconds_since(t) - hot) / static_cast<double>(g_pages));
        s.reuse_address_space();
        t = clock_type::now();
        s.reuse_address_space();  // nothing used since the last round: everything goes
        empty.push_back(seconds_since(t));
        if (walk(s) != expect) return 1;
    }
    auto st = s.stats();
    std::printf("backend %s, %ld store pages resident, %llu virtual pages reserved, %d runs (medians)\n",
                st.backend.c_str(), g_pages, static_cast<unsigned long long>(st.reserved_virtual_pages), g_runs);
    std::printf("round with every page resident   %8.2f ms  (%.3f us per resident page)\n", median(round) * 1e3,
                median(round) * 1e6 / static_cast<double>(g_pages));
    std::printf("round reclaiming every arena     %8.2f ms\n", median(empty) * 1e3);
    std::printf("refault after a round            %8.2f us per page\n", median(refault) * 1e6);
    if (g_dir.empty()) std::filesystem::remove_all(dir);
    return 0;
}
