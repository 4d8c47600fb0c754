// steppe::heap — the persistent allocator's bookkeeping.
//
// The heap decides which persistent addresses hold which objects. It is
// in-memory data plus its persistent encoding, and never touches mapped memory;
// its only I/O is reading back a dropped descriptor group through the source
// the store gives it (below). The store composes it with the storage manager
// (which reads and writes 4096-byte pages by logical page number) and the page
// engine.
//
// Model
//   persistent address = logical page number * 4096 + offset; 0 is null.
//   Pages [0, reserved_pages) belong to the storage layer (page 0: file header)
//   and are never handed out. page_count() is the high-water mark: every page
//   below it is exactly one of
//     free        in the free-page set, contents meaningless;
//     small       chunks of ONE size class and ONE (type, element size), with an
//                 allocation bitmap;
//     large head  first page of a large object's contiguous run (type, element
//                 size, element count, run length);
//     large tail  another page of that run (distance back to the head);
//     system      a metadata page: owner 0 = this heap's own metadata pages,
//                 other owners = pages the store took with allocate_system_page;
//     reserved    below reserved_pages.
//   That claim is invariant (H1) below; audit() checks it and all the others.
//
// Size classes: 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
// 1536, 2048 bytes (2^n and 3*2^(n-1)). Chunk i of a small page starts at
// i * class_size, so a chunk's alignment is the lowest set bit of its class
// size: 8 for the 24-byte class, at least 16 for every other class. A request
// with alignment `align` gets the smallest class that is big enough AND
// aligned enough; with the default align = 16 the 24-byte class is skipped.
// Anything above 2048 bytes (or asking for align > 2048) is a large object on
// ceil(bytes / 4096) whole pages, page-aligned.
//
// Invariants (numbered as audit() reports them)
//   H1  every page below page_count() has exactly one kind; pages below
//       reserved_pages are `reserved` and no other page is.
//   H2  the free-page set is exactly the set of `free` pages, kept as maximal
//       (coalesced) runs.
//   H3  a small page has 1 <= used <= capacity, used == popcount(bitmap), no
//       bit at or past capacity, 1 <= elem_size <= chunk size. A small page
//       whose last chunk is freed goes back to the free-page set at once.
//   H4  a small page is on the non-full list of its (type, elem_size, class)
//       iff used < capacity.
//   H5  a large head at page h with run length n is followed by exactly n-1
//       tails h+1 .. h+n-1 whose distance is 1 .. n-1 and whose type and
//       element size equal the head's; n == ceil(elem_size * count / 4096);
//       h + n <= page_count().
//   H6  the heap's own metadata pages are the system pages of owner 0; the
//       one with tag i is metadata page i; there are exactly
//       ceil(page_count() / 84) of them.
//   H7  the summary counters (stats()) equal a recount.
//   H8  a descriptor group (the 84 pages of one metadata page) that is not
//       in memory comes back from its metadata page with the checksum
//       meta_crc_ holds for it: only clean groups are dropped, and a change
//       brings a group back first (desc_table.hpp, D1-D3).
//
// Descriptors in memory: once the store gives the heap a source
// (page_descriptors_from), trim_descriptors drops clean groups beyond a
// number of bytes, and any access brings a dropped group back by reading its
// metadata page (desc_table.hpp). That is the heap's only I/O.
//
// Thread safety: none, but for the const queries the fault path asks
// (describe, place_of) on any number of threads while no non-const call
// runs. The store serializes every other call. describe() returns a pointer
// into a table that any non-const call may move or drop: it is valid until
// the next non-const call.
//
// Errors (all steppe::error):
//   allocate: invalid_argument (elem_size 0, count 0, size overflow, bad
//             alignment), no_space (more than max_page_count pages).
//   free:     invalid_argument (null, outside the heap, not the start of an
//             allocated chunk, double free, a system/reserved page).
//   decode:   corrupt (any inconsistency, naming the metadata page and the
//             described page), version (a checksum-valid page or root of a
//             format version this build does not read), and whatever `fetch`
//             throws.
#pragma once

#include "common/prefetch.hpp"
#include "heap/desc_table.hpp"
#include "heap/list_positions.hpp"
#include "common/page_size.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace steppe {

