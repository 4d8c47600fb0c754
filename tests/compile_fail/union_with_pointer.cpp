// expect: steppe: a union that holds pointers cannot be swizzled
#include <steppe/layout.hpp>
union Slot { long n; void* p; STEPPE_FIELDS(n, p) };
const auto& l = steppe::types::layout_of<Slot>();
