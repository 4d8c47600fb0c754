// steppe — ordinary C++ pointer structures, persistent.
//
//   auto store = steppe::store::open("parts.db");         // creates if absent
//   auto* list = store.root<List>("list");                 // find-or-create a named root
//   list->head = store.make<Node>(42, list->head);          // persistent allocation, raw pointers
//   store.commit();                                         // atomic and durable
//
// Objects live in the store file and fault into memory on first touch, with
// their pointers translated (swizzled) as each page arrives; once resident
// they run at memory speed. commit() writes exactly the pages written since
// the last commit, all or nothing. Closing without commit discards changes;
// a clean close copies the log's commits into the main file (checkpoint), so
// a closed store is that one file.
//
// Errors are steppe::error exceptions with a code (see error.hpp). An error
// met inside a page fault (a page failing its checksum, a failed read) cannot
// be thrown to the faulting instruction: the process ends with a message
// naming the store, the page and the cause (open_options::fatal_hook runs
// first).
//
// Address space: every object a swizzled pointer names gets a virtual range
// (two virtual pages per store page: the page and a guard), whether or not it
// is ever touched. Long runs over huge stores would exhaust it; so the store
// reuses address space (open_options::address_space_limit, reuse_address_space).
//
// Threads: any number of threads may read and write resident objects and
// fault pages in at once, and make and destroy (also through
// steppe::allocator) from several threads take turns. The root functions,
// commit, rollback, checkpoint, close and reuse_address_space must not run
// while another thread touches the store; two of them at once throw
// invalid_argument in the second.
//
// Processes: one writer per store file (whatever symlink, hard link or
// spelling of the path opens it) and any number of read-only openers beside
// it, each on a snapshot of its own (open_options::read_only, refresh); a
// second writer gets errc::locked, and so does a second open of the same
// store in one process (unless both are read-only).
//
// fork: a store belongs to the process that opened it. In a forked child
// every call on it throws invalid_argument (naming the opener), touching its
// objects ends the child with a message (exit 71; the store's memory is not
// inherited), and its destructor leaves the parent's files and locks alone.
// Fork before opening the store, or exec.
#pragma once

#include <steppe/allocator.hpp>
#include <steppe/containers.hpp>
#include <steppe/error.hpp>
#include <steppe/layout.hpp>
#include <steppe/pref.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace steppe {

enum class fault_backend {
    automatic,  // userfaultfd where the kernel allows it, else mprotect; STEPPE_FAULT_BACKEND overrides
    uffd,       // userfaultfd in SIGBUS mode
    mprotect,   // PROT_NONE + SIGSEGV: portable, limited by vm.max_map_count
};

