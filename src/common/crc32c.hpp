// CRC32C (Castagnoli): the checksum of every page, frame and header steppe
// writes, and of pages the vm module must tell unchanged. Hardware-
// accelerated with SSE4.2 where the CPU has it. Async-signal-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace steppe::common {

// Extends `crc` over `data`; crc32c(0, all) == crc32c(crc32c(0, a), b) for all = a ++ b.
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) noexcept;

}  // namespace steppe::common
