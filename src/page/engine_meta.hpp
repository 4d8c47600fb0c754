// The page engine's own metadata, in memory: the roots table and its codec,
// and blobs (byte strings on chains of system pages) read from and written
// to the storage. The on-disk layout is in page/engine_format.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "heap/heap.hpp"
#include "page/engine_format.hpp"
#include "storage/storage.hpp"

namespace steppe::page {

struct root_entry {
    std::uint32_t type;     // catalog index
    std::uint64_t address;  // persistent
};
using root_table = std::map<std::string, root_entry, std::less<>>;

std::vector<std::byte> encode_roots(const root_table& roots);
// errc::corrupt naming `where` if the bytes are not a roots table.
root_table decode_roots(std::span<const std::byte> in, const std::string& where);

// The blob `ref` of `owner`, checked page by page (errc::corrupt naming
// `what`); `pages` gets its chain.
std::vector<std::byte> read_blob(const storage::storage& files, const blob_ref& ref, std::uint32_t owner,
                                 const char* what, std::vector<std::uint64_t>& pages);

// Page images of `bytes` as blob `owner` on the chain `pages`, which grows
// (system pages of `h`) or shrinks to fit; the images point into `buffers`.
blob_ref write_blob(heap& h, std::span<const std::byte> bytes, std::uint32_t owner,
                    std::vector<std::uint64_t>& pages,
                    std::deque<std::array<std::byte, storage::page_size>>& buffers,
                    std::vector<storage::page_image>& images);

// The heap `meta` pins, read from the storage (a fresh heap if none).
std::unique_ptr<heap> load_heap(const storage::storage& files, const engine_meta& meta);

}  // namespace steppe::page
