// expect: steppe: STEPPE_FIELDS or steppe::describe names a member of a class
#include <steppe/layout.hpp>
struct Other { int x; };
class Handle { public: Handle() = default; int id = 0; };
template<> struct steppe::describe<Handle> { static constexpr auto fields = steppe::fields(&Other::x); };
const auto& l = steppe::types::layout_of<Handle>();
