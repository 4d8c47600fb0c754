// steppe::page::residency — which store pages are resident, oldest
// first, for the eviction thread (it takes batches from the tail and records
// again what it keeps).
//
// Lock-free and async-signal-safe, because pages are recorded from the fault
// handler: producers claim a slot with a CAS on the head; one evictor at a
// time (a try-lock flag; others get nothing) consumes from the tail. A slot
// still 0 has not been written by its producer yet: the evictor stops there.
// When the ring is full a page goes unrecorded (it stays resident, and
// unrecorded() counts it); the ring is sized with slack so that does not
// happen in practice.
//
// (Q1) Between operations (no record or take under way), every slot from
//      the tail to the head holds a page, and there are at most `capacity`
//      of them: record() claims a slot only while the ring has room and
//      writes it right after; pop_oldest() empties a slot before it moves
//      the tail past it; clear() empties the slots it skips. Checked by
//      check_invariants(); the page engine's own invariants on what the
//      ring names (R5, R6) are in pager.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/sparse_mapping.hpp"

namespace steppe::page {

class residency {
public:
    explicit residency(std::uint64_t capacity);
    ~residency();
    residency(const residency&) = delete;
    residency& operator=(const residency&) = delete;

    void record(std::uintptr_t page) noexcept;
    // Forgets every recorded page (all were discarded). Normal context, while
    // no other thread records or evicts.
    void clear() noexcept;
    // Recorded pages, including some that were discarded since (they are
    // dropped when the evictor meets them).
    std::uint64_t size() const noexcept {
        return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
    }
    // Takes up to `max` of the oldest recorded pages out into `out`, for an
    // evictor that decides on a batch at once and records again what it
    // keeps; 0 while another evictor runs.
    std::size_t take_oldest(std::uintptr_t* out, std::size_t max) noexcept;

    // For checkers, between operations: the recorded pages, oldest first;
    // how many pages record() turned away since the last clear() (the ring
    // was full); and Q1, one line per finding.
    std::vector<std::uintptr_t> recorded() const;
    std::uint64_t unrecorded() const noexcept { return unrecorded_.load(std::memory_order_relaxed); }
    std::vector<std::string> check_invariants() const;
    // Memory its slots hold: those ever written (NORESERVE), whole pages.
    std::uint64_t memory_bytes() const noexcept;

private:
    // The evictor's: the oldest page, or 0 if its producer has not written it yet.
    std::uintptr_t pop_oldest() noexcept {
        std::uint64_t t = tail_.load(std::memory_order_relaxed);
        std::uintptr_t page = slots_[t % capacity_].exchange(0, std::memory_order_acq_rel);
        if (page != 0) tail_.store(t + 1, std::memory_order_release);
        return page;
    }

    common::sparse_array<std::atomic<std::uintptr_t>> slots_;
    std::uint64_t capacity_;
    std::atomic<std::uint64_t> head_{0}, tail_{0};
    std::atomic<std::uint64_t> unrecorded_{0};
    std::atomic_flag evicting_ = ATOMIC_FLAG_INIT;
};

}  // namespace steppe::page
