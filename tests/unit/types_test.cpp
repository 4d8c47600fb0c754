// Tests for steppe/layout.hpp and the type catalog (src/types).
#include <gtest/gtest.h>

#include <cstddef>
#include <thread>

#include "types/hash.hpp"
#include "types/types.hpp"

using steppe::errc;
using steppe::types::catalog;
using steppe::types::field_kind;
using steppe::types::layout;
using steppe::types::layout_of;
using u32s = std::vector<std::uint32_t>;

// gmock is not installed: a substring check that prints both strings.
::testing::AssertionResult contains(const std::string& text, const std::string& part) {
    if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

#if defined(__GNUC__) && !defined(__clang__)
constexpr bool member_names_known = true;
#else
constexpr bool member_names_known = false;
#endif

// ---- Types under test -------------------------------------------------------

struct Part {  // DESIGN.md §1 (without the vector, which is later work)
    int id;
    char type[10];
    int x, y;
    long build;
    Part* to[3];
};

struct Inner {
    int a;
    Part* p;
};
struct Outer {
    char c;
    Inner in;
    Inner* q;
};

struct Pet {  // Texas' flat-format example (reference 002 §1.6), 64-bit
    short tag;
    char* name;
};
struct Owner {
    int id;
    Pet pets[2];
};

struct WithStdArrays {
    std::array<Part*, 3> parts;
    std::array<Pet, 2> pets;
    std::array<int, 0> none;
};

struct Opaque;  // never defined: pointers are swizzled by page
struct Pointers {
    void* v;
    char* c;
    const char* cc;
    Opaque* o;
    int** pp;
    Part* const fixed;
};

class Account {
public:
    explicit Account(long balance) : balance_(balance) {}
    long balance() const { return balance_; }

private:
    long balance_;
    Account* next_ = nullptr;
    char tag_ = 0;

public:
    STEPPE_FIELDS(balance_, next_, tag_)
};

class Base {
    Base* up_ = nullptr;
    int k_ = 0;
    STEPPE_FIELDS(up_, k_)
};
class Derived : public Base {
    int extra_ = 0;
    Derived* down_ = nullptr;

public:
    Derived() = default;
    STEPPE_BASES(Base)
    STEPPE_FIELDS(extra_, down_)
};
class Hidden : private Base {  // private bases are reachable through the befriended access
    Hidden* h_ = nullptr;
    STEPPE_BASES(Base)
    STEPPE_FIELDS(h_)
};

class Shape {
public:
    virtual ~Shape() = default;
    Shape* parent = nullptr;
    STEPPE_FIELDS(parent)
};
class Circle : public Shape {
    double r_ = 0;
    Circle* twin_ = nullptr;
    STEPPE_BASES(Shape)
    STEPPE_FIELDS(r_, twin_)
};
struct Mixin {
    virtual void touch() {}
    virtual ~Mixin() = default;
    Mixin* link = nullptr;
    STEPPE_FIELDS(link)
};
class Both : public Shape, public Mixin {
    int z_ = 0;
    STEPPE_BASES(Shape, Mixin)
    STEPPE_FIELDS(z_)
};
struct Holder {  // an aggregate holding a polymorphic member
    int n;
    Circle c;
};

class Forgot {  // a pointer member left out of STEPPE_FIELDS
    int a_ = 0;
    Forgot* p_ = nullptr;
    int b_ = 0;

public:
    Forgot() = default;
    STEPPE_FIELDS(a_, b_)
};

union Number {
    int i;
    float f;
    double d;
    STEPPE_FIELDS(i, f, d)
};
struct WithUnion {
    Number n;
    Part* p;
};

struct WithAccount {  // {any} is ambiguous and {} impossible for Account
    int n;
    Account account;
    Part* p;
};

struct Empty {};
struct WithEmpty {
    Empty e;
    Part* p;
};
enum class Color : std::uint8_t { red, green };
struct Scalars {
    bool b;
    Color color;
    float f;
    double d;
    std::nullptr_t n;
    unsigned long long u;
};

// The customization point, for a type whose definition we cannot edit: one
// field by member pointer, others by offset as a library ABI would give them.
class Blob {
public:
    Blob() = default;
    std::uint32_t id = 0;
    std::uint32_t flags = 0;
    void* data = nullptr;
    Blob* next = nullptr;
};
template<> struct steppe::describe<Blob> {
    static constexpr auto fields = steppe::fields(&Blob::id, steppe::at<std::uint32_t>(4, "flags"),
                                                  steppe::at<void*>(8, "data"), &Blob::next);
};

// How std::vector<T, steppe::allocator<T>> will be described: a template
// whose members are private, described by (ABI) offsets.
template<class T> class tiny_vector {
public:
    tiny_vector() = default;

private:
    T* begin_ = nullptr;
    T* end_ = nullptr;
    T* cap_ = nullptr;
};
template<class T> struct steppe::describe<tiny_vector<T>> {
    static constexpr auto fields = steppe::fields(steppe::at<T*>(0, "begin"), steppe::at<T*>(8, "end"),
                                                  steppe::at<T*>(16, "cap"));
};
struct UsesHook {
    long n;
    tiny_vector<Part> parts;
    Blob blob;
};

// Pairs of types for fingerprints and type_mismatch.
namespace same_a { struct Node { int key; Node* next; }; }
namespace same_b { struct Node { int label; Node* link; }; }
namespace v1 {
struct Part { int id; char type[10]; int x, y; long build; Part* to[3]; };
struct Moved { int a; int b; Moved* p; long c; };
struct Widened { int x; long y; };
struct Padded { int a; char b; };
struct In { int v; };
struct Wrap { In in; long w; };
}  // namespace v1
namespace v2 {
struct Part { long id; char type[10]; int x, y; long build; Part* to[3]; };
struct PartFloat { int id; char type[10]; float x; int y; long build; PartFloat* to[3]; };
struct Moved { int a; int b; long c; Moved* p; };
struct Widened { long x; long y; };
struct Padded { int a; char b; char c; };
struct In { float v; };
struct Wrap { In in; long w; };
struct Unsigned { unsigned id; char type[10]; int x, y; long build; Unsigned* to[3]; };
}  // namespace v2

// ---- Compile-time checks ----------------------------------------------------

static_assert(steppe::persistable<Part>);
static_assert(steppe::persistable<const Part>);
static_assert(steppe::persistable<void*>);
static_assert(steppe::persistable<Opaque*>);
static_assert(steppe::persistable<Part* [3]>);
static_assert(steppe::persistable<Account>);
static_assert(steppe::persistable<Both>);
static_assert(steppe::persistable<Number>);
static_assert(steppe::persistable<UsesHook>);
static_assert(steppe::persistable<std::pair<const int, Part*>>);

namespace refused {
struct Ref { int& r; };
struct ConstRef { const int& r; };
struct FnPtr { void (*fn)(); };
struct MemPtr { int Part::*mp; };
union PtrUnion { int i; void* p; STEPPE_FIELDS(i, p) };
union Undeclared { int i; float f; };
struct B { int x; };
struct AggBase : B { int y; };
class NoLayout { public: explicit NoLayout(int v) : v_(v) {} int get() const { return v_; } private: int v_; };
struct Poly { virtual ~Poly() = default; int x; };
struct Bits { int a : 3; int b; };
class Inherits : public Base { public: int y_ = 0; };
struct Nested { int a; NoLayout bad; };
struct Incomplete;
}  // namespace refused
static_assert(!steppe::persistable<int&>);
static_assert(!steppe::persistable<refused::Ref>);
static_assert(!steppe::persistable<refused::ConstRef>);
static_assert(!steppe::persistable<void (*)()>);
static_assert(!steppe::persistable<refused::FnPtr>);
static_assert(!steppe::persistable<refused::MemPtr>);
static_assert(!steppe::persistable<refused::PtrUnion>);
static_assert(!steppe::persistable<refused::Undeclared>);
static_assert(!steppe::persistable<refused::AggBase>);
static_assert(!steppe::persistable<refused::NoLayout>);
static_assert(!steppe::persistable<refused::Poly>);
#if defined(__GNUC__) && !defined(__clang__)
static_assert(!steppe::persistable<refused::Bits>);
#endif
static_assert(!steppe::persistable<refused::Inherits>);
static_assert(!steppe::persistable<refused::Nested>);
static_assert(!steppe::persistable<refused::Incomplete>);
static_assert(!steppe::persistable<int[]>);
static_assert(!steppe::persistable<void>);

// ---- Layouts ----------------------------------------------------------------

std::vector<std::uint32_t> offsets(const layout& l) {
    std::vector<std::uint32_t> v;
    for (const auto& f : l.fields) v.push_back(f.offset);
    return v;
}

TEST(types_layout, part_pointers_are_exactly_to) {
    const layout& l = layout_of<Part>();
    EXPECT_EQ(l.name, "Part");
    EXPECT_EQ(l.size, sizeof(Part));
    EXPECT_EQ(l.align, alignof(Part));
    EXPECT_EQ(l.pointers, (u32s{offsetof(Part, to), offsetof(Part, to) + 8, offsetof(Part, to) + 16}));
    EXPECT_EQ(l.pointers, (u32s{32, 40, 48}));
    EXPECT_TRUE(l.vptrs.empty());
    ASSERT_EQ(l.fields.size(), 6u);  // char type[10] and Part* to[3] count once each
    EXPECT_EQ(offsets(l), (u32s{0, 4, 16, 20, 24, 32}));
    EXPECT_EQ(l.fields[1].kind, field_kind::array);
    EXPECT_EQ(l.fields[1].size, 10u);
    EXPECT_EQ(l.fields[1].type, "char[10]");
    EXPECT_EQ(l.fields[2].kind, field_kind::scalar);
    EXPECT_EQ(l.fields[2].type, "int");
    EXPECT_EQ(l.fields[5].kind, field_kind::array);
    EXPECT_EQ(l.fields[5].size, 24u);
    if (member_names_known) {
        EXPECT_EQ(l.fields[0].name, "id");
        EXPECT_EQ(l.fields[2].name, "x");
        EXPECT_EQ(l.fields[5].name, "to");
    }
}

TEST(types_layout, is_built_once_and_shared) {
    EXPECT_EQ(&layout_of<Part>(), &layout_of<Part>());
    EXPECT_EQ(&layout_of<const Part>(), &layout_of<Part>());
    std::vector<const layout*> seen(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) threads.emplace_back([&seen, i] { seen[i] = &layout_of<Owner>(); });
    for (auto& t : threads) t.join();
    for (const layout* l : seen) EXPECT_EQ(l, &layout_of<Owner>());
}

TEST(types_layout, nested_aggregates_are_flattened) {
    const layout& l = layout_of<Outer>();
    EXPECT_EQ(l.pointers, (u32s{offsetof(Outer, in) + offsetof(Inner, p), offsetof(Outer, q)}));
    ASSERT_EQ(l.fields.size(), 3u);
    EXPECT_EQ(l.fields[1].kind, field_kind::nested);
    EXPECT_EQ(l.fields[1].type, "Inner");
    EXPECT_EQ(l.fields[1].type_fp, layout_of<Inner>().fingerprint);
}

TEST(types_layout, arrays_of_structs_repeat_the_element_pointers) {
    const layout& l = layout_of<Owner>();
    EXPECT_EQ(l.size, 40u);
    EXPECT_EQ(l.pointers, (u32s{16, 32}));
    const layout& arr = layout_of<Pet[4]>();
    EXPECT_EQ(arr.pointers, (u32s{8, 24, 40, 56}));
    ASSERT_EQ(arr.fields.size(), 1u);
    EXPECT_EQ(arr.fields[0].kind, field_kind::array);
}

TEST(types_layout, std_array) {
    const layout& l = layout_of<WithStdArrays>();
    EXPECT_EQ(l.pointers, (u32s{0, 8, 16, 24 + 8, 24 + 24}));
    ASSERT_EQ(l.fields.size(), 3u);
    EXPECT_EQ(l.fields[0].kind, field_kind::array);
    EXPECT_EQ(l.fields[0].type_fp, layout_of<Part* [3]>().fields[0].type_fp);  // same as a C array
    EXPECT_EQ((layout_of<std::array<Part*, 2>>().pointers), (u32s{0, 8}));
}

TEST(types_layout, any_data_pointer_is_a_pointer) {
    const layout& l = layout_of<Pointers>();
    EXPECT_EQ(l.pointers, (u32s{0, 8, 16, 24, 32, 40}));
    for (const auto& f : l.fields) EXPECT_EQ(f.kind, field_kind::pointer);
    EXPECT_EQ(l.fields[3].type, "Opaque*");
    EXPECT_EQ(layout_of<void*>().pointers, (u32s{0}));
    EXPECT_EQ(layout_of<char*>().pointers, (u32s{0}));
}

namespace {
struct Secret {};
}  // namespace

TEST(types_layout, names_are_the_same_from_every_compiler) {
    EXPECT_EQ(layout_of<Part* [3]>().name, "Part*[3]");
    EXPECT_EQ(layout_of<const char*>().name, "const char*");
    EXPECT_EQ(layout_of<unsigned long>().name, "unsigned long");
    EXPECT_EQ(layout_of<long long>().name, "long long");
    EXPECT_EQ(layout_of<short>().name, "short");
    EXPECT_EQ((layout_of<std::pair<long, Part*>>().name), "std::pair<long, Part*>");
    EXPECT_EQ(layout_of<Secret>().name, "(anonymous namespace)::Secret");
    EXPECT_EQ(layout_of<tiny_vector<Part>>().fields[0].type, "Part*");
}

TEST(types_layout, scalars) {
    const layout& l = layout_of<Scalars>();
    EXPECT_TRUE(l.pointers.empty());
    ASSERT_EQ(l.fields.size(), 6u);
    for (const auto& f : l.fields) EXPECT_EQ(f.kind, field_kind::scalar);
    EXPECT_EQ(layout_of<int>().fields.size(), 1u);
    EXPECT_NE(layout_of<int>().fingerprint, layout_of<unsigned>().fingerprint);
    EXPECT_NE(layout_of<int>().fingerprint, layout_of<float>().fingerprint);
    EXPECT_NE(layout_of<Color>().fingerprint, layout_of<std::uint8_t>().fingerprint);
}

TEST(types_layout, private_members_with_steppe_fields) {
    const layout& l = layout_of<Account>();
    EXPECT_EQ(l.size, 24u);
    EXPECT_EQ(l.pointers, (u32s{8}));
    ASSERT_EQ(l.fields.size(), 3u);
    EXPECT_EQ(l.fields[1].name, "next_");
    EXPECT_EQ(l.fields[1].type, "Account*");
    EXPECT_EQ(l.fields[2].name, "tag_");
}

TEST(types_layout, aggregate_holding_a_class_without_default_constructor) {
    const layout& l = layout_of<WithAccount>();
    EXPECT_EQ(l.pointers, (u32s{16, 32}));
    ASSERT_EQ(l.fields.size(), 3u);
    EXPECT_EQ(l.fields[1].type, "Account");
}

TEST(types_layout, base_and_steppe_fields) {
    const layout& l = layout_of<Derived>();
    // Itanium reuses the tail padding of a non-POD base: extra_ sits at 12.
    EXPECT_EQ(l.pointers, (u32s{0, 16}));
    ASSERT_EQ(l.fields.size(), 3u);
    EXPECT_EQ(offsets(l), (u32s{0, 12, 16}));
    EXPECT_EQ(l.fields[0].kind, field_kind::base);
    EXPECT_EQ(l.fields[0].type, "Base");
    EXPECT_EQ(l.fields[0].type_fp, layout_of<Base>().fingerprint);
    EXPECT_EQ(l.fields[1].name, "extra_");
    EXPECT_EQ(layout_of<Hidden>().pointers, (u32s{0, 16}));
}

TEST(types_layout, polymorphic_classes_record_vptrs) {
    EXPECT_EQ(layout_of<Shape>().vptrs, (u32s{0}));
    EXPECT_EQ(layout_of<Shape>().pointers, (u32s{8}));
    const layout& c = layout_of<Circle>();
    EXPECT_EQ(c.vptrs, (u32s{0}));
    EXPECT_EQ(c.pointers, (u32s{8, 24}));
    // Non-virtual multiple inheritance: the secondary base keeps its own vptr.
    const layout& b = layout_of<Both>();
    EXPECT_EQ(b.vptrs, (u32s{0, 16}));
    EXPECT_EQ(b.pointers, (u32s{8, 24}));
    EXPECT_EQ(layout_of<Holder>().vptrs, (u32s{8}));
    EXPECT_EQ(layout_of<Holder>().pointers, (u32s{16, 32}));
}

TEST(types_layout, unlisted_member_is_refused_at_first_use) {
    try {
        layout_of<Forgot>();
        FAIL() << "layout_of<Forgot> did not throw";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument);
        EXPECT_TRUE(contains(e.what(), "type Forgot: bytes [4, 16) belong to no member listed in STEPPE_FIELDS"));
    }
}