struct open_options {
    bool create = true;     // create the store if it does not exist
    // With create: the store must not exist yet; if it does, open throws
    // errc::exists and changes nothing (the test and the creation are one
    // step under the store's lock, so of two processes racing to create it,
    // one gets exists).
    bool exclusive_create = false;
    // How long open waits for a lock another process holds (another writer,
    // or readers that keep writers out, docs/guarantees.md promise 4) before
    // it throws errc::locked. 0 = not at all. A store this process has open
    // already is refused at once: waiting would not help.
    std::chrono::milliseconds lock_timeout{0};
    // Shared with other readers and with a writer in another process: the
    // store shows the last commit as of the open (a consistent snapshot,
    // whatever the writer commits or checkpoints meanwhile) until
    // store::refresh(). make, the root setters and commit throw
    // invalid_argument. Objects are mapped read-only: a write to one is a
    // programming error, like a write to const memory, and ends the process
    // (exit 71, after fatal_hook) with a message naming the store, the
    // object's type and the field written.
    bool read_only = false;
    bool durable = true;    // fdatasync at commit; switch off only for tests and benchmarks
    fault_backend backend = fault_backend::automatic;
    // At commit, a pointer from a persistent object to memory outside the
    // store is an error (transient_pointer) naming the type and field; with
    // this set it is stored as null instead (the object in memory keeps the
    // pointer until its page is loaded again, from the store).
    bool null_transient_pointers = false;
    // Called (in signal context: write(2) only) with the message before the
    // process ends on an error inside a page fault.
    void (*fatal_hook)(const char* message) = nullptr;
    std::uint64_t checkpoint_bytes = std::uint64_t{64} << 20;
    // Readers beside this writer (read_only opens in other processes) defer
    // a checkpoint while one of them is at an older commit. The commit that
    // was to run it then waits up to this long for them to refresh, and
    // checkpoints; a reader that keeps an old snapshot longer makes it wait
    // again only after another checkpoint_bytes of log. 0: never wait (the
    // log grows while readers lag; docs/design.md, "Readers beside the writer").
    std::chrono::milliseconds checkpoint_wait{100};
    // A page written at commit that differs from its checkpointed version in
    // at most 2 KiB is logged as the changed words only (docs/format.md,
    // "Diff frames"); off: whole pages (to measure what that saves).
    bool log_diffs = true;
    // Bytes of memory the store may keep: its resident pages and, for the
    // page engine, its own memory (store_stats::memory; docs/guarantees.md,
    // promise 8). At least 1 MiB. When the store's own memory alone passes
    // it, make throws no_space naming it.
    // Past it, a background thread evicts the oldest pages (the next touch
    // loads them again); pages the transaction wrote go to the log first, as
    // its uncommitted frames. A fault more than 1/8 past the budget waits for
    // that thread. 0 = half of the memory this process may still use: the
    // tightest of RAM, its memory cgroup's limit (v1 or v2, up the
    // hierarchy), RLIMIT_AS and RLIMIT_DATA, less what is used against it
    // (store_stats::resident_budget_source says which).
    std::uint64_t resident_budget = 0;
    // Read ahead the pages a faulted page points to. It turns itself off for
    // a while when most of its guesses go unused.
    bool prefetch = true;
    // Past resident_budget, clean pages first cool: out of reach but kept
    // (a sixteenth of the budget holds them), so a touch puts them back
    // without a read, and the pages nobody touched meanwhile are the ones
    // that leave memory (docs/design.md, "Larger than memory"). Off (the
    // default), the oldest leave at once (first in, first out). On, it
    // misses up to 8 % less, but each touch it puts back is a fault too:
    // with the store in the page cache it was 1.02-1.20x as slow, and
    // where misses read the disk (with the larger pool it had until stop
    // 51) no faster within the noise (docs/benchmarks.md).
    bool cooling = false;
    // Page engine, a store in a file: once it is open, a background thread
    // loads its pages into memory ahead of use — read, checked against
    // their checksums and swizzled, exactly as a first touch would — so
    // that first touches find them resident: a second query runs at the
    // speed of the first one's repeat instead of faulting page by page.
    // Only while every page of the store fits in a quarter of what
    // resident_budget leaves for pages and of address_space_limit (and up
    // to half of each; one pass from open;
    // with fault_backend::mprotect, in a quarter of vm.max_map_count),
    // and off the disk while the program's own reads wait for it (pages the
    // page cache holds first); commits and other calls wait for one page of
    // its work at most (a few microseconds, unless the scheduler takes the
    // CPU from it meanwhile); a page it cannot load (damage) is left for a touch
    // to report, as without it. It costs CPU time, ~5 us a page
    // (docs/benchmarks.md, "Loading ahead"), and memory for the pages the
    // program would not have touched. store_stats::loaded_ahead_pages
    // counts its pages. Off: pages load on first touch only.
    bool load_ahead = false;
    // Bytes of virtual address space the store may reserve for the objects
    // pointers name (see store::reuse_address_space). 0 = 4 TiB. It is cut
    // into 64 arenas; the largest object must fit in one arena with a guard
    // page (a bigger make is no_space). At least 4 MiB, at most 8 TiB
    // (invalid_argument outside).
    std::uint64_t address_space_limit = 0;
    // A log damaged before a commit known durable makes open throw corrupt,
    // naming the log, the byte offset, the lost commits and their pages. With
    // this set, a writable open instead keeps every commit before the damage,
    // copies the damaged log to NAME-wal.damaged and starts a new log;
    // store::salvage_report() says what was lost. `steppe recover NAME` does
    // the same.
    bool salvage_damaged_log = false;
    // Closing a writable store (destructor or close()) checkpoints: every
    // commit still in the log is copied into the main file and the log is
    // reset, so the main file alone holds the store (docs/guarantees.md,
    // "Copying a store") — unless a reader in another process holds an
    // older snapshot: then the log keeps the commits. It costs about what a commit of those pages does
    // (docs/benchmarks.md). Off, a close leaves the commits in the log and
    // the next writable open checkpoints them.
    bool checkpoint_on_close = true;
};

struct root_info {
    std::string name;
    std::string type;
};

