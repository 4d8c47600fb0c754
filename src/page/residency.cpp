#include "page/residency.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace steppe::page {

residency::residency(std::uint64_t capacity) : slots_(capacity), capacity_(capacity) {
    if (!slots_.mapped())
        throw error(errc::io, "mmap of the residency ring (" + std::to_string(capacity) + " entries) failed: " +
                                  std::strerror(errno));
}

residency::~residency() = default;

std::uint64_t residency::memory_bytes() const noexcept {
    return decltype(slots_)::memory_bytes(std::min(head_.load(std::memory_order_relaxed), capacity_));
}

// A slot is claimed only while the ring has room (Q1): two producers that
// both saw the last free slot cannot both take it and overwrite the oldest.
// (A head read before the tail moved past it is stale: the CAS fails.)
void residency::record(std::uintptr_t page) noexcept {
    std::uint64_t h = head_.load(std::memory_order_acquire);
    do {
        const std::uint64_t t = tail_.load(std::memory_order_acquire);
        if (h >= t && h - t >= capacity_) {
            unrecorded_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
    } while (!head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel));
    slots_[h % capacity_].store(page, std::memory_order_release);
}

// Consumed slots are already 0 (the evictor exchanges them); zero the rest,
// so that a slot is non-zero only once its producer wrote it.
void residency::clear() noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (std::uint64_t t = tail_.load(std::memory_order_relaxed); t < head; ++t)
        slots_[t % capacity_].store(0, std::memory_order_relaxed);
    tail_.store(head, std::memory_order_release);
    unrecorded_.store(0, std::memory_order_relaxed);
}

std::size_t residency::take_oldest(std::uintptr_t* out, std::size_t max) noexcept {
    if (evicting_.test_and_set(std::memory_order_acquire)) return 0;
    std::size_t n = 0;
    for (std::uintptr_t page; n < max && (page = pop_oldest()) != 0;) out[n++] = page;
    evicting_.clear(std::memory_order_release);
    return n;
}

std::vector<std::uintptr_t> residency::recorded() const {
    std::vector<std::uintptr_t> pages;
    const std::uint64_t head = head_.load(std::memory_order_acquire), tail = tail_.load(std::memory_order_acquire);
    for (std::uint64_t t = tail; t < head && t < tail + capacity_; ++t)
        pages.push_back(slots_[t % capacity_].load(std::memory_order_acquire));
    return pages;
}

std::vector<std::string> residency::check_invariants() const {
    std::vector<std::string> findings;
    const std::uint64_t head = head_.load(std::memory_order_acquire), tail = tail_.load(std::memory_order_acquire);
    if (head - tail > capacity_)
        findings.push_back("Q1: " + std::to_string(head - tail) + " pages recorded in a ring of " +
                           std::to_string(capacity_));
    for (std::uint64_t t = tail; t < head && t < tail + capacity_; ++t)
        if (slots_[t % capacity_].load(std::memory_order_acquire) == 0)
            findings.push_back("Q1: slot " + std::to_string(t) + " between the tail " + std::to_string(tail) +
                               " and the head " + std::to_string(head) + " holds no page");
    return findings;
}

}  // namespace steppe::page
