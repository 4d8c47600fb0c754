// The object engine's on-disk structures. Prose: docs/format.md, "Object
// engine".
//
//   object_meta     the storage meta of an object-engine store: the scheme it
//                   was made with, where page allocation stands, the catalog
//                   and roots blobs (storage/blob.hpp; owners 1 and 2)
//   segment         a run of consecutive pages holding up to 255 objects:
//                   segment_header, then `objects` object_entry records, then
//                   the objects' bytes, each at a 16-byte aligned offset
//   object id       (oid) first page of its segment << 8 | slot in the segment;
//                   never 0 (page 0 is the storage manager's). A stored
//                   reference is the target's oid, 0 for null.
//
// Pages are allocated in order from `next_page` and never move: a segment
// keeps its place (objects have a fixed size), so an oid is stable while the
// store is used; compaction (compact.cpp) rewrites it offline with new oids.
// All integers little-endian (the host's: steppe runs on x86-64 and AArch64).
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/blob.hpp"
#include "storage/file_format.hpp"

namespace steppe::objects::format {

inline constexpr char engine_magic[8] = {'s', 't', 'o', 'b', 'j', 'n', 'g', '1'};
inline constexpr std::uint32_t catalog_owner = 1, roots_owner = 2;
inline constexpr unsigned slot_bits = 8;
inline constexpr std::uint32_t max_segment_objects = (1u << slot_bits) - 1;

inline std::uint64_t make_oid(std::uint64_t page, std::uint32_t slot) noexcept { return page << slot_bits | slot; }
inline std::uint64_t page_of(std::uint64_t oid) noexcept { return oid >> slot_bits; }
inline std::uint32_t slot_of(std::uint64_t oid) noexcept {
    return static_cast<std::uint32_t>(oid & max_segment_objects);
}
// Oids are kept in the 48 high bits of an object header word.
inline constexpr std::uint64_t max_oid = (std::uint64_t{1} << 48) - 1;

struct object_meta {
    char magic[8];                   //   0 engine_magic
    std::uint8_t detection;          //   8 objects::detection the store was made with
    std::uint8_t barrier;            //   9 objects::barrier
    std::uint16_t reserved;          //  10 zero
    std::uint32_t segment_objects;   //  12 capacity new segments get (1..255)
    std::uint64_t next_page;         //  16 the first page never allocated
    std::uint64_t objects;           //  24 objects written (persistent)
    std::uint64_t segments;          //  32 segments written
    storage::blob_ref catalog;       //  40 the type catalog
    storage::blob_ref roots;         //  64 the roots table (engine/roots.hpp; address = oid)
};
static_assert(offsetof(object_meta, next_page) == 16);
static_assert(offsetof(object_meta, catalog) == 40);
static_assert(offsetof(object_meta, roots) == 64);
static_assert(sizeof(object_meta) == 88);
static_assert(sizeof(object_meta) <= storage::meta_size);

inline constexpr std::uint32_t segment_magic = 0x47455353;  // "SSEG"

struct segment_header {
    std::uint32_t magic;       //  0 segment_magic
    std::uint16_t objects;     //  4 1..255
    std::uint16_t reserved;    //  6 zero
    std::uint32_t pages;       //  8 pages in the segment
    std::uint32_t bytes;       // 12 bytes used, this header included
    std::uint64_t first_page;  // 16 the segment's own first page
    std::uint64_t reserved2;   // 24 zero
};
static_assert(sizeof(segment_header) == 32);
static_assert(offsetof(segment_header, first_page) == 16);

struct object_entry {
    std::uint32_t offset;    //  0 of the object's bytes in the segment, 16-byte aligned
    std::uint32_t type;      //  4 catalog index
    std::uint32_t count;     //  8 elements (1 for an object)
    std::uint32_t reserved;  // 12 zero
};
static_assert(sizeof(object_entry) == 16);

inline constexpr std::uint32_t object_alignment = 16;

}  // namespace steppe::objects::format
