// The fault path: arenas, the process-wide registry, the SIGBUS/SIGSEGV
// handler, and fault_space for both backends. Read top to bottom, with
// fault_space_impl.hpp beside it:
//
//   1. Page states and the invariants everything below relies on
//      (fault_space_impl.hpp), and the kind of access that faulted
//   2. Signal-context toolbox (common/sigsafe.hpp) and fatal()
//   3. Arenas (fault_space_impl.hpp) and the process-wide registry
//   4. The space (its class in fault_space_impl.hpp): kernel operations
//      shared by the handler and normal code
//   5. The fault handler
//   6. Normal-code operations: create, reserve, install, discard, take_dirty,
//      check_invariants, resident_pages; hold, release and evict_clean are
//      in fault_space_hold.cpp
//
// Async-signal safety (sections 2, 4 and 5 run in the handler): the handler
// makes system calls (ioctl, mprotect, futex, write, sigaction, all safe),
// touches only lock-free atomics, the registry's static array, the arena side
// tables (mapped at reserve time) and its own stack. It never allocates, never
// takes a lock, never throws and never calls stdio. Each piece says why below.

#include "common/crc32c.hpp"
#include "common/hex.hpp"
#include "common/shared_files.hpp"
#include "common/sigsafe.hpp"
#include "common/sparse_mapping.hpp"
#include "common/system_error.hpp"
#include "vm/fault_space_impl.hpp"
#include "vm/sys.hpp"
#include "vm/uapi.hpp"
#include "vm/vm.hpp"

#include <steppe/error.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <utility>

namespace steppe::vm {

fault_space::~fault_space() = default;

namespace impl {

using common::hex;

// 1. The kind of access (the page states: fault_space_impl.hpp) ------------

// The kind of access that faulted, from the x86-64 page-fault error code the
// kernel stores in the signal context. Elsewhere unknown: a missing page is
// then installed clean, and a later write faults again as a write.
access access_of(const void* context) noexcept {
#if defined(__x86_64__)
    const auto* uc = static_cast<const ucontext_t*>(context);
    const auto error_code = static_cast<std::uint64_t>(uc->uc_mcontext.gregs[REG_ERR]);
    constexpr std::uint64_t pf_write = 1u << 1, pf_instruction = 1u << 4;
    if (error_code & pf_instruction) return access::execute;
    return (error_code & pf_write) ? access::write : access::read;
#else
    (void)context;
    return access::unknown;
#endif
}

// 2. Signal-context toolbox -------------------------------------------------
//
// common/sigsafe.hpp: futex, messages built on the stack, fatal exit. Only
// system calls and stack memory: safe in a handler.

// A kernel operation of the fault path failed: say what and what to do, then
// leave. Exceptions cannot cross a signal handler, and returning would retry
// the access forever.
[[noreturn]] void fatal(const char* call, int err, std::uintptr_t page) noexcept {
    char text[768];
    common::fixed_message message(text, sizeof text);
    message << "steppe: fatal: " << call << " failed in the page-fault handler for page " << common::in_hex{page}
            << ": ";
    const char* name = strerrorname_np(err);  // a table lookup: safe
    if (name != nullptr) {
        message << name;
    } else {
        message << "errno " << static_cast<std::uint64_t>(err);
    }
    if (err == ENOMEM && std::strcmp(call, "mprotect") == 0) {
        message << ". The process has most likely reached vm.max_map_count: the mprotect fault backend needs a "
                   "memory mapping per run of pages with one protection. Raise the limit "
                   "(sysctl -w vm.max_map_count=1048576) or use the uffd backend (STEPPE_FAULT_BACKEND=uffd).";
    }
    common::fatal_exit((message << "\n").c_str());
}


// The caller's CAS just moved page `index` out of missing: raises the
// touched mark past it (I6) and counts it in its chunk, which is no longer
// released (I8). Async-signal-safe: lock-free atomics.
void note_claimed(arena& a, std::size_t index) noexcept {
    std::size_t seen = a.touched.load(std::memory_order_relaxed);
    while (seen <= index && !a.touched.compare_exchange_weak(seen, index + 1, std::memory_order_relaxed)) {
    }
    if ((chunk_count(a, index).fetch_add(1, std::memory_order_acq_rel) & chunk_released) &&
        (chunk_count(a, index).fetch_and(~chunk_released, std::memory_order_acq_rel) & chunk_released))
        a.released_chunks.fetch_sub(1, std::memory_order_relaxed);
}

arena g_arenas[max_arenas];
std::atomic<std::size_t> g_arena_high_water{0};

std::uint64_t slot_word(std::uint64_t slot, std::uint64_t state) { return (slot & ~slot_state_mask) | state; }

// Async-signal-safe: CAS on static memory.
arena* claim_slot() noexcept {
    for (std::size_t i = 0; i < max_arenas; ++i) {
        arena& a = g_arenas[i];
        std::uint64_t word = a.slot.load(std::memory_order_relaxed);
        if ((word & slot_state_mask) != slot_free) continue;
        if (!a.slot.compare_exchange_strong(word, slot_word(word, slot_claimed), std::memory_order_acquire)) continue;
        // Seqlock writer side: the state change is ordered before the field
        // writes that follow, so a reader that sees new fields sees a new word.
        std::atomic_thread_fence(std::memory_order_release);
        std::size_t high = g_arena_high_water.load(std::memory_order_relaxed);
        while (high < i + 1 && !g_arena_high_water.compare_exchange_weak(high, i + 1, std::memory_order_release)) {
        }
        return &a;
    }
    return nullptr;
}

void publish_slot(arena& a) noexcept {
    a.slot.store(slot_word(a.slot.load(std::memory_order_relaxed), slot_live), std::memory_order_release);
}

void free_slot(arena& a) noexcept {
    a.owner = nullptr;
    a.base.store(0, std::memory_order_relaxed);
    a.end.store(0, std::memory_order_relaxed);
    const std::uint64_t word = a.slot.load(std::memory_order_relaxed);
    a.slot.store(((word >> 2) + 1) << 2 | slot_free, std::memory_order_release);
}

// The live arena containing `address`, or null. Async-signal-safe.
arena* find_arena(std::uintptr_t address) noexcept {
    const std::size_t count = g_arena_high_water.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < count; ++i) {
        arena& a = g_arenas[i];
        const std::uint64_t word = a.slot.load(std::memory_order_acquire);
        if ((word & slot_state_mask) != slot_live || !a.contains(address)) continue;
        std::atomic_thread_fence(std::memory_order_acquire);
        if (a.slot.load(std::memory_order_relaxed) == word) return &a;
    }
    return nullptr;
}

// The arenas of the processes this one was forked from: MADV_DONTFORK left
// them unmapped here, and a touch of one ends the process with a message
// saying so (forked_touch) instead of a bare SIGSEGV. Written only by the
// fork handler, while the new process has a single thread; then constant.
struct inherited_range {
    std::uintptr_t base, end;
    pid_t opener;  // the process whose arena it was
};
inherited_range g_inherited[max_arenas];
std::size_t g_inherited_count = 0;

// The process whose arenas g_arenas lists: set with the handlers, renewed
// by the fork handler. A child made without fork handlers (glibc's _Fork,
// clone) still lists its parent's arenas, unmapped here: a touch of one
// raises SEGV_MAPERR, as no arena of this process's own does, and only
// then is getpid() (a system call) compared with it.
std::atomic<pid_t> g_arenas_pid{0};

// Arenas are MADV_DONTFORK: a child has none, so it must not find any; it
// remembers where they were (ranges inherited from further up stay).
void forget_arenas_in_child() noexcept {
    g_arenas_pid.store(getpid(), std::memory_order_relaxed);
    const pid_t parent = getppid();
    for (std::size_t i = 0; i < g_arena_high_water.load(std::memory_order_relaxed); ++i) {
        arena& a = g_arenas[i];
        const bool live = (a.slot.load(std::memory_order_relaxed) & slot_state_mask) == slot_live;
        if (live && g_inherited_count < max_arenas) g_inherited[g_inherited_count++] = {a.first(), a.last(), parent};
        free_slot(a);
    }
}

// 4. The space ----------------------------------------------------------------


int space::map_page(std::uintptr_t page, const std::byte* content, bool writable, const char*& call) noexcept {
    if (backend_ == backend_kind::mprotect) {
        // The contents are already in the alias view (I1); open the page.
        call = "mprotect";
        const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
        return mprotect(reinterpret_cast<void*>(page), page_size, prot) == 0 ? 0 : errno;
    }
    uffdio_copy copy{};
    copy.dst = page;
    copy.src = reinterpret_cast<std::uintptr_t>(content);
    copy.len = page_size;
    copy.mode = uses_uffd_wp() && !writable ? UFFDIO_COPY_MODE_WP : 0;  // clean pages start write-protected
    call = "UFFDIO_COPY";
    while (ioctl(uffd_, UFFDIO_COPY, &copy) != 0) {
        if (errno == EEXIST) break;      // mapped meanwhile by a concurrent fault: benign
        if (errno != EAGAIN) return errno;  // EAGAIN: the address space changed under us; retry
        copy.copy = 0;
    }
    if (writable && tracking_ == tracking_kind::mprotect) {
        // The arena is mapped PROT_READ so that first writes fault; this one already happened.
        call = "mprotect";
        if (mprotect(reinterpret_cast<void*>(page), page_size, PROT_READ | PROT_WRITE) != 0) return errno;
    }
    return 0;
}

int space::unprotect(std::uintptr_t page, const char*& call) noexcept {
    if (tracking_ == tracking_kind::wp_sync) {
        uffdio_writeprotect wp{};
        wp.range.start = page;
        wp.range.len = page_size;
        wp.mode = UFFDIO_WRITEPROTECT_MODE_DONTWAKE;  // no waiters in SIGBUS mode
        call = "UFFDIO_WRITEPROTECT";
        while (ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp) != 0) {
            if (errno != EAGAIN) return errno;
        }
        return 0;
    }
    call = "mprotect";
    return mprotect(reinterpret_cast<void*>(page), page_size, PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

int space::protect(std::uintptr_t first, std::size_t npages, const char*& call) noexcept {
    if (tracking_ == tracking_kind::wp_sync) {
        uffdio_writeprotect wp{};
        wp.range.start = first;
        wp.range.len = npages * page_size;
        wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
        call = "UFFDIO_WRITEPROTECT";
        while (ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp) != 0) {
            if (errno != EAGAIN) return errno;
        }
        return 0;
    }
    call = "mprotect";
    return mprotect(reinterpret_cast<void*>(first), npages * page_size, PROT_READ) == 0 ? 0 : errno;
}

void space::mark_dirty(arena& a, std::size_t index) noexcept {
    // Page bit before summary bit (I4).
    bits_ref(a.dirty[index / 64]).fetch_or(std::uint64_t{1} << (index % 64), std::memory_order_release);
    bits_ref(a.dirty_summary[index / 4096]).fetch_or(std::uint64_t{1} << (index / 64 % 64), std::memory_order_release);
}

void space::clear_dirty(arena& a, std::size_t index) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << (index % 64);
    if (bits_ref(a.dirty[index / 64]).load(std::memory_order_relaxed) & bit)
        bits_ref(a.dirty[index / 64]).fetch_and(~bit, std::memory_order_relaxed);
}

