// steppe::translate::page_map — which virtual page holds which persistent page.
//
// A *unit* is what gets one contiguous virtual range: a single small page, or
// a whole large-object run (a pointer into any page of a run reserves the
// run, so the object is contiguous in memory; its pages still fault one at a
// time). Every unit is followed by one guard page that never maps anything,
// so a one-past-the-end pointer of a unit is the guard's first byte and can
// never be mistaken for a pointer into the next unit (see swizzle.hpp).
//
// Forward map: persistent page -> virtual address of that page, for every page
// of every reserved unit. Reverse map: per arena page, the persistent page it
// holds, or guard, or retired (a unit whose pages changed shape: its virtual
// range is never reused, so stale pointers into it cannot alias new objects).
//
// Reservation is lock-free and async-signal-safe (the fault handler reserves
// the targets of the pointers it swizzles): the unit's head entry is claimed
// by CAS (0 -> busy), virtual pages come from an atomic bump pointer, the
// reverse entries are written, then the forward entries, head last (release).
// A thread that finds `busy` spins until the head is published.
//
// Invariant (P1): forward[p] != 0 iff p's unit is reserved and not retired,
// and then reverse[forward[p]] == page(p). A persistent page is mapped at most
// once (DESIGN invariant 2).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "vm/vm.hpp"

namespace steppe::translate {

inline constexpr std::size_t page_size = 4096;

struct unit {
    std::uint64_t head;   // first persistent page
    std::uint64_t pages;  // 1 for a small page, the run length for a large object
    bool operator==(const unit&) const = default;
};

class page_map {
public:
    // `max_pages`: the largest persistent page number + 1 that can ever be mapped.
    page_map(vm::fault_space& space, std::uint64_t max_pages, std::size_t arena_bytes);
    ~page_map();
    page_map(const page_map&) = delete;
    page_map& operator=(const page_map&) = delete;

    // Virtual address of persistent page `page`, 0 if its unit is not reserved.
    std::uintptr_t virtual_of(std::uint64_t page) const noexcept {
        std::uintptr_t v = forward_[page].load(std::memory_order_acquire);
        return v == busy ? 0 : v;
    }
    // Reserves `u` if needed; returns the virtual address of page `u.head`,
    // or 0 if the address space is exhausted. Async-signal-safe.
    std::uintptr_t reserve(unit u) noexcept;

    enum class kind : std::uint8_t { none, page, guard, retired };
    struct lookup_result {
        kind what;
        std::uint64_t page;  // for kind::page
    };
    // What the virtual address `addr` is (none: not in any of our arenas).
    lookup_result lookup(std::uintptr_t addr) const noexcept;

    // The unit `page` is reserved in now ({0, 0} if none). Normal context.
    unit reserved_unit(std::uint64_t page) const noexcept;

    // Unmaps the unit that holds `page` (whatever its shape was) and retires
    // its virtual range. Normal context only.
    void retire(std::uint64_t page);

    // An address in a page that is never mapped (lookup says retired): where
    // pointers to pages that hold no objects (freed since) are swizzled to.
    std::uintptr_t dead_page() const noexcept { return dead_page_; }

    std::uint64_t max_pages() const noexcept { return max_pages_; }
    std::uint64_t reserved_virtual_pages() const noexcept;

private:
    static constexpr std::uintptr_t busy = 1;
    // Reverse entries: (page << 2) | tag.
    static constexpr std::uint64_t tag_page = 1, tag_guard = 2, tag_retired = 3;
    static constexpr std::size_t max_arenas = 64;

    struct arena {
        std::uintptr_t base = 0;
        std::uint64_t pages = 0;
        std::atomic<std::uint64_t>* reverse = nullptr;  // one entry per page
        std::atomic<std::uint64_t> next{0};              // bump pointer, in pages
    };

    std::uintptr_t allocate_virtual(std::uint64_t pages, std::atomic<std::uint64_t>*& reverse) noexcept;
    struct extent {
        const arena* a;
        std::uint64_t first, last;  // arena page indices of the unit
    };
    extent extent_of(std::uintptr_t v) const noexcept;
    bool add_arena() noexcept;
    const arena* arena_of(std::uintptr_t addr) const noexcept;

    vm::fault_space& space_;
    std::uint64_t max_pages_;
    std::size_t arena_bytes_;
    std::atomic<std::uintptr_t>* forward_;
    arena arenas_[max_arenas];
    std::atomic<std::size_t> arena_count_{0};
    std::atomic<bool> growing_{false};
    std::uintptr_t dead_page_ = 0;
};

}  // namespace steppe::translate
