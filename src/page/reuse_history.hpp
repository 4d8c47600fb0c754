// steppe::page::reuse_history — what eviction learns of pages that come
// back (issue 18 item 5). The residency ring has no reference bits for
// resident pages (a userfaultfd or mprotect store sees only the first touch
// of a page), so it learns what is used where a page proves it: a page
// faulted in again soon after it left memory (its number is still in the
// history of the last `capacity` pages that left: 2Q's "A1out" queue), or
// taken back from the cooling pool, is *reused*. Each reuse raises the
// page's level (1 to 3, kept while the page is away) and gives it four
// chances a level; an evictor that meets a page with a chance left at the
// ring's tail takes one and records the page again instead of dropping it,
// as CLOCK spares a page whose reference bit is set. So a page used once
// goes after one turn of the ring, a page that came back once stays five,
// and one that keeps coming back stays thirteen: a little frequency, as
// LFU and 2Q weigh it, where the ring alone knows only the order of first
// touches (evict_bench: docs/benchmarks.md, "Pages that come back often
// stay longer"). A page that stays away longer than the history keeps its
// level but gets no chance until it comes back in time again. It only
// decides which page goes first: nothing is written or kept on its word,
// and a mark that is wrong (a page number reused) costs twelve turns of
// the ring at most.
//
// Lock-free and async-signal-safe: faulting threads mark pages and drop
// them. Per persistent page one byte, changed by compare-and-swap (in the
// history, level, chances); the history is a ring of page numbers taken
// round-robin. A page that leaves twice within the history's length loses
// its "in the history" bit when its first entry is overwritten: a lost
// mark, no harm.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "common/sparse_mapping.hpp"

namespace steppe::page {

class reuse_history {
public:
    // `capacity` pages of history (at least 1); `pages`: the largest
    // persistent page number + 1. mapped() is false when an mmap failed.
    reuse_history(std::uint64_t capacity, std::uint64_t pages)
        : state_(pages), capacity_(capacity ? capacity : 1), slots_(capacity_) {}

    static_assert(std::atomic<std::uint8_t>::is_always_lock_free, "the fault path uses it");
    static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the fault path uses it");
    bool mapped() const noexcept { return state_.mapped() && slots_.mapped(); }

    static constexpr unsigned max_level = 3, chances_per_level = 4;

    // The page left memory (dropped, or spilled and dropped): it has no
    // chance left (an evictor may drop a page without asking), keeps its
    // level, and earns chances by coming back.
    void left(std::uint64_t page) noexcept {
        update(page, [](std::uint8_t s) { return std::uint8_t((s & level_mask) | history_bit); });
        const std::uint64_t slot = hand_.fetch_add(1, std::memory_order_relaxed) % capacity_;
        const std::uint64_t old = slots_[slot].exchange(page + 1, std::memory_order_relaxed);
        if (old != 0 && old != page + 1)
            update(old - 1, [](std::uint8_t s) { return std::uint8_t(s & ~history_bit); });
    }
    // The page was read in again: reused if it left recently. (A load first:
    // most fills are of pages not in the history, and a read-modify-write
    // would take their cache line exclusive for nothing.)
    void came_back(std::uint64_t page) noexcept {
        if (state_[page].load(std::memory_order_relaxed) & history_bit) touched(page);
    }
    // The page was touched while cooling, or came back in time: reused.
    void touched(std::uint64_t page) noexcept {
        update(page, [](std::uint8_t s) {
            const unsigned level = std::min(unsigned((s & level_mask) >> level_shift) + 1, max_level);
            return std::uint8_t(level << level_shift | level * chances_per_level);
        });
    }
    // For an evictor at the ring's tail: whether the page has a chance left
    // (and takes it).
    bool take_chance(std::uint64_t page) noexcept {
        bool took = false;
        update(page, [&took](std::uint8_t s) {
            took = (s & chances_mask) != 0;
            return std::uint8_t(took ? s - 1 : s);
        });
        return took;
    }

    // What it takes once written: the history ring's bytes, those written
    // (the pages' bytes are counted by the pager with its other per-page
    // bits: bits_per_page of them, written up to the last page).
    static constexpr int bits_per_page = 8;
    std::uint64_t memory_bytes() const noexcept {
        return decltype(slots_)::memory_bytes(std::min(hand_.load(std::memory_order_relaxed), capacity_));
    }

private:
    // A page's byte: bit 7 in the history, bits 4-5 its level, bits 0-3 its chances.
    static constexpr std::uint8_t history_bit = 0x80, level_mask = 0x30, chances_mask = 0x0f;
    static constexpr unsigned level_shift = 4;
    static_assert(max_level << level_shift <= level_mask && max_level * chances_per_level <= chances_mask);

    template <class F>
    void update(std::uint64_t page, F next) noexcept {
        std::atomic<std::uint8_t>& s = state_[page];
        std::uint8_t was = s.load(std::memory_order_relaxed);
        while (!s.compare_exchange_weak(was, next(was), std::memory_order_relaxed)) {
        }
    }

    common::sparse_array<std::atomic<std::uint8_t>> state_;
    std::uint64_t capacity_;
    common::sparse_array<std::atomic<std::uint64_t>> slots_;  // page + 1, 0: empty
    std::atomic<std::uint64_t> hand_{0};
};

}  // namespace steppe::page
