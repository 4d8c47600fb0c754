// The page engine. Divisions:
//   1. the fault path (signal context): fill, swizzle, fatal errors
//   2. allocation and the pages the heap hands out or takes back
//   3. commit: collect and unswizzle; rollback
//   4. address-space reuse
#include "pager.hpp"

#include <steppe/error.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <set>

#include "storage/fixed_message.hpp"
#include "stored_pointer.hpp"

namespace steppe {

namespace {
alignas(4096) const std::byte zero_page[translate::page_size] = {};

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}
}  // namespace

pager::pager(storage::storage& storage, std::unique_ptr<heap> h, const pager_options& opts)
    : storage_(storage), heap_(std::move(h)), opts_(opts) {
    space_ = vm::fault_space::create(opts.backend, &pager::fill, this);
    map_ = std::make_unique<translate::page_map>(*space_, heap::max_page_count, opts.address_space_limit);
    vm::register_trap_page(map_->dead_page(), storage_.path().c_str(), opts.fatal_hook);
    reuse_at_pages_ = map_->limit_pages() * 3 / 4;
    if (opts.resident_budget_pages)
        resident_ = std::make_unique<translate::residency>(opts.resident_budget_pages * 2 + 65536);
    if (opts.prefetch) {
        void* p = ::mmap(nullptr, heap::max_page_count, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) prefetch_.hinted = static_cast<std::atomic<std::uint8_t>*>(p);
    }
    if (resident_) start_evictor();
}

// The fault path's part (async-signal-safe). Past the budget, the oldest
// pages go at once if they are clean (on this thread, no other CPU is
// interrupted: cheaper than the eviction thread's batches); written ones go
// back to the ring for the eviction thread, which is woken, and waited for
// far past the budget. Pages a failed commit collected are written but no
// longer tracked as such: never dropped here (unwritten_ only changes in
// calls no other thread may overlap).
void pager::keep_within_budget() noexcept {
    if (!resident_ || resident_->size() <= opts_.resident_budget_pages) return;
    std::uintptr_t oldest[2];
    const std::size_t n = resident_->take_oldest(oldest, std::size(oldest));
    for (std::size_t i = 0; i < n; ++i) {
        const bool kept = std::binary_search(unwritten_.begin(), unwritten_.end(), oldest[i]) ||
                          !space_->evict_clean(oldest[i]);
        if (kept && space_->is_resident(oldest[i])) resident_->record(oldest[i]);
    }
    if (resident_->size() <= opts_.resident_budget_pages) return;
    ask_evictor();
    wait_for_evictor();
}

pager::~pager() {
    stop_evictor();
    vm::unregister_trap_page(map_->dead_page());
    map_.reset();
    space_.reset();
    if (prefetch_.hinted) ::munmap(prefetch_.hinted, heap::max_page_count);
}

// Prefetching, "fool me once": every 1,024 hints the share that was used is
// judged; below a quarter, read-ahead pauses for the next 16,384 faults.
constexpr std::uint64_t prefetch_window = 1024, prefetch_pause = 16384;
constexpr int prefetch_per_page = 8;

void pager::note_fault_for_prefetch(std::uint64_t page) noexcept {
    if (prefetch_.hinted && prefetch_.hinted[page].exchange(0, std::memory_order_relaxed)) {
        prefetch_.hits.fetch_add(1, std::memory_order_relaxed);
        prefetch_.window_hits.fetch_add(1, std::memory_order_relaxed);
    }
}

void pager::prefetch_targets(const std::uint64_t* pages, int count) noexcept {
    if (!prefetch_.hinted || space_->stats().faults < prefetch_.resume_at_fault.load(std::memory_order_relaxed))
        return;
    for (int i = 0; i < count; ++i) {
        std::uint64_t target = pages[i];
        std::uintptr_t v = map_->virtual_of(target);
        if ((v && space_->is_resident(v)) || prefetch_.hinted[target].exchange(1, std::memory_order_relaxed)) continue;
        storage_.prefetch(target);
        prefetch_.hints.fetch_add(1, std::memory_order_relaxed);
        if (prefetch_.window_hints.fetch_add(1, std::memory_order_relaxed) + 1 == prefetch_window) {
            if (prefetch_.window_hits.exchange(0, std::memory_order_relaxed) < prefetch_window / 4)
                prefetch_.resume_at_fault.store(space_->stats().faults + prefetch_pause, std::memory_order_relaxed);
            prefetch_.window_hints.store(0, std::memory_order_relaxed);
        }
    }
}

