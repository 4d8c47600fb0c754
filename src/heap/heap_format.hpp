// The persistent format of the heap's bookkeeping.
//
// The heap's whole state is the array of page descriptors, one per page below
// the high-water mark (page_count). The free-page set, the non-full lists and
// the counters are derived from it on decode, so they cannot disagree with it
// on disk. The array is cut into metadata pages of 84 descriptors each:
// metadata page i holds the descriptors of pages [84 i, 84 i + 84). A change to
// page p's descriptor therefore dirties exactly metadata page p / 84.
//
// Where the metadata pages live: the heap takes them from its own page space
// (free-page set first, else the high-water mark), marks them as system pages
// of owner 0 with tag = their index, and chains them: each metadata page holds
// the logical page number of the next one. The root (heap_root, 64 bytes, kept
// by the store elsewhere) holds the first one's page number, the count and a
// checksum over all pages' checksums. There are always ceil(page_count / 84)
// metadata pages; they are added as page_count grows and never removed.
//
// Metadata page (4096 bytes, little-endian)
//    0   4  magic "SPHM"
//    4   4  CRC32C of bytes [8, 4096)
//    8   2  format version (1)
//   10   1  kind (1 = descriptor page; the only kind so far)
//   11   1  zero
//   12   4  index i of this metadata page
//   16   8  next: logical page of metadata page i+1; 0 in the last one
//   24   2  descriptor count c = min(84, page_count - 84 i), >= 1
//   26   6  zero
//   32 4032 84 descriptor slots of 48 bytes: slot k describes page 84 i + k;
//           slots >= c are all zero
// 4064  32  zero
//
// Descriptor (48 bytes, little-endian); bytes not listed for a kind are zero.
//    0   1  kind: 0 free, 1 small, 2 large head, 3 large tail, 4 system, 5 reserved
//   small (1):
//    1   1  size class index 0..14 (16, 24, 32, ..., 2048 bytes)
//    2   2  used: allocated chunks, 1 <= used <= capacity = 4096 / class size
//    4   4  type index
//    8   4  element size, 1 <= elem_size <= class size
//   16  32  allocation bitmap, 4 u64 LE; bit i (word i/64, bit i%64) = chunk i at
//           offset i * class size; popcount == used; no bit >= capacity
//   large head (2):
//    4   4  type index
//    8   4  element size >= 1
//   16   8  run length n in pages == ceil(element size * count / 4096)
//   24   8  element count >= 1
//   large tail (3):
//    4   4  type index, == the head's
//    8   4  element size, == the head's
//   16   8  distance d to the head: the head is page p - d, 1 <= d < n
//   system (4):
//    4   4  owner (0 = this heap's metadata pages)
//   16   8  tag (owner 0: the metadata page index)
//   free (0), reserved (5): nothing. Pages < reserved_pages are reserved, no
//           other page is.
//
// A metadata page is valid iff (1) magic, checksum, version, kind, index and
// count are right, (2) `next` is 0 exactly in the last page and otherwise in
// [reserved_pages, page_count), (3) every descriptor is valid for its kind and
// zero where unused, (4) large runs are complete: a head is followed by its
// tails and tails only follow their head, runs end within page_count.
// The set of pages is valid iff additionally (5) metadata page i is the system
// page of owner 0 with tag i, and no other page claims to be, and (6) the CRC32C
// over the n stored page checksums equals the root's pages_crc, which catches
// a page from another commit even when its own checksum is fine.
//
// Worked example: a fresh heap with reserved_pages = 1 has page_count 2: page 0
// reserved, page 1 = metadata page 0. Root {page_count 2, reserved 1,
// meta_page_count 1, first_meta_page 1}. Metadata page 0: count 2, next 0,
// slot 0 = {kind 5}, slot 1 = {kind 4, owner 0, tag 0}. After allocate(7, 40, 1)
// the 48-byte class gets page 2: slot 2 = {kind 1, class 3, used 1, type 7,
// elem_size 40, bitmap word 0 = 1}, count 3; the chunk's address is 2 * 4096.
// When page 84 comes into use, metadata page 1 is taken (page 85: the high-water
// mark), page 0's `next` becomes 85 and both pages are rewritten.
#pragma once

#include "common/page_size.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace steppe::heap_detail {

// The format fixes the number; the code everywhere uses common::page_size.
inline constexpr std::size_t kPageSize = 4096;
static_assert(kPageSize == common::page_size);
inline constexpr std::uint32_t kMetaMagic = 0x4D485053;  // "SPHM"
inline constexpr std::uint32_t kRootMagic = 0x52485053;  // "SPHR"
inline constexpr std::uint16_t kFormatVersion = 1;
inline constexpr std::uint8_t kDescriptorPage = 1;

inline constexpr std::size_t kMetaHeaderSize = 32;
inline constexpr std::size_t kDescSize = 48;
inline constexpr std::size_t kDescsPerPage = 84;
static_assert(kMetaHeaderSize + kDescsPerPage * kDescSize <= kPageSize);
static_assert(kMetaHeaderSize + (kDescsPerPage + 1) * kDescSize > kPageSize);

// Offsets in a metadata page.
inline constexpr std::size_t kOffMagic = 0, kOffCrc = 4, kOffVersion = 8, kOffKind = 10,
                             kOffIndex = 12, kOffNext = 16, kOffCount = 24;
inline constexpr std::size_t kCrcStart = 8;  // the CRC covers [8, 4096)

// Offsets in a descriptor.
inline constexpr std::size_t kDescKind = 0, kDescClass = 1, kDescUsed = 2, kDescType = 4,
                             kDescElemSize = 8, kDescWords = 16;

// Offsets in the root.
inline constexpr std::size_t kRootMagicOff = 0, kRootVersion = 4, kRootPageCount = 8,
                             kRootReserved = 16, kRootMetaCount = 24, kRootFirstMeta = 32,
                             kRootPagesCrc = 40, kRootCrc = 60;

constexpr std::uint64_t meta_pages_needed(std::uint64_t page_count) noexcept {
    return (page_count + kDescsPerPage - 1) / kDescsPerPage;
}

template <class T>
T load_le(const std::byte* p) noexcept {
    static_assert(std::endian::native == std::endian::little, "steppe assumes a little-endian host");
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class T>
void store_le(std::byte* p, T v) noexcept {
    std::memcpy(p, &v, sizeof v);
}

// The first set bit at or past `capacity` in a 256-bit bitmap, or 256 if none.
inline std::uint32_t first_bit_past(const std::array<std::uint64_t, 4>& words, std::uint32_t capacity) noexcept {
    for (std::uint32_t w = 0; w < 4; ++w) {
        std::uint32_t valid = capacity > 64 * w ? std::min<std::uint32_t>(64, capacity - 64 * w) : 0;
        std::uint64_t extra = valid == 64 ? 0 : words[w] & (~std::uint64_t{0} << valid);
        if (extra != 0) return 64 * w + static_cast<std::uint32_t>(std::countr_zero(extra));
    }
    return 256;
}

// CRC32C of a metadata page's bytes [8, 4096): what belongs at offset 4.
std::uint32_t metadata_page_crc(std::span<const std::byte, kPageSize> page) noexcept;

// CRC32C over a sequence of per-page CRCs, each as u32 LE: the root's pages_crc.
std::uint32_t pages_crc(std::span<const std::uint32_t> page_crcs) noexcept;

}  // namespace steppe::heap_detail