TEST(types_layout, union_without_pointers_is_bytes) {
    const layout& u = layout_of<Number>();
    EXPECT_TRUE(u.pointers.empty());
    EXPECT_EQ(offsets(u), (u32s{0, 0, 0}));
    EXPECT_EQ(layout_of<WithUnion>().pointers, (u32s{8}));
}

TEST(types_layout, empty_members) {
    EXPECT_TRUE(layout_of<Empty>().fields.empty());
    EXPECT_EQ(layout_of<WithEmpty>().pointers, (u32s{8}));
}

TEST(types_layout, customization_point) {
    const layout& b = layout_of<Blob>();
    EXPECT_EQ(b.pointers, (u32s{8, 16}));
    ASSERT_EQ(b.fields.size(), 4u);
    EXPECT_EQ(b.fields[1].name, "flags");
    EXPECT_EQ(b.fields[3].kind, field_kind::pointer);
    const layout& v = layout_of<tiny_vector<Part>>();
    EXPECT_EQ(v.pointers, (u32s{0, 8, 16}));
    EXPECT_EQ(v.fields[2].type, "Part*");
    EXPECT_EQ(layout_of<UsesHook>().pointers, (u32s{8, 16, 24, 40, 48}));
    const layout& pair = layout_of<std::pair<const int, Part*>>();
    EXPECT_EQ(pair.pointers, (u32s{8}));
    EXPECT_EQ(pair.fields[1].name, "second");
}

