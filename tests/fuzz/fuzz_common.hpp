// Shared by the storage fuzz targets: how an input becomes a store on disk,
// the checksum fix-ups that let mutations reach past the CRCs, the workout a
// store gets once opened, and the stores the seed corpora are cut from.
//
// Oracle: storage::open and everything after it may throw steppe::error, nothing
// else. A crash, a sanitizer report, a hang, another exception type, or a page
// that reads back different from what a successful commit wrote is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace steppe::fuzz {

using bytes = std::vector<std::uint8_t>;

// Fix-ups, one bit each in the input's flags byte. Each recomputes a checksum
// (or an identity field) from the mutated bytes, so the fuzzer can explore
// what steppe does with structurally odd but checksum-valid files as well as
// with plain damage (bit clear).
enum fixup : std::uint8_t {
    fix_header_crc = 1 << 0,     // main header slots (pages 0, 1) and the commit mark (page 2) whose magic is intact
    fix_group_crc = 1 << 1,      // checksum pages whose magic is intact
    fix_page_sums = 1 << 2,      // data page checksums inside checksum pages
    fix_wal_header = 1 << 3,     // the log header's crc
    fix_frames = 1 << 4,         // page frames' payload_crc, every frame's frame_crc and chain, up to the first bad magic
    adopt_identity = 1 << 5,     // log header takes the main header's store id, generation and salt (frames follow)
    no_log = 1 << 6,             // the log file is absent
};
inline constexpr std::uint8_t all_fixups =
    fix_header_crc | fix_group_crc | fix_page_sums | fix_wal_header | fix_frames | adopt_identity;

void apply_fixups(bytes& main, bytes& wal, std::uint8_t flags);

// With STEPPE_FUZZ_SKIP_KNOWN=1 in the environment, true for inputs that
// trigger a finding already reported (tests/fuzz/crashes/README.md), so a long
// exploratory run can get past it. Never set in CI: run.sh must keep failing
// until the finding is fixed.
bool known_finding(const bytes& main, const bytes& wal);

// A directory for the target's files, made once per process (on /dev/shm when
// there is one: the targets measure logic, not the disk).
const std::string& work_dir();
void write_file(const std::string& path, const bytes& data);
bytes read_file(const std::string& path);
void remove_file(const std::string& path);

// The two-file input format: [u32 little-endian length L of the main file]
// [u8 fix-up flags][L bytes: the main file][the rest: the log].
bytes encode_store_input(const bytes& main, const bytes& wal, std::uint8_t flags);
// Decodes an input, applies its fix-ups and writes the files at `path` and
// `path`-wal (no log with the no_log flag). False if too short or a known
// finding being skipped.
bool write_store_input(const std::uint8_t* data, std::size_t size, const std::string& path);

// Opens `path` (create off) read-only, then read-write; reads every page,
// describe(), check(); read-write also commits a page, checkpoints, reopens
// and verifies it. Aborts on anything but steppe::error.
void exercise_store(const std::string& path);

// Seed stores. Each builds a store at `path` with a fixed sequence of commits
// and checkpoints (page contents depend only on transaction and page).
struct seed_store {
    const char* name;
    void (*build)(const std::string& path);
};
const std::vector<seed_store>& seed_stores();
// The store fuzz_wal_replay starts from: commits 1-3, a checkpoint, commits
// 4-6 in the log. With `extra`, that many more commits follow (seed logs that
// run past the base share its transaction numbers).
void build_replay_base(const std::string& path, int extra = 0);

}  // namespace steppe::fuzz
