// The roots table both engines keep as a blob: name -> (catalog index of the
// root's type, the engine's persistent name of the object: an address in the
// page engine, an object identifier in the object engine).
//
// Bytes: u32 count, then per root in name order: u32 name length, the name's
// bytes, u32 catalog index, u64 persistent name (docs/format.md, "Roots").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace steppe {

struct root_entry {
    std::uint32_t type;     // catalog index
    std::uint64_t address;  // persistent
    friend bool operator==(const root_entry&, const root_entry&) = default;
};
using root_table = std::map<std::string, root_entry, std::less<>>;

std::vector<std::byte> encode_roots(const root_table& roots);
// errc::corrupt naming `where` if the bytes are not a roots table (names
// out of order or twice included).
root_table decode_roots(std::span<const std::byte> in, const std::string& where);

}  // namespace steppe
