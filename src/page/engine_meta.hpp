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

// The heap `meta` pins, read from the storage (a fresh heap if none).
std::unique_ptr<heap> load_heap(const storage::storage& files, const engine_meta& meta);

}  // namespace steppe::page