bool space::dirty_bit(const arena& a, std::size_t index) noexcept {
    return (bits_ref(a.dirty[index / 64]).load(std::memory_order_acquire) >> (index % 64)) & 1;
}

// resident -> filling, as a fill claims a missing page: touches wait.
bool space::claim_resident(std::uint32_t& state) noexcept {
    std::uint32_t seen = page_resident;
    return state_ref(state).compare_exchange_strong(seen, page_filling, std::memory_order_acq_rel);
}

template <class F>
void space::for_each_own_arena(F&& f) const {
    const std::size_t count = g_arena_high_water.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < count; ++i) {
        arena& a = g_arenas[i];
        if ((a.slot.load(std::memory_order_acquire) & slot_state_mask) == slot_live && a.owner == this) f(a);
    }
}

// Claimed pages become missing in the kernel: their memory goes back and the
// next touch faults. Pages held read-only get their arena's protection back
// (read-write for a uffd arena unless tracking is by mprotect); the mprotect
// backend's missing pages are PROT_NONE.
int space::unmap(arena& a, std::uintptr_t first, std::size_t npages, bool restore_protection) noexcept {
    void* const p = reinterpret_cast<void*>(first);
    const std::size_t bytes = npages * page_size;
    if (backend_ == backend_kind::mprotect)
        return mprotect(p, bytes, PROT_NONE) == 0 && madvise(a.alias_of(first), bytes, MADV_REMOVE) == 0 ? 0 : errno;
    if (madvise(p, bytes, MADV_DONTNEED) != 0) return errno;
    if (!restore_protection) return 0;
    const int prot = tracking_ == tracking_kind::mprotect ? PROT_READ : PROT_READ | PROT_WRITE;
    return mprotect(p, bytes, prot) == 0 ? 0 : errno;
}

void space::note_clean(arena& a, std::uintptr_t page, const std::byte* content) noexcept {
    if (keeps_sums()) a.sums[a.index_of(page)] = common::crc32c(0, content, page_size);
}

void space::finish(std::uint32_t& state, page_state next) noexcept {
    if (state_ref(state).exchange(next, std::memory_order_acq_rel) == page_filling_waited) {
        common::futex_wake_all(state);
    }
}

// A claimed page becomes missing, and leaves its chunk's count (I8).
void space::make_missing(arena& a, std::size_t index) noexcept {
    finish(a.states[index], page_missing);
    note_missing(a, index);
}

// Page `index` left the count of its chunk; the chunk's last page gives its
// table back (I8). Async-signal-safe.
void space::note_missing(arena& a, std::size_t index) noexcept {
    if ((chunk_count(a, index).fetch_sub(1, std::memory_order_acq_rel) & ~chunk_released) == 1)
        release_chunk(a, index / pages_per_chunk);
}

