// The object engine behind the engine interface (engine/engine.hpp) and
// steppe::objects::store: the storage manager below, the object heap, the
// resident object table (ROT), the type catalog and the roots.
//
// Where things are done:
//   object_engine.cpp  open, close, roots, make, stats; the public store
//   check.cpp          check, types: every segment, reference and root
//   fault.cpp          the residency checks' slow paths; reading a segment,
//                      copying its objects into the heap and swizzling them
//   commit.cpp         persistence by reachability: gather, cluster, write;
//                      rollback
//   evict.cpp          the resident budget: the eviction policies at safe points
//
// Object states (each object in the heap is in one):
//   transient     made since the last commit, oid 0, not in the ROT
//   persistent    oid != 0, in the ROT, its committed bytes in its segment
//   fault block   a header standing for an oid not (or not yet) in memory
//                 (detection::fault_block and page_fault); in the ROT until its object
//                 comes in, then `indirect` with the object's address
//   victim        persistent, marked by enforce_budget; `proxy` is set so its
//                 next use takes the slow path (rescue)
// Transitions: make -> transient; commit reaching it -> persistent (cluster);
// fault (materialize) -> persistent; fault_block_for -> fault block;
// materialize of its oid -> fault block indirect; enforce_budget -> victim;
// rescue: victim -> persistent; evict: victim -> fault block (fault_block:
// in place, the rest of its memory freed) or gone (id: all of it freed).
//
// Invariants (check_memory()):
//  R1 the ROT maps each oid to the one header in the heap with that oid:
//     a persistent object (maybe a victim), or a fault block that is not indirect;
//  R3 no victim is dirty or pinned;
//  R2 a live root's word names a persistent object, a transient one, or a
//     fault block (never anything outside the heap);
//  plus the heap's H1-H3 (object_heap.hpp).
#pragma once

#include <unistd.h>

#include <steppe/objects.hpp>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.hpp"
#include "engine/migration.hpp"
#include "engine/roots.hpp"
#include "objects/object_format.hpp"
#include "objects/object_heap.hpp"
#include "objects/protected_blocks.hpp"
#include "storage/storage.hpp"
#include "types/types.hpp"

namespace steppe::objects::detail {

// check.cpp: "" if reference `r` of `l` may name an object of catalog type
// `type` of `types` (check's O2, compaction), else what the object is.
std::string wrong_target(const types::catalog& types, const types::layout& l, std::size_t r, std::uint32_t type);

class engine_handle final : public steppe::engine {
public:
    // `compiled`: the program's scheme; nullopt for tools that only inspect.
    // `io`: the storage manager's file system (nullptr: the real one).
    // `match_program` false: the stored types are not compared with the
    // program's (steppe::migrate, which changes them).
    // `after`: the handle a refresh replaces (storage::options::after).
    engine_handle(const std::string& path, const options& o, std::optional<scheme> compiled,
                  storage::env* io = nullptr, bool match_program = true, const storage::storage* after = nullptr);
    ~engine_handle() override;

    void close() override;
    // The trap service thread (page_fault) and the storage's threads (a
    // store in PostgreSQL: its fetch thread), for this file's fork handlers.
    void hold_threads_for_fork() noexcept override;
    void release_threads_after_fork() noexcept override;
    bool holds(const void* p) const noexcept override { return heap_ && heap_->contains(p); }
    std::uint64_t persistent_address(const void* p) const override;
    void* make(const types::layout& layout, std::size_t count) override;
    // The object make returned just now goes back: its constructor threw.
    void unmake(void* body);
    void destroy(void* object) override;
    void note_vtable(const void*) override {}
    void* find_root(std::string_view name, const types::layout& layout) override;
    void set_root(std::string_view name, const types::layout& layout, void* object) override;
    bool remove_root(std::string_view name) override;
    std::vector<steppe::root_info> roots() const override;
    void commit() override;
    void rollback() override;
    void checkpoint() override;
    bool wait_for_commit(std::chrono::milliseconds timeout) const override {
        return storage_->wait_for_commit(timeout);
    }
    void backup(const std::string& dest) override;
    compact_report compact(const compact_options& options) override;  // compact.cpp
    migrate_report migrate(const migration& m, const migrate_options& options) override;  // compact.cpp
    // A read-only store opened again, on the newest commit (store::refresh).
    std::unique_ptr<engine_handle> reopened() const;
    void dump(const std::function<void(const std::string&)>& line) const override;  // check.cpp
    void reuse_address_space() override {}
    store_stats stats() const override;
    std::vector<type_usage> types() const override;
    std::vector<std::string> check() const override;
    const std::string& path() const override { return storage_->path(); }
    const std::string& salvage_report() const override { return storage_->salvage_report(); }

