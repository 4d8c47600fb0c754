// The object engine (object_engine.hpp): open, close, the store slots, roots,
// make, stats, check, and the public steppe::objects::store over it.
#include "objects/object_engine.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <sstream>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <pthread.h>
#include <unistd.h>

#include "common/forsaken.hpp"
#include "common/memory_limit.hpp"
#include "common/sparse_mapping.hpp"
#include "common/system_error.hpp"
#include "engine/storage_options.hpp"
#include "storage/backup.hpp"
#include "storage/blob.hpp"

namespace steppe::objects {

const char* to_string(detection d) noexcept {
    switch (d) {
    case detection::id: return "id";
    case detection::id_self_heal: return "id_self_heal";
    case detection::fault_block: return "fault_block";
    case detection::page_fault: return "page_fault";
    }
    return "unknown";
}
const char* to_string(barrier b) noexcept {
    switch (b) {
    case barrier::object_flag: return "object_flag";
    case barrier::remembered_set: return "remembered_set";
    case barrier::cards: return "cards";
    case barrier::pages: return "pages";
    }
    return "unknown";
}
const char* to_string(placement p) noexcept {
    switch (p) {
    case placement::copy: return "copy";
    case placement::in_place: return "in_place";
    case placement::in_store: return "in_store";
    }
    return "unknown";
}
const char* to_string(swizzling s) noexcept {
    switch (s) {
    case swizzling::scheme_default: return "scheme_default";
    case swizzling::lazy: return "lazy";
    case swizzling::opportunistic: return "opportunistic";
    case swizzling::eager: return "eager";
    }
    return "unknown";
}
const char* to_string(conversion c) noexcept {
    switch (c) {
    case conversion::lazy: return "lazy";
    case conversion::eager: return "eager";
    }
    return "unknown";
}
const char* to_string(granularity g) noexcept {
    switch (g) {
    case granularity::object: return "object";
    case granularity::logical_segment: return "logical_segment";
    case granularity::physical_segment: return "physical_segment";
    }
    return "unknown";
}

std::string to_string(const stats& s) {
    std::string out = "scheme " + s.scheme + "\n";
    auto line = [&](const char* name, std::uint64_t v) { out += std::string(name) + " " + std::to_string(v) + "\n"; };
    line("segment_faults", s.segment_faults);
    line("objects_faulted", s.objects_faulted);
    line("fault_blocks", s.fault_blocks);
    line("traps", s.traps);
    line("segment_buffer_hits", s.segment_buffer_hits);
    line("refs_repointed", s.refs_repointed);
    line("refs_swizzled", s.refs_swizzled);
    line("evicted_objects", s.evicted_objects);
    line("rescued_victims", s.rescued_victims);
    line("commits", s.commits);
    line("new_objects", s.new_objects);
    line("unreached_objects", s.unreached_objects);
    line("objects_written", s.objects_written);
    line("segments_written", s.segments_written);
    line("pages_committed", s.pages_committed);
    line("bytes_logged", s.bytes_logged);
    line("syncs", s.syncs);
    line("resident_objects", s.resident_objects);
    line("heap_bytes", s.heap_bytes);
    line("resident_bytes", s.resident_bytes);
    line("resident_budget", s.resident_budget);
    out += "resident_budget_source " + s.resident_budget_source + "\n";
    line("store_pages", s.store_pages);
    return out;
}

namespace detail {

barrier_state open_stores[256];

namespace {
// What a slot without a store looks up in: one entry no tagged word matches,
// so a use goes to resolve_id, which says the store is closed.
rot_cache_entry no_cache[1];

[[maybe_unused]] const bool slots_start_closed = [] {
    for (barrier_state& s : open_stores) s = {0, nullptr, 0, no_cache, 0, 0, 0};
    return true;
}();

// Slot 0 is never used, so a zeroed header never names a store.
engine_handle* engines[256];
// Each slot's generation (7 bits), changed when its store closes: a tagged
// id carries it, so an id kept past close() is not read as one of the store
// that takes the slot next. Slots are taken in turn, so a slot comes back
// only after the other 254, and an id is mistaken only after 128 such turns.
std::uint8_t generations[256];
unsigned last_slot = 0;
std::mutex engines_lock;

// Fork handlers: the open stores' threads are held while the fork happens
// (engine::hold_threads_for_fork), as store.cpp does for the page engine's;
// the child leaves its parent's stores alone, so only the parent releases.
void hold_open_stores() noexcept {
    engines_lock.lock();
    for (engine_handle* e : engines)
        if (e) e->hold_threads_for_fork();
}
void release_open_stores() noexcept {
    for (engine_handle* e : engines)
        if (e) e->release_threads_after_fork();
    engines_lock.unlock();
}
void unlock_in_child() noexcept { engines_lock.unlock(); }

unsigned take_slot(engine_handle* e) {
    static std::once_flag once;
    std::call_once(once, [] {
        if (int err = ::pthread_atfork(hold_open_stores, release_open_stores, unlock_in_child))
            common::throw_system_error("pthread_atfork", err, "-", "registering the object engine's fork handler");
    });
    std::lock_guard<std::mutex> hold(engines_lock);
    for (unsigned turn = 0; turn < 255; ++turn) {
        unsigned s = (last_slot + turn) % 255 + 1;
        if (engines[s]) continue;
        engines[s] = e;
        last_slot = s;
        return s;
    }
    throw error(errc::invalid_argument, "object stores: 255 are open in this process already; close one first");
}

void give_back_slot(unsigned slot) {
    std::lock_guard<std::mutex> hold(engines_lock);
    engines[slot] = nullptr;
    generations[slot] = (generations[slot] + 1) & 0x7F;
    open_stores[slot] = {0, nullptr, 0, no_cache, 0, 0, 0};
}

bool is_zero(const storage::meta_bytes& raw) {
    return std::all_of(raw.begin(), raw.end(), [](std::byte b) { return b == std::byte{0}; });
}

// options::fetch, place and convert hold one of their enumerators: another
// value (a cast, a number read from a configuration) opened and worked as
// whatever the engine's comparisons made of it. Checked before anything is
// opened, as segment_objects is (swizzle, card_bytes and eviction are
// checked where they are used).
void refuse_unknown_modes(const options& o, const std::string& path) {
    const auto refuse = [&](const char* option, auto value, const char* names) {
        throw error(errc::invalid_argument, "object store " + path + ": " + option + " " +
                                                std::to_string(static_cast<unsigned>(value)) + " is none of " + names);
    };
    if (o.fetch < granularity::object || o.fetch > granularity::physical_segment)
        refuse("fetch", o.fetch, "object, logical_segment, physical_segment");
    if (o.place < placement::copy || o.place > placement::in_store)
        refuse("place", o.place, "copy, in_place, in_store");
    if (o.convert < conversion::lazy || o.convert > conversion::eager) refuse("convert", o.convert, "lazy, eager");
}

const char* scheme_flags(scheme s) {
    static thread_local char text[96];
    std::snprintf(text, sizeof text, "-DSTEPPE_OBJECTS_DETECTION=%s -DSTEPPE_OBJECTS_BARRIER=%s",
                  to_string(s.detect), to_string(s.write));
    return text;
}
}  // namespace

engine_handle& engine_at(unsigned slot) {
    engine_handle* e = slot < 256 ? engines[slot] : nullptr;
    if (!e) throw error(errc::invalid_argument, "object store: a reference to an object of a store that is closed");
    return *e;
}

engine_handle& engine_of_tagged(std::uint64_t word) {
    const unsigned slot = static_cast<unsigned>(word >> 8) & 0xFF;
    engine_handle* e = engines[slot];
    if (!e || ((word >> 1) & 0x7F) != generations[slot])
        throw error(errc::invalid_argument, "object store: a reference followed after its store closed");
    return *e;
}

engine_handle::engine_handle(const std::string& path, const options& o, std::optional<scheme> compiled,
                             storage::env* io, bool match_program, const storage::storage* after)
    : options_(o), io_(io) {
    if (o.segment_objects < 1 || o.segment_objects > format::max_segment_objects)
        throw error(errc::invalid_argument, "object store " + path + ": segment_objects " +
                                                std::to_string(o.segment_objects) + " is not within 1..255");
    refuse_unknown_modes(o, path);
    common::refuse_mapping_lock(path);  // before the sparse tables: they would all become resident
    storage::options so = storage_options(o, io);
    so.after = after;
    storage_ = storage::storage::open(path, so);
    try {
        load_and_map(compiled, match_program);
    } catch (const std::exception&) {  // not a test's simulated crash: a process that dies cleans nothing up
        storage_->remove_if_made_by_open();
        throw;
    }
}

// The committed state, its heap and the roots, after the storage's open.
void engine_handle::load_and_map(std::optional<scheme> compiled, bool match_program) {
    const options& o = options_;
    budget_ = o.resident_budget;
    budget_source_ = "option";
    if (budget_ == 0) {
        // A fifth, where the page engine takes half: objects leave only at
        // safe points, and second chance keeps up to twice the budget, so
        // what a program touches between two safe points, twice the budget
        // and the table (~33 bytes an object) must fit together. Half was
        // killed in a 64 MiB cgroup (docs/objects.md, "What the budget
        // bounds"; bench/micro/objects_walk_bench.cpp).
        common::memory_limit m = common::available_memory();
        budget_ = m.available / 5;
        budget_source_ = "a fifth of " + std::to_string(m.available >> 20) + " MiB free under " + m.source;
    }
    load_committed(compiled, match_program);
    in_store_next_page_ = meta_.next_page;
    slot_ = take_slot(this);
    generation_ = generations[slot_];
    // A cache of one entry that never matches (a tagged word is odd) for fault_block.
    rot_cache_.assign(scheme_.detect == detection::fault_block ? 1 : rot_cache_entries, rot_cache_entry{0, nullptr});
    open_stores[slot_] = {heap_->base(), heap_->cards(),         heap_->card_shift(),
                          rot_cache_.data(), rot_cache_.size() - 1, blocks_ ? blocks_->mirror() : 0,
                          heap_->limit()};
    try {
        for (const auto& [name, r] : committed_roots_)
            roots_[name] = {r.type, root_word(name, r.type, r.address)};
    } catch (...) {
        give_back_slot(slot_);
        throw;
    }
}

engine_handle::~engine_handle() {
    try {
        close();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "steppe: closing object store: %s\n", e.what());
    }
}

void engine_handle::load_committed(std::optional<scheme> compiled, bool match_program) {
    const std::string& path = storage_->path();
    const auto& raw = storage_->meta();
    if (is_zero(raw)) {
        storage::refuse_zero_meta_after_commits(*storage_);
        scheme s = compiled.value_or(scheme{detection::fault_block, barrier::cards});
        std::memcpy(meta_.magic, format::engine_magic, sizeof meta_.magic);
        meta_.detection = static_cast<std::uint8_t>(s.detect);
        meta_.barrier = static_cast<std::uint8_t>(s.write);
        meta_.segment_objects = options_.segment_objects;
        meta_.next_page = std::max<storage::page_no>(storage_->page_count(), 1);
        scheme_ = s;
        make_heap();
        return;
    }
    std::memcpy(&meta_, raw.data(), sizeof meta_);
    if (std::memcmp(meta_.magic, format::engine_magic, sizeof meta_.magic) != 0) {
        bool page_engine = std::memcmp(meta_.magic, "stpengn", 7) == 0;
        throw error(page_engine ? errc::unsupported : errc::version,
                    path + (page_engine ? " was made by the page engine; open it with steppe::store::open"
                                        : " holds no object-engine data of a version this build reads"));
    }
    scheme_ = {static_cast<detection>(meta_.detection), static_cast<barrier>(meta_.barrier)};
    if (meta_.detection < 1 || meta_.detection > 4 || meta_.barrier < 1 || meta_.barrier > 4)
        throw error(errc::corrupt, path + ": the object engine's meta names no scheme this build knows (detection " +
                                       std::to_string(meta_.detection) + ", barrier " +
                                       std::to_string(meta_.barrier) + "); run `steppe check " + path + "`");
    if (compiled && *compiled != scheme_)
        throw error(errc::unsupported, path + " was made with scheme " + to_string(scheme_.detect) + " + " +
                                           to_string(scheme_.write) + ", this program is built for " +
                                           to_string(compiled->detect) + " + " + to_string(compiled->write) +
                                           "; build it with " + scheme_flags(scheme_));
    // A new store starts at next_page max(page_count, 1) (above); a commit
    // with no page to write (no object, no root yet) keeps it over 0 pages.
    if (meta_.segment_objects < 1 || meta_.segment_objects > format::max_segment_objects ||
        meta_.next_page < 1 || meta_.next_page > std::max<storage::page_no>(storage_->page_count(), 1))
        throw error(errc::corrupt, path + ": the object engine's meta is damaged (segment capacity " +
                                       std::to_string(meta_.segment_objects) + ", next page " +
                                       std::to_string(meta_.next_page) + " of " +
                                       std::to_string(storage_->page_count()) + "); run `steppe check " + path + "`");
    make_heap();
    if (meta_.catalog.pages)
        catalog_ = types::catalog::decode(
            storage::read_blob(*storage_, meta_.catalog, format::catalog_owner, "type catalog", catalog_pages_));
    if (match_program) catalog_.require_program_match(path);
    for (std::uint32_t t = 0; t < catalog_.size(); ++t) heap_->set_type_size(t, catalog_.at(t).size);
    if (meta_.roots.pages)
        committed_roots_ = decode_roots(
            storage::read_blob(*storage_, meta_.roots, format::roots_owner, "roots table", roots_pages_), path);
    for (const auto& [name, r] : committed_roots_)
        if (r.type >= catalog_.size())
            throw error(errc::corrupt, path + ": root '" + name + "' names type " + std::to_string(r.type) +
                                           ", which the catalog does not have");
}

namespace {
// options::swizzle for `detect`: its default resolved, or invalid_argument
// for a combination the scheme cannot do.
swizzling resolve_swizzling(detection detect, swizzling asked, const std::string& path) {
    swizzling fallback = detect == detection::id            ? swizzling::lazy
                         : detect == detection::page_fault ? swizzling::eager
                                                           : swizzling::opportunistic;
    if (asked == swizzling::scheme_default) return fallback;
    bool fits = detect == detection::id ? asked != swizzling::scheme_default
                : detect == detection::id_self_heal ? false
                                                    : asked == swizzling::opportunistic || asked == swizzling::eager;
    if (!fits)
        throw error(errc::invalid_argument, "object store " + path + ": swizzling " + to_string(asked) +
                                                " does not go with detection " + to_string(detect) +
                                                " (id: lazy, opportunistic or eager; fault_block and page_fault: "
                                                "opportunistic or eager; id_self_heal: its own)");
    return asked;
}
}  // namespace

void engine_handle::make_heap() {
    swizzle_ = resolve_swizzling(scheme_.detect, options_.swizzle, storage_->path());
    check_eviction_policy();
    std::uint64_t limit = options_.heap_limit ? options_.heap_limit : std::uint64_t{64} << 30;
    heap_ = std::make_unique<object_heap>(limit, options_.card_bytes, scheme_.write == barrier::pages);
    if (scheme_.detect == detection::page_fault) {
        auto resolve = [](void* engine, header* block) {
            return static_cast<engine_handle*>(engine)->fault_in(block->oid());
        };
        blocks_ = std::make_unique<protected_blocks>(heap_->base(), limit, resolve, this, storage_->path());
    }
}

void engine_handle::close() {
    if (!storage_) return;
    give_back_slot(slot_);  // first: the fork handlers look at the store no more
    if (::getpid() != opener_) return forsake_in_child();
    std::unique_ptr<storage::storage> files = std::move(storage_);
    // References the program kept must not read this store's memory from now
    // on, nor (once it is reused) another store's: the heap and the mirror
    // become closed ranges.
    blocks_.reset();
    heap_->retire(files->path());
    if (!options_.read_only && options_.checkpoint_on_close) storage::checkpoint_at_close(*files);
}

// A forked child's close (or destructor) leaves the parent's store alone:
// the storage handle shares the reader's slot, the locks and a PostgreSQL
// connection with the parent, so it is never destroyed, nor is the trap
// service, whose thread the child does not have (its traps end the child
// before they read the heap: protected_blocks::on_trap). The heap is the
// child's own memory: it retires, so references kept say the store is closed.
void engine_handle::forsake_in_child() {
    heap_->retire(storage_->path());
    common::forsake(storage_);
    common::forsake(blocks_);
}

void engine_handle::hold_threads_for_fork() noexcept {
    if (blocks_) blocks_->hold_for_fork();
    storage_->hold_threads_for_fork();
}

void engine_handle::release_threads_after_fork() noexcept {
    storage_->release_threads_after_fork();
    if (blocks_) blocks_->release_after_fork();
}

void engine_handle::clear_rot_cache() noexcept {
    std::fill(rot_cache_.begin(), rot_cache_.end(), rot_cache_entry{0, nullptr});
}

// The calls that write the store (commit, checkpoint) refuse in a forked
// child: its commit would land in the parent's store behind its back (the
// flock is shared across fork). What a child does in its own memory is its
// own; getpid() is a system call, so make and poke do not pay it.
void engine_handle::ensure_not_forked(const char* call) const {
    if (::getpid() != opener_)
        throw error(errc::invalid_argument, storage_->path() + ": " + call + " in process " +
                                                std::to_string(::getpid()) +
                                                ", a child forked from the process that opened the store (" +
                                                std::to_string(opener_) +
                                                "), which can neither change the store nor move it to another "
                                                "commit (fork before opening the store, or exec)");
}

void engine_handle::ensure_writable(const char* call) const {
    if (!storage_) throw error(errc::invalid_argument, std::string("object store: ") + call + " on a closed store");
    if (options_.read_only)
        throw error(errc::invalid_argument, storage_->path() + ": " + call + " on a store opened read-only");

}

// The catalog index of the program's `layout`, added if new; type_mismatch
// if the store's entry differs, or that of a type its references lead to.
types::catalog::index engine_handle::type_index(const types::layout& layout) {
    if (auto known = known_layouts_.find(&layout); known != known_layouts_.end()) return known->second;
    refuse_other_references(layout);
    std::uint64_t before = catalog_.changes();
    types::catalog::index i = catalog_.find_or_add(layout);
    catalog_moved(before);
    check_targets(layout);
    known_layouts_.emplace(&layout, i);
    return i;
}

// After find_or_add: new entries (a type and its nested types) get their
// size in the heap, and the catalog is written at the next commit.
void engine_handle::catalog_moved(std::uint64_t changes_before) {
    if (catalog_.changes() == changes_before) return;
    catalog_dirty_ = true;
    for (std::uint32_t t = 0; t < catalog_.size(); ++t) heap_->set_type_size(t, catalog_.at(t).size);
}

// T1: every type a reference can lead to from `program`, directly or
// through other references, is read as the program declares it: each one
// the catalog holds has the program's layout. (Types the catalog lacks have
// no objects yet; make adds them through type_index.)
void engine_handle::check_targets(const types::layout& program) {
    std::vector<std::pair<const types::layout*, std::string>> todo{{&program, program.name}};
    std::set<const types::layout*> seen{&program};
    while (!todo.empty()) {
        auto [l, path] = todo.back();
        todo.pop_back();
        for (std::size_t r = 0; r < l->ref_targets.size(); ++r) {
            const types::layout& target = l->ref_targets[r].program.get();
            if (!seen.insert(&target).second) continue;
            std::string via = path + " -> " + target.name;
            if (!catalog_.find(target.name)) continue;
            std::uint64_t before = catalog_.changes();
            try {
                catalog_.find_or_add(target);  // a version 2 entry learns its targets
            } catch (const error& e) {
                throw error(errc::type_mismatch, storage_->path() + ": " + e.what() + " (reached by " + via + ")");
            }
            catalog_moved(before);
            todo.push_back({&target, via});
        }
    }
}

std::uint64_t engine_handle::object_bytes(std::uint32_t type, std::uint64_t count) const {
    return std::uint64_t{catalog_.at(type).size} * count;
}

void* engine_handle::make(const types::layout& layout, std::size_t count) {
    ensure_writable("make");
    not_in_store("make");
    types::catalog::index type = checked_type(layout, count);
    header* h = heap_->allocate(object_bytes(type, count));
    // Under id the program holds this object's address (no check can catch
    // its eviction); under fault_block the proxy bit would.
    h->word = std::uint64_t{slot_} << 8 | (scheme_.detect == detection::id ? header::pinned : 0);
    h->type = type;
    h->count = static_cast<std::uint32_t>(count);
    ++made_since_commit_;
    return h + 1;
}

void engine_handle::unmake(void* body) {
    heap_->release(header_of(body), 0);
    --made_since_commit_;
}

types::catalog::index engine_handle::checked_type(const types::layout& layout, std::size_t count) {
    auto refuse = [&](const std::string& why) {
        throw error(errc::invalid_argument, "object store: type " + layout.name + ": " + why);
    };
    if (!layout.pointers.empty())
        refuse("holds a raw pointer at offset " + std::to_string(layout.pointers[0]) +
               "; the object engine stores references (steppe::objects::ref<T>)");
    if (!layout.vptrs.empty()) refuse("is polymorphic; the object engine stores no vtable pointers");
    if (layout.align > format::object_alignment) refuse("is aligned to more than 16 bytes");
    if (count == 0 || count > UINT32_MAX) refuse("an array of " + std::to_string(count) + " elements");
    return type_index(layout);
}

void engine_handle::destroy(void*) {
    throw error(errc::invalid_argument,
                "object store: objects are not destroyed one by one; what no root reaches at a commit is not kept");
}

std::uint64_t engine_handle::persistent_address(const void* p) const {
    if (!holds(p)) return 0;
    return header_of(p)->oid();
}

void* engine_handle::find_root(std::string_view name, const types::layout& layout) {
    if (!storage_) throw error(errc::invalid_argument, "object store: find_root on a closed store");
    not_in_store("find_root");
    auto it = roots_.find(name);
    if (it == roots_.end() || it->second.word == 0) return nullptr;
    const types::layout& stored = catalog_.at(it->second.type);
    if (stored.name != layout.name)
        throw error(errc::type_mismatch, storage_->path() + ": root '" + std::string(name) + "' holds a " +
                                             stored.name + ", not a " + layout.name);
    type_index(layout);  // type_mismatch if the program's layout differs from the store's
    void* body = follow(it->second.word);
    if (scheme_.detect == detection::id) header_of(body)->word |= header::pinned;  // the program gets its address
    return body;
}

void engine_handle::set_root(std::string_view name, const types::layout& layout, void* object) {
    ensure_writable("set_root");
    not_in_store("set_root");
    types::catalog::index type = type_index(layout);
    if (object) {
        if (!holds(object))
            throw error(errc::invalid_argument, "object store: set_root('" + std::string(name) +
                                                    "'): the object was not made by this store");
        const header* h = header_of(object);
        if (h->type != type || h->count != 1)
            throw error(errc::type_mismatch, "object store: set_root('" + std::string(name) + "'): the object is a " +
                                                 catalog_.at(h->type).name + ", not a " + layout.name);
    }
    if (object && scheme_.detect == detection::id) header_of(object)->word |= header::pinned;  // a direct word
    roots_[std::string(name)] = {type, reinterpret_cast<std::uintptr_t>(object)};
    roots_dirty_ = true;
}

bool engine_handle::remove_root(std::string_view name) {
    ensure_writable("remove_root");
    auto it = roots_.find(name);
    if (it == roots_.end()) return false;
    roots_.erase(it);
    roots_dirty_ = true;
    return true;
}

std::vector<steppe::root_info> engine_handle::roots() const {
    std::vector<steppe::root_info> out;
    for (const auto& [name, r] : roots_) out.push_back({name, catalog_.at(r.type).name});
    return out;
}

void engine_handle::backup(const std::string& dest) {
    if (!storage_) throw error(errc::invalid_argument, "object store: backup of a closed store");
    storage::backup_from(*storage_, dest);
}

void engine_handle::checkpoint() {
    ensure_writable("checkpoint");
    ensure_not_forked("checkpoint");
    storage_->checkpoint();
}

objects::stats engine_handle::object_stats() const {
    objects::stats s = stats_;
    s.traps = blocks_ ? blocks_->traps() : 0;
    std::ostringstream scheme;  // (GCC 12 -O3 sees a false -Wrestrict in one long sum of strings)
    scheme << to_string(scheme_.detect) << " + " << to_string(scheme_.write);
    if (scheme_.write == barrier::cards) scheme << '-' << (1u << heap_->card_shift());
    if (scheme_.write == barrier::pages) scheme << " (" << heap_->write_tracking() << ')';
    scheme << ", " << to_string(options_.fetch) << ", " << to_string(options_.place) << ", swizzling "
           << to_string(swizzle_) << ", conversion " << to_string(options_.convert);
    s.scheme = scheme.str();
    s.resident_objects = rot_.size();
    s.heap_bytes = heap_->bytes_used();
    s.resident_bytes = options_.place == placement::in_store ? buffered_bytes_ : resident_bytes();
    s.resident_budget = budget_;
    s.resident_budget_source = budget_source_;
    if (storage_) {
        s.bytes_logged = storage_->counters().bytes_written;
        s.syncs = storage_->counters().syncs;
        s.store_pages = storage_->page_count();
    }
    return s;
}

store_stats engine_handle::stats() const {
    objects::stats o = object_stats();
    store_stats s;
    s.backend = "objects (" + o.scheme + ")";
    s.write_tracking = to_string(scheme_.write);
    s.faults = o.segment_faults;
    s.pointers_swizzled = o.refs_swizzled;
    s.commits = o.commits;
    s.pages_committed = o.pages_committed;
    s.bytes_logged = o.bytes_logged;
    s.syncs = o.syncs;
    if (storage_) copy_storage_counters(*storage_, s);
    s.store_pages = o.store_pages;
    s.resident_pages = (o.heap_bytes + storage::page_size - 1) / storage::page_size;
    s.resident_budget_pages = o.resident_budget / storage::page_size;
    s.resident_budget_source = o.resident_budget_source;
    return s;
}

std::vector<std::string> engine_handle::check_memory() const {
    std::vector<std::string> findings = heap_->check();
    if (!findings.empty()) return findings;
    findings = in_store_check();
    std::size_t indexed = 0;
    heap_->for_each([&](header* h) {
        std::uint64_t oid = h->oid();
        bool indirect_block = (h->word & header::proxy) && (h->word & header::indirect);
        if (oid == 0 || indirect_block) return;
        ++indexed;
        auto it = rot_.find(oid);
        if (it == rot_.end() || it->second != h)
            findings.push_back("object engine: R1: oid " + std::to_string(oid) +
                               " has a header in the heap that the resident object table does not map to");
    });
    if (indexed != rot_.size())
        findings.push_back("object engine: R1: the resident object table holds " + std::to_string(rot_.size()) +
                           " oids, the heap " + std::to_string(indexed));
    for (const auto& [oid, h] : rot_)
        if ((h->word & header::victim) && (h->word & (header::dirty | header::pinned)))
            findings.push_back("object engine: R3: victim " + std::to_string(oid) + " is dirty or pinned");
    for (const auto& [name, r] : roots_) {
        bool tagged = r.word & 1;
        if (r.word && !tagged && options_.place != placement::in_store && !heap_->contains(header_at(r.word)))
            findings.push_back("object engine: R2: root '" + name + "' points outside the heap");
    }
    return findings;
}

// The new snapshot is opened before the old one closes, so a failed open
// leaves the store as it was (two read-only opens of one store may overlap);
// its storage starts from this one's (the log read is not read again).
std::unique_ptr<engine_handle> engine_handle::reopened() const {
    if (!storage_) throw error(errc::invalid_argument, "object store: refresh on a closed store");
    ensure_not_forked("refresh");  // its close would be the parent's snapshot's
    if (!options_.read_only)
        throw error(errc::invalid_argument, "refresh: object store " + path() +
                                                " is open for writing and always sees its newest commit; refresh is "
                                                "for read-only stores");
    return std::make_unique<engine_handle>(path(), options_, scheme_, io_, true, storage_.get());
}

}  // namespace detail