namespace heap_detail {

// The free-page set: maximal runs of free pages, by start and by length.
class free_runs {
public:
    // Adds [start, start + length); must not overlap a free run. Coalesces.
    void insert(std::uint64_t start, std::uint64_t length);
    // Removes [start, start + length), which must lie inside one free run.
    void remove(std::uint64_t start, std::uint64_t length);
    // Takes one page from the shortest run (fills holes first).
    std::optional<std::uint64_t> take_one();
    // Takes `length` pages from the shortest run that is long enough (best fit).
    std::optional<std::uint64_t> take_run(std::uint64_t length);
    // The run that ends exactly at `end`, if any: {start, length}.
    std::optional<std::pair<std::uint64_t, std::uint64_t>> run_ending_at(std::uint64_t end) const;
    bool contains(std::uint64_t page) const;
    std::uint64_t total_pages() const noexcept { return total_; }
    const std::map<std::uint64_t, std::uint64_t>& runs() const noexcept { return by_start_; }
    const std::set<std::pair<std::uint64_t, std::uint64_t>>& runs_by_length() const noexcept {
        return by_length_;
    }
    void clear() noexcept;

private:
    std::map<std::uint64_t, std::uint64_t> by_start_;               // start -> length
    std::set<std::pair<std::uint64_t, std::uint64_t>> by_length_;   // (length, start)
    std::uint64_t total_ = 0;
};

struct codec;  // heap_codec.cpp: encode / decode

}  // namespace heap_detail

// The 64-byte record the store keeps outside the heap's metadata pages (in its
// header or commit record). It pins down one committed heap state: the
// high-water mark, where metadata page 0 is, and a checksum over the checksums
// of all metadata pages, so pages from different commits never mix.
// Byte layout of to_bytes() (little-endian):
//    0  4  magic "SPHR"
//    4  2  format version (1)
//    6  2  zero
//    8  8  page_count (high-water mark)
//   16  8  reserved_pages
//   24  8  meta_page_count == ceil(page_count / 84)
//   32  8  first_meta_page: logical page of metadata page 0
//   40  4  pages_crc: CRC32C over the stored CRCs (u32 LE) of metadata pages 0..n-1
//   44 16  zero
//   60  4  CRC32C of bytes [0, 60)
struct heap_root {
    static constexpr std::size_t size = 64;

    std::uint64_t page_count = 0;
    std::uint64_t reserved_pages = 0;
    std::uint64_t meta_page_count = 0;
    std::uint64_t first_meta_page = 0;
    std::uint32_t pages_crc = 0;

    std::array<std::byte, size> to_bytes() const noexcept;
    // Checks size, magic, version and checksum: corrupt / version errors.
    static heap_root from_bytes(std::span<const std::byte> bytes);

    bool operator==(const heap_root&) const = default;
};

class heap {
public:
    static constexpr std::uint64_t page_size = common::page_size;
    static constexpr std::size_t class_count = 15;
    static constexpr std::size_t max_small_size = 2048;
    static constexpr std::size_t large = class_count;  // size_class_for: "not small"
    // Page numbers are u64 on disk; in memory one descriptor per page, so cap it.
    // 16 TiB less two pages: the page map names a page in 4 bytes, two of
    // whose values mean guard and retired (translate/page_map.hpp).
    static constexpr std::uint64_t max_page_count = (std::uint64_t{1} << 32) - 2;
    // Pages below reserved_pages are the storage layer's (at least page 0).
    static constexpr std::uint64_t max_reserved_pages = std::uint64_t{1} << 20;
    static constexpr std::uint32_t heap_owner = 0;  // system-page owner of heap metadata

    static constexpr std::uint32_t class_size(std::size_t size_class) noexcept {
        // 16 << k for even indices, 24 << k for odd ones.
        return (size_class % 2 == 0 ? 16u : 24u) << (size_class / 2);
    }
    static constexpr std::uint32_t class_alignment(std::size_t size_class) noexcept {
        return class_size(size_class) & (~class_size(size_class) + 1);  // lowest set bit
    }
    static constexpr std::uint32_t class_capacity(std::size_t size_class) noexcept {
        return static_cast<std::uint32_t>(page_size / class_size(size_class));
    }
    // The smallest class holding `bytes` at alignment `align` (a power of two),
    // or `large`. Sizes 0 and 1 map to class 0.
    static constexpr std::size_t size_class_for(std::size_t bytes, std::size_t align = 16) noexcept {
        for (std::size_t c = 0; c < class_count; ++c)
            if (class_size(c) >= bytes && class_alignment(c) >= align) return c;
        return large;
    }

    enum class page_kind : std::uint8_t {
        free = 0,
        small = 1,
        large_head = 2,
        large_tail = 3,
        system = 4,
        reserved = 5,
    };

