// The write-ahead log ("<store>-wal"). Prose and a worked example: docs/format.md.
//
// Offset 0: a wal_header in a 4096-byte block. Frames follow back to back:
//
//   page frame    frame_header{kind=page,   number=logical page}  + 4096-byte page image
//   diff frame    frame_header{kind=diff,   number=logical page}  + payload_bytes of a
//                 difference against the main file's copy of the page (page_diff.hpp),
//                 zero-padded to a multiple of 8
//   commit frame  frame_header{kind=commit, number=page count}    + meta_size bytes of meta
//
// A diff frame stands for the page image it makes of the main file's page
// as that is at the log's generation (the main file changes only at a
// checkpoint, which copies the newest versions: by page_diff.hpp's D1 a
// difference applied to the page a torn checkpoint left still gives its
// version). Its payload_crc is that image's page_checksum, checked when
// the page is read: a main-file page damaged under it fails there.
//
// A frame is *intact* if and only if
//   (1) magic and kind are known,
//   (2) its salt equals the generation's salt (frames of older generations
//       left behind after a reset never match: each generation draws a new
//       salt),
//   (3) frame_crc matches (frame_crc_of): the frame checks out on its own, so
//       a scan past damage can still trust the frames after it,
//   (4) a page frame's payload_crc is its image's page_checksum, and
//   (5) a diff frame's payload is well formed (page_diff_well_formed).
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
#include "storage/page_diff.hpp"

namespace steppe::storage {

inline constexpr char wal_magic[8] = {'s', 't', 'e', 'p', 'w', 'a', 'l', '2'};
// The log's own version (the main file's is format_version): 3 added diff
// frames. Version 2 logs (no diff frames) are read as well; a steppe that
// reads only version 2 refuses a version 3 log by its header.
inline constexpr std::uint32_t wal_format_version = 3;
inline constexpr std::uint32_t oldest_wal_format_version = 2;

struct wal_header {
    char magic[8];                //  0 wal_magic
    std::uint32_t version;        //  8 wal_format_version
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
enum class frame_kind : std::uint32_t { page = 1, commit = 2, diff = 3 };

struct frame_header {
    std::uint32_t magic;        //  0 frame_magic
    frame_kind kind;            //  4
    std::uint64_t salt;         //  8 the generation's salt
    std::uint64_t txn;          // 16 commit sequence number this frame belongs to
    std::uint64_t number;       // 24 page, diff: logical page number; commit: page count
    std::uint32_t payload_crc;  // 32 page, diff: page_checksum(image); commit: page frames in the txn
    std::uint32_t payload_bytes;// 36 diff: the difference's length (<= max_diff_bytes); else zero
    std::uint32_t frame_crc;    // 40 frame_crc_of(): this frame alone
    std::uint32_t chain;        // 44 chain_of(previous chain, frame_crc): the frames' order
};
static_assert(sizeof(frame_header) == 48);

// Open reads the log past its last replayed commit in pieces of this many
// bytes (file_store::examine_tail), each with the bytes a frame starting in
// it needs checked; small, as every open reads the log to its end.
inline constexpr std::size_t tail_scan_piece_bytes = 128 << 10;

inline constexpr std::size_t page_frame_size = sizeof(frame_header) + page_size;
inline constexpr std::size_t commit_frame_size = sizeof(frame_header) + meta_size;
static_assert(page_frame_size % 8 == 0 && commit_frame_size % 8 == 0);

inline constexpr std::size_t padded_to_frame(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// The bytes a frame's payload takes in the log (a diff's padding included);
// 0 for a frame of unknown kind or a diff longer than any the log holds.
inline constexpr std::size_t payload_size(const frame_header& h) {
    switch (h.kind) {
    case frame_kind::page: return page_size;
    case frame_kind::commit: return meta_size;
    case frame_kind::diff: return h.payload_bytes <= max_diff_bytes ? padded_to_frame(h.payload_bytes) : 0;
    }
    return 0;
}
inline constexpr bool payload_known(const frame_header& h) {
    return payload_size(h) != 0 || (h.kind == frame_kind::diff && h.payload_bytes == 0);
}
// The payload bytes frame_crc covers: a page frame's image is covered
// through payload_crc (its page checksum, which is computed anyway), so its
// frame checksum reads the 40 header bytes only.
inline constexpr std::size_t covered_payload(const frame_header& h) {
    return h.kind == frame_kind::commit ? meta_size : h.kind == frame_kind::diff ? h.payload_bytes : 0;
}

inline std::uint32_t frame_crc_of(const frame_header& h, const void* payload) noexcept {
    std::uint32_t c = common::crc32c(0, &h, offsetof(frame_header, frame_crc));
    return common::crc32c(c, payload, covered_payload(h));
}
inline std::uint32_t chain_seed(std::uint64_t salt) noexcept { return common::crc32c(0, &salt, sizeof salt); }
inline std::uint32_t chain_of(std::uint32_t previous, std::uint32_t frame_crc) noexcept {
    return common::crc32c(previous, &frame_crc, sizeof frame_crc);
}

}  // namespace steppe::storage
