// The main store file. Prose and a worked example: docs/format.md.
//
// Physical layout (all pages 4096 bytes):
//
//   page 0, 1      header slots A and B (two copies so a torn header write
//                  always leaves one valid; the valid one with the higher
//                  `header_seq` wins)
//   page 2         the commit mark: the last commit known durable in the log
//                  (written after its fdatasync; see commit_mark)
//   then groups of 1 + 1 + 1020 pages:
//     +0, +1       checksum slots A and B for the group's 1020 data pages
//                  (again two copies; the valid one with the higher seq wins)
//     +2 ...       logical pages  g*1020 ... g*1020+1019
//
// Logical page numbers are dense, so the upper layers see one contiguous
// page space (large objects need contiguous runs) while every data page keeps
// its full 4096 bytes (the page engine maps them byte for byte): checksums
// live out of band, in the group's checksum page.
//
// A checksum slot of 0 means "never written": the page must read as zeros.
#pragma once

#include "common/page_size.hpp"

#include <cstddef>
#include <cstdint>

namespace steppe::storage {

// The format fixes the number; the code everywhere uses common::page_size.
inline constexpr std::size_t page_size = 4096;
static_assert(page_size == common::page_size);
inline constexpr std::uint32_t format_version = 2;
inline constexpr std::size_t meta_size = 256;  // opaque bytes owned by the layers above

inline constexpr char header_magic[16] = {'s', 't', 'e', 'p', 'p', 'e', ' ', 's',
                                          't', 'o', 'r', 'e', 0, 0, 0, 1};

// One header slot (the first bytes of physical page 0 or 1; the rest is zero).
struct file_header {
    char magic[16];                 //   0 header_magic
    std::uint32_t version;          //  16 format_version
    std::uint32_t page_size;        //  20 4096
    std::uint8_t store_id[16];      //  24 random at creation; the log carries it too
    std::uint64_t header_seq;       //  40 +1 on every header write
    std::uint64_t checkpoint_gen;   //  48 log generations <= this are in this file
    std::uint64_t next_wal_salt;    //  56 salt of generation checkpoint_gen + 1
    std::uint64_t page_count;       //  64 logical pages in use (high-water mark)
    std::uint64_t txn_seq;          //  72 last commit contained in this file
    std::byte meta[meta_size];      //  80 upper layers' roots as of txn_seq
    std::uint32_t reserved;         // 336 zero
    std::uint32_t crc;              // 340 crc32c of bytes [0, 340)
};
static_assert(sizeof(file_header) == 344);
static_assert(offsetof(file_header, crc) == 340);

// The commit mark (the first bytes of physical page 2; the rest is zero). It
// records, outside the log, how far the log of one generation is known to
// reach, so that a damaged, truncated, emptied or replaced log cannot pass for
// a torn tail or a torn reset:
//  - a commit writes it once it is complete, after its fdatasync (not synced
//    itself: if a power loss takes it, the commit is just not *shown* durable;
//    a 56-byte write at a sector's start is never torn);
//  - a checkpoint writes it with the header (synced): generation + 1, txn =
//    the header's, log_end = the frames' start: "the next log starts empty".
// Only a mark of the generation the header expects in the log counts.
inline constexpr std::uint32_t commit_mark_magic = 0x4B4D4353;  // "SCMK"

struct commit_mark {
    std::uint32_t magic;        //  0 commit_mark_magic
    std::uint32_t reserved0;    //  4 zero
    std::uint8_t store_id[16];  //  8 the header's
    std::uint64_t generation;   // 24 the log generation this mark speaks for
    std::uint64_t txn;          // 32 every commit up to this one is durable (in the log or the main file)
    std::uint64_t log_end;      // 40 where commit txn ends in that log
    std::uint32_t reserved1;    // 48 zero
    std::uint32_t crc;          // 52 crc32c of bytes [0, 52)
};
static_assert(sizeof(commit_mark) == 56);

inline constexpr std::size_t group_data_pages = 1020;
inline constexpr std::size_t group_pages = group_data_pages + 2;
inline constexpr std::uint64_t commit_mark_page = 2;
inline constexpr std::uint64_t first_group_page = 3;

inline constexpr std::uint32_t checksum_page_magic = 0x534B4353;  // "SCKS"

// One checksum slot: the checksums of one group's data pages.
struct checksum_page {
    std::uint32_t sums[group_data_pages];  //    0 page_checksum() or 0 = never written
    std::uint32_t magic;                   // 4080 checksum_page_magic
    std::uint32_t group;                   // 4084 group index
    std::uint32_t seq;                     // 4088 +1 on every write of this group
    std::uint32_t crc;                     // 4092 crc32c of bytes [0, 4092)
};
static_assert(sizeof(checksum_page) == page_size);

inline constexpr std::uint64_t group_of(std::uint64_t logical) { return logical / group_data_pages; }
inline constexpr std::uint64_t checksum_slot_page(std::uint64_t group, int slot) {
    return first_group_page + group * group_pages + static_cast<std::uint64_t>(slot);
}
inline constexpr std::uint64_t physical_page(std::uint64_t logical) {
    return checksum_slot_page(group_of(logical), 2) + logical % group_data_pages;
}

}  // namespace steppe::storage
