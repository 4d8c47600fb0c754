// The write-ahead log ("<store>-wal"). Prose and a worked example: docs/format.md.
//
// Offset 0: a wal_header in a 4096-byte block. Frames follow back to back:
//
//   page frame    frame_header{kind=page,   number=logical page}  + 4096-byte page image
//   commit frame  frame_header{kind=commit, number=page count}    + meta_size bytes of meta
//
// A frame is *intact* if and only if
//   (1) magic and kind are known,
//   (2) its salt equals the generation's salt (frames of older generations
//       left behind after a reset never match: each generation draws a new
//       salt),
//   (3) frame_crc matches (frame_crc_of): the frame checks out on its own, so
//       a scan past damage can still trust the frames after it, and
//   (4) a page frame's payload_crc is its image's page_checksum.
// It is *in order* if also its txn is one past the last complete commit and
// `chain` = chain_of(previous frame's chain, frame_crc) — the first frame
// chains from chain_seed(salt). A commit is complete if its commit frame is
// intact and in order and counts the page frames before it; the log's content
// is the longest prefix of intact, in-order frames, cut back to its last
// complete commit.
//
// What may be dropped at recovery (docs/format.md, "Damage or a torn tail"):
// only a transaction nothing shows to have committed. A commit is shown to
// have been durable by the main file's commit mark (file_format.hpp), written
// after it returned, or by an intact frame of a later transaction (a commit
// starts only after the previous one returned). Damage before a commit shown
// durable is `corrupt`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/crc32c.hpp"
#include "storage/file_format.hpp"

namespace steppe::storage {

inline constexpr char wal_magic[8] = {'s', 't', 'e', 'p', 'w', 'a', 'l', '2'};

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

inline constexpr std::uint32_t frame_magic = 0x32575053;  // "SPW2"
enum class frame_kind : std::uint32_t { page = 1, commit = 2 };

struct frame_header {
    std::uint32_t magic;        //  0 frame_magic
    frame_kind kind;            //  4
    std::uint64_t salt;         //  8 the generation's salt
    std::uint64_t txn;          // 16 commit sequence number this frame belongs to
    std::uint64_t number;       // 24 page: logical page number; commit: page count
    std::uint32_t payload_crc;  // 32 page: page_checksum(image); commit: page frames in the txn
    std::uint32_t reserved;     // 36 zero
    std::uint32_t frame_crc;    // 40 frame_crc_of(): this frame alone
    std::uint32_t chain;        // 44 chain_of(previous chain, frame_crc): the frames' order
};
static_assert(sizeof(frame_header) == 48);

inline constexpr std::size_t page_frame_size = sizeof(frame_header) + page_size;
inline constexpr std::size_t commit_frame_size = sizeof(frame_header) + meta_size;
static_assert(page_frame_size % 8 == 0 && commit_frame_size % 8 == 0);

inline constexpr std::size_t payload_size(frame_kind kind) {
    return kind == frame_kind::page ? page_size : kind == frame_kind::commit ? meta_size : 0;
}

// A page frame's image is covered through payload_crc (its page checksum, which
// is computed anyway), so the frame's own checksum reads 40 header bytes; a
// commit frame's covers its meta too.
inline std::uint32_t frame_crc_of(const frame_header& h, const void* payload) noexcept {
    std::uint32_t c = common::crc32c(0, &h, offsetof(frame_header, frame_crc));
    return h.kind == frame_kind::commit ? common::crc32c(c, payload, meta_size) : c;
}
inline std::uint32_t chain_seed(std::uint64_t salt) noexcept { return common::crc32c(0, &salt, sizeof salt); }
inline std::uint32_t chain_of(std::uint32_t previous, std::uint32_t frame_crc) noexcept {
    return common::crc32c(previous, &frame_crc, sizeof frame_crc);
}

}  // namespace steppe::storage
