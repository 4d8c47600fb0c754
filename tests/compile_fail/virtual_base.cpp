// expect: steppe: a declared base must be a proper, unambiguous, non-virtual base
#include <steppe/layout.hpp>
struct Base { int id = 0; STEPPE_FIELDS(id) };
struct Derived : virtual Base { Derived* next = nullptr; STEPPE_BASES(Base) STEPPE_FIELDS(next) };
const auto& l = steppe::types::layout_of<Derived>();
