// Writes shapes into a store: vptrs are committed as relinkable tokens.
#include <cstdio>
#include <cstring>

#include "shapes.hpp"

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    auto store = steppe::store::open(argv[1]);
    auto* d = store.root<geo::Drawing>("drawing");
    geo::Shape* shapes[4] = {store.make<geo::Circle>(1.0), store.make<geo::Rect>(2.0, 3.0),
                             store.make<geo::Circle>(2.0), store.make<geo::Rect>(4.0, 5.0)};
    for (int i = 3; i >= 0; --i) {
        shapes[i]->next = d->first;
        d->first = shapes[i];
        d->labels[i] = dynamic_cast<geo::Named*>(shapes[i]);  // a secondary vptr
    }
    auto* a = store.root<geo::Assembly>("assembly");
    const char* names[3] = {"bolt", "nut", "gear"};
    geo::Widget* widgets[3];
    for (int i = 0; i < 3; ++i) {
        widgets[i] = store.make<geo::Widget>(names[i], 0.5 * (i + 1), 10L * (i + 1));
        widgets[i]->next = a->first;
        a->first = widgets[i];
    }
    for (int i = 0; i < 3; ++i) {
        widgets[i]->owner = widgets[(i + 1) % 3];  // a pointer inside the virtual base
        a->labels[i] = widgets[i];                  // pointers to the virtual base
        a->priced[i] = widgets[i];
    }
    auto* plain = store.make<geo::Priced>();  // a complete Priced: another vtable group
    std::strcpy(plain->label, "spare");
    plain->cents = 7;
    a->priced[2] = plain;
    store.commit();
    std::printf("writer: Circle's vtable at %p, Widget's at %p\n", *reinterpret_cast<void**>(shapes[0]),
                *reinterpret_cast<void**>(widgets[0]));
    return 0;
}
