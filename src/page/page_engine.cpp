// The page engine behind the engine interface (page/page_engine.hpp):
//   - open: the committed state from the storage meta and its blobs, then
//     the pager on the committed heap
//   - close: the pager goes, then a checkpoint
//   - make, destroy, the root functions: the live state
//   - commit: blobs, data pages (pager::collect), heap metadata, one storage
//     commit, then committed_ = live_; rollback: live_ = committed_
//   - stats, types, check
#include "page/page_engine.hpp"

#include <steppe/error.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <new>
#include <optional>
#include <set>

#include "common/hex.hpp"
#include "common/memory_limit.hpp"
#include "common/sparse_mapping.hpp"
#include "engine/storage_options.hpp"
#include "page/page_check.hpp"
#include "page/stored_pointer.hpp"
#include "storage/backup.hpp"
#include "types/json_dump.hpp"

namespace steppe::page {

namespace {
// What an engine meta starting with `magic` (not this engine's) holds
// instead, for the message. Every command of the CLI opens a store that
// neither engine's magic names as the page engine's: its message must not
// make it sound like one (it may be an object store with a damaged meta).
std::string found_instead(const char (&magic)[8]) {
    if (std::memcmp(magic, engine_magic, 7) == 0) return {};  // another version of this engine's
    const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(magic), sizeof magic);
    return ", nor object-engine data: its engine data starts with the bytes " + common::hex(bytes) +
           ", where the page engine's starts \"" + std::string(engine_magic, 7) + "\" and the object engine's "
           "\"stobjng\" (another program's data, or a damaged header)";
}

vm::backend_kind backend_for(fault_backend b) {
    return vm::choose_backend(b == fault_backend::mprotect ? vm::backend_kind::mprotect : vm::backend_kind::uffd);
}
}  // namespace

page_engine::page_engine(const std::string& path, const open_options& options, storage::env* io, bool match_program)
    : options_(options), io_(io), match_program_(match_program) {
    common::refuse_mapping_lock(path);  // before the sparse tables: they would all become resident
    storage_ = storage::storage::open(path, storage_options(options, io));
    try {
        load_and_map(path);
    } catch (const std::exception&) {  // not a test's simulated crash: a process that dies cleans nothing up
        storage_->remove_if_made_by_open();
        throw;
    }
}

// The committed state, the pager over it, and the program's types checked
// against the store's.
void page_engine::load_and_map(const std::string& path) {
    const open_options& options = options_;
    committed_ = load_state(*storage_, path);
    live_ = committed_;
    pager_options po;
    po.backend = backend_for(options.backend);
    po.null_transient_pointers = options.null_transient_pointers;
    po.fatal_hook = options.fatal_hook;
    po.prefetch = options.prefetch;
    po.cooling = options.cooling;
    po.load_ahead = options.load_ahead;
    po.read_only = options.read_only;
    po.address_space_limit = options.address_space_limit;
    std::uint64_t budget = options.resident_budget;
    budget_source_ = "option";
    if (budget == 0) {
        common::memory_limit m = common::available_memory();
        budget = m.available / 2;
        budget_source_ = "half of " + std::to_string(m.available >> 20) + " MiB free under " + m.source +
                         " at open, following it since";
    }
    po.resident_budget_pages = std::max<std::uint64_t>(budget / storage::page_size, 256);
    po.follow_memory = options.resident_budget == 0;
    budget_pages_ = po.resident_budget_pages;
    pager_ = std::make_unique<pager>(*storage_, load_committed_heap(), live_.vtables, po);
    validate(live_, pager_->allocator(), *storage_);
    mistyped_ = find_mistyped_roots(live_, pager_->allocator());
    sync_shapes(true);
    note_types_memory();
    pager_->start_loading_ahead();
}

