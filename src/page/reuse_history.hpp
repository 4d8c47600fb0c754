// steppe::page::reuse_history — what eviction learns of pages that come
// back (issue 18 item 5). The residency ring has no reference bits for
// resident pages (a userfaultfd or mprotect store sees only the first touch
// of a page), so it learns what is used where a page proves it: a page
// faulted in again soon after it left memory (its number is still in the
// history of the last `capacity` pages that left: 2Q's "A1out" queue), or
// taken back from the cooling pool, is marked *reused* and gets two more
// chances; an evictor that meets a page with a chance left at the ring's
// tail takes one and records the page again instead of dropping it, as
// CLOCK spares a page whose reference bit is set. So a page that keeps
// coming back stays three turns of the ring where a page used once goes
// after one. It only decides which page goes first: nothing is written or
// kept on its word, and a mark that is wrong (a race below, a page number
// reused) costs two turns of the ring at most.
//
// Lock-free and async-signal-safe: faulting threads mark pages and drop
// them. Per persistent page three bits (in the history, two chances); the
// history is a ring of page numbers taken round-robin. A page that leaves
// twice within the history's length loses its "in the history" bit when its
// first entry is overwritten: a lost mark, no harm.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "page/page_bits.hpp"

namespace steppe::page {

class reuse_history {
public:
    // `capacity` pages of history (at least 1); `pages`: the largest
    // persistent page number + 1. mapped() is false when an mmap failed.
    reuse_history(std::uint64_t capacity, std::uint64_t pages)
        : in_history_(pages), first_chance_(pages), second_chance_(pages), capacity_(capacity ? capacity : 1),
          slots_(capacity_) {}

    static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the fault path uses it");
    bool mapped() const noexcept {
        return in_history_.mapped() && first_chance_.mapped() && second_chance_.mapped() && slots_.mapped();
    }
    // The page left memory (dropped, or spilled and dropped): it has no
    // chance left (an evictor may drop a page without asking), and earns two
    // by coming back.
    void left(std::uint64_t page) noexcept {
        first_chance_.exchange(page, false, std::memory_order_relaxed);
        second_chance_.exchange(page, false, std::memory_order_relaxed);
        in_history_.exchange(page, true, std::memory_order_relaxed);
        const std::uint64_t slot = hand_.fetch_add(1, std::memory_order_relaxed) % capacity_;
        const std::uint64_t old = slots_[slot].exchange(page + 1, std::memory_order_relaxed);
        if (old != 0 && old != page + 1) in_history_.exchange(old - 1, false, std::memory_order_relaxed);
    }
    // The page was read in again: reused if it left recently. (A load first:
    // most fills are of pages not in the history, and a read-modify-write
    // would take their cache line exclusive for nothing.)
    void came_back(std::uint64_t page) noexcept {
        if (in_history_.test(page, std::memory_order_relaxed) && in_history_.exchange(page, false, std::memory_order_relaxed))
            touched(page);
    }
    // The page was touched while cooling: reused.
    void touched(std::uint64_t page) noexcept {
        first_chance_.exchange(page, true, std::memory_order_relaxed);
        second_chance_.exchange(page, true, std::memory_order_relaxed);
    }
    // For an evictor at the ring's tail: whether the page has a chance left
    // (and takes it).
    bool take_chance(std::uint64_t page) noexcept {
        return second_chance_.exchange(page, false, std::memory_order_relaxed) ||
               first_chance_.exchange(page, false, std::memory_order_relaxed);
    }

    // The history ring's bytes, those written (the bits are counted by the
    // pager, as its other per-page bits: bits_per_page of them).
    static constexpr int bits_per_page = 3;
    std::uint64_t memory_bytes() const noexcept {
        return decltype(slots_)::memory_bytes(std::min(hand_.load(std::memory_order_relaxed), capacity_));
    }

private:
    page_bits in_history_, first_chance_, second_chance_;
    std::uint64_t capacity_;
    common::sparse_array<std::atomic<std::uint64_t>> slots_;  // page + 1, 0: empty
    std::atomic<std::uint64_t> hand_{0};
};

}  // namespace steppe::page
