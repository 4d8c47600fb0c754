// Control: must compile cleanly (-Wall -Wextra -Wpedantic -Werror), so a
// compile-fail test cannot pass merely because the harness is broken.
#include <steppe/layout.hpp>

struct Opaque;
struct Part { int id; char type[10]; int x, y; long build; Part* to[3]; };
struct Pointers { void* v; char* c; Opaque* o; std::array<Part*, 2> a; };
class Node {
public:
    explicit Node(int key) : key_(key) {}
private:
    Node* next_ = nullptr;
    int key_;
    STEPPE_FIELDS(next_, key_)
};
class Child : public Node {
    long extra_ = 0;
    STEPPE_BASES(Node)
    STEPPE_FIELDS(extra_)
};
struct Shape { virtual ~Shape() = default; Shape* parent = nullptr; STEPPE_FIELDS(parent) };
// Virtual inheritance: STEPPE_BASES lists the direct bases, virtual or not.
struct Named { virtual ~Named() = default; long id = 0; STEPPE_FIELDS(id) };
struct Solid : virtual Named { double volume = 0; STEPPE_BASES(Named) STEPPE_FIELDS(volume) };
struct Body : Shape, virtual Named { long mass = 0; STEPPE_BASES(Shape, Named) STEPPE_FIELDS(mass) };
struct Diamond : Body, Solid { Diamond* next = nullptr; STEPPE_BASES(Body, Solid) STEPPE_FIELDS(next) };
struct Tagged { long tag = 0; STEPPE_FIELDS(tag) };
// A virtual base of a virtual base, next to a non-virtual base.
struct Indirect : virtual Solid, Tagged { STEPPE_BASES(Solid, Tagged) STEPPE_FIELDS() };
union Number { int i; double d; STEPPE_FIELDS(i, d) };
struct Empty {};
class NoFields { public: NoFields() = default; STEPPE_FIELDS() };

static_assert(steppe::persistable<Part>);
static_assert(steppe::persistable<Pointers>);
static_assert(steppe::persistable<Child>);
static_assert(steppe::persistable<Shape>);
static_assert(steppe::persistable<Number>);
static_assert(steppe::persistable<Empty>);
static_assert(steppe::persistable<NoFields>);
static_assert(steppe::persistable<Diamond>);
static_assert(steppe::persistable<Indirect>);
static_assert(steppe::types::has_virtual_bases<Diamond> && !steppe::types::has_virtual_bases<Shape>);

const void* all[] = {&steppe::types::layout_of<Part>(), &steppe::types::layout_of<Pointers>(),
                     &steppe::types::layout_of<Child>(), &steppe::types::layout_of<Shape>(),
                     &steppe::types::layout_of<Number>(), &steppe::types::layout_of<NoFields>(),
                     &steppe::types::layout_of<Diamond>(), &steppe::types::layout_of<Indirect>()};
