// Writes shapes into a store: vptrs are committed as relinkable tokens.
#include <cstdio>

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
    store.commit();
    std::printf("writer: Circle's vtable at %p\n", *reinterpret_cast<void**>(shapes[0]));
    return 0;
}
