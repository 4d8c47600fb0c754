// hold(), release() and evict_clean(): resident pages taken out of the
// program's reach while the evictor or a commit reads them (I5), then given
// back or dropped; and clean pages dropped by faulting threads. The rest of
// the space is in fault_space.cpp; its states and invariants (I1-I8) are in
// fault_space_impl.hpp. Everything here is async-signal-safe except
// release()'s callers' bookkeeping: evict_clean runs on faulting threads.

#include "common/crc32c.hpp"
#include "vm/fault_space_impl.hpp"
#include "vm/uapi.hpp"

#include <sys/ioctl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace steppe::vm::impl {

// Claimed like a fill (resident -> filling), and kept so until release(), so
// a touch that faults waits on the state like any touch of a page being
// filled; then moved out (I5) or made read-only, so that nothing can write it.
void space::hold(std::span<const std::uintptr_t> pages, std::span<held> out,
                 std::span<const std::byte*> contents) noexcept {
    for (std::size_t i = 0; i < pages.size(); ++i) {
        // A page named twice (the ring may) is taken once, at its first
        // index: release() finds its slot by searching for the page.
        const bool again = i > 0 && pages[i] == pages[i - 1];
        arena* a = i < max_held && !again ? arena_of(pages[i]) : nullptr;
        out[i] = a && claim_resident(a->states[a->index_of(pages[i])]) ? held::clean : held::none;
    }
    if (staging_ != 0) {
        hold_by_moving(pages, out);
        held_count_ = std::min(pages.size(), max_held);
        std::copy_n(pages.begin(), held_count_, held_);
    } else {
        hold_by_protecting(pages, out);
    }
    for (std::size_t i = 0; i < pages.size(); ++i)
        contents[i] = reinterpret_cast<const std::byte*>(staging_ != 0 ? slot(i) : pages[i]);
}

// One mprotect (and one scan) per run of pages: a write to a held page then
// faults (SIGSEGV) and waits on its state.
void space::hold_by_protecting(std::span<const std::uintptr_t> pages, std::span<held> out) noexcept {
    for_each_run(pages, out, find_arena, [&](arena& a, std::size_t first, std::size_t last) {
        const std::uintptr_t start = pages[first], end = pages[last - 1] + page_size;
        if (mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ) != 0) {
            for (std::size_t i = first; i < last; ++i) {
                finish(a.states[a.index_of(pages[i])], page_resident);
                out[i] = held::none;
            }
            return;
        }
        // Read-only now (mprotect flushed every TLB), so these answers are
        // final; mprotect keeps the write-protect bit wp_async tracking reads.
        mark_written(a, pages, out, first, last);
    });
}

// Which pages of the run pages[first, last) were written since the last
// take_dirty(): the page table for wp_async (an error counts as written:
// never drop what cannot be proved clean), the dirty bits otherwise.
void space::mark_written(arena& a, std::span<const std::uintptr_t> pages, std::span<held> out, std::size_t first,
                         std::size_t last) noexcept {
    if (tracking_ != tracking_kind::wp_async) {
        for (std::size_t i = first; i < last; ++i)
            if (dirty_bit(a, a.index_of(pages[i]))) out[i] = held::written;
        return;
    }
    const int err = scan_written(pages[first], pages[last - 1] + page_size, false,
                                 [&](std::uintptr_t from, std::uintptr_t to) {
                                     for (std::size_t i = first; i < last; ++i)
                                         if (pages[i] >= from && pages[i] < to) out[i] = held::written;
                                 });
    if (err)
        for (std::size_t i = first; i < last; ++i) out[i] = held::written;
}

// One scan and one UFFDIO_MOVE per run of pages, into slot i for pages[i].
void space::hold_by_moving(std::span<const std::uintptr_t> pages, std::span<held> out) noexcept {
    for_each_run(pages, out, find_arena, [&](arena& a, std::size_t first, std::size_t last) {
        mark_written(a, pages, out, first, last);  // final but for wp_async writes racing the move (below)
        move_out(a, pages, out, first, last);
    });
    if (!keeps_sums()) return;
    // A wp_async write between the scan and the move is seen only in the
    // contents: a page that changed since it was last known clean was written.
    for (std::size_t i = 0; i < pages.size(); ++i) {
        if (out[i] != held::clean) continue;
        arena* a = arena_of(pages[i]);
        if (common::crc32c(0, reinterpret_cast<const void*>(slot(i)), page_size) != a->sums[a->index_of(pages[i])])
            out[i] = held::written;
    }
}

