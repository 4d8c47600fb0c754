// The fault space's insides, shared by fault_space.cpp (the registry, the
// fault handler, normal-code operations) and fault_space_hold.cpp (hold,
// release, evict_clean): the page states and the invariants everything
// relies on (I1-I8), the arenas, and the space class. Only src/vm includes
// it. Everything here that the handler touches is async-signal-safe (see
// fault_space.cpp's opening note).
#pragma once

#include "vm/uapi.hpp"
#include "vm/vm.hpp"

#include <sys/ioctl.h>

#include <cerrno>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace steppe::vm::impl {

// 1. Page states and invariants ---------------------------------------------
//
// Every arena page has a 32-bit state word in the arena's side table:
//
//     missing --CAS by the faulting/installing thread--> filling --map--> resident
//        ^                                                                   |
//        +-------------------------------- discard() ------------------------+
//
// (filling_waited is filling with a sleeper on the futex.) hold() claims a
// resident page the same way (resident -> filling), so a touch meanwhile
// waits as it would for a fill; a held page stays claimed until release()
// makes it missing or resident again, and meanwhile it is out of the
// program's reach: moved to the staging area (I5), or read-only where pages
// cannot be moved. evict_clean() claims a page the same way while it decides.
//
// (I1) Only the thread whose CAS moved a page from missing to filling produces
//      and maps it, and it maps the whole page with one kernel operation before
//      the state says resident: UFFDIO_COPY maps a filled page atomically; the
//      mprotect backend fills through a second, writable view of the arena's
//      memfd while the arena view is PROT_NONE and opens it with one mprotect.
//      So no thread ever sees a half-filled page, and fill runs once per touch
//      even when many threads touch the page at once (the others sleep on the
//      state word's futex).
// (I2) For wp_sync and mprotect tracking, a resident page is writable only if
//      its dirty bit is set or a take_dirty() that reported it has not yet
//      re-protected it. The handler claims the page (like a fill, so that a
//      concurrent hold() sees it before the write or written), un-protects
//      and then sets the bit;
//      take_dirty() clears the bit and then protects. A write between the two
//      steps of take_dirty() lands in a page that call reports; a write after
//      faults again. (wp_async: the kernel keeps the write-protect bit in the
//      PTE, and PAGEMAP_SCAN reports and re-protects each page atomically;
//      no dirty bit is set.)
// (I3) A registry slot is live from the end of reserve() until its space's
//      destructor; while live its fields do not change.
// (I4) Dirty bits come in two levels: one bit per page, and one summary bit
//      per 64-bit word of page bits. The page bit is set before the summary
//      bit, and take_dirty() clears the summary bit before the page bits, so a
//      page bit set concurrently is found now or on the next call.
// (I5) hold() takes pages out with UFFDIO_MOVE where it can (uffd with
//      userfaultfd write-protect, Linux >= 6.8): the move is atomic, so a
//      write lands before it (and is in what the holder reads) or faults
//      after it and waits on the claim. Whether a page was written is final
//      once it is claimed for wp_sync (a write to a clean page traps and
//      waits); wp_async writes do not trap, so a page that looked clean
//      before the move is compared with its CRC32C as last known clean
//      (taken when it was mapped, and when take_dirty() re-armed it).
// (I6) Pages of an arena at or past its `touched` mark have never left the
//      missing state: the thread whose CAS moved a page from missing to
//      filling raises the mark (note_claimed) before it maps the page
//      (fill_and_map, install), and nothing else makes a page leave missing.
//      So a checker reads the side table below the mark only, not the
//      gigabytes of table an arena of the default address-space limit has.
// (I7) installs - discards - evictions = resident pages: each change into or
//      out of resident counts once where it is made (fill_and_map, install;
//      discard() counts the pages it found resident, release(drop) and
//      evict_clean() those they drop). Its check also finds a resident page
//      past the touched mark (I6), which it would not count.
// (I8) The side table is cut into chunks of pages_per_chunk pages, one page
//      of state words each (and one of checksums). A chunk's count is the
//      number of its pages not missing: a claim out of missing adds one
//      (note_claimed), a page made missing again takes it off
//      (note_missing). When the count falls to zero the chunk's table pages
//      go back to the system (release_chunk) and the chunk is marked
//      released until the next claim in it; the arena counts its released
//      chunks, which table_bytes() leaves out. Releasing claims every state
//      word of the chunk first (missing -> releasing, and it gives up if one
//      is not missing), so no claim can be lost to the zeroing; a touch of a
//      page being released yields until its word reads missing again.
//      So what the side table costs follows the pages resident, not every
//      page ever touched (a walk of a store larger than its budget).
// space::check_invariants() (section 6) checks what of I1-I8 shows between
// operations; vm_test runs it, and so does store::check() through the page
// engine's pager.

