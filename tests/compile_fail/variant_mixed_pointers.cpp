// expect: steppe: this std::variant cannot be stored
#include <steppe/containers.hpp>

#include <variant>

const auto& l = steppe::types::layout_of<std::variant<int, long*>>();
