// Classes with virtual inheritance: their layouts (a complete object places
// its virtual bases where its vtable says) checked against live objects, in
// the catalog, and end to end through a store under both fault backends.
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "support/store_fixture.hpp"
#include "types/types.hpp"
#include "types/vtables.hpp"

using steppe::errc;
using steppe::types::field_kind;
using steppe::types::layout;
using steppe::types::layout_of;
using steppe::types::detail::base_layout_of;
using u32s = std::vector<std::uint32_t>;

namespace vb {

// The diamond: Part reaches Named through Shape and through Solid, and holds
// one Named, which holds a string and a pointer.
class Named {
public:
    explicit Named(std::string_view n = {}) : name(n) {}
    virtual ~Named() = default;
    virtual std::string describe() const { return "named " + std::string(name); }
    steppe::string name;
    Named* owner = nullptr;
    STEPPE_FIELDS(name, owner)
};
class Shape : public virtual Named {
public:
    virtual double area() const { return 0; }
    Shape* parent = nullptr;
    STEPPE_BASES(Named)
    STEPPE_FIELDS(parent)
};
class Solid : public virtual Named {
public:
    virtual double weight() const { return 0; }
    double volume = 0;
    STEPPE_BASES(Named)
    STEPPE_FIELDS(volume)
};
class Part : public Shape, public Solid {
public:
    Part() = default;
    Part(std::string_view n, double v) : Named(n) { volume = v; }
    double area() const override { return 6 * volume; }
    double weight() const override { return 2 * volume; }
    std::string describe() const override { return "part " + std::string(name) + " of " + std::to_string(int(volume)); }
    Part* next = nullptr;
    STEPPE_BASES(Shape, Solid)
    STEPPE_FIELDS(next)
};

// A virtual base of a virtual base, in classes without virtual functions:
// their vptrs only say where the virtual bases are.
class Root {
public:
    long id = 0;
    Root* link = nullptr;
    STEPPE_FIELDS(id, link)
};
class Mid : public virtual Root {
public:
    Mid* up = nullptr;
    STEPPE_BASES(Root)
    STEPPE_FIELDS(up)
};
class Top : public virtual Mid {
public:
    Top* down = nullptr;
    int depth = 0;
    STEPPE_BASES(Mid)
    STEPPE_FIELDS(down, depth)
};

// Virtual and non-virtual bases together; Tagged is the primary base.
class Plain {
public:
    Plain* p = nullptr;
    int k = 0;
    STEPPE_FIELDS(p, k)
};
class Tagged {
public:
    virtual ~Tagged() = default;
    virtual int tag() const { return 1; }
    Tagged* t = nullptr;
    STEPPE_FIELDS(t)
};
class Mixed : public Plain, public Tagged, public virtual Named {
public:
    int tag() const override { return 2; }
    Mixed* m = nullptr;
    STEPPE_BASES(Plain, Tagged, Named)
    STEPPE_FIELDS(m)
};

// A nearly empty virtual base becomes the primary base: it shares offset 0.
class Iface {
public:
    virtual ~Iface() = default;
    virtual int id() const = 0;
    STEPPE_FIELDS()
};
class Impl : public virtual Iface {
public:
    explicit Impl(int v = 0) : v_(v) {}
    int id() const override { return v_; }
    Impl* other = nullptr;

private:
    int v_;
    STEPPE_BASES(Iface)
    STEPPE_FIELDS(other, v_)
};

// A private virtual base: steppe converts to it as a friend.
class Sealed : virtual Named {
public:
    const Named* named() const { return this; }
    Sealed* s = nullptr;
    STEPPE_BASES(Named)
    STEPPE_FIELDS(s)
};

// A class that cannot be edited, described with a virtual base.
class Ext : public virtual Named {
public:
    Ext* x = nullptr;
};

struct Shelf {  // an aggregate holding complete objects with virtual bases
    int count;
    Part part;
    Top tops[2];
};

// Never constructed in this program, and without a key function: the
// compiler emits its vtable nowhere.
class Ghost : public virtual Named {
public:
    long g = 0;
    STEPPE_BASES(Named)
    STEPPE_FIELDS(g)
};

// The store's root for the round trips.
struct Shop {
    Part* first;
    Named* named[2];
    Shape* shape;
    Solid* solid;
    Top* top;
    Iface* iface;
};

}  // namespace vb

