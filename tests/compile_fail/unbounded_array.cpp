// expect: steppe: an array of unknown bound has no layout
#include <steppe/layout.hpp>
const auto& l = steppe::types::layout_of<int[]>();