// The committed state the storage's meta pins (a new store's if it has none).
page_engine::state page_engine::load_state(const storage::storage& s, const std::string& path) const {
    const auto& raw = s.meta();
    bool fresh = std::all_of(raw.begin(), raw.end(), [](std::byte b) { return b == std::byte{0}; });
    state c;
    if (fresh) {
        storage::refuse_zero_meta_after_commits(s);
        std::memcpy(c.meta.magic, engine_magic, sizeof engine_magic);
        return c;
    }
    std::memcpy(&c.meta, raw.data(), sizeof(engine_meta));
    if (std::memcmp(c.meta.magic, "stobjng", 7) == 0)
        throw error(errc::unsupported, path + " was made by the object engine; open it with steppe::objects::store::open");
    if (std::memcmp(c.meta.magic, engine_magic, sizeof engine_magic) != 0)
        throw error(errc::version,
                    path + " holds no page-engine data of a version this build reads" + found_instead(c.meta.magic));
    // A blob never written (no types, roots or vtables yet) has no pages.
    if (c.meta.catalog.pages)
        c.catalog = types::catalog::decode(storage::read_blob(s, c.meta.catalog, catalog_owner, "type catalog", c.catalog_pages));
    if (match_program_) c.catalog.require_program_match(path);
    if (c.meta.roots.pages)
        c.roots = decode_roots(storage::read_blob(s, c.meta.roots, roots_owner, "roots table", c.roots_pages), path);
    if (c.meta.vtables.pages)
        c.vtables = types::vtable_table::decode(
            storage::read_blob(s, c.meta.vtables, vtables_owner, "vtable table", c.vtables_pages));
    c.vtables.stand_in_for_missing(path, options_.fatal_hook);
    c.vtables.require_noted_classes(c.catalog, path);
    c.vtables.require_same_address_points(path);
    return c;
}

// A read-only store moves to the newest commit without closing: the
// storage opens again, and only the pages it says changed since this
// snapshot, and those whose description changed, reload (pager::move_to);
// the rest stay resident. Everything that can throw runs before anything
// changes, so a failure leaves the store on its snapshot. false (nothing
// changed): the snapshots cannot be compared (storage::changed_since), so
// the caller opens the store again.
bool page_engine::refresh_in_place() {
    pager::pause p(*pager_);
    storage::options so = storage_options(options_, io_);
    so.after = storage_.get();  // what this snapshot read is not read again
    std::unique_ptr<storage::storage> newer = storage::storage::open(path(), so);
    std::optional<std::vector<storage::page_no>> changed = newer->changed_since(*storage_);
    if (!changed) return false;
    state next = load_state(*newer, path());
    std::unique_ptr<heap> h = load_heap(*newer, next.meta, descriptors_kept());
    validate(next, *h, *newer);
    mistyped_roots mistyped = find_mistyped_roots(next, *h);
    // A class this program lacks has a stand-in the table maps (and unmaps
    // with it): resident objects of it must not keep the older one's.
    const bool stand_ins = live_.vtables.has_stand_ins() || next.vtables.has_stand_ins();
    pager_->move_to(*newer, std::move(h), *changed, stand_ins);
    std::swap(storage_, newer);  // the older storage closes at the end of this scope, with its reader slot
    live_ = std::move(next);  // in place: the pager reads live_.vtables
    committed_ = live_;
    mistyped_ = std::move(mistyped);
    sync_shapes(true);
    note_types_memory();
    reuse_if_crowded("the refresh");
    return true;
}

// 1. drop the pager: its eviction thread stops, uncommitted changes go
// 2. checkpoint the committed state, after forgetting the frames the dropped
//    transaction spilled to the log (a checkpoint resets the log)
// 3. release the files and the lock, whether 2 succeeded or not
void page_engine::close() {
    if (!storage_) return;
    pager_.reset();
    struct release {
        std::unique_ptr<storage::storage>& files;
        ~release() { files.reset(); }
    } release_files{storage_};
    if (!options_.checkpoint_on_close || options_.read_only) return;
    storage::checkpoint_at_close(*storage_);
}

// M1 (engine_meta.hpp) for the chains of `s`.
std::vector<std::string> page_engine::blob_findings(const state& s, const heap& h,
                                                    const storage::storage& files) const {
    return blob_chain_findings(h, files.page_count(),
                               {{catalog_owner, "type catalog", s.catalog_pages},
                                {roots_owner, "roots table", s.roots_pages},
                                {vtables_owner, "vtable table", s.vtables_pages}});
}

// M1 holds, and every root and every data page names a type the catalog has.
void page_engine::validate(const state& s, const heap& h, const storage::storage& files) const {
    const std::vector<std::string> broken = blob_findings(s, h, files);
    if (!broken.empty())
        throw error(errc::corrupt, path() + ": " + broken.front() +
                                       ": the heap's descriptors and the store's metadata disagree (damage; "
                                       "restore a backup)");
    for (const auto& [name, e] : s.roots)
        if (e.type >= s.catalog.size())
            throw error(errc::corrupt, path() + ": root '" + name + "' names type " + std::to_string(e.type) +
                                           ", which the type catalog does not have");
    if (h.type_bound() <= s.catalog.size()) return;  // without reading back dropped descriptors
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        if (d->is_data() && d->type() >= s.catalog.size())
            throw error(errc::corrupt, path() + ": page " + std::to_string(p) + " holds objects of type " +
                                           std::to_string(d->type()) + ", which the type catalog does not have");
    }
}

