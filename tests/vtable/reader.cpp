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

// Calls through the virtual base (a this-adjusting thunk) and both paths to
// it, and casts that read the relinked vtables' offsets.
bool diamonds_ok(steppe::store& store) {
    auto* a = store.find_root<geo::Assembly>("assembly");
    double mass = 0;
    for (geo::Component* c = a->first; c; c = c->next) mass += c->mass();
    std::string described, owners;
    long prices = 0;
    for (int i = 0; i < 3; ++i) {
        described += a->labels[i]->describe() + ";";
        owners += a->labels[i]->owner->describe() + ";";
        prices += a->priced[i]->price();
    }
    auto* widget = dynamic_cast<geo::Widget*>(a->labels[1]);
    std::printf("reader: widgets weigh %.2f, %s owned by %s prices %ld\n", mass, described.c_str(), owners.c_str(),
                prices);
    return mass == 0.5 + 1.0 + 1.5 && described == "widget bolt;widget nut;widget gear;" &&
           owners == "widget nut;widget gear;widget bolt;" && prices == 20 + 40 + 7 && widget != nullptr &&
           static_cast<geo::Labeled*>(widget) == a->labels[1] &&
           dynamic_cast<geo::Priced*>(static_cast<geo::Component*>(widget)) == a->priced[1] &&
           dynamic_cast<geo::Widget*>(a->priced[2]) == nullptr && a->priced[2]->describe() == "labeled spare";
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    if (unrelated::spread(10) != 15) return 3;
    // Read through base pointers only: named, so open compares their layouts.
    steppe::types::declare<geo::Circle, geo::Rect, geo::Widget, geo::Priced>();
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
    return ok && diamonds_ok(store) ? 0 : 1;
}
