// Blobs: byte strings (a type catalog, a roots table) kept on a chain of
// storage pages, for the engines' own metadata. Each page is a
// blob_page_header then payload; a blob_ref in the engine's meta says where
// the chain starts, how long it is and its CRC. Prose: docs/format.md, "Blobs".
//
// The pages of a chain come from the engine (page_source): the page engine
// takes system pages of its heap, the object engine pages of its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "storage/storage.hpp"

namespace steppe::storage {

// Where a blob is; all zero for a blob never written.
struct blob_ref {
    std::uint64_t first_page;  //  0 first page of the chain, 0 for an empty blob
    std::uint64_t length;      //  8 bytes
    std::uint32_t crc;         // 16 crc32c of all the bytes
    std::uint32_t pages;       // 20 pages in the chain
};
static_assert(sizeof(blob_ref) == 24);
static_assert(offsetof(blob_ref, pages) == 20);

// One page of a blob: this header, then payload (unused bytes zero).
struct blob_page_header {
    std::uint32_t magic;     //  0 blob_magic
    std::uint32_t owner;     //  4 which blob of its engine (the engine numbers them)
    std::uint32_t index;     //  8 position in the chain, from 0
    std::uint32_t used;      // 12 payload bytes in this page
    std::uint64_t next;      // 16 next page of the chain, 0 at the end
    std::uint32_t reserved;  // 24 zero
    std::uint32_t crc;       // 28 crc32c of the page with this field zero
};
static_assert(sizeof(blob_page_header) == 32);
static_assert(offsetof(blob_page_header, crc) == 28);
inline constexpr std::uint32_t blob_magic = 0x424C4253;  // "SBLB"
inline constexpr std::size_t blob_payload = page_size - sizeof(blob_page_header);

// Where the pages of a growing or shrinking chain come from and go to.
struct page_source {
    std::function<page_no(std::uint32_t owner, std::uint64_t index)> take;
    std::function<void(page_no)> give_back;
};

// The blob `ref` of `owner`, checked page by page (errc::corrupt naming
// `what`); `pages` gets its chain.
std::vector<std::byte> read_blob(const storage& files, const blob_ref& ref, std::uint32_t owner, const char* what,
                                 std::vector<page_no>& pages);

// Page images of `bytes` as blob `owner` on the chain `pages`, which grows
// or shrinks to fit through `source`; the images point into `buffers`.
blob_ref write_blob(std::span<const std::byte> bytes, std::uint32_t owner, std::vector<page_no>& pages,
                    const page_source& source, std::deque<std::array<std::byte, page_size>>& buffers,
                    std::vector<page_image>& images);

}  // namespace steppe::storage