template<> struct steppe::describe<vb::Ext> {
    static constexpr auto fields = steppe::fields(steppe::base<vb::Named>, &vb::Ext::x);
};

// Pairs of programs for type_mismatch: the virtual base's pointer moved.
namespace v1 {
struct Label { virtual ~Label() = default; int a = 0; Label* p = nullptr; STEPPE_FIELDS(a, p) };
struct Item : virtual Label { long n = 0; STEPPE_BASES(Label) STEPPE_FIELDS(n) };
}  // namespace v1
namespace v2 {
struct Label { virtual ~Label() = default; Label* p = nullptr; int a = 0; STEPPE_FIELDS(p, a) };
struct Item : virtual Label { long n = 0; STEPPE_BASES(Label) STEPPE_FIELDS(n) };
}  // namespace v2

using namespace vb;

static_assert(steppe::types::has_virtual_bases<Part>);
static_assert(steppe::types::has_virtual_bases<Top>);
static_assert(steppe::types::has_virtual_bases<Mixed>);
static_assert(!steppe::types::has_virtual_bases<Named>);
static_assert(!steppe::types::has_virtual_bases<Shelf>);  // its members have; it is placed as a whole
static_assert(std::is_same_v<steppe::types::detail::virtual_bases<Top>, steppe::types::detail::type_list<Mid, Root>>);
static_assert(std::is_same_v<steppe::types::detail::virtual_bases<Part>, steppe::types::detail::type_list<Named>>);
static_assert(steppe::types::detail::is_dynamic<Top> && !std::is_polymorphic_v<Top>);