    // One page's descriptor: what the swizzler needs to know about the page.
    // This is the in-memory form; the persisted form is spelled out byte by
    // byte in heap_format.hpp.
    class page_desc {
    public:
        page_kind kind() const noexcept { return kind_; }
        bool is_data() const noexcept {
            return kind_ == page_kind::small || kind_ == page_kind::large_head ||
                   kind_ == page_kind::large_tail;
        }
        // small, large head and large tail pages:
        std::uint32_t type() const noexcept { return type_; }
        std::uint32_t elem_size() const noexcept { return elem_size_; }

        // small pages (chunk_size and chunk_capacity are 0 for other kinds).
        // Chunk i occupies [i * chunk_size, (i+1) * chunk_size) and holds
        // chunk_size / elem_size element slots; slots past what the caller
        // allocated are whatever the caller left there.
        std::size_t size_class() const noexcept { return cls_; }
        std::uint32_t chunk_size() const noexcept { return kind_ == page_kind::small ? class_size(cls_) : 0; }
        std::uint32_t chunk_capacity() const noexcept {
            return kind_ == page_kind::small ? class_capacity(cls_) : 0;
        }
        std::uint32_t chunks_used() const noexcept { return used_; }
        bool chunk_allocated(std::uint32_t i) const noexcept {
            return i < 256 && ((words_[i / 64] >> (i % 64)) & 1) != 0;
        }
        std::span<const std::uint64_t, 4> bitmap() const noexcept { return words_; }

        // Iterates the byte offsets of the allocated chunks, ascending. No allocation.
        class chunk_iterator {
        public:
            using value_type = std::uint32_t;
            using difference_type = std::ptrdiff_t;
            chunk_iterator() = default;
            std::uint32_t operator*() const noexcept { return bit_ * size_; }
            chunk_iterator& operator++() noexcept { bit_ = next(bit_ + 1); return *this; }
            chunk_iterator operator++(int) noexcept { auto t = *this; ++*this; return t; }
            bool operator==(const chunk_iterator& o) const noexcept { return bit_ == o.bit_; }

        private:
            friend class page_desc;
            chunk_iterator(const page_desc* d, std::uint32_t bit) noexcept
                : desc_(d), size_(d->chunk_size()), bit_(next(bit)) {}
            std::uint32_t next(std::uint32_t from) const noexcept;
            const page_desc* desc_ = nullptr;
            std::uint32_t size_ = 0;
            std::uint32_t bit_ = 256;
        };
        struct chunk_range {
            chunk_iterator b, e;
            chunk_iterator begin() const noexcept { return b; }
            chunk_iterator end() const noexcept { return e; }
        };
        // Empty unless kind() == small.
        chunk_range allocated_chunks() const noexcept;

        // large head: run length in pages and element count.
        std::uint64_t run_pages() const noexcept { return kind_ == page_kind::large_head ? words_[0] : 0; }
        std::uint64_t elem_count() const noexcept { return kind_ == page_kind::large_head ? words_[1] : 0; }
        // large head: 0; large tail: pages back to the head.
        std::uint64_t head_distance() const noexcept { return kind_ == page_kind::large_tail ? words_[0] : 0; }

        // system pages: owner (heap_owner for the heap's own metadata) and tag
        // (the metadata page index for heap_owner; caller-defined otherwise).
        std::uint32_t owner() const noexcept { return type_; }
        std::uint64_t tag() const noexcept { return kind_ == page_kind::system ? words_[0] : 0; }

        bool operator==(const page_desc&) const = default;

    private:
        friend class heap;
        friend struct heap_detail::codec;
        friend struct heap_test_access;

        page_kind kind_ = page_kind::free;
        std::uint8_t cls_ = 0;         // small: size class index
        std::uint16_t used_ = 0;       // small: allocated chunks
        std::uint32_t type_ = 0;       // small/large: type index; system: owner
        std::uint32_t elem_size_ = 0;  // small/large
        std::uint32_t spare_ = 0;
        // small: allocation bitmap (bit i = chunk i); head: {run pages, element
        // count}; tail: {distance to head}; system: {tag}.
        std::array<std::uint64_t, 4> words_{};
    };
    static_assert(sizeof(page_desc) == 48);

    struct run {
        std::uint64_t first = 0;  // head page
        std::uint64_t pages = 0;
        bool operator==(const run&) const = default;
    };