// Gives the table pages of a chunk whose pages are all missing back to the
// system (I8). It claims every state word first (missing -> releasing), so
// that no claim can happen between the check and the zeroing, and gives up,
// changing nothing, if a page is not missing or its count says a claim is
// under way. A whole chunk only: its state words fill one page, which no
// other part of the table shares. Async-signal-safe: atomics and madvise.
void space::release_chunk(arena& a, std::size_t chunk) noexcept {
    const std::size_t first = chunk * pages_per_chunk;
    if (first + pages_per_chunk > (a.last() - a.first()) / page_size) return;
    std::uint32_t* const words = a.states + first;
    for (std::size_t i = 0; i < pages_per_chunk; ++i)
        if (state_ref(words[i]).load(std::memory_order_relaxed) != page_missing) return;
    std::size_t claimed = 0;
    for (std::uint32_t seen = page_missing; claimed < pages_per_chunk; ++claimed, seen = page_missing)
        if (!state_ref(words[claimed]).compare_exchange_strong(seen, page_releasing, std::memory_order_acquire)) break;
    auto count = std::atomic_ref<std::uint32_t>(a.counts[chunk]);
    std::uint32_t idle = 0;
    const bool whole = claimed == pages_per_chunk &&
                       count.compare_exchange_strong(idle, chunk_released, std::memory_order_acq_rel);
    if (whole && madvise(words, page_size, MADV_DONTNEED) == 0) {
        // The states read zero, missing, from here on; the checksums of missing pages mean nothing.
        if (keeps_sums()) madvise(a.sums + first, page_size, MADV_DONTNEED);
        a.released_chunks.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (whole) count.store(0, std::memory_order_release);  // madvise refused (locked memory): keep the table
    for (std::size_t i = 0; i < claimed; ++i) state_ref(words[i]).store(page_missing, std::memory_order_release);
}

// 5. The fault handler --------------------------------------------------------

// Consecutive faults of this thread that needed nothing done, and where.
// initial-exec TLS is a fixed offset from the thread pointer: nothing is
// allocated on first use, so the handler may use it.
struct spurious_faults {
    std::uintptr_t page;
    unsigned long count;
};
[[gnu::tls_model("initial-exec")]] thread_local spurious_faults t_spurious{0, 0};

struct sigaction g_previous_bus, g_previous_segv;  // written once, before our handlers are installed

// The handler found a fault that is not ours: hand it to whoever handled the
// signal before us, or let it have its default effect.
void chain(int signal, siginfo_t* info, void* context) noexcept {
    const struct sigaction& previous = signal == SIGBUS ? g_previous_bus : g_previous_segv;
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signal, info, context);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signal);
        return;
    }
    // Restore the default action (sigaction is async-signal-safe) and return:
    // the faulting instruction runs again and the kernel kills the process with
    // the signal, as if we had never been there. A signal sent by kill() does
    // not come back by itself, so raise it again.
    struct sigaction default_action{};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal, &default_action, nullptr);
    if (info->si_code <= 0) raise(signal);
}

// A forked child touched where an arena of process `opener` was (not
// mapped here): say so and end the process, as for any fault that cannot be
// served.
[[noreturn]] void end_forked_touch(std::uintptr_t address, pid_t opener) noexcept {
    char text[768];
    common::fixed_message message(text, sizeof text);
    message << "steppe: fatal: process " << static_cast<std::uint64_t>(getpid()) << " touched "
            << common::in_hex{address} << ", memory of a store that process " << static_cast<std::uint64_t>(opener)
            << " opened; a child forked from a process with an open store cannot use it (the store's memory is "
               "not inherited): fork before opening the store, or exec\n";
    common::fatal_exit(message.c_str());
}

// Returns if `address` was no arena of the processes this one was forked from.
void forked_touch(std::uintptr_t address) noexcept {
    for (std::size_t i = 0; i < g_inherited_count; ++i) {
        const inherited_range& r = g_inherited[i];
        if (address >= r.base && address < r.end) end_forked_touch(address, r.opener);
    }
}

// A SIGBUS in a file steppe maps shared (common/shared_files.hpp: a store's
// reader table) means the file no longer covers the mapping: another
// program cut it short. Said, then the process ends, as for any fault that
// cannot be served; returns if the address is no such file's.
void shared_file_cut_short(std::uintptr_t address) noexcept {
    const char* path = common::shared_file_at(address);
    if (!path) return;
    char text[1024];
    common::fixed_message message(text, sizeof text);
    message << "steppe: fatal: process " << static_cast<std::uint64_t>(getpid()) << " touched " << common::in_hex{address}
            << " in " << path
            << ", the store's reader table, which another program cut short (truncated or emptied) while this "
               "process had it mapped. Every commit that returned is in the store, the one under way may be or "
               "not, and what was not committed is lost. Leave a store's files to steppe, and open the store "
               "again\n";
    common::fatal_exit(message.c_str());
}

// Is this fault ours? Page faults of our arenas raise SIGBUS with BUS_ADRERR
// (userfaultfd) or SIGSEGV with SEGV_ACCERR (protection); anything else, and
// any address outside the registry, is not. A touch of an arena inherited
// through fork (SEGV_MAPERR: nothing is mapped there) does not return.
bool dispatch(int signal, siginfo_t* info, void* context) noexcept {
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    if (signal == SIGSEGV && info->si_code == SEGV_MAPERR) {
        if (find_arena(address) == nullptr) forked_touch(address);
        else if (const pid_t opener = g_arenas_pid.load(std::memory_order_relaxed); getpid() != opener)
            end_forked_touch(address, opener);  // a child made without fork handlers
    }
    const int our_code = signal == SIGBUS ? int{BUS_ADRERR} : int{SEGV_ACCERR};
    if (info->si_code != our_code) return false;
    arena* a = find_arena(address);
    if (a == nullptr) {
        // Trap pages and ranges lie outside the arenas: looked for only once
        // the fault is not an arena's, so ordinary protection faults pay
        // nothing for them.
        if (signal == SIGBUS) shared_file_cut_short(address);
        return signal == SIGSEGV && detail::trap_touch(address, context);
    }
    return a->owner->handle_fault(*a, address, access_of(context), signal);
}

void on_fault_signal(int signal, siginfo_t* info, void* context) {
    const int saved_errno = errno;  // the interrupted code may be between a call and its errno check
    const bool handled = dispatch(signal, info, context);
    errno = saved_errno;
    if (!handled) chain(signal, info, context);
}

