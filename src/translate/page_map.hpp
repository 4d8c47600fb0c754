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
// range is not reused while anything may still point into it, so stale
// pointers into it cannot alias new objects).
//
// Reservation is lock-free and async-signal-safe (the fault handler reserves
// the targets of the pointers it swizzles): the unit's head entry is claimed
// by CAS (0 -> busy), virtual pages come from an atomic bump pointer in the
// current arena, the reverse entries are written, then the forward entries,
// head last (release). A thread that finds `busy` spins until the head is
// published.
//
// Address-space reuse (Texas, Kakkad §3.6.2). The address space is a fixed
// number of arenas (max_arenas, each 1/max_arenas of the limit). Time is cut
// into epochs by start_epoch(), which runs in normal context while no other
// thread touches the store: it discards every resident page (the caller
// guarantees they are all clean; their data comes back from the store on the
// next touch) but keeps the mappings, so a page touched again refaults at the
// same address. An arena is *used* in an epoch when a page in it faults (or
// is installed) or a pointer resolves into it (use(), reserve()). Every
// pointer the program can load from the store comes from a page resident in
// this epoch, and such a page was swizzled (or installed) in this epoch, which
// marked the arenas it points into; pointers the program wrote into pages
// are in persistent form by then (no page may be dirty). So at the next
// start_epoch(), once those pages are discarded, nothing in memory points
// into an arena that was not used, and it is reclaimed: its forward and
// reverse entries are cleared (units, guards and retired ranges alike) and
// its bump pointer restarts at zero. Only pointers the program kept in its own variables across two
// epochs without touching their page can point there (they may then dangle).
// An arena that maps no page any more (only retired ranges: destroyed or
// rolled-back objects) is reclaimed too, used or not: a transaction that ran
// out of address space and was rolled back gives its space back at once.
//
// Invariant (P1): forward[p] != 0 iff p's unit is reserved and not retired,
// and then reverse[forward[p]] == page(p). A persistent page is mapped at most
// once (DESIGN invariant 2); reclaiming clears both sides together.
// Invariant (P2): an arena whose bump pointer is 0 holds no entries and no
// resident page; units are bumped from the arena `current`, and every other
// arena with entries was given up (its bump pointer went past its end).
// check_invariants() checks both; translate_test runs it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/page_size.hpp"
#include "common/prefetch.hpp"
#include "vm/vm.hpp"

namespace steppe::translate {

using common::page_size;

struct unit {
    std::uint64_t head;   // first persistent page
    std::uint64_t pages;  // 1 for a small page, the run length for a large object
    bool operator==(const unit&) const = default;
};

class page_map {
public:
    static constexpr std::size_t max_arenas = 64;
    // The smallest arena: room for a few units and their guards.
    static constexpr std::uint64_t min_arena_pages = 16;
    // The address space when no limit is asked for: 64 arenas of 64 GiB.
    static constexpr std::uint64_t default_limit_bytes = std::uint64_t{4} << 40;
    // Entries are 4 bytes each way (forward: arena and page in it; reverse:
    // the persistent page), which bounds both sides: arenas of at most 2^25
    // pages (an 8 TiB limit), persistent pages below 2^32 - 2.
    static constexpr unsigned arena_page_bits = 25;
    static constexpr std::uint64_t max_limit_bytes = max_arenas << arena_page_bits << 12;
    static constexpr std::uint64_t max_mappable_pages = (std::uint64_t{1} << 32) - 2;

    // `max_pages`: the largest persistent page number + 1 that can ever be
    // mapped (at most max_mappable_pages). `limit_bytes`: the virtual address
    // space the map may reserve, in max_arenas arenas (0:
    // default_limit_bytes). Throws invalid_argument for a limit below
    // max_arenas * min_arena_pages pages or above max_limit_bytes, io when
    // the first arena cannot be reserved.
    page_map(vm::fault_space& space, std::uint64_t max_pages, std::uint64_t limit_bytes);
    ~page_map();
    page_map(const page_map&) = delete;
    page_map& operator=(const page_map&) = delete;

    // Virtual address of persistent page `page`, 0 if its unit is not reserved.
    std::uintptr_t virtual_of(std::uint64_t page) const noexcept {
        return address_of(forward_[page].load(std::memory_order_acquire));
    }
    // Starts loading `page`'s entry into the cache (`page` < max_pages), as
    // heap::prefetch_describe does for its descriptor.
    void prefetch(std::uint64_t page) const noexcept { common::prefetch(&forward_[page]); }
    // The same, marking the arena used in this epoch: for pointers handed to
    // the program or written into a resident page. Async-signal-safe.
    std::uintptr_t use(std::uint64_t page) noexcept;
    // Reserves `u` if needed and marks its arena used; returns the virtual
    // address of page `u.head`, or 0 if the address space is exhausted.
    // Async-signal-safe.
    std::uintptr_t reserve(unit u) noexcept;

    enum class kind : std::uint8_t { none, page, guard, retired };
    struct lookup_result {
        kind what;
        std::uint64_t page;  // for kind::page
    };
    // What the virtual address `addr` is (none: not in any of our arenas).
    lookup_result lookup(std::uintptr_t addr) const noexcept;
    // The same for a page being faulted in or installed: a page marks its
    // arena used. Async-signal-safe.
    lookup_result touch(std::uintptr_t addr) noexcept;

