// The write-ahead log ("<store>-wal"). Prose and a worked example: docs/format.md.
//
// Offset 0: a wal_header in a 4096-byte block. Frames follow back to back:
//
//   page frame    frame_header{kind=page,   number=logical page}  + 4096-byte page image
//   commit frame  frame_header{kind=commit, number=page count}    + meta_size bytes of meta
//
// A frame is valid if and only if
//   (1) magic and kind are known,
//   (2) its salt equals the header's salt (frames of older generations left
//       behind after a reset never match: each generation draws a new salt),
//   (3) its chain checksum equals crc32c(previous frame's chain, header bytes
//       before `chain`, payload) — the first frame chains from crc32c(salt).
// A commit is complete if its commit frame is valid; the log's content is the
// longest prefix of valid frames, cut back to its last complete commit. So a
// torn tail (a crash mid-append) is invisible, and replay is a pure function
// of the bytes: replaying twice, or after a crash during replay, gives the
// same state.
//
// Because commits only start after the previous commit's fdatasync returned,
// a valid-looking frame of this generation with txn > last complete + 1
// *after* the cut proves committed data was damaged: that is reported as
// corruption, never silently dropped.
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/file_format.hpp"

namespace steppe::storage {

inline constexpr char wal_magic[8] = {'s', 't', 'e', 'p', 'w', 'a', 'l', '1'};

struct wal_header {
    char magic[8];                //  0 wal_magic
    std::uint32_t version;        //  8 format_version
    std::uint32_t page_size;      // 12 4096
    std::uint8_t store_id[16];    // 16 must equal the main file's
    std::uint64_t generation;     // 32 main header's checkpoint_gen + 1
    std::uint64_t salt;           // 40 main header's next_wal_salt
    std::uint32_t reserved;       // 48 zero
    std::uint32_t crc;            // 52 crc32c of bytes [0, 52)
};
static_assert(sizeof(wal_header) == 56);
inline constexpr std::uint64_t wal_frames_offset = page_size;

inline constexpr std::uint32_t frame_magic = 0x46575053;  // "SPWF"
enum class frame_kind : std::uint32_t { page = 1, commit = 2 };

struct frame_header {
    std::uint32_t magic;        //  0 frame_magic
    frame_kind kind;            //  4
    std::uint64_t salt;         //  8 the generation's salt
    std::uint64_t txn;          // 16 commit sequence number this frame belongs to
    std::uint64_t number;       // 24 page: logical page number; commit: page count
    std::uint32_t payload_crc;  // 32 page: page_checksum(image); commit: frames in the txn
    std::uint32_t chain;        // 36 chained checksum (see above)
};
static_assert(sizeof(frame_header) == 40);

inline constexpr std::size_t page_frame_size = sizeof(frame_header) + page_size;
inline constexpr std::size_t commit_frame_size = sizeof(frame_header) + meta_size;
static_assert(page_frame_size % 8 == 0 && commit_frame_size % 8 == 0);

}  // namespace steppe::storage
