// expect: steppe: a function pointer cannot be persisted
#include <steppe/layout.hpp>
struct Callback { int id; void (*fn)(int); };
const auto& l = steppe::types::layout_of<Callback>();
