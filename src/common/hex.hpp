// Hexadecimal for messages (normal code: these allocate; the signal path
// uses common::in_hex with a fixed_message).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace steppe::common {

// "0x" and the lower-case digits of `value`, no leading zeros: "0x7f3a000".
std::string hex(std::uint64_t value);
// Two lower-case digits per byte, in order, no prefix: an id such as a store's.
std::string hex(std::span<const std::uint8_t> bytes);

}  // namespace steppe::common
