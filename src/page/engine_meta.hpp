// The page engine's own metadata, in memory: where its blobs' pages come
// from, and the heap its meta pins. The on-disk layout is in page/engine_format.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/roots.hpp"
#include "heap/heap.hpp"
#include "page/engine_format.hpp"
#include "storage/storage.hpp"

namespace steppe::page {

// Blob chains of this engine take and give back system pages of `h`.
storage::page_source system_pages(heap& h);

// Where a heap read from `files` brings its dropped descriptor groups back from.
heap_detail::descriptor_source descriptors_from(const storage::storage& files) noexcept;

// The heap `meta` pins, read from the storage (a fresh heap if none). With
// `keep_descriptor_bytes`, at most about that much of its descriptors stay in
// memory, the rest coming back from `files` on use (heap::descriptor_paging).
std::unique_ptr<heap> load_heap(const storage::storage& files, const engine_meta& meta,
                                std::uint64_t keep_descriptor_bytes = 0);

}  // namespace steppe::page