// ---- Fingerprints -----------------------------------------------------------

TEST(types_fingerprint, equal_for_equal_layouts) {
    const layout& a = layout_of<same_a::Node>();
    const layout& b = layout_of<same_b::Node>();
    EXPECT_NE(a.name, b.name);
    EXPECT_EQ(a.fingerprint, b.fingerprint);
    EXPECT_TRUE(steppe::types::same_structure(a, b));
    // Read the same way, but members are compared by name where known.
    EXPECT_EQ(steppe::types::difference(a, b) == "", !member_names_known);
    EXPECT_EQ(layout_of<v1::Part>().fingerprint, layout_of<Part>().fingerprint);
    EXPECT_EQ(steppe::types::fingerprint(a), a.fingerprint);
}

TEST(types_fingerprint, different_for_changed_layouts) {
    auto fp = [](const layout& l) { return l.fingerprint; };
    EXPECT_NE(fp(layout_of<v1::Part>()), fp(layout_of<v2::Part>()));       // size
    EXPECT_NE(fp(layout_of<v1::Part>()), fp(layout_of<v2::PartFloat>()));  // int -> float
    EXPECT_NE(fp(layout_of<v1::Part>()), fp(layout_of<v2::Unsigned>()));   // int -> unsigned
    EXPECT_NE(fp(layout_of<v1::Moved>()), fp(layout_of<v2::Moved>()));     // pointer moved
    EXPECT_NE(fp(layout_of<v1::Widened>()), fp(layout_of<v2::Widened>()));
    EXPECT_NE(fp(layout_of<v1::Padded>()), fp(layout_of<v2::Padded>()));   // field in padding
    EXPECT_NE(fp(layout_of<v1::Wrap>()), fp(layout_of<v2::Wrap>()));       // deep change
    EXPECT_NE(fp(layout_of<Part* [3]>()), fp(layout_of<Part* [2]>()));
}