namespace {

// ---- Layouts against live objects -------------------------------------------

template<class T, class M> std::uint32_t at(const T& object, const M& member) {
    return static_cast<std::uint32_t>(reinterpret_cast<const char*>(&member) -
                                      reinterpret_cast<const char*>(&object));
}

u32s sorted(u32s v) {
    std::sort(v.begin(), v.end());
    return v;
}

// The pointer slots of a steppe::string at `offset`.
u32s string_slots(std::uint32_t offset) {
    u32s v;
    for (std::uint32_t p : layout_of<steppe::string>().pointers) v.push_back(offset + p);
    return v;
}

u32s operator+(u32s a, const u32s& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Every vptr the layout lists holds an address point in T's own vtable group,
// as relinking assumes, and the first is the one the shell gets.
template<class T> void expect_vptrs_in_group(const T& object) {
    const layout& l = layout_of<T>();
    std::string group = steppe::types::vtable_symbol_for(typeid(T));
    std::uintptr_t base = steppe::types::resolve_symbol(group);
    ASSERT_NE(base, 0u) << group;
    for (std::uint32_t at : l.vptrs) {
        std::uintptr_t vptr;
        std::memcpy(&vptr, reinterpret_cast<const char*>(&object) + at, sizeof vptr);
        EXPECT_EQ(steppe::types::vtable_symbol_of(reinterpret_cast<const void*>(vptr)), group) << "vptr at " << at;
        EXPECT_GT(vptr, base) << "vptr at " << at;
    }
    std::uintptr_t primary;
    std::memcpy(&primary, static_cast<const void*>(&object), sizeof primary);
    EXPECT_EQ(steppe::types::primary_address_point(typeid(T), sizeof(T)), primary);
}

struct slot {
    std::uint32_t offset;
    field_kind kind;
    std::string type;
    friend bool operator==(const slot&, const slot&) = default;
};
std::ostream& operator<<(std::ostream& os, const slot& s) {
    return os << "{" << s.offset << ", " << steppe::types::to_string(s.kind) << ", " << s.type << "}";
}
std::vector<slot> fields_of(const layout& l) {
    std::vector<slot> v;
    for (const auto& f : l.fields) v.push_back({f.offset, f.kind, f.type});
    return v;
}

TEST(virtual_bases_layout, diamond_matches_a_live_object) {
    Part p;
    const layout& l = layout_of<Part>();
    EXPECT_EQ(l.size, sizeof(Part));
    EXPECT_EQ(l.align, alignof(Part));
    std::uint32_t named = at(p, static_cast<Named&>(p));
    std::uint32_t solid = at(p, static_cast<Solid&>(p));
    EXPECT_GT(named, solid);  // after the non-virtual part, once
    EXPECT_EQ(l.pointers, sorted(u32s{at(p, p.parent), at(p, p.next), at(p, p.owner)} + string_slots(at(p, p.name))));
    EXPECT_EQ(l.vptrs, sorted({0, solid, named}));
    const layout& shape_part = base_layout_of<Shape>();
    const layout& solid_part = base_layout_of<Solid>();
    const layout& named_part = base_layout_of<Named>();
    EXPECT_EQ(fields_of(l), (std::vector<slot>{{0, field_kind::base, "vb::Shape"},
                                               {solid, field_kind::base, "vb::Solid"},
                                               {at(p, p.next), field_kind::pointer, "vb::Part*"},
                                               {named, field_kind::base, "vb::Named"}}));
    EXPECT_EQ(l.fields[0].size, shape_part.size);
    EXPECT_EQ(l.fields[0].type_fp, shape_part.fingerprint);
    EXPECT_EQ(l.fields[1].type_fp, solid_part.fingerprint);
    EXPECT_EQ(l.fields[3].size, sizeof(Named));
    EXPECT_EQ(l.fields[3].type_fp, named_part.fingerprint);
    expect_vptrs_in_group(p);
}

TEST(virtual_bases_layout, single_virtual_base_complete_and_as_a_base) {
    Shape s;
    const layout& l = layout_of<Shape>();
    std::uint32_t named = at(s, static_cast<Named&>(s));
    EXPECT_EQ(l.size, sizeof(Shape));
    EXPECT_EQ(l.pointers, sorted(u32s{at(s, s.parent), at(s, s.owner)} + string_slots(at(s, s.name))));
    EXPECT_EQ(l.vptrs, (u32s{0, named}));
    expect_vptrs_in_group(s);
    // As a base: the vptr and parent only, nvsize bytes; Named is the
    // complete object's to place.
    const layout& part = base_layout_of<Shape>();
    EXPECT_EQ(part.size, 16u);
    EXPECT_EQ(part.align, 8u);
    EXPECT_EQ(part.pointers, (u32s{8}));
    EXPECT_EQ(part.vptrs, (u32s{0}));
    ASSERT_EQ(part.fields.size(), 1u);
    EXPECT_NE(part.fingerprint, l.fingerprint);
    // Without virtual bases the two are one.
    EXPECT_EQ(&base_layout_of<Named>(), &layout_of<Named>());
    EXPECT_EQ(&base_layout_of<Plain>(), &layout_of<Plain>());
}

TEST(virtual_bases_layout, virtual_base_of_a_virtual_base) {
    Top t;
    const layout& l = layout_of<Top>();
    std::uint32_t mid = at(t, static_cast<Mid&>(t));
    std::uint32_t root = at(t, static_cast<Root&>(t));
    EXPECT_EQ(l.size, sizeof(Top));
    EXPECT_EQ(l.pointers, sorted({at(t, t.down), at(t, t.up), at(t, t.link)}));
    EXPECT_EQ(l.vptrs, sorted({0, mid}));  // Root has none
    EXPECT_EQ(fields_of(l), (std::vector<slot>{{at(t, t.down), field_kind::pointer, "vb::Top*"},
                                               {at(t, t.depth), field_kind::scalar, "int"},
                                               {std::min(mid, root), field_kind::base, mid < root ? "vb::Mid" : "vb::Root"},
                                               {std::max(mid, root), field_kind::base, mid < root ? "vb::Root" : "vb::Mid"}}));
    expect_vptrs_in_group(t);
    Mid m;  // Mid alone places Root itself, elsewhere
    EXPECT_EQ(layout_of<Mid>().pointers, sorted({at(m, m.up), at(m, m.link)}));
    expect_vptrs_in_group(m);
}

TEST(virtual_bases_layout, virtual_and_non_virtual_bases) {
    Mixed x;
    const layout& l = layout_of<Mixed>();
    EXPECT_EQ(at(x, static_cast<Tagged&>(x)), 0u);  // the primary base, though listed second
    std::uint32_t plain = at(x, static_cast<Plain&>(x));
    std::uint32_t named = at(x, static_cast<Named&>(x));
    EXPECT_EQ(l.pointers,
              sorted(u32s{at(x, x.p), at(x, x.t), at(x, x.m), at(x, x.owner)} + string_slots(at(x, x.name))));
    EXPECT_EQ(l.vptrs, (u32s{0, named}));
    EXPECT_EQ(fields_of(l), (std::vector<slot>{{0, field_kind::base, "vb::Tagged"},
                                               {plain, field_kind::base, "vb::Plain"},
                                               {at(x, x.m), field_kind::pointer, "vb::Mixed*"},
                                               {named, field_kind::base, "vb::Named"}}));
    expect_vptrs_in_group(x);
}

TEST(virtual_bases_layout, nearly_empty_virtual_base_shares_the_vptr) {
    Impl i;
    const layout& l = layout_of<Impl>();
    EXPECT_EQ(at(i, static_cast<Iface&>(i)), 0u);
    EXPECT_EQ(l.vptrs, (u32s{0}));
    EXPECT_EQ(l.pointers, (u32s{at(i, i.other)}));
    EXPECT_EQ(fields_of(l)[0], (slot{0, field_kind::base, "vb::Iface"}));
    expect_vptrs_in_group(i);
}

TEST(virtual_bases_layout, private_virtual_base) {
    Sealed x;
    const layout& l = layout_of<Sealed>();
    const layout& named = layout_of<Named>();
    std::uint32_t at_named = at(x, *x.named());
    EXPECT_EQ(at_named, 16u);  // after the vptr and s
    u32s pointers{at(x, x.s)};
    for (std::uint32_t p : named.pointers) pointers.push_back(at_named + p);
    EXPECT_EQ(l.pointers, sorted(pointers));
    EXPECT_EQ(l.vptrs, (u32s{0, at_named}));
    expect_vptrs_in_group(x);
}

TEST(virtual_bases_layout, described_virtual_base) {
    Ext x;
    const layout& l = layout_of<Ext>();
    std::uint32_t named = at(x, static_cast<Named&>(x));
    EXPECT_EQ(l.pointers, sorted(u32s{at(x, x.x), at(x, x.owner)} + string_slots(at(x, x.name))));
    EXPECT_EQ(l.vptrs, (u32s{0, named}));
    expect_vptrs_in_group(x);
}

TEST(virtual_bases_layout, members_and_arrays_are_complete_objects) {
    Shelf s{};
    const layout& l = layout_of<Shelf>();
    const layout& part = layout_of<Part>();
    const layout& top = layout_of<Top>();
    u32s vptrs, pointers;
    auto add = [&](const layout& inner, std::uint32_t offset) {
        for (std::uint32_t v : inner.vptrs) vptrs.push_back(offset + v);
        for (std::uint32_t p : inner.pointers) pointers.push_back(offset + p);
    };
    add(part, at(s, s.part));
    add(top, at(s, s.tops[0]));
    add(top, at(s, s.tops[1]));
    EXPECT_EQ(l.vptrs, sorted(vptrs));
    EXPECT_EQ(l.pointers, sorted(pointers));
}

TEST(virtual_bases_layout, a_vtable_this_program_lacks_is_unsupported) {
    try {
        layout_of<Ghost>();
        FAIL() << "layout_of<Ghost> did not throw";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::unsupported);
        std::string what = e.what();
        EXPECT_NE(what.find("type vb::Ghost: cannot find where its virtual bases are"), std::string::npos) << what;
        EXPECT_NE(what.find("_ZTVN2vb5GhostE"), std::string::npos) << what;
        EXPECT_NE(what.find("-rdynamic"), std::string::npos) << what;
    }
}

// ---- Catalog ----------------------------------------------------------------

TEST(virtual_bases_catalog, layouts_pass_the_catalog_format) {
    steppe::types::catalog c;
    c.find_or_add(layout_of<Part>());
    c.find_or_add(layout_of<Top>());
    c.find_or_add(layout_of<Mixed>());
    c.find_or_add(layout_of<Impl>());
    c.find_or_add(layout_of<Shelf>());
    auto d = steppe::types::catalog::decode(c.encode());
    EXPECT_EQ(d.entries(), c.entries());
}

TEST(virtual_bases_catalog, a_changed_virtual_base_is_a_type_mismatch) {
    [[maybe_unused]] v1::Item one;  // constructed somewhere, so this program has their vtables
    [[maybe_unused]] v2::Item two;
    steppe::types::catalog c;
    layout stored = layout_of<v1::Item>();
    layout program = layout_of<v2::Item>();
    stored.name = program.name = "Item";
    c.find_or_add(stored);
    try {
        c.find_or_add(program);
        FAIL() << "no type_mismatch";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::type_mismatch);
        std::string what = e.what();
        EXPECT_NE(what.find("type Item: pointer field at offset"), std::string::npos) << what;
        EXPECT_NE(what.find("(v2::Label)"), std::string::npos) << what;
    }
}

