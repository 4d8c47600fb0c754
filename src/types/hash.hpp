// FNV-1a 64: the one hash of the types module, for layout fingerprints and the
// catalog checksum. Fixed forever: fingerprints are stored in stores.
// It changes its state on any one-byte change, so every single-bit flip of an
// encoded catalog is caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace steppe::types::detail {

class fnv1a {
public:
    void bytes(std::span<const std::byte> data) noexcept {
        for (std::byte b : data) h_ = (h_ ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
    }
    void text(std::string_view s) noexcept { bytes(std::as_bytes(std::span(s.data(), s.size()))); }
    // Integers are hashed as little-endian bytes so the value is the same on every host.
    void u64(std::uint64_t v, int width = 8) noexcept {
        for (int i = 0; i < width; ++i) h_ = (h_ ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    }
    std::uint64_t value() const noexcept { return h_; }

private:
    std::uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace steppe::types::detail
