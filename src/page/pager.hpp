// The page engine's pager: persistent pages faulted into memory with their pointers
// swizzled (Texas), written back unswizzled at commit. It composes the
// storage manager (page images), the heap (what lies on each page), the page
// map and the fault space.
//
// Residency: the states of a store page p as the page engine keeps it (the
// fault space's own page life cycle is in vm.hpp, the page map's in
// page_map.hpp). "Evicted" is not a state of its own: an evicted page is
// reserved again, at the same address.
//
//   S0 unmapped   no virtual range: never named since its arena was reclaimed
//   S1 reserved   a virtual range (page_map::reserve), nothing mapped there:
//                 the next touch fills it
//   S2 clean      resident, unchanged since the last commit or its fill
//   S3 written    resident, written since the last commit (the fault space's
//                 dirty bit, or unwritten_ once note_written_pages took it)
//   S4 new        handed out by the heap since the last commit: installed as
//                 zeros and kept resident (the file may hold a former life of
//                 it), written at the commit even if untouched
//   S5 spilled    its image of the transaction in progress is in the log
//                 (storage::spill, is_pending): missing, or S2/S3 again after a
//                 touch reads it back
//   S6 retired    its range is dead (page_map::retire): a touch ends the
//                 process; named again, the page gets a new range
//
//   T1  S0 -> S1      page_map::reserve, from swizzle_word (a pointer to p
//                     met in the fault path), to_pointer, install_new_page
//   T2  S1 -> S2      fill_page on the first touch (from the log if S5);
//                     residency::record puts it in the ring
//   T3  S2 -> S3      the program writes: the fault space's write tracking
//                     notes it; note_written_pages moves it to unwritten_
//   T4  S3 -> S2      commit: collect unswizzles it (take_dirty re-arms the
//                     tracking), committed() forgets unwritten_
//   T5  S2 -> S1      eviction: drop_oldest_clean (fault path), evict_batch
//                     (eviction thread); start_epoch (reuse);
//                     discard_all_resident (rollback)
//   T6  S3 -> S5      spill: evict_batch then release_batch,
//                     spill_if_over_budget then release_held (both leave it
//                     missing), collect past 1,024 pages (it stays resident)
//   T7  S5 -> S2      committed(): the commit record covers its frame
//   T8  S3, S5 -> S1  rollback: discard_written, discard_spilled
//   T9  S0-S3 -> S4   install_new_page (take_new_and_freed_pages);
//                     forget_contents first discards a range of the same
//                     shape (kept, so pointers into it stay valid) or
//                     retires one of another shape
//   T10 S4 -> S2      committed(): admit_new_pages records it in the ring
//   T11 S4 -> S5      spill_if_over_budget, collect
//   T12 S4 -> S1, S6  rollback: forget_new_pages (a committed page again:
//                     discarded; else retired)
//   T13 any -> S6     page_map::retire: forget_contents (a new shape),
//                     retire_freed_pages (commit), forget_new_pages
//   T14 S1, S6 -> S0  start_epoch: page_map::start_epoch discards every
//                     resident page (T5) and reclaims the arenas not used
//                     for a whole epoch
//   T15 S2 -> S1, S6  move_to (a read-only store's refresh in place): a page
//                     the newer commit changed is discarded, one whose
//                     unit changed or that is no longer data is retired
//                     (and then every page reloads, as at T5 of a rollback);
//                     the ring is rebuilt to name each resident page once
//
// Cooling (cooling.hpp), under a budget with pager_options::cooling: T5
// keeps the bytes of the clean pages it drops in the cooling pool (cool,
// drop_clean), and T2 puts a cooling page's bytes back instead of reading
// and swizzling it (fill_page, rewarm): a reference while cooling is a cheap
// refault, and only pages nobody touched leave memory. A cooling page is S1
// as the fault space sees it.
//
// Invariants, as seen between operations (under a pause, no other thread
// touching the store); check_residency() (residency_check.cpp) checks them,
// and check_invariants() runs it with the page map's (P1-P2), the fault
// space's (I1-I7), the ring's (Q1) and the cooling pool's (C1) checkers:
// (R1) Every resident page of the fault space is a page of a unit the page
//      map holds, never a guard, a retired range or space a reuse round
//      gave back: fill_page ends the process for those (wild_access), and
//      page_map::retire and start_epoch discard before the map forgets.
// (R2) unwritten_ is sorted and unique (the evictors search it), and names
//      pages that are resident or whose range was retired since: the
//      evictors never take them (drop_oldest_clean, spill_sources), a
//      spill keeps in it only what it could not write (spill_if_over_budget),
//      and a rollback discards them (discard_written). No write is lost.
//      (drop_oldest_clean reads it in the fault path without a lock: it
//      changes in calls that run while no other thread touches the store,
//      but also in a make that spills, which faults on other threads may
//      overlap: a gap, not closed yet.)
// (R3) A new page that is still a data page and not in the log is resident,
//      and marked new: install_new_page marks it before it installs it,
//      nothing records it in the ring before admit_new_pages, and the
//      evictors keep a page marked new (drop_oldest_clean, spill_sources)
//      when they meet it through an entry from its former life at the same
//      address (a page freed and handed out again in the same shape in one
//      transaction keeps its range). Dropped, it would read that former
//      life back from the file. A spill (note_spilled), the commit
//      (admit_new_pages) and a rollback (forget_new_pages) clear the mark.
// (R4) The transaction's spilled pages are the storage's pending pages
//      (storage::is_pending, pending_pages): the pager keeps no copy of its
//      own (it cost 48 bytes per page spilled), and none of them is marked
//      new (note_spilled clears the mark, counting it in new_spilled_), so
//      an evictor may drop it and its next fill reads the log.
// (R5) The ring names only pages of the map or retired ranges, never a
//      guard or unreserved space: it records the pages fill_page filled,
//      admit_new_pages admitted and the evictors took from it, and
//      start_epoch empties it before arenas are reclaimed.
// (R6) Every resident data page that is not new is named by the ring (unless
//      the ring was full: residency::unrecorded()), or it could never be
//      evicted: fill_page records what it fills, and a page taken out and
//      kept goes back (record_again, release_batch).
// (R7) A cooling page is missing in the fault space, at the address the page
//      map gives it: the evictors publish it in the pool only while they
//      hold the page (cool, drop_clean, which withdraws it if the page
//      stays), fill_page takes it out before the page is resident again,
//      and nothing else makes a reserved page resident but install_new_page,
//      after forget_contents emptied the pool.
// (R9) No faulting thread drops a page (drop_oldest_clean) while a pause is
//      in force: make, destroy and the other structural calls run under one
//      while other threads may fault (the threads contract), and they
//      discard and reinstall reused pages, mark pages new and change
//      unwritten_ — a drop racing with them could take a page just
//      installed, leave a discarded page marked resident, or read
//      unwritten_ as it is reallocated. A fault announces its drop
//      (fault_drops_) and then looks for a pause; a pause announces itself
//      (paused_) and then waits for announced drops to end. Both in
//      sequentially consistent order, so one of the two always sees the
//      other. Faults past the budget then go on without dropping
//      (wait_for_evictor does not wait under a pause either).
// (R10) No page is loaded ahead (load_ahead.cpp) while a pause is in force:
//      the load-ahead thread is not the program's, so the threads contract
//      does not keep it off, and a load reads descriptors, shapes and the
//      storage, and reserves and fills like a fault. It announces a page
//      (loading_page_) and then looks for a pause, a pause announces itself
//      and then waits for the page under way, as in R9, so a pause waits
//      for one page at most, never a disk read (the loader reads its pages
//      into the page cache before it announces them).
// (R8) A cooling page's bytes are what its fill would produce: only clean
//      pages cool, and what changes that for a page that is not resident (a
//      range retired or discarded, so a pointer would swizzle elsewhere; a
//      rollback; a new epoch) empties the pool first (forget_cooling). Not
//      checked (it would read and swizzle every cooling page); the
//      cooling tests compare contents.
//
// New pages (handed out by the heap since the last commit) are installed as
// zeros at once, because the storage may still hold a previous life of the
// page; they are written at commit even if never dirtied.
//
// Address-space reuse (translate/page_map.hpp): reuse_address_space() starts
// a new epoch; commit and rollback do so by themselves when the reserved
// address space passes a threshold (3/4 of the limit at first).
//
// Threads: any number may touch persistent memory at once (faults are
// lock-free). Allocation, destroy, commit, rollback and reuse must not run
// while another thread touches the store, and run under a pause() of the
// eviction thread.
//
// The eviction thread (evict.cpp), started with a resident budget:
// faults record the pages they load and, once past the budget, drop the two
// oldest if clean (sparing up to eight that came back lately and have a
// chance left: reuse_history.hpp) and wake the thread; it drops the oldest clean pages, and
// writes the oldest written ones to the log as frames of the transaction in
// progress (storage::spill) before dropping them. A fault far past the
// budget waits for it. An allocation or a commit past it evicts on its own
// thread (evict_if_over_budget). The budget holds the store's own memory
// too (memory(), refresh_budget): pages get what the rest leaves.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <steppe/error.hpp>
#include <steppe/steppe.hpp>