// ---- Through a store --------------------------------------------------------

class VirtualBasesTest : public steppe::test::store_fixture {
protected:
    static std::string name_of(int i) {
        std::string n = "p" + std::to_string(i);
        return i % 2 ? n : n + "-with-a-name-too-long-for-the-string-object";
    }

    // parts[i] has volume i, name_of(i); next, parent and owner lead to parts[i - 1].
    static void build(steppe::store& s, int count) {
        Shop* shop = s.root<Shop>("shop");
        for (int i = 0; i < count; ++i) {
            Part* p = s.make<Part>(name_of(i), i);
            p->next = shop->first;
            p->parent = shop->first;
            p->owner = shop->first;
            shop->first = p;
        }
        auto* mixed = s.make<Mixed>();
        mixed->name = "mixed";
        mixed->owner = shop->first;
        shop->named[0] = shop->first;
        shop->named[1] = mixed;
        shop->shape = shop->first;
        shop->solid = shop->first->next;
        Top* top = s.make<Top>();
        top->depth = 7;
        top->id = 42;
        top->down = top;
        top->up = top;
        top->link = top;
        shop->top = top;
        auto* impl = s.make<Impl>(5);
        impl->other = s.make<Impl>(6);
        shop->iface = impl;
    }

    static void expect_built(steppe::store& s, int count) {
        Shop* shop = s.find_root<Shop>("shop");
        ASSERT_NE(shop, nullptr);
        int i = count - 1;
        for (Part* p = shop->first; p; p = p->next, --i) {
            ASSERT_GE(i, 0);
            ASSERT_EQ(p->name, name_of(i));
            ASSERT_EQ(p->volume, i);
            const Named* named = p;
            ASSERT_EQ(named->describe(), "part " + name_of(i) + " of " + std::to_string(i));  // through a thunk
            ASSERT_EQ(static_cast<Shape*>(p)->area(), 6.0 * i);
            ASSERT_EQ(static_cast<Solid*>(p)->weight(), 2.0 * i);
            ASSERT_EQ(dynamic_cast<const Part*>(named), p);
            ASSERT_EQ(dynamic_cast<Solid*>(static_cast<Shape*>(p)), static_cast<Solid*>(p));  // a cross cast
            ASSERT_EQ(p->owner, p->next);
            ASSERT_EQ(p->parent, p->next);
            if (p->owner) {
                ASSERT_EQ(p->owner->describe(), "part " + name_of(i - 1) + " of " + std::to_string(i - 1));
            }
        }
        EXPECT_EQ(i, -1);
        EXPECT_EQ(shop->named[0], static_cast<Named*>(shop->first));
        auto* mixed = dynamic_cast<Mixed*>(shop->named[1]);
        ASSERT_NE(mixed, nullptr);
        EXPECT_EQ(mixed->tag(), 2);
        EXPECT_EQ(shop->named[1]->describe(), "named mixed");
        EXPECT_EQ(mixed->owner, static_cast<Named*>(shop->first));
        EXPECT_EQ(dynamic_cast<Part*>(shop->shape), shop->first);
        EXPECT_EQ(dynamic_cast<Part*>(shop->solid), shop->first->next);
        Top* top = shop->top;
        EXPECT_EQ(top->depth, 7);
        EXPECT_EQ(top->id, 42);
        EXPECT_EQ(top->down, top);
        EXPECT_EQ(top->up, static_cast<Mid*>(top));
        EXPECT_EQ(top->link, static_cast<Root*>(top));
        EXPECT_EQ(shop->iface->id(), 5);
        auto* impl = dynamic_cast<Impl*>(shop->iface);
        ASSERT_NE(impl, nullptr);
        EXPECT_EQ(impl->other->id(), 6);
    }