void space::move_out(arena& a, std::span<const std::uintptr_t> pages, std::span<held> out, std::size_t first,
                     std::size_t last) noexcept {
    for (std::size_t i = first; i < last;) {
        uffdio_move move{};
        move.dst = slot(i);
        move.src = pages[i];
        move.len = (last - i) * page_size;
        move.mode = UFFDIO_MOVE_MODE_DONTWAKE;  // no waiters in SIGBUS mode
        if (ioctl(uffd_, UFFDIO_MOVE, &move) == 0) return;
        const int err = errno;
        i += move.move > 0 ? static_cast<std::size_t>(move.move) / page_size : 0;
        if (err == EAGAIN || i >= last) continue;
        if (moved_anyway(slot(i), pages[i])) {  // the error came after the move
            ++i;
            continue;
        }
        // This page cannot move (the kernel says busy: pinned, say); it stays put, not held.
        finish(a.states[a.index_of(pages[i])], page_resident);
        out[i++] = held::none;
    }
}

// One page, retried while the kernel says EAGAIN; false if it would not move.
bool space::move_page(std::uintptr_t dst, std::uintptr_t src) noexcept {
    uffdio_move move{};
    move.dst = dst;
    move.src = src;
    move.len = page_size;
    move.mode = UFFDIO_MOVE_MODE_DONTWAKE;  // no waiters in SIGBUS mode
    while (ioctl(uffd_, UFFDIO_MOVE, &move) != 0) {
        if (errno != EAGAIN && moved_anyway(dst, src)) return true;
        if (errno != EAGAIN) return false;
        move.move = 0;
    }
    return true;
}

// A move that failed may have happened all the same: Linux 6.18 was seen
// to move a page and still answer EEXIST (move = -17). The source's PTE was
// gone and the page was at the destination, which was empty before the call
// (seen with /proc/self/pagemap, in about one run in two of a writer
// evicting under a 2 MiB budget: BudgetTest.AVectorGrowsWhileWrittenPages-
// Spill). Taken for "not moved", the page stayed in its slot while its state
// said resident: the next touch faulted forever, and the slot, full, refused
// every later move. The source is claimed (no touch can fill it meanwhile)
// and the destination is ours and empty, so residency tells which way it
// went: the source gone and the destination there is a move, whatever the
// error said. mincore(2) is a plain system call, safe in the fault path.
bool space::moved_anyway(std::uintptr_t dst, std::uintptr_t src) noexcept {
    unsigned char at_dst = 0, at_src = 0;
    if (mincore(reinterpret_cast<void*>(dst), page_size, &at_dst) != 0 ||
        mincore(reinterpret_cast<void*>(src), page_size, &at_src) != 0)
        return false;
    return (at_dst & 1) && !(at_src & 1);
}

// A page taken out comes back to its (claimed, so empty) place; it could be
// neither here nor there, so a failure ends the process.
void space::move_back(std::uintptr_t page, std::uintptr_t from) noexcept {
    if (!move_page(page, from)) fatal("UFFDIO_MOVE", errno, page);
}

// Claimed like a fill while it decides, so a touch waits. A write to a clean
// page traps into the handler, which claims it too, for every tracking but
// wp_async: there the dirty bit is final once claimed. wp_async writes do
// not trap, so the page is moved aside and compared (I5).
// The copy for the cooling stage is taken where the page cannot change any
// more: claimed and write-protected (a write traps and waits), or moved aside.
bool space::evict_clean(std::uintptr_t page, std::byte* copy_to) noexcept {
    if (tracking_ == tracking_kind::wp_async && !keeps_sums()) return false;
    arena* a = arena_of(page);
    if (a == nullptr) return false;
    const std::size_t i = a->index_of(page);
    std::uint32_t& state = a->states[i];
    if (!claim_resident(state)) return false;
    const bool dropped = tracking_ == tracking_kind::wp_async ? drop_if_unchanged(*a, page, i, copy_to)
                                                              : drop_if_clean(*a, page, i, copy_to);
    if (dropped) {
        evictions_.fetch_add(1, std::memory_order_relaxed);
        make_missing(*a, i);
    } else {
        finish(state, page_resident);
    }
    return dropped;
}

bool space::drop_if_clean(arena& a, std::uintptr_t page, std::size_t index, std::byte* copy_to) noexcept {
    if (dirty_bit(a, index)) return false;
    if (copy_to) std::memcpy(copy_to, reinterpret_cast<const void*>(page), page_size);
    return unmap(a, page, 1, false) == 0;
}

