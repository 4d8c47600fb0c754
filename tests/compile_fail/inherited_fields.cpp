// expect: steppe: this class inherits STEPPE_FIELDS or STEPPE_BASES
#include <steppe/layout.hpp>
class Base { int id_ = 0; STEPPE_FIELDS(id_) };
class Derived : public Base { Derived* next_ = nullptr; };
const auto& l = steppe::types::layout_of<Derived>();