// What an open store costs this process in memory, by kind, in bytes:
// estimates from the sizes of its structures (a table mapped NORESERVE
// counts the part written, in whole pages). The page engine keeps total()
// within open_options::resident_budget: what the rest takes, resident store
// pages give up (docs/design.md, "What the budget counts"). The object
// engine reports zeros for now.
struct store_memory {
    std::uint64_t store_pages = 0;  // resident store pages, 4 KiB each
    std::uint64_t cooling = 0;      // store pages kept cooling (open_options::cooling), the pool's slots
    std::uint64_t heap = 0;         // allocator: a descriptor per store page, free runs, non-full lists
    std::uint64_t page_map = 0;     // persistent page <-> virtual page tables
    std::uint64_t fault_space = 0;  // per virtual page: state, dirty bit, checksum of its clean contents
    std::uint64_t residency = 0;    // the eviction ring, the read-ahead and new-page tables
    std::uint64_t types = 0;        // type catalog, pointer shapes, roots, vtables
    std::uint64_t storage = 0;      // checksums of main-file pages, the log's index, the spilled pages' index
    std::uint64_t transaction = 0;  // pages made, freed and written since the last commit
    std::uint64_t buffers = 0;      // page images on their way to the log (commit, spill, eviction)
    // Everything but store_pages: what the budget holds besides pages.
    std::uint64_t metadata() const noexcept {
        return heap + page_map + fault_space + residency + types + storage + transaction + buffers;
    }
    std::uint64_t total() const noexcept { return store_pages + cooling + metadata(); }
};

struct store_stats {
    std::string backend;         // "uffd" or "mprotect"
    std::string write_tracking;  // "wp_async", "wp_sync" or "mprotect"
    std::uint64_t faults = 0;               // pages loaded on first touch
    std::uint64_t pointers_swizzled = 0;    // while loading
    std::uint64_t commits = 0;
    std::uint64_t pages_committed = 0;      // data pages written by commits
    std::uint64_t pointers_unswizzled = 0;  // while committing
    std::uint64_t bytes_logged = 0;         // written to the log, incl. metadata
    std::uint64_t syncs = 0;
    std::uint64_t checkpoints = 0;              // the log's commits copied into the main file
    std::uint64_t checkpoints_deferred = 0;     // attempts put off: a reader was at an older commit
    std::uint64_t checkpoint_waits = 0;         // commits that paused for readers (open_options::checkpoint_wait)
    std::uint64_t checkpoint_waits_expired = 0; // of those, pauses that ended without a checkpoint
    // A store in PostgreSQL (zero for a file; docs/benchmarks.md says what
    // a round trip costs over a network):
    std::uint64_t server_round_trips = 0;    // statements sent to the server, one round trip each
    std::uint64_t server_fetches = 0;        // queries that fetched pages (misses and read-ahead)
    std::uint64_t server_pages_fetched = 0;  // page versions those queries brought
    std::uint64_t cache_file_hits = 0;       // reads served by the local cache file (cache_file= in the URL)
    std::uint64_t store_pages = 0;          // pages in the store
    std::uint64_t free_pages = 0;           // of those, free for reuse
    std::uint64_t resident_pages = 0;       // store pages in memory now (memory().store_pages / 4 KiB)
    std::uint64_t dirty_pages = 0;          // of those, written since the last commit (new ones once written)
    std::uint64_t evictions = 0;            // pages dropped to stay within the budget (spilled ones too)
    std::uint64_t cooled_pages = 0;         // of those, clean ones kept cooling (open_options::cooling)
    std::uint64_t rewarmed_pages = 0;       // faults that put a cooling page back, without a read
    std::uint64_t loaded_ahead_pages = 0;   // pages loaded before any touch (open_options::load_ahead)
    // What loading ahead is doing, or why it stopped or never started: "off",
    // "loading", "done", "stopped at page N, which it could not load (a
    // touch of it reports why)", "not started: the store's N pages pass a
    // quarter of the budget's M", ...
    std::string load_ahead;
    std::uint64_t resident_budget_pages = 0;
    std::uint64_t spilled_pages = 0;        // uncommitted pages written to the log early (big transactions)
    std::uint64_t prefetched_pages = 0;     // read-ahead requests
    std::uint64_t prefetch_hits = 0;        // of those, pages then faulted in
    std::uint64_t address_space_limit = 0;  // bytes (the default made explicit)
    std::uint64_t reserved_virtual_pages = 0;  // held now: mapped units, their guards, retired ranges
    std::uint64_t reuse_rounds = 0;         // address-space reuse rounds (automatic or asked for)
    std::uint64_t reclaimed_arenas = 0;     // arenas those rounds gave back
    std::uint64_t reclaimed_pages = 0;      // virtual pages those rounds gave back
    // The heap's page descriptors, in groups of 84 pages (one metadata page
    // each): under a budget, clean groups past a sixteenth of it leave memory
    // and are read back from their metadata page when next needed.
    std::uint64_t descriptor_groups_dropped = 0;
    std::uint64_t descriptor_groups_read_back = 0;
    // Time spent serving page misses (the page engine's fault fills), by
    // part, in nanoseconds (CLOCK_MONOTONIC): reading the page (from the log
    // or the main file: the page cache or the disk), swizzling its pointers
    // and relinking its vtables, and the rest of the handler (residency
    // bookkeeping, read-ahead hints, mapping the page). The kernel's delivery
    // of the fault to the handler and back is not seen from inside
    // (bench/micro/fault_bench --delivery estimates it).
    std::uint64_t miss_io_ns = 0;
    std::uint64_t miss_swizzle_ns = 0;
    std::uint64_t miss_handler_ns = 0;
    std::string resident_budget_source;     // "option", or the limit the budget is half of
    store_memory memory;                    // what the store costs in memory, by kind
};
// store_stats as lines of "name value", for people.
std::string to_string(const store_stats& stats);