    static void expect_sound(steppe::store& s) {
        auto findings = s.check();
        EXPECT_TRUE(findings.empty()) << findings.front();
    }
};

TEST_P(VirtualBasesTest, DiamondsRoundTrip) {
    constexpr int count = 300;  // several pages of Parts
    {
        auto s = open();
        build(s, count);
        s.commit();
        expect_built(s, count);
    }
    in_fresh_process([](steppe::store& s) {
        expect_built(s, count);
        expect_sound(s);
        // Change the virtual base of a loaded object and commit from here.
        Part* p = s.find_root<Shop>("shop")->first;
        p->name = "renamed-in-a-second-process-with-a-long-name";
        p->owner = nullptr;
        s.commit();
    });
    in_fresh_process([](steppe::store& s) {
        Part* p = s.find_root<Shop>("shop")->first;
        EXPECT_EQ(static_cast<Named*>(p)->describe(),
                  "part renamed-in-a-second-process-with-a-long-name of " + std::to_string(count - 1));
        EXPECT_EQ(p->owner, nullptr);
        EXPECT_EQ(p->next->name, name_of(count - 2));
    });
}

TEST_P(VirtualBasesTest, RollbackRestoresVirtualBases) {
    constexpr int count = 50;
    {
        auto s = open();
        build(s, count);
        s.commit();
        Shop* shop = s.find_root<Shop>("shop");
        Part* first = shop->first;
        first->name = "changed-after-commit-to-something-long";
        first->owner = nullptr;
        first->volume = -1;
        shop->first = s.make<Part>("uncommitted", 1000);
        shop->first->next = first;
        s.rollback();
        EXPECT_EQ(shop->first, first);
        expect_built(s, count);
        Part* added = s.make<Part>(name_of(count), count);  // the store goes on after a rollback
        added->next = first;
        added->parent = first;
        added->owner = first;
        shop->first = added;
        shop->named[0] = added;
        shop->shape = added;
        shop->solid = first;
        dynamic_cast<Mixed*>(shop->named[1])->owner = added;
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        expect_built(s, count + 1);
        expect_sound(s);
    });
}

STEPPE_BOTH_BACKENDS(VirtualBasesTest);

}  // namespace
