// CRC32C (Castagnoli), the checksum of every page, frame and header steppe writes.
// Hardware-accelerated with SSE4.2 where the CPU has it. Async-signal-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace steppe::storage {

// Extends `crc` over `data`; crc32c(0, all) == crc32c(crc32c(0, a), b) for all = a ++ b.
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) noexcept;

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
