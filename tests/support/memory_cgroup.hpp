// A memory limit for a child process (test::in_child, child.hpp): a real
// cgroup v1 group (this machine has the v1 memory controller and runs tests
// as root).
#pragma once

#include <cstdint>
#include <string>

namespace steppe::test {

// A real cgroup v1 group under this process's own, capped at `limit` bytes;
// "" where the machine has no v1 memory controller or we may not make one.
std::string make_memory_group(std::uint64_t limit, const std::string& name);
// Moves the calling process into the group.
void join_memory_group(const std::string& dir);
// A group's directory goes once its last process has (the child was reaped).
void remove_memory_group(const std::string& dir);

}  // namespace steppe::test
