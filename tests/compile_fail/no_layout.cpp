// expect: steppe: type has no derivable layout
#include <steppe/layout.hpp>
class Counter {
public:
    explicit Counter(int start) : n_(start) {}
private:
    int n_;
};
const auto& l = steppe::types::layout_of<Counter>();
