// expect: steppe: a reference cannot be stored in a persistent object
#include <steppe/layout.hpp>
struct Holder { int id; int& ref; };
const auto& l = steppe::types::layout_of<Holder>();
