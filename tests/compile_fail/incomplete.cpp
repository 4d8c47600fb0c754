// expect: steppe: the type is incomplete here
#include <steppe/layout.hpp>
struct Later;
const auto& l = steppe::types::layout_of<Later>();
