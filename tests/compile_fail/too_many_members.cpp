// expect: steppe: aggregate with more than 64 members
#include <steppe/layout.hpp>
#define F8(p) int p##0, p##1, p##2, p##3, p##4, p##5, p##6, p##7;
struct Wide { F8(a) F8(b) F8(c) F8(d) F8(e) F8(f) F8(g) F8(h) int last; };
const auto& l = steppe::types::layout_of<Wide>();
