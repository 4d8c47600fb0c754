// The page engine's own metadata, in memory: where its blobs' pages come
// from, and the heap its meta pins. The on-disk layout is in page/engine_format.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
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

// Invariant (M1): every page of a blob's chain (the type catalog, the roots
// table, the vtable table) is a system page of that blob's owner below the
// heap's page_count, and the storage holds no page at or past it. A chain
// page the heap calls free or another blob's is handed out again by the next
// commit, which then overwrites the blob (a store every later open refuses);
// a page past the heap's end, the same once the heap grows. The heap's own
// audit cannot see this: it knows the owners, not the chains. Checked at
// every open and refresh (validate) and by store::check.
struct blob_chain {
    std::uint32_t owner;
    const char* what;
    const std::vector<std::uint64_t>& pages;
};
// One message per page breaking M1 ("page 38 of the roots table's chain is
// a free page of the heap"), empty if M1 holds.
std::vector<std::string> blob_chain_findings(const heap& h, std::uint64_t storage_pages,
                                             std::initializer_list<blob_chain> chains);

// Where a heap read from `files` brings its dropped descriptor groups back from.
heap_detail::descriptor_source descriptors_from(const storage::storage& files) noexcept;

// The heap `meta` pins, read from the storage (a fresh heap if none). With
// `keep_descriptor_bytes`, at most about that much of its descriptors stay in
// memory, the rest coming back from `files` on use (heap::descriptor_paging).
std::unique_ptr<heap> load_heap(const storage::storage& files, const engine_meta& meta,
                                std::uint64_t keep_descriptor_bytes = 0);

}  // namespace steppe::page