void page_engine::sync_shapes(bool rebuild) {
    pager_->change_shapes([&](std::vector<translate::type_shape>& shapes) {
        if (rebuild) shapes.clear();
        for (std::size_t i = shapes.size(); i < live_.catalog.size(); ++i) {
            const types::layout& l = live_.catalog.at(static_cast<types::catalog::index>(i));
            translate::type_shape& shape =
                shapes.emplace_back(translate::type_shape{l.name, l.size, l.pointers, l.vptrs, {}});
            for (const types::field& f : l.fields)
                shape.fields.push_back({f.offset, f.size, types::field_context(l, f.offset)});
        }
    });
}

types::catalog::index page_engine::type_index(const types::layout& layout) {
    std::size_t before = live_.catalog.size();
    types::catalog::index i = live_.catalog.find_or_add(layout);
    if (live_.catalog.size() != before) {
        catalog_dirty_ = true;
        sync_shapes(false);
        note_types_memory();
    }
    return i;
}

void page_engine::ensure_writable() const {
    if (options_.read_only) throw error(errc::invalid_argument, path() + " is open read-only");
}

template <class F>
auto page_engine::unless_memory_runs_out(const char* what, F&& f) {
    refuse_if_broken(what);
    try {
        return f();
    } catch (const std::bad_alloc&) {
        broken_by_ = what;
        throw;
    }
}

void page_engine::refuse_if_broken(const char* what) const {
    if (broken_by_)
        throw error(errc::poisoned, std::string(what) + ": store " + path() + ": a " + broken_by_ +
                                        " ran out of memory half-way, which may have left the heap's bookkeeping "
                                        "half-changed; rollback() (the store is as its last commit left it) and "
                                        "go on from there");
}

void* page_engine::make(const types::layout& layout, std::size_t count) {
    ensure_writable();
    pager::pause p(*pager_);
    if (count == 0) throw error(errc::invalid_argument, "make_array of 0 elements of " + layout.name);
    if (!layout.refs.empty())
        throw error(errc::invalid_argument, "type " + layout.name + " holds a steppe::objects::ref at offset " +
                                                std::to_string(layout.refs[0]) + types::field_context(layout, layout.refs[0]) +
                                                "; the page engine stores raw pointers (objects::ref is the object "
                                                "engine's: steppe::objects::store)");
    return unless_memory_runs_out("make", [&] {
        return pager_->allocate(type_index(layout), layout.size, count, std::max<std::size_t>(layout.align, 16));
    });
}

// make and destroy from several threads take turns (the pause's mutex),
// as std containers on steppe::allocator in several threads need.
void page_engine::destroy(void* object) {
    pager::pause p(*pager_);
    unless_memory_runs_out("destroy", [&] { pager_->free(object); });
}

void page_engine::note_vtable(const void* object) {
    pager::pause p(*pager_);
    pager_->note_vtable(object);
}

void* page_engine::find_root(std::string_view name, const types::layout& layout) {
    auto it = live_.roots.find(name);
    if (it == live_.roots.end()) return nullptr;
    types::catalog::index want = type_index(layout);
    if (it->second.type != want)
        throw error(errc::type_mismatch, path() + ": root '" + std::string(name) + "' holds a " +
                                             live_.catalog.at(it->second.type).name + ", not a " + layout.name);
    if (auto bad = mistyped_.find(name); bad != mistyped_.end() && bad->second.first == it->second)
        throw error(errc::corrupt, path() + ": " + bad->second.second + " (steppe check names it)");
    return pager_->to_pointer(it->second.address);
}

// Roots naming an object that is not allocated are left to check(): the
// program may have destroyed it (its own mistake), as before M2.
page_engine::mistyped_roots page_engine::find_mistyped_roots(const state& s, const heap& h) const {
    mistyped_roots out;
    for (const auto& [name, e] : s.roots) {
        if (!h.find_chunk(e.address)) continue;
        if (std::string broken = root_finding(h, s.catalog, name, e); !broken.empty())
            out.emplace(name, std::pair(e, std::move(broken)));
    }
    return out;
}

