// steppe::vm — address-space arenas, fault backends and write tracking.
//
// A fault_space hands out arenas: large, cheap (MAP_NORESERVE) ranges of
// virtual memory whose pages start *missing*. The first touch of a missing
// page, from any thread, calls the space's fill function in signal context on
// the touching thread, installs what it produced, and lets the access retry.
// Pages written since the last take_dirty() are reported by the next one.
// The module knows nothing about storage, pointers or types.
//
// Page life cycle (per page, see fault_space_impl.hpp for the invariants):
//
//     missing --first touch / install()--> resident clean --first write--> resident dirty
//        ^                                     ^                               |
//        +-------------- discard() ------------+---------- take_dirty() -------+
//        +------------------ hold() + release(drop) -------- resident clean or dirty
//        +------------------ evict_clean() ----------------- resident clean
//
// (hold() + release(keep) leaves a page as it was.)
//
// Backends:
//   uffd      arenas registered with userfaultfd (UFFD_FEATURE_SIGBUS): a touch of a
//             missing page raises SIGBUS; the handler installs with UFFDIO_COPY.
//             ~4-5 us per fault, no VMA per page. The default.
//   mprotect  arenas are PROT_NONE views of a memfd; the SIGSEGV handler fills the
//             page through a second, writable view and then opens it with
//             mprotect. Portable fallback; every run of pages with one protection
//             costs a VMA, so it fails past vm.max_map_count.
//
// Write tracking:
//   wp_async  UFFD_FEATURE_WP_ASYNC: the kernel un-protects on first write with no
//             signal; take_dirty() is one PAGEMAP_SCAN per arena (Linux >= 6.7).
//   wp_sync   userfaultfd write-protect faults (SIGBUS) mark the page (Linux >= 5.7).
//   mprotect  clean pages are PROT_READ; the first write's SIGSEGV marks the page.
//             The mprotect backend's only variant; with uffd, for kernels without
//             userfaultfd write-protect (it splits mappings like the mprotect backend).
//
// Rules for callers:
//   * The fill function runs in signal context: it must be async-signal-safe,
//     must not throw, and must not touch non-resident pages of any arena (a nested
//     fault on a page another thread is filling would deadlock). It must write all
//     page_size bytes of `out`, which holds leftovers. It runs on the faulting
//     thread's own stack, never an alternate signal stack, and adds to it (8 KiB
//     for the vm module's frame).
//   * System calls given a non-resident arena address fail with EFAULT instead
//     of faulting the page in (read(2) into an arena, for instance). Touch it first.
//   * Arenas are not inherited by fork(): the child has no mapping there
//     (MADV_DONTFORK) and its registry is empty; touching one in the child ends
//     it with a message naming the process that owns the arena (exit 71).
//   * Destroy a fault_space only when no thread is touching its arenas.
//   * install(), discard() and take_dirty() may be called from any thread, but the
//     caller keeps other threads off the pages it discards.
//   * The process-wide SIGBUS and SIGSEGV handlers are installed on the first
//     create() and chain to the handlers found then for faults that are not ours.
//     A handler installed later for those signals must chain to ours. They do not
//     use SA_ONSTACK, so a thread that overflows its stack dies of SIGSEGV
//     without reaching an earlier handler's stack-overflow report.
//
// Environment (read by choose_backend() and create()):
//   STEPPE_FAULT_BACKEND=uffd|mprotect       forces the backend
//   STEPPE_WRITE_TRACKING=wp_async|wp_sync|mprotect   forces the tracking variant
//   STEPPE_UFFD_MOVE=0                       hold() protects pages instead of moving them
// Any other non-empty value is an error (errc::invalid_argument).
#pragma once

#include "common/page_size.hpp"
#include "common/sigsafe.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace steppe::vm {

using common::page_size;

// Arenas live in one process-wide table that the fault handler scans.
inline constexpr std::size_t max_arenas = 1024;

// Exit status of a process whose fault handler met an error it cannot report
// by exception (after one line on stderr saying what and what to do).
using common::fatal_exit_status;  // EX_OSERR

// A page a store leaves unmapped on purpose (translate's dead page, where
// stored pointers to memory no object holds lead). A touch of it ends the
// process (exit 71) with a message naming the store and what the touch
// means, after `fatal_hook` if any, instead of a bare SIGSEGV. `store` must
// stay valid until unregister_trap_page. Async-signal-safe to look up.
void register_trap_page(std::uintptr_t page, const char* store, void (*fatal_hook)(const char*));
void unregister_trap_page(std::uintptr_t page) noexcept;

