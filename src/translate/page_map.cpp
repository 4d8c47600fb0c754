#include "translate/page_map.hpp"

#include "common/hex.hpp"
#include "common/sparse_mapping.hpp"

#include <steppe/error.hpp>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace steppe::translate {
namespace {

// Side tables are NORESERVE anonymous memory: only the parts touched cost RAM,
// and mmap is async-signal-safe, so the fault handler may add an arena.
void* map_table(std::size_t bytes) noexcept {
    void* p = common::map_sparse(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

std::uint64_t round_to_pages(std::uint64_t bytes) { return (bytes + page_size - 1) / page_size * page_size; }

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Why a reservation of address space failed. ENOMEM under an address-space
// rlimit is the usual case: the page engine reserves far more address space
// than it uses memory (RLIMIT_DATA counts private writable reservations,
// RLIMIT_AS all), so a limit sized to the memory it may use refuses it.
std::string refusal(int err) {
    std::string why = std::strerror(err);
    if (err != ENOMEM) return why;
    const struct {
        int resource;
        const char *name, *raise;
    } limits[] = {{RLIMIT_AS, "RLIMIT_AS", "ulimit -v unlimited"}, {RLIMIT_DATA, "RLIMIT_DATA", "ulimit -d unlimited"}};
    for (const auto& l : limits) {
        struct rlimit r;
        if (::getrlimit(l.resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) continue;
        why += "; this process's " + std::string(l.name) + " is " + mib(r.rlim_cur) +
               ", and the page engine reserves address space far beyond the memory it uses (its page map and "
               "arenas; open_options::address_space_limit bounds the arenas): raise the limit (`" + l.raise +
               "`); a memory cgroup bounds memory without bounding address space, and the resident budget "
               "follows it";
    }
    return why;
}

}  // namespace

page_map::page_map(vm::fault_space& space, std::uint64_t max_pages, std::uint64_t limit_bytes)
    : space_(space),
      max_pages_(max_pages),
      arena_pages_((limit_bytes ? limit_bytes : default_limit_bytes) / page_size / max_arenas) {
    if (arena_pages_ < min_arena_pages)
        throw error(errc::invalid_argument,
                    "address_space_limit " + std::to_string(limit_bytes) + " is below the smallest, " +
                        mib(max_arenas * min_arena_pages * page_size) + " (" + std::to_string(max_arenas) +
                        " arenas of " + std::to_string(min_arena_pages) + " pages)");
    if (limit_bytes > max_limit_bytes)
        throw error(errc::invalid_argument, "address_space_limit " + std::to_string(limit_bytes) +
                                                " is above the largest, " + mib(max_limit_bytes) +
                                                " (the page map's entries are 4 bytes)");
    if (max_pages > max_mappable_pages)
        throw error(errc::invalid_argument, "page map: " + std::to_string(max_pages) + " pages, more than the " +
                                                std::to_string(max_mappable_pages) + " its entries can name");
    forward_ = static_cast<std::atomic<std::uint32_t>*>(map_table(max_pages * sizeof(std::uint32_t)));
    if (!forward_)
        throw error(errc::io, "mmap of the page map (" + std::to_string(max_pages) + " entries, " +
                                  mib(max_pages * sizeof(std::uint32_t)) + ") failed: " + refusal(errno));
    void* dead = common::map_sparse(page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (dead == MAP_FAILED || !add_arena()) {
        int err = errno;
        if (dead != MAP_FAILED) ::munmap(dead, page_size);
        ::munmap(forward_, max_pages_ * sizeof(std::uint32_t));
        throw error(errc::io, "reserving a " + mib(arena_pages_ * page_size) +
                                  " address-space arena for the store failed: " + refusal(err));
    }
    dead_page_ = reinterpret_cast<std::uintptr_t>(dead);
}

page_map::~page_map() {
    for (std::size_t i = 0; i < arena_count_.load(); ++i)
        ::munmap(arenas_[i].reverse, arena_pages_ * sizeof(std::uint32_t));
    ::munmap(forward_, max_pages_ * sizeof(std::uint32_t));
    ::munmap(reinterpret_cast<void*>(dead_page_), page_size);
}

// Called by one thread at a time (the one holding growing_), or by the
// constructor. The new arena becomes current.
bool page_map::add_arena() noexcept {
    std::size_t n = arena_count_.load(std::memory_order_acquire);
    if (n == max_arenas) return false;
    vm::reserve_result r = space_.try_reserve(arena_pages_ * page_size);
    if (r.base == 0) {
        errno = r.error;
        return false;
    }
    arena& a = arenas_[n];
    a.reverse = static_cast<std::atomic<std::uint32_t>*>(map_table(arena_pages_ * sizeof(std::uint32_t)));
    if (!a.reverse) return false;
    a.base = r.base;
    a.next.store(0, std::memory_order_relaxed);
    a.used_in.store(epoch_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    arena_count_.store(n + 1, std::memory_order_release);
    current_.store(n, std::memory_order_release);
    return true;
}

// Moves `current` off the arena `full`: to an empty arena (one reclaimed by
// start_epoch) if there is one, so address space is reused before more is
// reserved; else to a new arena. Called by the thread holding growing_.
bool page_map::switch_arena(std::size_t full) noexcept {
    if (current_.load(std::memory_order_acquire) != full) return true;  // another thread did it
    std::size_t n = arena_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i) {
        if (arenas_[i].next.load(std::memory_order_acquire) == 0) {  // P2: empty
            current_.store(i, std::memory_order_release);
            return true;
        }
    }
    return add_arena();
}

// Takes `pages` consecutive virtual pages from the current arena, moving on
// when it is full (one thread moves; others wait for it).
std::uintptr_t page_map::allocate_virtual(std::uint64_t pages, std::size_t& index,
                                          std::atomic<std::uint32_t>*& reverse) noexcept {
    if (pages > arena_pages_) return 0;
    for (;;) {
        std::size_t c = current_.load(std::memory_order_acquire);
        arena& a = arenas_[c];
        std::uint64_t at = a.next.fetch_add(pages, std::memory_order_relaxed);
        if (at + pages <= arena_pages_) {
            index = c;
            reverse = a.reverse + at;
            return a.base + at * page_size;
        }
        bool expected = false;
        if (growing_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
            bool ok = switch_arena(c);
            growing_.store(false, std::memory_order_release);
            if (!ok) return 0;
        } else {
            while (growing_.load(std::memory_order_acquire)) {
            }
        }
    }
}

void page_map::mark_used(std::size_t index) noexcept {
    std::uint64_t e = epoch_.load(std::memory_order_relaxed);
    std::atomic<std::uint64_t>& used_in = arenas_[index].used_in;
    if (used_in.load(std::memory_order_relaxed) != e) used_in.store(e, std::memory_order_relaxed);
}

std::uintptr_t page_map::use(std::uint64_t page) noexcept {
    const std::uint32_t entry = forward_[page].load(std::memory_order_acquire);
    if (entry <= busy) return 0;
    mark_used(arena_index(entry));
    return address_of(entry);
}

std::uintptr_t page_map::reserve(unit u) noexcept {
    std::uint32_t entry = 0;
    if (!forward_[u.head].compare_exchange_strong(entry, busy, std::memory_order_acq_rel)) {
        while (entry == busy) entry = forward_[u.head].load(std::memory_order_acquire);
        if (entry != 0) mark_used(arena_index(entry));
        return address_of(entry);
    }
    std::size_t index;
    std::atomic<std::uint32_t>* reverse;
    std::uintptr_t base = allocate_virtual(u.pages + 1, index, reverse);  // + the guard page
    if (base == 0) {
        forward_[u.head].store(0, std::memory_order_release);
        return 0;
    }
    mark_used(index);
    for (std::uint64_t i = 0; i < u.pages; ++i)
        reverse[i].store(static_cast<std::uint32_t>(u.head + i), std::memory_order_relaxed);
    reverse[u.pages].store(reverse_guard, std::memory_order_relaxed);
    for (std::uint64_t i = 1; i < u.pages; ++i)
        forward_[u.head + i].store(entry_for(index, base + i * page_size), std::memory_order_release);
    forward_[u.head].store(entry_for(index, base), std::memory_order_release);
    return base;
}

std::size_t page_map::arena_of(std::uintptr_t addr) const noexcept {
    std::size_t n = arena_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i)
        if (addr - arenas_[i].base < arena_pages_ * page_size) return i;
    return max_arenas;
}

page_map::lookup_result page_map::lookup_in(std::size_t index, std::uintptr_t addr) const noexcept {
    if (index == max_arenas) return {addr - dead_page_ < page_size ? kind::retired : kind::none, 0};
    const arena& a = arenas_[index];
    const std::uint32_t e = a.reverse[(addr - a.base) / page_size].load(std::memory_order_acquire);
    if (names_page(e)) return {kind::page, e};
    if (e == reverse_guard) return {kind::guard, 0};
    if (e == reverse_retired) return {kind::retired, 0};
    return {kind::none, 0};
}

page_map::lookup_result page_map::lookup(std::uintptr_t addr) const noexcept {
    return lookup_in(arena_of(addr), addr);
}

page_map::lookup_result page_map::touch(std::uintptr_t addr) noexcept {
    std::size_t index = arena_of(addr);
    lookup_result r = lookup_in(index, addr);
    if (r.what == kind::page) mark_used(index);
    return r;
}

// A unit's pages are the run of page entries between two guards.
page_map::extent page_map::extent_of(std::uintptr_t v) const noexcept {
    const arena* a = &arenas_[arena_of(v)];
    std::uint64_t at = (v - a->base) / page_size;
    auto is_page = [&](std::uint64_t i) { return names_page(a->reverse[i].load()); };
    std::uint64_t first = at, last = at;
    while (first > 0 && is_page(first - 1)) --first;
    while (last + 1 < arena_pages_ && is_page(last + 1)) ++last;
    return {a, first, last};
}

unit page_map::reserved_unit(std::uint64_t page) const noexcept {
    std::uintptr_t v = virtual_of(page);
    if (v == 0) return {0, 0};
    extent e = extent_of(v);
    return {e.a->reverse[e.first].load(), e.last - e.first + 1};
}

void page_map::retire(std::uint64_t page) {
    std::uintptr_t v = virtual_of(page);
    if (v == 0) return;
    auto [a, first, last] = extent_of(v);
    for (std::uint64_t i = first; i <= last; ++i) {
        const std::uint32_t p = a->reverse[i].load();
        forward_[p].store(0, std::memory_order_release);
        a->reverse[i].store(reverse_retired, std::memory_order_release);
    }
    space_.discard(a->base + first * page_size, last - first + 1);
}

std::uint64_t page_map::bumped(const arena& a) const noexcept {
    return std::min(a.next.load(std::memory_order_acquire), arena_pages_);
}

page_map::reclaimed page_map::start_epoch() {
    std::size_t n = arena_count_.load(std::memory_order_acquire);
    // Discard first: it is the only step that can fail, and a page dropped
    // early only faults in again.
    for (std::size_t i = 0; i < n; ++i)
        if (std::uint64_t pages = bumped(arenas_[i])) space_.discard(arenas_[i].base, pages);
    std::uint64_t e = epoch_.load(std::memory_order_relaxed);
    reclaimed r;
    for (std::size_t i = 0; i < n; ++i) {
        if (arenas_[i].used_in.load(std::memory_order_relaxed) == e && holds_pages(arenas_[i])) continue;
        if (std::uint64_t pages = reclaim(arenas_[i])) {
            ++r.arenas;
            r.pages += pages;
        }
    }
    epoch_.store(e + 1, std::memory_order_relaxed);
    return r;
}

// Does the arena map any page? If not, it holds only retired ranges and guards,
// and whatever points there points at destroyed objects.
bool page_map::holds_pages(const arena& a) const noexcept {
    for (std::uint64_t i = 0, pages = bumped(a); i < pages; ++i)
        if (names_page(a.reverse[i].load(std::memory_order_relaxed))) return true;
    return false;
}

// Clears an arena's entries, both sides together (P1), and restarts its bump
// pointer (P2). Returns the virtual pages it had handed out.
// The reverse entries' memory goes back to the system (MADV_DONTNEED leaves
// zeros), so what the table costs follows what is handed out (table_bytes).
std::uint64_t page_map::reclaim(arena& a) {
    std::uint64_t pages = bumped(a);
    for (std::uint64_t i = 0; i < pages; ++i) {
        const std::uint32_t entry = a.reverse[i].exchange(0, std::memory_order_relaxed);
        if (names_page(entry)) forward_[entry].store(0, std::memory_order_relaxed);
    }
    ::madvise(a.reverse, round_to_pages(pages * sizeof(std::uint32_t)), MADV_DONTNEED);  // advisory: zeros either way
    a.next.store(0, std::memory_order_release);
    space_.release_tables(a.base);  // every page was discarded first (start_epoch)
    return pages;
}

std::uint64_t page_map::table_bytes(std::uint64_t page_count) const noexcept {
    std::uint64_t bytes = round_to_pages(std::min(page_count, max_pages_) * sizeof(std::uint32_t));
    for (std::size_t i = 0; i < arena_count_.load(); ++i)
        bytes += round_to_pages(bumped(arenas_[i]) * sizeof(std::uint32_t));
    return bytes;
}

std::uint64_t page_map::reserved_virtual_pages() const noexcept {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < arena_count_.load(); ++i) total += bumped(arenas_[i]);
    return total;
}

// P1 from both sides: each forward entry leads to a reverse entry naming its
// page, in the arena the entry's index says, below that arena's bump pointer
// (so never in an empty arena: P2); each reverse page entry leads back. P2:
// `current` is an arena, and every other arena with entries went past its end.
std::vector<std::string> page_map::check_invariants(std::uint64_t page_count) const {
    std::vector<std::string> findings;
    const std::size_t n = arena_count_.load(std::memory_order_acquire);
    for (std::uint64_t p = 0; p < std::min(page_count, max_pages_); ++p) {
        const std::uint32_t entry = forward_[p].load(std::memory_order_acquire);
        if (entry == 0) continue;
        const std::string what = "P1: page " + std::to_string(p);
        if (entry == busy) {
            findings.push_back(what + " is still being reserved");
            continue;
        }
        const std::size_t index = arena_index(entry);
        if (index >= n || (entry & in_arena_mask) >= arena_pages_) {
            findings.push_back(what + ": its entry names page " + std::to_string(entry & in_arena_mask) +
                               " of arena " + std::to_string(index) + ", which does not exist");
            continue;
        }
        const std::uintptr_t v = address_of(entry);
        if (arena_of(v) != index) {
            findings.push_back(what + ": its entry names arena " + std::to_string(index) + ", not the one holding " +
                               common::hex(v));
            continue;
        }
        const arena& a = arenas_[index];
        const std::uint64_t at = (v - a.base) / page_size;
        const std::uint32_t back = a.reverse[at].load(std::memory_order_acquire);
        if (at >= bumped(a))
            findings.push_back(what + " maps to " + common::hex(v) + ", past arena " + std::to_string(index) +
                               "'s bump pointer (P2)");
        if (back != p)
            findings.push_back(what + " maps to " + common::hex(v) + ", whose reverse entry is " +
                               std::to_string(back) + ", not the page");
    }
    for (std::size_t i = 0; i < n; ++i) {
        const arena& a = arenas_[i];
        for (std::uint64_t at = 0; at < bumped(a); ++at) {
            const std::uint32_t p = a.reverse[at].load(std::memory_order_acquire);
            if (!names_page(p)) continue;
            const std::uintptr_t v = a.base + at * page_size;
            if (p >= max_pages_ || forward_[p].load(std::memory_order_acquire) != entry_for(i, v))
                findings.push_back("P1: " + common::hex(v) + " holds page " + std::to_string(p) +
                                   ", whose forward entry does not lead back to it");
        }
    }
    const std::size_t current = current_.load(std::memory_order_acquire);
    if (current >= n) findings.push_back("P2: the current arena " + std::to_string(current) + " does not exist");
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t next = arenas_[i].next.load(std::memory_order_acquire);
        if (i != current && next != 0 && next <= arena_pages_)
            findings.push_back("P2: arena " + std::to_string(i) + " has entries (bump pointer " +
                               std::to_string(next) + ") but is neither current nor given up");
    }
    return findings;
}

}  // namespace steppe::translate