// What the store holds of one type.
struct type_usage {
    std::string name;
    std::uint32_t size = 0;     // bytes per object
    std::uint64_t objects = 0;  // allocations (an array counts once)
    std::uint64_t pages = 0;    // pages holding them
};

// Compaction (`steppe compact STORE`): the store's live objects moved
// together into a new store that replaces it, every pointer to them
// rewritten, the files shrunk. See docs/guarantees.md, "Compaction".
struct compact_options {
    // Keep only what the roots reach (a pointer the layouts do not show, such
    // as one kept as an integer, keeps nothing alive); without it every
    // allocated object is kept.
    bool collect = false;
    // How much of the old store the pass keeps in memory, in bytes (object-
    // engine stores; 0: open_options::resident_budget's default, from the
    // real memory limit). Past it, the old store's objects are read again
    // when they are copied: slower, not an error.
    std::uint64_t resident_budget = 0;
};

struct compact_report {
    struct by_type {
        std::string type;
        std::uint64_t objects = 0;  // allocations (an array counts once)
        std::uint64_t bytes = 0;    // the space they take (whole chunks or pages)
    };
    std::uint64_t bytes_before = 0, bytes_after = 0;  // main file + log
    std::uint64_t pages_before = 0, pages_after = 0;  // logical pages
    std::vector<by_type> kept, freed;                 // by type name; freed only with collect
};

// Compacts the store at `path` (either engine's: an object-engine store's
// objects get new oids, every stored reference and root forwarded) under its
// writer lock, which it holds from start to end; a crash at any point leaves
// the old store or the new one. Throws locked (a program holds the store, as
// writer or reader), not_found, unsupported (a store with containers hashed
// or ordered by persistent address; a postgresql:// URL), and what opening,
// reading and writing the store throw.
compact_report compact(const std::string& path, const compact_options& options = {});

// Schema evolution (migrate): the store's objects of a changed type rewritten
// in the program's new layout, in one pass that also compacts the store (so
// every pointer or reference to a converted object is forwarded), swapped in
// atomically. Stores of either engine: the same migration describes both
// (the object engine's types are described the same way; its references,
// ref<T> and oid<T>, are read and carried as pointers are, below).
// docs/design.md "Migration"; docs/guarantees.md "Migration".
//
//   namespace app { struct Contact {   // was: name, phone, age (int), note (dropped), next
//       char name[32]; char mobile[16]; long age; double score = 1.0; Contact* next;
//       STEPPE_FIELDS(name, mobile, age, score, next) }; }
//   steppe::migration m;
//   m.convert<app::Contact>("app::Contact")      // the stored name: the old type's qualified name
//       .rename("phone", "mobile")               // carried over under its new name
//       .with([](const steppe::old_object& old, app::Contact& c) {
//           c.age = old.get<int>("age");         // retyped: int -> long
//       });
//   steppe::migrate_report r = steppe::migrate("contacts.db", m);
//
// Field mapping, per converted type: where both layouts name every field
// (STEPPE_FIELDS, or automatic aggregate reflection where the compiler gives
// names), fields are matched by name (after the renames); otherwise by
// position. A matched field whose kind, size and encoding are unchanged is
// copied (a pointer or reference forwarded); one that changed is refused
// (type_mismatch naming the type and field) unless the conversion has a
// function, which must then fill it. An object-engine reference that now
// refers to another type (ref<A> became ref<B>, B not A's new name) has
// changed too. Fields only the new layout has start value-initialized:
// each new object starts as T{} (zero bytes where T is not default
// constructible); fields only the old layout has are dropped. The function
// runs last, so it may also override what was carried over.

