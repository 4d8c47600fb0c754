// steppe/layout.hpp — where the pointers are, for every type steppe stores.
//
// The page engine swizzles raw pointers as pages fault in, so it must know the
// exact offset of every pointer in every stored object (Texas RTTD, reference
// 002 §1.6): guessing, as a conservative collector would, is never enough.
// A type's layout comes from one of these sources, and a type with none does
// not compile (a static_assert says why and what to do; g++ names the type in
// the "[with T = ...]" line of the same diagnostic):
//
//   scalars, enums, data pointers (T*, void*, pointers to incomplete types:
//     pages are swizzled by page, so the pointee type is not needed), C arrays
//     and std::array of anything supported, std::pair          built in
//   aggregates (plain structs without bases)                   automatic
//   other classes: private members, constructors, bases, virtual functions
//     STEPPE_FIELDS(a, b, c) and STEPPE_BASES(Base, ...) in the class body
//   unions without pointers      STEPPE_FIELDS(every member) in the union
//   types you cannot edit        specialize steppe::describe<T>
//
//   struct Part { int id; char type[10]; int x, y; long build; Part* to[3]; };
//   class Node : public Base {
//       Node* next_ = nullptr; int key_ = 0;
//   public:
//       explicit Node(int key) : key_(key) {}
//       STEPPE_BASES(Base)
//       STEPPE_FIELDS(next_, key_)
//   };
//   template<> struct steppe::describe<Handle> {  // fields: &T::member,
//       static constexpr auto fields =            //   steppe::at<U>(offset),
//           steppe::fields(&Handle::id, steppe::at<void*>(8, "raw"));  // steppe::base<B>
//   };
//   const auto& l = steppe::types::layout_of<Part>();  // l.pointers == {32, 40, 48}
//
// Refused at compile time: references, function pointers, member pointers,
// unions holding pointers or not listing their members, bit-fields, aggregates
// with bases, polymorphic or non-aggregate classes without STEPPE_FIELDS.
// Every vtable pointer is recorded (a dynamic class's at offset 0, and those
// of its bases, virtual or not) and relinked on load (src/types/vtables.hpp).
// Virtual bases are placed by the complete object's class, at offsets read
// through its vtable: such a class's vtable symbol must be resolvable at run
// time (the executable not stripped, or linked with -rdynamic).
// Layouts assume the Itanium C++ ABI (g++/clang on Linux) and 64-bit pointers.
//
// Map: 1 layout data, 2 declaring fields, 3 type names, 4 aggregate
// reflection, 5 classification and compile-time checks, 6 building layouts.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

static_assert(sizeof(void*) == 8, "steppe needs 64-bit pointers");

// ---- 1. Layout data ---------------------------------------------------------
namespace steppe::types {

// reference: an object-engine reference (steppe::objects::ref<T>), one word.
enum class field_kind : std::uint8_t { scalar = 1, pointer = 2, nested = 3, array = 4, base = 5, reference = 6 };
const char* to_string(field_kind kind) noexcept;

struct layout;

// A program's own layout of a type a layout mentions (a nested member's, a
// reference's target): how the catalog learns nested types and how the
// engines compare what a type leads to. Not part of a layout's value: layouts
// decoded from a store have none, and equality ignores it.
struct layout_link {
    const layout& (*get)() = nullptr;
    friend bool operator==(const layout_link&, const layout_link&) noexcept { return true; }
};

// One member or base of a type: for the fingerprint, for comparing with a
// store's entry, and for diagnostics.
struct field {
    std::uint32_t offset = 0;
    std::uint32_t size = 0;
    field_kind kind = field_kind::scalar;
    // What the bytes mean: a scalar's encoding (signedness, float, size), a
    // nested type's fingerprint, or an array's element and count. It makes a
    // change deep inside a nested struct visible at the outer type.
    std::uint64_t type_fp = 0;
    std::string type;  // type name, for messages only
    // Member name, empty when unknown (bases, steppe::at without a name). A
    // field's identity: opening compares it where both sides know it, and
    // migration carries fields by it. Not in the fingerprint, which stores
    // keep and check (catalog_format.cpp), so older entries stay valid.
    std::string name;
    // A nested member's type, an array's class element type (program layouts only).
    layout_link nested;
    friend bool operator==(const field&, const field&) = default;
};

// What an object-engine reference field refers to: the target's type name
// (an array's element type for a ref<array<T>>). A program's layouts also
// carry the target's layout, so the engine can compare the store's entry for
// the target with the program's before it follows such a reference.
struct ref_target {
    std::string type;
    layout_link program;
    friend bool operator==(const ref_target&, const ref_target&) = default;
};

// The run-time description of one type. Pointer and vptr offsets are flattened
// through nested structs, arrays and bases, sorted, and never overlap.
struct layout {
    std::string name;
    std::uint32_t size = 0;
    std::uint32_t align = 0;
    std::vector<std::uint32_t> pointers;  // every raw data pointer inside one object
    std::vector<std::uint32_t> vptrs;     // every vtable pointer (relinked, not swizzled)
    std::vector<std::uint32_t> refs;      // every object-engine reference (steppe::objects::ref)
    // What refs[i] refers to, for each i; empty in an entry of a version 2
    // catalog (which did not record targets).
    std::vector<ref_target> ref_targets;
    std::vector<field> fields;            // direct members and bases, by offset
    std::uint64_t fingerprint = 0;        // of size, align, offsets and field types
    friend bool operator==(const layout&, const layout&) = default;
};

// Hash of everything structural (not the type's, fields' or field types'
// names): two layouts with the same fingerprint are read the same way.
std::uint64_t fingerprint(const layout& l) noexcept;
// Equal in everything the fingerprint covers (names may differ).
bool same_structure(const layout& a, const layout& b) noexcept;

inline constexpr std::uint32_t max_type_size = std::uint32_t{1} << 30;

// The layout of a complete T, built on first use (thread-safe) and never
// destroyed, so it stays valid in static destructors. Throws
// steppe::error(invalid_argument) if STEPPE_FIELDS/STEPPE_BASES leave bytes
// that can only be an unlisted member, and errc::unsupported if T has virtual
// bases and its vtable symbol cannot be found in this process.
template<class T> const layout& layout_of();

// Befriended by STEPPE_FIELDS and STEPPE_BASES so steppe can read private members.
struct access;

}  // namespace steppe::types

// ---- 2. Declaring fields ----------------------------------------------------
namespace steppe {

// Customization point for types you cannot edit: specialize with
//     static constexpr auto fields = steppe::fields(...);
// listing every member that is not padding. It wins over every other source.
// Specialize it before the type's layout is first used.
template<class T> struct describe;

template<class M> struct at_field {  // a member of type M at a byte offset
    using type = M;
    std::size_t offset;
    const char* name;
};
template<class M>
constexpr at_field<M> at(std::size_t offset, const char* name = "") noexcept { return {offset, name}; }

template<class B> struct base_class { using type = B; };
template<class B> inline constexpr base_class<B> base{};

template<class M, class C> struct member_field {  // a member named by a member pointer
    using type = M;
    using owner = C;
    M C::*pointer;
    const char* name;
};

template<class... D> struct field_list { std::tuple<D...> items; };

namespace types::detail {
template<class D> struct as_descriptor {
    using type = D;
    static constexpr D make(D d) noexcept { return d; }
};
template<class M, class C> struct as_descriptor<M C::*> {
    using type = member_field<M, C>;
    static constexpr type make(M C::*p) noexcept { return {p, ""}; }
};
template<class M, class C>
constexpr member_field<M, C> named(M C::*p, const char* name) noexcept { return {p, name}; }
template<class... T> struct type_list { static constexpr std::size_t size = sizeof...(T); };
}  // namespace types::detail

// Arguments: &T::member, steppe::at<U>(offset[, name]), steppe::base<B>.
template<class... D> constexpr auto fields(D... d) noexcept {
    return field_list<typename types::detail::as_descriptor<D>::type...>{
        {types::detail::as_descriptor<D>::make(d)...}};
}

template<class A, class B> struct describe<std::pair<A, B>> {
    static constexpr auto fields = steppe::fields(types::detail::named(&std::pair<A, B>::first, "first"),
                                                  types::detail::named(&std::pair<A, B>::second, "second"));
};

}  // namespace steppe

