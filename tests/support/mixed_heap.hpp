// A heap with a mix of everything, spanning a few metadata pages: small
// chunks of many size classes and four types, large runs, frees among them,
// and a system page of another owner (heap_test, stored_pointer_test).
#pragma once

#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "heap/heap.hpp"

namespace steppe::test {

inline heap mixed_heap(std::uint64_t seed = 1, int ops = 3000) {
    heap h;
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> live;
    const std::size_t sizes[] = {8, 16, 24, 40, 100, 300, 1000, 2000, 5000, 9000};
    for (int i = 0; i < ops; ++i) {
        if (live.empty() || rng() % 3 != 0) {
            std::size_t elem = sizes[rng() % std::size(sizes)];
            live.push_back(h.allocate(static_cast<std::uint32_t>(rng() % 4), elem, 1 + rng() % 3));
        } else {
            std::size_t k = rng() % live.size();
            h.free(live[k]);
            live[k] = live.back();
            live.pop_back();
        }
    }
    h.allocate_system_page(7, 1234);
    return h;
}

}  // namespace steppe::test