// A read-only view of one object as the store held it before migrate, in its
// stored layout, for a conversion function. Fields count from 0, in the
// stored layout's order (types::layout::fields).
class old_object {
public:
    old_object(const types::layout& stored, const std::byte* bytes) noexcept : layout_(&stored), bytes_(bytes) {}

    const types::layout& layout() const noexcept { return *layout_; }
    const std::string& type() const noexcept { return layout_->name; }
    // The index of the field named `name`, if the stored layout names one.
    std::optional<std::size_t> find(std::string_view name) const;
    std::span<const std::byte> bytes() const noexcept { return {bytes_, layout_->size}; }
    // One field's bytes; type_mismatch naming the type if there is no such field.
    std::span<const std::byte> bytes(std::string_view name) const;

    // The field's value as a V: its size, kind and encoding must be V's (an
    // int field is not read as a long), else type_mismatch naming the type and
    // the field. A pointer comes back as the OLD store's address, an
    // object-engine reference (get<objects::ref<U>>, get<objects::oid<U>>)
    // holding the OLD oid: not for dereferencing, only for storing in a
    // pointer or reference field of the new object, which migrate then
    // forwards like every carried one.
    template<class V> V get(std::string_view name) const { return read<V>(named(name)); }
    template<class V> V get(std::size_t index) const { return read<V>(at(index)); }

private:
    template<class V> V read(const types::field& f) const {
        static_assert(std::is_trivially_copyable_v<V> && std::is_default_constructible_v<V>,
                      "steppe::old_object::get: read a field as a scalar, pointer, std::array or plain struct");
        // The name is made only for the error: parsing it costs more than
        // the rest of a conversion, which runs once per object.
        require(f, sizeof(V), types::detail::kind_of<V>(), types::detail::type_fp<V>(),
                &types::detail::type_name<V>);
        V value{};
        std::memcpy(&value, bytes_ + f.offset, sizeof value);
        return value;
    }
    const types::field& named(std::string_view name) const;
    const types::field& at(std::size_t index) const;
    void require(const types::field& f, std::size_t size, types::field_kind kind, std::uint64_t type_fp,
                 std::string (*name_of_as)()) const;

    const types::layout* layout_;
    const std::byte* bytes_;
};

// What migrate does: which stored types become which of the program's types.
class migration {
public:
    // One stored type's conversion (read by the library).
    struct conversion {
        std::string from;                         // the stored type's name
        const types::layout& (*to)() = nullptr;   // the program's type
        void (*start)(void* object) = nullptr;    // T{} (or zero bytes) at object
        std::function<void(const old_object&, void*)> fill;  // the conversion function, if any
        std::vector<std::pair<std::string, std::string>> renames;  // stored field name, new field name
    };

    template<class T> class converting {
    public:
        // The stored field `from` is the new type's field `to`.
        converting& rename(std::string from, std::string to) {
            c_->renames.emplace_back(std::move(from), std::move(to));
            return *this;
        }
        // f(const old_object&, T&), called for each converted object after the
        // fields were carried over: fills what changed, may override the rest.
        // Exceptions it throws end the migration; the store is left as it was.
        template<class F> converting& with(F f) {
            static_assert(std::is_invocable_v<F&, const old_object&, T&>,
                          "steppe::migration: the conversion function takes (const steppe::old_object&, T&)");
            c_->fill = [f = std::move(f)](const old_object& old, void* object) mutable {
                f(old, *static_cast<T*>(object));
            };
            return *this;
        }

    private:
        friend class migration;
        explicit converting(conversion& c) : c_(&c) {}
        conversion* c_;
    };

    // The store's type named `stored_type` (the old program's qualified name
    // of it, as `steppe stats` lists the store's types) becomes T. T may
    // have the same name or another; it must not be polymorphic.
    template<class T> converting<T> convert(std::string stored_type) {
        static_assert(!std::is_polymorphic_v<T>, "steppe::migration: types with virtual functions are not migrated yet");
        conversion& c = conversions_.emplace_back();
        c.from = std::move(stored_type);
        c.to = &types::layout_of<T>;
        c.start = [](void* object) {
            if constexpr (std::is_default_constructible_v<T>) ::new (object) T{};
            else std::memset(object, 0, sizeof(T));
        };
        return converting<T>(c);
    }
    template<class T, class F> converting<T> convert(std::string stored_type, F f) {
        return convert<T>(std::move(stored_type)).with(std::move(f));
    }