#include "page/page_bits.hpp"
#include "page/reuse_history.hpp"
#include "heap/heap.hpp"
#include "page/cooling.hpp"
#include "page/residency.hpp"
#include "page/stored_pointer.hpp"
#include "common/sigsafe.hpp"
#include "storage/storage.hpp"
#include "translate/page_map.hpp"
#include "translate/swizzle.hpp"
#include "types/vtables.hpp"
#include "vm/vm.hpp"

namespace steppe::page {

namespace detail {
// True on the load-ahead thread (load_ahead.cpp): its fills refuse a page
// they cannot load instead of ending the process.
[[gnu::tls_model("initial-exec")]] extern thread_local bool loading_ahead;
}  // namespace detail

struct pager_options {
    vm::backend_kind backend = vm::backend_kind::uffd;
    bool null_transient_pointers = false;
    void (*fatal_hook)(const char* message) = nullptr;  // called in signal context before the process ends
    // Virtual address space the page map may reserve; 0 = its default.
    std::uint64_t address_space_limit = 0;
    // Resident store pages allowed before the oldest are evicted (written
    // ones spilled to the log first); 0 = no limit.
    std::uint64_t resident_budget_pages = 0;
    // The budget was taken from the process's memory limit (no
    // resident_budget given): it follows what the limit leaves while the
    // store runs, never above the open's (follow_memory).
    bool follow_memory = false;
    // Read-ahead of the pages a faulted page points to (adaptive: it stops
    // itself while too few of its guesses are used).
    bool prefetch = true;
    // Pages are mapped read-only and a write to one ends the process with a
    // message naming the store and the object's type (write_refused).
    bool read_only = false;
    // Under a budget, clean pages the evictors take cool before they leave
    // (cooling.hpp); off, they leave at once, oldest first (FIFO).
    bool cooling = true;
    // A thread loads the store's pages ahead of use when they fit in a
    // quarter of the budget (load_ahead.cpp; start_loading_ahead).
    bool load_ahead = false;
};

struct pager_stats {
    std::uint64_t faults = 0;         // pages filled on first touch
    std::uint64_t pointers_swizzled = 0;
    std::uint64_t pages_committed = 0;
    std::uint64_t pointers_unswizzled = 0;
    std::uint64_t reserved_virtual_pages = 0;
    std::uint64_t resident_pages = 0;   // installed and not dropped (I7): the pages using memory
    std::uint64_t dirty_pages = 0;      // written since the last commit and in memory (approximate)
    std::uint64_t evictions = 0;        // clean pages dropped to stay within the budget
    std::uint64_t spilled_pages = 0;    // uncommitted pages written to the log early
    std::uint64_t prefetched_pages = 0; // read-ahead hints given
    std::uint64_t prefetch_hits = 0;    // of those, pages then faulted in
    std::uint64_t address_space_limit = 0;  // bytes
    std::uint64_t reuse_rounds = 0;         // address-space reuse rounds (automatic or asked for)
    std::uint64_t reclaimed_arenas = 0;     // arenas those rounds gave back
    std::uint64_t reclaimed_pages = 0;      // virtual pages those rounds gave back
    std::uint64_t cooled_pages = 0;         // evictions that kept the page cooling (cooling.hpp)
    std::uint64_t rewarmed_pages = 0;       // faults that put a cooling page back, without a read
    std::uint64_t loaded_ahead = 0;         // pages loaded before any touch (pager_options::load_ahead)
    std::string load_ahead = {};            // what the load-ahead thread is doing, or why it is not (load_ahead.cpp)
    // Time in the fills of missing pages, by part (store_stats).
    std::uint64_t miss_io_ns = 0, miss_swizzle_ns = 0, miss_handler_ns = 0;
};

class pager {
public:
    // `vtables` is the engine's live table (page_engine's state), which a
    // rollback restores in place.
    pager(storage::storage& storage, std::unique_ptr<heap> h, types::vtable_table& vtables, const pager_options& opts);
    ~pager();

