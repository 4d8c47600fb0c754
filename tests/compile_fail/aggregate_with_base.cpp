// expect: steppe: an aggregate with base classes cannot be reflected
#include <steppe/layout.hpp>
struct Base { int id; };
struct Derived : Base { Derived* next; };
const auto& l = steppe::types::layout_of<Derived>();
