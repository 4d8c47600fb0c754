// expect: steppe: a union that holds pointers cannot be swizzled
#include <steppe/layout.hpp>
struct Link { int tag; Link* next; };
union Slot { long n; Link link; STEPPE_FIELDS(n, link) };
struct Outer { Slot slot; };
const auto& l = steppe::types::layout_of<Outer>();