// 1. The fault path ---------------------------------------------------------
//
// Async-signal-safe: it reads the heap's descriptors and the shapes (which only
// change when no other thread touches the store), reads the page with pread,
// reserves targets lock-free, and reports fatal errors with write(2).

bool pager::fill(void* self, std::uintptr_t page_addr, std::byte* out) noexcept {
    return static_cast<pager*>(self)->fill_page(page_addr, out);
}

bool pager::fill_page(std::uintptr_t page_addr, std::byte* out) noexcept {
    auto where = map_->touch(page_addr);
    if (where.what != translate::page_map::kind::page) wild_access(page_addr, where.what);
    std::uint64_t page = where.page;
    const heap::page_desc* d = heap_->describe(page);
    if (!d || !d->is_data() || (page >= storage_.page_count() && !storage_.is_pending(page))) {
        std::memset(out, 0, translate::page_size);  // freed since, or never written
        return true;
    }
    keep_within_budget();
    note_fault_for_prefetch(page);
    storage::read_failure why;
    if (!storage_.read_page_nothrow(page, out, &why, true)) fatal("cannot load", page, why.message);
    translate::page_layout layout = layout_of_page(page);
    if (d->type() >= shapes_.size()) fatal("cannot swizzle", page, "its type is not in the store's type catalog");
    std::uint64_t count = 0;
    std::uint64_t targets[prefetch_per_page];
    int target_count = 0;
    translate::for_each_pointer(layout, [&](std::size_t at, std::uint32_t field) {
        std::uint64_t word;
        std::memcpy(&word, out + at, sizeof word);
        ++count;
        if (word == 0) return;
        const pointer_aim aim = aim_of(*heap_, word);
        if (!aim.admitted()) bad_pointer(page, at, field, layout.type, word, aim);  // S1 (stored_pointer.hpp)
        if (aim.ok() && aim.page != page && target_count < prefetch_per_page &&
            (target_count == 0 || targets[target_count - 1] != aim.page))
            targets[target_count++] = aim.page;
        bool ok = true;
        std::uintptr_t v = swizzle_word(word, ok);
        std::memcpy(out + at, &v, sizeof v);
    });
    pointers_swizzled_.fetch_add(count, std::memory_order_relaxed);
    translate::for_each_vptr(layout, [&](std::size_t at, std::uint32_t) {
        std::uint64_t token;
        std::memcpy(&token, out + at, sizeof token);
        if (token == 0) return;  // not constructed
        auto id = static_cast<std::uint32_t>(token >> 32);
        std::uintptr_t vtable = vtables_.address(id);
        if (vtable == 0) {
            static char why[512];
            storage::fixed_message(why, sizeof why)
                << "this executable has no vtable " << (id < vtables_.size() ? vtables_.name(id).c_str() : "(unknown)")
                << " for its objects (link in the code that defines the class, and do not strip the executable "
                   "or link it with -rdynamic)";
            fatal("cannot relink the vtable pointers of", page, why);
        }
        std::uintptr_t v = vtable + (token & 0xFFFFFFFFu);
        std::memcpy(out + at, &v, sizeof v);
    });
    if (resident_) resident_->record(page_addr);
    prefetch_targets(targets, target_count);
    return true;
}

