// The page engine's pager: construction, allocation (the pages the heap
// hands out or takes back get their address space), translation between
// persistent addresses and pointers in normal context, address-space reuse
// and stats. The fault path is in fault.cpp, commit and rollback in
// commit.cpp, the eviction thread in evict.cpp.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/hex.hpp"
#include "common/system_error.hpp"
#include "page/engine_meta.hpp"
#include "page/pager.hpp"
#include "page/stored_pointer.hpp"
#include "common/sigsafe.hpp"

namespace steppe::page {

namespace {
alignas(4096) const std::byte zero_page[translate::page_size] = {};

// What a touch of a closed store's arenas says (vm::retire_range).
constexpr vm::closed_words closed_pointers{
    "store", "a pointer",
    "a pointer into a store does not outlive its close(): keep a root's name and find it again (find_root) in "
    "the store opened next"};

// A byte per persistent page, NORESERVE: only the parts touched cost memory.
}  // namespace

pager::pager(storage::storage& storage, std::unique_ptr<heap> h, types::vtable_table& vtables,
             const pager_options& opts)
    : storage_(&storage), heap_(std::move(h)), opts_(opts), vtables_(vtables) {
    space_ = opts.read_only ? vm::fault_space::create(opts.backend, &pager::fill, this, {}, &pager::refuse_write)
                            : vm::fault_space::create(opts.backend, &pager::fill, this);
    map_ = std::make_unique<translate::page_map>(*space_, heap::max_page_count, opts.address_space_limit);
    if (opts.resident_budget_pages) {  // before anything a throw would leave behind
        resident_ = std::make_unique<residency>(opts.resident_budget_pages * 2 + 65536);
        fresh_ = page_bits(heap::max_page_count);
        if (!fresh_.mapped()) common::throw_system_error("mmap", errno, storage_->path() + ": the table of new pages");
        // A sixteenth of the budget cools: a page used about once per turn
        // of the ring is met while it cools; a larger pool leaves the ring
        // less and costs more refaults for the misses it saves. evict_bench
        // --reps 1, Zipf 0.9 at 1.2x / 4x the budget, misses over LRU's: a
        // sixty-fourth 1.15x / 0.96x, a thirty-second 1.13x / 0.96x, a
        // sixteenth 1.12x / 0.95x, an eighth 1.16x / 0.95x, a quarter 1.36x /
        // 0.93x (docs/benchmarks.md, "A smaller cooling pool").
        if (opts.cooling) cooling_ = std::make_unique<cooling>(opts.resident_budget_pages / 16, heap::max_page_count);
        // An eighth of the budget's pages of history (2Q keeps half): a page
        // used a few times per turn of the ring comes back within it, and at
        // a working set a little over the budget not every page that left
        // does. evict_bench, Zipf 0.9 at 1.2x / 4x the budget, misses over
        // LRU's: an eighth 1.20x / 0.96x, three sixteenths 1.22x / 0.93x, a
        // quarter 1.26x / 0.92x, three eighths 1.29x / 0.91x.
        history_ = std::make_unique<reuse_history>(opts.resident_budget_pages / 8, heap::max_page_count);
        if (!history_->mapped()) common::throw_system_error("mmap", errno, storage_->path() + ": the table of reused pages");
    }
    vm::register_trap_page(map_->dead_page(), storage_->path().c_str(), opts.fatal_hook);
    reuse_at_pages_ = map_->limit_pages() * 3 / 4;
    if (opts.prefetch) prefetch_.hinted = page_bits(heap::max_page_count);
    budget_bytes_ = budget_ceiling_bytes_ = opts.resident_budget_pages * translate::page_size;
    attach_heap_source();
    refresh_budget();
    if (resident_) start_evictor();
}

pager::~pager() {
    stop_loading_ahead();
    stop_evictor();
    vm::unregister_trap_page(map_->dead_page());
    map_.reset();
    // Its addresses stay reserved: a T* kept past close() must trap, not
    // read or write the store opened next where it lands.
    space_->retire_arenas(storage_->path(), closed_pointers);
    space_.reset();
}

// Allocation ------------------------------------------------------------------

void* pager::to_pointer(std::uint64_t persistent) {
    return to_pointer(persistent, errc::corrupt, "a stored persistent address ", "");
}

void* pager::to_pointer(std::uint64_t persistent, errc code, const char* what, const char* advice) {
    if (persistent == 0) return nullptr;
    // A find_root or a pref may run while the eviction thread trims (D2 in heap/desc_table.hpp).
    const heap::descriptor_reading reading = heap_->reading_descriptors();
    const pointer_aim aim = aim_of(*heap_, persistent);
    bool ok = aim.admitted();  // S1 (stored_pointer.hpp); swizzle_word accepts every such word
    std::uintptr_t v = ok ? swizzle_word(persistent, ok) : 0;
    if (!ok) {
        char why[512];
        common::fixed_message m(why, sizeof why);
        describe_aim(m, persistent, aim, *heap_);
        throw error(code, storage_->path() + ": " + what + why + advice);
    }
    return reinterpret_cast<void*>(v);
}

void* pager::translate_at_use(std::uint64_t persistent) {
    // End-tagged words (one past a unit's end) have bit 63 set: never below
    // page_count, so they take the checked way.
    const std::uint64_t page = persistent / translate::page_size;
    if (page < heap_->page_count()) {
        if (const std::uintptr_t v = map_->use(page))
            return reinterpret_cast<void*>(v + persistent % translate::page_size);
    }
    return to_pointer(persistent, errc::invalid_argument, "a steppe::pref ",
                      " (a pref taken from another store, or dereferenced with another store current than the one it "
                      "came from: open that store or name it with steppe::use_store)");
}

std::uint64_t pager::to_persistent(const void* p, const std::string& what) const {
    std::uint64_t w;
    if (!translate::to_persistent(*map_, reinterpret_cast<std::uintptr_t>(p), w))
        throw error(errc::transient_pointer,
                    what + " " + common::hex(reinterpret_cast<std::uintptr_t>(p)) + " does not point into store " +
                        storage_->path() + " (only objects made with store.make<T>() can be stored or named)");
    return w;
}

// New pages get a virtual range of their new shape, installed as zeros;
// freed pages lose theirs, so stale pointers can never alias a new object.
void pager::take_new_and_freed_pages() {
    // Freed pages keep their range until the commit (retire_freed_pages), so
    // that a rollback that revives their objects finds them where they were.
    for (std::uint64_t page : heap_->take_freed_pages()) txn_freed_.push_back(page);
    std::vector<std::uint64_t> fresh = heap_->take_new_pages();
    for (std::uint64_t page : fresh) forget_contents(page, unit_of(page));
    // One object many times the budget (a big array, a vector's new buffer)
    // is installed a batch at a time, spilling between batches: installed
    // at once, its zero pages alone took memory past the budget, and a
    // process in a memory cgroup was killed before any spill could run.
    // (The spill's pages_to_write takes new and freed pages again: the
    // heap's lists were emptied above, so it finds only those installed.)
    const std::size_t batch = batch_pages();
    for (std::size_t i = 0; i < fresh.size(); ++i) {
        install_new_page(fresh[i]);
        if ((i + 1) % batch == 0 && i + 1 < fresh.size()) spill_if_over_budget();
    }
}

// T9 (pager.hpp): the page shows zeros, and stays resident until the commit
// or a spill (R3): it is marked new before it is installed, so an evictor
// that meets its address (the ring may name it from before it was freed)
// keeps it.
void pager::install_new_page(std::uint64_t page) {
    translate::unit u = unit_of(page);
    std::uintptr_t base = map_->reserve(u);
    if (base == 0) throw no_address_space(u.pages);
    mark_new(page, true);
    space_->install(base + (page - u.head) * translate::page_size, zero_page);
    txn_new_.push_back(page);
}

void pager::mark_new(std::uint64_t page, bool fresh) noexcept {
    if (fresh_.mapped()) fresh_.exchange(page, fresh, std::memory_order_release);
}

// Async-signal-safe: the evictors ask it of the pages they take.
bool pager::is_new(std::uintptr_t v) const noexcept {
    if (!fresh_.mapped()) return false;
    const auto where = map_->lookup(v);
    return where.what == translate::page_map::kind::page && fresh_.test(where.page, std::memory_order_acquire);
}

// The page is to show other contents (a new object, or the committed ones
// after a rollback) in the unit `shape`. A range reserved in that same shape
// is kept, so pointers the program holds into it stay valid; only its
// contents go. A range of another shape is retired.
void pager::forget_contents(std::uint64_t page, translate::unit shape) {
    translate::unit reserved = map_->reserved_unit(page);
    if (reserved.pages == 0) return;
    forget_cooling();
    if (reserved == shape) {
        space_->discard(map_->virtual_of(page), 1);
        return;
    }
    if (page < storage_->page_count()) retired_committed_ = true;
    map_->retire(page);
}

// R8: cooling pages were swizzled for ranges that change here.
void pager::forget_cooling() noexcept {
    if (cooling_) cooling_->clear();
}

error pager::no_address_space(std::uint64_t unit_pages) const {
    char why[512], advice[512];
    common::fixed_message w(why, sizeof why), a(advice, sizeof advice);
    explain_no_address_space(unit_pages, w, a);
    return error(errc::no_space, "cannot make an object in store " + storage_->path() + ": " + why + "; " + advice);
}

void* pager::allocate(std::uint32_t type, std::size_t elem_size, std::size_t count, std::size_t align) {
    // An object bigger than an arena could never be mapped: refuse it before
    // the heap hands out its pages (a size that overflows is the heap's to refuse).
    std::uint64_t bytes = 0;
    if (!__builtin_mul_overflow(std::uint64_t{elem_size}, std::uint64_t{count}, &bytes)) {
        std::uint64_t pages = (bytes + translate::page_size - 1) / translate::page_size;
        if (pages + 1 > map_->arena_pages()) throw no_address_space(pages);
    }
    ensure_budget_room();
    spill_if_over_budget();
    evict_if_over_budget();
    trim_descriptors(true);
    std::uint64_t addr = heap_->allocate(type, elem_size, count, align);
    std::size_t before = txn_new_.size();
    take_new_and_freed_pages();
    if (txn_new_.size() != before) refresh_budget();
    void* p = to_pointer(addr);
    std::uint64_t page = addr / translate::page_size;
    bool fresh = std::find(txn_new_.begin() + static_cast<long>(before), txn_new_.end(), page) != txn_new_.end();
    if (!fresh) std::memset(p, 0, heap_->describe(page)->chunk_size());  // a reused chunk
    return p;
}

void pager::free(void* object) {
    std::uint64_t addr = to_persistent(object, "destroy: pointer");
    auto chunk = heap_->find_chunk(addr);
    heap_->free(addr);  // throws for anything but the start of an allocated chunk
    // A freed small chunk is never swizzled or unswizzled again, but its page
    // is written whole: zero it, so no raw address of this process reaches
    // the file (and the chunk is ready for its next object).
    if (!chunk->large) std::memset(object, 0, chunk->bytes);
    take_new_and_freed_pages();
}

// Address-space reuse -------------------------------------------------------------

std::size_t pager::uncommitted_pages() {
    take_new_and_freed_pages();
    note_written_pages();
    return txn_new_.size() + txn_freed_.size() + storage_->pending_count() + unwritten_.size();
}

void pager::reuse_address_space() {
    std::size_t changed = uncommitted_pages();
    if (changed)
        throw error(errc::invalid_argument,
                    "reuse_address_space: store " + storage_->path() + " has " + std::to_string(changed) +
                        " pages written, made or freed since the last commit; commit() or rollback() first");
    start_epoch();
}

// Commit and rollback reuse by themselves once the reserved address space
// passes reuse_at_pages_: 3/4 of the limit, or, after a round that left more
// than half of it in use, halfway from what it left to the limit, so that a
// working set that fills most of the limit is not dropped at every commit;
// but never past 7/8, so a transaction may always reserve 1/8 of the limit.
void pager::reuse_if_crowded() {
    if (map_->reserved_virtual_pages() > reuse_at_pages_) start_epoch();
}

// T14 (pager.hpp): every resident page goes (T5), then the arenas not used
// for a whole epoch; the ring is emptied before they are handed out again
// (R5).
void pager::start_epoch() {
    forget_cooling();
    translate::page_map::reclaimed r = map_->start_epoch();
    if (resident_) resident_->clear();  // every page was discarded
    ++reuse_rounds_;
    reclaimed_arenas_ += r.arenas;
    reclaimed_pages_ += r.pages;
    std::uint64_t limit = map_->limit_pages(), left = map_->reserved_virtual_pages();
    reuse_at_pages_ = std::min(limit * 7 / 8, std::max(limit * 3 / 4, left + (limit - left) / 2));
}

// Memory -----------------------------------------------------------------------

store_memory pager::memory() const noexcept {
    const vm::space_stats vs = space_->stats();
    const storage::storage::memory sm = storage_->memory_bytes();
    const std::uint64_t bit_bytes = (page_bits::bytes_for(heap_->page_count()) + translate::page_size - 1) /
                                    translate::page_size * translate::page_size;  // a bit per store page, written up to the last
    store_memory m;
    m.store_pages = (vs.installs - vs.discards - vs.evictions) * translate::page_size;  // I7
    m.heap = heap_->memory_bytes();
    m.page_map = map_->table_bytes(heap_->page_count());
    m.fault_space = space_->table_bytes();
    m.residency = (resident_ ? resident_->memory_bytes() : 0) + (fresh_.mapped() ? bit_bytes : 0) +
                  (prefetch_.hinted.mapped() ? bit_bytes : 0) +
                  (history_ ? history_->memory_bytes() + reuse_history::bits_per_page * bit_bytes : 0);
    m.types = types_bytes_.load(std::memory_order_relaxed);
    m.storage = sm.index;
    m.transaction = (txn_new_.capacity() + txn_freed_.capacity()) * sizeof(std::uint64_t) +
                    unwritten_.capacity() * sizeof(std::uintptr_t);
    m.cooling = cooling_ ? cooling_->memory_bytes() : 0;
    m.buffers = sm.buffers + evict_buffer_.capacity();
    return m;
}

void pager::refresh_budget() noexcept {
    if (!resident_) return;
    // The descriptors' allowance is set aside whole: groups read back and
    // trimmed move within it, not the ring's budget (which would otherwise
    // shrink at every refresh after read-backs, and have the eviction
    // thread take pages in batches from under a walk).
    const std::uint64_t descriptors = heap_->descriptor_bytes();
    const std::uint64_t set_aside =
        std::min(descriptor_bytes_allowed(), heap_->descriptors().groups * heap_detail::desc_table::slot_bytes);
    metadata_bytes_ = memory().metadata();
    // The pool fills as pages cool, while faults keep the ring within its
    // budget without refreshing it: its share is set aside from the start.
    const std::uint64_t taken = metadata_bytes_ + (descriptors < set_aside ? set_aside - descriptors : 0) +
                                (cooling_ ? cooling_->capacity_bytes() : 0);
    const std::uint64_t budget = budget_bytes_.load(std::memory_order_relaxed);
    const std::uint64_t left = budget > taken ? (budget - taken) / translate::page_size : 0;
    pages_allowed_ = std::max(left, min_pages);
    const std::uint64_t fresh = unspilled_new_pages();
    ring_budget_.store(std::max(pages_allowed_ > fresh ? pages_allowed_ - fresh : 0, min_pages),
                       std::memory_order_relaxed);
}

void pager::attach_heap_source() noexcept { heap_->page_descriptors_from(descriptors_from(*storage_)); }

// A sixteenth of the budget holds the descriptors of 1.3 GiB of store per
// 256 MiB of budget; the groups a walk needs come back at one read each,
// for 84 pages. Without a budget nothing is trimmed.
std::uint64_t pager::descriptor_bytes_allowed(std::uint64_t budget_pages) noexcept {
    return std::max<std::uint64_t>(budget_pages * translate::page_size / 16, 8 * heap_detail::desc_table::slot_bytes);
}

std::uint64_t pager::descriptor_bytes_kept(std::uint64_t budget_pages) noexcept {
    return descriptor_bytes_allowed(budget_pages) * 3 / 4;
}

std::uint64_t pager::descriptor_bytes_allowed() const noexcept {
    return descriptor_bytes_allowed(budget_bytes_.load(std::memory_order_relaxed) / translate::page_size);
}

// With `only_if_over` (allocation), only once past the allowance, and then
// down to what is kept, so that an allocation loop does not trim at every call.
void pager::trim_descriptors(bool only_if_over) noexcept {
    if (!resident_) return;
    if (only_if_over && heap_->descriptor_bytes() <= descriptor_bytes_allowed()) return;
    heap_->trim_descriptors(descriptor_bytes_kept(budget_bytes_.load(std::memory_order_relaxed) / translate::page_size));
}

// Metadata grows with the store (about 1% of it, docs/design.md) and with
// the transaction. The ring keeps min_pages whatever it takes; once it
// takes the whole budget, eviction and spilling can do no more, and the
// store refuses to grow rather than let the process outgrow its memory.
void pager::ensure_budget_room() const {
    const std::uint64_t budget = budget_bytes_.load(std::memory_order_relaxed);
    if (!resident_ || metadata_bytes_ <= budget) return;
    const store_memory m = memory();
    const auto kib = [](std::uint64_t bytes) { return std::to_string((bytes + 1023) >> 10) + " KiB"; };
    throw error(errc::no_space,
                "cannot make an object in store " + storage_->path() + ": the store's own memory (" +
                    kib(m.metadata()) + ": heap " + kib(m.heap) + ", page map " + kib(m.page_map) + ", fault space " +
                    kib(m.fault_space) + ", residency " + kib(m.residency) + ", types " + kib(m.types) +
                    ", storage " + kib(m.storage) + ", transaction " + kib(m.transaction) + ", buffers " +
                    kib(m.buffers) + ") exceeds the resident budget of " + kib(budget) +
                    ", so no store page fits in it; raise open_options::resident_budget (or the memory limit it is half of), "
                    "or commit the transaction");
}

std::size_t pager::batch_pages() const noexcept {
    const std::uint64_t budget = opts_.resident_budget_pages ? opts_.resident_budget_pages : vm::fault_space::max_held * 16;
    return static_cast<std::size_t>(std::clamp<std::uint64_t>(budget / 16, 16, vm::fault_space::max_held));
}

pager_stats pager::stats() const {
    vm::space_stats vs = space_->stats();
    pager_stats out{vs.faults,        pointers_swizzled_.load(std::memory_order_relaxed),
                    pages_committed_, pointers_unswizzled_,
                    map_->reserved_virtual_pages(), vs.installs - vs.discards - vs.evictions,  // I7, as memory()
                    space_->count_written() + unwritten_.size(),
                    vs.evictions,     spilled_pages_.load(std::memory_order_relaxed),
                    prefetch_.hints.load(std::memory_order_relaxed), prefetch_.hits.load(std::memory_order_relaxed),
                    map_->limit_pages() * translate::page_size, reuse_rounds_,
                    reclaimed_arenas_, reclaimed_pages_};
    const std::uint64_t io = miss_io_ns_.load(std::memory_order_relaxed);
    const std::uint64_t swizzle = miss_swizzle_ns_.load(std::memory_order_relaxed);
    out.cooled_pages = cooling_ ? cooling_->cooled() : 0;
    out.rewarmed_pages = cooling_ ? cooling_->rewarmed() : 0;
    out.loaded_ahead = space_->stats().filled_ahead;
    out.load_ahead = describe_load_ahead();
    out.miss_io_ns = io;
    out.miss_swizzle_ns = swizzle;
    // The parts are read one after the other while faults may run: keep the rest from going below 0.
    out.miss_handler_ns = vs.fill_ns - std::min(vs.fill_ns, io + swizzle);
    return out;
}

}  // namespace steppe::page