enum page_state : std::uint32_t {
    page_missing = 0,  // the side table is fresh anonymous memory: zero = missing
    page_filling = 1,
    page_filling_waited = 2,
    page_resident = 3,
    page_releasing = 4,  // missing, its chunk's table being given back (I8)
};

// A chunk of the side table: the pages whose state words share one page.
constexpr std::size_t pages_per_chunk = page_size / sizeof(std::uint32_t);
constexpr std::uint32_t chunk_released = std::uint32_t{1} << 31;  // in a chunk's count word (I8)

inline std::atomic_ref<std::uint32_t> state_ref(std::uint32_t& word) { return std::atomic_ref<std::uint32_t>(word); }
inline std::atomic_ref<std::uint64_t> bits_ref(std::uint64_t& word) { return std::atomic_ref<std::uint64_t>(word); }
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);

enum class access { read, write, execute, unknown };

// 3. Arenas and the registry ------------------------------------------------
//
// A fixed array of slots, each an arena's description, shared by all spaces of
// the process. The handler finds the arena of a faulting address by scanning
// the slots up to the high-water mark: no lock, no allocation. The slot word
// holds a generation (bumped when the slot is freed) and a state; readers
// check it before and after reading base/end, seqlock-style (I3).

class space;

enum : std::uint64_t { slot_free = 0, slot_claimed = 1, slot_live = 2, slot_retiring = 3, slot_state_mask = 3 };

// The side table of an arena: page states, dirty bits, dirty summary bits,
// checksums of clean pages, chunk counts (I8). A whole chunk's states are
// a page of their own (the table starts on a page); in an arena of at least
// one whole chunk the checksums start on a page too, so a chunk's are one
// page. A smaller arena keeps its parts packed.
struct side_layout {
    std::size_t states_offset = 0, dirty_offset = 0, summary_offset = 0, counts_offset = 0, sums_offset = 0, bytes = 0;
    std::size_t dirty_words = 0, summary_words = 0, chunks = 0;

    static side_layout for_pages(std::size_t npages) {
        const auto round_up = [](std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; };
        side_layout layout;
        layout.dirty_words = (npages + 63) / 64;
        layout.summary_words = (layout.dirty_words + 63) / 64;
        layout.chunks = (npages + pages_per_chunk - 1) / pages_per_chunk;
        layout.dirty_offset = round_up(npages * sizeof(std::uint32_t), 64);
        layout.summary_offset = layout.dirty_offset + layout.dirty_words * sizeof(std::uint64_t);
        layout.counts_offset = layout.summary_offset + layout.summary_words * sizeof(std::uint64_t);
        const std::size_t counts_end = layout.counts_offset + layout.chunks * sizeof(std::uint32_t);
        layout.sums_offset = round_up(counts_end, npages >= pages_per_chunk ? page_size : 64);
        layout.bytes = round_up(layout.sums_offset + npages * sizeof(std::uint32_t), page_size);
        return layout;
    }
};