    objects::stats object_stats() const;
    // R1, R2 and the heap's invariants, as seen between operations.
    std::vector<std::string> check_memory() const;

    // fault.cpp: the body of the object `oid`, read in if it is not resident.
    void* fault_in(std::uint64_t oid);
    void* follow(std::uint64_t word);  // a word of any form -> the object's body, faulting if needed
    void* rescue(header* victim);      // a victim used again stays
    void remember(header* h) { remembered_.push_back(h); }
    std::uint64_t oid_of_word(std::uint64_t word) const;  // 0 for a transient object
    // The id schemes' stand-in for `oid`: oid << 16 | slot << 8 | generation << 1 | 1.
    std::uint64_t tagged(std::uint64_t oid) const noexcept {
        return oid << 16 | std::uint64_t{slot_} << 8 | std::uint64_t{generation_} << 1 | 1;
    }
    // The header a reference word leads to (a fault block's in the heap for
    // a protected address, page_fault), without faulting.
    header* header_at(std::uint64_t word) const noexcept;

    // in_store.cpp: placement::in_store, objects used in their segments' buffers.
    std::uint64_t stored_root(std::string_view name, const types::layout& layout);
    void set_stored_root(std::string_view name, const types::layout& layout, std::uint64_t oid);
    void* create_stored(const types::layout& layout, std::size_t count, std::uint64_t& oid);
    // The object create_stored made just now leaves its segment (the last
    // one there): its constructor threw.
    void uncreate(std::uint64_t oid) noexcept;
    // The body of object `oid`, checked to be a `element` (an array of them
    // if `array`); `write` marks its segment written.
    void* locate(std::uint64_t oid, const types::layout& element, bool array, bool write);
    // Element `index` of the object copied to `out`, or from `in` (a write).
    void access(std::uint64_t oid, const types::layout& element, bool array, std::size_t index, void* out,
                const void* in);
    std::vector<std::string> in_store_check() const;  // S1

private:
    void forsake_in_child();  // close() in a forked child
    struct segment_view {  // a segment read and checked (read_segment)
        std::uint64_t page;
        format::segment_header head;
        std::vector<format::object_entry> entries;
        const std::byte* bytes;  // the whole segment
    };
    struct commit_plan;

    // compact.cpp: compact and migrate, the store closed at the end whatever
    // happens; `what` names the operation, `write` false is a dry run.
    compact_report rewrite(const char* what, bool write,
                           const std::function<compact_report(const storage::rewrite_target& target)>& pass);
    // The new store, written through `target` (steps 1-5 there; an empty
    // one writes nothing), with `plan` the objects of its types converted
    // (steppe::migrate).
    compact_report compact_into(const storage::rewrite_target& target, bool collect,
                                migrating::migration_plan* plan = nullptr);

    // object_engine.cpp
    void load_and_map(std::optional<scheme> compiled, bool match_program);
    void load_committed(std::optional<scheme> compiled, bool match_program);
    void make_heap();  // once the scheme is known
    void ensure_writable(const char* call) const;
    void ensure_not_forked(const char* call) const;
    types::catalog::index type_index(const types::layout& layout);
    // type_index for a new object of `count` elements, refused (invalid_argument) if the engine cannot store it.
    types::catalog::index checked_type(const types::layout& layout, std::size_t count);
    // As the scheme swizzles a reference to `oid` from a field wanting type
    // `want` (fault.cpp: it checks the type, T1).
    // `stand_in`: the word is the object's stand-in (it is not in memory).
    std::uint64_t word_for_oid(std::uint64_t oid, std::uint32_t want, std::string& wrong,
                               bool* stand_in = nullptr);
    std::uint64_t root_word(const std::string& name, std::uint32_t type, std::uint64_t oid);
    void check_targets(const types::layout& program);
    void catalog_moved(std::uint64_t changes_before);
    std::uint64_t object_bytes(std::uint32_t type, std::uint64_t count) const;