void page_engine::set_root(std::string_view name, const types::layout& layout, void* object) {
    ensure_writable();
    if (!object) throw error(errc::invalid_argument, "set_root('" + std::string(name) + "') with a null object; use remove_root");
    std::uint64_t address = pager_->to_persistent(object, "set_root('" + std::string(name) + "'): object");
    live_.roots[std::string(name)] = {type_index(layout), address};
    roots_dirty_ = true;
}

bool page_engine::remove_root(std::string_view name) {
    ensure_writable();
    auto it = live_.roots.find(name);
    if (it == live_.roots.end()) return false;
    live_.roots.erase(it);
    roots_dirty_ = true;
    return true;
}

std::vector<root_info> page_engine::roots() const {
    std::vector<root_info> out;
    for (const auto& [name, e] : live_.roots) out.push_back({name, live_.catalog.at(e.type).name});
    return out;
}

// 1. blobs that changed (may take system pages from the heap)
// 2. data pages, unswizzled (throws transient_pointer before anything is written)
// 3. the heap's changed metadata pages and its root
// 4. one storage commit of all of it with the new meta
// 5. adopt the new committed state
void page_engine::commit() {
    ensure_writable();
    pager::pause p(*pager_);
    refuse_if_broken("commit");
    std::deque<std::array<std::byte, storage::page_size>> buffers;
    std::vector<storage::page_image> images;
    engine_meta meta = committed_.meta;
    heap& h = pager_->allocator();
    storage::page_source pages = system_pages(h);
    if (catalog_dirty_)
        meta.catalog = storage::write_blob(live_.catalog.encode(), catalog_owner, live_.catalog_pages, pages, buffers, images);
    if (roots_dirty_) meta.roots = storage::write_blob(encode_roots(live_.roots), roots_owner, live_.roots_pages, pages, buffers, images);
    pager::page_images data = pager_->collect();
    images.insert(images.end(), data.pages.begin(), data.pages.end());
    if (live_.vtables.learned() != committed_.vtables.learned())  // collect met new symbols or address points
        meta.vtables = storage::write_blob(live_.vtables.encode(), vtables_owner, live_.vtables_pages, pages, buffers, images);
    heap::commit_image heap_image = h.encode_dirty();
    for (const auto& m : heap_image.pages) images.push_back({m.page, m.bytes.data()});
    auto root_bytes = heap_image.root.to_bytes();
    std::memcpy(meta.heap, root_bytes.data(), root_bytes.size());

    storage::meta_bytes raw{};
    std::memcpy(raw.data(), &meta, sizeof meta);
    try {
        storage_->commit(images, raw);
    } catch (...) {
        pager_->allocator().mark_all_dirty();
        catalog_dirty_ = roots_dirty_ = true;
        throw;
    }
    pager_->committed();
    live_.meta = meta;
    committed_ = live_;
    catalog_dirty_ = roots_dirty_ = false;
    note_types_memory();
    reuse_if_crowded("the commit");
}

// The committed state only, so nothing may have changed since the last
// commit: pages a transaction spilled sit in the log after its last commit,
// and the reset would lose them.
void page_engine::checkpoint() {
    if (options_.read_only)
        throw error(errc::invalid_argument, "checkpoint: store " + path() + " is open read-only");
    pager::pause p(*pager_);
    require_no_changes("checkpoint");
    storage_->checkpoint();
}

void page_engine::require_no_changes(const char* what) const {
    std::size_t pages = pager_->uncommitted_pages();
    if (pages || catalog_dirty_ || roots_dirty_)
        throw error(errc::invalid_argument,
                    std::string(what) + ": store " + path() + " has changes since the last commit (" +
                        std::to_string(pages) + " pages written, made or freed" +
                        (roots_dirty_ ? "; roots changed" : "") + (catalog_dirty_ ? "; new types" : "") +
                        "); commit() or rollback() first");
}

// The pause keeps the eviction thread from spilling while the pages are
// read; the backup holds the last commit whatever the transaction did since.
void page_engine::backup(const std::string& dest) {
    pager::pause p(*pager_);
    storage::backup_from(*storage_, dest);
}

void page_engine::rollback() {
    pager::pause p(*pager_);
    pager_->rollback(load_committed_heap());
    broken_by_ = nullptr;
    live_ = committed_;
    catalog_dirty_ = roots_dirty_ = false;
    sync_shapes(true);
    note_types_memory();
    reuse_if_crowded("the rollback");
}

