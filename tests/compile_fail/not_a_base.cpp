// expect: steppe: a declared base must be a proper, unambiguous base class
#include <steppe/layout.hpp>
struct Other { int id = 0; };
struct Derived { Derived* next = nullptr; STEPPE_BASES(Other) STEPPE_FIELDS(next) };
const auto& l = steppe::types::layout_of<Derived>();
