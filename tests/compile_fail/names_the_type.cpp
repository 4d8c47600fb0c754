// expect: with T = Counter; bool Loud = true
// The type is named in the diagnostic, also when it is nested in another.
#include <steppe/layout.hpp>
class Counter {
public:
    explicit Counter(int start) : n_(start) {}
private:
    int n_;
};
struct Outer { int id; Counter c; };
const auto& l = steppe::types::layout_of<Outer>();
