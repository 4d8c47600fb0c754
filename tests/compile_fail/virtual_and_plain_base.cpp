// expect: steppe: a virtual base of this class is also a non-virtual base of it
#include <steppe/layout.hpp>
struct Base { virtual ~Base() = default; int id = 0; STEPPE_FIELDS(id) };
struct Shared : virtual Base { int s = 0; STEPPE_BASES(Base) STEPPE_FIELDS(s) };
struct Own : Base { int o = 0; STEPPE_BASES(Base) STEPPE_FIELDS(o) };
struct Both : Shared, Own { int b = 0; STEPPE_BASES(Shared, Own) STEPPE_FIELDS(b) };
const auto& l = steppe::types::layout_of<Both>();