// A range a client keeps PROT_NONE on purpose and serves itself (the object
// engine's protected fault blocks): a protection fault there calls `trap` in
// signal context on the touching thread with the signal's ucontext_t, which
// it may change (registers) before the access is retried; false treats the
// touch as not ours (chained, as a wild access). `trap` must be
// async-signal-safe and must not throw. The range must not overlap an arena;
// unregister it only when no thread can touch it. At most max_arenas ranges;
// throws errc::unsupported past that.
using trap_fn = bool (*)(void* ctx, std::uintptr_t address, void* ucontext) noexcept;
void register_trap_range(std::uintptr_t base, std::size_t bytes, trap_fn trap, void* ctx);
void unregister_trap_range(std::uintptr_t base) noexcept;

// Closed ranges: when a store closes, the addresses of its memory are not
// given back. They stay reserved, PROT_NONE, with no memory behind them, so a
// pointer or reference the program kept past close() never leads into a later
// store's memory (no reservation can land on them while they are kept): a
// touch ends the process (exit 71) with "<store_kind> <path>: <handle>
// followed after its store closed (it led to 0x..., in the closed store's
// memory); <advice>". The most recent max_closed_ranges ranges, up to
// max_closed_bytes of address space (under RLIMIT_AS, up to a quarter of
// what the limit would leave without them: a range larger than that is
// given back at once), are kept; older ones, and all of them
// when a reservation finds the address space full (RLIMIT_AS, or no room
// left), are given back: a store that opens matters more than the protection
// of pointers to closed ones. Both engines' stores retire their memory so.
struct closed_words {      // static strings, for the message
    const char* store_kind;  // "store", "object store"
    const char* handle;      // "a pointer", "a reference"
    const char* advice;      // what to do instead
};
inline constexpr std::size_t max_closed_ranges = 512;
inline constexpr std::uint64_t max_closed_bytes = std::uint64_t{32} << 40;
// [base, base + bytes), the caller's mapping, becomes a closed range of the
// store at `store_path`: replaced at once by a PROT_NONE reservation. If the
// kernel refuses that, the range is unmapped (a touch is then a bare SIGSEGV).
void retire_range(std::uintptr_t base, std::uint64_t bytes, const std::string& store_path,
                  const closed_words& words) noexcept;
// Address space: PROT_NONE, NORESERVE; on ENOMEM the closed ranges are given
// back and it is tried again; MAP_FAILED (errno set) if that does not help.
void* reserve_address_space(std::uint64_t bytes) noexcept;
// Gives every closed range back; false if there was none. Async-signal-safe.
bool give_back_closed_ranges() noexcept;

enum class backend_kind { uffd, mprotect };
enum class tracking_kind { wp_async, wp_sync, mprotect };

const char* to_string(backend_kind kind) noexcept;
const char* to_string(tracking_kind kind) noexcept;

// STEPPE_FAULT_BACKEND overrides `requested`. Without it, uffd falls back to
// mprotect when this kernel refuses userfaultfd (seccomp, permissions, age).
// Throws errc::invalid_argument for a bad STEPPE_FAULT_BACKEND.
backend_kind choose_backend(backend_kind requested);

// What the running kernel offers; probed once per process.
struct kernel_support {
    bool uffd = false;          // a userfaultfd with UFFD_FEATURE_SIGBUS can be opened
    bool uffd_wp = false;       // anonymous write-protect (UFFD_FEATURE_PAGEFAULT_FLAG_WP)
    bool wp_async = false;      // UFFD_FEATURE_WP_ASYNC
    bool uffd_move = false;     // UFFDIO_MOVE (Linux >= 6.8): hold() takes pages out without mprotect
    bool pagemap_scan = false;  // the PAGEMAP_SCAN ioctl on /proc/self/pagemap
    std::uint64_t uffd_features = 0;  // as answered by UFFDIO_API
    std::string uffd_problem;         // why uffd is unusable, when it is
};
const kernel_support& kernel();

// The tracking variants that create() accepts for `backend` on this kernel,
// best first.
std::vector<tracking_kind> supported_tracking(backend_kind backend);