bool space::handle_fault(arena& a, std::uintptr_t address, access how, int signal) noexcept {
    // userfaultfd faults arrive as SIGBUS; protection faults (the mprotect
    // backend, mprotect tracking, a write to a held page with any backend) as
    // SIGSEGV. An instruction fetch is never ours.
    const bool expected = signal == SIGSEGV || backend_ == backend_kind::uffd;
    if (!expected || how == access::execute) return false;

    const std::uintptr_t page = address & ~(page_size - 1);
    std::uint32_t& state = a.states[a.index_of(page)];
    for (;;) {
        std::uint32_t seen = state_ref(state).load(std::memory_order_acquire);
        switch (seen) {
        case page_resident:
            if (!tracked_write(how, signal)) return spurious(page);
            // A read-only space's pages are PROT_READ for good: this is a write.
            if (refuse_write_) refuse_write_(ctx_, address);
            // Claimed like a fill while it un-protects and marks the page, so
            // that hold() sees the page either before the write or written.
            if (state_ref(state).compare_exchange_strong(seen, page_filling, std::memory_order_acquire))
                return first_write(a, page, state);
            break;
        case page_missing:
            // Refused before any fill: the write would map the page writable.
            // (Without the fault's access kind the page is filled read-only
            // and the write faults again as above.)
            if (refuse_write_ && how == access::write) refuse_write_(ctx_, address);
            if (state_ref(state).compare_exchange_strong(seen, page_filling, std::memory_order_acquire)) {
                return fill_and_map(a, page, how, state);
            }
            break;
        case page_releasing:
            sched_yield();  // missing, its chunk's table being given back (I8): a few microseconds
            break;
        case page_filling:
            // Another thread is filling the page (I1): tell it to wake us, then sleep.
            if (!state_ref(state).compare_exchange_strong(seen, page_filling_waited, std::memory_order_relaxed)) break;
            [[fallthrough]];
        default:
            common::futex_wait(state, page_filling_waited);
            break;
        }
    }
}

bool space::fill_and_map(arena& a, std::uintptr_t page, access how, std::uint32_t& state, bool ahead) noexcept {
    // uffd: fill into a page on this thread's stack (no allocation; a nested
    // fault in another arena gets its own). mprotect: fill straight into the
    // hidden alias view (I1).
    const std::uint64_t start = common::monotonic_ns();
    alignas(page_size) std::byte buffer[page_size];
    std::byte* out = backend_ == backend_kind::mprotect ? a.alias_of(page) : buffer;
    note_claimed(a, a.index_of(page));  // before the page can leave missing (I6)
    if (!fill_(ctx_, page, out)) {
        make_missing(a, a.index_of(page));
        return false;  // no contents: a wild access after all
    }
    // A write fault maps the page writable and dirty at once: one fault, not two.
    const bool writable = how == access::write;
    if (!writable) note_clean(a, page, out);
    const char* call = nullptr;
    if (const int err = map_page(page, out, writable, call)) {
        if (!ahead) fatal(call, err, page);
        make_missing(a, a.index_of(page));  // given up, unmapped: a touch of it reports the error
        return false;
    }
    // After the page became writable (I2); not for wp_async, whose take_dirty() never clears the bits.
    if (writable && tracking_ != tracking_kind::wp_async) mark_dirty(a, a.index_of(page));
    (ahead ? filled_ahead_ : faults_).fetch_add(1, std::memory_order_relaxed);
    installs_.fetch_add(1, std::memory_order_relaxed);
    if (!ahead) fill_ns_.fetch_add(common::monotonic_ns() - start, std::memory_order_relaxed);
    finish(state, page_resident);
    t_spurious.page = 0;
    return true;
}

// Write-protect faults come as SIGBUS for wp_sync and SIGSEGV for mprotect
// tracking; wp_async has none. Anything else on a resident page is a fault
// that raced with another thread mapping the page (or a write that waited
// for a held page that was kept): the access is retried.
bool space::tracked_write(access how, int signal) const noexcept {
    const int tracking_signal = tracking_ == tracking_kind::wp_sync    ? SIGBUS
                                : tracking_ == tracking_kind::mprotect ? SIGSEGV
                                                                       : 0;
    return signal == tracking_signal && how != access::read;
}

// A write (or, without the error code, possibly one) to a clean page, which
// the caller claimed.
bool space::first_write(arena& a, std::uintptr_t page, std::uint32_t& state) noexcept {
    const char* call = nullptr;
    if (const int err = unprotect(page, call)) fatal(call, err, page);
    mark_dirty(a, a.index_of(page));  // after un-protecting (I2)
    write_faults_.fetch_add(1, std::memory_order_relaxed);
    t_spurious.page = 0;
    finish(state, page_resident);
    return true;
}

// A fault that needed nothing done is harmless once; a page that keeps
// faulting while its state says resident (arena memory unmapped behind our
// back) would hang the thread forever, so say so instead.
bool space::spurious(std::uintptr_t page) noexcept {
    if (t_spurious.page != page) t_spurious = {page, 0};
    if (++t_spurious.count > 1'000'000) {
        char text[768];
        common::fixed_message message(text, sizeof text);
        message << "steppe: fatal: page " << common::in_hex{page}
                << " is resident in its fault_space but keeps faulting; was arena memory unmapped or "
                   "madvise()d outside the vm module?\n";
        common::fatal_exit(message.c_str());
    }
    return true;
}

}  // namespace impl

void detail::install_signal_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        impl::g_arenas_pid.store(getpid(), std::memory_order_relaxed);
        struct sigaction action{};
        action.sa_sigaction = impl::on_fault_signal;
        // SA_NODEFER: a fill function's own fault in another arena may nest.
        action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(SIGBUS, &action, &impl::g_previous_bus) != 0) {
            common::throw_system_error("sigaction", errno, "vm: installing the SIGBUS handler");
        }
        if (sigaction(SIGSEGV, &action, &impl::g_previous_segv) != 0) {
            common::throw_system_error("sigaction", errno, "vm: installing the SIGSEGV handler");
        }
        if (const int err = pthread_atfork(nullptr, nullptr, impl::forget_arenas_in_child)) {
            common::throw_system_error("pthread_atfork", err, "vm: registering the fork handler");
        }
    });
}

namespace impl {

// 6. Normal-code operations -------------------------------------------------------

space::~space() {
    drop_arenas(nullptr, nullptr);
    if (staging_ != 0) munmap(reinterpret_cast<void*>(staging_), staging_pages * page_size);
    if (uffd_ >= 0) close(uffd_);
    if (pagemap_ >= 0) close(pagemap_);
}

// Unmaps this space's arenas, or with `store_path` makes them closed ranges.
void space::drop_arenas(const std::string* store_path, const closed_words* words) noexcept {
    const std::size_t count = g_arena_high_water.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < count; ++i) {
        arena& a = g_arenas[i];
        const std::uint64_t word = a.slot.load(std::memory_order_acquire);
        if ((word & slot_state_mask) != slot_live || a.owner != this) continue;
        a.slot.store(slot_word(word, slot_retiring), std::memory_order_release);  // no longer found by the handler
        // Replacing or unmapping a range also ends its userfaultfd
        // registration. Failure here could only mean a bad address, which
        // (I3) rules out.
        if (store_path)
            retire_range(a.first(), a.last() - a.first(), *store_path, *words);
        else
            munmap(reinterpret_cast<void*>(a.first()), a.last() - a.first());
        if (a.alias != nullptr) munmap(a.alias, a.last() - a.first());
        munmap(a.side, a.side_bytes);
        free_slot(a);
    }
}

void space::retire_arenas(const std::string& store_path, const closed_words& words) noexcept {
    drop_arenas(&store_path, &words);
}

