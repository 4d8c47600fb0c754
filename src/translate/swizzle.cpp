#include "translate/swizzle.hpp"

namespace steppe::translate {

bool to_persistent(const page_map& map, std::uintptr_t v, std::uint64_t& out) noexcept {
    if (v == 0) {
        out = 0;
        return true;
    }
    auto where = map.lookup(v);
    if (where.what == page_map::kind::page) {
        out = where.page * page_size + (v % page_size);
        return true;
    }
    // The first byte of a guard page is the end of the unit before it.
    if (where.what == page_map::kind::guard && v % page_size == 0) {
        auto before = map.lookup(v - 1);
        if (before.what != page_map::kind::page) return false;
        out = end_tag | ((before.page + 1) * page_size);
        return true;
    }
    return false;
}

}  // namespace steppe::translate
