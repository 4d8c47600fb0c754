// The page engine's fault path (async-signal-safe, run by the fault space
// for the first touch of a page):
//   - keep_within_budget, drop_oldest_clean, drop_clean: drop the oldest
//     clean pages past the budget, into the cooling pool (T5 in pager.hpp)
//   - read-ahead: note_fault_for_prefetch, prefetch_targets
//   - fill_page: take a cooling page's bytes back, or read the page, check
//     and swizzle its pointers (swizzle_word), relink its vtable pointers;
//     record it as resident (T2)
//   - unit_of, layout_of_page: what lies on a page, from the heap
//   - fatal errors: fatal, wild_access, bad_pointer, address_space_exhausted,
//     write_refused (a write to a read-only store)
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "page/pager.hpp"
#include "page/stored_pointer.hpp"
#include "common/sigsafe.hpp"

namespace steppe::page {


// The fault path's part (async-signal-safe). Past the budget, the oldest
// pages go at once if they are clean (on this thread, no other CPU is
// interrupted: cheaper than the eviction thread's batches); written ones go
// back to the ring for the eviction thread, which is woken, and waited for
// far past the budget.
void pager::keep_within_budget() noexcept {
    if (!resident_) return;
    if (opts_.follow_memory && resident_->size() >= follow_at_.load(std::memory_order_relaxed)) ask_evictor();
    if (resident_->size() <= ring_budget()) return;
    drop_oldest_clean();
    if (resident_->size() <= ring_budget()) return;
    ask_evictor();
    wait_for_evictor();
}

// T5 (pager.hpp) on the faulting thread: the two oldest pages of the ring go
// if clean. Reused ones met first go back to the ring instead (spare_reused),
// eight at most: where nearly every page was reused (a working set a little
// over the budget) the marks tell little, and a fault must not walk the ring
// to find an unmarked page (the eviction thread, called in, would go down to
// 15/16 of the budget and hold fewer pages); a page dropped past them loses
// its chances as it leaves. Pages a failed commit collected are written but
// no longer tracked as such, and new pages are clean until written: never
// dropped here (R2, R3).
void pager::drop_oldest_clean() noexcept {
    fault_drops_.fetch_add(1, std::memory_order_seq_cst);  // R9: announced, then a pause looked for
    if (paused_.load(std::memory_order_seq_cst) == 0) drop_two_oldest_clean();
    fault_drops_.fetch_sub(1, std::memory_order_release);
}

void pager::drop_two_oldest_clean() noexcept {
    int spared = 0;
    for (int looked = 0; looked < 2;) {
        std::uintptr_t oldest;
        if (resident_->take_oldest(&oldest, 1) == 0) return;
        if (spared < 8 && spare_reused(oldest)) {
            ++spared;
            record_again(oldest);
            continue;
        }
        ++looked;
        const bool kept = std::binary_search(unwritten_.begin(), unwritten_.end(), oldest) || is_new(oldest) ||
                          !drop_clean(oldest);
        if (kept) record_again(oldest);
    }
}

bool pager::spare_reused(std::uintptr_t page) noexcept {
    const auto where = map_->lookup(page);
    return where.what == translate::page_map::kind::page && history_->take_chance(where.page);
}

// The page cools (R7): published in the pool before the fault space may
// drop it, so a touch after the drop finds it, and withdrawn if it stays.
bool pager::drop_clean(std::uintptr_t page) noexcept {
    const auto where = map_->lookup(page);
    const bool data = where.what == translate::page_map::kind::page;
    const std::size_t slot = cooling_ && data ? cooling_->claim(where.page) : cooling::no_slot;
    bool dropped;
    if (slot == cooling::no_slot) {
        dropped = space_->evict_clean(page, nullptr);
    } else {
        dropped = space_->evict_clean(page, cooling_->bytes(slot));
        cooling_->settle(slot, where.page, dropped);
    }
    if (dropped && data) history_->left(where.page);
    return dropped;
}

// A page taken out of the ring and kept goes back to it (R6), unless it is
// missing (its next fill records it). A page another thread is filling,
// writing to or holding just now counts as kept: only resident ones would
// leave it out of the ring for good.
void pager::record_again(std::uintptr_t page) noexcept {
    if (!space_->is_missing(page)) resident_->record(page);
}


// Prefetching, "fool me once": every 1,024 hints the share that was used is
// judged; below a quarter, read-ahead pauses for the next 16,384 faults.
constexpr std::uint64_t prefetch_window = 1024, prefetch_pause = 16384;
constexpr int prefetch_per_page = 8;

void pager::note_fault_for_prefetch(std::uint64_t page) noexcept {
    if (prefetch_.hinted.mapped() && prefetch_.hinted.exchange(page, false, std::memory_order_relaxed)) {
        prefetch_.hits.fetch_add(1, std::memory_order_relaxed);
        prefetch_.window_hits.fetch_add(1, std::memory_order_relaxed);
    }
}

void pager::prefetch_targets(const std::uint64_t* pages, int count) noexcept {
    if (!prefetch_.hinted.mapped() || space_->stats().faults < prefetch_.resume_at_fault.load(std::memory_order_relaxed))
        return;
    for (int i = 0; i < count; ++i) {
        std::uint64_t target = pages[i];
        // Swizzling reserved every data page a pointer aims at; a page left
        // without a range is not one (a dangling pointer's): nothing to read.
        std::uintptr_t v = map_->virtual_of(target);
        if (!v || space_->is_resident(v) || prefetch_.hinted.exchange(target, true, std::memory_order_relaxed)) continue;
        storage_->prefetch(target);
        prefetch_.hints.fetch_add(1, std::memory_order_relaxed);
        if (prefetch_.window_hints.fetch_add(1, std::memory_order_relaxed) + 1 == prefetch_window) {
            if (prefetch_.window_hits.exchange(0, std::memory_order_relaxed) < prefetch_window / 4)
                prefetch_.resume_at_fault.store(space_->stats().faults + prefetch_pause, std::memory_order_relaxed);
            prefetch_.window_hints.store(0, std::memory_order_relaxed);
        }
    }
}

// The fault path --------------------------------------------------------------
//
// Async-signal-safe: it reads the heap's descriptors and the shapes (which only
// change when no other thread touches the store), reads the page with pread,
// reserves targets lock-free, and reports fatal errors with write(2).

bool pager::fill(void* self, std::uintptr_t page_addr, std::byte* out) noexcept {
    return static_cast<pager*>(self)->fill_page(page_addr, out);
}

// Descriptors are read in two reading scopes (D2 in heap/desc_table.hpp),
// none held while the fault waits for the eviction thread, which may trim.
// On the load-ahead thread (load_ahead.cpp) a page that cannot be loaded is
// refused (false: it stays missing, for a touch to report) instead of ending
// the process, and the page counts as no use of it (no history, no
// read-ahead, no drops: the loader stops at half the budget); the loader
// records it in the ring once it is mapped (a mapping may still fail).
bool pager::fill_page(std::uintptr_t page_addr, std::byte* out) noexcept {
    const bool ahead = detail::loading_ahead;
    auto where = map_->touch(page_addr);
    if (where.what != translate::page_map::kind::page) {
        if (ahead) return false;
        wild_access(page_addr, where.what);
    }
    std::uint64_t page = where.page;
    if (!holds_data(page) || (page >= storage_->page_count() && !storage_->is_pending(page))) {
        std::memset(out, 0, translate::page_size);  // freed since, or never written
        return true;
    }
    if (cooling_ && cooling_->rewarm(page, out)) {  // the bytes it had: read and swizzled already
        if (!ahead) {  // the loader never waits for the eviction thread: a pause waits for it (R10)
            history_->touched(page);
            keep_within_budget();
            resident_->record(page_addr);
        }
        return true;
    }
    if (!ahead) {
        if (history_) history_->came_back(page);
        keep_within_budget();
        note_fault_for_prefetch(page);
    }
    storage::read_failure why;
    const std::uint64_t read_start = common::monotonic_ns();
    if (!storage_->read_page_nothrow(page, out, &why, !ahead)) {  // the loader brought its pages in itself
        if (ahead) return false;
        // Only damage is check's to see: a read refused otherwise (a reader
        // whose snapshot a server no longer keeps, an I/O error) says itself
        // what to do (a tester was sent to look for damage there was none of).
        fatal("cannot load", page, why.message,
              why.code == errc::corrupt ? nullptr : "nothing shows the store is damaged; do what the message says");
    }
    const std::uint64_t swizzle_start = common::monotonic_ns();
    if (!swizzle_page(page, out)) return false;
    if (!ahead) {
        miss_io_ns_.fetch_add(swizzle_start - read_start, std::memory_order_relaxed);
        miss_swizzle_ns_.fetch_add(common::monotonic_ns() - swizzle_start, std::memory_order_relaxed);
    }
    if (resident_ && !ahead) resident_->record(page_addr);
    if (resident_ && heap_->descriptor_bytes() > descriptor_bytes_allowed()) ask_evictor();  // it trims them
    return true;
}

bool pager::holds_data(std::uint64_t page) const noexcept {
    const heap::descriptor_reading reading = heap_->reading_descriptors();
    const heap::page_desc* d = heap_->describe(page);
    return d && d->is_data();
}

// The pointers of a page just read, and its vtable pointers, in place. A
// fault ends the process on the first one that cannot be; a load ahead
// refuses the page (false).
bool pager::swizzle_page(std::uint64_t page, std::byte* out) noexcept {
    const bool ahead = detail::loading_ahead;
    const heap::descriptor_reading reading = heap_->reading_descriptors();
    translate::page_layout layout = layout_of_page(page);  // its bitmap is in a descriptor: read inside the scope
    if (!layout.type) {
        if (ahead) return false;
        fatal("cannot swizzle", page, "its type is not in the store's type catalog");
    }
    prefetch_pointer_targets(layout, out);
    std::uint64_t count = 0;
    std::uint64_t targets[prefetch_per_page];
    int target_count = 0;
    bool refused = false;
    translate::for_each_pointer(layout, [&](std::size_t at, std::uint32_t field) {
        std::uint64_t word;
        std::memcpy(&word, out + at, sizeof word);
        ++count;
        if (word == 0 || refused) return;
        std::uint64_t target = 0;
        if (!admitted(*heap_, word, target)) {  // S1 (stored_pointer.hpp)
            if (ahead) {
                refused = true;
                return;
            }
            bad_pointer(page, at, field, layout.type, word, aim_of(*heap_, word));
        }
        if (target != page && target_count < prefetch_per_page &&
            (target_count == 0 || targets[target_count - 1] != target))
            targets[target_count++] = target;
        bool ok = true;
        std::uintptr_t v = swizzle_word(word, ok);
        if (v == 0 && ahead && !ok) refused = true;  // no address space left for the target
        std::memcpy(out + at, &v, sizeof v);
    });
    if (refused) return false;
    pointers_swizzled_.fetch_add(count, std::memory_order_relaxed);
    translate::for_each_vptr(layout, [&](std::size_t at, std::uint32_t) {
        std::uint64_t token;
        std::memcpy(&token, out + at, sizeof token);
        if (token == 0 || refused) return;  // not constructed
        // A class this executable lacks gets its stand-in (types/missing_class.hpp).
        std::uintptr_t v = vtables_.relink(token);
        if (v == 0 && ahead) {
            refused = true;
            return;
        }
        if (v == 0 && vtables_.moved_address_point(token)) {
            static char why[768];
            common::fixed_message(why, sizeof why)
                << "the vtable pointer at byte " << std::uint64_t{at} << " names "
                << vtables_.name(static_cast<std::uint32_t>(token >> 32)).c_str() << " + "
                << std::uint64_t{static_cast<std::uint32_t>(token)}
                << ", which in this program is no address point of the class's vtable group: the class's vtable "
                   "group changed shape since the store was written (virtual functions added or removed, in the "
                   "class or a base of it?), so its objects' vtable pointers cannot be relinked";
            fatal("cannot relink the vtable pointers of", page, why,
                  "rebuild with the old class, or copy the objects out with a program built with it (docs/types.md)");
        }
        if (v == 0) {
            static char why[512];
            common::fixed_message(why, sizeof why)
                << "the vtable pointer at byte " << std::uint64_t{at} << " holds token " << common::in_hex{token}
                << ", which names no symbol of the store's vtable table or, for a class this executable lacks, an "
                   "offset outside the 64 KiB stand-in it is relinked to (or that stand-in could not be mapped)";
            fatal("cannot relink the vtable pointers of", page, why);
        }
        std::memcpy(out + at, &v, sizeof v);
    });
    if (refused) return false;
    if (!ahead) prefetch_targets(targets, target_count);
    return true;
}

// The targets of a page's pointers are scattered over the heap's
// descriptors and the page map, and looking them up one by one waits for one
// cache miss after another (on OO1 huge, warm, that wait was a fifth of the
// time). Asking for all of them first lets the misses overlap.
void pager::prefetch_pointer_targets(const translate::page_layout& layout, const std::byte* image) const noexcept {
    translate::for_each_pointer(layout, [&](std::size_t at, std::uint32_t) {
        std::uint64_t word;
        std::memcpy(&word, image + at, sizeof word);
        const std::uint64_t page = (word & ~translate::end_tag) / translate::page_size;
        if (page == 0 || page >= heap_->page_count()) return;
        heap_->prefetch_describe(page);
        map_->prefetch(page);
    });
}

std::uintptr_t pager::swizzle_word(std::uint64_t word, bool& ok) noexcept {
    if (word == 0) return 0;
    bool end = (word & translate::end_tag) != 0;
    std::uint64_t a = word & ~translate::end_tag;
    if (end) {
        if (a == 0) return ok = false, 0;
        a -= 1;  // the last byte of the unit; +1 again below
    }
    std::uint64_t page = a / translate::page_size;
    if (page == 0 || page >= heap_->page_count()) return ok = false, 0;
    std::uintptr_t v = map_->use(page);
    if (v == 0 && !heap_->describe(page)->is_data()) {
        // A dangling pointer (its page was freed): it must not reserve the
        // page in a shape that a rollback would make wrong, so it leads to a
        // page that is never mapped. Committed as is, it is stored as null.
        return map_->dead_page() + a % translate::page_size + (end ? 1 : 0);
    }
    if (v == 0) {
        v = reserve_data_page(page);
        if (v == 0 && detail::loading_ahead) return ok = false, 0;
        if (v == 0) address_space_exhausted(page, unit_of(page));
    }
    return v + a % translate::page_size + (end ? 1 : 0);
}

std::uintptr_t pager::reserve_data_page(std::uint64_t page) noexcept {
    const translate::unit u = unit_of(page);
    const std::uintptr_t base = map_->reserve(u);
    return base == 0 ? 0 : base + (page - u.head) * translate::page_size;
}

translate::unit pager::unit_of(std::uint64_t page) const noexcept {
    const heap::page_desc* d = heap_->describe(page);
    if (d && d->kind() == heap::page_kind::large_head) return {page, d->run_pages()};
    if (d && d->kind() == heap::page_kind::large_tail) {
        std::uint64_t head = page - d->head_distance();
        return {head, heap_->describe(head)->run_pages()};
    }
    return {page, 1};
}

translate::page_layout pager::layout_of_page(std::uint64_t page) const noexcept {
    return layout_of_page(*heap_, page);
}

translate::page_layout pager::layout_of_page(const heap& h, std::uint64_t page) const noexcept {
    translate::page_layout l;
    const heap::page_desc* d = h.describe(page);
    if (!d || !d->is_data() || d->type() >= shapes_.size()) return l;
    l.type = &shapes_[d->type()];
    l.elem_size = d->elem_size();
    if (d->kind() == heap::page_kind::small) {
        l.what = translate::page_layout::kind::small;
        l.chunk_size = d->chunk_size();
        l.bitmap = d->bitmap().data();
        return l;
    }
    std::uint64_t head = page - d->head_distance();
    l.what = translate::page_layout::kind::large;
    l.offset_in_object = (page - head) * translate::page_size;
    l.elem_count = h.describe(head)->elem_count();
    return l;
}

void pager::fatal(const char* what, std::uint64_t page, const char* detail, const char* advice) const noexcept {
    static char buf[2048];
    common::fixed_message msg(buf, sizeof buf);
    msg << "steppe: fatal: " << what << " page " << page << " of store " << storage_->path().c_str() << ": "
        << detail << ". The access that touched it cannot go on, so the process ends; ";
    if (advice)
        msg << advice;
    else
        msg << "run `steppe check " << storage_->path().c_str() << "` to see the damage";
    msg << ".\n";
    if (opts_.fatal_hook) opts_.fatal_hook(buf);
    common::fatal_exit(buf);
}

void pager::wild_access(std::uintptr_t address, translate::page_map::kind what) const noexcept {
    static char buf[1024];
    common::fixed_message msg(buf, sizeof buf);
    msg << "steppe: fatal: the program touched " << common::in_hex{address} << " in the address space of store "
        << storage_->path().c_str() << ", where no object is: ";
    if (what == translate::page_map::kind::guard)
        msg << "the guard page after an object (a pointer past an object's end was followed, or a dangling pointer)";
    else if (what == translate::page_map::kind::retired)
        msg << "a range an address-space reuse round gave back (a pointer kept in a variable across two rounds "
               "without touching its page dangles: docs/guarantees.md, promise 7)";
    else
        msg << "a range no object was given (a dangling or made-up pointer)";
    msg << ". The access cannot go on, so the process ends.\n";
    if (opts_.fatal_hook) opts_.fatal_hook(buf);
    common::fatal_exit(buf);
}

void pager::refuse_write(void* self, std::uintptr_t address) noexcept {
    static_cast<pager*>(self)->write_refused(address);
}

namespace {
// The byte of its element that `address` (in a page laid out as `l`) is,
// or -1 past the elements of its chunk or where no type is known.
std::int64_t offset_in_element(const translate::page_layout& l, std::uintptr_t address) noexcept {
    if (l.what == translate::page_layout::kind::opaque || l.elem_size == 0) return -1;
    std::uint64_t at = address % translate::page_size;
    if (l.what == translate::page_layout::kind::small) {
        at %= l.chunk_size;
        if (at >= l.chunk_size / l.elem_size * l.elem_size) return -1;
    } else {
        at += l.offset_in_object;
    }
    return static_cast<std::int64_t>(at % l.elem_size);
}
}  // namespace

// Like a write to const memory: a programming error, so the process ends
// naming what was written. A write outside every object (a guard page, a
// range given back) is a wild access first.
void pager::write_refused(std::uintptr_t address) const noexcept {
    const auto where = map_->lookup(address);
    if (where.what != translate::page_map::kind::page) wild_access(address, where.what);
    const heap::descriptor_reading reading = heap_->reading_descriptors();
    const translate::page_layout l = layout_of_page(where.page);
    static char buf[1536];
    common::fixed_message msg(buf, sizeof buf);
    msg << "steppe: fatal: the program wrote to " << common::in_hex{address} << " (page " << where.page
        << " of store " << storage_->path().c_str() << ", which is open read-only): ";
    if (const std::int64_t at = offset_in_element(l, address); at >= 0) {
        const auto offset = static_cast<std::uint32_t>(at);
        msg << "byte " << offset << " of an object of type " << l.type->name.c_str() << l.type->field_context(offset);
    } else {
        msg << "memory of the store that holds no object";
    }
    msg << ". Objects of a store opened with open_options::read_only may only be read (open it without read_only "
           "to change them). The write cannot go on, so the process ends.\n";
    if (opts_.fatal_hook) opts_.fatal_hook(buf);
    common::fatal_exit(buf);
}

void pager::bad_pointer(std::uint64_t page, std::size_t at, std::uint32_t field, const translate::type_shape* type,
                        std::uint64_t word, const pointer_aim& aim) const noexcept {
    static char why[1024];
    common::fixed_message m(why, sizeof why);
    describe_field(m, at, field, type);
    m << " ";
    describe_aim(m, word, aim, *heap_);
    m << " (a stored pointer must aim inside an allocated object, one past its end, or at freed memory)";
    fatal("cannot swizzle", page, why);
}

// Why a unit of `unit_pages` got no address space, and what to do about it:
// one text for the fault path (so no allocation) and for make().
void pager::explain_no_address_space(std::uint64_t unit_pages, common::fixed_message& why,
                                     common::fixed_message& advice) const noexcept {
    constexpr std::uint64_t mib = 1 << 20;
    const std::uint64_t arenas = translate::page_map::max_arenas, arena_pages = map_->arena_pages();
    if (unit_pages + 1 > arena_pages) {
        why << "it is part of an object of " << unit_pages << " pages, and the address space is cut into "
            << arenas << " arenas of " << arena_pages << " pages (open_options::address_space_limit / " << arenas
            << "), each unit with a guard page";
        advice << "open the store with an address_space_limit of at least "
               << ((unit_pages + 1) * arenas * translate::page_size + mib - 1) / mib << " MiB";
        return;
    }
    why << "all " << map_->limit_pages() * translate::page_size / mib
        << " MiB of its address space (open_options::address_space_limit) are reserved";
    advice << "call commit() or rollback() now and then during long walks, so that the address space of pages the "
              "program stopped touching is reused (or call store::reuse_address_space()), or open the store with "
              "a larger address_space_limit";
}

void pager::address_space_exhausted(std::uint64_t page, translate::unit u) const noexcept {
    static char why[512], advice[512];
    common::fixed_message w(why, sizeof why), a(advice, sizeof advice);
    explain_no_address_space(u.pages, w, a);
    fatal("cannot reserve address space for", page, why, advice);
}

}  // namespace steppe::page
