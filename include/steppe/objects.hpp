// steppe/objects.hpp — the object engine: persistent objects reached through
// references, faulted in by software, persistent by reachability.
//
//   #include <steppe/objects.hpp>
//   namespace so = steppe::objects;
//   struct Part { int id; int x, y; so::ref<Part> to[3]; };
//   auto s = so::store::open("parts.ods");
//   so::ref<Part> first = s.root<Part>("first");    // find-or-create a named root
//   so::ref<Part> p = s.make<Part>(7, 1, 2);        // transient until a root reaches it
//   first.mut()->to[0] = p;                         // mut(): the write barrier
//   int x = first->to[0]->x;                        // ->: the residency check, faults if needed
//   s.commit();                                     // what the roots reach persists, atomically
//
// Objects live in the store file in segments (up to options::segment_objects
// objects, clustered breadth-first from what reaches them at the commit that
// first wrote them). A reference is one word: null, a direct pointer, or the
// scheme's stand-in for an object not in memory yet. Dereferencing checks and,
// if needed, reads the object's segment and copies its objects into the
// engine's heap, translating their references (copy swizzling). `->` gives a
// const T*; mut() gives a T* and records the write, so a forgotten barrier is
// a compile error, not a lost update. Errors met while faulting (a damaged
// segment) are steppe::error exceptions thrown from the dereference (under
// page_fault, whose check is a trapped load, they end the process with the
// error's message, exit 71, as a page-engine fault does).
//
// The scheme is chosen when the program is compiled, as the thirteen builds
// of Hosking & Moss 1993 were separate builds, so each build pays only its
// own residency check and barrier (docs/objects.md):
//   -DSTEPPE_OBJECTS_DETECTION=fault_block (default) | id | id_self_heal | page_fault
//   -DSTEPPE_OBJECTS_BARRIER=cards (default) | object_flag | remembered_set | pages
// A store records the scheme it was made with; opening it from a program
// built for another is errc::unsupported naming both. Translation units of
// one program must agree (the types live in a namespace named by the scheme,
// so a mix fails to link instead of misreading).
//
// Stored types: trivially copyable, not polymorphic, with their layout known
// to steppe as for the page engine (aggregates automatically, STEPPE_FIELDS
// otherwise) and no raw pointers (a ref<T> instead).
//
// Compaction and schema evolution: steppe::compact and steppe::migrate
// (steppe/steppe.hpp) take object-engine stores as page-engine ones. A
// changed type is converted with the same steppe::migration:
//   m.convert<Contact>("app::Contact").rename("phone", "mobile")
//       .with([](const steppe::old_object& old, Contact& c) {
//           c.age = old.get<std::int32_t>("age");          // retyped
//           c.pinned = old.get<so::ref<Note>>("note");     // an old oid, forwarded
//       });
//   steppe::migrate("contacts.ods", m);
// Every object gets a new oid (as compaction gives), every reference and
// root is forwarded, the store keeps its scheme.
//
// Threads: a store and its objects are used by one thread at a time.
// Processes: one writer per store file or any number of readers (as the page
// engine). fork: the child must not use the parent's store.
#pragma once

