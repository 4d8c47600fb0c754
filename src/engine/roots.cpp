// The roots table codec (layout in roots.hpp).
#include "engine/roots.hpp"

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
        root_entry e;
        e.type = r.get<std::uint32_t>();
        e.address = r.get<std::uint64_t>();
        roots[name] = e;
    }
    r.expect_end();
    return roots;
}

}  // namespace steppe
