// guard_layout — why steppe's hot OO1 traversal is slower than transient on
// the large database: the page engine follows every 4 KiB unit with a guard
// page (docs/design.md, "Units and guard gaps"), so resident data is spread
// over twice the virtual range and every page walk touches twice the
// page-table memory. This program walks the same OO1-shaped graph (200,000
// 128-byte parts, 32 per page, 3 connections, 90 % to the closest 1 %) laid
// out four ways in plain anonymous memory, no steppe involved:
//
//   guard 0 shuffled 0   pages contiguous, in id order (what new/delete gives)
//   guard 1 shuffled 0   every data page followed by an untouched page
//   guard 0 shuffled 1   pages contiguous, in random order (fault order)
//   guard 1 shuffled 1   both
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
    std::printf("%ld parts, %ld pages of parts; best of 30 rounds, the four layouts alternated\n", n, pages);
    std::vector<Part*> roots;
    for (int layout = 0; layout < 4; ++layout) {
        const bool guard = layout & 1, shuffled = layout & 2;
        const long stride = guard ? 2 : 1;
        auto* mem = static_cast<char*>(::mmap(nullptr, static_cast<std::size_t>(pages * stride * 4096),
                                              PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (mem == MAP_FAILED) return 2;
        std::vector<long> slot(static_cast<std::size_t>(pages));
        for (long i = 0; i < pages; ++i) slot[static_cast<std::size_t>(i)] = i;
        if (shuffled) std::shuffle(slot.begin(), slot.end(), std::mt19937(7));
        std::vector<Part*> part(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i)
            part[static_cast<std::size_t>(i)] = reinterpret_cast<Part*>(
                mem + slot[static_cast<std::size_t>(i / per_page)] * stride * 4096 + (i % per_page) * 128);
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
    std::vector<double> best(4, 1e30);
    for (int round = 0; round < 30; ++round)
        for (int layout = 0; layout < 4; ++layout) {
            auto t = std::chrono::steady_clock::now();
            for (int k = 0; k < 64; ++k) traverse(roots[static_cast<std::size_t>(layout)], 7);
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
            best[static_cast<std::size_t>(layout)] = std::min(best[static_cast<std::size_t>(layout)], ms);
        }
    for (int layout = 0; layout < 4; ++layout)
        std::printf("guard %d shuffled %d: %.3f ms per 64 traversals (%.2fx)\n", layout & 1, (layout & 2) >> 1,
                    best[static_cast<std::size_t>(layout)], best[static_cast<std::size_t>(layout)] / best[0]);
    return 0;
}
