// The free-page set as maximal runs, indexed by start (for coalescing) and by
// length (for best fit). Both indexes always hold the same runs.
#include <cassert>

#include "heap/heap.hpp"

namespace steppe::heap_detail {

void free_runs::insert(std::uint64_t start, std::uint64_t length) {
    assert(length > 0);
    std::uint64_t end = start + length;
    auto next = by_start_.lower_bound(start);
    // Merge with the run that ends exactly at `start`.
    if (next != by_start_.begin()) {
        auto prev = std::prev(next);
        assert(prev->first + prev->second <= start);  // no overlap
        if (prev->first + prev->second == start) {
            by_length_.erase({prev->second, prev->first});
            start = prev->first;
            by_start_.erase(prev);
        }
    }
    // Merge with the run that starts exactly at `end`.
    if (next != by_start_.end()) {
        assert(next->first >= end);
        if (next->first == end) {
            by_length_.erase({next->second, next->first});
            end = next->first + next->second;
            by_start_.erase(next);
        }
    }
    by_start_.emplace(start, end - start);
    by_length_.emplace(end - start, start);
    total_ += length;
}

void free_runs::remove(std::uint64_t start, std::uint64_t length) {
    auto it = by_start_.upper_bound(start);
    assert(it != by_start_.begin());
    --it;
    std::uint64_t run_start = it->first, run_length = it->second;
    assert(start + length <= run_start + run_length);
    by_length_.erase({run_length, run_start});
    by_start_.erase(it);
    if (start > run_start) {
        by_start_.emplace(run_start, start - run_start);
        by_length_.emplace(start - run_start, run_start);
    }
    std::uint64_t end = start + length, run_end = run_start + run_length;
    if (end < run_end) {
        by_start_.emplace(end, run_end - end);
        by_length_.emplace(run_end - end, end);
    }
    total_ -= length;
}

std::optional<std::uint64_t> free_runs::take_one() {
    return take_run(1);
}

std::optional<std::uint64_t> free_runs::take_run(std::uint64_t length) {
    auto it = by_length_.lower_bound({length, 0});
    if (it == by_length_.end()) return std::nullopt;
    std::uint64_t start = it->second;
    remove(start, length);
    return start;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> free_runs::run_ending_at(std::uint64_t end) const {
    auto it = by_start_.lower_bound(end);
    if (it == by_start_.begin()) return std::nullopt;
    --it;
    if (it->first + it->second != end) return std::nullopt;
    return std::pair{it->first, it->second};
}

bool free_runs::contains(std::uint64_t page) const {
    auto it = by_start_.upper_bound(page);
    if (it == by_start_.begin()) return false;
    --it;
    return page < it->first + it->second;
}

void free_runs::clear() noexcept {
    by_start_.clear();
    by_length_.clear();
    total_ = 0;
}

}  // namespace steppe::heap_detail
