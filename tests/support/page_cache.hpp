// What the kernel's page cache holds of a file, seen from outside
// (mincore), for tests of read-ahead: a file dropped from it as after a
// reboot, and its cached pages counted once asynchronous reads settle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace steppe::test {

// fdatasync, then POSIX_FADV_DONTNEED: the file's clean pages leave the
// page cache (fails the test if the file cannot be opened).
void drop_from_page_cache(const std::string& path);
// The read-ahead of the device the file is on, in bytes (0: unknown; fails
// the test if the file cannot be opened).
std::uint64_t device_read_ahead(const std::string& path);
// The kernel's page size: what cached_pages counts in.
std::size_t system_page_size();
// The file's pages the page cache holds now.
std::size_t cached_pages(const std::string& path);
// The same once the count has stopped growing (read-ahead is
// asynchronous): up to 2 s.
std::size_t cached_pages_settled(const std::string& path);

}  // namespace steppe::test