    struct chunk_info {
        std::uint64_t addr = 0;        // start of the chunk
        std::uint64_t bytes = 0;       // usable bytes: class size, or run pages * 4096
        std::uint32_t type = 0;
        std::uint32_t elem_size = 0;
        std::uint64_t elem_count = 0;  // large objects; 0 for small chunks (not recorded)
        bool large = false;
    };

    struct stats_t {
        std::uint64_t page_count = 0;
        std::uint64_t reserved_pages = 0;
        std::uint64_t free_pages = 0;
        std::uint64_t small_pages = 0;
        std::uint64_t large_pages = 0;     // heads + tails
        std::uint64_t system_pages = 0;    // incl. the heap's own metadata pages
        std::uint64_t meta_pages = 0;      // the heap's own metadata pages
        std::uint64_t small_chunks = 0;    // live small chunks
        std::uint64_t large_objects = 0;   // live large objects
        bool operator==(const stats_t&) const = default;
    };

    struct metadata_page {
        std::uint32_t index = 0;           // 0 .. meta_page_count - 1
        std::uint64_t page = 0;            // logical page to write it to
        std::array<std::byte, 4096> bytes{};
    };

    struct commit_image {
        heap_root root;                       // describes the state after these pages are written
        std::vector<metadata_page> pages;     // ascending index
    };

    // Returns the bytes of one logical page (4096 of them; anything else is
    // corrupt). The span must stay valid until the next call or until decode
    // returns. May throw; the exception propagates out of decode.
    using fetch_fn = std::function<std::span<const std::byte>(std::uint64_t page)>;

    // A fresh heap: pages [0, reserved_pages) are reserved, metadata page 0 is
    // page reserved_pages, everything is dirty.
    explicit heap(std::uint64_t reserved_pages = 1);

    // --- allocation -------------------------------------------------------

    // A chunk for `count` elements of `elem_size` bytes of catalog type `type`,
    // aligned to `align` (power of two <= 4096). Returns its persistent address.
    std::uint64_t allocate(std::uint32_t type, std::size_t elem_size, std::size_t count,
                           std::size_t align = 16);
    // Frees the chunk starting at `addr`.
    void free(std::uint64_t addr);

    // A whole page for the store's own metadata (type catalog, roots, ...):
    // kind system, owner != heap_owner, caller-defined tag.
    std::uint64_t allocate_system_page(std::uint32_t owner, std::uint64_t tag);
    void free_system_page(std::uint64_t page);

    // --- queries ----------------------------------------------------------

    // nullptr for pages at or past page_count().
    const page_desc* describe(std::uint64_t page) const noexcept {
        return page < descs_.size() ? &desc_at(page) : nullptr;
    }
    // Starts loading `page`'s descriptor into the cache (no effect past
    // page_count()): the fault handler asks place_of for every pointer of a
    // page, whose targets are scattered, so it issues all the loads first.
    void prefetch_describe(std::uint64_t page) const noexcept {
        if (page >= descs_.size()) return;
        const auto* d = reinterpret_cast<const char*>(descs_.address_if_present(page));
        if (!d) return;
        common::prefetch(d);
        common::prefetch(d + sizeof(page_desc) - 1);  // half of them straddle two cache lines
    }
    // The large run containing `page` (head or tail), if any.
    std::optional<run> large_run(std::uint64_t page) const noexcept;
    // Is `addr` the start of an allocated chunk?
    bool is_allocated(std::uint64_t addr) const noexcept;
    // The allocated chunk containing `addr` (any byte of it), if any.
    std::optional<chunk_info> find_chunk(std::uint64_t addr) const noexcept;

    // What the byte at persistent address `addr` belongs to: an allocated
    // object (a small chunk, or the elements of a large object), or what else
    // it lies in. O(1) from the page's descriptor, no allocation: the fault
    // handler asks it for every pointer it swizzles (invariant S1, see
    // src/page/stored_pointer.hpp).
    enum class place : std::uint8_t {
        object,
        beyond,         // at or past page_count()
        reserved,       // the storage layer's pages
        free_page,
        heap_metadata,  // a system page of heap_owner
        system_page,    // a system page of another owner (catalog, roots)
        free_chunk,     // a small page's chunk that is not allocated
        past_chunks,    // a small page's tail that no chunk covers
        past_object,    // a large run's last page, past the object's elements
    };
    place place_of(std::uint64_t addr) const noexcept;