// Closed ranges may be what fills the address space: given back, and tried again.
reserve_result space::try_reserve(std::size_t bytes) noexcept {
    const reserve_result first = try_reserve_once(bytes);
    if (first.base != 0 || first.error != ENOMEM || !give_back_closed_ranges()) return first;
    return try_reserve_once(bytes);
}

reserve_result space::try_reserve_once(std::size_t bytes) noexcept {
    // Only system calls and the registry's CAS: safe in a fill function.
    const std::size_t max_bytes = std::size_t{1} << 47;
    if (bytes == 0 || bytes > max_bytes) return {0, "reserve", EINVAL};
    const std::size_t size = (bytes + page_size - 1) / page_size * page_size;
    const side_layout layout = side_layout::for_pages(size / page_size);

    struct mapping {  // unmapped on failure
        void* address = MAP_FAILED;
        std::size_t size = 0;
        ~mapping() {
            if (address != MAP_FAILED) munmap(address, size);
        }
        void* keep() { return std::exchange(address, MAP_FAILED); }
    } side, view, alias;
    const auto failed = [](const char* call) { return reserve_result{0, call, errno}; };

    side.size = layout.bytes;
    side.address = common::map_sparse(side.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (side.address == MAP_FAILED) return failed("mmap");
    // No huge pages: the first touch of a state word must not zero 2 MiB inside a fault.
    madvise(side.address, side.size, MADV_NOHUGEPAGE);  // advisory; fails only without THP
    if (madvise(side.address, side.size, MADV_DONTFORK) != 0) return failed("madvise");

    view.size = alias.size = size;
    if (backend_ == backend_kind::uffd) {
        // mprotect tracking maps the arena read-only so that first writes fault.
        const int prot = tracking_ == tracking_kind::mprotect ? PROT_READ : PROT_READ | PROT_WRITE;
        view.address = common::map_sparse(size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (view.address == MAP_FAILED) return failed("mmap");
        madvise(view.address, size, MADV_NOHUGEPAGE);  // 4 KiB PTEs for UFFDIO_COPY and PAGEMAP_SCAN
        if (madvise(view.address, size, MADV_DONTFORK) != 0) return failed("madvise");
        uffdio_register reg{};
        reg.range.start = reinterpret_cast<std::uintptr_t>(view.address);
        reg.range.len = size;
        reg.mode = UFFDIO_REGISTER_MODE_MISSING | (uses_uffd_wp() ? UFFDIO_REGISTER_MODE_WP : 0);
        if (ioctl(uffd_, UFFDIO_REGISTER, &reg) != 0) return failed("UFFDIO_REGISTER");
        const std::uint64_t needed = (std::uint64_t{1} << _UFFDIO_COPY) |
                                     (uses_uffd_wp() ? std::uint64_t{1} << _UFFDIO_WRITEPROTECT : 0);
        if ((reg.ioctls & needed) != needed) return {0, "UFFDIO_REGISTER", ENOTSUP};
    } else {
        // Two views of one memfd: the arena (PROT_NONE until a page is filled)
        // and the alias the handler fills through (I1).
        int memfd = static_cast<int>(syscall(SYS_memfd_create, "steppe-arena", MFD_CLOEXEC | MFD_NOEXEC_SEAL));
        if (memfd < 0 && errno == EINVAL) memfd = static_cast<int>(syscall(SYS_memfd_create, "steppe-arena", MFD_CLOEXEC));
        if (memfd < 0) return failed("memfd_create");
        const bool sized = ftruncate(memfd, static_cast<off_t>(size)) == 0;
        const int truncate_err = errno;
        if (sized) {
            view.address = common::map_sparse(size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
            if (view.address != MAP_FAILED) {
                alias.address = common::map_sparse(size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
            }
        }
        const int map_err = errno;
        close(memfd);  // the mappings keep the memory
        if (!sized) return {0, "ftruncate", truncate_err};
        if (view.address == MAP_FAILED || alias.address == MAP_FAILED) return {0, "mmap", map_err};
        if (madvise(view.address, size, MADV_DONTFORK) != 0 || madvise(alias.address, size, MADV_DONTFORK) != 0) {
            return failed("madvise");
        }
    }

    arena* a = claim_slot();
    if (a == nullptr) return {0, nullptr, 0};  // the registry is full
    auto* side_bytes = static_cast<std::byte*>(side.address);
    a->owner = this;
    a->states = reinterpret_cast<std::uint32_t*>(side_bytes + layout.states_offset);
    a->dirty = reinterpret_cast<std::uint64_t*>(side_bytes + layout.dirty_offset);
    a->dirty_summary = reinterpret_cast<std::uint64_t*>(side_bytes + layout.summary_offset);
    a->sums = reinterpret_cast<std::uint32_t*>(side_bytes + layout.sums_offset);
    a->counts = reinterpret_cast<std::uint32_t*>(side_bytes + layout.counts_offset);
    a->released_chunks.store(0, std::memory_order_relaxed);
    a->summary_words = layout.summary_words;
    a->touched.store(0, std::memory_order_relaxed);  // a fresh side table: every page missing (I6)
    void* const alias_view = alias.keep();
    a->alias = alias_view == MAP_FAILED ? nullptr : static_cast<std::byte*>(alias_view);
    a->side = side.keep();
    a->side_bytes = layout.bytes;
    const auto base = reinterpret_cast<std::uintptr_t>(view.keep());
    a->base.store(base, std::memory_order_relaxed);
    a->end.store(base + size, std::memory_order_relaxed);
    publish_slot(*a);
    return {base, nullptr, 0};
}

std::uintptr_t space::reserve(std::size_t bytes) {
    const reserve_result result = try_reserve(bytes);
    if (result.base != 0) return result.base;
    const std::string context = "reserving an arena of " + std::to_string(bytes) + " bytes";
    if (result.failed_call == nullptr) {
        throw error(errc::unsupported, "vm: " + context + ": all " + std::to_string(max_arenas) +
                                           " arena slots of the process are in use (reserve fewer, larger arenas)");
    }
    if (result.error == EINVAL && std::strcmp(result.failed_call, "reserve") == 0) {
        throw error(errc::invalid_argument, "vm: " + context + ": the size must be between 1 byte and 128 TiB");
    }
    common::throw_system_error(result.failed_call, result.error, "vm: " + context);
}

arena* space::arena_of(std::uintptr_t address) const noexcept {
    arena* a = find_arena(address);
    return a != nullptr && a->owner == this ? a : nullptr;
}

arena& space::checked_arena(std::uintptr_t page, std::size_t npages, const char* operation) const {
    const std::string what = std::string("vm: ") + operation + " of page " + hex(page);
    if (page % page_size != 0) throw error(errc::invalid_argument, what + ": not page-aligned");
    arena* a = arena_of(page);
    if (a == nullptr) throw error(errc::invalid_argument, what + ": not in an arena of this fault_space");
    if (npages == 0 || npages > (a->last() - page) / page_size) {
        throw error(errc::invalid_argument, what + ": " + std::to_string(npages) + " pages do not fit in its arena " +
                                                hex(a->first()) + "-" + hex(a->last()));
    }
    return *a;
}

void space::throw_kernel_error(const char* call, int err, const std::string& context) const {
    if (err == ENOMEM && std::strcmp(call, "mprotect") == 0) {
        throw error(errc::io, "vm: " + context + ": mprotect failed: " + detail::errno_text(err) + "; " +
                                  detail::max_map_count_advice());
    }
    common::throw_system_error(call, err, "vm: " + context);
}

bool space::install(std::uintptr_t page, const std::byte* content) {
    arena& a = checked_arena(page, 1, "install");
    std::uint32_t& state = a.states[a.index_of(page)];
    std::uint32_t seen = page_missing;
    while (!state_ref(state).compare_exchange_strong(seen, page_filling, std::memory_order_acquire)) {
        if (seen != page_releasing) return false;
        sched_yield();  // missing, its chunk being released (I8): a few microseconds
        seen = page_missing;
    }
    note_claimed(a, a.index_of(page));  // I6, I8
    if (backend_ == backend_kind::mprotect) {
        std::memcpy(a.alias_of(page), content, page_size);  // hidden until map_page opens it (I1)
        content = a.alias_of(page);
    }
    note_clean(a, page, content);
    const char* call = nullptr;
    if (const int err = map_page(page, content, false, call)) {
        make_missing(a, a.index_of(page));
        throw_kernel_error(call, err, "installing page " + hex(page));
    }
    installs_.fetch_add(1, std::memory_order_relaxed);
    finish(state, page_resident);
    return true;
}

// A touch's claim and fill (section 5), in normal context. A page being
// released is skipped, not waited for: a load ahead has other pages to do.
fault_space::ahead space::fill_ahead(std::uintptr_t page) noexcept {
    arena* a = arena_of(page);
    if (a == nullptr) return ahead::not_missing;
    std::uint32_t& state = a->states[a->index_of(page)];
    std::uint32_t seen = page_missing;
    if (!state_ref(state).compare_exchange_strong(seen, page_filling, std::memory_order_acquire))
        return ahead::not_missing;
    return fill_and_map(*a, page, access::read, state, true) ? ahead::filled : ahead::refused;
}

void space::discard(std::uintptr_t page, std::size_t npages) {
    arena& a = checked_arena(page, npages, "discard");
    const std::size_t bytes = npages * page_size;
    void* const start = reinterpret_cast<void*>(page);
    const std::string context = "discarding " + std::to_string(npages) + " pages at " + hex(page);
    if (backend_ == backend_kind::uffd) {
        // Zapped PTEs are missing again: the next touch raises SIGBUS.
        if (madvise(start, bytes, MADV_DONTNEED) != 0) common::throw_system_error("madvise", errno, "vm: " + context);
        if (tracking_ == tracking_kind::mprotect && mprotect(start, bytes, PROT_READ) != 0) {
            throw_kernel_error("mprotect", errno, context);
        }
    } else {
        // Close the view first, then free the memfd pages behind both views.
        if (mprotect(start, bytes, PROT_NONE) != 0) throw_kernel_error("mprotect", errno, context);
        if (madvise(a.alias_of(page), bytes, MADV_REMOVE) != 0) {
            common::throw_system_error("madvise", errno, "vm: " + context);
        }
    }
    // Read before writing: discarding a large range that is mostly missing
    // (an address-space reuse round) must not make its side table resident.
    // A page being released (I8) is missing already.
    std::uint64_t dropped = 0;
    for (std::size_t i = a.index_of(page), last = i + npages; i < last; ++i) {
        std::uint32_t& state = a.states[i];
        const std::uint32_t seen = state_ref(state).load(std::memory_order_acquire);
        if (seen != page_missing && seen != page_releasing) {
            if (state_ref(state).exchange(page_missing, std::memory_order_acq_rel) == page_resident) ++dropped;
            note_missing(a, i);
        }
        clear_dirty(a, i);
    }
    discards_.fetch_add(dropped, std::memory_order_relaxed);
}

std::vector<std::uintptr_t> space::take_dirty() {
    std::vector<std::uintptr_t> pages;
    for_each_own_arena([&](arena& a) {
        if (tracking_ == tracking_kind::wp_async) {
            take_written_pages(a, pages);
        } else {
            take_dirty_bits(a, pages);
        }
    });
    std::sort(pages.begin(), pages.end());
    return pages;
}

void space::take_dirty_bits(arena& a, std::vector<std::uintptr_t>& pages) {
    // Clear the bits (summary first, I4), then re-protect (I2).
    const std::size_t first_new = pages.size();
    for (std::size_t s = 0; s < a.summary_words; ++s) {
        if (bits_ref(a.dirty_summary[s]).load(std::memory_order_relaxed) == 0) continue;
        for (std::uint64_t words = bits_ref(a.dirty_summary[s]).exchange(0, std::memory_order_acq_rel); words != 0;
             words &= words - 1) {
            const std::size_t w = s * 64 + static_cast<std::size_t>(std::countr_zero(words));
            for (std::uint64_t bits = bits_ref(a.dirty[w]).exchange(0, std::memory_order_acq_rel); bits != 0;
                 bits &= bits - 1) {
                pages.push_back(a.page_at(w * 64 + static_cast<std::size_t>(std::countr_zero(bits))));
            }
        }
    }
    // One call per run of dirty pages (they are in address order here), a run
    // bridging short gaps that protect() leaves as they are: fewer calls, and
    // for mprotect the split mappings merge again.
    for (std::size_t run = first_new; run < pages.size();) {
        std::size_t next = run + 1;
        while (next < pages.size() && can_bridge(a, pages[next - 1] + page_size, pages[next])) ++next;
        const std::size_t npages = (pages[next - 1] - pages[run]) / page_size + 1;
        const char* call = nullptr;
        if (const int err = protect(pages[run], npages, call)) {
            // Keep what could not be re-protected dirty, so that it is not lost.
            const std::uintptr_t failed_page = pages[run];
            for (std::size_t i = run; i < pages.size(); ++i) mark_dirty(a, a.index_of(pages[i]));
            pages.resize(first_new);
            throw_kernel_error(call, err, "re-arming write tracking at " + hex(failed_page));
        }
        run = next;
    }
}

// May protect() cover the clean pages in [first, last) too? Protecting a
// clean page changes nothing, and neither does protecting a page made
// writable concurrently: its dirty bit is set after (I2), so it is reported
// next time. UFFDIO_WRITEPROTECT leaves missing pages alone, and so does
// mprotect(PROT_READ) on a uffd arena, which is PROT_READ throughout; but in
// the mprotect backend a missing or filling page is PROT_NONE and must stay so
// (I1), so there the gap must be resident.
bool space::can_bridge(arena& a, std::uintptr_t first, std::uintptr_t last) const noexcept {
    constexpr std::uintptr_t max_gap = 256 * page_size;
    if (last - first > max_gap) return false;
    if (backend_ == backend_kind::uffd) return true;
    for (std::uintptr_t page = first; page < last; page += page_size) {
        if (state_ref(a.states[a.index_of(page)]).load(std::memory_order_acquire) != page_resident) return false;
    }
    return true;
}

void space::take_written_pages(arena& a, std::vector<std::uintptr_t>& pages) {
    const std::size_t first_new = pages.size();
    const int err = scan_written(a.first(), a.last(), true, [&](std::uintptr_t first, std::uintptr_t last) {
        for (std::uintptr_t p = first; p < last; p += page_size) pages.push_back(p);
    });
    if (err) common::throw_system_error("PAGEMAP_SCAN", err, "vm: collecting written pages of arena " + hex(a.first()));
    // Re-armed: clean as they are now (I5). A write since makes the page
    // written again, whatever its sum says.
    for (std::size_t i = first_new; i < pages.size(); ++i)
        note_clean(a, pages[i], reinterpret_cast<const std::byte*>(pages[i]));
}

std::uint64_t space::count_written() const {
    std::uint64_t n = 0;
    for_each_own_arena([&](arena& a) {
        if (tracking_ == tracking_kind::wp_async) {
            (void)scan_written(a.first(), a.last(), false,
                               [&](std::uintptr_t first, std::uintptr_t last) { n += (last - first) / page_size; });
            return;
        }
        for (std::size_t s = 0; s < a.summary_words; ++s)
            for (std::uint64_t words = bits_ref(a.dirty_summary[s]).load(std::memory_order_relaxed); words != 0;
                 words &= words - 1) {
                const std::size_t w = s * 64 + static_cast<std::size_t>(std::countr_zero(words));
                n += static_cast<std::uint64_t>(std::popcount(bits_ref(a.dirty[w]).load(std::memory_order_relaxed)));
            }
    });
    return n;
}

bool space::is_resident(std::uintptr_t page) const {
    const arena* a = arena_of(page);
    return a != nullptr && state_ref(a->states[a->index_of(page)]).load(std::memory_order_acquire) == page_resident;
}

bool space::is_missing(std::uintptr_t page) const {
    const arena* a = arena_of(page);
    if (a == nullptr) return true;
    const std::uint32_t state = state_ref(a->states[a->index_of(page)]).load(std::memory_order_acquire);
    return state == page_missing || state == page_releasing;
}

// What of I1-I7 can be seen between operations (no fill, hold or take_dirty
// under way), reading each arena's side table below its touched mark only
// (I6): every page is missing or resident (I1: a claim lasts only as long as
// its fill or hold); only resident pages have dirty bits, as discard()
// clears them with the state (I2); each arena's slot is live, ours, a
// page-aligned range and overlaps none of the space's other arenas (I3); a
// page bit always has its summary bit (I4); every fault slot of the staging
// area is free (I5; a page still held is still claimed, which I1 finds); the
// counters agree with the resident pages found (I7).
std::vector<std::string> space::check_invariants() const {
    std::vector<std::string> findings;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
    std::uint64_t resident = 0;
    for_each_own_arena([&](arena& a) {
        ranges.emplace_back(a.first(), a.last());
        resident += check_arena(a, findings);
    });
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second)
            findings.push_back("I3: arenas at " + hex(ranges[i - 1].first) + " and " + hex(ranges[i].first) +
                               " overlap");
    if (free_fault_slots_.load(std::memory_order_acquire) != ~std::uint64_t{0})
        findings.push_back("I5: a staging slot of evict_clean() is still in use with no eviction under way");
    const space_stats counted = stats();
    if (counted.installs != counted.discards + counted.evictions + resident)
        findings.push_back("I7: " + std::to_string(resident) + " pages are resident, but the counters say " +
                           std::to_string(counted.installs) + " installed - " + std::to_string(counted.discards) +
                           " discarded - " + std::to_string(counted.evictions) + " evicted");
    return findings;
}

// I1-I4 and I8 over one arena, below its touched mark (I6); returns its resident pages.
std::uint64_t space::check_arena(const arena& a, std::vector<std::string>& findings) const {
    const std::string name = "arena " + hex(a.first()) + "-" + hex(a.last());
    if (a.first() % page_size != 0 || a.last() % page_size != 0 || a.first() >= a.last())
        findings.push_back("I3: " + name + " is not a page-aligned, non-empty range");
    const std::size_t npages = touched_pages(a);
    if (npages < a.touched.load(std::memory_order_relaxed))
        findings.push_back("I6: the touched mark of " + name + " is past its end");
    std::uint64_t resident = 0;
    for (std::size_t i = 0; i < npages; ++i) {
        const std::uint32_t state = state_ref(a.states[i]).load(std::memory_order_acquire);
        if (state == page_resident) ++resident;
        if (state != page_missing && state != page_resident)
            findings.push_back("I1: page " + hex(a.page_at(i)) + " of " + name + " is still claimed (state " +
                               std::to_string(state) + ") with no fill or hold under way");
        if (dirty_bit(a, i) && state != page_resident)
            findings.push_back("I2: page " + hex(a.page_at(i)) + " of " + name + " is dirty but not resident");
    }
    for (std::size_t w = 0; w < (npages + 63) / 64; ++w) {
        const bool page_bits = bits_ref(a.dirty[w]).load(std::memory_order_acquire) != 0;
        const bool summary = (bits_ref(a.dirty_summary[w / 64]).load(std::memory_order_acquire) >> (w % 64)) & 1;
        if (page_bits && !summary)
            findings.push_back("I4: dirty word " + std::to_string(w) + " of " + name +
                               " has page bits but no summary bit");
    }
    check_chunks(a, name, findings);
    return resident;
}

// I8 over the chunks below the touched mark: each count is its pages not
// missing, a released chunk has none, and the arena's tally of released
// chunks is right.
void space::check_chunks(const arena& a, const std::string& name, std::vector<std::string>& findings) {
    const std::size_t npages = touched_pages(a);
    std::size_t released = 0;
    for (std::size_t chunk = 0; chunk * pages_per_chunk < npages; ++chunk) {
        std::uint32_t not_missing = 0;
        for (std::size_t i = chunk * pages_per_chunk; i < std::min(npages, (chunk + 1) * pages_per_chunk); ++i)
            not_missing += state_ref(a.states[i]).load(std::memory_order_acquire) != page_missing;
        const std::uint32_t count = std::atomic_ref<std::uint32_t>(a.counts[chunk]).load(std::memory_order_acquire);
        released += (count & chunk_released) != 0;
        if ((count & ~chunk_released) != not_missing || ((count & chunk_released) && not_missing != 0))
            findings.push_back("I8: chunk " + std::to_string(chunk) + " of " + name + " counts " +
                               std::to_string(count & ~chunk_released) +
                               ((count & chunk_released) ? " (released)" : "") + " pages not missing, but has " +
                               std::to_string(not_missing));
    }
    if (released != a.released_chunks.load(std::memory_order_relaxed))
        findings.push_back("I8: " + name + " says " + std::to_string(a.released_chunks.load()) +
                           " chunks are released, but " + std::to_string(released) + " are marked so");
}

// The pages of `a` a checker reads: those below its touched mark (I6).
std::size_t space::touched_pages(const arena& a) noexcept {
    return std::min(a.touched.load(std::memory_order_relaxed), (a.last() - a.first()) / page_size);
}

std::vector<std::uintptr_t> space::resident_pages() const {
    std::vector<std::uintptr_t> pages;
    for_each_own_arena([&](arena& a) {
        for (std::size_t i = 0, n = touched_pages(a); i < n; ++i)
            if (state_ref(a.states[i]).load(std::memory_order_acquire) == page_resident) pages.push_back(a.page_at(i));
    });
    std::sort(pages.begin(), pages.end());
    return pages;
}

std::uint64_t space::table_bytes() const {
    const auto pages = [](std::uint64_t bytes) { return (bytes + page_size - 1) / page_size * page_size; };
    std::uint64_t bytes = 0;
    for_each_own_arena([&](arena& a) {
        const std::uint64_t n = touched_pages(a);
        const std::uint64_t per_chunk = keeps_sums() ? 2 * page_size : page_size;  // states, checksums
        const std::uint64_t dirty_and_counts =
            (n + 63) / 64 * sizeof(std::uint64_t) + (n + pages_per_chunk - 1) / pages_per_chunk * sizeof(std::uint32_t);
        const std::uint64_t parts = pages(n * sizeof(std::uint32_t)) + pages(dirty_and_counts) +
                                    (keeps_sums() ? pages(n * sizeof(std::uint32_t)) : 0);
        const std::uint64_t released = a.released_chunks.load(std::memory_order_relaxed) * per_chunk;
        const std::uint64_t held = std::min<std::uint64_t>(parts, a.side_bytes);  // a small arena's parts share pages
        if (n > 0) bytes += held - std::min(held, released);
    });
    return bytes;
}

// I6 holds after it: the touched mark goes back to 0 with every page missing.
void space::release_tables(std::uintptr_t base) {
    arena& a = checked_arena(base, 1, "release_tables");
    for (std::size_t i = 0, n = touched_pages(a); i < n; ++i)
        if (state_ref(a.states[i]).load(std::memory_order_acquire) != page_missing)
            throw error(errc::invalid_argument, "vm: release_tables: page " + hex(a.page_at(i)) + " is not missing");
    if (madvise(a.side, a.side_bytes, MADV_DONTNEED) != 0)
        common::throw_system_error("madvise", errno, "vm: releasing the side table of the arena at " + hex(base));
    a.touched.store(0, std::memory_order_relaxed);
    a.released_chunks.store(0, std::memory_order_relaxed);  // the counts are zero again too (I8)
}

space_stats space::stats() const {
    return {faults_.load(std::memory_order_relaxed), write_faults_.load(std::memory_order_relaxed),
            installs_.load(std::memory_order_relaxed), discards_.load(std::memory_order_relaxed),
            evictions_.load(std::memory_order_relaxed), fill_ns_.load(std::memory_order_relaxed),
            filled_ahead_.load(std::memory_order_relaxed)};
}


// hold() moves pages out (I5) with uffd write-protect tracking on a kernel
// with UFFDIO_MOVE, unless STEPPE_UFFD_MOVE=0 asks for the mprotect way.
// (mprotect tracking splits the arena into mappings of different
// protection, between which UFFDIO_MOVE refuses to move.)
bool moves_pages(tracking_kind tracking) {
    const char* env = std::getenv("STEPPE_UFFD_MOVE");
    return kernel().uffd_move && tracking != tracking_kind::mprotect && !(env && std::strcmp(env, "0") == 0);
}

// The slots hold() and evict_clean() move pages to: pages like an arena's
// (private, read-write, 4 KiB pages, registered the same way: UFFDIO_MOVE
// wants both sides alike). 0 when that cannot be had: hold() then protects
// instead.
std::uintptr_t make_staging(int uffd, std::size_t pages) noexcept {
    const std::size_t bytes = pages * page_size;
    void* p = common::map_sparse(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return 0;
    madvise(p, bytes, MADV_NOHUGEPAGE);
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<std::uintptr_t>(p);
    reg.range.len = bytes;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
    if (madvise(p, bytes, MADV_DONTFORK) != 0 || ioctl(uffd, UFFDIO_REGISTER, &reg) != 0 ||
        !(reg.ioctls & (std::uint64_t{1} << _UFFDIO_MOVE))) {
        munmap(p, bytes);
        return 0;
    }
    return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace impl

std::unique_ptr<fault_space> fault_space::create(backend_kind backend, fill_fn fill, void* ctx,
                                                 std::optional<tracking_kind> tracking, write_refused_fn refuse_write) {
    if (fill == nullptr) throw error(errc::invalid_argument, "vm: fault_space::create needs a fill function");
    const kernel_support& k = kernel();
    if (backend == backend_kind::uffd && !k.uffd) {
        throw error(errc::unsupported, "vm: the uffd fault backend cannot work here: " + k.uffd_problem +
                                           ". Use the mprotect backend (STEPPE_FAULT_BACKEND=mprotect).");
    }
    // Read-only: mprotect tracking keeps every page PROT_READ until a first
    // write, which refuse_write ends; no other variant maps pages read-only.
    tracking_kind chosen = detail::choose_tracking(backend, refuse_write ? tracking_kind::mprotect : tracking);
    int pagemap = -1;
    if (chosen == tracking_kind::wp_async) {
        pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (pagemap < 0) {
            // A non-dumpable process (after setuid, or PR_SET_DUMPABLE 0) may not
            // read its own pagemap: fall back to write faults unless asked.
            const int err = errno;
            if (tracking.has_value() || std::getenv("STEPPE_WRITE_TRACKING"))
                common::throw_system_error("open", err, "vm: opening /proc/self/pagemap for PAGEMAP_SCAN");
            chosen = tracking_kind::wp_sync;
        }
    }
    detail::install_signal_handlers();

    int uffd = -1;
    if (backend == backend_kind::uffd) {
        uffd = detail::open_userfaultfd();
        if (uffd < 0) {
            if (pagemap >= 0) close(pagemap);
            common::throw_system_error("userfaultfd", -uffd, "vm: opening a userfaultfd");
        }
        uffdio_api api{};
        api.api = UFFD_API;
        api.features = UFFD_FEATURE_SIGBUS;
        if (chosen == tracking_kind::wp_sync) api.features |= UFFD_FEATURE_PAGEFAULT_FLAG_WP;
        if (chosen == tracking_kind::wp_async) api.features |= UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_ASYNC;
        if (impl::moves_pages(chosen)) api.features |= UFFD_FEATURE_MOVE;
        if (ioctl(uffd, UFFDIO_API, &api) != 0) {
            const int err = errno;
            close(uffd);
            if (pagemap >= 0) close(pagemap);
            common::throw_system_error("UFFDIO_API", err, "vm: enabling userfaultfd features for write tracking " +
                                                              std::string(to_string(chosen)));
        }
    }
    const std::uintptr_t staging =
        backend == backend_kind::uffd && impl::moves_pages(chosen) ? impl::make_staging(uffd, impl::staging_pages) : 0;
    return std::make_unique<impl::space>(backend, chosen, fill, refuse_write, ctx, uffd, pagemap, staging);
}

}  // namespace steppe::vm
