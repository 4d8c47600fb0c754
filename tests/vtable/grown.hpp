// One class set, built twice: with STEPPE_TEST_GROWN, a virtual function is
// added to the primary base L of D : L, R (which moves R-in-D's address point
// in D's vtable group), to the most derived class of a diamond (which moves
// its secondary ones too), and in the middle of single-inheritance SB (which
// moves none: the primary address point stays 16 bytes into the group).
// grown_class_test.cpp is one build, grown_program.cpp the other; each
// writes a store of one case and reads the other's (docs/types.md, "Virtual
// functions and virtual bases").
#pragma once

#include <steppe/steppe.hpp>

#include <string>

namespace grown {

struct L {
    virtual ~L() = default;
    virtual long l() const { return 100; }
#if STEPPE_TEST_GROWN
    virtual long l2() const { return 666; }
#endif
    long x = 1;
    STEPPE_FIELDS(x)
};
struct R {
    virtual ~R() = default;
    virtual long r1() const { return 201; }
    virtual long r2() const { return 202; }
    long y = 2;
    STEPPE_FIELDS(y)
};
struct D : L, R {
    long z = 3;
    STEPPE_BASES(L, R)
    STEPPE_FIELDS(z)
};

struct Named {
    virtual ~Named() = default;
    virtual long n() const { return 5; }
    long id = 42;
    STEPPE_FIELDS(id)
};
struct Shape : virtual Named {
    Shape* parent = nullptr;
    STEPPE_BASES(Named)
    STEPPE_FIELDS(parent)
};
struct Solid : virtual Named {
    virtual long volume() const { return 77; }
    double mass = 0;
    STEPPE_BASES(Named)
    STEPPE_FIELDS(mass)
};
struct Part : Shape, Solid {
#if STEPPE_TEST_GROWN
    virtual long extra() const { return 999; }
#endif
    Part* next = nullptr;
    STEPPE_BASES(Shape, Solid)
    STEPPE_FIELDS(next)
};

struct SB {
    virtual ~SB() = default;
    virtual long f() const { return 1; }
#if STEPPE_TEST_GROWN
    virtual long g() const { return 2; }  // before h: h's slot moves, the address point does not
#endif
    virtual long h() const { return 3; }
    long x = 0;
    STEPPE_FIELDS(x)
};
struct SD : SB {
    long f() const override { return 10; }
    long h() const override { return 30; }
    long y = 0;
    STEPPE_BASES(SB)
    STEPPE_FIELDS(y)
};

// "mi" (D through its R), "diamond" (Part through its Solid, then its
// virtual base) or "single" (SD through its SB).
inline steppe::store open(const std::string& path) {
    steppe::types::declare<D, Part, SD>();
    return steppe::store::open(path);
}

inline void write(const std::string& which, const std::string& path) {
    auto store = open(path);
    if (which == "mi") *store.root<R*>("r") = store.make<D>();
    if (which == "diamond") *store.root<Solid*>("r") = store.make<Part>();
    if (which == "single") *store.root<SB*>("r") = store.make<SD>();
    store.commit();
}

// What the case's virtual calls and virtual base read, as "name=value ...".
inline std::string read(const std::string& which, const std::string& path) {
    auto store = open(path);
    if (which == "mi") {
        R* r = *store.root<R*>("r");
        return "r1=" + std::to_string(r->r1()) + " r2=" + std::to_string(r->r2()) +
               " l=" + std::to_string(dynamic_cast<L*>(r)->l());
    }
    if (which == "diamond") {
        Solid* s = *store.root<Solid*>("r");
        return "volume=" + std::to_string(s->volume()) + " id=" + std::to_string(s->id);
    }
    SB* b = *store.root<SB*>("r");
    return "f=" + std::to_string(b->f()) + " h=" + std::to_string(b->h());
}

}  // namespace grown
