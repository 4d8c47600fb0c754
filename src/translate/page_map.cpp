#include "translate/page_map.hpp"

#include <steppe/error.hpp>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace steppe::translate {
namespace {

// Side tables are NORESERVE anonymous memory: only the parts touched cost RAM,
// and mmap is async-signal-safe, so the fault handler may add an arena.
void* map_table(std::size_t bytes) noexcept {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

page_map::page_map(vm::fault_space& space, std::uint64_t max_pages, std::size_t arena_bytes)
    : space_(space), max_pages_(max_pages), arena_bytes_(arena_bytes) {
    forward_ = static_cast<std::atomic<std::uintptr_t>*>(map_table(max_pages * sizeof(std::uintptr_t)));
    if (!forward_)
        throw error(errc::io, "mmap of the page map (" + std::to_string(max_pages) + " entries) failed: " +
                                  std::strerror(errno));
    if (!add_arena()) {
        ::munmap(forward_, max_pages_ * sizeof(std::uintptr_t));
        throw error(errc::io, "reserving a " + std::to_string(arena_bytes >> 20) +
                                  " MiB address-space arena for the store failed: " + std::strerror(errno));
    }
    std::atomic<std::uint64_t>* reverse;
    dead_page_ = allocate_virtual(1, reverse);
    reverse->store(tag_retired, std::memory_order_relaxed);
}

page_map::~page_map() {
    for (std::size_t i = 0; i < arena_count_.load(); ++i)
        ::munmap(arenas_[i].reverse, arenas_[i].pages * sizeof(std::uint64_t));
    ::munmap(forward_, max_pages_ * sizeof(std::uintptr_t));
}

bool page_map::add_arena() noexcept {
    std::size_t n = arena_count_.load(std::memory_order_acquire);
    if (n == max_arenas) return false;
    vm::reserve_result r = space_.try_reserve(arena_bytes_);
    if (r.base == 0) {
        errno = r.error;
        return false;
    }
    arena& a = arenas_[n];
    a.pages = arena_bytes_ / page_size;
    a.reverse = static_cast<std::atomic<std::uint64_t>*>(map_table(a.pages * sizeof(std::uint64_t)));
    if (!a.reverse) return false;
    a.base = r.base;
    a.next.store(0, std::memory_order_relaxed);
    arena_count_.store(n + 1, std::memory_order_release);
    return true;
}

// Takes `pages` consecutive virtual pages from the newest arena, adding an
// arena when it is full (one thread adds; others wait for it).
std::uintptr_t page_map::allocate_virtual(std::uint64_t pages, std::atomic<std::uint64_t>*& reverse) noexcept {
    for (;;) {
        std::size_t n = arena_count_.load(std::memory_order_acquire);
        arena& a = arenas_[n - 1];
        std::uint64_t at = a.next.fetch_add(pages, std::memory_order_relaxed);
        if (at + pages <= a.pages) {
            reverse = a.reverse + at;
            return a.base + at * page_size;
        }
        if (pages > a.pages) return 0;
        bool expected = false;
        if (growing_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
            bool ok = arena_count_.load(std::memory_order_acquire) != n || add_arena();
            growing_.store(false, std::memory_order_release);
            if (!ok) return 0;
        } else {
            while (growing_.load(std::memory_order_acquire)) {
            }
        }
    }
}

std::uintptr_t page_map::reserve(unit u) noexcept {
    std::uintptr_t expected = 0;
    if (!forward_[u.head].compare_exchange_strong(expected, busy, std::memory_order_acq_rel)) {
        while (expected == busy) expected = forward_[u.head].load(std::memory_order_acquire);
        return expected;
    }
    std::atomic<std::uint64_t>* reverse;
    std::uintptr_t base = allocate_virtual(u.pages + 1, reverse);  // + the guard page
    if (base == 0) {
        forward_[u.head].store(0, std::memory_order_release);
        return 0;
    }
    for (std::uint64_t i = 0; i < u.pages; ++i)
        reverse[i].store(((u.head + i) << 2) | tag_page, std::memory_order_relaxed);
    reverse[u.pages].store(tag_guard, std::memory_order_relaxed);
    for (std::uint64_t i = 1; i < u.pages; ++i)
        forward_[u.head + i].store(base + i * page_size, std::memory_order_release);
    forward_[u.head].store(base, std::memory_order_release);
    return base;
}

const page_map::arena* page_map::arena_of(std::uintptr_t addr) const noexcept {
    std::size_t n = arena_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i) {
        const arena& a = arenas_[i];
        if (addr - a.base < a.pages * page_size) return &a;
    }
    return nullptr;
}

page_map::lookup_result page_map::lookup(std::uintptr_t addr) const noexcept {
    const arena* a = arena_of(addr);
    if (!a) return {kind::none, 0};
    std::uint64_t e = a->reverse[(addr - a->base) / page_size].load(std::memory_order_acquire);
    switch (e & 3) {
    case tag_page: return {kind::page, e >> 2};
    case tag_guard: return {kind::guard, 0};
    case tag_retired: return {kind::retired, 0};
    default: return {kind::none, 0};
    }
}

// A unit's pages are the run of page entries between two guards.
page_map::extent page_map::extent_of(std::uintptr_t v) const noexcept {
    const arena* a = arena_of(v);
    std::uint64_t at = (v - a->base) / page_size;
    auto is_page = [&](std::uint64_t i) { return (a->reverse[i].load() & 3) == tag_page; };
    std::uint64_t first = at, last = at;
    while (first > 0 && is_page(first - 1)) --first;
    while (last + 1 < a->pages && is_page(last + 1)) ++last;
    return {a, first, last};
}

unit page_map::reserved_unit(std::uint64_t page) const noexcept {
    std::uintptr_t v = virtual_of(page);
    if (v == 0) return {0, 0};
    extent e = extent_of(v);
    return {e.a->reverse[e.first].load() >> 2, e.last - e.first + 1};
}

void page_map::retire(std::uint64_t page) {
    std::uintptr_t v = virtual_of(page);
    if (v == 0) return;
    auto [a, first, last] = extent_of(v);
    for (std::uint64_t i = first; i <= last; ++i) {
        std::uint64_t p = a->reverse[i].load() >> 2;
        forward_[p].store(0, std::memory_order_release);
        a->reverse[i].store(tag_retired, std::memory_order_release);
    }
    space_.discard(a->base + first * page_size, last - first + 1);
}

std::uint64_t page_map::reserved_virtual_pages() const noexcept {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < arena_count_.load(); ++i)
        total += std::min(arenas_[i].next.load(), arenas_[i].pages);
    return total;
}

}  // namespace steppe::translate
