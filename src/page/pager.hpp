// The page engine's pager: persistent pages faulted into memory with their pointers
// swizzled (Texas), written back unswizzled at commit. It composes the
// storage manager (page images), the heap (what lies on each page), the page
// map and the fault space.
//
// Page residency (per persistent page of a reserved unit):
//
//   reserved (virtual range assigned, missing) --touch: fill()--> resident clean
//   resident clean --write--> resident dirty --commit--> resident clean
//   resident dirty --rollback: discard--> reserved
//   any --the page is freed or changes shape--> retired (virtual range dead)
//   resident clean --reuse_address_space: discard--> reserved (same address)
//   resident clean --past the budget: evicted--> reserved (same address)
//   resident dirty --past the budget: spilled to the log, evicted--> reserved
//                  (the next touch reads the spilled version)
//   reserved --its arena unused for a whole epoch, at reuse--> unmapped
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
// oldest if clean and wake the thread; it drops the oldest clean pages, and
// writes the oldest written ones to the log as frames of the transaction in
// progress (storage::spill) before dropping them. A fault far past the
// budget waits for it.
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

#include "heap/heap.hpp"
#include "page/residency.hpp"
#include "page/stored_pointer.hpp"
#include "common/sigsafe.hpp"
#include "storage/storage.hpp"
#include "translate/page_map.hpp"
#include "translate/swizzle.hpp"
#include "types/vtables.hpp"
#include "vm/vm.hpp"

namespace steppe::page {

struct pager_options {
    vm::backend_kind backend = vm::backend_kind::uffd;
    bool null_transient_pointers = false;
    void (*fatal_hook)(const char* message) = nullptr;  // called in signal context before the process ends
    // Virtual address space the page map may reserve; 0 = its default.
    std::uint64_t address_space_limit = 0;
    // Resident store pages allowed before the oldest are evicted (written
    // ones spilled to the log first); 0 = no limit.
    std::uint64_t resident_budget_pages = 0;
    // Read-ahead of the pages a faulted page points to (adaptive: it stops
    // itself while too few of its guesses are used).
    bool prefetch = true;
};

struct pager_stats {
    std::uint64_t faults = 0;         // pages filled on first touch
    std::uint64_t pointers_swizzled = 0;
    std::uint64_t pages_committed = 0;
    std::uint64_t pointers_unswizzled = 0;
    std::uint64_t reserved_virtual_pages = 0;
    std::uint64_t resident_pages = 0;   // recorded as resident (approximate)
    std::uint64_t dirty_pages = 0;      // written since the last commit and in memory (approximate)
    std::uint64_t evictions = 0;        // clean pages dropped to stay within the budget
    std::uint64_t spilled_pages = 0;    // uncommitted pages written to the log early
    std::uint64_t prefetched_pages = 0; // read-ahead hints given
    std::uint64_t prefetch_hits = 0;    // of those, pages then faulted in
    std::uint64_t address_space_limit = 0;  // bytes
    std::uint64_t reuse_rounds = 0;         // address-space reuse rounds (automatic or asked for)
    std::uint64_t reclaimed_arenas = 0;     // arenas those rounds gave back
    std::uint64_t reclaimed_pages = 0;      // virtual pages those rounds gave back
};

class pager {
public:
    // `vtables` is the engine's live table (page_engine's state), which a
    // rollback restores in place.
    pager(storage::storage& storage, std::unique_ptr<heap> h, types::vtable_table& vtables, const pager_options& opts);
    ~pager();

    // The stored types' pointer layouts, by catalog index. The store keeps it in
    // step with its catalog; the fault handler reads it.
    std::vector<translate::type_shape>& shapes() { return shapes_; }

    heap& allocator() { return *heap_; }

    // Records where the vtable of a freshly constructed object's type is, so
    // it relinks even if the executable's symbols cannot be read.
    void note_vtable(const void* object);