// ---- Catalog ----------------------------------------------------------------

layout renamed(layout l, const std::string& name) {
    l.name = name;
    return l;
}

catalog sample_catalog() {
    catalog c;
    c.find_or_add(layout_of<Part>());
    c.find_or_add(layout_of<Owner>());
    c.find_or_add(layout_of<Both>());
    c.find_or_add(layout_of<Blob>());
    return c;
}

TEST(types_catalog, find_or_add_returns_stable_indices) {
    catalog c;
    EXPECT_EQ(c.find_or_add(layout_of<Part>()), 0u);
    // Owner's nested Pet comes first, with the program's layout (so a changed
    // Pet is named as itself).
    EXPECT_EQ(c.find_or_add(layout_of<Owner>()), 2u);
    EXPECT_EQ(c.find(layout_of<Pet>().name), 1u);
    EXPECT_EQ(c.at(1), layout_of<Pet>());
    EXPECT_EQ(c.find_or_add(layout_of<Part>()), 0u);
    EXPECT_EQ(c.find_or_add(renamed(layout_of<v1::Part>(), "Part")), 0u);  // same structure, other member names
    EXPECT_EQ(c.find("Owner"), 2u);
    EXPECT_EQ(c.find("Nope"), std::nullopt);
    EXPECT_EQ(c.at(2).pointers, (u32s{16, 32}));
    EXPECT_EQ(c.size(), 3u);
    try {
        c.at(3);
        FAIL();
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument);
    }
}

