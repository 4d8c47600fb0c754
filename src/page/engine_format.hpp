// The page engine's own metadata on disk. Prose: docs/format.md, "Page
// engine metadata".
//
//   engine_meta    the storage meta (storage::meta_size bytes) of a page-engine
//                  store: pins the heap root and the three blobs of one commit
//   blob           a byte string on a chain of system pages of the heap, one
//                  blob_page_header then payload per page: the type catalog
//                  (owner 1), the roots table (owner 2), the vtable table
//                  (owner 3)
//   roots table    the roots blob's bytes: u32 count, then per root in name
//                  order: u32 name length, the name's bytes, u32 catalog
//                  index of its type, u64 persistent address
//
// All integers little-endian (the host's: steppe runs on x86-64 and AArch64).
#pragma once

#include <cstddef>
#include <cstdint>

#include "heap/heap.hpp"
#include "storage/file_format.hpp"

namespace steppe::page {

inline constexpr char engine_magic[8] = {'s', 't', 'p', 'e', 'n', 'g', 'n', '1'};
inline constexpr std::uint32_t catalog_owner = 1, roots_owner = 2, vtables_owner = 3;

// Where a blob is; all zero for a blob never written.
struct blob_ref {
    std::uint64_t first_page;  //  0 first page of the chain, 0 for an empty blob
    std::uint64_t length;      //  8 bytes
    std::uint32_t crc;         // 16 crc32c of all the bytes
    std::uint32_t pages;       // 20 pages in the chain
};
static_assert(sizeof(blob_ref) == 24);
static_assert(offsetof(blob_ref, pages) == 20);

// The storage meta of a page-engine store (the rest of the meta is zero; an
// all-zero meta is a fresh store).
struct engine_meta {
    char magic[8];                   //   0 engine_magic
    std::byte heap[heap_root::size]; //   8 the heap's root (heap/heap_format.hpp)
    blob_ref catalog;                //  72 the type catalog
    blob_ref roots;                  //  96 the roots table
    blob_ref vtables;                // 120 the vtable table
};
static_assert(heap_root::size == 64);
static_assert(offsetof(engine_meta, catalog) == 72);
static_assert(offsetof(engine_meta, roots) == 96);
static_assert(offsetof(engine_meta, vtables) == 120);
static_assert(sizeof(engine_meta) == 144);
static_assert(sizeof(engine_meta) <= storage::meta_size);

// One page of a blob: this header, then payload (unused bytes zero).
struct blob_page_header {
    std::uint32_t magic;     //  0 blob_magic
    std::uint32_t owner;     //  4 catalog_owner, roots_owner or vtables_owner
    std::uint32_t index;     //  8 position in the chain, from 0
    std::uint32_t used;      // 12 payload bytes in this page
    std::uint64_t next;      // 16 next page of the chain, 0 at the end
    std::uint32_t reserved;  // 24 zero
    std::uint32_t crc;       // 28 crc32c of the page with this field zero
};
static_assert(sizeof(blob_page_header) == 32);
static_assert(offsetof(blob_page_header, crc) == 28);
inline constexpr std::uint32_t blob_magic = 0x424C4253;  // "SBLB"
inline constexpr std::size_t blob_payload = storage::page_size - sizeof(blob_page_header);

}  // namespace steppe::page
