// expect: steppe: a reference cannot be stored in a persistent object
#include <steppe/layout.hpp>
struct Holder { const long& ref; };
const auto& l = steppe::types::layout_of<Holder>();