TEST(types_catalog, encode_decode_round_trip) {
    catalog c = sample_catalog();
    std::vector<std::byte> bytes = c.encode();
    catalog d = catalog::decode(bytes);
    EXPECT_EQ(d.entries(), c.entries());
    EXPECT_EQ(d.find("Blob"), c.find("Blob"));
    EXPECT_EQ(d.encode(), bytes);
    EXPECT_EQ(catalog::decode(catalog{}.encode()).size(), 0u);
}

TEST(types_catalog, entries_the_program_never_names_are_kept) {
    catalog c = sample_catalog();
    catalog d = catalog::decode(c.encode());
    std::size_t before = c.size();
    EXPECT_EQ(d.find_or_add(layout_of<Outer>()), before + 1);  // after its nested Inner
    catalog e = catalog::decode(d.encode());
    EXPECT_EQ(e.size(), before + 2);
    EXPECT_EQ(e.at(*e.find("Both")).vptrs, (u32s{0, 16}));  // never named by this "program"
}

std::string mismatch(const layout& stored, const layout& program) {
    catalog c;
    c.find_or_add(renamed(stored, "Part"));
    try {
        c.find_or_add(renamed(program, "Part"));
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::type_mismatch);
        return e.what();
    }
    ADD_FAILURE() << "no type_mismatch";
    return {};
}

TEST(types_catalog, mismatch_size) {
    EXPECT_EQ(mismatch(layout_of<v1::Part>(), layout_of<v2::Part>()),
              "type Part: size 56 in store, 64 in program: field 1" + std::string(member_names_known ? " 'id'" : "") +
                  " (int) at offset 0 became long (scalar of 4 bytes in store, scalar of 8 bytes in program)");
}

TEST(types_catalog, mismatch_moved_pointer) {
    EXPECT_TRUE(contains(mismatch(layout_of<v1::Moved>(), layout_of<v2::Moved>()),
                "type Part: pointer field at offset 8 in store moved to offset 16 in program"));
    layout one_less = layout_of<Part>();
    one_less.pointers.pop_back();
    EXPECT_TRUE(contains(mismatch(layout_of<Part>(), one_less),
                         "pointer field at offset 48 in store is not a pointer in program, in field 6"));
}

TEST(types_catalog, mismatch_signedness) {
    std::string name = member_names_known ? " 'id'" : "";
    EXPECT_EQ(mismatch(layout_of<Part>(), layout_of<v2::Unsigned>()),
              "type Part: field 1" + name + " (int) at offset 0 became unsigned int");
}

TEST(types_catalog, refuses_names_it_could_not_decode) {
    catalog c;
    try {
        c.find_or_add(renamed(layout_of<Part>(), std::string(steppe::types::max_name_length + 1, 'x')));
        FAIL();
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument);
    }
    EXPECT_EQ(c.size(), 0u);
}

TEST(types_catalog, mismatch_changed_field) {
    std::string names = member_names_known ? " 'x'" : "";
    EXPECT_EQ(mismatch(layout_of<v1::Part>(), layout_of<v2::PartFloat>()),
              "type Part: field 3" + names + " (int) at offset 16 became float");
    EXPECT_EQ(mismatch(layout_of<v1::Widened>(), layout_of<v2::Widened>()),
              "type Part: field 1" + names + " (int) at offset 0 became long "
              "(scalar of 4 bytes in store, scalar of 8 bytes in program)");
    EXPECT_TRUE(contains(mismatch(layout_of<v1::Padded>(), layout_of<v2::Padded>()),
                "field 3" + std::string(member_names_known ? " 'c'" : "") +
                          " (char) at offset 5 in program is not in store"));
    EXPECT_TRUE(contains(mismatch(layout_of<v1::Wrap>(), layout_of<v2::Wrap>()),
                "(v1::In) at offset 0 became v2::In"));
    layout in = layout_of<v2::Wrap>();
    in.fields[0].type = "v1::In";  // same name, different contents
    EXPECT_TRUE(contains(mismatch(layout_of<v1::Wrap>(), in), "the layout of v1::In changed"));
}