    std::uint64_t page_count() const noexcept { return descs_.size(); }
    std::uint64_t reserved_pages() const noexcept { return reserved_pages_; }
    const std::vector<std::uint64_t>& metadata_pages() const noexcept { return meta_pages_; }
    // The checksum of each metadata page as last encoded or decoded.
    const std::vector<std::uint32_t>& metadata_checksums() const noexcept { return meta_crc_; }
    const heap_detail::free_runs& free_pages() const noexcept { return free_; }
    // Above every type a data page names: one more than the largest type a
    // page was decoded with or allocated for since (frees do not lower it).
    // Lets the store check its pages' types against its catalog without
    // reading every descriptor.
    std::uint64_t type_bound() const noexcept { return type_bound_; }
    stats_t stats() const noexcept;
    // What this heap holds in memory, in bytes (an estimate from its
    // containers' sizes): 52 bytes per page below page_count() (a
    // descriptor and a list position), plus the free runs and lists.
    std::uint64_t memory_bytes() const noexcept;

    // Data pages (small / large) handed out since the last call that are still
    // data pages: their previous contents are garbage (or past the end of the
    // file), so the page engine installs them zero-filled. Ascending.
    std::vector<std::uint64_t> take_new_pages();
    // Pages that stopped being data pages since the last call and are not data
    // pages now (free, or reused as a system page): drop their mappings and do
    // not write them. Ascending, disjoint from take_new_pages().
    std::vector<std::uint64_t> take_freed_pages();

    // --- descriptors in memory ---------------------------------------------

    // Lets trim_descriptors drop groups, which come back from `source`.
    void page_descriptors_from(heap_detail::descriptor_source source) noexcept { descs_.set_source(source); }
    // Drops clean descriptor groups (H8) until at most `keep_bytes` of them
    // are in memory, or none is left to drop; without a source, nothing.
    // The caller keeps every other heap call out (D2 in desc_table.hpp);
    // faults on other threads may go on: the trim waits (20 ms at most)
    // for those reading descriptors, and returns false, having dropped
    // nothing, if they did not finish.
    bool trim_descriptors(std::uint64_t keep_bytes) noexcept;
    // What a fault holds while it reads descriptors (describe, place_of,
    // large_run, ...) on a heap whose groups a trim may drop meanwhile.
    using descriptor_reading = heap_detail::desc_table::reading;
    descriptor_reading reading_descriptors() const noexcept { return descriptor_reading(descs_); }
    // Runs `f` while no fault reads descriptors (D2's exclusive section,
    // waiting as long as readings last): for what the fault path reads
    // beside them, as the page engine's type shapes, which a new type grows.
    template <class F>
    void excluding_readings(F&& f) {
        const heap_detail::desc_table::exclusive section(descs_, heap_detail::desc_table::exclusive::wait_forever);
        f();
    }
    // Bytes of descriptor groups in memory now.
    std::uint64_t descriptor_bytes() const noexcept {
        return descs_.present_groups() * heap_detail::desc_table::slot_bytes;
    }
    struct descriptor_stats {
        std::uint64_t groups = 0, present = 0, dropped = 0, read_back = 0;
    };
    descriptor_stats descriptors() const noexcept {
        return {descs_.group_count(), descs_.present_groups(), descs_.dropped_total(), descs_.loaded_total()};
    }

    // --- persistence ------------------------------------------------------

    // The metadata pages changed since the last encode (or decode), and the root
    // describing the state once they are written. Clears the dirty set. If the
    // commit that was to write them fails, decode the last committed state
    // (rollback) or call mark_all_dirty().
    commit_image encode_dirty();
    void mark_all_dirty();
    std::size_t dirty_page_count() const noexcept { return dirty_list_.size(); }

    // Asks for a page that fetch will probably be given soon (read-ahead);
    // only a hint, which may name any page or none that is fetched.
    using will_need_fn = std::function<void(std::uint64_t page)>;

    using descriptor_paging = heap_detail::descriptor_paging;

    // Rebuilds a heap from a root and its metadata pages, reading each page
    // twice (the chain and its checksums, then the descriptors); validates
    // every descriptor and builds the indexes as it goes, in page order.
    static heap decode(const heap_root& root, const fetch_fn& fetch, const will_need_fn& will_need = {},
                       const descriptor_paging& paging = {});

    // Checks invariants H1..H7; returns one line per violation (empty = sound).
    std::vector<std::string> audit() const;

private:
    friend struct heap_detail::codec;
    friend struct heap_test_access;

    struct no_init {};
    explicit heap(no_init) {}