    // A zeroed chunk for `count` elements of catalog type `type`.
    void* allocate(std::uint32_t type, std::size_t elem_size, std::size_t count, std::size_t align);
    void free(void* object);

    // Persistent address <-> pointer (normal context). to_pointer reserves.
    void* to_pointer(std::uint64_t persistent);
    // Throws transient_pointer naming `what` if p is not in the store.
    std::uint64_t to_persistent(const void* p, const std::string& what) const;

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
    // The page map's P1/P2, as seen between operations (call under a pause):
    // one line per finding. (The fault space's I1-I5 checker reads every
    // page state of every arena, gigabytes of mostly untouched table in a
    // store with the default address-space limit: vm_test runs it instead.)
    std::vector<std::string> check_invariants() const;

    // Keeps the eviction thread off while the caller changes or reads what it
    // uses (the heap, shapes, vtables, the transaction's page sets, storage).
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
    vm::backend_kind backend() const { return space_->backend(); }
    vm::tracking_kind tracking() const { return space_->tracking(); }

private:
    static bool fill(void* self, std::uintptr_t page_addr, std::byte* out) noexcept;
    bool fill_page(std::uintptr_t page_addr, std::byte* out) noexcept;
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
    std::uintptr_t swizzle_word(std::uint64_t word, bool& ok) noexcept;
    void take_new_and_freed_pages();
    void forget_contents(std::uint64_t page, translate::unit shape);
    void spill_if_over_budget();
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

    storage::storage& storage_;
    std::unique_ptr<heap> heap_;
    pager_options opts_;
    std::vector<translate::type_shape> shapes_;
    types::vtable_table& vtables_;
    std::unique_ptr<vm::fault_space> space_;
    std::unique_ptr<translate::page_map> map_;
    std::unique_ptr<residency> resident_;
    void keep_within_budget() noexcept;
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
    std::atomic<int> paused_{0};         // pauses in force: the eviction thread cannot run
    void start_evictor();
    void stop_evictor() noexcept;
    void ask_evictor() noexcept;          // fault path
    void wait_for_evictor() noexcept;     // fault path, far over the budget
    void evict_loop();
    bool evict_oldest();
    void note_batch() noexcept;
    std::size_t evict_batch(std::span<const std::uintptr_t> pages);
    std::vector<std::byte> evict_buffer_;  // the eviction thread's page images
    void forget_spill_failure() noexcept;  // a failed spill is retried in the next transaction
    // Read-ahead state, all touched in the fault path.
    struct prefetcher {
        std::atomic<std::uint8_t>* hinted = nullptr;  // per persistent page: a hint is outstanding
        std::atomic<std::uint64_t> hints{0}, hits{0}, window_hints{0}, window_hits{0}, resume_at_fault{0};
    } prefetch_;
    void note_fault_for_prefetch(std::uint64_t page) noexcept;
    void prefetch_targets(const std::uint64_t* pages, int count) noexcept;
    std::vector<std::uint64_t> txn_new_;        // pages handed out since the last commit
    std::vector<std::uint64_t> txn_freed_;      // pages freed since the last commit (ranges kept until it)
    bool retired_committed_ = false;            // a committed page's range was retired since the last commit
    std::vector<std::uintptr_t> unwritten_;     // dirty pages a failed commit (or spill) did not write
    std::set<std::uint64_t> spilled_;           // pages of this transaction already in the log
    std::atomic<std::uint64_t> pointers_swizzled_{0};
    std::uint64_t pages_committed_ = 0, pointers_unswizzled_ = 0, collected_pages_ = 0;
    std::atomic<std::uint64_t> spilled_pages_{0};
    std::uint64_t reuse_at_pages_ = 0;  // reserved virtual pages past which commit and rollback reuse
    std::uint64_t reuse_rounds_ = 0, reclaimed_arenas_ = 0, reclaimed_pages_ = 0;
};

}  // namespace steppe::page
