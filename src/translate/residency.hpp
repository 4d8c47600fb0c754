// steppe::translate::residency — which store pages are resident, oldest
// first, and eviction down to a budget (second chance: a page that cannot be
// evicted because it was written goes to the back; commit makes it clean).
//
// Lock-free and async-signal-safe, because pages are recorded and evicted
// from the fault handler: producers claim a slot with one fetch_add on the
// head; one evictor at a time (a try-lock flag; others skip) consumes from the
// tail. A slot still 0 has not been written by its producer yet: the evictor
// stops there. When the ring is full a page goes unrecorded (it stays
// resident); the ring is sized with slack so that does not happen in practice.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace steppe::translate {

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
    // Evicts oldest-first until size() <= budget, trying at most `max_attempts`
    // pages. try_evict(page) evicts a clean page and says whether it did;
    // is_resident(page) says whether a page it refused is still there.
    template <class TryEvict, class IsResident>
    void shrink_to(std::uint64_t budget, TryEvict&& try_evict, IsResident&& is_resident,
                   int max_attempts = 256) noexcept {
        if (evicting_.test_and_set(std::memory_order_acquire)) return;
        for (int attempt = 0; attempt < max_attempts && size() > budget; ++attempt) {
            std::uint64_t t = tail_.load(std::memory_order_relaxed);
            std::uintptr_t page = slots_[t % capacity_].exchange(0, std::memory_order_acq_rel);
            if (page == 0) break;
            tail_.store(t + 1, std::memory_order_release);
            if (!try_evict(page) && is_resident(page)) record(page);  // written: second chance
        }
        evicting_.clear(std::memory_order_release);
    }

private:
    std::atomic<std::uintptr_t>* slots_;
    std::uint64_t capacity_;
    std::atomic<std::uint64_t> head_{0}, tail_{0};
    std::atomic_flag evicting_ = ATOMIC_FLAG_INIT;
};

}  // namespace steppe::translate
