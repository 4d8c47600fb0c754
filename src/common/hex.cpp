#include "common/hex.hpp"

#include <charconv>

namespace steppe::common {

std::string hex(std::uint64_t value) {
    char digits[2 + 16] = {'0', 'x'};
    return std::string(digits, std::to_chars(digits + 2, digits + sizeof digits, value, 16).ptr);
}

std::string hex(std::span<const std::uint8_t> bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (auto b : bytes) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

}  // namespace steppe::common
