// expect: steppe: bit-field members are not supported
#include <steppe/layout.hpp>
struct Flags { unsigned a : 3; unsigned b : 5; int* p; };
const auto& l = steppe::types::layout_of<Flags>();
