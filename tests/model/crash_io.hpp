// Crash points and simulated power loss underneath the PUBLIC API.
//
// steppe::store opens its files through the real file system, so the
// storage-level fault_env (tests/support/fault_env.hpp) cannot be slid under
// it. Instead this test executable interposes the three libc calls the
// storage manager writes with — pwrite, fdatasync, fsync — (a definition in
// the executable wins over libc's; the real one is found with
// dlsym(RTLD_NEXT)). For files inside the tracked directory (the store's main
// file and log; never its lock file) it remembers, as fault_env does, what was
// durable at each file's last fdatasync and which writes came after.
//
//   arm(n, m, seed)  the n-th following pwrite/fdatasync on a tracked file
//                    (0 = the next one) does not happen: the process dies
//                    there, either by SIGKILL alone (mode kill: the page cache
//                    survives, as after kill -9) or after rewriting every
//                    tracked file as a power loss could leave it (the durable
//                    image plus all / none / a random subset / a torn prefix
//                    of the unsynced writes).
//   crash_now(m)     the same, at once.
//
// Only the forked worker processes of the model test track anything; in any
// other process the interposers pass straight through. Single-threaded use.
// Real fdatasync calls are skipped (durability is simulated, as in fault_env)
// unless STEPPE_MODEL_REAL_FSYNC=1.
#pragma once

#include <cstdint>
#include <string>

namespace steppe_model::crash_io {

enum class mode : std::uint32_t {
    kill,           // SIGKILL only: every write made so far survives
    keep_all,       // power loss, all unsynced writes reached the disk
    drop_all,       // power loss, none did
    random_subset,  // power loss, each unsynced write kept or lost
    torn,           // power loss, the last unsynced write of each file cut at a 512-byte sector
    random_torn,    // power loss, each unsynced write kept, lost, or cut at a sector
    count_
};
const char* to_string(mode m);

// Starts tracking files directly inside `dir` (not the "-lock" file).
void track_directory(const std::string& dir);
void arm(long calls, mode m, std::uint64_t seed);
void disarm();
// Tracked pwrite + fdatasync calls so far in this process.
long calls();
[[noreturn]] void crash_now(mode m, std::uint64_t seed);

}  // namespace steppe_model::crash_io
