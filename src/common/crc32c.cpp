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

// The crc32 instruction takes 3 cycles before the next can use its result,
// but the CPU starts one every cycle: a page is summed as three interleaved
// stripes, joined by shifting (shifted). A page checksum runs twice per
// fault (the read's check, the fault space's clean sum), so this is worth
// about three times less of each fault.
constexpr std::size_t stripe = 1360;  // 3 stripes + 16 bytes = a 4 KiB page

__attribute__((target("sse4.2")))
std::uint64_t crc32c_words(std::uint64_t c, const unsigned char* p, std::size_t words) noexcept {
    for (; words > 0; --words, p += 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    return c;
}

// The crc register after n more zero bytes is a linear function of the
// register before: the xor of one table entry per byte of it, built from
// the 32 single-bit registers shifted (a stripe's: a dozen microseconds at
// load time).
using shift_table = std::array<std::array<std::uint32_t, 256>, 4>;

// The 32 single-bit registers shifted; as a matrix over GF(2), column i is
// where bit i goes.
using gf2_matrix = std::array<std::uint32_t, 32>;

// The table from the 32 single-bit registers shifted.
constexpr shift_table table_from_bits(const gf2_matrix& bit) noexcept {
    shift_table t{};
    for (int k = 0; k < 4; ++k)
        for (std::uint32_t b = 0; b < 256; ++b)
            for (int i = 0; i < 8; ++i)
                if (b >> i & 1) t[k][b] ^= bit[8 * k + i];
    return t;
}

std::uint32_t shifted(const shift_table& t, std::uint32_t c) noexcept {
    return t[0][c & 0xFF] ^ t[1][c >> 8 & 0xFF] ^ t[2][c >> 16 & 0xFF] ^ t[3][c >> 24];
}

__attribute__((target("sse4.2")))
std::uint32_t crc32c_hardware(const shift_table& shift, std::uint32_t crc, const unsigned char* p,
                              std::size_t n) noexcept {
    std::uint64_t c = crc;
    for (; n >= 3 * stripe; n -= 3 * stripe, p += 3 * stripe) {
        std::uint64_t c1 = 0, c2 = 0;
        for (std::size_t i = 0; i < stripe; i += 8) {
            std::uint64_t w0, w1, w2;
            std::memcpy(&w0, p + i, 8);
            std::memcpy(&w1, p + stripe + i, 8);
            std::memcpy(&w2, p + 2 * stripe + i, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = shifted(shift, static_cast<std::uint32_t>(c)) ^ c1;
        c = shifted(shift, static_cast<std::uint32_t>(c)) ^ c2;
    }
    c = crc32c_words(c, p, n / 8);
    p += n / 8 * 8;
    std::uint32_t c32 = static_cast<std::uint32_t>(c);
    for (n %= 8; n > 0; --n) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

// Resolved once at load time, so the signal-context path never runs cpuid.
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");

__attribute__((target("sse4.2")))
shift_table make_stripe_shift() noexcept {
    static constexpr unsigned char zeros[stripe] = {};
    gf2_matrix bit;
    for (int i = 0; i < 32; ++i)
        bit[i] = static_cast<std::uint32_t>(crc32c_words(std::uint32_t{1} << i, zeros, stripe / 8));
    return table_from_bits(bit);
}
const shift_table kStripeShift = kHaveSse42 ? make_stripe_shift() : shift_table{};

// A page's shift, made by the compiler (crc32c_extend_by_page may run
// before this file's initializers would): one zero byte's shift, squared
// 12 times for 4,096 bytes (a loop over every bit of the page passes
// clang's constexpr step limit). m times v:
constexpr std::uint32_t times(const gf2_matrix& m, std::uint32_t v) noexcept {
    std::uint32_t r = 0;
    for (int i = 0; i < 32; ++i)
        if (v >> i & 1) r ^= m[i];
    return r;
}

constexpr shift_table make_page_shift() noexcept {
    gf2_matrix m{};
    for (int i = 0; i < 32; ++i) {
        std::uint32_t c = std::uint32_t{1} << i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPolynomial & (0u - (c & 1u)));
        m[i] = c;
    }
    for (int doubled = 0; doubled < 12; ++doubled) {  // 1 byte, 2, 4, ..., 4,096
        gf2_matrix twice{};
        for (int i = 0; i < 32; ++i) twice[i] = times(m, m[i]);
        m = twice;
    }
    return table_from_bits(m);
}
constexpr shift_table kPageShift = make_page_shift();

}  // namespace

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) noexcept {
    auto p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    crc = kHaveSse42 ? crc32c_hardware(kStripeShift, crc, p, size) : crc32c_software(crc, p, size);
    return ~crc;
}

// crc32c(c, B) = crc32c(0, B) ^ S(c), S the register's shift through |B|
// zero bytes: the inversions at both ends cancel in the xor.
std::uint32_t crc32c_extend_by_page(std::uint32_t crc, std::uint32_t page_crc) noexcept {
    return page_crc ^ shifted(kPageShift, crc);
}

}  // namespace steppe::common