bool space::drop_if_unchanged(arena& a, std::uintptr_t page, std::size_t index, std::byte* copy_to) noexcept {
    bool written = false;
    if (scan_written(page, page + page_size, false, [&](std::uintptr_t, std::uintptr_t) { written = true; }) != 0 ||
        written)
        return false;
    std::uint64_t free = free_fault_slots_.load(std::memory_order_acquire), bit = 0;
    do {
        if (free == 0) return false;  // 64 faulting threads evicting at once: let the eviction thread do it
        bit = free & -free;
    } while (!free_fault_slots_.compare_exchange_weak(free, free & ~bit, std::memory_order_acq_rel));
    const std::uintptr_t aside = slot(max_held + static_cast<std::size_t>(std::countr_zero(bit)));
    bool dropped = false;
    if (move_page(aside, page)) {
        dropped = common::crc32c(0, reinterpret_cast<const void*>(aside), page_size) == a.sums[index];
        if (!dropped) {
            move_back(page, aside);  // written after all
        } else {
            if (copy_to) std::memcpy(copy_to, reinterpret_cast<const void*>(aside), page_size);
            if (madvise(reinterpret_cast<void*>(aside), page_size, MADV_DONTNEED) != 0) fatal("madvise", errno, aside);
        }
    }
    free_fault_slots_.fetch_or(bit, std::memory_order_acq_rel);
    return dropped;
}

void space::release(std::span<const std::uintptr_t> pages, bool drop) noexcept {
    if (staging_ != 0) return release_moved(pages, drop);
    // Pages given back are held: treat them as such when cutting runs.
    constexpr std::size_t chunk = 256;
    held all_held[chunk];
    std::fill(std::begin(all_held), std::end(all_held), held::written);
    for (std::size_t at = 0; at < pages.size(); at += chunk) {
        const auto part = pages.subspan(at, std::min(chunk, pages.size() - at));
        for_each_run(part, std::span<const held>(all_held, part.size()), find_arena,
                     [&](arena& a, std::size_t first, std::size_t last) {
                         if (drop) {
                             if (const int err = unmap(a, part[first], last - first, true))
                                 fatal("madvise or mprotect", err, part[first]);
                         }
                         for (std::size_t i = first; i < last; ++i) {
                             const std::size_t index = a.index_of(part[i]);
                             if (drop) {
                                 clear_dirty(a, index);
                             } else {
                                 // Writable again unless mprotect tracking has not seen a write to it (I2).
                                 const bool writable = tracking_ != tracking_kind::mprotect || dirty_bit(a, index);
                                 const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
                                 if (mprotect(reinterpret_cast<void*>(part[i]), page_size, prot) != 0)
                                     fatal("mprotect", errno, part[i]);
                             }
                             if (drop) {
                                 make_missing(a, index);
                             } else {
                                 finish(a.states[index], page_resident);
                             }
                         }
                         if (drop) evictions_.fetch_add(last - first, std::memory_order_relaxed);
                     });
    }
}

// Dropped: the page is missing already; its slot is emptied (one madvise per
// run of slots). Kept: moved back from its slot (its PTE comes back without
// the write-protect bit, so wp_async reports it written: it was).
void space::release_moved(std::span<const std::uintptr_t> pages, bool drop) noexcept {
    std::size_t run_start = 0, run_end = 0;  // slots to empty, [start, end)
    const auto empty_slots = [&] {
        if (run_end > run_start && madvise(reinterpret_cast<void*>(slot(run_start)), (run_end - run_start) * page_size,
                                           MADV_DONTNEED) != 0)
            fatal("madvise", errno, slot(run_start));
    };
    for (std::uintptr_t page : pages) {
        const std::size_t i = static_cast<std::size_t>(std::lower_bound(held_, held_ + held_count_, page) - held_);
        arena* a = arena_of(page);
        if (i == held_count_ || held_[i] != page || a == nullptr) continue;  // not held
        const std::size_t index = a->index_of(page);
        if (drop) {
            if (i != run_end) {
                empty_slots();
                run_start = i;
            }
            run_end = i + 1;
            clear_dirty(*a, index);
            evictions_.fetch_add(1, std::memory_order_relaxed);
            make_missing(*a, index);
            continue;
        }
        move_back(page, slot(i));
        finish(a->states[index], page_resident);
    }
    empty_slots();
}

}  // namespace steppe::vm::impl
