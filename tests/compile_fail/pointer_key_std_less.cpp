// expect: must not order them by address
#include <steppe/containers.hpp>

#include <set>

const auto& l = steppe::types::layout_of<std::set<int*, std::less<int*>, steppe::allocator<int*>>>();