// ---- the public store --------------------------------------------------------

store store::open(const std::string& path, const options& o, scheme compiled) {
    return store(std::make_unique<detail::engine_handle>(path, o, compiled));
}
store::store(std::unique_ptr<detail::engine_handle> engine) : engine_(std::move(engine)) {}
store::store(store&&) noexcept = default;
store& store::operator=(store&&) noexcept = default;
store::~store() = default;

detail::engine_handle& store::engine(const char* call) const {
    if (!engine_)
        throw error(errc::invalid_argument, std::string("object store: ") + call +
                                                " on a closed store (moved from): call it on the store it was moved "
                                                "to");
    return *engine_;
}
void store::unmake(void* body) { engine_->unmake(body); }
void store::uncreate(std::uint64_t oid) noexcept { engine_->uncreate(oid); }

void store::close() {
    if (engine_) engine_->close();
}
bool store::remove_root(std::string_view name) { return engine("remove_root").remove_root(name); }
std::vector<root_info> store::roots() const {
    std::vector<root_info> out;
    for (auto& r : engine("roots").roots()) out.push_back({r.name, r.type});
    return out;
}
void store::commit() { engine("commit").commit(); }
void store::rollback() { engine("rollback").rollback(); }
void store::checkpoint() { engine("checkpoint").checkpoint(); }
void store::backup(const std::string& dest) { engine("backup").backup(dest); }
void store::refresh() {
    std::unique_ptr<detail::engine_handle> next = engine("refresh").reopened();
    std::swap(engine_, next);
    next->close();
}
bool store::wait_for_commit(std::chrono::milliseconds timeout) {
    return engine("wait_for_commit").wait_for_commit(timeout);
}
objects::stats store::stats() const { return engine("stats").object_stats(); }
std::vector<std::string> store::check() const { return engine("check").check(); }
const std::string& store::path() const { return engine("path").path(); }
const std::string& store::salvage_report() const { return engine("salvage_report").salvage_report(); }
void* store::allocate(const types::layout& layout, std::size_t count) {
    return engine("make").make(layout, count);
}
std::uint64_t store::stored_root_raw(std::string_view name, const types::layout& layout) {
    return engine("find_stored_root").stored_root(name, layout);
}
void store::set_stored_root_raw(std::string_view name, const types::layout& layout, std::uint64_t oid) {
    engine("set_stored_root").set_stored_root(name, layout, oid);
}
void* store::create_raw(const types::layout& layout, std::size_t count, std::uint64_t& oid) {
    return engine("create").create_stored(layout, count, oid);
}
void* store::locate_raw(std::uint64_t oid, const types::layout& element, bool array, bool write) {
    return engine("peek or poke").locate(oid, element, array, write);
}
void store::read_raw(std::uint64_t oid, const types::layout& element, bool array, std::size_t index, void* out) {
    engine("read or write").access(oid, element, array, index, out, nullptr);
}
void store::write_raw(std::uint64_t oid, const types::layout& element, bool array, std::size_t index,
                      const void* in) {
    engine("read or write").access(oid, element, array, index, nullptr, in);
}
const void* store::find_root_raw(std::string_view name, const types::layout& layout) {
    return engine("find_root").find_root(name, layout);
}
void store::set_root_raw(std::string_view name, const types::layout& layout, const void* body) {
    engine("set_root").set_root(name, layout, const_cast<void*>(body));
}

}  // namespace steppe::objects

namespace steppe {
std::unique_ptr<engine> open_object_engine(const std::string& path, const open_options& options, storage::env* io,
                                           bool match_program) {
    objects::options o;
    o.create = options.create;
    o.read_only = options.read_only;
    o.durable = options.durable;
    o.checkpoint_on_close = options.checkpoint_on_close;
    o.salvage_damaged_log = options.salvage_damaged_log;
    o.log_diffs = options.log_diffs;
    o.resident_budget = options.resident_budget;
    return std::make_unique<objects::detail::engine_handle>(path, o, std::nullopt, io, match_program);
}
}  // namespace steppe