std::uintptr_t pager::swizzle_word(std::uint64_t word, bool& ok) noexcept {
    if (word == 0) return 0;
    bool end = (word & translate::end_tag) != 0;
    std::uint64_t a = word & ~translate::end_tag;
    if (end) {
        if (a == 0) return ok = false, 0;
        a -= 1;  // the last byte of the unit; +1 again below
    }
    std::uint64_t page = a / translate::page_size;
    if (page == 0 || page >= heap_->page_count()) return ok = false, 0;
    std::uintptr_t v = map_->use(page);
    if (v == 0 && !heap_->describe(page)->is_data()) {
        // A dangling pointer (its page was freed): it must not reserve the
        // page in a shape that a rollback would make wrong, so it leads to a
        // page that is never mapped. Committed as is, it is stored as null.
        return map_->dead_page() + a % translate::page_size + (end ? 1 : 0);
    }
    if (v == 0) {
        translate::unit u = unit_of(page);
        std::uintptr_t base = map_->reserve(u);
        if (base == 0) address_space_exhausted(page, u);
        v = base + (page - u.head) * translate::page_size;
    }
    return v + a % translate::page_size + (end ? 1 : 0);
}

translate::unit pager::unit_of(std::uint64_t page) const noexcept {
    const heap::page_desc* d = heap_->describe(page);
    if (d && d->kind() == heap::page_kind::large_head) return {page, d->run_pages()};
    if (d && d->kind() == heap::page_kind::large_tail) {
        std::uint64_t head = page - d->head_distance();
        return {head, heap_->describe(head)->run_pages()};
    }
    return {page, 1};
}

translate::page_layout pager::layout_of_page(std::uint64_t page) const noexcept {
    return layout_of_page(*heap_, page);
}

translate::page_layout pager::layout_of_page(const heap& h, std::uint64_t page) const noexcept {
    translate::page_layout l;
    const heap::page_desc* d = h.describe(page);
    if (!d || !d->is_data() || d->type() >= shapes_.size()) return l;
    l.type = &shapes_[d->type()];
    l.elem_size = d->elem_size();
    if (d->kind() == heap::page_kind::small) {
        l.what = translate::page_layout::kind::small;
        l.chunk_size = d->chunk_size();
        l.bitmap = d->bitmap().data();
        return l;
    }
    std::uint64_t head = page - d->head_distance();
    l.what = translate::page_layout::kind::large;
    l.offset_in_object = (page - head) * translate::page_size;
    l.elem_count = h.describe(head)->elem_count();
    return l;
}

void pager::fatal(const char* what, std::uint64_t page, const char* detail, const char* advice) const noexcept {
    static char buf[2048];
    storage::fixed_message msg(buf, sizeof buf);
    msg << "steppe: fatal: " << what << " page " << page << " of store " << storage_.path().c_str() << ": "
        << detail << ". The access that touched it cannot go on, so the process ends; ";
    if (advice)
        msg << advice;
    else
        msg << "run `steppe check " << storage_.path().c_str() << "` to see the damage";
    msg << ".\n";
    if (opts_.fatal_hook) opts_.fatal_hook(buf);
    (void)!::write(2, buf, std::strlen(buf));
    ::_exit(vm::fatal_exit_status);
}

void pager::wild_access(std::uintptr_t address, translate::page_map::kind what) const noexcept {
    static char buf[1024];
    storage::fixed_message msg(buf, sizeof buf);
    char digits[17];
    *std::to_chars(digits, digits + 16, address, 16).ptr = '\0';
    msg << "steppe: fatal: the program touched 0x" << digits << " in the address space of store "
        << storage_.path().c_str() << ", where no object is: ";
    if (what == translate::page_map::kind::guard)
        msg << "the guard page after an object (a pointer past an object's end was followed, or a dangling pointer)";
    else if (what == translate::page_map::kind::retired)
        msg << "a range an address-space reuse round gave back (a pointer kept in a variable across two rounds "
               "without touching its page dangles: docs/guarantees.md, promise 7)";
    else
        msg << "a range no object was given (a dangling or made-up pointer)";
    msg << ". The access cannot go on, so the process ends.\n";
    if (opts_.fatal_hook) opts_.fatal_hook(buf);
    (void)!::write(2, buf, std::strlen(buf));
    ::_exit(vm::fatal_exit_status);
}