struct arena {
    std::atomic<std::uint64_t> slot{slot_free};  // generation << 2 | state
    std::atomic<std::uintptr_t> base{0};
    std::atomic<std::uintptr_t> end{0};
    // Written while the slot is claimed, constant while it is live (I3).
    space* owner = nullptr;
    std::uint32_t* states = nullptr;         // page_state per page
    std::uint64_t* dirty = nullptr;          // one bit per page (wp_sync, mprotect tracking)
    std::uint64_t* dirty_summary = nullptr;  // one bit per word of `dirty` (I4)
    std::uint32_t* sums = nullptr;           // CRC32C of each page as last known clean (I5)
    std::uint32_t* counts = nullptr;         // per chunk: its pages not missing, | chunk_released (I8)
    std::size_t summary_words = 0;
    std::atomic<std::size_t> touched{0};     // pages at or past it have always been missing (I6)
    std::atomic<std::size_t> released_chunks{0};  // chunks whose table pages were given back (I8)
    std::byte* alias = nullptr;  // mprotect backend: the writable view of the same memfd
    void* side = nullptr;
    std::size_t side_bytes = 0;

    std::uintptr_t first() const noexcept { return base.load(std::memory_order_relaxed); }
    std::uintptr_t last() const noexcept { return end.load(std::memory_order_relaxed); }
    std::size_t index_of(std::uintptr_t page) const noexcept { return (page - first()) / page_size; }
    std::uintptr_t page_at(std::size_t index) const noexcept { return first() + index * page_size; }
    std::byte* alias_of(std::uintptr_t page) const noexcept { return alias + (page - first()); }
    bool contains(std::uintptr_t address) const noexcept { return address >= first() && address < last(); }
};

inline std::atomic_ref<std::uint32_t> chunk_count(arena& a, std::size_t index) {
    return std::atomic_ref<std::uint32_t>(a.counts[index / pages_per_chunk]);
}

// Defined in fault_space.cpp. Async-signal-safe.
[[noreturn]] void fatal(const char* call, int err, std::uintptr_t page) noexcept;  // section 2
void note_claimed(arena& a, std::size_t index) noexcept;                            // section 3
arena* find_arena(std::uintptr_t address) noexcept;                                 // section 3

// The staging area (I5): slot i < max_held holds the page i of the current
// hold(); the fault_slots after them are for evict_clean() on faulting
// threads, one each while in use.
constexpr std::size_t fault_slots = 64;
constexpr std::size_t staging_pages = fault_space::max_held + fault_slots;

class space final : public fault_space {
public:
    space(backend_kind backend, tracking_kind tracking, fill_fn fill, write_refused_fn refuse_write, void* ctx,
          int uffd, int pagemap, std::uintptr_t staging)
        : backend_(backend), tracking_(tracking), fill_(fill), refuse_write_(refuse_write), ctx_(ctx), uffd_(uffd),
          pagemap_(pagemap), staging_(staging) {}
    ~space() override;

    std::uintptr_t reserve(std::size_t bytes) override;
    reserve_result try_reserve(std::size_t bytes) noexcept override;
    void retire_arenas(const std::string& store_path, const closed_words& words) noexcept override;
    bool install(std::uintptr_t page, const std::byte* content) override;
    ahead fill_ahead(std::uintptr_t page) noexcept override;
    void discard(std::uintptr_t page, std::size_t npages) override;
    std::vector<std::uintptr_t> take_dirty() override;
    bool is_resident(std::uintptr_t page) const override;
    bool is_missing(std::uintptr_t page) const override;
    std::vector<std::uintptr_t> resident_pages() const override;
    std::uint64_t table_bytes() const override;
    void release_tables(std::uintptr_t base) override;
    std::uint64_t count_written() const override;
    void hold(std::span<const std::uintptr_t> pages, std::span<held> out,
              std::span<const std::byte*> contents) noexcept override;
    void release(std::span<const std::uintptr_t> pages, bool drop) noexcept override;
    bool evict_clean(std::uintptr_t page, std::byte* copy_to) noexcept override;
    backend_kind backend() const override { return backend_; }
    tracking_kind tracking() const override { return tracking_; }
    space_stats stats() const override;
    std::vector<std::string> check_invariants() const override;