    static std::uint64_t list_key(std::uint32_t type, std::uint32_t elem_size, std::size_t cls) noexcept {
        return (std::uint64_t{type} << 16) | (std::uint64_t{elem_size} << 4) | cls;
    }
    std::uint64_t allocate_small(std::uint32_t type, std::uint32_t elem_size, std::size_t cls);
    std::uint64_t allocate_large(std::uint32_t type, std::uint32_t elem_size, std::uint64_t count,
                                 std::uint64_t pages);
    std::uint64_t take_page();
    std::uint64_t grow(std::uint64_t pages);
    void check_room(std::uint64_t pages) const;
    void ensure_metadata_pages();
    void release_pages(std::uint64_t first, std::uint64_t count);
    void list_push(std::uint64_t page);
    void list_remove(std::uint64_t page);
    void mark_dirty(std::uint64_t page);
    void mark_meta_dirty(std::size_t index);
    void note_new(std::uint64_t page);
    void note_freed(std::uint64_t page);
    // Page p's descriptor, its group brought back first if it was dropped (D3).
    page_desc& desc_at(std::uint64_t page) const noexcept {
        return *reinterpret_cast<page_desc*>(descs_.at(page));
    }

    std::uint64_t reserved_pages_ = 1;
    heap_detail::desc_table descs_;          // one descriptor per page below the high-water mark
    std::uint64_t trim_hand_ = 0;            // the next group trim_descriptors looks at
    heap_detail::list_positions list_pos_;   // per page: 1 + position in its non-full list, 0 = none
    std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> nonfull_;  // list_key -> pages
    heap_detail::free_runs free_;
    std::vector<std::uint64_t> meta_pages_;  // metadata page i lives at logical page meta_pages_[i]
    std::vector<std::uint32_t> meta_crc_;    // stored CRC of each metadata page as last encoded
    std::vector<std::uint8_t> meta_dirty_;   // per metadata page index
    std::vector<std::uint32_t> dirty_list_;  // indices with meta_dirty_ set
    std::set<std::uint64_t> new_pages_;
    std::set<std::uint64_t> freed_pages_;
    std::uint64_t small_pages_ = 0, large_pages_ = 0, system_pages_ = 0;
    std::uint64_t small_chunks_ = 0, large_objects_ = 0;
    std::uint64_t type_bound_ = 0;
};

const char* to_string(heap::page_kind kind) noexcept;

namespace heap_detail {
// Per size class, 2^32 / size + 1: offset / size == (offset * it) >> 32 for
// every offset in a page (the error, offset * ((2^32 / size + 1) * size -
// 2^32) / 2^32, stays below 1 while offset * size < 2^32). place_of runs for
// every pointer the fault handler swizzles, and a division costs more than
// the rest of it.
inline constexpr auto chunk_reciprocals = [] {
    std::array<std::uint64_t, heap::class_count> r{};
    for (std::size_t c = 0; c < heap::class_count; ++c) r[c] = (std::uint64_t{1} << 32) / heap::class_size(c) + 1;
    return r;
}();
constexpr bool chunk_reciprocals_exact() {
    for (std::size_t c = 0; c < heap::class_count; ++c)
        for (std::uint64_t offset = 0; offset < heap::page_size; ++offset)
            if (((offset * chunk_reciprocals[c]) >> 32) != offset / heap::class_size(c)) return false;
    return true;
}
static_assert(chunk_reciprocals_exact());
}  // namespace heap_detail

inline heap::place heap::place_of(std::uint64_t addr) const noexcept {
    const std::uint64_t page = addr / page_size, offset = addr % page_size;
    if (page >= descs_.size()) return place::beyond;
    const page_desc& d = desc_at(page);
    switch (d.kind_) {
    case page_kind::small: {
        const auto chunk = static_cast<std::uint32_t>((offset * heap_detail::chunk_reciprocals[d.cls_]) >> 32);
        if (chunk >= d.chunk_capacity()) return place::past_chunks;
        return d.chunk_allocated(chunk) ? place::object : place::free_chunk;
    }
    case page_kind::large_head:
    case page_kind::large_tail: {
        // elem_size * count fits: it is below the run's length in bytes (H5).
        const page_desc& head = desc_at(page - d.head_distance());
        const std::uint64_t in_object = d.head_distance() * page_size + offset;
        return in_object < std::uint64_t{head.elem_size_} * head.elem_count() ? place::object : place::past_object;
    }
    case page_kind::system: return d.owner() == heap_owner ? place::heap_metadata : place::system_page;
    case page_kind::reserved: return place::reserved;
    case page_kind::free: break;
    }
    return place::free_page;
}

}  // namespace steppe
