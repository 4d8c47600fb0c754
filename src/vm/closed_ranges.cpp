// Closed ranges (vm.hpp): the addresses of closed stores' memory, kept
// reserved so a pointer or reference kept past close() traps instead of
// reaching the store opened next. A ring of fixed entries, oldest first
// from `g_oldest`, because the fault handler reads them in signal context.
// Each entry is a seqlock (as the trap ranges in traps.cpp are): its writer,
// holding the ring, makes the sequence odd, changes the fields, makes it even
// again; the handler uses what it read only if the sequence was even and the
// same before and after. The ring's lock is a spin flag, not a mutex,
// because try_reserve gives closed ranges back from a fill function.
#include "common/sigsafe.hpp"
#include "common/sparse_mapping.hpp"
#include "vm/sys.hpp"
#include "vm/vm.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>

namespace steppe::vm {

namespace {

struct closed_range {
    std::atomic<std::uint64_t> seq{0};  // odd while the fields change
    std::atomic<std::uintptr_t> base{0};
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<const closed_words*> words{nullptr};
    char store[512] = {};

    // Holding the ring. base 0: the entry is empty.
    void set(std::uintptr_t b, std::uint64_t n, const closed_words* w, const char* path) noexcept {
        seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        base.store(b, std::memory_order_relaxed);
        bytes.store(n, std::memory_order_relaxed);
        words.store(w, std::memory_order_relaxed);
        std::size_t i = 0;
        for (; path && path[i] && i + 1 < sizeof store; ++i) store[i] = path[i];
        store[i] = '\0';
        seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
};
static_assert(std::atomic<const closed_words*>::is_always_lock_free, "read in signal context");

closed_range g_closed[max_closed_ranges];
std::size_t g_oldest = 0, g_closed_count = 0;
std::uint64_t g_closed_bytes = 0;
std::atomic_flag g_ring_busy = ATOMIC_FLAG_INIT;

// Held only around system calls on the ring's own ranges, which never fault
// into an arena, so a fill function waiting here cannot wait on itself.
struct ring_hold {
    ring_hold() noexcept {
        while (g_ring_busy.test_and_set(std::memory_order_acquire)) sched_yield();
    }
    ~ring_hold() { g_ring_busy.clear(std::memory_order_release); }
};

void give_back_oldest() noexcept {
    closed_range& r = g_closed[g_oldest];
    const std::uintptr_t base = r.base.load(std::memory_order_relaxed);
    const std::uint64_t bytes = r.bytes.load(std::memory_order_relaxed);
    r.set(0, 0, nullptr, nullptr);  // no longer found before its addresses can be someone else's
    ::munmap(reinterpret_cast<void*>(base), bytes);
    g_closed_bytes -= bytes;
    g_oldest = (g_oldest + 1) % max_closed_ranges;
    --g_closed_count;
}

[[noreturn]] void touched_closed(const closed_words& w, const char* store, std::uintptr_t address) noexcept {
    char text[1280];
    common::fixed_message message(text, sizeof text);
    message << "steppe: fatal: " << w.store_kind << " " << store << ": " << w.handle
            << " followed after its store closed (it led to " << common::in_hex{address}
            << ", in the closed store's memory); " << w.advice << "\n";
    common::fatal_exit(message.c_str());
}

// The process's address space in bytes (/proc/self/statm's first field), 0
// if it cannot be read.
std::uint64_t address_space_in_use() noexcept {
    const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[64] = {};
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    std::uint64_t pages = 0;
    for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; ++i)
        pages = pages * 10 + static_cast<std::uint64_t>(text[i] - '0');
    return pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Under an address-space rlimit the closed ranges count against the
// program's own mappings too (its allocator's, a file it maps), which
// cannot give them back as steppe's reservations do: they keep at most a
// quarter of what the limit would leave without them (`retiring`, still
// mapped, counted as given back). Kept up to the whole limit, a program
// that closed a store could not map 100 GiB of its own under a limit that
// left 150 (a tester's finding). Holding the ring.
std::uint64_t closed_bytes_allowed(std::uint64_t retiring) noexcept {
    struct rlimit limit;
    if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return max_closed_bytes;
    const std::uint64_t in_use = address_space_in_use();
    const std::uint64_t others = in_use - std::min(in_use, g_closed_bytes + retiring);
    const std::uint64_t room = limit.rlim_cur > others ? limit.rlim_cur - others : 0;
    return std::min<std::uint64_t>(max_closed_bytes, room / 4);
}

}  // namespace

void* reserve_address_space(std::uint64_t bytes) noexcept {
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void* p = common::map_sparse(bytes, PROT_NONE, flags, -1, 0);
    if (p != MAP_FAILED || errno != ENOMEM || !give_back_closed_ranges()) return p;
    return common::map_sparse(bytes, PROT_NONE, flags, -1, 0);
}

bool give_back_closed_ranges() noexcept {
    // Full address space (or RLIMIT_AS): a store that opens matters more
    // than the protection of pointers to stores closed before it.
    ring_hold hold;
    if (g_closed_count == 0) return false;
    while (g_closed_count) give_back_oldest();
    return true;
}

void retire_range(std::uintptr_t base, std::uint64_t bytes, const std::string& store_path,
                  const closed_words& words) noexcept {
    void* at = reinterpret_cast<void*>(base);
    try {
        detail::install_signal_handlers();  // so that a touch is reported, not a bare SIGSEGV
    } catch (const std::exception&) {
        ::munmap(at, bytes);
        return;
    }
    // Replacing the mapping frees its memory and keeps the addresses in one
    // call, so no other mapping can take them in between.
    void* p = ::mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p != at) {  // refused (a map count or rlimit): given back, a touch is a bare SIGSEGV
        ::munmap(at, bytes);
        return;
    }
    ring_hold hold;
    const std::uint64_t allowed = closed_bytes_allowed(bytes);
    if (bytes > allowed) {  // given back: a touch may reach what is mapped there next
        ::munmap(at, bytes);
        return;
    }
    while (g_closed_count && (g_closed_count == max_closed_ranges || g_closed_bytes + bytes > allowed))
        give_back_oldest();
    g_closed[(g_oldest + g_closed_count) % max_closed_ranges].set(base, bytes, &words, store_path.c_str());
    g_closed_bytes += bytes;
    ++g_closed_count;
}

void detail::closed_touch(std::uintptr_t address) noexcept {
    for (const closed_range& r : g_closed) {
        const std::uint64_t before = r.seq.load(std::memory_order_acquire);
        const std::uintptr_t base = r.base.load(std::memory_order_relaxed);
        if (before % 2 != 0 || base == 0 || address < base || address - base >= r.bytes.load(std::memory_order_relaxed))
            continue;
        const closed_words* words = r.words.load(std::memory_order_relaxed);
        char store[sizeof r.store];
        std::memcpy(store, r.store, sizeof store);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (r.seq.load(std::memory_order_relaxed) != before) continue;  // changed meanwhile
        store[sizeof store - 1] = '\0';
        touched_closed(*words, store, address);
    }
}

}  // namespace steppe::vm