TEST(types_catalog, mismatch_vptr) {
    layout no_vptr = layout_of<Shape>();
    no_vptr.vptrs.clear();
    no_vptr.fingerprint = steppe::types::fingerprint(no_vptr);
    EXPECT_EQ(mismatch(layout_of<Shape>(), no_vptr),
              "type Part: vtable pointer at offset 0 in store is not a pointer in program");
}

// std::pair<int, int> with its members named `first` and `second` (as
// std::pair's description does, whatever the compiler) stored under others.
layout stored_pair(const char* first, const char* second) {
    layout l = layout_of<std::pair<int, int>>();
    l.fields.at(0).name = first;
    l.fields.at(1).name = second;
    return l;
}

TEST(types_catalog, mismatch_same_typed_fields_swapped) {
    EXPECT_EQ(mismatch(stored_pair("second", "first"), layout_of<std::pair<int, int>>()),
              "type Part: field 1 (int) at offset 0 is named 'second' in store, 'first' in program; fields are "
              "matched by name, so this program would read the store's 'second' as 'first': if the fields were "
              "reordered on purpose, migrate the store (steppe::migrate, convert<Part>(\"Part\"))");
}

TEST(types_catalog, mismatch_renamed_field) {
    EXPECT_TRUE(contains(mismatch(stored_pair("first", "y"), layout_of<std::pair<int, int>>()),
                         "type Part: field 2 (int) at offset 4 is named 'y' in store, 'second' in program; "));
    EXPECT_TRUE(contains(mismatch(stored_pair("first", "y"), layout_of<std::pair<int, int>>()),
                         "renamed on purpose, migrate the store (steppe::migrate, convert<Part>(\"Part\")"
                         ".rename(\"y\", \"second\"))"));
}

// A name unknown on either side (an older or undescribed entry, a compiler
// that names no aggregate members) leaves the structure to decide.
TEST(types_catalog, unknown_member_names_are_not_compared) {
    catalog c;
    c.find_or_add(renamed(stored_pair("", ""), "Part"));
    EXPECT_NO_THROW(c.find_or_add(renamed(layout_of<std::pair<int, int>>(), "Part")));
    layout unnamed = layout_of<std::pair<int, int>>();
    unnamed.fields.at(1).name.clear();
    EXPECT_EQ(steppe::types::difference(stored_pair("first", "y"), unnamed), "");
    EXPECT_TRUE(contains(steppe::types::difference(stored_pair("x", "y"), unnamed), "'x' in store, 'first'"));
}

// ---- Damaged encodings ------------------------------------------------------

void expect_corrupt(std::span<const std::byte> bytes, const std::string& what = {}) {
    try {
        catalog::decode(bytes);
        ADD_FAILURE() << "decode accepted damaged bytes (" << bytes.size() << " bytes)";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::corrupt) << e.what();
        if (!what.empty()) {
            EXPECT_TRUE(contains(e.what(), what));
        }
    }
}

TEST(types_catalog_damage, every_truncation_is_corrupt) {
    std::vector<std::byte> bytes = sample_catalog().encode();
    for (std::size_t n = 0; n < bytes.size(); ++n) expect_corrupt(std::span(bytes).first(n));
    std::vector<std::byte> longer(bytes);
    longer.push_back(std::byte{0});
    expect_corrupt(longer, "length");
}

TEST(types_catalog_damage, every_bit_flip_is_corrupt) {
    const std::vector<std::byte> bytes = sample_catalog().encode();
    std::vector<std::byte> damaged(bytes);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            damaged[i] ^= std::byte(1u << bit);
            expect_corrupt(damaged);
            damaged[i] = bytes[i];
        }
    }
}

// Structural damage behind a valid checksum: what a buggy writer could produce.
// Byte positions of the one-entry catalog {Node}; see catalog_format.cpp.
struct Node {
    Node* next;
};
constexpr std::size_t entry_count_at = 12, pointer_count_at = 40, pointer_at = 44, ref_count_at = 52, field_kind_at = 68,
                      fingerprint_at = 32, size_at = 24, align_at = 28;

std::vector<std::byte> node_catalog() {
    catalog c;
    c.find_or_add(layout_of<Node>());
    return c.encode();
}

void put_u32(std::vector<std::byte>& b, std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::byte>(v >> (8 * i));
}

// Recomputes the length and checksum after an edit.
std::vector<std::byte> reseal(std::vector<std::byte> b) {
    put_u32(b, 8, static_cast<std::uint32_t>(b.size()));
    steppe::types::detail::fnv1a h;
    h.bytes(std::span(b).first(b.size() - 8));
    for (int i = 0; i < 8; ++i) b[b.size() - 8 + i] = static_cast<std::byte>(h.value() >> (8 * i));
    return b;
}