// Produces the contents of the missing page at `page_addr` into `out`
// (page_size bytes, page-aligned, owned by the vm module). Called in signal
// context on the faulting thread, once per first touch: concurrent touches of
// the same page wait for the one fill. Returns false when the page has no
// contents (a guard page, an unreadable page it has already reported): the
// touch is then treated as a wild access and crashes like one.
using fill_fn = bool (*)(void* ctx, std::uintptr_t page_addr, std::byte* out) noexcept;

// A read-only space's answer to a write at `address` (a page of one of its
// arenas, resident or not): called in signal context on the writing thread;
// it must end the process (async-signal-safe), as the write cannot go on.
using write_refused_fn = void (*)(void* ctx, std::uintptr_t address) noexcept;

struct space_stats {
    std::uint64_t faults;        // missing pages filled on touch (= fill calls that succeeded)
    std::uint64_t write_faults;  // first writes caught by wp_sync / mprotect tracking
    std::uint64_t installs;      // pages made resident, by touch or by install()
    std::uint64_t discards;      // resident pages made missing by discard()
    std::uint64_t evictions;     // held pages dropped by release()
    std::uint64_t fill_ns;       // in the fills of missing pages: the fill callback, bookkeeping, mapping
    std::uint64_t filled_ahead;  // missing pages filled by fill_ahead(), before any touch (not in faults)
};

// try_reserve()'s answer: base, or the failed call and its errno.
struct reserve_result {
    std::uintptr_t base = 0;
    const char* failed_call = nullptr;
    int error = 0;
};

class fault_space {
public:
    // `tracking` empty: STEPPE_WRITE_TRACKING, else the best the kernel offers.
    // With `refuse_write`, the space is read-only: every page is mapped
    // PROT_READ (tracking is mprotect whatever was asked, so nothing but a
    // first write would make a page writable) and a write to any page of it
    // calls refuse_write instead of being tracked.
    // Throws errc::unsupported when the backend or tracking variant cannot work
    // here (saying why), errc::invalid_argument for a null fill or a bad
    // STEPPE_WRITE_TRACKING, errc::io when a system call fails.
    static std::unique_ptr<fault_space> create(backend_kind backend, fill_fn fill, void* ctx,
                                               std::optional<tracking_kind> tracking = std::nullopt,
                                               write_refused_fn refuse_write = nullptr);

    // Unregisters and unmaps all its arenas. No thread may touch them any more.
    virtual ~fault_space();

    // A new arena of `bytes` rounded up to whole pages, all pages missing;
    // returns its base (page-aligned). Meant for large ranges (GiBs): the caller
    // sub-allocates; at most max_arenas live in the process.
    // Throws errc::io naming the failed call, errc::unsupported when the arena
    // table is full.
    virtual std::uintptr_t reserve(std::size_t bytes) = 0;
    // The same without exceptions or allocation: async-signal-safe, so a fill
    // function may reserve space for the targets it discovers.
    virtual reserve_result try_reserve(std::size_t bytes) noexcept = 0;

    // At the close of the store whose memory the arenas hold: each arena
    // becomes a closed range (retire_range) and leaves the space, whose
    // destructor then has nothing of it to unmap. No thread may touch them.
    virtual void retire_arenas(const std::string& store_path, const closed_words& words) noexcept = 0;

    // Eager install from normal (non-signal) code: the page becomes resident and
    // clean with `content` (page_size bytes, any alignment, not itself a missing
    // arena page). Returns false, changing nothing, when the page is already
    // resident or being filled. Throws errc::invalid_argument for a page outside
    // this space's arenas, errc::io when the kernel refuses (vm.max_map_count for
    // the mprotect backend, named in the message).
    virtual bool install(std::uintptr_t page, const std::byte* content) = 0;

    // The first touch's fill without the touch: fills the missing page at
    // `page` on this thread (the fill function, in normal context) and maps
    // it resident and clean (`filled`). `not_missing`, doing nothing: the
    // page is resident, being filled or released, or outside this space.
    // `refused`: the fill gave no contents or the kernel refused the mapping
    // (the mprotect backend at vm.max_map_count); the page is missing again
    // (what the fill function did meanwhile is its own), and a touch fills
    // it itself and reports what fails for it. For loading pages ahead of
    // use (page engine, open_options::load_ahead); counted in filled_ahead,
    // not faults.
    enum class ahead { filled, not_missing, refused };
    virtual ahead fill_ahead(std::uintptr_t page) noexcept = 0;