// Starts an address-space reuse round if the reserved space is crowded. The
// commit or rollback before it is complete whatever happens here; the error
// says so, since commit() throwing otherwise means the commit failed.
void page_engine::reuse_if_crowded(const char* after) {
    try {
        pager_->reuse_if_crowded();
    } catch (const error& e) {
        throw error(e.code(), path() + ": address-space reuse after " + after + " (which is complete) failed: " +
                                  e.what());
    }
}

void page_engine::reuse_address_space() {
    pager::pause p(*pager_);
    pager_->reuse_address_space();
}

store_stats page_engine::stats() const {
    pager::pause paused(*pager_);
    pager_stats p = pager_->stats();
    const storage::stats& s = storage_->counters();
    store_stats out;
    out.backend = vm::to_string(pager_->backend());
    out.write_tracking = vm::to_string(pager_->tracking());
    out.faults = p.faults;
    out.pointers_swizzled = p.pointers_swizzled;
    out.commits = s.commits;
    out.pages_committed = p.pages_committed;
    out.pointers_unswizzled = p.pointers_unswizzled;
    out.bytes_logged = s.bytes_written;
    out.syncs = s.syncs;
    copy_storage_counters(*storage_, out);
    out.store_pages = storage_->page_count();
    out.free_pages = pager_->allocator().free_pages().total_pages();
    out.resident_pages = p.resident_pages;
    out.dirty_pages = p.dirty_pages;
    out.evictions = p.evictions;
    out.cooled_pages = p.cooled_pages;
    out.rewarmed_pages = p.rewarmed_pages;
    out.loaded_ahead_pages = p.loaded_ahead;
    out.load_ahead = p.load_ahead;
    out.resident_budget_pages = pager_->budget_pages();
    out.spilled_pages = p.spilled_pages;
    out.prefetched_pages = p.prefetched_pages;
    out.prefetch_hits = p.prefetch_hits;
    out.address_space_limit = p.address_space_limit;
    out.reserved_virtual_pages = p.reserved_virtual_pages;
    out.reuse_rounds = p.reuse_rounds;
    out.reclaimed_arenas = p.reclaimed_arenas;
    out.reclaimed_pages = p.reclaimed_pages;
    const heap::descriptor_stats descriptors = pager_->allocator().descriptors();
    out.descriptor_groups_dropped = descriptors.dropped;
    out.descriptor_groups_read_back = descriptors.read_back;
    out.miss_io_ns = p.miss_io_ns;
    out.miss_swizzle_ns = p.miss_swizzle_ns;
    out.miss_handler_ns = p.miss_handler_ns;
    out.resident_budget_source = budget_source_;
    out.memory = pager_->memory();
    return out;
}

// The catalog, shapes, roots and vtables, live and committed: an estimate
// (their encodings, twice), redone when one of them changes. They grow with
// the program's types and roots, not with the store.
void page_engine::note_types_memory() {
    constexpr std::uint64_t per_root = 128;  // a map node, its name and entry
    const std::uint64_t catalog = live_.catalog.encode().size() * 2;  // the layouts and the shapes made of them
    const std::uint64_t bytes = catalog + live_.roots.size() * per_root + live_.vtables.encode().size();
    pager_->note_types_memory(2 * bytes);
}

std::vector<type_usage> page_engine::types() const {
    std::vector<type_usage> out;
    for (const auto& l : live_.catalog.entries()) out.push_back({l.name, l.size, 0, 0});
    pager::pause paused(*pager_);  // no trim drops a descriptor under it (D2 in heap/desc_table.hpp)
    const heap& h = pager_->allocator();
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        if (!d->is_data() || d->type() >= out.size()) continue;
        type_usage& u = out[d->type()];
        ++u.pages;
        if (d->kind() == heap::page_kind::small) u.objects += d->chunks_used();
        if (d->kind() == heap::page_kind::large_head) ++u.objects;
    }
    return out;
}