    const std::deque<conversion>& conversions() const noexcept { return conversions_; }

private:
    std::deque<conversion> conversions_;  // stable: converting points into it
};

struct migrate_options {
    bool collect = false;  // as compact_options::collect
    // Plan, convert and check everything (the conversion functions run), but
    // write nothing (beyond checkpointing the log into the main file, which
    // changes no object): the report says what migrate would do.
    bool dry_run = false;
    std::uint64_t resident_budget = 0;  // as compact_options::resident_budget
};

struct migrate_report {
    struct by_type {
        std::string from, to;        // stored type name, the program's type name
        std::uint64_t objects = 0;   // allocations converted (an array counts once)
        std::uint64_t elements = 0;  // objects in them
    };
    std::vector<by_type> converted;  // in the migration's order
    compact_report compaction;       // the pass's sizes and kept/freed objects (old type names)
};

// Rewrites the store at `path` (either engine's) once: the objects of each
// type the migration names converted, everything else compacted as
// steppe::compact does, under the writer lock; a crash at any point leaves
// the old store or the new one. Afterwards the catalog holds the new layouts
// and the program opens the store without type_mismatch. An object-engine
// store keeps its scheme (the program's need not be it) and its objects get
// new oids, as compaction gives them. Throws: not_found (no store; a stored
// type the migration names is not in the store), type_mismatch (a changed
// field without a conversion function, a conversion function reading a
// field as the wrong type; naming type and field; an unconverted type
// referring to a type the migration renames; a type the program would still
// not open), unsupported (an old type with vtable pointers; a type held by
// value inside another stored type; a pointer into a converted object's
// field the new type does not keep, naming type and offset; for an
// object-engine store, a new type with a raw pointer or aligned to more
// than 16; what compact refuses), invalid_argument (a type named twice, a
// rename naming an unknown field), locked (a program holds the store), what
// the conversion functions throw, and what opening, reading and writing the
// store throw. In every case but a crash the store is left as it was.
migrate_report migrate(const std::string& path, const migration& m, const migrate_options& options = {});

namespace detail {
class store_impl;
struct store_access;  // the library's own way in (an internal open path)
}
class transaction;

class store {
public:
    // Opens the store at `path` (creating it unless options say otherwise).
    // Throws not_found, exists (open_options::exclusive_create), version,
    // corrupt, locked (another process has it, or this one already does),
    // permission, io, unsupported. A failed open
    // leaves no file it made; a read-only open makes none.
    static store open(const std::string& path, const open_options& options = {});

    store(store&&) noexcept;
    store& operator=(store&&) noexcept;
    // As close(), but an error is printed to stderr instead of thrown (the
    // log still holds every commit: the next open recovers them).
    ~store();

    // Closes the store now: uncommitted changes are discarded, the committed
    // state is checkpointed into the main file (unless
    // open_options::checkpoint_on_close is off, or the store is read-only),
    // and the files and the lock are released, whatever the checkpoint did.
    // Afterwards the object may only be destroyed or assigned to. Throws
    // what checkpoint() does (no_space, io, poisoned, corrupt): the store is
    // closed all the same, and its log still holds every commit.
    void close();

    // The root named `name`, created value-initialized (as T{} would be) and
    // registered if absent. type_mismatch if the root holds another type or
    // the store's layout of T differs from the program's.
    template <class T>
    T* root(std::string_view name) {
        if (T* p = find_root<T>(name)) return p;
        T* p = make<T>();
        set_root(name, p);
        return p;
    }
    // The root named `name`, or nullptr.
    template <class T>
    T* find_root(std::string_view name) {
        return static_cast<T*>(find_root_raw(name, types::layout_of<T>()));
    }
    // Names `object` (made by this store) `name`, replacing any root of that name.
    template <class T>
    void set_root(std::string_view name, T* object) {
        set_root_raw(name, types::layout_of<T>(), object);
    }
    // Forgets the name (the object stays). Returns false if there was none.
    bool remove_root(std::string_view name);
    std::vector<root_info> roots() const;

