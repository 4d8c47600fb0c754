// expect: steppe: a polymorphic class needs STEPPE_FIELDS
#include <steppe/layout.hpp>
struct Shape { virtual ~Shape() = default; Shape* parent = nullptr; };
const auto& l = steppe::types::layout_of<Shape>();
