// The page engine's commit path (normal context):
//   - note_written_pages, pages_to_write: what the transaction changed
//   - unswizzle_pages: the one unswizzler of written pages into images, used
//     by collect (commit), spill_if_over_budget (spill) and evict_batch
//     (evict.cpp); unswizzle_into does one page
//   - collect, committed (admit_new_pages, retire_freed_pages): a commit's
//     data pages, and adopting them
//   - spill_if_over_budget, spill_held: a transaction's pages to the log
//     ahead of commit
//   - rollback (discard_spilled, discard_written, forget_new_pages,
//     discard_all_resident): forget every change since the last commit
// Each names the transitions of the residency diagram (pager.hpp) it makes.
#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <unordered_set>

#include "common/hex.hpp"
#include "page/pager.hpp"
#include "page/stored_pointer.hpp"

namespace steppe::page {

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
            // A pointer into a retired range or the dead page points at freed
            // store memory (a destroyed element left in a container's spare
            // capacity, say): it is dead either way, so it is stored as null.
            // So is one past the end of one: a dead vector's end of storage
            // at the end of its freed run (the fault path swizzles it to the
            // dead page's end, which no lookup names). Only pointers out of
            // the store altogether are the program's error.
            bool dangling = map_->lookup(v).what != translate::page_map::kind::none ||
                            (v % translate::page_size == 0 &&
                             map_->lookup(v - 1).what == translate::page_map::kind::retired);
            if (!dangling && !opts_.null_transient_pointers) {
                std::uint64_t object = page * translate::page_size + at - field;
                throw error(errc::transient_pointer,
                            "type " + layout.type->name + ": the pointer at offset " + std::to_string(field) +
                                layout.type->field_context(field) + ", of the object at persistent address " +
                                common::hex(object) + " points to " + common::hex(v) + ", which is not in store " +
                                storage_->path() +
                                " (transient memory, another store's memory — e.g. an element built on the stack "
                                "while another store was current and moved into a container of this one: build it "
                                "in place with emplace —, a destroyed object, or a store address kept in a program "
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
        // The vptr of an object of a class this executable lacks goes back
        // to the token it was loaded from.
        if (auto token = vtables_.stand_in_token(v)) {
            std::memcpy(to + at, &*token, sizeof *token);
            return;
        }
        std::string symbol = types::vtable_symbol_of(reinterpret_cast<const void*>(v));
        std::uint32_t id = learn_vtables ? vtables_.index_of(symbol) : vtables_.find(symbol);
        std::uintptr_t vtable = vtables_.address(id);
        if (vtable == 0 || v < vtable || v - vtable > 0xFFFFFFFFu)
            throw error(errc::unsupported, "type " + layout.type->name +
                                               ": cannot store the vtable pointer at offset " + std::to_string(field) +
                                               layout.type->field_context(field) + ": symbol " + symbol +
                                               " is not in this executable's symbol tables (link with -rdynamic "
                                               "or keep the symbol table)");
        const auto offset = static_cast<std::uint32_t>(v - vtable);
        // What open compares the address point with in the next program
        // (types/vtables.hpp); the eviction thread may not add it either.
        const std::int64_t offset_to_top = reinterpret_cast<const std::int64_t*>(v)[-2];
        if (learn_vtables)
            vtables_.note_address_point(id, offset, offset_to_top);
        else if (!vtables_.knows_address_point(id, offset))
            throw error(errc::unsupported, "type " + layout.type->name + ": the vtable pointer at offset " +
                                               std::to_string(field) + " is an address point of " + symbol +
                                               " the vtable table has not recorded yet (the commit records it)");
        std::uint64_t token = (std::uint64_t{id} << 32) | offset;
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
        if (!storage_->is_pending(page)) pages.insert(page);
    for (std::uintptr_t v : unwritten_) {
        auto where = map_->lookup(v);
        if (where.what == translate::page_map::kind::page) pages.insert(where.page);
    }
    return pages;
}

std::vector<pager::page_source> pager::resident_sources(const std::set<std::uint64_t>& pages) const {
    std::vector<page_source> sources;
    for (std::uint64_t page : pages)
        if (std::uintptr_t v = map_->virtual_of(page)) sources.push_back({page, reinterpret_cast<const std::byte*>(v)});
    return sources;
}

std::vector<pager::unswizzled> pager::unswizzle_pages(std::span<const page_source> sources, std::byte* buffer,
                                                      bool learn_vtables, bool keep_failures,
                                                      std::vector<storage::page_image>& images) {
    std::vector<unswizzled> out(sources.size(), unswizzled::image);
    std::byte* next = buffer;
    for (std::size_t i = 0; i < sources.size(); ++i) {
        const heap::page_desc* d = heap_->describe(sources[i].page);
        if (!d || !d->is_data()) {
            out[i] = unswizzled::not_data;
            continue;
        }
        try {
            unswizzle_into(sources[i].page, sources[i].contents, next, learn_vtables);
        } catch (const error&) {
            if (!keep_failures) throw;
            out[i] = unswizzled::kept;
            continue;
        }
        images.push_back({sources[i].page, next});
        next += translate::page_size;
    }
    return out;
}

pager::page_images pager::collect() {
    const std::vector<page_source> sources = resident_sources(pages_to_write());
    // A big commit sends all but its last chunk of pages to the log as it
    // goes, as frames of the transaction (storage::spill), so it needs a
    // chunk's memory rather than twice its size (the images and the log
    // write). A later error leaves them there, as spilled pages, until the
    // transaction commits or rolls back. (T6 and T11 in pager.hpp; the pages
    // stay resident.)
    const std::size_t chunk = batch_pages();
    page_images out;
    out.bytes.resize(std::min(sources.size(), chunk) * translate::page_size);
    for (std::size_t from = 0; from < sources.size(); from += chunk) {
        if (from > 0) {
            storage_->spill(out.pages);
            note_spilled(out.pages);
            out.pages.clear();
        }
        const std::size_t n = std::min(chunk, sources.size() - from);
        unswizzle_pages(std::span(sources).subspan(from, n), out.bytes.data(), true, false, out.pages);
    }
    collected_pages_ = out.pages.size();  // the others are counted as spilled
    collected_spilled_ = storage_->pending_count();
    return out;
}

// T4, T7, T10 and T13 (pager.hpp): what the commit wrote is the committed
// state now, written and spilled pages are clean, new pages ordinary ones.
void pager::committed() {
    admit_new_pages();
    pages_committed_ += collected_pages_ + collected_spilled_;
    retire_freed_pages();
    forget_transaction();
    retired_committed_ = false;
    forget_spill_failure();
    trim_descriptors();
    refresh_budget();
    evict_if_over_budget();
}

// The transaction's page lists go, memory and all: a big transaction's
// would otherwise stay as capacity (store_memory::transaction).
void pager::forget_transaction() noexcept {
    unwritten_ = std::vector<std::uintptr_t>();  // (= {} would keep the capacity)
    txn_new_ = std::vector<std::uint64_t>();
    txn_freed_ = std::vector<std::uint64_t>();
    new_spilled_ = 0;
    unspilled_after_spill_ = 0;
}

// T10: new pages were kept resident (the file may hold a former life of
// them, R3); committed, they may be evicted like any other (R6).
void pager::admit_new_pages() {
    if (!resident_) return;
    for (std::uint64_t page : txn_new_) {
        mark_new(page, false);
        if (std::uintptr_t v = map_->virtual_of(page)) resident_->record(v);
    }
}

// T13 at the commit: a page freed in the transaction kept its range until
// now, so that a rollback could revive its objects where they were.
void pager::retire_freed_pages() {
    if (!txn_freed_.empty()) forget_cooling();
    for (std::uint64_t page : txn_freed_)
        if (!heap_->describe(page)->is_data()) map_->retire(page);
}

// R3, R4: a new page the log holds may be evicted (its next fill reads it
// from there); new_spilled_ counts it.
void pager::note_spilled(const std::vector<storage::page_image>& images) {
    for (const auto& image : images) {
        if (fresh_.mapped() && fresh_.test(image.page, std::memory_order_relaxed)) ++new_spilled_;
        mark_new(image.page, false);
    }
}

// A transaction that makes more new pages than the budget holds writes them
// (and the pages it has written) to the log ahead of its commit and lets them
// go; they fault back in from the log if touched. Runs where the program
// allocates (normal context, so errors can be thrown), once the new pages
// pass half of what the budget leaves store pages; a batch at a time, so it
// needs a batch's images, not the transaction's. A transaction that only
// writes existing pages is spilled by the eviction thread (docs/design.md).
// What a spill leaves unspilled (pages freed since they were made, which
// hold no data, and a page handed out again after its free, which
// txn_new_ names again) counts towards the next spill only once as many
// new pages again are made: counted at once, a transaction that makes and
// destroys objects ran a whole spill at every allocation from then on,
// each over all of txn_new_, and 10 times the work took 85 times as long
// (a tester's finding, under an 8 MiB budget the store never came near).
//
// Other threads may write these pages meanwhile (make runs beside them: the
// threads contract), so each batch is held first, as the eviction thread
// holds its own (vm hold(): a write waits, then faults the page back from
// the log), and read where hold() put it. Reading the pages in place and
// discarding them lost a write made between the read and the discard.
void pager::spill_if_over_budget() {
    if (!resident_ || unspilled_new_pages() < unspilled_after_spill_ + pages_allowed_ / 2) return;
    std::vector<std::pair<std::uintptr_t, std::uint64_t>> pages;  // virtual, persistent; ascending for hold()
    for (const page_source& s : resident_sources(pages_to_write()))
        pages.push_back({reinterpret_cast<std::uintptr_t>(s.contents), s.page});
    std::sort(pages.begin(), pages.end());
    // take_dirty (in pages_to_write) re-armed their tracking: from here on
    // unwritten_ alone says they were written, so every page not spilled
    // goes back into it.
    std::vector<std::uintptr_t> kept;
    const std::size_t chunk = std::min(batch_pages(), vm::fault_space::max_held);
    std::vector<std::byte> bytes(std::min(pages.size(), chunk) * translate::page_size);
    for (std::size_t from = 0; from < pages.size(); from += chunk) {
        const auto part = std::span(pages).subspan(from, std::min(chunk, pages.size() - from));
        spill_held(part, bytes.data(), kept);
    }
    unwritten_ = std::move(kept);
    std::sort(unwritten_.begin(), unwritten_.end());
    unspilled_after_spill_ = unspilled_new_pages();
    refresh_budget();
}

// One batch of spill_if_over_budget: held, unswizzled from where hold() put
// it, written to the log, dropped. A page hold() could not take (another
// thread filling or first-writing it just now), one that cannot be written
// yet (a transient pointer: commit reports it) and one that is not data
// (freed in this transaction: nothing to write) stay resident and go into
// `kept`, which alone says they were written: a freed page a rollback
// revives must be dropped then, to show its committed contents. (Left out,
// a chunk that destroy zeroed stayed zeros after the rollback under mprotect
// tracking, and the next commit stored the zeros: a tester's finding.) If
// the unswizzle or the spill throws, the batch stays as it was.
void pager::spill_held(std::span<const std::pair<std::uintptr_t, std::uint64_t>> part, std::byte* buffer,
                       std::vector<std::uintptr_t>& kept) {
    std::vector<std::uintptr_t> virtuals;
    for (const auto& [v, page] : part) virtuals.push_back(v);
    held_batch b{virtuals, std::vector<vm::fault_space::held>(part.size()),
                 std::vector<const std::byte*>(part.size()), std::vector<bool>(part.size(), true)};
    space_->hold(virtuals, b.how, b.contents);
    std::vector<page_source> sources;
    std::vector<std::size_t> source_of;
    for (std::size_t i = 0; i < part.size(); ++i) {
        if (b.how[i] == vm::fault_space::held::none) {
            kept.push_back(virtuals[i]);
            continue;
        }
        sources.push_back({part[i].second, b.contents[i]});
        source_of.push_back(i);
    }
    std::vector<storage::page_image> images;
    try {
        const std::vector<unswizzled> how = unswizzle_pages(sources, buffer, true, true, images);
        for (std::size_t k = 0; k < sources.size(); ++k) {
            if (how[k] == unswizzled::image) b.keep[source_of[k]] = false;
            else kept.push_back(virtuals[source_of[k]]);
        }
        storage_->spill(images);
    } catch (...) {
        release_held(b);  // as they were: unwritten_, not changed yet, still names them all
        throw;
    }
    note_spilled(images);
    spilled_pages_.fetch_add(images.size(), std::memory_order_relaxed);
    release_held(b);
}

// Dropped pages become missing (the next touch reads them from the log, or
// the cooling pool), kept ones go back as they were. Neither goes into the
// ring here: spill_held's new pages enter it at the commit (R3) and its
// written ones are in it already (R6); release_batch records its kept ones.
void pager::release_held(const held_batch& b) {
    std::vector<std::uintptr_t> dropped, stay;
    for (std::size_t i = 0; i < b.pages.size(); ++i)
        if (b.how[i] != vm::fault_space::held::none) (b.keep[i] ? stay : dropped).push_back(b.pages[i]);
    space_->release(dropped, true);
    space_->release(stay, false);
}

void pager::rollback(std::unique_ptr<heap> committed_heap) {
    forget_cooling();
    take_new_and_freed_pages();
    discard_spilled();
    discard_written();
    heap_ = std::move(committed_heap);
    attach_heap_source();
    forget_new_pages();
    if (retired_committed_) discard_all_resident();
    forget_transaction();
    retired_committed_ = false;
    forget_spill_failure();
    trim_descriptors();
    refresh_budget();
}

// T8 (pager.hpp): the log forgets the transaction's frames (R4), and pages
// read back from them are dropped, to show their committed contents.
void pager::discard_spilled() {
    const std::vector<std::uint64_t> spilled = storage_->pending_pages();
    storage_->discard_pending();
    for (std::uint64_t page : spilled)
        if (std::uintptr_t v = map_->virtual_of(page)) space_->discard(v, 1);
}

// T8: written pages are dropped, to show their committed contents.
void pager::discard_written() {
    note_written_pages();
    for (std::uintptr_t v : unwritten_)
        if (map_->lookup(v).what == translate::page_map::kind::page) space_->discard(v, 1);
}

// T12, with the committed heap in place: a new page that is a committed
// page again shows its committed contents in its range; any other is retired.
void pager::forget_new_pages() {
    for (std::uint64_t page : txn_new_) {
        mark_new(page, false);
        const heap::page_desc* d = heap_->describe(page);
        if (d && d->is_data()) forget_contents(page, unit_of(page));
        else map_->retire(page);
    }
}

namespace {
// Whether descriptor group `g` describes its pages alike in both heaps,
// known without reading it back (most of a big store's groups are out of
// memory): its metadata page stayed where it was and is not among the pages
// the storage says changed (ascending), and its checksum agrees.
bool same_descriptor_group(const heap& older, const heap& newer, std::uint64_t g,
                           std::span<const std::uint64_t> changed) {
    const auto &was = older.metadata_pages(), &is = newer.metadata_pages();
    return g < was.size() && g < is.size() && was[g] == is[g] &&
           older.metadata_checksums()[g] == newer.metadata_checksums()[g] &&
           !std::binary_search(changed.begin(), changed.end(), is[g]);
}
}  // namespace

// T15 (pager.hpp), under a pause, no other thread touching the store. A
// page whose description changed (its layout, chunks or unit) or whose
// image did reloads; a unit whose shape changed is retired, and then every
// resident page reloads, since a kept page may hold pointers into it (as a
// rollback that retired committed pages does). R8: the cooling pool
// empties.
void pager::move_to(storage::storage& newer, std::unique_ptr<heap> newer_heap, std::span<const std::uint64_t> changed,
                    bool reload_all) {
    forget_cooling();
    const std::unique_ptr<heap> older = std::exchange(heap_, std::move(newer_heap));
    vm::unregister_trap_page(map_->dead_page());
    storage_ = &newer;
    vm::register_trap_page(map_->dead_page(), storage_->path().c_str(), opts_.fatal_hook);
    bool retired = false;
    const std::uint64_t pages = std::max(older->page_count(), heap_->page_count());
    for (std::uint64_t first = 0; first < pages; first += heap_detail::desc_table::per_group) {
        if (same_descriptor_group(*older, *heap_, first / heap_detail::desc_table::per_group, changed)) continue;
        const std::uint64_t end = std::min(pages, first + heap_detail::desc_table::per_group);
        for (std::uint64_t page = std::max<std::uint64_t>(first, 1); page < end; ++page) {
            const heap::page_desc *was = older->describe(page), *is = heap_->describe(page);
            if (was == is || (was && is && *was == *is)) continue;
            discard_if_resident(page);
            const translate::unit reserved = map_->reserved_unit(page);
            if (reserved.pages == 0 || (is && is->is_data() && reserved == unit_of(page))) continue;
            map_->retire(page);
            retired = true;
        }
    }
    for (std::uint64_t page : changed) discard_if_resident(page);
    if (retired || reload_all) discard_all_resident();
    rebuild_ring();
    attach_heap_source();
    refresh_budget();
}

// After move_to's discards the ring names pages that are gone, and each of
// them would be named twice once faulted again: then two evictors (the
// eviction thread and a faulting thread, or two faulting threads) could
// drop one page at once, and one of them could publish a cooling claim
// whose bytes the other's drop never copied (R7 assumes one dropper; a
// thread faulting the page meanwhile read another page's bytes). So the
// ring keeps each resident page once, oldest first, and nothing else.
void pager::rebuild_ring() {
    if (!resident_) return;
    const std::vector<std::uintptr_t> named = resident_->recorded();
    resident_->clear();
    std::unordered_set<std::uintptr_t> kept;
    for (std::uintptr_t v : named)
        if (space_->is_resident(v) && kept.insert(v).second) resident_->record(v);
}

void pager::discard_if_resident(std::uint64_t page) {
    const std::uintptr_t v = map_->virtual_of(page);
    if (v && space_->is_resident(v)) space_->discard(v, 1);
}

// T5 at a rollback that retired committed pages (they were reused in another
// shape): clean resident pages may hold pointers into those ranges, so every
// page reloads.
void pager::discard_all_resident() {
    for (std::uint64_t page = 1; page < heap_->page_count(); ++page) discard_if_resident(page);
}

}  // namespace steppe::page