void pager::bad_pointer(std::uint64_t page, std::size_t at, std::uint32_t field, const translate::type_shape* type,
                        std::uint64_t word, const pointer_aim& aim) const noexcept {
    static char why[1024];
    storage::fixed_message m(why, sizeof why);
    describe_field(m, at, field, type);
    m << " ";
    describe_aim(m, word, aim, *heap_);
    m << " (a stored pointer must aim inside an allocated object, one past its end, or at freed memory)";
    fatal("cannot swizzle", page, why);
}

// Why a unit of `unit_pages` got no address space, and what to do about it:
// one text for the fault path (so no allocation) and for make().
void pager::explain_no_address_space(std::uint64_t unit_pages, storage::fixed_message& why,
                                     storage::fixed_message& advice) const noexcept {
    constexpr std::uint64_t mib = 1 << 20;
    const std::uint64_t arenas = translate::page_map::max_arenas, arena_pages = map_->arena_pages();
    if (unit_pages + 1 > arena_pages) {
        why << "it is part of an object of " << unit_pages << " pages, and the address space is cut into "
            << arenas << " arenas of " << arena_pages << " pages (open_options::address_space_limit / " << arenas
            << "), each unit with a guard page";
        advice << "open the store with an address_space_limit of at least "
               << ((unit_pages + 1) * arenas * translate::page_size + mib - 1) / mib << " MiB";
        return;
    }
    why << "all " << map_->limit_pages() * translate::page_size / mib
        << " MiB of its address space (open_options::address_space_limit) are reserved";
    advice << "call commit() or rollback() now and then during long walks, so that the address space of pages the "
              "program stopped touching is reused (or call store::reuse_address_space()), or open the store with "
              "a larger address_space_limit";
}

void pager::address_space_exhausted(std::uint64_t page, translate::unit u) const noexcept {
    static char why[512], advice[512];
    storage::fixed_message w(why, sizeof why), a(advice, sizeof advice);
    explain_no_address_space(u.pages, w, a);
    fatal("cannot reserve address space for", page, why, advice);
}

// 2. Allocation ---------------------------------------------------------------

void* pager::to_pointer(std::uint64_t persistent) {
    if (persistent == 0) return nullptr;
    const pointer_aim aim = aim_of(*heap_, persistent);
    bool ok = aim.admitted();  // S1 (stored_pointer.hpp); swizzle_word accepts every such word
    std::uintptr_t v = ok ? swizzle_word(persistent, ok) : 0;
    if (!ok) {
        char why[512];
        storage::fixed_message m(why, sizeof why);
        describe_aim(m, persistent, aim, *heap_);
        throw error(errc::corrupt, storage_.path() + ": a stored persistent address " + why);
    }
    return reinterpret_cast<void*>(v);
}

std::uint64_t pager::to_persistent(const void* p, const std::string& what) const {
    std::uint64_t w;
    if (!translate::to_persistent(*map_, reinterpret_cast<std::uintptr_t>(p), w))
        throw error(errc::transient_pointer,
                    what + " " + hex(reinterpret_cast<std::uintptr_t>(p)) + " does not point into store " +
                        storage_.path() + " (only objects made with store.make<T>() can be stored or named)");
    return w;
}

// New pages get a fresh virtual range of their new shape, installed as zeros;
// freed pages lose theirs, so stale pointers can never alias a new object.
void pager::take_new_and_freed_pages() {
    // Freed pages keep their range until the commit (retire_freed_pages), so
    // that a rollback that revives their objects finds them where they were.
    for (std::uint64_t page : heap_->take_freed_pages()) txn_freed_.push_back(page);
    std::vector<std::uint64_t> fresh = heap_->take_new_pages();
    for (std::uint64_t page : fresh) forget_contents(page, unit_of(page));
    for (std::uint64_t page : fresh) {
        translate::unit u = unit_of(page);
        std::uintptr_t base = map_->reserve(u);
        if (base == 0) throw no_address_space(u.pages);
        space_->install(base + (page - u.head) * translate::page_size, zero_page);
        txn_new_.push_back(page);
    }
}