    // The stored types' pointer layouts, by catalog index. The store keeps it in
    // step with its catalog; the fault handler reads it.
    const std::vector<translate::type_shape>& shapes() const { return shapes_; }
    // Changes the type shapes (a new type, or a rebuild) where neither a
    // fault (whose swizzling holds a shape) nor the eviction thread reads
    // them: the vector may move.
    template <class F>
    void change_shapes(F&& f) {
        pause p(*this);
        heap_->excluding_readings([&] { f(shapes_); });
    }

    heap& allocator() { return *heap_; }

    // Records where the vtable of a freshly constructed object's type is, so
    // it relinks even if the executable's symbols cannot be read.
    void note_vtable(const void* object);

    // A zeroed chunk for `count` elements of catalog type `type`.
    void* allocate(std::uint32_t type, std::size_t elem_size, std::size_t count, std::size_t align);
    void free(void* object);

    // Persistent address <-> pointer (normal context). to_pointer reserves.
    void* to_pointer(std::uint64_t persistent);
    // The same, failing with `code` and "<path>: <what>holds 0x..., which
    // aims at ...<advice>".
    void* to_pointer(std::uint64_t persistent, errc code, const char* what, const char* advice);
    // Throws transient_pointer naming `what` if p is not in the store.
    std::uint64_t to_persistent(const void* p, const std::string& what) const;
    // steppe::pref's translation at each use (normal context): to_pointer,
    // with the page map's lookup first (the usual case: the target's page is
    // reserved already) and invalid_argument for an address that names no
    // object of this store.
    void* translate_at_use(std::uint64_t persistent);