    // A persistent T constructed from args (T(args...), or T{args...} for an
    // aggregate; with no args value-initialized, so pointer fields start null).
    template <class T, class... Args>
    T* make(Args&&... args) {
        T* object = construct<T>(allocate(types::layout_of<T>(), 1), std::forward<Args>(args)...);
        if constexpr (notes_vtable<T>) note_vtable(object);
        return object;
    }
    // `count` value-initialized Ts, contiguous (large arrays span pages). If
    // a constructor throws, the elements made are destroyed, the memory goes
    // back, and the exception goes on.
    template <class T>
    T* make_array(std::size_t count) {
        T* first = static_cast<T*>(allocate(types::layout_of<T>(), count));
        std::size_t made = 0;
        try {
            for (; made < count; ++made) ::new (first + made) T();
        } catch (...) {
            destroy(first, made);  // in reverse, then the memory
            throw;
        }
        if constexpr (notes_vtable<T>) note_vtable(first);
        return first;
    }
    // Destroys and frees what make (count 1) or make_array (its count) returned.
    template <class T>
    void destroy(T* object, std::size_t count = 1) {
        if (!object) return;
        for (std::size_t i = count; i-- > 0;) std::destroy_at(object + i);
        deallocate(object);
    }

    // Makes every change since the last commit durable, all or nothing.
    // transient_pointer (nothing changed; fix the pointer and commit again),
    // no_space / io (the store stays at the previous commit), poisoned. (An
    // io error from the reuse round that may follow, see reuse_address_space,
    // says that the commit is complete.)
    void commit();
    // Discards every change since the last commit. Pointers the program holds
    // into the store stay valid addresses and show the committed contents.
    void rollback();

    // The transaction in progress as a scope:
    //
    //   auto tx = store.transaction();
    //   ...changes...
    //   tx.commit();
    //
    // Leaving the scope without tx.commit() (an exception, an early return)
    // rolls back: nothing half done reaches a later commit. The guard stands
    // for everything changed since the last commit, also before it was made.
    // One guard per store at a time: another while one is live throws
    // invalid_argument naming the store (guards do not nest; move one
    // instead). store.commit() and store.rollback() stay usable inside;
    // closing the store ends the guard (its destructor then does nothing).
    steppe::transaction transaction();

    // A read-only store moves to the newest commit a writer (in another
    // process) published. The pages the newer commits did not change stay
    // in memory (where the two snapshots cannot be compared, as after a
    // compaction, the store is opened again). Pointers into the store taken
    // before are not promised valid afterwards: read the roots again. invalid_argument on a writable store (it
    // always sees its newest commit); errors as open's (the store then
    // stays on its old snapshot).
    void refresh();
    // A read-only store: true once a writer (in any process; for a store in
    // PostgreSQL, on any machine) has committed since this store's snapshot,
    // waiting up to `timeout` for that (zero: just look); false when none
    // came. Then refresh() moves to it. Files: the writer wakes waiters
    // through the reader table; PostgreSQL: LISTEN/NOTIFY. invalid_argument
    // on a writable store; io when it cannot ask (a PostgreSQL server gone:
    // refresh, which opens again).
    bool wait_for_commit(std::chrono::milliseconds timeout = {});

    // Copies every commit in the log into the main file and resets the log
    // (the next writable open and, by default, a clean close do the same;
    // commits do when the log passes open_options::checkpoint_bytes).
    // Afterwards the main file alone holds the store. invalid_argument if the
    // store is read-only, or if anything changed since the last commit
    // (commit() or rollback() first: a transaction may have sent pages to the
    // log already, and a checkpoint resets the log). no_space / io while
    // copying pages leave the log as it was and the store usable; a failed
    // fdatasync or header write poisons the handle (reopen: the open
    // recovers from the log and checkpoints again). locked while a reader in
    // another process holds an older snapshot than the newest commit (its
    // pages would be overwritten; the message names its pid): try again once
    // it has refreshed or closed. Like commit, it must not run while another
    // thread touches the store.
    void checkpoint();
    // A consistent copy of the last commit (not of changes since) as one new
    // main file `dest`, verified by opening and checking it; `dest` appears
    // only once it is complete and durable. exists if `dest` exists. Another
    // process (`steppe backup STORE DEST`) can take one while this store
    // goes on committing. Like commit, not while another thread touches it.
    void backup(const std::string& dest);