    // fault.cpp
    segment_view read_segment(std::uint64_t page, std::vector<std::byte>& buffer, const char* why) const;
    format::segment_header read_segment_header(std::uint64_t page, std::vector<std::byte>& buffer,
                                               const char* why) const;
    segment_view view_segment(std::uint64_t page, const std::byte* bytes, const char* why) const;
    error segment_damage(std::uint64_t page, const char* why, const std::string& what) const;
    bool is_blob_page(std::uint64_t page);
    const segment_view& buffered_segment(std::uint64_t page, const char* why);
    std::uint64_t bring_in(std::uint64_t page, std::vector<header*>& copied, const char* why);
    std::uint64_t bring_in_place(std::uint64_t page, std::vector<header*>& copied, const char* why);
    void read_in(std::uint64_t oid, std::vector<header*>& copied);
    void undo_fault();
    header* fault_one(std::uint64_t oid, std::vector<header*>& copied);
    void bring_in_reachable(std::vector<header*> objects);  // conversion::eager
    void note_sources();
    void eliminate(header* object, const header* block);  // swizzling::eager
    header* materialize(const segment_view& s, std::uint32_t slot);
    header* enter(header* h, std::uint64_t oid, const format::object_entry& e);
    // granularity::physical_segment reads at least this many pages (32 KiB, Mneme's unit of I/O).
    static constexpr std::uint64_t physical_segment_pages = 8;
    void swizzle(header* h);
    header* fault_block_for(std::uint64_t oid, std::uint32_t want);
    // Invariant T1 (fault.cpp): what a reference field wants its target to be.
    static constexpr std::uint32_t any_type = 0xFFFFFFFD;  // not recorded (catalog version 2)
    static constexpr std::uint32_t no_type = 0xFFFFFFFC;   // a type the catalog does not hold
    const std::vector<std::uint32_t>& ref_wants(std::uint32_t type);
    std::string type_name(std::uint32_t type) const;
    // check.cpp: O5 for the segment at `page`.
    void check_reserved_zero(std::uint64_t page, const segment_view& s, std::vector<std::string>& findings) const;
    // check.cpp: O5 for the meta, and O4 for a walk that found `objects` in `segments`.
    void check_meta(std::uint64_t objects, std::uint64_t segments, std::vector<std::string>& findings) const;
    // check.cpp: reads committed page `page` into `buffer`; whether a blob's page starts there (not a segment).
    bool blob_page_at(std::uint64_t page, std::vector<std::byte>& buffer) const;
    // f(view) for each committed segment in page order, read and checked
    // (read_segment, `why` in its errors); blob pages are passed over.
    template<class F> void for_each_segment(const char* why, F&& f) const {
        std::vector<std::byte> buffer;
        for (std::uint64_t page = 1; page < meta_.next_page;) {
            if (blob_page_at(page, buffer)) {
                ++page;
                continue;
            }
            segment_view s = read_segment(page, buffer, why);
            f(static_cast<const segment_view&>(s));
            page += s.head.pages;
        }
    }

    // in_store.cpp
    struct stored_segment {
        std::vector<std::byte> bytes;  // the segment's pages (the one being filled: its bytes so far)
        std::uint32_t objects = 0;
        bool dirty = false;  // written since the last commit (poke, write, create)
        bool fresh = false;  // made since the last commit
        std::uint64_t used = 0;
    };
    static format::object_entry stored_entry(const stored_segment& s, std::uint32_t slot);
    stored_segment& stored(std::uint64_t page);
    std::byte* locate_typed(std::uint64_t oid, std::uint32_t type, bool array, bool write);
    void trim_stored();
    void forget_last_segment() noexcept { last_segment_ = nullptr; }
    void open_creating();
    void close_creating();
    void drop_written_segments();
    void in_store_only(const char* call) const;
    void not_in_store(const char* call) const;
    // ref<T> under in_store, oid<T> elsewhere: invalid_argument naming the field.
    void refuse_other_references(const types::layout& l) const;

    // commit.cpp
    void commit_in_store();
    void commit_meta(commit_plan& plan, root_table roots, std::uint64_t objects, std::uint64_t segments);
    std::vector<header*> written_objects();
    void gather(commit_plan& plan, const std::vector<header*>& written);
    void cluster(commit_plan& plan);
    void unswizzle(const header* h, std::byte* out) const;
    std::uint64_t unswizzle_word(std::uint64_t word, const header* from, std::uint32_t offset) const;
    void write_segments(commit_plan& plan);
    void write_changed(commit_plan& plan, const std::vector<header*>& written);
    void restore(header* h);
    void forget_writes();

    // eviction (evict.cpp)
    std::uint64_t resident_bytes() const noexcept { return resident_bytes_; }
    bool can_evict() const noexcept;  // the scheme can re-point references to an object that leaves
    void check_eviction_policy() const;  // at open: invalid_argument for a policy the scheme cannot follow
    bool evictable(const header* h) const noexcept;
    void evict(header* h);
    void enforce_budget();
    void second_chance();
    void evict_at_random();