    // Unswizzles every page written (or handed out) since the last commit into
    // `images`, ready for storage::commit; past 1,024 pages, all but the last
    // chunk are sent to the log first (storage::spill). Throws
    // transient_pointer before the commit is made (pages already in the log
    // stay there as the transaction's, as if spilled). Call committed() once
    // the storage commit succeeded.
    struct page_images {
        std::vector<std::byte> bytes;
        std::vector<storage::page_image> pages;
    };
    page_images collect();
    void committed();
    // Forgets every change since the last commit: discards written pages and
    // retires new ones; `committed_heap` is the heap as of the last commit.
    void rollback(std::unique_ptr<heap> committed_heap);
    // A read-only store moves to a newer commit of its store (a refresh in
    // place): `newer` is the storage at it, `newer_heap` its heap, and
    // `changed` the pages whose images may differ (storage::changed_since).
    // Those and the pages whose description changed reload on their next
    // touch; every other resident page stays, swizzled as it was, unless
    // `reload_all`.
    void move_to(storage::storage& newer, std::unique_ptr<heap> newer_heap, std::span<const std::uint64_t> changed,
                 bool reload_all);

    // Pages written, made or freed since the last commit, spilled ones
    // included: 0 when the transaction in progress has changed no object.
    std::size_t uncommitted_pages();

    // Starts a new address-space epoch: drops every resident page (they come
    // back from the store on the next touch, at the same address) and reclaims
    // the address space not used since the previous round. invalid_argument
    // if a page was written or allocated since the last commit.
    void reuse_address_space();
    // The same, only when the reserved address space passed the threshold.
    // Call only when there are no uncommitted changes (after commit, rollback).
    void reuse_if_crowded();

    // Is p inside one of this store's mapped units?
    bool holds(const void* p) const noexcept {
        return map_->lookup(reinterpret_cast<std::uintptr_t>(p)).what == translate::page_map::kind::page;
    }