// STEPPE_FIELDS(a, b, c) inside a class, struct or union body declares its
// persistent data members by name; all of them must be listed (bytes that
// only an unlisted member can explain make layout_of throw). STEPPE_FIELDS()
// declares none. STEPPE_BASES(B1, B2) declares the direct base classes (any
// access, virtual or not); a class with bases and STEPPE_FIELDS needs both.
// Neither changes the access of the declarations that follow. Each macro also
// records its owner so a derived class cannot silently reuse its base's
// declaration.
#define STEPPE_FIELDS(...)                                                                 \
    friend struct ::steppe::types::access;                                                 \
    auto steppe_fields_owner_() -> ::std::remove_reference_t<decltype(*this)>;             \
    template<class steppe_self_> static constexpr auto steppe_fields_() noexcept {         \
        return ::steppe::fields(STEPPE_DETAIL_FOR_EACH(STEPPE_DETAIL_MEMBER, __VA_ARGS__)); \
    }
#define STEPPE_BASES(...)                                                      \
    friend struct ::steppe::types::access;                                     \
    auto steppe_bases_owner_() -> ::std::remove_reference_t<decltype(*this)>;  \
    static constexpr auto steppe_bases_() noexcept {                           \
        return ::steppe::types::detail::type_list<__VA_ARGS__>{};              \
    }
#define STEPPE_DETAIL_MEMBER(m) ::steppe::types::detail::named(&steppe_self_::m, #m)

// FOR_EACH over up to 256 arguments with C++20 __VA_OPT__ (each EXPAND level
// rescans 4x, so 4 levels give 256 rescans).
#define STEPPE_DETAIL_PARENS ()
#define STEPPE_DETAIL_EXPAND(...) STEPPE_DETAIL_EXPAND3(STEPPE_DETAIL_EXPAND3(STEPPE_DETAIL_EXPAND3(STEPPE_DETAIL_EXPAND3(__VA_ARGS__))))
#define STEPPE_DETAIL_EXPAND3(...) STEPPE_DETAIL_EXPAND2(STEPPE_DETAIL_EXPAND2(STEPPE_DETAIL_EXPAND2(STEPPE_DETAIL_EXPAND2(__VA_ARGS__))))
#define STEPPE_DETAIL_EXPAND2(...) STEPPE_DETAIL_EXPAND1(STEPPE_DETAIL_EXPAND1(STEPPE_DETAIL_EXPAND1(STEPPE_DETAIL_EXPAND1(__VA_ARGS__))))
#define STEPPE_DETAIL_EXPAND1(...) __VA_ARGS__
#define STEPPE_DETAIL_FOR_EACH(macro, ...) __VA_OPT__(STEPPE_DETAIL_EXPAND(STEPPE_DETAIL_FOR_EACH_1(macro, __VA_ARGS__)))
#define STEPPE_DETAIL_FOR_EACH_1(macro, a, ...) macro(a) __VA_OPT__(, STEPPE_DETAIL_FOR_EACH_AGAIN STEPPE_DETAIL_PARENS(macro, __VA_ARGS__))
#define STEPPE_DETAIL_FOR_EACH_AGAIN() STEPPE_DETAIL_FOR_EACH_1

// ---- 3. Type names ----------------------------------------------------------
namespace steppe::types::detail {

template<class T> constexpr const char* raw_type_name() noexcept { return __PRETTY_FUNCTION__; }
std::string type_name_from(std::string_view pretty);    // layout.cpp
std::string member_name_from(std::string_view pretty);  // layout.cpp
template<class T> std::string type_name() { return type_name_from(raw_type_name<T>()); }

}  // namespace steppe::types::detail

