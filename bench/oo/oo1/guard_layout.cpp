// guard_layout — why steppe's hot OO1 traversal is slower than transient on
// the large database: the page engine follows every 4 KiB unit with a guard
// page (docs/design.md, "Units and guard gaps"), so resident data is spread
// over twice the virtual range and every page walk touches twice the
// page-table memory. This program walks the same OO1-shaped graph (200,000
// 128-byte parts, 32 per page, 3 connections, 90 % to the closest 1 %) laid
// out in plain anonymous memory, no steppe involved. The pages are cut into
// units of `unit` consecutive pages (in id order inside a unit), each unit
// followed by an untouched guard page or not, and the units placed in id
// order or in random order (fault order):
//
//   unit  1 guard 0 shuffled 0   pages contiguous, in id order (what new/delete gives)
//   unit  1 guard 1 shuffled 0   every data page followed by an untouched page
//   unit  1 guard 0 shuffled 1   pages contiguous, in random order
//   unit  1 guard 1 shuffled 1   both: steppe's layout today
//   unit 16 guard 1 shuffled 1   grouped units (issue 18 item 6): 16 consecutive
//   unit 32 guard 1 shuffled 1   pages of the file per unit, one guard after
//   unit 16 guard 1 shuffled 0   each, units in fault order (or in order)
//
// Usage: guard_layout [parts]   (best of 30 alternated rounds of 64 traversals, 7 hops)
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct Part {
    long id;
    int x, y;
    Part* to[3];
    char pad[128 - 16 - 24];
};
static_assert(sizeof(Part) == 128);

long g_sink;
[[gnu::noinline]] void visit(const Part* p) { g_sink += p->x; }
void traverse(const Part* p, int depth) {
    visit(p);
    if (depth == 0) return;
    for (const Part* q : p->to) traverse(q, depth - 1);
}

}  // namespace

int main(int argc, char** argv) {
    const long n = argc > 1 ? std::atol(argv[1]) : 200000;
    const long per_page = 4096 / static_cast<long>(sizeof(Part)), pages = (n + per_page - 1) / per_page;
    struct layout_spec {
        long unit;
        bool guard, shuffled;
    };
    const std::vector<layout_spec> layouts = {{1, false, false}, {1, true, false}, {1, false, true}, {1, true, true},
                                              {16, true, true},  {32, true, true}, {16, true, false}};
    std::printf("%ld parts, %ld pages of parts; best of 30 rounds, the %zu layouts alternated\n", n, pages,
                layouts.size());
    std::vector<Part*> roots;
    for (const layout_spec& spec : layouts) {
        const long units = (pages + spec.unit - 1) / spec.unit, stride = spec.unit + (spec.guard ? 1 : 0);
        auto* mem = static_cast<char*>(::mmap(nullptr, static_cast<std::size_t>(units * stride * 4096),
                                              PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (mem == MAP_FAILED) return 2;
        std::vector<long> unit_slot(static_cast<std::size_t>(units));
        for (long i = 0; i < units; ++i) unit_slot[static_cast<std::size_t>(i)] = i;
        if (spec.shuffled) std::shuffle(unit_slot.begin(), unit_slot.end(), std::mt19937(7));
        std::vector<long> slot(static_cast<std::size_t>(pages));  // the virtual page of each data page
        for (long i = 0; i < pages; ++i)
            slot[static_cast<std::size_t>(i)] = unit_slot[static_cast<std::size_t>(i / spec.unit)] * stride + i % spec.unit;
        std::vector<Part*> part(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i)
            part[static_cast<std::size_t>(i)] = reinterpret_cast<Part*>(
                mem + slot[static_cast<std::size_t>(i / per_page)] * 4096 + (i % per_page) * 128);
        std::mt19937_64 r(42);  // the same graph in every layout
        const long window = std::max(1L, n / 100);
        for (long i = 0; i < n; ++i) {
            Part* p = part[static_cast<std::size_t>(i)];
            p->id = i;
            p->x = static_cast<int>(i);
            for (auto& t : p->to) {
                long target = r() % 10 < 9 ? std::clamp(i - window / 2, 0L, n - window) +
                                                 static_cast<long>(r() % static_cast<unsigned long>(window))
                                           : static_cast<long>(r() % static_cast<unsigned long>(n));
                t = part[static_cast<std::size_t>(target)];
            }
        }
        roots.push_back(part[static_cast<std::size_t>(n / 3)]);
    }
    std::vector<double> best(layouts.size(), 1e30);
    for (int round = 0; round < 30; ++round)
        for (std::size_t layout = 0; layout < layouts.size(); ++layout) {
            auto t = std::chrono::steady_clock::now();
            for (int k = 0; k < 64; ++k) traverse(roots[layout], 7);
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
            best[layout] = std::min(best[layout], ms);
        }
    for (std::size_t layout = 0; layout < layouts.size(); ++layout)
        std::printf("unit %2ld guard %d shuffled %d: %.3f ms per 64 traversals (%.2fx)\n", layouts[layout].unit,
                    layouts[layout].guard ? 1 : 0, layouts[layout].shuffled ? 1 : 0, best[layout],
                    best[layout] / best[0]);
    return 0;
}