    // Which words of `page` are pointers (for checks; no allocation).
    translate::page_layout layout_of_page(std::uint64_t page) const noexcept;
    // The same as `h` (another state of the heap, e.g. the committed one) has it.
    translate::page_layout layout_of_page(const heap& h, std::uint64_t page) const noexcept;
    // The page map's P1-P2, the fault space's I1-I7, the ring's Q1, the
    // cooling pool's C1 and the residency invariants R1-R7 and R9 above (R8 is not
    // checked), as seen between operations (call
    // under a pause): one line per finding. Cheap: the fault space reads
    // only the part of its arenas ever touched (I6).
    std::vector<std::string> check_invariants() const;
    std::vector<std::string> check_residency() const;

    // Loading ahead (load_ahead.cpp), with pager_options::load_ahead and a
    // budget: once the store is open, a thread reads, checks and swizzles
    // every data page not resident yet and maps it, as its first touch
    // would, in file order, while the store's pages fit in a quarter of the
    // budget and of the address space. It runs between pauses (R10: commits, allocations and the
    // rest wait for one page of it at most), stops at the first page it
    // cannot load (damage: a touch reports it) and at destruction. Call
    // once, after the engine has set the shapes.
    void start_loading_ahead();

    // engine::hold_threads_for_fork: the eviction thread kept between passes
    // (its mutex taken, waiting up to a second for a pass to end).
    void hold_evictor_for_fork() noexcept;
    void release_evictor_after_fork() noexcept;

    // Keeps the eviction thread off while the caller changes or reads what it
    // uses (the heap, shapes, vtables, the transaction's page sets, storage),
    // and the faulting threads' own drops too (R9): it waits for those under
    // way to end, and faults meanwhile drop nothing.
    class pause {
    public:
        explicit pause(pager& p);
        ~pause();
        pause(const pause&) = delete;
        pause& operator=(const pause&) = delete;

    private:
        pager& pager_;
    };

