// The page engine's own metadata on disk. Prose: docs/format.md, "Page
// engine metadata".
//
//   engine_meta    the storage meta (storage::meta_size bytes) of a page-engine
//                  store: pins the heap root and the three blobs of one commit
//   blobs          (storage/blob.hpp) on chains of system pages of the heap:
//                  the type catalog (owner 1), the roots table (owner 2),
//                  the vtable table (owner 3)
//   roots table    the roots blob's bytes: u32 count, then per root in name
//                  order: u32 name length, the name's bytes, u32 catalog
//                  index of its type, u64 persistent address
//
// All integers little-endian (the host's: steppe runs on x86-64 and AArch64).
#pragma once

#include <cstddef>
#include <cstdint>

#include "heap/heap.hpp"
#include "storage/blob.hpp"
#include "storage/file_format.hpp"

namespace steppe::page {

inline constexpr char engine_magic[8] = {'s', 't', 'p', 'e', 'n', 'g', 'n', '1'};
inline constexpr std::uint32_t catalog_owner = 1, roots_owner = 2, vtables_owner = 3;

using storage::blob_ref;

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

}  // namespace steppe::page
