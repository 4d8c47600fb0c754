// Trap pages and trap ranges (vm.hpp): addresses outside the arenas that the
// fault handler (fault_space.cpp) serves or reports once a protection fault
// is no arena's. A trap page is published by storing its page last, with
// release; the handler reads the rest after acquiring it. A trap range is
// a seqlock: its writer (under a mutex, in normal context) makes the
// sequence odd, changes the fields, makes it even again; the handler uses
// what it read only if the sequence was even and the same before and
// after. A range is unregistered and another registered in its slot while
// other threads trap (an object store's close), so a base alone could not
// tell an old range's end or function from the new one's.
#include "common/sigsafe.hpp"
#include "vm/sys.hpp"
#include "vm/vm.hpp"

#include <steppe/error.hpp>

#include <atomic>
#include <mutex>

namespace steppe::vm {

namespace {

struct trap_page {
    std::atomic<std::uintptr_t> page{0};
    const char* store = nullptr;
    void (*fatal_hook)(const char*) = nullptr;
};
trap_page g_trap_pages[max_arenas];

struct trap_range {
    std::atomic<std::uint64_t> seq{0};  // odd while the fields change
    std::atomic<std::uintptr_t> base{0}, end{0};
    std::atomic<trap_fn> trap{nullptr};
    std::atomic<void*> ctx{nullptr};

    // Under g_traps_mutex. base 0: the slot is free.
    void set(std::uintptr_t b, std::uintptr_t e, trap_fn t, void* c) noexcept {
        seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        base.store(b, std::memory_order_relaxed);
        end.store(e, std::memory_order_relaxed);
        trap.store(t, std::memory_order_relaxed);
        ctx.store(c, std::memory_order_relaxed);
        seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
};
static_assert(std::atomic<trap_fn>::is_always_lock_free && std::atomic<void*>::is_always_lock_free, "read in signal context");
trap_range g_trap_ranges[max_arenas];

std::mutex g_traps_mutex;

[[noreturn]] void dangling_touch(const trap_page& t, std::uintptr_t address) noexcept {
    char text[768];
    common::fixed_message message(text, sizeof text);
    message << "steppe: fatal: store " << t.store << ": the program followed a pointer to "
            << common::in_hex{address}
            << ", where steppe puts stored pointers that aim at memory no object holds: a dangling pointer (its "
               "object was destroyed after the pointer was stored, or a page holding it is damaged). Run `steppe "
               "check "
            << t.store << "`; null or update pointers to objects you destroy";
    if (t.fatal_hook) t.fatal_hook(message.c_str());
    common::fatal_exit((message << "\n").c_str());
}

}  // namespace

bool detail::trap_touch(std::uintptr_t address, void* ucontext) noexcept {
    for (const trap_range& r : g_trap_ranges) {
        const std::uint64_t before = r.seq.load(std::memory_order_acquire);
        const std::uintptr_t base = r.base.load(std::memory_order_relaxed);
        if (base == 0 || address < base) continue;
        const std::uintptr_t end = r.end.load(std::memory_order_relaxed);
        const trap_fn trap = r.trap.load(std::memory_order_relaxed);
        void* const ctx = r.ctx.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (before % 2 != 0 || r.seq.load(std::memory_order_relaxed) != before) continue;  // changed meanwhile
        if (address < end) return trap(ctx, address, ucontext);
    }
    for (const trap_page& t : g_trap_pages) {
        const std::uintptr_t page = t.page.load(std::memory_order_acquire);
        if (page != 0 && address >= page && address < page + page_size) dangling_touch(t, address);
    }
    closed_touch(address);  // last: the other traps are served often, a closed range's touch once
    return false;
}

void register_trap_page(std::uintptr_t page, const char* store, void (*fatal_hook)(const char*)) {
    detail::install_signal_handlers();
    std::lock_guard lock(g_traps_mutex);
    for (trap_page& t : g_trap_pages) {
        if (t.page.load(std::memory_order_relaxed) != 0) continue;
        t.store = store;
        t.fatal_hook = fatal_hook;
        t.page.store(page, std::memory_order_release);
        return;
    }
    // More stores than arenas open at once: this one's page stays a bare SIGSEGV.
}

void unregister_trap_page(std::uintptr_t page) noexcept {
    std::lock_guard lock(g_traps_mutex);
    for (trap_page& t : g_trap_pages)
        if (t.page.load(std::memory_order_relaxed) == page) return t.page.store(0, std::memory_order_release);
}

void register_trap_range(std::uintptr_t base, std::size_t bytes, trap_fn trap, void* ctx) {
    if (base == 0 || bytes == 0 || trap == nullptr)
        throw error(errc::invalid_argument, "vm: register_trap_range needs a range and a function");
    detail::install_signal_handlers();
    std::lock_guard lock(g_traps_mutex);
    for (trap_range& r : g_trap_ranges) {
        if (r.base.load(std::memory_order_relaxed) != 0) continue;
        r.set(base, base + bytes, trap, ctx);
        return;
    }
    throw error(errc::unsupported, "vm: more than " + std::to_string(max_arenas) +
                                       " trap ranges at once (one per object store using protected fault blocks)");
}

void unregister_trap_range(std::uintptr_t base) noexcept {
    std::lock_guard lock(g_traps_mutex);
    for (trap_range& r : g_trap_ranges)
        if (r.base.load(std::memory_order_relaxed) == base) return r.set(0, 0, nullptr, nullptr);
}

}  // namespace steppe::vm