#include <steppe/error.hpp>
#include <steppe/layout.hpp>

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace steppe::objects {

// How a reference to an object not in memory is represented and detected
// (Hosking & Moss 1993, digest 000 §2.4).
enum class detection : std::uint8_t {
    id = 1,            // a tagged object identifier, looked up in the resident object table at every use
    id_self_heal = 2,  // the same, the slot patched with the direct address on first use (PEVM)
    fault_block = 3,   // a pointer to a small fault block; faulting turns it into an indirect block
    page_fault = 4,    // the same fault blocks at protected addresses: the check is a load that traps (x86-64)
};
// How writes are found at commit (Hosking 1995, digest 001 §4).
enum class barrier : std::uint8_t {
    object_flag = 1,     // mut() sets a header bit; commit scans the resident objects
    remembered_set = 2,  // mut() records the object in a set once
    cards = 3,           // mut() marks the card holding the object's header; commit looks at dirty cards
    pages = 4,           // mut() does nothing: write protection of the heap finds the pages written (vm module)
};
// What a fault reads into memory (Mneme, digest 000 §2.2).
enum class granularity : std::uint8_t {
    object = 1,            // the one object asked for
    logical_segment = 2,   // every object of its segment
    physical_segment = 3,  // its segment and those after it, at least 32 KiB of pages in all
};
// Where objects live in memory (Moss 1990, digest 003 §2).
enum class placement : std::uint8_t {
    copy = 1,      // each object copied out of the segment read into its own place in the heap
    in_place = 2,  // the segment's pages read into the heap and used where they are (no copy);
                   // with granularity::object, as copy
    // No swizzling and no heap: objects stay in their segments in the
    // store's buffers, reached by identifier (oid<T>) through the pointer
    // interface (peek, poke) or the call interface (read, write); made with
    // create (persistent at once, no reachability). ref<T> is refused.
    in_store = 3,
};
// When a slot swizzled to an object's stand-in (its identifier, or its
// fault block) gets the object's address (Hosking 1995's eagerness, digest
// 001 §3). `scheme_default`: id lazy, fault_block opportunistic, page_fault
// eager, id_self_heal its own (patched at first use).
enum class swizzling : std::uint8_t {
    scheme_default = 0,
    lazy = 1,           // id only: never; every use translates the identifier
    opportunistic = 2,  // references to objects already in memory when a segment comes in are direct
    eager = 3,          // and when an object comes in, every slot swizzled to its stand-in gets its address
};
// What a fault converts besides the objects its granularity brings in (Moss
// 1990, digest 003 §2.3-2.4).
enum class conversion : std::uint8_t {
    lazy = 1,   // nothing: an object not in memory comes in at its first use (node marking)
    eager = 2,  // everything reachable from them, before the dereference returns (the whole collection)
};
const char* to_string(placement p) noexcept;
const char* to_string(swizzling s) noexcept;
const char* to_string(conversion c) noexcept;
const char* to_string(detection d) noexcept;
const char* to_string(barrier b) noexcept;
const char* to_string(granularity g) noexcept;

#ifndef STEPPE_OBJECTS_DETECTION
#define STEPPE_OBJECTS_DETECTION fault_block
#endif
#ifndef STEPPE_OBJECTS_BARRIER
#define STEPPE_OBJECTS_BARRIER cards
#endif
#define STEPPE_DETAIL_SCHEME_NS3(d, b) scheme_##d##_##b
#define STEPPE_DETAIL_SCHEME_NS2(d, b) STEPPE_DETAIL_SCHEME_NS3(d, b)
#define STEPPE_DETAIL_SCHEME_NS STEPPE_DETAIL_SCHEME_NS2(STEPPE_OBJECTS_DETECTION, STEPPE_OBJECTS_BARRIER)

struct scheme {
    detection detect;
    barrier write;
    friend bool operator==(const scheme&, const scheme&) = default;
};

struct options {
    bool create = true;     // create the store if it does not exist
    bool read_only = false; // shared with other readers; commit is refused
    bool durable = true;    // fdatasync at commit; switch off only for tests and benchmarks
    granularity fetch = granularity::logical_segment;
    objects::placement place = placement::copy;
    // Under swizzling::eager (and page_fault's default) and under
    // opportunistic or eager id, slots hold direct addresses nothing can
    // re-point, so no object leaves memory (resident_budget is not enforced).
    swizzling swizzle = swizzling::scheme_default;
    conversion convert = conversion::lazy;
    // Objects per segment when a commit clusters new objects (1..255; a new
    // store records it). A segment also closes at segment_bytes unless it
    // holds one object only.
    std::uint32_t segment_objects = 255;
    std::uint32_t segment_bytes = 64 << 10;
    // Bytes per card for barrier::cards: a power of two from 16 to 4096 (each
    // store keeps its own card table).
    std::uint32_t card_bytes = 256;
    // Bytes of virtual address space for the engine's heap (objects in
    // memory, fault blocks). 0 = 64 GiB. Memory is used only as objects are.
    std::uint64_t heap_limit = 0;
    // Bytes of persistent objects kept in memory (0 = a fifth of the memory
    // the process may still use; the page engine takes half). It
    // bounds stats().resident_bytes, not the process: objects not yet
    // committed, the table of objects in memory (~33 bytes an object) and,
    // under fault_block, the fault block and gap each evicted object leaves
    // are not counted, and grow with the objects ever loaded (docs/objects.md,
    // "Memory": for stores larger than memory, build with id, whose default
    // budget walked a store larger than a 64 MiB cgroup within it).
    // Past it, second-chance eviction over the resident object table runs at
    // the safe points, the end of commit() and of rollback(): objects not used
    // since the previous safe point leave memory (the next use faults them in
    // again), the others become victims and leave at the next safe point
    // unless used before it. Under id_self_heal and page_fault no object
    // leaves (their slots hold direct addresses that cannot be re-pointed,
    // and no check looks at a resident object's header); under id, objects made
    // or named as roots in this process stay (the program may hold their
    // direct address). A T* from get() or mut() stays valid until the next
    // safe point.
    std::uint64_t resident_budget = 0;
    // Which objects leave memory at a safe point past resident_budget (the
    // PEVM's policies, digest 004 §1.13). Dirty and pinned objects never
    // leave. Where no object can leave (id_self_heal, page_fault, eager
    // swizzling: above) `total` and `random` are refused at open
    // (invalid_argument); `second_chance` and `none` are accepted and do
    // nothing. placement::in_store takes only the default (its segment
    // buffers leave least recently used first).
    enum class eviction_policy : std::uint8_t {
        second_chance = 0,  // as above: unused since the last safe point leave, the rest become victims
        total = 1,          // every evictable object leaves
        random = 2,         // evictable objects chosen at random leave until memory is under the budget
        none = 3,           // nothing leaves: memory may grow past the budget, without error
    };
    friend const char* to_string(eviction_policy p) noexcept;  // found by ADL: call it unqualified
    eviction_policy eviction = eviction_policy::second_chance;
    std::uint64_t checkpoint_bytes = std::uint64_t{64} << 20;
    bool log_diffs = true;            // as steppe::open_options
    std::chrono::milliseconds checkpoint_wait{100};  // as steppe::open_options
    bool checkpoint_on_close = true;  // as steppe::open_options
    bool salvage_damaged_log = false; // as steppe::open_options
};

struct stats {
    std::string scheme;                   // e.g. "fault_block + cards-256, logical_segment"
    std::uint64_t segment_faults = 0;     // faults caused by a dereference
    std::uint64_t segment_buffer_hits = 0;  // of those, served by a segment read before (no I/O)
    std::uint64_t objects_faulted = 0;    // objects copied into the heap
    std::uint64_t fault_blocks = 0;       // made for objects not in memory
    std::uint64_t traps = 0;              // page_fault: checks that trapped (a fault block or an indirect one)
    std::uint64_t refs_swizzled = 0;      // references translated while faulting
    std::uint64_t refs_repointed = 0;     // swizzling::eager: slots given their object's address when it came in
    std::uint64_t evicted_objects = 0;    // left memory at a safe point (resident_budget)
    std::uint64_t rescued_victims = 0;    // victims used again before the next safe point
    std::uint64_t commits = 0;
    std::uint64_t new_objects = 0;        // made persistent by commits (reached from a root)
    std::uint64_t unreached_objects = 0;  // made, not reached at a commit, so not written
    std::uint64_t objects_written = 0;    // new and changed objects written by commits
    std::uint64_t segments_written = 0;
    std::uint64_t pages_committed = 0;
    std::uint64_t bytes_logged = 0;
    std::uint64_t syncs = 0;
    std::uint64_t resident_objects = 0;   // in the resident object table now
    std::uint64_t heap_bytes = 0;         // of the engine's heap in use (objects, fault blocks, free blocks)
    std::uint64_t resident_bytes = 0;     // of those, in persistent objects (what the budget bounds; fault
                                          // blocks, 32 bytes per object referenced, and transient objects not);
                                          // placement::in_store: bytes of segment buffers
    std::uint64_t resident_budget = 0;
    std::string resident_budget_source;   // "option", or the limit it is a fifth of
    std::uint64_t store_pages = 0;
};
std::string to_string(const stats& s);

struct root_info {
    std::string name;
    std::string type;
};

template<class T> class array;

namespace detail {

// The 16 bytes before every object and fault block in an object-engine heap.
struct header {
    // oid << 16 | store slot << 8 | flags. oid 0: made since the last commit
    // and not yet persistent.
    std::uint64_t word;
    std::uint32_t type;   // catalog index; fault_block_type for a fault block
    std::uint32_t count;  // elements: 1 for an object, n for an array
    static constexpr std::uint64_t proxy = 1;     // a fault block
    static constexpr std::uint64_t indirect = 2;  // a fault block whose object is in memory (body = its address)
    static constexpr std::uint64_t dirty = 4;     // written since the last commit (object_flag, remembered_set)
    static constexpr std::uint64_t marked = 8;    // reached by the commit's gather pass
    // An eviction victim (with `proxy`, so the fault block check sends its
    // next use to the slow path, which clears both: its second chance).
    static constexpr std::uint64_t victim = 16;
    static constexpr std::uint64_t pinned = 32;   // never evicted (see options::resident_budget)
    static constexpr std::uint32_t fault_block_type = 0xFFFFFFFF;
    static constexpr std::uint32_t free_type = 0xFFFFFFFE;  // free memory; count = its bytes
    std::uint64_t oid() const noexcept { return word >> 16; }
    unsigned store() const noexcept { return static_cast<unsigned>(word >> 8) & 0xFF; }
};
static_assert(sizeof(header) == 16);

inline header* header_of(const void* body) noexcept {
    return reinterpret_cast<header*>(const_cast<char*>(static_cast<const char*>(body)) - sizeof(header));
}

// The id schemes' resident object table lookup starts in this direct-mapped
// cache of (tagged id, address); a miss goes to the table (resolve_id).
struct rot_cache_entry {
    std::uint64_t word;
    void* body;
};

// What the inline checks and barriers need of each open store, by the
// header's (or tagged id's) store slot.
struct barrier_state {
    std::uintptr_t heap_base;
    std::uint8_t* cards;
    unsigned card_shift;
    rot_cache_entry* rot_cache;  // id schemes only
    std::uint64_t rot_cache_mask;
    // page_fault only: the protected mirror of the heap (fault blocks'
    // addresses as references hold them) and its size; 0 otherwise.
    std::uintptr_t mirror;
    std::uint64_t heap_bytes;
};
extern barrier_state open_stores[256];

// The residency checks' slow paths (src/objects/fault.cpp). They throw
// steppe::error when the object cannot be read.
void* resolve_fault_block(std::uint64_t& slot);  // faults or follows an indirect block; patches the slot
void* resolve_id(std::uint64_t word);            // looks up (faulting if needed), caches; never patches
void remember(header* h);                        // remembered_set: the first write since the commit
bool same_object(std::uint64_t a, std::uint64_t b);

// detection::page_fault's residency check: one load of the target's header
// through rax, with the slot's address in rdx. A fault block's address is
// PROT_NONE, so the load traps there, and the handler
// (src/objects/protected_blocks.cpp, which knows these exact bytes) points
// rax and the slot at the object, faulted in, before the load runs again.
// x86-64 only: elsewhere it is declared, not defined, so a page_fault build
// fails to link.
#if defined(__x86_64__)
inline void* probe(void* p, std::uint64_t* slot) noexcept {
    asm volatile("movq -16(%[p]), %%r11" : [p] "+a"(p), "+m"(*slot) : "d"(slot) : "r11");
    return p;
}
#else
void* probe(void* p, std::uint64_t* slot) noexcept;
#endif

inline namespace STEPPE_DETAIL_SCHEME_NS {
inline constexpr scheme compiled_scheme{detection::STEPPE_OBJECTS_DETECTION, barrier::STEPPE_OBJECTS_BARRIER};
}

template<class T> inline constexpr bool storable =
    std::is_trivially_copyable_v<T> && !std::is_polymorphic_v<T> && std::is_trivially_destructible_v<T>;

template<class T> struct element_of { using type = T; };
template<class E> struct element_of<array<E>> { using type = E; };

class engine_handle;
struct store_access;  // src/objects/object_engine.hpp: opens with a test's I/O layer

}  // namespace detail

// An object's identifier as the store holds it (its first segment page << 8
// | slot; 0 is null): placement::in_store's handle to an object, and its
// reference fields (where the other placements use ref<T>). Nothing to
// dereference: the store locates the object (store::peek, poke, read,
// write), checking its type, at every use. Scheme-independent, so one store
// can be read with ref<T> fields by one program and with oid<T> by another.
template<class T> class oid {
public:
    using steppe_reference_word = typename detail::element_of<T>::type;

    oid() noexcept = default;
    oid(std::nullptr_t) noexcept {}
    explicit operator bool() const noexcept { return value_ != 0; }
    std::uint64_t value() const noexcept { return value_; }
    friend bool operator==(const oid&, const oid&) = default;

private:
    friend class store;
    std::uint64_t value_ = 0;
};

inline namespace STEPPE_DETAIL_SCHEME_NS {

// A reference to a persistent (or soon persistent) T: one word.
template<class T> class ref {
public:
    // Layouts record a reference field to this type (an array's element
    // type: an array object's header holds the element type and count).
    using steppe_reference_word = typename detail::element_of<T>::type;

    ref() noexcept = default;
    ref(std::nullptr_t) noexcept {}

    // The residency check: the object, faulted in if it was not in memory.
    const T* get() const { return static_cast<const T*>(resolve()); }
    const T* operator->() const { return get(); }
    const T& operator*() const { return *get(); }
    // The object for writing; records the write (the barrier in force).
    T* mut() const {
        T* p = static_cast<T*>(resolve());
        note_write(detail::header_of(p));
        return p;
    }

    explicit operator bool() const noexcept { return word_ != 0; }
    friend bool operator==(const ref& a, const ref& b) {
        return a.word_ == b.word_ || (a.word_ && b.word_ && detail::same_object(a.word_, b.word_));
    }
    friend bool operator==(const ref& a, std::nullptr_t) noexcept { return a.word_ == 0; }

    // For the library: a reference to the object at `body`.
    static ref from_body(const void* body) noexcept {
        ref r;
        r.word_ = reinterpret_cast<std::uintptr_t>(body);
        return r;
    }

private:
    void* resolve() const {
        std::uint64_t w = word_;
        if constexpr (detail::compiled_scheme.detect == detection::fault_block) {
            void* p = reinterpret_cast<void*>(w);
            if (p && (detail::header_of(p)->word & detail::header::proxy)) p = detail::resolve_fault_block(word_);
            return p;
        } else if constexpr (detail::compiled_scheme.detect == detection::page_fault) {
            return w ? detail::probe(reinterpret_cast<void*>(w), &word_) : nullptr;
        } else if constexpr (detail::compiled_scheme.detect == detection::id) {
            return (w & 1) ? lookup(w) : reinterpret_cast<void*>(w);
        } else {
            if (w & 1) word_ = reinterpret_cast<std::uintptr_t>(lookup(w));
            return reinterpret_cast<void*>(word_);
        }
    }
    static void* lookup(std::uint64_t w) {
        const detail::barrier_state& s = detail::open_stores[(w >> 8) & 0xFF];
        const detail::rot_cache_entry& e = s.rot_cache[(w >> 16) & s.rot_cache_mask];
        return e.word == w ? e.body : detail::resolve_id(w);
    }
    static void note_write(detail::header* h) noexcept(detail::compiled_scheme.write != barrier::remembered_set) {
        if constexpr (detail::compiled_scheme.write == barrier::cards) {
            const detail::barrier_state& s = detail::open_stores[h->store()];
            s.cards[(reinterpret_cast<std::uintptr_t>(h) - s.heap_base) >> s.card_shift] = 1;
        } else if constexpr (detail::compiled_scheme.write == barrier::object_flag) {
            h->word |= detail::header::dirty;
        } else if constexpr (detail::compiled_scheme.write == barrier::pages) {
            (void)h;  // the heap's pages are write-protected: the kernel sees the write
        } else {
            if (!(h->word & detail::header::dirty)) detail::remember(h);
        }
    }

    // Patched by the residency check (a translation, not a change: the word
    // means the same object before and after).
    mutable std::uint64_t word_ = 0;
};

}  // namespace STEPPE_DETAIL_SCHEME_NS

// The body of an array object (store::make_array): its elements, counted by
// its header. Reached only through a ref<array<T>>.
template<class T> class array {
public:
    array() = delete;
    array(const array&) = delete;
    array& operator=(const array&) = delete;

    std::size_t size() const noexcept { return detail::header_of(this)->count; }
    const T* data() const noexcept { return std::launder(reinterpret_cast<const T*>(this)); }
    T* data() noexcept { return std::launder(reinterpret_cast<T*>(this)); }
    const T& operator[](std::size_t i) const noexcept { return data()[i]; }
    T& operator[](std::size_t i) noexcept { return data()[i]; }
    const T* begin() const noexcept { return data(); }
    const T* end() const noexcept { return data() + size(); }
    T* begin() noexcept { return data(); }
    T* end() noexcept { return data() + size(); }
};

class store {
public:
    // Opens the store at `path` with this program's scheme. Throws what
    // steppe::store::open does, and unsupported if the store was made by the
    // page engine or with another scheme.
    // (`compiled` is this translation unit's scheme: leave it.)
    static store open(const std::string& path, const options& o = {}, scheme compiled = detail::compiled_scheme);

    store(store&&) noexcept;
    store& operator=(store&&) noexcept;
    ~store();  // as close(), errors printed to stderr
    // Discards uncommitted changes, checkpoints (options::checkpoint_on_close;
    // put off, quietly, while a reader in another process holds an older
    // snapshot: the log keeps the commits), releases the files.
    void close();

    // The root named `name`, made value-initialized and registered if absent.
    // type_mismatch if it holds another type or T's layout changed.
    template<class T> ref<T> root(std::string_view name) {
        if (ref<T> r = find_root<T>(name)) return r;
        ref<T> r = make<T>();
        set_root(name, r);
        return r;
    }
    template<class T> ref<T> find_root(std::string_view name) {
        static_assert(detail::storable<T>, "steppe::objects: roots are stored objects");
        const void* body = find_root_raw(name, types::layout_of<T>());
        return body ? ref<T>::from_body(body) : ref<T>();
    }
    template<class T> void set_root(std::string_view name, const ref<T>& object) {
        set_root_raw(name, types::layout_of<T>(), object ? object.get() : nullptr);
    }
    bool remove_root(std::string_view name);
    std::vector<root_info> roots() const;

    // A new T (T(args...), T{args...} for an aggregate, value-initialized with
    // none). Transient until a commit finds it reachable from a root.
    template<class T, class... Args> ref<T> make(Args&&... args) {
        static_assert(detail::storable<T>, "steppe::objects stores trivially copyable, non-polymorphic types "
                                           "(references as steppe::objects::ref, no raw pointers)");
        void* memory = allocate(types::layout_of<T>(), 1);
        T* object;
        if constexpr (sizeof...(Args) == 0) object = ::new (memory) T();
        else if constexpr (std::is_constructible_v<T, Args&&...>) object = ::new (memory) T(std::forward<Args>(args)...);
        else object = ::new (memory) T{std::forward<Args>(args)...};
        return ref<T>::from_body(object);
    }
    // An array object of `count` value-initialized Ts (count >= 1).
    template<class T> ref<array<T>> make_array(std::size_t count) {
        static_assert(detail::storable<T>, "steppe::objects stores trivially copyable, non-polymorphic types");
        void* memory = allocate(types::layout_of<T>(), count);
        construct_all(static_cast<T*>(memory), count, [&] { unmake(memory); });
        return ref<array<T>>::from_body(memory);
    }

    // ---- placement::in_store (Moss 1990's in-store access) -----------------
    // Objects stay in their segments in the store's buffers; every access
    // presents an oid<T>, and the store locates the object (reading its
    // segment on first use), checks it is a T, and gives its bytes. Every
    // call here is unsupported under the other placements.
    //
    // The root named `name` (null if absent; type_mismatch if it is not a T).
    template<class T> oid<T> find_stored_root(std::string_view name) {
        return identified<T>(stored_root_raw(name, types::layout_of<T>()));
    }
    template<class T> void set_stored_root(std::string_view name, oid<T> object) {
        set_stored_root_raw(name, types::layout_of<T>(), object.value_);
    }
    // A new T (as make's arguments) in the segment being filled: persistent
    // at the next commit whether or not anything refers to it.
    template<class T, class... Args> oid<T> create(Args&&... args) {
        static_assert(detail::storable<T>, "steppe::objects stores trivially copyable, non-polymorphic types");
        std::uint64_t id = 0;
        void* memory = create_raw(types::layout_of<T>(), 1, id);
        if constexpr (sizeof...(Args) == 0) ::new (memory) T();
        else if constexpr (std::is_constructible_v<T, Args&&...>) ::new (memory) T(std::forward<Args>(args)...);
        else ::new (memory) T{std::forward<Args>(args)...};
        return identified<T>(id);
    }
    template<class T> oid<array<T>> create_array(std::size_t count) {
        static_assert(detail::storable<T>, "steppe::objects stores trivially copyable, non-polymorphic types");
        std::uint64_t id = 0;
        construct_all(static_cast<T*>(create_raw(types::layout_of<T>(), count, id)), count, [&] { uncreate(id); });
        return identified<array<T>>(id);
    }
    // The pointer interface: the object's bytes in its segment buffer, valid
    // until the next call on this store (one access). Its reference fields
    // are oid<U>s. poke records the write (the segment is written at commit).
    template<class T> const T* peek(oid<T> object) {
        return static_cast<const T*>(locate_raw(object.value_, element_layout<T>(), is_array<T>, false));
    }
    template<class T> T* poke(oid<T> object) {
        return static_cast<T*>(locate_raw(object.value_, element_layout<T>(), is_array<T>, true));
    }
    // The call interface: each call locates the object, bounds-checks and
    // copies through the caller's value (Moss's scratch buffer).
    template<class T> T read(oid<T> object) {
        static_assert(!is_array<T>, "read an array's elements with read(object, index)");
        std::array<std::byte, sizeof(T)> scratch;
        read_raw(object.value_, types::layout_of<T>(), false, 0, scratch.data());
        return std::bit_cast<T>(scratch);
    }
    template<class T> void write(oid<T> object, const T& value) {
        static_assert(!is_array<T>, "write an array's elements with write(object, index, value)");
        write_raw(object.value_, types::layout_of<T>(), false, 0, &value);
    }
    template<class E> E read(oid<array<E>> object, std::size_t index) {
        std::array<std::byte, sizeof(E)> scratch;
        read_raw(object.value_, types::layout_of<E>(), true, index, scratch.data());
        return std::bit_cast<E>(scratch);
    }
    template<class E> void write(oid<array<E>> object, std::size_t index, const E& value) {
        write_raw(object.value_, types::layout_of<E>(), true, index, &value);
    }
    template<class E> std::size_t size(oid<array<E>> object) {
        return static_cast<const array<E>*>(locate_raw(object.value_, types::layout_of<E>(), true, false))->size();
    }

    // Finds what the roots reach, gives new objects identifiers, writes new
    // and changed objects, all in one atomic, durable commit. Objects nothing
    // reaches are not written. Throws transient_pointer (a reference to
    // another store's object; nothing written), no_space / io (the store stays
    // at the previous commit), poisoned.
    void commit();
    // Back to the last commit: changed objects get their committed contents
    // again, the roots are the committed ones. References the program holds
    // stay valid (to objects made since, too: they are transient again).
    void rollback();
    // As steppe::store::checkpoint.
    void checkpoint();
    // As steppe::store::backup: the last commit as one new main file `dest`.
    void backup(const std::string& dest);
    // A read-only store (options::read_only) moves to the newest commit, as
    // steppe::store::refresh: it opens the store again, so references from
    // before are invalid. invalid_argument for a store open for writing.
    void refresh();
    // As steppe::store::wait_for_commit.
    bool wait_for_commit(std::chrono::milliseconds timeout = {});

    objects::stats stats() const;
    // Every finding of the store: the storage manager's checks, every segment,
    // every reference in every object, the roots and the catalog. Empty when sound.
    std::vector<std::string> check() const;
    const std::string& path() const;
    const std::string& salvage_report() const;

private:
    friend struct detail::store_access;
    explicit store(std::unique_ptr<detail::engine_handle> engine);
    // The engine, for `call`; invalid_argument once moved from.
    detail::engine_handle& engine(const char* call) const;
    void* allocate(const types::layout& layout, std::size_t count);
    // Value-initializes `count` Ts at `first`; if a constructor throws, `undo`
    // gives the object back and the exception goes on. Storable types are
    // trivially copyable, so trivially destructible: the elements made need
    // no destruction.
    template<class T, class Undo> static void construct_all(T* first, std::size_t count, Undo&& undo) {
        static_assert(std::is_trivially_destructible_v<T>);
        try {
            for (std::size_t i = 0; i < count; ++i) ::new (first + i) T();
        } catch (...) {
            undo();
            throw;
        }
    }
    // The object made (allocate) or created (create_raw) just now goes back,
    // as if never made: its constructor threw.
    void unmake(void* body);
    void uncreate(std::uint64_t oid) noexcept;
    const void* find_root_raw(std::string_view name, const types::layout& layout);
    void set_root_raw(std::string_view name, const types::layout& layout, const void* body);
    // placement::in_store (src/objects/in_store.cpp)
    template<class T> static constexpr bool is_array = !std::is_same_v<typename detail::element_of<T>::type, T>;
    template<class T> static const types::layout& element_layout() {
        return types::layout_of<typename detail::element_of<T>::type>();
    }
    template<class T> static oid<T> identified(std::uint64_t value) noexcept {
        oid<T> o;
        o.value_ = value;
        return o;
    }
    std::uint64_t stored_root_raw(std::string_view name, const types::layout& layout);
    void set_stored_root_raw(std::string_view name, const types::layout& layout, std::uint64_t oid);
    void* create_raw(const types::layout& layout, std::size_t count, std::uint64_t& oid);
    void* locate_raw(std::uint64_t oid, const types::layout& element, bool array, bool write);
    void read_raw(std::uint64_t oid, const types::layout& element, bool array, std::size_t index, void* out);
    void write_raw(std::uint64_t oid, const types::layout& element, bool array, std::size_t index, const void* in);

    std::unique_ptr<detail::engine_handle> engine_;
};

}  // namespace steppe::objects
