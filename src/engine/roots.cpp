// The roots table codec (layout in roots.hpp).
#include "engine/roots.hpp"

#include <steppe/error.hpp>

#include "common/bytes.hpp"

namespace steppe {

std::vector<std::byte> encode_roots(const root_table& roots) {
    common::byte_writer w;
    w.put(static_cast<std::uint32_t>(roots.size()));
    for (const auto& [name, e] : roots) {
        w.put(name);
        w.put(e.type);
        w.put(e.address);
    }
    return w.take();
}

root_table decode_roots(std::span<const std::byte> in, const std::string& where) {
    root_table roots;
    common::byte_reader r(in, where + ": the roots table");
    for (auto count = r.get<std::uint32_t>(); count > 0; --count) {
        std::string name = r.get_string();
        // Encoded from a map, the names are unique and in order: a name
        // again (one renamed) or out of order is damage, which the map
        // would hide by keeping one of the roots.
        if (!roots.empty() && name <= roots.rbegin()->first) {
            const std::string& last = roots.rbegin()->first;
            throw error(errc::corrupt, where + ": the roots table holds root '" + name + "' " +
                                           (name == last ? "twice" : "after '" + last + "', out of name order") +
                                           ": the table is damaged");
        }
        root_entry e;
        e.type = r.get<std::uint32_t>();
        e.address = r.get<std::uint64_t>();
        roots.emplace_hint(roots.end(), std::move(name), e);
    }
    r.expect_end();
    return roots;
}

}  // namespace steppe