// The page is to show other contents (a new object, or the committed ones
// after a rollback) in the unit `shape`. A range reserved in that same shape
// is kept, so pointers the program holds into it stay valid; only its
// contents go. A range of another shape is retired.
void pager::forget_contents(std::uint64_t page, translate::unit shape) {
    translate::unit reserved = map_->reserved_unit(page);
    if (reserved.pages == 0) return;
    if (reserved == shape) {
        space_->discard(map_->virtual_of(page), 1);
        return;
    }
    if (page < storage_.page_count()) retired_committed_ = true;
    map_->retire(page);
}

error pager::no_address_space(std::uint64_t unit_pages) const {
    char why[512], advice[512];
    storage::fixed_message w(why, sizeof why), a(advice, sizeof advice);
    explain_no_address_space(unit_pages, w, a);
    return error(errc::no_space, "cannot make an object in store " + storage_.path() + ": " + why + "; " + advice);
}

void* pager::allocate(std::uint32_t type, std::size_t elem_size, std::size_t count, std::size_t align) {
    // An object bigger than an arena could never be mapped: refuse it before
    // the heap hands out its pages (a size that overflows is the heap's to refuse).
    std::uint64_t bytes = 0;
    if (!__builtin_mul_overflow(std::uint64_t{elem_size}, std::uint64_t{count}, &bytes)) {
        std::uint64_t pages = (bytes + translate::page_size - 1) / translate::page_size;
        if (pages + 1 > map_->arena_pages()) throw no_address_space(pages);
    }
    spill_if_over_budget();
    std::uint64_t addr = heap_->allocate(type, elem_size, count, align);
    std::size_t before = txn_new_.size();
    take_new_and_freed_pages();
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

// 3. Commit and rollback -------------------------------------------------------

// Adds the pages written since the last look to unwritten_ (kept sorted and
// unique: the eviction thread searches it).
void pager::note_written_pages() {
    std::vector<std::uintptr_t> dirty = space_->take_dirty();
    unwritten_.insert(unwritten_.end(), dirty.begin(), dirty.end());
    std::sort(unwritten_.begin(), unwritten_.end());
    unwritten_.erase(std::unique(unwritten_.begin(), unwritten_.end()), unwritten_.end());
}

void pager::unswizzle_into(std::uint64_t page, const std::byte* from, std::byte* to, bool learn_vtables) {
    std::memcpy(to, from, translate::page_size);
    translate::page_layout layout = layout_of_page(page);
    translate::for_each_pointer(layout, [&](std::size_t at, std::uint32_t field) {
        std::uintptr_t v;
        std::memcpy(&v, to + at, sizeof v);
        std::uint64_t w;
        if (!translate::to_persistent(*map_, v, w)) {
            // A pointer into a retired range points at freed store memory (a
            // destroyed element left in a container's spare capacity, say):
            // it is dead either way, so it is stored as null. Only pointers
            // out of the store altogether are the program's error.
            bool dangling = map_->lookup(v).what != translate::page_map::kind::none;
            if (!dangling && !opts_.null_transient_pointers) {
                std::uint64_t object = page * translate::page_size + at - field;
                throw error(errc::transient_pointer,
                            "type " + layout.type->name + ": the pointer field at offset " + std::to_string(field) +
                                " of the object at persistent address " + hex(object) + " points to " + hex(v) +
                                ", which is not in store " + storage_.path() +
                                " (transient memory, a destroyed object, or a store address kept in a program "
                                "variable across two address-space reuse rounds); only pointers to objects made "
                                "with store.make<T>() can be committed");
            }
            w = 0;
        }
        std::memcpy(to + at, &w, sizeof w);
        ++pointers_unswizzled_;
    });
    translate::for_each_vptr(layout, [&](std::size_t at, std::uint32_t field) {
        std::uintptr_t v;
        std::memcpy(&v, to + at, sizeof v);
        if (v == 0) return;
        std::string symbol = types::vtable_symbol_of(reinterpret_cast<const void*>(v));
        std::uint32_t id = learn_vtables ? vtables_.index_of(symbol) : vtables_.find(symbol);
        std::uintptr_t vtable = vtables_.address(id);
        if (vtable == 0 || v < vtable || v - vtable > 0xFFFFFFFFu)
            throw error(errc::unsupported, "type " + layout.type->name + ": cannot store the vtable pointer at offset " +
                                               std::to_string(field) + ": symbol " + symbol +
                                               " is not in this executable's symbol tables (link with -rdynamic "
                                               "or keep the symbol table)");
        std::uint64_t token = (std::uint64_t{id} << 32) | (v - vtable);
        std::memcpy(to + at, &token, sizeof token);
    });
}

void pager::note_vtable(const void* object) {
    const void* vptr = *static_cast<const void* const*>(object);
    // Itanium: the primary address point is 16 bytes into the vtable group
    // (offset-to-top, RTTI) for a class without virtual bases; store::make
    // calls this for no other (see store::notes_vtable).
    vtables_.note_address(types::vtable_symbol_of(vptr), reinterpret_cast<std::uintptr_t>(vptr) - 16);
}

// The pages the transaction made or wrote that the log does not have yet:
// new ones not spilled (spilled ones are in the log unless written again)
// and every written one.
std::set<std::uint64_t> pager::pages_to_write() {
    take_new_and_freed_pages();
    note_written_pages();
    std::set<std::uint64_t> pages;
    for (std::uint64_t page : txn_new_)
        if (!spilled_.count(page)) pages.insert(page);
    for (std::uintptr_t v : unwritten_) {
        auto where = map_->lookup(v);
        if (where.what == translate::page_map::kind::page) pages.insert(where.page);
    }
    return pages;
}

pager::page_images pager::collect() {
    const std::set<std::uint64_t> pages = pages_to_write();
    // A big commit sends all but its last chunk of pages to the log as it
    // goes, as frames of the transaction (storage::spill), so it needs a
    // chunk's memory rather than twice its size (the images and the log
    // write). A later error leaves them there, as spilled pages, until the
    // transaction commits or rolls back.
    constexpr std::size_t chunk = 1024;
    page_images out;
    out.bytes.resize(std::min(pages.size(), chunk) * translate::page_size);
    std::size_t left = pages.size();
    for (std::uint64_t page : pages) {
        --left;
        const heap::page_desc* d = heap_->describe(page);
        std::uintptr_t v = map_->virtual_of(page);
        if (!d || !d->is_data() || v == 0) continue;
        std::byte* image = out.bytes.data() + out.pages.size() * translate::page_size;
        unswizzle_into(page, reinterpret_cast<const std::byte*>(v), image);
        out.pages.push_back({page, image});
        if (out.pages.size() == chunk && left > 0) {
            storage_.spill(out.pages);
            for (const auto& written : out.pages) spilled_.insert(written.page);
            out.pages.clear();
        }
    }
    collected_pages_ = out.pages.size();  // the others are counted as spilled
    return out;
}

void pager::committed() {
    // New pages were kept resident (the file may hold a former life of them);
    // committed, they may be evicted like any other.
    if (resident_)
        for (std::uint64_t page : txn_new_)
            if (std::uintptr_t v = map_->virtual_of(page)) resident_->record(v);
    pages_committed_ += collected_pages_ + spilled_.size();
    for (std::uint64_t page : txn_freed_)
        if (!heap_->describe(page)->is_data()) map_->retire(page);
    unwritten_.clear();
    txn_new_.clear();
    spilled_.clear();
    txn_freed_.clear();
    retired_committed_ = false;
    forget_spill_failure();
    keep_within_budget();
}

// A transaction that makes more new pages than the budget holds writes them
// (and the pages it has written) to the log ahead of its commit and lets them
// go; they fault back in from the log if touched. Runs where the program
// allocates (normal context, so errors can be thrown); a transaction that only
// writes existing pages is not spilled (docs/design.md).
void pager::spill_if_over_budget() {
    if (!resident_ || txn_new_.size() - std::min(txn_new_.size(), spilled_.size()) < opts_.resident_budget_pages / 2)
        return;
    const std::set<std::uint64_t> pages = pages_to_write();
    std::vector<std::byte> bytes(pages.size() * translate::page_size);
    std::vector<storage::page_image> images;
    std::vector<std::uintptr_t> kept;  // pages that cannot be written yet stay resident and dirty
    for (std::uint64_t page : pages) {
        const heap::page_desc* d = heap_->describe(page);
        std::uintptr_t v = map_->virtual_of(page);
        if (!d || !d->is_data() || v == 0) continue;
        std::byte* image = bytes.data() + images.size() * translate::page_size;
        try {
            unswizzle_into(page, reinterpret_cast<const std::byte*>(v), image);
            images.push_back({page, image});
        } catch (const error&) {
            kept.push_back(v);  // a transient pointer: commit reports it
        }
    }
    storage_.spill(images);
    for (const auto& img : images) {
        space_->discard(map_->virtual_of(img.page), 1);
        spilled_.insert(img.page);
    }
    spilled_pages_.fetch_add(images.size(), std::memory_order_relaxed);
    unwritten_ = std::move(kept);
    std::sort(unwritten_.begin(), unwritten_.end());
}

void pager::rollback(std::unique_ptr<heap> committed_heap) {
    take_new_and_freed_pages();
    storage_.discard_pending();
    for (std::uint64_t page : spilled_)
        if (std::uintptr_t v = map_->virtual_of(page)) space_->discard(v, 1);
    spilled_.clear();
    note_written_pages();
    for (std::uintptr_t v : unwritten_)
        if (map_->lookup(v).what == translate::page_map::kind::page) space_->discard(v, 1);
    heap_ = std::move(committed_heap);
    for (std::uint64_t page : txn_new_) {
        const heap::page_desc* d = heap_->describe(page);
        if (d && d->is_data()) forget_contents(page, unit_of(page));  // a committed page again
        else map_->retire(page);
    }
    if (retired_committed_) {
        // Committed pages were reused in another shape (and their ranges
        // retired); clean resident pages may hold pointers into those ranges,
        // so every page reloads.
        for (std::uint64_t page = 1; page < heap_->page_count(); ++page) {
            std::uintptr_t v = map_->virtual_of(page);
            if (v && space_->is_resident(v)) space_->discard(v, 1);
        }
    }
    unwritten_.clear();
    txn_new_.clear();
    txn_freed_.clear();
    retired_committed_ = false;
    forget_spill_failure();
}

// 4. Address-space reuse ---------------------------------------------------------

std::size_t pager::uncommitted_pages() {
    take_new_and_freed_pages();
    note_written_pages();
    return txn_new_.size() + txn_freed_.size() + spilled_.size() + unwritten_.size();
}

void pager::reuse_address_space() {
    std::size_t changed = uncommitted_pages();
    if (changed)
        throw error(errc::invalid_argument,
                    "reuse_address_space: store " + storage_.path() + " has " + std::to_string(changed) +
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

void pager::start_epoch() {
    translate::page_map::reclaimed r = map_->start_epoch();
    if (resident_) resident_->clear();  // every page was discarded
    ++reuse_rounds_;
    reclaimed_arenas_ += r.arenas;
    reclaimed_pages_ += r.pages;
    std::uint64_t limit = map_->limit_pages(), left = map_->reserved_virtual_pages();
    reuse_at_pages_ = std::min(limit * 7 / 8, std::max(limit * 3 / 4, left + (limit - left) / 2));
}

pager_stats pager::stats() const {
    vm::space_stats vs = space_->stats();
    return {vs.faults,        pointers_swizzled_.load(std::memory_order_relaxed),
            pages_committed_, pointers_unswizzled_,
            map_->reserved_virtual_pages(), resident_ ? resident_->size() : vs.installs - vs.discards,
            space_->count_written() + unwritten_.size(),
            vs.evictions,     spilled_pages_.load(std::memory_order_relaxed),
            prefetch_.hints.load(std::memory_order_relaxed), prefetch_.hits.load(std::memory_order_relaxed),
            map_->limit_pages() * translate::page_size, reuse_rounds_,
            reclaimed_arenas_, reclaimed_pages_};
}

}  // namespace steppe
