// expect: steppe: steppe cannot see inside this union
#include <steppe/layout.hpp>
union Number { int i; float f; };
const auto& l = steppe::types::layout_of<Number>();