    // Section 5.
    bool handle_fault(arena& a, std::uintptr_t address, access how, int signal) noexcept;

private:
    reserve_result try_reserve_once(std::size_t bytes) noexcept;
    void drop_arenas(const std::string* store_path, const closed_words* words) noexcept;
    bool uses_uffd_wp() const noexcept { return tracking_ == tracking_kind::wp_async || tracking_ == tracking_kind::wp_sync; }
    bool keeps_sums() const noexcept { return staging_ != 0 && tracking_ == tracking_kind::wp_async; }
    void note_clean(arena& a, std::uintptr_t page, const std::byte* content) noexcept;
    void hold_by_protecting(std::span<const std::uintptr_t> pages, std::span<held> out) noexcept;
    void hold_by_moving(std::span<const std::uintptr_t> pages, std::span<held> out) noexcept;
    void move_out(arena& a, std::span<const std::uintptr_t> pages, std::span<held> out, std::size_t first,
                  std::size_t last) noexcept;
    void release_moved(std::span<const std::uintptr_t> pages, bool drop) noexcept;
    std::uintptr_t slot(std::size_t i) const noexcept { return staging_ + i * page_size; }
    static bool claim_resident(std::uint32_t& state) noexcept;
    void mark_written(arena& a, std::span<const std::uintptr_t> pages, std::span<held> out, std::size_t first,
                      std::size_t last) noexcept;
    bool move_page(std::uintptr_t dst, std::uintptr_t src) noexcept;
    static bool moved_anyway(std::uintptr_t dst, std::uintptr_t src) noexcept;
    void move_back(std::uintptr_t page, std::uintptr_t from) noexcept;
    template <class F>
    void for_each_own_arena(F&& f) const;
    std::uint64_t check_arena(const arena& a, std::vector<std::string>& findings) const;
    static void check_chunks(const arena& a, const std::string& name, std::vector<std::string>& findings);
    static std::size_t touched_pages(const arena& a) noexcept;

    // Kernel operations. Async-signal-safe; each returns 0 or an errno and sets
    // `call` to the name of the failed call.
    int map_page(std::uintptr_t page, const std::byte* content, bool writable, const char*& call) noexcept;
    int unprotect(std::uintptr_t page, const char*& call) noexcept;
    int protect(std::uintptr_t first, std::size_t npages, const char*& call) noexcept;
    int unmap(arena& a, std::uintptr_t first, std::size_t npages, bool restore_protection) noexcept;
    bool drop_if_unchanged(arena& a, std::uintptr_t page, std::size_t index, std::byte* copy_to) noexcept;
    bool drop_if_clean(arena& a, std::uintptr_t page, std::size_t index, std::byte* copy_to) noexcept;
    template <class OnWritten>
    int scan_written(std::uintptr_t start, std::uintptr_t end, bool rearm, OnWritten&& on_written) const noexcept;
    static void mark_dirty(arena& a, std::size_t index) noexcept;
    static void clear_dirty(arena& a, std::size_t index) noexcept;
    static bool dirty_bit(const arena& a, std::size_t index) noexcept;
    static void finish(std::uint32_t& state, page_state next) noexcept;
    void make_missing(arena& a, std::size_t index) noexcept;
    void note_missing(arena& a, std::size_t index) noexcept;
    void release_chunk(arena& a, std::size_t chunk) noexcept;

    bool fill_and_map(arena& a, std::uintptr_t page, access how, std::uint32_t& state, bool ahead = false) noexcept;
    bool tracked_write(access how, int signal) const noexcept;
    bool first_write(arena& a, std::uintptr_t page, std::uint32_t& state) noexcept;
    bool spurious(std::uintptr_t page) noexcept;