    // Address-space reuse (Texas's "strategy 2"). Starts a new epoch: every
    // resident page is dropped from memory (its data comes back from the
    // store on the next touch, at the same address), and the address space
    // that was not used since the previous round is given back for reuse.
    // commit() and rollback() do this by themselves once the address space
    // reserved passes 3/4 of address_space_limit; call it yourself to choose
    // when the cost is paid (every page touched afterwards faults once more).
    // Needs no uncommitted changes to objects (invalid_argument otherwise).
    //
    // What stays valid across a round:
    //   - every pointer stored inside the store (they are refreshed whenever
    //     their page is loaded);
    //   - pointers the program holds to objects whose page it touched (or
    //     reached by following a pointer from a page it touched) since the
    //     previous round, and to objects it made since then.
    // What may dangle: a pointer kept only in a program variable across two
    // rounds without its page being touched or named in between. It may then
    // point into memory given to other objects. Re-read it from a root or
    // another object instead.
    //
    // When the address space is full and no round can run (a long walk with
    // no commit or rollback), a page fault that needs more ends the process
    // with a message saying so (exit 71), and make throws no_space.
    void reuse_address_space();

    // Counters of this process's use of the store. With STEPPE_STATS=1 in
    // the environment, closing a store prints them to stderr.
    store_stats stats() const;
    // Every stored type with its object and page counts, in catalog order.
    std::vector<type_usage> types() const;
    // Verifies every invariant of the committed store: checksums of every page
    // and the log, the heap's page accounting, the type catalog, the roots, and
    // that every pointer in a committed page resolves inside the store, and
    // this process's page map, fault space and page residency (their
    // invariants, as seen between operations: call it while no other thread
    // touches the store).
    // One line per finding; empty when sound.
    std::vector<std::string> check() const;
    const std::string& path() const;
    // What an open with salvage_damaged_log found in the log and did about
    // it; empty if the log was sound.
    const std::string& salvage_report() const;

private:
    friend class use_store;
    friend struct detail::store_access;
    explicit store(std::unique_ptr<detail::store_impl> impl);
    // The open store, for `call`; invalid_argument once closed or moved from.
    detail::store_impl& impl(const char* call) const;
    void* allocate(const types::layout& layout, std::size_t count);
    void deallocate(void* object);
    // A new object's vptr locates its vtable when the symbol table cannot
    // (a stripped executable). A class with virtual bases needs the symbol
    // resolved for its layout already, and its vptr alone does not say where
    // its vtable group starts.
    template <class T>
    static constexpr bool notes_vtable = std::is_polymorphic_v<T> && !types::has_virtual_bases<T>;
    void note_vtable(const void* object);
    void* find_root_raw(std::string_view name, const types::layout& layout);
    void set_root_raw(std::string_view name, const types::layout& layout, void* object);

    template <class T, class... Args>
    T* construct(void* memory, Args&&... args) {
        try {
            if constexpr (std::is_array_v<T>) {
                static_assert(sizeof...(Args) == 0, "arrays are value-initialized");
                using element = std::remove_all_extents_t<T>;
                std::uninitialized_value_construct_n(static_cast<element*>(memory), sizeof(T) / sizeof(element));
                return std::launder(static_cast<T*>(memory));
            } else if constexpr (sizeof...(Args) == 0)
                return ::new (memory) T();
            else if constexpr (std::is_constructible_v<T, Args&&...>)
                return ::new (memory) T(std::forward<Args>(args)...);
            else
                return ::new (memory) T{std::forward<Args>(args)...};
        } catch (...) {
            deallocate(memory);
            throw;
        }
    }

    std::unique_ptr<detail::store_impl> impl_;
};

// A scope guard for a store's transaction (store::transaction()). Movable,
// not copyable; live from store::transaction() until commit(), rollback(),
// its store's close, or its destruction (which rolls back).
class transaction {
public:
    transaction(transaction&& other) noexcept;
    // Ends this guard first (rolling back if it is live), then takes over other's.
    transaction& operator=(transaction&& other) noexcept;
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;
    // Rolls back if live; an error of that rollback is printed to stderr
    // (destructors do not throw).
    ~transaction();

    // store::commit(), and the guard ends. If the commit throws, the guard
    // stays live: fix and commit again, or leave the scope to roll back.
    // invalid_argument if the guard has ended.
    void commit();
    // store::rollback() now, and the guard ends. invalid_argument if it has ended.
    void rollback();
    bool active() const noexcept { return store_ != nullptr; }

private:
    friend class store;
    friend class detail::store_impl;  // ends the guard when the store closes
    explicit transaction(detail::store_impl* s) noexcept : store_(s) {}
    void ensure_active(const char* call) const;
    void end() noexcept;
    void abandon() noexcept;  // rolls back if live, reporting instead of throwing

    detail::store_impl* store_;
};

}  // namespace steppe
