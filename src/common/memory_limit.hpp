// How much memory this process may use: the tightest of physical RAM, its
// memory cgroup's limit (v1 memory.limit_in_bytes or v2 memory.max, in its
// own group and every group above it), RLIMIT_AS and RLIMIT_DATA, less what
// is already used against each (the group's usage, the process's size).
// The engines' default resident budgets are half of it, so a store in a
// container with a memory cap sizes itself to the cap, not to the machine.
#pragma once

#include <cstdint>
#include <string>

namespace steppe::common {

struct memory_limit {
    // Bytes still free under the tightest limit, a cgroup's file cache
    // counted as free: the kernel takes clean cache back before it kills,
    // and a group that has read or written files holds plenty (a tester's
    // 64 MiB group with 61 MiB of it left a store's default budget 1 MiB).
    std::uint64_t available = 0;
    std::uint64_t limit = 0;      // that limit
    std::string source;           // which: "physical RAM", "cgroup v1 <file>", "cgroup v2 <file>", "RLIMIT_AS", "RLIMIT_DATA"
    // Of that, what is a cgroup's file cache (memory.stat's active and
    // inactive file pages); 0 for the other limits.
    std::uint64_t file_cache = 0;
};

// `root` prefixes /proc and /sys paths (tests give a fake tree; "" is the
// real system). Reading errors leave that limit out; never throws.
memory_limit available_memory(const std::string& root = "");

// For a pass that knows before it allocates what it will need (compaction's
// bookkeeping): no_space saying that `what` needs about `need` bytes
// (`why`), and what the process may still use and which limit says so,
// when `need` is more than that. An error at the start, not a bad_alloc or
// an OOM kill halfway. Returns what is free beyond `need`.
std::uint64_t ensure_available(std::uint64_t need, const std::string& what, const std::string& why);

}  // namespace steppe::common
