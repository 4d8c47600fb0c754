// expect: steppe: STEPPE_FIELDS or steppe::describe names a member of a class that is neither this type nor one of its unambiguous non-virtual bases
#include <steppe/layout.hpp>
struct Base { virtual ~Base() = default; int id = 0; STEPPE_FIELDS(id) };
struct Derived : virtual Base { Derived* next = nullptr; STEPPE_BASES(Base) STEPPE_FIELDS(next, id) };
const auto& l = steppe::types::layout_of<Derived>();
