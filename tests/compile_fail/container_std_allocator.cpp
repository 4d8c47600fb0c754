// expect: steppe: a std container with std::allocator cannot live in a store
#include <steppe/containers.hpp>

#include <vector>

struct Holder { std::vector<int> v; };
const auto& l = steppe::types::layout_of<Holder>();