// ---- 4. Aggregate reflection ------------------------------------------------
// Members are counted by trying to initialize T with N initializers, then
// bound with structured bindings (1..64 members) to get types and offsets.
// A wrong count is a compile error at the binding, never a silent layout.
namespace steppe::types::detail {

inline constexpr std::size_t max_members = 64;
inline constexpr std::size_t too_many = max_members + 1;
inline constexpr std::size_t uncountable = static_cast<std::size_t>(-1);

// Converts to anything; for unevaluated use only. The bodies exist because
// g++ wants a definition when a member's type (std::optional, say) has a
// converting constructor template that inspects the conversion.
template<std::size_t> struct any {
    template<class U> constexpr operator U() const noexcept { __builtin_unreachable(); }
};
template<std::size_t> struct lvalue_any {
    template<class U> constexpr operator U&() const noexcept { __builtin_unreachable(); }
};

// Three ways to count, each exact for most aggregates and never too high
// except where noted:
//  braced_any  T{{any}...}: an array member (char type[10]) takes one
//              initializer instead of one per element through brace elision;
//              fails for empty aggregate members ("too many initializers")
//              and for classes whose converting constructors make {any}
//              ambiguous with their copy constructor.
//  empty_braced T{{}...}: fails for members without a default constructor.
//  unbraced    T{any...}: copy-initialization considers only any's
//              conversions, so class members are never ambiguous, but an
//              array consumes one initializer per element: a fallback only.
template<class T, class Seq> struct braced_any;
template<class T, std::size_t... I> struct braced_any<T, std::index_sequence<I...>>
    : std::bool_constant<requires { T{{any<I>{}}...}; }> {};
template<class T, class Seq> struct unbraced;
template<class T, std::size_t... I> struct unbraced<T, std::index_sequence<I...>>
    : std::bool_constant<requires { T{any<I>{}...}; }> {};
template<class T, class Seq> struct unbraced_lvalues;
template<class T, std::size_t... I> struct unbraced_lvalues<T, std::index_sequence<I...>>
    : std::bool_constant<requires { T{lvalue_any<I>{}...}; }> {};
template<class T, class Seq> struct empty_braced;  // defined after the macro chain below

// Initialization with N initializers works for N from (just after the last
// member that needs one) up to the member count, so count up to the first
// failure after a success.
template<template<class, class> class Init, class T, std::size_t N = 0, bool Seen = false>
consteval std::size_t count_by() {
    constexpr bool ok = Init<T, std::make_index_sequence<N>>::value;
    if constexpr (ok && N > max_members) return too_many;
    else if constexpr (ok) return count_by<Init, T, N + 1, true>();
    else if constexpr (Seen) return N - 1;
    else if constexpr (N > max_members) return uncountable;
    else return count_by<Init, T, N + 1, false>();
}

// T{probe} compiles only if T's first aggregate element is a base class.
template<class T> struct base_probe {
    template<class U> requires(std::is_base_of_v<U, T> && !std::is_same_v<U, T>)
    constexpr operator U() const noexcept;
};
template<class T> inline constexpr bool aggregate_has_base = requires { T{base_probe<T>{}}; };

// Declared member types (decltype of a binding keeps references) and whether
// each member is addressable (false for bit-fields; g++ only).
template<class Types, bool... Addressable> struct member_info {
    using types = Types;
    static constexpr bool any_bit_field = (!Addressable || ... || false);
};

enum class bind_mode { types, refs };

#define STEPPE_DETAIL_NAME(i) a##i
#define STEPPE_DETAIL_DECL(i) decltype(a##i)
#if defined(__GNUC__) && !defined(__clang__)
#define STEPPE_DETAIL_ADDR(i) requires { &a##i; }
#else
#define STEPPE_DETAIL_ADDR(i) true
#endif
#define STEPPE_DETAIL_CASE(n)                                                                     \
    if constexpr (N == n) {                                                                       \
        [[maybe_unused]] auto& [STEPPE_DETAIL_L##n(STEPPE_DETAIL_NAME)] = t;                      \
        if constexpr (Mode == bind_mode::types)                                                   \
            return member_info<type_list<STEPPE_DETAIL_L##n(STEPPE_DETAIL_DECL)>,                  \
                               STEPPE_DETAIL_L##n(STEPPE_DETAIL_ADDR)>{};                           \
        else                                                                                      \
            return f(STEPPE_DETAIL_L##n(STEPPE_DETAIL_NAME));                                     \
    } else
#define STEPPE_DETAIL_L1(m) m(1)
#define STEPPE_DETAIL_L2(m) STEPPE_DETAIL_L1(m), m(2)
#define STEPPE_DETAIL_L3(m) STEPPE_DETAIL_L2(m), m(3)
#define STEPPE_DETAIL_L4(m) STEPPE_DETAIL_L3(m), m(4)
#define STEPPE_DETAIL_L5(m) STEPPE_DETAIL_L4(m), m(5)
#define STEPPE_DETAIL_L6(m) STEPPE_DETAIL_L5(m), m(6)
#define STEPPE_DETAIL_L7(m) STEPPE_DETAIL_L6(m), m(7)
#define STEPPE_DETAIL_L8(m) STEPPE_DETAIL_L7(m), m(8)
#define STEPPE_DETAIL_L9(m) STEPPE_DETAIL_L8(m), m(9)
#define STEPPE_DETAIL_L10(m) STEPPE_DETAIL_L9(m), m(10)
#define STEPPE_DETAIL_L11(m) STEPPE_DETAIL_L10(m), m(11)
#define STEPPE_DETAIL_L12(m) STEPPE_DETAIL_L11(m), m(12)
#define STEPPE_DETAIL_L13(m) STEPPE_DETAIL_L12(m), m(13)
#define STEPPE_DETAIL_L14(m) STEPPE_DETAIL_L13(m), m(14)
#define STEPPE_DETAIL_L15(m) STEPPE_DETAIL_L14(m), m(15)
#define STEPPE_DETAIL_L16(m) STEPPE_DETAIL_L15(m), m(16)
#define STEPPE_DETAIL_L17(m) STEPPE_DETAIL_L16(m), m(17)
#define STEPPE_DETAIL_L18(m) STEPPE_DETAIL_L17(m), m(18)
#define STEPPE_DETAIL_L19(m) STEPPE_DETAIL_L18(m), m(19)
#define STEPPE_DETAIL_L20(m) STEPPE_DETAIL_L19(m), m(20)
#define STEPPE_DETAIL_L21(m) STEPPE_DETAIL_L20(m), m(21)
#define STEPPE_DETAIL_L22(m) STEPPE_DETAIL_L21(m), m(22)
#define STEPPE_DETAIL_L23(m) STEPPE_DETAIL_L22(m), m(23)
#define STEPPE_DETAIL_L24(m) STEPPE_DETAIL_L23(m), m(24)
#define STEPPE_DETAIL_L25(m) STEPPE_DETAIL_L24(m), m(25)
#define STEPPE_DETAIL_L26(m) STEPPE_DETAIL_L25(m), m(26)
#define STEPPE_DETAIL_L27(m) STEPPE_DETAIL_L26(m), m(27)
#define STEPPE_DETAIL_L28(m) STEPPE_DETAIL_L27(m), m(28)
#define STEPPE_DETAIL_L29(m) STEPPE_DETAIL_L28(m), m(29)
#define STEPPE_DETAIL_L30(m) STEPPE_DETAIL_L29(m), m(30)
#define STEPPE_DETAIL_L31(m) STEPPE_DETAIL_L30(m), m(31)
#define STEPPE_DETAIL_L32(m) STEPPE_DETAIL_L31(m), m(32)
#define STEPPE_DETAIL_L33(m) STEPPE_DETAIL_L32(m), m(33)
#define STEPPE_DETAIL_L34(m) STEPPE_DETAIL_L33(m), m(34)
#define STEPPE_DETAIL_L35(m) STEPPE_DETAIL_L34(m), m(35)
#define STEPPE_DETAIL_L36(m) STEPPE_DETAIL_L35(m), m(36)
#define STEPPE_DETAIL_L37(m) STEPPE_DETAIL_L36(m), m(37)
#define STEPPE_DETAIL_L38(m) STEPPE_DETAIL_L37(m), m(38)
#define STEPPE_DETAIL_L39(m) STEPPE_DETAIL_L38(m), m(39)
#define STEPPE_DETAIL_L40(m) STEPPE_DETAIL_L39(m), m(40)
#define STEPPE_DETAIL_L41(m) STEPPE_DETAIL_L40(m), m(41)
#define STEPPE_DETAIL_L42(m) STEPPE_DETAIL_L41(m), m(42)
#define STEPPE_DETAIL_L43(m) STEPPE_DETAIL_L42(m), m(43)
#define STEPPE_DETAIL_L44(m) STEPPE_DETAIL_L43(m), m(44)
#define STEPPE_DETAIL_L45(m) STEPPE_DETAIL_L44(m), m(45)
#define STEPPE_DETAIL_L46(m) STEPPE_DETAIL_L45(m), m(46)
#define STEPPE_DETAIL_L47(m) STEPPE_DETAIL_L46(m), m(47)
#define STEPPE_DETAIL_L48(m) STEPPE_DETAIL_L47(m), m(48)
#define STEPPE_DETAIL_L49(m) STEPPE_DETAIL_L48(m), m(49)
#define STEPPE_DETAIL_L50(m) STEPPE_DETAIL_L49(m), m(50)
#define STEPPE_DETAIL_L51(m) STEPPE_DETAIL_L50(m), m(51)
#define STEPPE_DETAIL_L52(m) STEPPE_DETAIL_L51(m), m(52)
#define STEPPE_DETAIL_L53(m) STEPPE_DETAIL_L52(m), m(53)
#define STEPPE_DETAIL_L54(m) STEPPE_DETAIL_L53(m), m(54)
#define STEPPE_DETAIL_L55(m) STEPPE_DETAIL_L54(m), m(55)
#define STEPPE_DETAIL_L56(m) STEPPE_DETAIL_L55(m), m(56)
#define STEPPE_DETAIL_L57(m) STEPPE_DETAIL_L56(m), m(57)
#define STEPPE_DETAIL_L58(m) STEPPE_DETAIL_L57(m), m(58)
#define STEPPE_DETAIL_L59(m) STEPPE_DETAIL_L58(m), m(59)
#define STEPPE_DETAIL_L60(m) STEPPE_DETAIL_L59(m), m(60)
#define STEPPE_DETAIL_L61(m) STEPPE_DETAIL_L60(m), m(61)
#define STEPPE_DETAIL_L62(m) STEPPE_DETAIL_L61(m), m(62)
#define STEPPE_DETAIL_L63(m) STEPPE_DETAIL_L62(m), m(63)
#define STEPPE_DETAIL_L64(m) STEPPE_DETAIL_L63(m), m(64)

// Mode types: returns member_info (use only inside decltype). Mode refs:
// returns f(member references...).
template<std::size_t N, bind_mode Mode, class T, class F>
constexpr decltype(auto) bind_members(T& t, [[maybe_unused]] F f) {
    static_assert(N >= 1 && N <= max_members);
    STEPPE_DETAIL_CASE(1) STEPPE_DETAIL_CASE(2) STEPPE_DETAIL_CASE(3) STEPPE_DETAIL_CASE(4)
    STEPPE_DETAIL_CASE(5) STEPPE_DETAIL_CASE(6) STEPPE_DETAIL_CASE(7) STEPPE_DETAIL_CASE(8)
    STEPPE_DETAIL_CASE(9) STEPPE_DETAIL_CASE(10) STEPPE_DETAIL_CASE(11) STEPPE_DETAIL_CASE(12)
    STEPPE_DETAIL_CASE(13) STEPPE_DETAIL_CASE(14) STEPPE_DETAIL_CASE(15) STEPPE_DETAIL_CASE(16)
    STEPPE_DETAIL_CASE(17) STEPPE_DETAIL_CASE(18) STEPPE_DETAIL_CASE(19) STEPPE_DETAIL_CASE(20)
    STEPPE_DETAIL_CASE(21) STEPPE_DETAIL_CASE(22) STEPPE_DETAIL_CASE(23) STEPPE_DETAIL_CASE(24)
    STEPPE_DETAIL_CASE(25) STEPPE_DETAIL_CASE(26) STEPPE_DETAIL_CASE(27) STEPPE_DETAIL_CASE(28)
    STEPPE_DETAIL_CASE(29) STEPPE_DETAIL_CASE(30) STEPPE_DETAIL_CASE(31) STEPPE_DETAIL_CASE(32)
    STEPPE_DETAIL_CASE(33) STEPPE_DETAIL_CASE(34) STEPPE_DETAIL_CASE(35) STEPPE_DETAIL_CASE(36)
    STEPPE_DETAIL_CASE(37) STEPPE_DETAIL_CASE(38) STEPPE_DETAIL_CASE(39) STEPPE_DETAIL_CASE(40)
    STEPPE_DETAIL_CASE(41) STEPPE_DETAIL_CASE(42) STEPPE_DETAIL_CASE(43) STEPPE_DETAIL_CASE(44)
    STEPPE_DETAIL_CASE(45) STEPPE_DETAIL_CASE(46) STEPPE_DETAIL_CASE(47) STEPPE_DETAIL_CASE(48)
    STEPPE_DETAIL_CASE(49) STEPPE_DETAIL_CASE(50) STEPPE_DETAIL_CASE(51) STEPPE_DETAIL_CASE(52)
    STEPPE_DETAIL_CASE(53) STEPPE_DETAIL_CASE(54) STEPPE_DETAIL_CASE(55) STEPPE_DETAIL_CASE(56)
    STEPPE_DETAIL_CASE(57) STEPPE_DETAIL_CASE(58) STEPPE_DETAIL_CASE(59) STEPPE_DETAIL_CASE(60)
    STEPPE_DETAIL_CASE(61) STEPPE_DETAIL_CASE(62) STEPPE_DETAIL_CASE(63) STEPPE_DETAIL_CASE(64)
    { return; }
}

#undef STEPPE_DETAIL_CASE
#undef STEPPE_DETAIL_NAME
#undef STEPPE_DETAIL_DECL
#undef STEPPE_DETAIL_ADDR
// (The STEPPE_DETAIL_Ln chain stays defined: undefining 64 names buys nothing.)

#define STEPPE_DETAIL_BRACES(i) {}
#define STEPPE_DETAIL_ECASE(n) \
    if constexpr (N == n) return requires { T{STEPPE_DETAIL_L##n(STEPPE_DETAIL_BRACES)}; }; else
template<class T, std::size_t N> consteval bool empty_braces_init() {
    if constexpr (N == 0) return requires { T{}; }; else
    STEPPE_DETAIL_ECASE(1) STEPPE_DETAIL_ECASE(2) STEPPE_DETAIL_ECASE(3) STEPPE_DETAIL_ECASE(4)
    STEPPE_DETAIL_ECASE(5) STEPPE_DETAIL_ECASE(6) STEPPE_DETAIL_ECASE(7) STEPPE_DETAIL_ECASE(8)
    STEPPE_DETAIL_ECASE(9) STEPPE_DETAIL_ECASE(10) STEPPE_DETAIL_ECASE(11) STEPPE_DETAIL_ECASE(12)
    STEPPE_DETAIL_ECASE(13) STEPPE_DETAIL_ECASE(14) STEPPE_DETAIL_ECASE(15) STEPPE_DETAIL_ECASE(16)
    STEPPE_DETAIL_ECASE(17) STEPPE_DETAIL_ECASE(18) STEPPE_DETAIL_ECASE(19) STEPPE_DETAIL_ECASE(20)
    STEPPE_DETAIL_ECASE(21) STEPPE_DETAIL_ECASE(22) STEPPE_DETAIL_ECASE(23) STEPPE_DETAIL_ECASE(24)
    STEPPE_DETAIL_ECASE(25) STEPPE_DETAIL_ECASE(26) STEPPE_DETAIL_ECASE(27) STEPPE_DETAIL_ECASE(28)
    STEPPE_DETAIL_ECASE(29) STEPPE_DETAIL_ECASE(30) STEPPE_DETAIL_ECASE(31) STEPPE_DETAIL_ECASE(32)
    STEPPE_DETAIL_ECASE(33) STEPPE_DETAIL_ECASE(34) STEPPE_DETAIL_ECASE(35) STEPPE_DETAIL_ECASE(36)
    STEPPE_DETAIL_ECASE(37) STEPPE_DETAIL_ECASE(38) STEPPE_DETAIL_ECASE(39) STEPPE_DETAIL_ECASE(40)
    STEPPE_DETAIL_ECASE(41) STEPPE_DETAIL_ECASE(42) STEPPE_DETAIL_ECASE(43) STEPPE_DETAIL_ECASE(44)
    STEPPE_DETAIL_ECASE(45) STEPPE_DETAIL_ECASE(46) STEPPE_DETAIL_ECASE(47) STEPPE_DETAIL_ECASE(48)
    STEPPE_DETAIL_ECASE(49) STEPPE_DETAIL_ECASE(50) STEPPE_DETAIL_ECASE(51) STEPPE_DETAIL_ECASE(52)
    STEPPE_DETAIL_ECASE(53) STEPPE_DETAIL_ECASE(54) STEPPE_DETAIL_ECASE(55) STEPPE_DETAIL_ECASE(56)
    STEPPE_DETAIL_ECASE(57) STEPPE_DETAIL_ECASE(58) STEPPE_DETAIL_ECASE(59) STEPPE_DETAIL_ECASE(60)
    STEPPE_DETAIL_ECASE(61) STEPPE_DETAIL_ECASE(62) STEPPE_DETAIL_ECASE(63) STEPPE_DETAIL_ECASE(64)
    return false;  // 65 and more: braced_any reports too_many
}
#undef STEPPE_DETAIL_ECASE
#undef STEPPE_DETAIL_BRACES
template<class T, std::size_t... I> struct empty_braced<T, std::index_sequence<I...>>
    : std::bool_constant<empty_braces_init<T, sizeof...(I)>()> {};

// The two braced counts only ever stop early, so the larger one is taken;
// 0 is never trusted (empty classes never get here) because it would drop
// every member silently.
template<class T> consteval std::size_t combined_member_count() {
    constexpr std::size_t by_any = count_by<braced_any, T>();
    if constexpr (by_any == too_many) {
        return too_many;
    } else {
        constexpr std::size_t by_empty = count_by<empty_braced, T>();
        constexpr std::size_t braced = std::max(by_any == uncountable ? 0 : by_any,
                                                by_empty == uncountable ? 0 : by_empty);
        if constexpr (braced > 0) {
            return braced;
        } else {
            constexpr std::size_t by_value = count_by<unbraced, T>();
            return by_value == 0 ? uncountable : by_value;
        }
    }
}

// A non-const lvalue reference member defeats every count above; if lvalues
// initialize T, that is why.
template<class T> consteval bool has_lvalue_reference_member() {
    constexpr std::size_t n = count_by<unbraced_lvalues, T>();
    return n != 0 && n != uncountable;
}

template<class T> inline constexpr std::size_t member_count = combined_member_count<T>();

template<class T> struct aggregate_members {
    using info = decltype(bind_members<member_count<T>, bind_mode::types>(std::declval<T&>(), 0));
    using types = typename info::types;
    static constexpr bool any_bit_field = info::any_bit_field;
};

// Storage shaped like a T but never constructed: offsets are read from it by
// taking member addresses; nothing is ever loaded or stored through it.
template<class T> T& phantom() noexcept {
    alignas(T) static unsigned char storage[sizeof(T)];
    return *reinterpret_cast<T*>(storage);
}

#if defined(__GNUC__) && !defined(__clang__)
// Member names: the address of a member of a never-defined object, as a
// template argument, spells the member's name in __PRETTY_FUNCTION__
// (g++ >= 11; clang 14 rejects subobject addresses as template arguments).
template<class T> struct fake_wrapper { const T value; };
template<class T> extern const fake_wrapper<T> fake_object;
template<auto P> constexpr const char* raw_member_name() noexcept { return __PRETTY_FUNCTION__; }
template<std::size_t I> struct nth_address {
    template<class... M> constexpr auto operator()(const M&... m) const noexcept {
        return std::get<I>(std::tuple<const M*...>(&m...));
    }
};
template<class T, std::size_t I> std::string member_name() {
    return member_name_from(raw_member_name<bind_members<member_count<T>, bind_mode::refs>(
        fake_object<T>.value, nth_address<I>{})>());
}
#else
template<class T, std::size_t I> std::string member_name() { return {}; }
#endif

}  // namespace steppe::types::detail

// ---- 5. Classification and compile-time checks -----------------------------
namespace steppe::types {

struct access {
    template<class T> static constexpr bool has_fields = requires { T::template steppe_fields_<T>(); };
    template<class T> static constexpr bool has_bases = requires { T::steppe_bases_(); };
    template<class T> static constexpr bool owns_fields() {
        if constexpr (has_fields<T>) return std::is_same_v<decltype(std::declval<T&>().steppe_fields_owner_()), T>;
        else return false;
    }
    template<class T> static constexpr bool owns_bases() {
        if constexpr (has_bases<T>) return std::is_same_v<decltype(std::declval<T&>().steppe_bases_owner_()), T>;
        else return false;
    }
    template<class T> static constexpr auto fields() noexcept { return T::template steppe_fields_<T>(); }
    template<class T> static constexpr auto bases() noexcept { return T::steppe_bases_(); }
    // How B is a base of T. A friend may convert to private bases; the upcast
    // is ill-formed for an ambiguous base, the downcast for a virtual one.
    enum class relation : std::uint8_t { none, plain, virtual_base };
    template<class T, class B> static constexpr bool converts = requires(T* t) { static_cast<B*>(t); };
    template<class T, class B> static constexpr relation base_relation() {
        if constexpr (!std::is_base_of_v<B, T> || std::is_same_v<B, T> || !converts<T, B>) return relation::none;
        else if constexpr (requires(B* b) { static_cast<T*>(b); }) return relation::plain;
        else return relation::virtual_base;
    }
    // A non-virtual base sits at a constant offset: no vptr is read.
    template<class T, class B> static std::size_t base_offset() noexcept {
        T* t = &detail::phantom<T>();
        return static_cast<std::size_t>(reinterpret_cast<const char*>(static_cast<B*>(t)) -
                                        reinterpret_cast<const char*>(t));
    }
    // A virtual base's offset is kept in T's vtable (Itanium), in a slot only
    // the compiler knows, so let it convert: `shell` holds T's vptr.
    template<class T, class V> static std::size_t virtual_base_offset(const void* shell) noexcept {
        const T* t = static_cast<const T*>(shell);
        return static_cast<std::size_t>(reinterpret_cast<const char*>(static_cast<const V*>(t)) -
                                        reinterpret_cast<const char*>(t));
    }
    template<class T, class M, class C> static M T::*widen(M C::*p) noexcept { return p; }
};

namespace detail {

template<class T> struct is_std_array : std::false_type {};
template<class E, std::size_t N> struct is_std_array<std::array<E, N>> : std::true_type {
    using element = E;
    static constexpr std::size_t count = N;
};
template<class T> struct c_array {
    using element = std::remove_extent_t<T>;
    static constexpr std::size_t count = std::extent_v<T>;
};
template<class T> using array_traits = std::conditional_t<std::is_array_v<T>, c_array<T>, is_std_array<T>>;

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;
template<class T> inline constexpr bool is_scalar_value =
    std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_null_pointer_v<T> ||
    std::is_same_v<T, int128> || std::is_same_v<T, uint128>;

template<class T> inline constexpr bool has_description = requires { steppe::describe<T>::fields; };
// A class naming its target type steppe_reference_word is one word the
// object engine translates (steppe::objects::ref); the type named is what the
// word refers to.
template<class T> inline constexpr bool is_reference_word = requires { typename T::steppe_reference_word; };

enum class how : std::uint8_t {
    scalar, pointer, reference_word, array, aggregate, declared, described, empty, union_bytes,
    refused,  // everything below is refused
    reference, function, function_pointer, member_pointer, void_type, incomplete, unbounded_array,
    too_large, union_with_pointers, undeclared_union, aggregate_with_bases, too_many_members,
    uncountable_members, bit_field, polymorphic_undeclared, inherited_declaration, no_layout,
};

template<class T> consteval how classify();

// The descriptors of a declared or described class: its bases, then fields.
template<class T, class... B> constexpr auto base_descriptors(type_list<B...>) noexcept {
    return std::tuple<base_class<B>...>{};
}
template<class T> constexpr auto descriptors() noexcept {
    if constexpr (has_description<T>) {
        return describe<T>::fields.items;
    } else if constexpr (access::owns_bases<T>()) {
        return std::tuple_cat(base_descriptors<T>(access::bases<T>()), access::fields<T>().items);
    } else {
        return access::fields<T>().items;
    }
}
template<class T> using descriptor_tuple = decltype(descriptors<T>());

// type_lists as sets: the first list plus every type of the others it lacks.
template<class... L> struct set_union;
template<class... S> struct set_union<type_list<S...>> { using type = type_list<S...>; };
template<class... S, class... Rest> struct set_union<type_list<S...>, type_list<>, Rest...>
    : set_union<type_list<S...>, Rest...> {};
template<class... S, class M, class... More, class... Rest>
struct set_union<type_list<S...>, type_list<M, More...>, Rest...>
    : set_union<std::conditional_t<(std::is_same_v<S, M> || ...), type_list<S...>, type_list<S..., M>>,
                type_list<More...>, Rest...> {};

// Every virtual base of T, direct or indirect, once: a virtual base of any of
// T's bases is one of T's, and only the complete object places it (Itanium).
template<class T> consteval auto virtual_bases_of();
template<class T> using virtual_bases = decltype(virtual_bases_of<std::remove_cv_t<T>>());
template<class T, class D> struct virtual_bases_via { using type = type_list<>; };  // a member
template<class T, class B> struct virtual_bases_via<T, base_class<B>>
    : set_union<std::conditional_t<access::base_relation<T, B>() == access::relation::virtual_base, type_list<B>,
                                   type_list<>>,
                virtual_bases<B>> {};
template<class T, class Tuple> struct virtual_bases_in;
template<class T, class... D> struct virtual_bases_in<T, std::tuple<D...>>
    : set_union<type_list<>, typename virtual_bases_via<T, D>::type...> {};
template<class T> consteval auto virtual_bases_of() {
    constexpr how h = classify<T>();
    if constexpr (h == how::declared || h == how::described)
        return typename virtual_bases_in<T, descriptor_tuple<T>>::type{};
    else return type_list<>{};
}

// Itanium: a class has a vptr if it has virtual functions or virtual bases.
template<class T> inline constexpr bool is_dynamic = std::is_polymorphic_v<T> || virtual_bases<T>::size > 0;

// Does T hold anything that needs fixing up on load: a pointer or a vptr?
template<class T> consteval bool has_slots();
template<class Tuple> struct any_slots;
template<class... D> struct any_slots<std::tuple<D...>>
    : std::bool_constant<(has_slots<typename D::type>() || ... || false)> {};
template<class... M> constexpr bool list_has_slots(type_list<M...>) { return (has_slots<M>() || ... || false); }

template<class T> consteval bool has_slots() {
    constexpr how h = classify<T>();
    if constexpr (h == how::pointer || h == how::reference_word) return true;
    else if constexpr (h == how::array) return has_slots<typename array_traits<std::remove_cv_t<T>>::element>();
    else if constexpr (h == how::aggregate) return list_has_slots(typename aggregate_members<std::remove_cv_t<T>>::types{});
    else if constexpr (h == how::declared || h == how::described)
        return is_dynamic<T> || any_slots<descriptor_tuple<std::remove_cv_t<T>>>::value;
    else return false;
}

template<class T> consteval how classify() {
    if constexpr (std::is_reference_v<T>) return how::reference;
    else {
        using U = std::remove_cv_t<T>;
        if constexpr (std::is_void_v<U>) return how::void_type;
        else if constexpr (std::is_function_v<U>) return how::function;
        else if constexpr (std::is_member_pointer_v<U>) return how::member_pointer;
        else if constexpr (std::is_pointer_v<U>)
            return std::is_function_v<std::remove_pointer_t<U>> ? how::function_pointer : how::pointer;
        else if constexpr (is_scalar_value<U>) return how::scalar;
        else if constexpr (std::is_unbounded_array_v<U>) return how::unbounded_array;
        else if constexpr (!requires { sizeof(U); }) return how::incomplete;
        else if constexpr (sizeof(U) > max_type_size) return how::too_large;
        else if constexpr (std::is_array_v<U>) return how::array;
        else if constexpr (is_reference_word<U>) return how::reference_word;
        else if constexpr (has_description<U>) return how::described;
        else if constexpr (is_std_array<U>::value) return how::array;
        else if constexpr ((access::has_fields<U> && !access::owns_fields<U>()) ||
                           (access::has_bases<U> && !access::owns_bases<U>()))
            return how::inherited_declaration;
        else if constexpr (std::is_union_v<U>) {
            if constexpr (!access::owns_fields<U>()) return how::undeclared_union;
            else if constexpr (any_slots<descriptor_tuple<U>>::value) return how::union_with_pointers;
            else return how::union_bytes;
        }
        else if constexpr (access::owns_fields<U>()) return how::declared;
        else if constexpr (std::is_empty_v<U>) return how::empty;
        else if constexpr (std::is_aggregate_v<U>) {
            if constexpr (aggregate_has_base<U>) return how::aggregate_with_bases;
            else if constexpr (member_count<U> == uncountable)
                return has_lvalue_reference_member<U>() ? how::reference : how::uncountable_members;
            else if constexpr (member_count<U> > max_members) return how::too_many_members;
            else if constexpr (aggregate_members<U>::any_bit_field) return how::bit_field;
            else return how::aggregate;
        }
        else if constexpr (std::is_polymorphic_v<U>) return how::polymorphic_undeclared;
        else return how::no_layout;
    }
}

template<class T, bool Loud> constexpr bool verify();
template<class T, bool Loud, class... M> constexpr bool verify_list(type_list<M...>) {
    return (verify<M, Loud>() && ... && true);
}

template<class T, bool Loud, class D> constexpr bool verify_descriptor() {
    if constexpr (requires { typename D::owner; }) {
        // A member of a virtual base has no fixed offset in T: that base lists it.
        constexpr bool ok = std::is_same_v<typename D::owner, T> ||
                            access::base_relation<T, typename D::owner>() == access::relation::plain;
        static_assert(!Loud || ok, "steppe: STEPPE_FIELDS or steppe::describe names a member of a class that is "
                                   "neither this type nor one of its unambiguous non-virtual bases (a virtual "
                                   "base lists its own members)");
        return ok && verify<typename D::type, Loud>();
    } else if constexpr (std::is_same_v<D, base_class<typename D::type>>) {
        constexpr bool ok = access::base_relation<T, typename D::type>() != access::relation::none;
        static_assert(!Loud || ok, "steppe: a declared base must be a proper, unambiguous base class of the "
                                   "class that declares it (virtual or not)");
        return ok && verify<typename D::type, Loud>();
    } else {
        return verify<typename D::type, Loud>();
    }
}
template<class T, bool Loud, class... D> constexpr bool verify_descriptors(std::tuple<D...>*) {
    return (verify_descriptor<T, Loud, D>() && ... && true);
}

// A T* must convert to each virtual base: the one complete object places.
template<class T, bool Loud, class... V> constexpr bool verify_virtual_bases(type_list<V...>) {
    constexpr bool ok = (access::converts<T, V> && ... && true);
    static_assert(!Loud || ok, "steppe: a virtual base of this class is also a non-virtual base of it (it holds "
                               "two subobjects of that type); store a class that inherits it one way only");
    return ok;
}

// One static_assert per refusal; exactly the one matching T's refusal fires.
template<class T, bool Loud> constexpr bool verify() {
    constexpr how h = classify<T>();
    if constexpr (Loud) {
        static_assert(h != how::reference, "steppe: a reference cannot be stored in a persistent object; use a pointer");
        static_assert(h != how::function, "steppe: a function type has no layout");
        static_assert(h != how::function_pointer, "steppe: a function pointer cannot be persisted (code addresses "
                                                   "change between builds); store an enum or table index instead");
        static_assert(h != how::member_pointer, "steppe: a pointer to member cannot be persisted; store an enum or "
                                                 "an offset instead");
        static_assert(h != how::void_type, "steppe: void has no layout");
        static_assert(h != how::incomplete, "steppe: the type is incomplete here; include its definition");
        static_assert(h != how::unbounded_array, "steppe: an array of unknown bound has no layout; use a bounded "
                                                  "array or a container");
        static_assert(h != how::too_large, "steppe: the type is larger than steppe::types::max_type_size (1 GiB)");
        static_assert(h != how::union_with_pointers, "steppe: a union that holds pointers cannot be swizzled (steppe "
                                                      "cannot tell which member is live); keep pointers out of unions "
                                                      "or describe a tagged type with steppe::describe");
        static_assert(h != how::undeclared_union, "steppe: steppe cannot see inside this union; list every member "
                                                   "with STEPPE_FIELDS(...) in its body so steppe can check that none "
                                                   "holds a pointer");
        static_assert(h != how::aggregate_with_bases, "steppe: an aggregate with base classes cannot be reflected; add "
                                                       "STEPPE_FIELDS(own members) and STEPPE_BASES(bases) in its body");
        static_assert(h != how::too_many_members, "steppe: aggregate with more than 64 members; declare them with "
                                                   "STEPPE_FIELDS(...)");
        static_assert(h != how::uncountable_members, "steppe: cannot count this aggregate's members (one cannot be "
                                                      "brace-initialized); declare them with STEPPE_FIELDS(...)");
        static_assert(h != how::bit_field, "steppe: bit-field members are not supported; use whole integers, or "
                                            "specialize steppe::describe with steppe::at<U>(offset) for the storage unit");
        static_assert(h != how::polymorphic_undeclared, "steppe: a polymorphic class needs STEPPE_FIELDS(members) "
                                                         "(and STEPPE_BASES(bases)) in its body");
        static_assert(h != how::inherited_declaration, "steppe: this class inherits STEPPE_FIELDS or STEPPE_BASES "
                                                        "from a base but does not declare its own; add "
                                                        "STEPPE_FIELDS(own members) and STEPPE_BASES(bases) in its body");
        static_assert(h != how::no_layout, "steppe: type has no derivable layout (not an aggregate): add "
                                            "STEPPE_FIELDS(members) in its body (STEPPE_BASES(bases) for bases), or "
                                            "specialize steppe::describe<T>");
    }
    using U = std::remove_cvref_t<T>;
    if constexpr (h > how::refused) return false;
    else if constexpr (h == how::array) return verify<typename array_traits<U>::element, Loud>();
    else if constexpr (h == how::aggregate) return verify_list<U, Loud>(typename aggregate_members<U>::types{});
    else if constexpr (h == how::declared || h == how::described || h == how::union_bytes) {
        constexpr bool parts = verify_descriptors<U, Loud>(static_cast<descriptor_tuple<U>*>(nullptr));
        if constexpr (parts) return verify_virtual_bases<U, Loud>(virtual_bases<U>{});
        else return false;
    } else return true;
}

}  // namespace detail
}  // namespace steppe::types

namespace steppe {
// T has a layout steppe can derive; layout_of<T>() explains when it has not.
template<class T> concept persistable = types::detail::verify<T, false>();
}

namespace steppe::types {
// T has virtual bases, direct or indirect (declared with STEPPE_BASES or
// steppe::describe).
template<class T> inline constexpr bool has_virtual_bases = detail::virtual_bases<T>::size > 0;
}

// ---- 6. Building layouts ----------------------------------------------------
namespace steppe::types::detail {

// Defined in layout.cpp.
std::uint64_t code_fp(char code, std::size_t size) noexcept;
std::uint64_t array_fp(std::uint64_t element_fp, std::size_t count) noexcept;
void append_shifted(layout& out, const layout& inner, std::size_t offset);
struct extent {
    std::size_t offset, size, align;
};
// Sorts, validates and fingerprints. With `declared`, also checks that every
// byte not explained by padding belongs to a listed field, base or vptr.
void finish(layout& l, const std::vector<extent>* declared);
// Sizes a class's non-virtual part to the extents of its members, bases and
// vptr (Itanium's nvsize and nvalign).
void size_to(layout& l, const std::vector<extent>& parts) noexcept;

// Zeroed storage shaped like a complete object of a dynamic class, holding
// only the class's primary vptr (its address point, found in its vtable group
// by symbol): enough for the compiler to find virtual bases, without running
// a constructor or any other user code. Throws errc::unsupported, naming the
// type, if the vtable symbol cannot be resolved.
class vtable_shell {
public:
    vtable_shell(const std::type_info& type, const std::string& name, std::size_t size, std::size_t align);
    vtable_shell(const vtable_shell&) = delete;
    vtable_shell& operator=(const vtable_shell&) = delete;
    ~vtable_shell();
    const void* get() const noexcept { return storage_; }

private:
    void* storage_;
    std::size_t align_;
};

// The layout of T as a base subobject: its non-virtual part only, since the
// complete object places the virtual bases. The same as layout_of<T>() for a
// class without virtual bases.
template<class T> const layout& base_layout_of();

template<class M> consteval char scalar_code() {
    if constexpr (std::is_same_v<M, bool>) return 'b';
    else if constexpr (std::is_enum_v<M>) return 'e';
    else if constexpr (std::is_null_pointer_v<M>) return 'n';
    else if constexpr (std::is_floating_point_v<M>) return 'f';
    else if constexpr (std::is_same_v<M, int128> || std::is_signed_v<M>) return 'i';
    else return 'u';
}

template<class M> constexpr field_kind kind_of() {
    constexpr how h = classify<M>();
    if constexpr (h == how::scalar) return field_kind::scalar;
    else if constexpr (h == how::pointer) return field_kind::pointer;
    else if constexpr (h == how::reference_word) return field_kind::reference;
    else if constexpr (h == how::array) return field_kind::array;
    else return field_kind::nested;
}

template<class M> std::uint64_t type_fp() {
    constexpr how h = classify<M>();
    if constexpr (h == how::scalar) {
        if constexpr (std::is_enum_v<M>) return code_fp('e', type_fp<std::underlying_type_t<M>>());
        else return code_fp(scalar_code<M>(), sizeof(M));
    } else if constexpr (h == how::pointer) {
        return code_fp('p', sizeof(M));
    } else if constexpr (h == how::reference_word) {
        return code_fp('r', sizeof(M));
    } else if constexpr (h == how::array) {
        using A = array_traits<M>;
        return array_fp(type_fp<std::remove_cv_t<typename A::element>>(), A::count);
    } else {
        return layout_of<M>().fingerprint;
    }
}

// Adds M's pointers and vptrs, as if an M sat at `offset`.
template<class M> void append_slots(layout& l, std::size_t offset) {
    constexpr how h = classify<M>();
    if constexpr (h == how::pointer) {
        l.pointers.push_back(static_cast<std::uint32_t>(offset));
    } else if constexpr (h == how::reference_word) {
        static_assert(sizeof(M) == sizeof(void*), "steppe: a reference word is one pointer-sized word");
        using target = std::remove_cv_t<typename M::steppe_reference_word>;
        l.refs.push_back(static_cast<std::uint32_t>(offset));
        l.ref_targets.push_back({type_name<target>(), {&layout_of<target>}});
    } else if constexpr (h == how::array) {
        using A = array_traits<M>;
        using E = std::remove_cv_t<typename A::element>;
        if constexpr (has_slots<E>())
            for (std::size_t i = 0; i < A::count; ++i) append_slots<E>(l, offset + i * sizeof(E));
    } else if constexpr (h != how::scalar) {
        if constexpr (has_slots<M>()) append_shifted(l, layout_of<M>(), offset);
    }
}

// The program's layout of the class M is or holds (an array's element), if any.
template<class M> constexpr layout_link nested_link() {
    constexpr how h = classify<M>();
    if constexpr (h == how::array) return nested_link<std::remove_cv_t<typename array_traits<M>::element>>();
    else if constexpr (h == how::scalar || h == how::pointer || h == how::reference_word) return {};
    else return {&layout_of<M>};
}

template<class M> void add_field(layout& l, std::size_t offset, std::string name, field_kind kind,
                                 std::vector<extent>& extents) {
    l.fields.push_back(field{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(sizeof(M)), kind,
                             type_fp<M>(), type_name<M>(), std::move(name), nested_link<M>()});
    extents.push_back({offset, sizeof(M), alignof(M)});
    append_slots<M>(l, offset);
}

template<class T, class M> std::size_t member_offset(M T::*p) noexcept {
    // Itanium ABI: a data member pointer is the member's offset as a ptrdiff_t.
    static_assert(sizeof(p) == sizeof(std::ptrdiff_t));
    std::ptrdiff_t offset;
    std::memcpy(&offset, &p, sizeof offset);
    return static_cast<std::size_t>(offset);
}

template<class B> void add_base(layout& l, std::size_t offset, std::vector<extent>& extents) {
    const layout& part = base_layout_of<B>();
    l.fields.push_back(
        field{static_cast<std::uint32_t>(offset), part.size, field_kind::base, part.fingerprint, type_name<B>(), {}, {}});
    extents.push_back({offset, part.size, part.align});
    append_shifted(l, part, offset);
}

template<class T, class D> void add_descriptor(layout& l, const D& d, std::vector<extent>& extents) {
    using M = std::remove_cv_t<typename D::type>;
    if constexpr (requires { typename D::owner; }) {
        add_field<M>(l, member_offset(access::widen<T>(d.pointer)), d.name, kind_of<M>(), extents);
    } else if constexpr (std::is_same_v<D, base_class<typename D::type>>) {
        // A virtual base is left to the complete object (build).
        if constexpr (access::base_relation<T, typename D::type>() == access::relation::plain)
            add_base<M>(l, access::base_offset<T, typename D::type>(), extents);
    } else {
        add_field<M>(l, d.offset, d.name, kind_of<M>(), extents);
    }
}

// What T holds at fixed offsets: members, non-virtual bases and its vptr.
template<class T> layout build_nonvirtual(std::vector<extent>& extents) {
    constexpr how h = classify<T>();
    layout l;
    l.name = type_name<T>();
    if constexpr (h == how::scalar || h == how::pointer || h == how::reference_word || h == how::array) {
        add_field<T>(l, 0, {}, kind_of<T>(), extents);  // a non-class type describes itself
    } else if constexpr (h == how::aggregate) {
        T& object = phantom<T>();
        auto offset_of = [&object](const auto& member) {
            return static_cast<std::size_t>(reinterpret_cast<const char*>(std::addressof(member)) -
                                            reinterpret_cast<const char*>(std::addressof(object)));
        };
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            bind_members<member_count<T>, bind_mode::refs>(object, [&](auto&... member) {
                (add_field<std::remove_cvref_t<decltype(member)>>(
                     l, offset_of(member), member_name<T, I>(), kind_of<std::remove_cvref_t<decltype(member)>>(),
                     extents),
                 ...);
            });
        }(std::make_index_sequence<member_count<T>>{});
    } else if constexpr (h == how::declared || h == how::described || h == how::union_bytes) {
        std::apply([&](const auto&... d) { (add_descriptor<T>(l, d, extents), ...); }, descriptors<T>());
    }
    if constexpr (is_dynamic<T>) {
        l.vptrs.push_back(0);  // Itanium: a dynamic class's (primary) vptr is at offset 0
        extents.push_back({0, sizeof(void*), alignof(void*)});
    }
    return l;
}

template<class T, class... V> void add_virtual_bases(layout& l, std::vector<extent>& extents, type_list<V...>) {
    if constexpr (sizeof...(V) > 0) {
        vtable_shell shell(typeid(T), l.name, sizeof(T), alignof(T));
        (add_base<V>(l, access::virtual_base_offset<T, V>(shell.get()), extents), ...);
    }
}

// The complete T: its non-virtual part, then every virtual base where this
// class's vtable says it is.
template<class T> layout build() {
    std::vector<extent> extents;
    layout l = build_nonvirtual<T>(extents);
    add_virtual_bases<T>(l, extents, virtual_bases<T>{});
    l.size = static_cast<std::uint32_t>(sizeof(T));
    l.align = static_cast<std::uint32_t>(alignof(T));
    finish(l, classify<T>() == how::declared ? &extents : nullptr);
    return l;
}

template<class T> layout build_base() {
    std::vector<extent> extents;
    layout l = build_nonvirtual<T>(extents);
    size_to(l, extents);
    finish(l, classify<T>() == how::declared ? &extents : nullptr);
    return l;
}

template<class T> const layout& base_layout_of() {
    if constexpr (virtual_bases<T>::size == 0) {
        return layout_of<T>();
    } else {
        static const layout& built = *new layout(build_base<T>());
        return built;
    }
}

// Every type whose layout_of this program instantiates is noted at start-up
// (program_types in src/types/types.hpp), so a store can be compared with all
// of them when it opens, before any object is read.
void note_program_type(const layout& (*get)()) noexcept;
template<class T> inline const bool noted = (note_program_type(&layout_of<T>), true);

}  // namespace steppe::types::detail

namespace steppe::types {

// Notes types this program only reads through base pointers (so it never
// makes or allocates them itself), so they too are compared with a store's
// catalog at open: steppe::types::declare<Rect, Circle>();
template<class... T> void declare() noexcept { (static_cast<void>(detail::noted<T>), ...); }

template<class T> const layout& layout_of() {
    if constexpr (!std::is_same_v<std::remove_cv_t<T>, T>) {
        return layout_of<std::remove_cv_t<T>>();
    } else if constexpr (!detail::verify<T, true>()) {
        static const layout refused;  // not reached: verify's static_assert stopped the build
        return refused;
    } else {
        static_cast<void>(detail::noted<T>);
        static const layout& built = *new layout(detail::build<T>());
        return built;
    }
}

}  // namespace steppe::types
