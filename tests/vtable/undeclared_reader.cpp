// A reader that has the shapes' classes (shapes.cpp is linked in) but reads
// them only through base pointers and never names them: open must refuse the
// store (type_mismatch naming a class and steppe::types::declare), since no
// one could compare the program's layouts of them with the store's.
#include <cstdio>
#include <string>

#include "shapes.hpp"

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    steppe::open_options o;
    o.read_only = true;
    try {
        auto store = steppe::store::open(argv[1], o);
        double area = 0;
        for (geo::Shape* s = store.find_root<geo::Drawing>("drawing")->first; s; s = s->next) area += s->area();
        std::printf("read %.1f without naming the classes\n", area);
        return 1;
    } catch (const steppe::error& e) {
        std::string what = e.what();
        std::printf("refused: %s\n", e.what());
        bool named = what.find("never names") != std::string::npos &&
                     what.find("steppe::types::declare<geo::") != std::string::npos;
        return e.code() == steppe::errc::type_mismatch && named ? 0 : 3;
    }
}