    arena* arena_of(std::uintptr_t address) const noexcept;
    arena& checked_arena(std::uintptr_t page, std::size_t npages, const char* operation) const;
    void take_dirty_bits(arena& a, std::vector<std::uintptr_t>& pages);
    bool can_bridge(arena& a, std::uintptr_t first, std::uintptr_t last) const noexcept;
    void take_written_pages(arena& a, std::vector<std::uintptr_t>& pages);
    [[noreturn]] void throw_kernel_error(const char* call, int err, const std::string& context) const;

    const backend_kind backend_;
    const tracking_kind tracking_;
    const fill_fn fill_;
    const write_refused_fn refuse_write_;  // set for a read-only space
    void* const ctx_;
    const int uffd_;     // uffd backend: the userfaultfd all arenas are registered with
    const int pagemap_;  // wp_async: /proc/self/pagemap, for PAGEMAP_SCAN
    // Where hold() and evict_clean() move pages to (I5): staging_pages
    // registered like an arena (but not in the registry: nothing faults
    // there), or 0 when pages are held by making them read-only instead.
    // held_ are the pages of the current hold(), slot i holding held_[i].
    const std::uintptr_t staging_;
    std::uintptr_t held_[max_held] = {};
    std::size_t held_count_ = 0;
    std::atomic<std::uint64_t> free_fault_slots_{~std::uint64_t{0}};  // a bit per fault slot, set when free
    std::atomic<std::uint64_t> faults_{0}, write_faults_{0}, installs_{0}, discards_{0}, evictions_{0}, fill_ns_{0};
    std::atomic<std::uint64_t> filled_ahead_{0};
};

// Calls f(arena, first, last) for each run pages[first, last) of consecutive
// pages of one arena whose `out` is not held::none (pages ascending).
template <class F>
void for_each_run(std::span<const std::uintptr_t> pages, std::span<const fault_space::held> out, arena* (*find)(std::uintptr_t),
                  F&& f) {
    for (std::size_t first = 0; first < pages.size();) {
        arena* a = out[first] == fault_space::held::none ? nullptr : find(pages[first]);
        std::size_t last = first + 1;
        while (a && last < pages.size() && out[last] != fault_space::held::none &&
               pages[last] == pages[last - 1] + page_size && a->contains(pages[last]))
            ++last;
        if (a) f(*a, first, last);
        first = last;
    }
}

// One PAGEMAP_SCAN reports the pages whose write-protect bit the kernel
// cleared on a write (wp_async), and with `rearm` sets it again
// (PM_SCAN_WP_MATCHING), per PTE under its lock. It stops when the region
// vector is full: continue from walk_end. Returns 0 or an errno.
template <class OnWritten>
int space::scan_written(std::uintptr_t start, std::uintptr_t end, bool rearm, OnWritten&& on_written) const noexcept {
    page_region regions[32];  // small: the fault path evicts with this on its stack
    pm_scan_arg arg{};
    arg.size = sizeof arg;
    arg.flags = (rearm ? PM_SCAN_WP_MATCHING : 0) | PM_SCAN_CHECK_WPASYNC;
    arg.start = start;
    arg.end = end;
    arg.vec = reinterpret_cast<std::uintptr_t>(regions);
    arg.vec_len = std::size(regions);
    arg.category_mask = PAGE_IS_WRITTEN;
    // Present or swapped: never a missing page. Without this mask the kernel
    // takes a fast path that assumes WP_UNPOPULATED markers on every empty PTE
    // and reports (and marks) all missing pages of a populated page table as
    // written.
    arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
    arg.return_mask = PAGE_IS_WRITTEN;
    for (;;) {
        const int found = ioctl(pagemap_, PAGEMAP_SCAN, &arg);
        if (found < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        for (int r = 0; r < found; ++r) on_written(regions[r].start, regions[r].end);
        if (arg.walk_end >= arg.end) return 0;
        arg.start = arg.walk_end;
    }
}

}  // namespace steppe::vm::impl