    pager_stats stats() const;
    // What the store costs in memory, by kind (store_memory), but for
    // `types`, which is what the engine last said with note_types_memory.
    // Call under a pause.
    store_memory memory() const noexcept;
    void note_types_memory(std::uint64_t bytes) noexcept { types_bytes_ = bytes; }
    // Under a budget: the fewest pages left to the ring, whatever metadata
    // takes; an allocation while metadata alone takes the whole budget is
    // no_space.
    static constexpr std::uint64_t min_pages = 64;
    // The heap's descriptors a budget of `budget_pages` allows in memory, and
    // what a trim leaves of them (3/4): a heap is decoded keeping that much.
    static std::uint64_t descriptor_bytes_allowed(std::uint64_t budget_pages) noexcept;
    // The budget now (follow_memory moves one taken from the memory limit).
    std::uint64_t budget_pages() const noexcept {
        return budget_bytes_.load(std::memory_order_relaxed) / translate::page_size;
    }
    static std::uint64_t descriptor_bytes_kept(std::uint64_t budget_pages) noexcept;
    vm::backend_kind backend() const { return space_->backend(); }
    vm::tracking_kind tracking() const { return space_->tracking(); }

private:
    static bool fill(void* self, std::uintptr_t page_addr, std::byte* out) noexcept;
    bool fill_page(std::uintptr_t page_addr, std::byte* out) noexcept;
    bool holds_data(std::uint64_t page) const noexcept;
    bool swizzle_page(std::uint64_t page, std::byte* out) noexcept;
    static void refuse_write(void* self, std::uintptr_t address) noexcept;
    // A write to an object of a read-only store (fault path).
    [[noreturn]] void write_refused(std::uintptr_t address) const noexcept;
    // `advice` (what to do) defaults to running steppe check.
    [[noreturn]] void fatal(const char* what, std::uint64_t page, const char* detail,
                            const char* advice = nullptr) const noexcept;
    [[noreturn]] void bad_pointer(std::uint64_t page, std::size_t at, std::uint32_t field,
                                  const translate::type_shape* type, std::uint64_t word,
                                  const pointer_aim& aim) const noexcept;
    [[noreturn]] void address_space_exhausted(std::uint64_t page, translate::unit u) const noexcept;
    // A touch of store address space that holds no page: a guard page, a
    // range a reuse round gave back, or none yet.
    [[noreturn]] void wild_access(std::uintptr_t address, translate::page_map::kind what) const noexcept;
    void explain_no_address_space(std::uint64_t unit_pages, common::fixed_message& why,
                                  common::fixed_message& advice) const noexcept;
    error no_address_space(std::uint64_t unit_pages) const;
    translate::unit unit_of(std::uint64_t page) const noexcept;
    void prefetch_pointer_targets(const translate::page_layout& layout, const std::byte* image) const noexcept;
    std::uintptr_t swizzle_word(std::uint64_t word, bool& ok) noexcept;
    // The address of data page `page` in its unit, reserved now (as a
    // pointer to it met in a fault reserves it); 0 when the address space
    // is full. Async-signal-safe.
    std::uintptr_t reserve_data_page(std::uint64_t page) noexcept;
    void take_new_and_freed_pages();
    void install_new_page(std::uint64_t page);
    void mark_new(std::uint64_t page, bool fresh) noexcept;
    bool is_new(std::uintptr_t v) const noexcept;
    void forget_contents(std::uint64_t page, translate::unit shape);
    void spill_if_over_budget();
    void note_spilled(const std::vector<storage::page_image>& images);
    void admit_new_pages();
    void retire_freed_pages();
    void discard_spilled();
    void discard_written();
    void forget_new_pages();
    void discard_all_resident();
    void discard_if_resident(std::uint64_t page);
    void rebuild_ring();
    void forget_transaction() noexcept;
    // The checkers of R1-R7 and R9 (residency_check.cpp).
    void check_resident(const std::vector<std::uintptr_t>& resident, const std::vector<std::uintptr_t>& ring,
                        std::vector<std::string>& findings) const;
    void check_written(const std::vector<std::uintptr_t>& resident, std::vector<std::string>& findings) const;
    void check_new(const std::vector<std::uintptr_t>& resident, std::vector<std::string>& findings) const;
    void check_spilled(std::vector<std::string>& findings) const;
    void check_ring(const std::vector<std::uintptr_t>& ring, std::vector<std::string>& findings) const;
    void check_cooling(std::vector<std::string>& findings) const;
    // The one unswizzler of written pages, for commit, spill and eviction:
    // each source still a data page is unswizzled into the next free page of
    // `buffer` (room for every source) and appended to `images`. A page that
    // cannot be unswizzled (a transient pointer; a vtable not in the table,
    // with learn_vtables false, as the eviction thread may not add symbols
    // the fault path reads) throws unless keep_failures, which reports it.
    struct page_source {
        std::uint64_t page;
        const std::byte* contents;
    };
    enum class unswizzled : std::uint8_t { image, not_data, kept };
    std::vector<unswizzled> unswizzle_pages(std::span<const page_source> sources, std::byte* buffer,
                                            bool learn_vtables, bool keep_failures,
                                            std::vector<storage::page_image>& images);
    void unswizzle_into(std::uint64_t page, const std::byte* from, std::byte* to, bool learn_vtables);
    // The resident ones of `pages`, read where they are mapped.
    std::vector<page_source> resident_sources(const std::set<std::uint64_t>& pages) const;
    void note_written_pages();
    std::set<std::uint64_t> pages_to_write();
    void start_epoch();