// Committed state only, as check: breadth first from the roots over the
// committed heap's chunks, each read from the storage (pointers in their
// persistent form), a pointer shown as its persistent address.
void page_engine::dump(const std::function<void(const std::string&)>& line) const {
    pager::pause p(*pager_);
    std::unique_ptr<heap> committed_heap = load_committed_heap();
    const heap& h = *committed_heap;
    const types::catalog& catalog = committed_.catalog;
    std::deque<std::uint64_t> todo;
    std::set<std::uint64_t> seen;
    auto name = [](std::uint64_t address) { return "\"p:" + common::hex(address) + "\""; };
    types::word_to_json word = [&](std::uint64_t address) -> std::string {
        if (address == 0) return "null";
        std::optional<heap::chunk_info> c = h.find_chunk(address);
        if (!c) return "\"dangling " + common::hex(address) + "\"";
        if (seen.insert(c->addr).second) todo.push_back(c->addr);
        return name(address);
    };
    for (const auto& [root, e] : committed_.roots)
        line("{\"root\":" + types::json_string(root) + ",\"type\":" + types::json_string(catalog.at(e.type).name) +
             ",\"id\":" + word(e.address) + "}");
    std::vector<std::byte> bytes;
    storage::read_failure why;
    while (!todo.empty()) {
        std::uint64_t address = todo.front();
        todo.pop_front();
        heap::chunk_info c = *h.find_chunk(address);
        if (c.type >= catalog.size() || catalog.at(c.type).size == 0) continue;
        std::uint64_t first = c.addr / storage::page_size, last = (c.addr + c.bytes - 1) / storage::page_size;
        bytes.resize((last - first + 1) * storage::page_size);
        for (std::uint64_t pg = first; pg <= last; ++pg)
            if (!storage_->read_committed_page_nothrow(pg, bytes.data() + (pg - first) * storage::page_size, &why))
                throw error(why.code, why.message);
        const types::layout& l = catalog.at(c.type);
        std::uint64_t count = c.large ? c.elem_count : c.bytes / l.size;  // a small chunk's spare bytes may add one
        line("{\"id\":" + name(c.addr) + ",\"type\":" + types::json_string(l.name) + ",\"count\":" +
             std::to_string(count) + ",\"value\":" +
             types::object_json(catalog, c.type, count, bytes.data() + c.addr % storage::page_size, word) + "}");
    }
}

// Committed state only: pages are read from the storage, not from memory.
std::vector<std::string> page_engine::check() const {
    pager::pause p(*pager_);
    std::vector<std::string> findings = storage_->check();
    std::unique_ptr<heap> committed_heap = load_committed_heap();  // not the live one: uncommitted changes are not findings
    const heap& h = *committed_heap;
    for (const auto& f : h.audit()) findings.push_back(path() + ": heap: " + f);
    for (const auto& f : committed_.catalog.check()) findings.push_back(path() + ": " + f);
    for (const auto& f : pager_->check_invariants()) findings.push_back(path() + ": " + f);
    for (const auto& f : blob_findings(committed_, h, *storage_)) findings.push_back(path() + ": " + f);
    check_objects(h, path() + ": ", findings);
    return findings;
}

// M2 for every root, S1, Z1 and E1 for every committed data page (a page
// the storage cannot read is its check's finding), each finding after `prefix`.
void page_engine::check_objects(const heap& h, const std::string& prefix, std::vector<std::string>& findings) const {
    for (const auto& [name, e] : committed_.roots)
        if (std::string broken = root_finding(h, committed_.catalog, name, e); !broken.empty())
            findings.push_back(prefix + broken);
    std::vector<std::byte> page(storage::page_size);
    storage::read_failure why;
    for (std::uint64_t p = 0; p < h.page_count() && p < storage_->page_count(); ++p) {
        const heap::page_desc& d = *h.describe(p);
        if (!d.is_data()) continue;
        check_page_shape(d, p, committed_.catalog, prefix, findings);
        if (!storage_->read_committed_page_nothrow(p, page.data(), &why, true)) continue;
        check_pointers(h, pager_->layout_of_page(h, p), p, page.data(), prefix, findings);
        check_free_bytes(h, p, page.data(), prefix, findings);
    }
}

// Compaction and migration copy what the data pages hold as their
// descriptors say, and forward the roots: a page breaking S1, Z1 or E1, or
// a root breaking M2, was carried with its damage or had objects dropped,
// and the result checked clean (guarantees.md,
// "Bad input gets a clear error").
void page_engine::refuse_damaged_objects(const std::string& what) const {
    pager::pause p(*pager_);
    std::vector<std::string> findings;
    check_objects(*load_committed_heap(), "", findings);
    if (findings.empty()) return;
    throw error(errc::corrupt, what + " of " + path() + " refused: " + findings.front() +
                                   ": the store is damaged (steppe check lists every finding, " +
                                   std::to_string(findings.size()) + " here). Nothing was changed");
}

}  // namespace steppe::page

namespace steppe {
std::unique_ptr<engine> open_page_engine(const std::string& path, const open_options& options, storage::env* io,
                                         bool match_program) {
    return std::make_unique<page::page_engine>(path, options, io, match_program);
}
}  // namespace steppe
