// The program that has every class of gallery.hpp: `gallery_writer write
// STORE` stores a Gallery; `gallery_writer verify STORE` calls every shape's
// virtual functions and checks what the missing-class reader committed
// (missing_reader_test.cpp: it renames the Dots and Hexagons and weighs the
// Dots).
#include <cstdio>
#include <cstring>
#include <string>

#include "gallery.hpp"

namespace {

int write(const char* path) {
    auto store = steppe::store::open(path);
    auto* g = store.root<geo::Gallery>("gallery");
    for (int i = 0; i < geo::Gallery::count; ++i) {
        const std::string kind = geo::gallery_labels[i];
        geo::Shape* s = nullptr;
        if (kind == "circle") s = store.make<geo::Circle>(1.0 + i);
        if (kind == "rect") s = store.make<geo::Rect>(2.0, 1.0 + i);
        if (kind == "dot") s = store.make<geo::Dot>();
        if (kind == "hexagon") s = store.make<geo::Hexagon>(1.0 + i);
        g->shapes[i] = s;
        g->names[i] = dynamic_cast<geo::Named*>(s);
        if (i > 0) g->shapes[i - 1]->next = s;
    }
    store.commit();
    return 0;
}

// Every shape still works as its class here, and the reader's edits are in.
int verify(const char* path) {
    auto store = steppe::store::open(path);
    auto* g = store.find_root<geo::Gallery>("gallery");
    if (!g) return 4;
    int bad = 0;
    for (int i = 0; i < geo::Gallery::count; ++i) {
        const std::string kind = geo::gallery_labels[i];
        geo::Shape* s = g->shapes[i];
        double area = s->area();
        std::string name = g->names[i]->name();
        bool ok = dynamic_cast<geo::Named*>(s) == g->names[i] && (i + 1 == geo::Gallery::count || s->next == g->shapes[i + 1]);
        if (kind == "circle") ok = ok && area == 3 * (1.0 + i) * (1.0 + i) && name == "circle";
        if (kind == "rect") ok = ok && area == 2 * (1.0 + i) && s->corners() == 4;
        if (kind == "dot") ok = ok && dynamic_cast<geo::Dot*>(s) && s->corners() == 1 && name == "dot of 7" &&
                                std::strcmp(g->names[i]->label, "dot seen") == 0;
        if (kind == "hexagon") ok = ok && dynamic_cast<geo::Hexagon*>(s) && area == 2.5 * (1.0 + i) * (1.0 + i) &&
                                    std::strcmp(g->names[i]->label, "hexagon seen") == 0;
        std::printf("gallery_writer: %d %s: area %.1f, name %s, label %s: %s\n", i, kind.c_str(), area, name.c_str(),
                    g->names[i]->label, ok ? "ok" : "WRONG");
        bad += !ok;
    }
    return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    if (std::strcmp(argv[1], "write") == 0) return write(argv[2]);
    if (std::strcmp(argv[1], "verify") == 0) return verify(argv[2]);
    return 2;
}
