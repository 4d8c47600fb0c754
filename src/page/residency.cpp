#include "page/residency.hpp"

#include <steppe/error.hpp>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace steppe::page {

residency::residency(std::uint64_t capacity) : capacity_(capacity) {
    void* p = ::mmap(nullptr, capacity * sizeof(std::uintptr_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        throw error(errc::io, "mmap of the residency ring (" + std::to_string(capacity) + " entries) failed: " +
                                  std::strerror(errno));
    slots_ = static_cast<std::atomic<std::uintptr_t>*>(p);
}

residency::~residency() { ::munmap(slots_, capacity_ * sizeof(std::uintptr_t)); }

void residency::record(std::uintptr_t page) noexcept {
    if (size() >= capacity_) return;
    std::uint64_t h = head_.fetch_add(1, std::memory_order_acq_rel);
    slots_[h % capacity_].store(page, std::memory_order_release);
}

// Consumed slots are already 0 (the evictor exchanges them); zero the rest,
// so that a slot is non-zero only once its producer wrote it.
void residency::clear() noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (std::uint64_t t = tail_.load(std::memory_order_relaxed); t < head; ++t)
        slots_[t % capacity_].store(0, std::memory_order_relaxed);
    tail_.store(head, std::memory_order_release);
}

std::size_t residency::take_oldest(std::uintptr_t* out, std::size_t max) noexcept {
    if (evicting_.test_and_set(std::memory_order_acquire)) return 0;
    std::size_t n = 0;
    for (std::uintptr_t page; n < max && (page = pop_oldest()) != 0;) out[n++] = page;
    evicting_.clear(std::memory_order_release);
    return n;
}

}  // namespace steppe::page