    options options_;
    storage::env* io_ = nullptr;  // the storage manager's file system (nullptr: the real one)
    pid_t opener_ = ::getpid();  // a forked child changes nothing (ensure_writable, close)
    scheme scheme_{};
    unsigned slot_ = 0;  // in open_stores
    unsigned generation_ = 0;  // the slot's when this store took it (tagged)
    std::unique_ptr<storage::storage> storage_;
    std::unique_ptr<object_heap> heap_;
    std::unique_ptr<protected_blocks> blocks_;  // page_fault only: where fault blocks' words point
    // swizzling::eager (fault.cpp): the slots swizzled to each non-resident
    // object's stand-in, as singly linked lists in sources_ (heads by oid:
    // 1 + index, 0 none); the fault under way's, noted once it holds.
    swizzling swizzle_ = swizzling::opportunistic;  // options_.swizzle, resolved for the scheme
    struct source {
        std::byte* slot;
        std::uint64_t next;
    };
    std::vector<source> sources_;
    std::unordered_map<std::uint64_t, std::uint64_t> source_heads_;
    std::vector<std::pair<std::uint64_t, std::byte*>> pending_sources_;
    format::object_meta meta_{};
    types::catalog catalog_;
    bool catalog_dirty_ = false;
    root_table committed_roots_;
    struct live_root {
        std::uint32_t type;
        std::uint64_t word;
    };
    std::map<std::string, live_root, std::less<>> roots_;
    bool roots_dirty_ = false;
    std::vector<storage::page_no> catalog_pages_, roots_pages_;
    std::unordered_map<std::uint64_t, header*> rot_;
    // Under the id schemes, the type wanted of objects referenced from
    // memory but not in it (fault blocks hold it under fault_block): T1.
    std::unordered_map<std::uint64_t, std::uint32_t> expected_type_;
    std::vector<std::vector<std::uint32_t>> ref_wants_;  // ref_wants(), by catalog index
    std::uint64_t ref_wants_at_ = ~std::uint64_t{0};     // catalog_.changes() they were built at
    // Program layouts already in the catalog and checked with their targets.
    std::unordered_map<const types::layout*, types::catalog::index> known_layouts_;
    // The fault under way: each object entered and the fault block that stood for it.
    std::vector<std::pair<header*, header*>> faulting_;
    std::vector<header*> remembered_;
    std::vector<std::byte> segment_buffer_;
    // Segments read by faults, committed images (buffered_segment), least
    // recently used first out past segment_buffer_bytes; emptied by commit.
    struct buffered {
        segment_view view;
        std::vector<std::byte> bytes;
        std::uint64_t used = 0;
    };
    std::vector<buffered> segment_buffers_;
    std::uint64_t buffer_clock_ = 0;
    static constexpr std::uint64_t segment_buffer_bytes = std::uint64_t{1} << 20;
    // placement::in_store: segment buffers by first page (clean ones leave
    // past the budget), the segment being filled (its first page; 0 none),
    // where the next new segment starts, and the last type located.
    std::unordered_map<std::uint64_t, stored_segment> in_store_;
    std::uint64_t creating_ = 0;
    std::uint64_t in_store_next_page_ = 0;
    std::uint64_t buffered_bytes_ = 0;
    std::uint64_t last_page_ = 0;  // the segment stored() gave last (nullptr: none)
    stored_segment* last_segment_ = nullptr;
    const types::layout* last_layout_ = nullptr;
    types::catalog::index last_type_ = 0;
    objects::stats stats_;
    std::uint64_t made_since_commit_ = 0;
    std::uint64_t budget_ = 0;
    std::string budget_source_;
    std::uint64_t resident_bytes_ = 0;  // heap extents of persistent objects (not fault blocks)
    std::uint64_t eviction_random_ = 0x9E3779B97F4A7C15;  // eviction_policy::random's generator state
    // The id schemes' lookup cache (barrier_state::rot_cache): emptied
    // whenever an object leaves or becomes a victim (its uses must reach the
    // table again).
    std::vector<rot_cache_entry> rot_cache_;
    static constexpr std::size_t rot_cache_entries = 1 << 16;
    void clear_rot_cache() noexcept;
};

// f(slot, offset in its element) for every reference slot of the object `h`.
template<class F> void for_each_ref(const types::layout& l, header* h, F&& f) {
    auto* body = reinterpret_cast<std::byte*>(h + 1);
    for (std::uint32_t i = 0; i < h->count; ++i)
        for (std::uint32_t offset : l.refs) f(body + std::uint64_t{i} * l.size + offset, offset);
}

// For tests: a public store over the file system `io` (fault injection).
struct store_access {
    static store open(const std::string& path, const options& o, scheme compiled, storage::env* io) {
        return store(std::make_unique<engine_handle>(path, o, compiled, io));
    }
    static engine_handle* engine(store& s) { return s.engine_.get(); }
};

// The engine of a store slot (a header's store byte), for the slow paths.
engine_handle& engine_at(unsigned slot);
// The engine a tagged id belongs to: invalid_argument if its store closed,
// even when another store has its slot now (the generation differs).
engine_handle& engine_of_tagged(std::uint64_t word);

}  // namespace steppe::objects::detail
