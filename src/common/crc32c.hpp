// CRC32C (Castagnoli): the checksum of every page, frame and header steppe
// writes, and of pages the vm module must tell unchanged. Hardware-
// accelerated with SSE4.2 where the CPU has it. Async-signal-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace steppe::common {

// Extends `crc` over `data`; crc32c(0, all) == crc32c(crc32c(0, a), b) for all = a ++ b.
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) noexcept;

// crc32c(crc, page) for a page of 4096 bytes whose crc32c(0, page) is
// `page_crc`, without reading the page: a checksum over a header and then a
// page whose own checksum is known costs a table lookup, not a second pass.
std::uint32_t crc32c_extend_by_page(std::uint32_t crc, std::uint32_t page_crc) noexcept;

}  // namespace steppe::common
