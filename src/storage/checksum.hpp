// The storage manager's checksums: CRC32C (common/crc32c.hpp) of pages,
// frames and headers. Async-signal-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/crc32c.hpp"

namespace steppe::storage {

using common::crc32c;

inline std::uint32_t crc32c(std::span<const std::byte> data) noexcept {
    return crc32c(0, data.data(), data.size());
}

// The checksum recorded for a page image. Never 0: 0 in a checksum slot means
// "never written" (the page must then read as all zeros).
inline std::uint32_t page_checksum(const std::byte* page, std::size_t size) noexcept {
    std::uint32_t c = crc32c(0, page, size);
    return c == 0 ? 1 : c;
}

}  // namespace steppe::storage