TEST(types_catalog_damage, node_catalog_has_the_documented_size) {
    // The worked example in catalog_format.cpp, plus version 2's reference
    // count (clang cannot name the member "next").
    EXPECT_EQ(node_catalog().size(), member_names_known ? 102u : 98u);
    EXPECT_NO_THROW(catalog::decode(reseal(node_catalog())));
}

TEST(types_catalog_damage, version_1_catalogs_are_read) {
    auto b = node_catalog();
    b[4] = std::byte{1};
    b.erase(b.begin() + ref_count_at, b.begin() + ref_count_at + 4);  // version 1 has no reference offsets
    catalog c = catalog::decode(reseal(b));
    EXPECT_EQ(c.at(0), layout_of<Node>());
}

TEST(types_catalog_damage, header_fields) {
    auto b = node_catalog();
    b[0] = std::byte{'X'};
    expect_corrupt(reseal(b), "bad magic");
    b = node_catalog();
    b[4] = std::byte{4};
    expect_corrupt(reseal(b), "unknown version 4");
    b = node_catalog();
    b[6] = std::byte{1};
    expect_corrupt(reseal(b), "reserved");
    b = node_catalog();
    b.back() ^= std::byte{0x80};
    expect_corrupt(b, "checksum mismatch");
    b = node_catalog();
    put_u32(b, entry_count_at, 0xffffffff);
    expect_corrupt(reseal(b), "entry count 4294967295 exceeds the data");
    b = node_catalog();
    put_u32(b, entry_count_at, 0);
    expect_corrupt(reseal(b), "stray bytes");
}

TEST(types_catalog_damage, entry_fields) {
    auto b = node_catalog();
    put_u32(b, pointer_at, 8);
    expect_corrupt(reseal(b), "pointer offset 8 beyond size 8");
    b = node_catalog();
    put_u32(b, pointer_count_at, 0x40000000);
    expect_corrupt(reseal(b), "pointer count 1073741824 exceeds the data");
    b = node_catalog();
    put_u32(b, ref_count_at, 0x40000000);
    expect_corrupt(reseal(b), "reference count 1073741824 exceeds the data");
    b = node_catalog();
    b[field_kind_at] = std::byte{9};
    expect_corrupt(reseal(b), "unknown field kind 9");
    b = node_catalog();
    b[fingerprint_at] ^= std::byte{1};
    expect_corrupt(reseal(b), "fingerprint does not match");
    b = node_catalog();
    put_u32(b, size_at, 0);
    expect_corrupt(reseal(b), "type size 0 out of range");
    b = node_catalog();
    put_u32(b, align_at, 3);
    expect_corrupt(reseal(b), "alignment 3 invalid");
    b = node_catalog();
    put_u32(b, 16, 70000);
    expect_corrupt(reseal(b), "name length 70000 out of range");
}

TEST(types_catalog_damage, duplicate_names) {
    catalog c;
    c.find_or_add(layout_of<same_a::Node>());
    c.find_or_add(renamed(layout_of<v1::Padded>(), "same_b::Node"));
    auto b = c.encode();
    // Make the second name equal the first ("same_b" -> "same_a").
    std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
    std::size_t at = text.find("same_b::Node");
    ASSERT_NE(at, std::string_view::npos);
    b[at + 5] = std::byte{'a'};
    expect_corrupt(reseal(b), "duplicate type name same_a::Node");
}

TEST(types_catalog_damage, pointers_out_of_order_or_overlapping) {
    catalog c;
    c.find_or_add(layout_of<Part* [2]>());
    auto b = c.encode();
    std::string name = layout_of<Part* [2]>().name;
    std::size_t first = 16 + 4 + name.size() + 4 + 4 + 8 + 4;  // first pointer offset
    put_u32(b, first, 8);
    put_u32(b, first + 4, 0);
    expect_corrupt(reseal(b), "offsets not increasing or overlapping");
    put_u32(b, first, 0);
    put_u32(b, first + 4, 4);
    expect_corrupt(reseal(b), "offsets not increasing or overlapping");
}

// ---- Reference targets (catalog version 3) ----------------------------------

// A reference word as the object engine's ref<T> declares it.
template<class T> struct word_to {
    using steppe_reference_word = T;
    std::uint64_t word;
};
struct Leaf {
    int v;
};
struct Branch {
    long id;
    word_to<Leaf> leaf;
    word_to<Branch> next;
};
namespace retargeted {
struct Branch {
    long id;
    word_to<Leaf> leaf;
    word_to<Leaf> next;
};
}  // namespace retargeted

TEST(types_catalog_targets, layouts_record_what_references_refer_to) {
    const layout& l = layout_of<Branch>();
    ASSERT_EQ(l.refs, (std::vector<std::uint32_t>{8, 16}));
    ASSERT_EQ(l.ref_targets.size(), 2u);
    EXPECT_EQ(l.ref_targets[0].type, layout_of<Leaf>().name);
    EXPECT_EQ(&l.ref_targets[1].program.get(), &layout_of<Branch>());
}