    // The unit `page` is reserved in now ({0, 0} if none). Normal context.
    unit reserved_unit(std::uint64_t page) const noexcept;

    // Unmaps the unit that holds `page` (whatever its shape was) and retires
    // its virtual range. Normal context only.
    void retire(std::uint64_t page);

    // An address in a page that is never mapped (lookup says retired): where
    // pointers to pages that hold no objects (freed since) are swizzled to.
    // It lies outside the arenas, so reuse never hands it out.
    std::uintptr_t dead_page() const noexcept { return dead_page_; }

    // Starts a new epoch (see above): discards every resident page of every
    // arena, then reclaims the arenas not used since the previous call.
    // Normal context, no other thread touching the store, no dirty page.
    // Throws io if a page cannot be discarded (nothing is reclaimed then).
    struct reclaimed {
        std::uint64_t arenas = 0;
        std::uint64_t pages = 0;  // virtual pages: units, guards, retired ranges
    };
    reclaimed start_epoch();

    std::uint64_t max_pages() const noexcept { return max_pages_; }
    std::uint64_t arena_pages() const noexcept { return arena_pages_; }
    std::uint64_t limit_pages() const noexcept { return arena_pages_ * max_arenas; }
    std::uint64_t reserved_virtual_pages() const noexcept;
    // Memory the forward and reverse tables hold (NORESERVE: only what was
    // written costs): the forward entries of pages [0, page_count) (no unit
    // is reserved past the store's pages) and the reverse entries handed out
    // (a reclaimed arena gives its entries' memory back). 4 bytes per store
    // page plus 4 per virtual page reserved (a small page's unit is 2: the
    // page and its guard), rounded up to pages.
    std::uint64_t table_bytes(std::uint64_t page_count) const noexcept;

    // Checks P1 and P2 over the forward entries of pages [0, page_count) (the
    // pages the store has: no unit is reserved past them; the whole table is
    // max_pages entries, mostly never touched) and every reverse entry handed
    // out. Normal context, no other thread touching the store. Returns one
    // line per broken rule; empty when both hold.
    std::vector<std::string> check_invariants(std::uint64_t page_count) const;

private:
    // Forward entries: (the arena's index + 1) << arena_page_bits | the
    // page's index in the arena (so use() marks the arena without
    // searching), 0, or busy.
    static constexpr std::uint32_t busy = 1, in_arena_mask = (std::uint32_t{1} << arena_page_bits) - 1;
    static_assert(max_arenas << arena_page_bits <= std::uint64_t{1} << 32);
    static std::size_t arena_index(std::uint32_t entry) noexcept { return (entry >> arena_page_bits) - 1; }
    std::uint32_t entry_for(std::size_t index, std::uintptr_t v) const noexcept {
        return static_cast<std::uint32_t>(((index + 1) << arena_page_bits) | (v - arenas_[index].base) / page_size);
    }
    std::uintptr_t address_of(std::uint32_t entry) const noexcept {
        return entry <= busy ? 0 : arenas_[arena_index(entry)].base + (entry & in_arena_mask) * page_size;
    }
    // Reverse entries: the persistent page (never 0: page 0 is the storage
    // layer's and is never mapped), guard, retired, or 0 (none).
    static constexpr std::uint32_t reverse_guard = ~std::uint32_t{0}, reverse_retired = reverse_guard - 1;
    static bool names_page(std::uint32_t reverse) noexcept { return reverse != 0 && reverse < reverse_retired; }

    struct arena {
        std::uintptr_t base = 0;
        std::atomic<std::uint32_t>* reverse = nullptr;  // one entry per page
        std::atomic<std::uint64_t> next{0};              // bump pointer, in pages
        std::atomic<std::uint64_t> used_in{0};           // the last epoch it was used in
    };

    std::uintptr_t allocate_virtual(std::uint64_t pages, std::size_t& index,
                                    std::atomic<std::uint32_t>*& reverse) noexcept;
    bool switch_arena(std::size_t full) noexcept;
    bool add_arena() noexcept;
    void mark_used(std::size_t index) noexcept;
    struct extent {
        const arena* a;
        std::uint64_t first, last;  // arena page indices of the unit
    };
    extent extent_of(std::uintptr_t v) const noexcept;
    std::size_t arena_of(std::uintptr_t addr) const noexcept;  // max_arenas if none
    lookup_result lookup_in(std::size_t index, std::uintptr_t addr) const noexcept;
    std::uint64_t bumped(const arena& a) const noexcept;  // pages handed out (not past the end)
    bool holds_pages(const arena& a) const noexcept;
    std::uint64_t reclaim(arena& a);  // throws what fault_space::release_tables does, reclaimed all the same

    vm::fault_space& space_;
    std::uint64_t max_pages_;
    std::uint64_t arena_pages_;
    std::atomic<std::uint32_t>* forward_;
    arena arenas_[max_arenas];
    std::atomic<std::size_t> arena_count_{0};
    std::atomic<std::size_t> current_{0};  // the arena units are bumped from
    std::atomic<bool> growing_{false};     // one thread at a time switches or adds arenas
    std::atomic<std::uint64_t> epoch_{1};
    std::uintptr_t dead_page_ = 0;
};

}  // namespace steppe::translate
