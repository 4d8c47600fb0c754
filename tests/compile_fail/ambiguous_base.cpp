// expect: steppe: a declared base must be a proper, unambiguous base class
#include <steppe/layout.hpp>
struct Base { int id = 0; STEPPE_FIELDS(id) };
struct Left : Base { int l = 0; STEPPE_BASES(Base) STEPPE_FIELDS(l) };
struct Right : Base { int r = 0; STEPPE_BASES(Base) STEPPE_FIELDS(r) };
struct Both : Left, Right { int b = 0; STEPPE_BASES(Left, Right, Base) STEPPE_FIELDS(b) };
const auto& l = steppe::types::layout_of<Both>();
