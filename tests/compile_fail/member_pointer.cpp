// expect: steppe: a pointer to member cannot be persisted
#include <steppe/layout.hpp>
struct Part { int x; };
struct Selector { int Part::*field; };
const auto& l = steppe::types::layout_of<Selector>();
