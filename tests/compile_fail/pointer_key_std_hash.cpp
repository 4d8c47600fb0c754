// expect: must not hash them by address
#include <steppe/containers.hpp>

#include <unordered_set>

const auto& l = steppe::types::layout_of<
    std::unordered_set<int*, std::hash<int*>, std::equal_to<int*>, steppe::allocator<int*>>>();
