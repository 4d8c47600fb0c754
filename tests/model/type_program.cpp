// One program, built twice: type_v1 stores Parts; type_v2 (-DPART_V2) is the
// "next release", whose Part gained a field. The second must be refused with
// errc::type_mismatch naming the type and the difference, and must leave the
// store as it was, so the first still opens it.
//   type_vN STORE write   makes three Parts under root "first", commits
//   type_vN STORE read    walks them; prints the count
// Exit status: 0 done, 3 type_mismatch, 2 another error.
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstring>

struct Part {
    long id;
#ifdef PART_V2
    double weight;  // added in "v2": the layout the store recorded no longer fits
#endif
    Part* next;
};

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s STORE write|read\n", argv[0]);
        return 2;
    }
    try {
        auto s = steppe::store::open(argv[1]);
        if (std::strcmp(argv[2], "write") == 0) {
            Part* first = s.root<Part>("first");
            for (long i = 1; i <= 3; ++i) first->next = s.make<Part>(Part{i,
#ifdef PART_V2
                                                                            0.0,
#endif
                                                                            first->next});
            s.commit();
            std::printf("wrote 3 parts\n");
        } else {
            long n = 0;
            for (Part* p = s.find_root<Part>("first"); p; p = p->next) ++n;
            std::printf("read %ld parts\n", n - 1);
        }
    } catch (const steppe::error& e) {
        std::printf("steppe::error(%s): %s\n", steppe::to_string(e.code()), e.what());
        return e.code() == steppe::errc::type_mismatch ? 3 : 2;
    }
    return 0;
}