TEST(types_catalog_targets, targets_survive_encoding_and_are_compared) {
    catalog c;
    c.find_or_add(layout_of<Branch>());
    catalog back = catalog::decode(c.encode());
    EXPECT_EQ(back.at(0), layout_of<Branch>());
    EXPECT_EQ(back.at(0).ref_targets[1].type, layout_of<Branch>().name);
    layout other = layout_of<retargeted::Branch>();
    other.name = layout_of<Branch>().name;
    std::string d = steppe::types::difference(back.at(0), other);
    EXPECT_TRUE(contains(d, "reference field at offset 16")) << d;
    EXPECT_TRUE(contains(d, "refers to " + layout_of<Branch>().name + " in store, " + layout_of<Leaf>().name +
                                " in program"))
        << d;
    EXPECT_NE(layout_of<Branch>().fingerprint, other.fingerprint);
}

// A version 2 catalog recorded reference offsets only: it is read with the
// targets unknown, and the program's layout fills them in.
TEST(types_catalog_targets, version_2_entries_learn_their_targets) {
    layout v2 = layout_of<Branch>();
    v2.ref_targets.clear();
    v2.fingerprint = steppe::types::fingerprint(v2);
    catalog old;
    old.find_or_add(v2);
    std::vector<std::byte> b = old.encode();  // version 3 with empty targets: as version 2 reads
    catalog read = catalog::decode(b);
    EXPECT_TRUE(read.at(0).ref_targets.empty());
    std::uint64_t before = read.changes();
    EXPECT_EQ(read.find_or_add(layout_of<Branch>()), 0u);
    EXPECT_NE(read.changes(), before);
    EXPECT_EQ(read.at(0), layout_of<Branch>());
    EXPECT_EQ(read.at(0).fingerprint, layout_of<Branch>().fingerprint);
    layout other = layout_of<retargeted::Branch>();
    other.name = layout_of<Branch>().name;
    EXPECT_THROW(read.find_or_add(other), steppe::error) << "learned targets are compared";
}

TEST(types_catalog_targets, some_targets_named_some_not_is_corrupt) {
    catalog c;
    layout half = layout_of<Branch>();
    half.ref_targets[1].type = "x";  // one byte, then emptied below
    c.find_or_add(half);
    std::vector<std::byte> b = c.encode();
    std::string encoded(reinterpret_cast<const char*>(b.data()), b.size());
    std::size_t at = encoded.find(std::string("\x01\0\0\0x", 5));
    ASSERT_NE(at, std::string::npos);
    b.erase(b.begin() + static_cast<long>(at) + 4);
    b[at] = std::byte{0};
    expect_corrupt(reseal(b), "some reference targets named, some not");
}

// ---- Comparing a store with the whole program -------------------------------

namespace evolved {
struct Contact {  // as another build of the program declares it: one field more
    int age;
    long twitter;
};
}  // namespace evolved
struct Contact {
    int age;
};
struct Entry {
    long key;
    Contact value;
};

TEST(types_catalog_program, a_changed_nested_type_is_named_with_what_holds_it) {
    EXPECT_EQ(catalog{}.program_difference(), "") << "an empty catalog differs from nothing";
    catalog c;
    c.find_or_add(layout_of<Entry>());  // this program's: nothing differs
    EXPECT_EQ(c.program_difference(), "");
    ASSERT_TRUE(c.find(layout_of<Contact>().name)) << "nested types enter the catalog with their holder";
    // A store written by the other build: its Contact and Entry differ from ours.
    layout other_contact = renamed(layout_of<evolved::Contact>(), layout_of<Contact>().name);
    layout other_entry = layout_of<Entry>();
    other_entry.size = 24;
    other_entry.fields[1].size = 16;
    other_entry.fields[1].type_fp = other_contact.fingerprint;
    other_entry.fields[1].nested = {};  // a stored layout: no program links
    other_entry.fingerprint = steppe::types::fingerprint(other_entry);
    catalog stored;
    stored.find_or_add(other_contact);
    stored.find_or_add(other_entry);
    std::string d = stored.program_difference();
    EXPECT_TRUE(contains(d, "type " + layout_of<Contact>().name + " (in " + layout_of<Entry>().name + ")")) << d;
    if (member_names_known) {
        EXPECT_TRUE(contains(d, "'twitter'")) << d;
        EXPECT_TRUE(contains(d, "in store is missing in program")) << d;
    }
    try {
        stored.require_program_match("x.db");
        ADD_FAILURE() << "accepted";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), errc::type_mismatch);
        EXPECT_TRUE(contains(e.what(), "x.db: type ")) << e.what();
    }
    EXPECT_TRUE(stored.check().empty()) << stored.check()[0];
}

TEST(types_catalog_program, check_finds_a_nested_type_stored_two_ways) {
    catalog c;
    c.find_or_add(layout_of<Entry>());
    layout other_entry = layout_of<Entry>();
    other_entry.name = "Entry2";
    other_entry.fields[1].type_fp ^= 1;  // says its Contact had another layout
    other_entry.fingerprint = steppe::types::fingerprint(other_entry);
    c.find_or_add(other_entry);
    std::vector<std::string> findings = c.check();
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_TRUE(contains(findings[0], "C1: type Entry2")) << findings[0];
}