    storage::storage* storage_;  // moves only with a refresh in place (move_to)
    std::unique_ptr<heap> heap_;
    pager_options opts_;
    std::vector<translate::type_shape> shapes_;
    types::vtable_table& vtables_;
    std::unique_ptr<vm::fault_space> space_;
    std::unique_ptr<translate::page_map> map_;
    std::unique_ptr<residency> resident_;
    std::unique_ptr<cooling> cooling_;  // under a budget with pager_options::cooling
    std::unique_ptr<reuse_history> history_;  // under a budget: more turns for pages that come back
    void keep_within_budget() noexcept;
    // The budget (pager_options::resident_budget_pages) holds everything
    // memory() counts: what metadata, the transaction's bookkeeping and
    // buffers take, store pages give up. refresh_budget() recomputes
    // pages_allowed_ and ring_budget_ (pages the ring may hold besides the
    // transaction's new pages), under a pause or on the eviction thread;
    // ensure_budget_room() is the no_space of an allocation that would find
    // none left.
    void refresh_budget() noexcept;
    // The heap's descriptor groups past a sixteenth of the budget leave
    // memory (heap.hpp, H8); they come back from the storage on use. Trims
    // run where no heap call can (D2 in heap/desc_table.hpp): at commits,
    // rollbacks and allocations, under their pause, and in the eviction
    // thread's passes, which a fault that leaves the groups over the
    // allowance asks for; so a process that only reads, or a transaction
    // that only writes in place, trims while it faults.
    void attach_heap_source() noexcept;
    void trim_descriptors(bool only_if_over = false) noexcept;
    std::uint64_t descriptor_bytes_allowed() const noexcept;
    void ensure_budget_room() const;
    std::uint64_t unspilled_new_pages() const noexcept {
        return txn_new_.size() - std::min<std::uint64_t>(txn_new_.size(), new_spilled_);
    }
    std::uint64_t ring_budget() const noexcept { return ring_budget_.load(std::memory_order_relaxed); }
    // Pages per batch of unswizzled images (eviction, spills, commit
    // chunks): 1/16 of the budget, between 16 and 1,024 (4 MiB).
    std::size_t batch_pages() const noexcept;
    void drop_oldest_clean() noexcept;  // R9: not under a pause
    void drop_two_oldest_clean() noexcept;
    // The cooling stage's part of T5: drop_clean on a faulting thread (the
    // page's bytes are copied as the fault space drops it), cool on the
    // eviction thread (of a held page); forget_cooling where R8 asks.
    bool drop_clean(std::uintptr_t page) noexcept;
    // Whether the ring's page came back lately and has a chance left
    // (reuse_history); it takes the chance: the evictor records it again.
    bool spare_reused(std::uintptr_t page) noexcept;
    void cool(std::uintptr_t page, const std::byte* contents) noexcept;
    void forget_cooling() noexcept;
    void record_again(std::uintptr_t page) noexcept;
    // The eviction thread (evict.cpp).
    struct evictor {
        int wake_fd = -1;
        std::thread thread;
        std::atomic<bool> stop{false};
        std::atomic<bool> asked{false};   // woken and not yet running: the fault path writes the eventfd once
        std::atomic<bool> stalled{false};       // its last pass could not get under the budget
        std::atomic<bool> spill_failed{false};  // a spill failed (a full disk, say): none until the transaction ends
        std::atomic<std::uint32_t> batches{0};  // futex word for waiting faults: bumped after each batch
    };
    std::unique_ptr<evictor> evictor_;
    std::recursive_mutex evict_mutex_;   // held by a pass of the eviction thread, and by a pause
    std::atomic<int> paused_{0};         // pauses in force: the eviction thread cannot run, faults drop nothing
    std::atomic<int> fault_drops_{0};    // faulting threads inside drop_oldest_clean (R9)
    std::atomic<bool> loading_page_{false};  // the load-ahead thread announces a page (R10)
    std::atomic<bool> loading_inside_{false};  // ... and, having seen no pause, loads it (R10's checker)
    bool held_for_fork_ = false;         // evict_mutex_ taken by hold_evictor_for_fork
    void start_evictor();
    void stop_evictor() noexcept;
    void ask_evictor() noexcept;          // fault path
    void wait_for_evictor() noexcept;     // fault path, far over the budget
    void evict_loop();
    void follow_memory() noexcept;  // the eviction thread's
    bool evict_oldest(bool only_what_was_over);
    void evict_if_over_budget() noexcept;  // normal context, under a pause
    void note_batch() noexcept;
    std::size_t evict_batch(std::span<const std::uintptr_t> pages);
    // A batch the eviction thread holds: what hold() said of each page,
    // where its contents are, and whether it stays.
    struct held_batch {
        std::span<const std::uintptr_t> pages;
        std::vector<vm::fault_space::held> how;
        std::vector<const std::byte*> contents;
        std::vector<bool> keep;
    };
    void spill_written(held_batch& b);
    void spill_held(std::span<const std::pair<std::uintptr_t, std::uint64_t>> part, std::byte* buffer,
                    std::vector<std::uintptr_t>& kept);
    void release_held(const held_batch& b);
    std::vector<page_source> spill_sources(held_batch& b, std::vector<std::size_t>& source_of);
    std::size_t release_batch(const held_batch& b);
    std::vector<std::byte> evict_buffer_;  // the eviction thread's page images
    void forget_spill_failure() noexcept;  // a failed spill is retried in the next transaction
    // The load-ahead thread (load_ahead.cpp).
    struct loader {
        std::thread thread;
        std::atomic<bool> stop{false};
        std::vector<std::uint64_t> batches, left;  // the first page of each batch not loaded yet, in file order
        std::vector<std::byte> scratch;            // a batch's main-file bytes (made before the thread: fork)
        std::uint64_t end = 0;  // the store's pages when it started
        int main_file = -1;     // its own descriptor, for bringing pages into the page cache
        std::uint64_t waited_reads = 0, waited_reads_seen_ns = 0;  // storage::waited_reads, last seen to change
    };
    std::unique_ptr<loader> loader_;
    // What loading ahead came to (pager_stats::load_ahead): set before the
    // thread starts, then by it alone; `load_page_` is the page it refused.
    enum class load_state : std::uint8_t {
        off, budget_too_small, address_space_too_small, map_count_too_small, not_a_file, no_thread, loading, done,
        refused,
        budget_half_full, address_space_half_full, closed
    };
    std::atomic<load_state> load_state_{load_state::off};
    std::atomic<std::uint64_t> load_page_{0};
    std::string describe_load_ahead() const;
    void stop_loading_ahead() noexcept;
    void load_loop() noexcept;
    enum class loaded : std::uint8_t { done, skipped, refused };
    loaded load_page_ahead(std::uint64_t page) noexcept;
    load_state load_pages_ahead(std::uint64_t first, std::uint64_t count) noexcept;
    enum class brought : std::uint8_t { now, later, stopped };
    brought bring_in(std::uint64_t first, std::uint64_t count, std::vector<std::byte>& scratch) noexcept;
    template <class F>
    bool between_pauses(F&& f) noexcept;
    // Read-ahead state, all touched in the fault path.
    struct prefetcher {
        page_bits hinted;  // per persistent page: a hint is outstanding
        std::atomic<std::uint64_t> hints{0}, hits{0}, window_hints{0}, window_hits{0}, resume_at_fault{0};
    } prefetch_;
    void note_fault_for_prefetch(std::uint64_t page) noexcept;
    void prefetch_targets(const std::uint64_t* pages, int count) noexcept;
    std::vector<std::uint64_t> txn_new_;        // pages handed out since the last commit
    page_bits fresh_;  // per persistent page: new and not in the log (R3)
    std::vector<std::uint64_t> txn_freed_;      // pages freed since the last commit (ranges kept until it)
    bool retired_committed_ = false;            // a committed page's range was retired since the last commit
    std::vector<std::uintptr_t> unwritten_;     // dirty pages a failed commit (or spill) did not write
    std::uint64_t new_spilled_ = 0;             // of txn_new_, how many the log has (spilled while new)
    std::uint64_t unspilled_after_spill_ = 0;   // unspilled_new_pages() the last spill left (spill_if_over_budget)
    std::uint64_t collected_spilled_ = 0;       // pages of the commit in the log before it (collect)
    std::atomic<std::uint64_t> budget_bytes_{0};  // the resident budget; 0 = none
    std::uint64_t budget_ceiling_bytes_ = 0;    // the open's budget, which follow_memory never exceeds
    std::atomic<std::uint64_t> follow_at_{0};   // ring size at which the fault path asks for follow_memory
    std::uint64_t followed_ns_ = 0;             // when follow_memory last read the limit
    std::uint64_t pages_allowed_ = 0;           // store pages the budget leaves after the rest (refresh_budget)
    std::uint64_t metadata_bytes_ = 0;          // memory().metadata() at the last refresh_budget
    std::atomic<std::uint64_t> ring_budget_{0}; // pages the ring may hold (read by the fault path)
    std::atomic<std::uint64_t> types_bytes_{0}; // the engine's catalog, shapes, roots, vtables
    std::atomic<std::uint64_t> pointers_swizzled_{0};
    std::atomic<std::uint64_t> miss_io_ns_{0}, miss_swizzle_ns_{0};  // fill_page's parts of the fault space's fill_ns
    std::uint64_t pages_committed_ = 0, pointers_unswizzled_ = 0, collected_pages_ = 0;
    std::atomic<std::uint64_t> spilled_pages_{0};
    std::uint64_t reuse_at_pages_ = 0;  // reserved virtual pages past which commit and rollback reuse
    std::uint64_t reuse_rounds_ = 0, reclaimed_arenas_ = 0, reclaimed_pages_ = 0;
};

}  // namespace steppe::page