    // Pages become missing again: the next touch calls fill. Their contents and
    // dirtiness are dropped (rollback, eviction). The range must lie in one arena.
    virtual void discard(std::uintptr_t page, std::size_t npages) = 0;

    // Eviction, while other threads may write: hold() claims each resident
    // page of `pages` (ascending, at most max_held) like a fill, so a touch
    // that faults waits for it, and takes it out of the program's reach: it
    // moves it aside (UFFDIO_MOVE, Linux >= 6.8) or makes it read-only, so it
    // cannot change while the caller reads it at contents[i], from any thread.
    // out[i] says whether pages[i] was written since the last take_dirty(),
    // or `none` (nothing changed) if it is not resident or cannot be taken.
    // release() then either drops held pages (missing: the next touch calls
    // fill; counted as evictions) or puts them back as they were, written or
    // not. One holder at a time; a kernel error in release() ends the
    // process (a page could be neither). No write is ever lost. One system
    // call per run of consecutive pages, not per page.
    static constexpr std::size_t max_held = 1024;
    enum class held { none, clean, written };
    virtual void hold(std::span<const std::uintptr_t> pages, std::span<held> out,
                      std::span<const std::byte*> contents) noexcept = 0;
    virtual void release(std::span<const std::uintptr_t> pages, bool drop) noexcept = 0;

    // Eviction on a faulting thread: drops `page` if it is resident and was
    // not written since the last take_dirty(), without losing a write another
    // thread makes meanwhile; false, changing nothing, if it was written, is
    // busy, or cannot be checked that way here (wp_async tracking without
    // UFFDIO_MOVE). With `copy_to` (page_size bytes, not an arena page), a
    // page it drops is first copied there as it was when claimed, so the
    // copy holds its last contents: the page engine's cooling stage keeps it.
    // Async-signal-safe.
    virtual bool evict_clean(std::uintptr_t page, std::byte* copy_to) noexcept = 0;

    // Pages written since the previous take_dirty() (or since install/fill),
    // sorted; write tracking is re-armed so the next write is seen again. A write
    // racing with the call is reported either now or next time, never lost.
    virtual std::vector<std::uintptr_t> take_dirty() = 0;

    // How many pages take_dirty() would report now (without re-arming).
    virtual std::uint64_t count_written() const = 0;

    // False for addresses outside this space's arenas.
    virtual bool is_resident(std::uintptr_t page) const = 0;
    // Missing, or outside this space's arenas: neither resident nor claimed
    // (by a fill, a first write, a hold or an evict_clean that may leave it
    // resident). Async-signal-safe.
    virtual bool is_missing(std::uintptr_t page) const = 0;

    // Every resident page of this space, ascending; for checkers, between
    // operations (it reads only the part of each arena ever touched).
    virtual std::vector<std::uintptr_t> resident_pages() const = 0;

    // Memory the arenas' side tables (page states, dirty bits, checksums of
    // clean pages) hold: the part below each arena's highest page ever
    // touched, in whole pages, less the chunks given back; the rest is
    // NORESERVE and costs nothing. About 8 bytes per virtual page touched
    // (4 without wp_async tracking), but a chunk of 1,024 pages that are
    // all missing again (discarded, evicted) gives its table pages back, so
    // a walk of a store larger than its budget keeps the tables of what is
    // resident. Cheap (no system call); for the store's memory accounting.
    virtual std::uint64_t table_bytes() const = 0;
    // Gives the side table of the arena at `base` back to the system (it
    // reads as all missing again), when every page of the arena is missing:
    // an address-space reuse round reclaimed it. No other thread may touch
    // the arena meanwhile. Throws invalid_argument for a base not of this
    // space or an arena with a page not missing.
    virtual void release_tables(std::uintptr_t base) = 0;

    virtual backend_kind backend() const = 0;
    virtual tracking_kind tracking() const = 0;
    virtual space_stats stats() const = 0;

    // Checks the invariants I1-I8 (fault_space_impl.hpp) as far as they show
    // between operations: call it while no thread touches, installs, holds,
    // releases or discards pages of this space. Returns one line per broken
    // rule, naming the page or arena; empty when all hold. It reads only the
    // part of each arena ever touched, so it is cheap however large the
    // arenas are.
    virtual std::vector<std::string> check_invariants() const = 0;
};

}  // namespace steppe::vm
