// An object-engine type whose third constructor throws, for the tests of
// make_array and create_array when an element's constructor throws.
#pragma once

#include <steppe/objects.hpp>

#include <cstdint>
#include <stdexcept>

namespace steppe::test {

struct ThirdThrows {
    static inline int made = 0;
    std::int64_t id;
    ThirdThrows() : id(made++) {
        if (id == 2) throw std::runtime_error("the third constructor throws");
    }
    STEPPE_FIELDS(id)
};

}  // namespace steppe::test
