#include "common/crc32c.hpp"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace steppe::common {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78;  // reflected Castagnoli

constexpr std::array<std::uint32_t, 256> make_table() {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
        table[i] = c;
    }
    return table;
}
constexpr auto kTable = make_table();

std::uint32_t crc32c_software(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
    while (n--) crc = kTable[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

__attribute__((target("sse4.2")))
std::uint32_t crc32c_hardware(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
    std::uint64_t c = crc;
    for (; n >= 8; n -= 8, p += 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    std::uint32_t c32 = static_cast<std::uint32_t>(c);
    for (; n > 0; --n) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

// Resolved once at load time, so the signal-context path never runs cpuid.
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");

}  // namespace

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) noexcept {
    auto p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    crc = kHaveSse42 ? crc32c_hardware(crc, p, size) : crc32c_software(crc, p, size);
    return ~crc;
}

}  // namespace steppe::common
