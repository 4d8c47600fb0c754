// Reads the shapes back in another executable, whose code (and so whose
// vtables) sit elsewhere: more classes, more functions, another order.
#include <cstdio>
#include <memory>
#include <vector>

#include "shapes.hpp"

namespace unrelated {
struct Base {
    virtual ~Base() = default;
    virtual int f() const { return 1; }
};
struct Derived : Base {
    int f() const override { return 2; }
};
int spread(int n) {
    std::vector<std::unique_ptr<Base>> v;
    for (int i = 0; i < n; ++i) v.push_back(i % 2 ? std::make_unique<Base>() : std::make_unique<Derived>());
    int s = 0;
    for (auto& b : v) s += b->f();
    return s;
}
}  // namespace unrelated

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    if (unrelated::spread(10) != 15) return 3;
    steppe::open_options o;
    o.read_only = true;
    auto store = steppe::store::open(argv[1], o);
    auto* d = store.find_root<geo::Drawing>("drawing");
    double area = 0;
    int corners = 0, count = 0;
    for (geo::Shape* s = d->first; s; s = s->next, ++count) {
        area += s->area();
        corners += s->corners();
    }
    std::string names;
    for (geo::Named* n : d->labels) names += n->name() + ";";
    std::printf("reader: %d shapes, area %.1f, %d corners, names %s; Circle's vtable here at %p\n", count, area,
                corners, names.c_str(), *reinterpret_cast<void**>(d->first));
    bool ok = count == 4 && area == 3 + 6 + 12 + 20 && corners == 8 && names == "circle;rect 2;circle;rect 4;" &&
              dynamic_cast<geo::Circle*>(d->first) != nullptr;
    return ok ? 0 : 1;
}
