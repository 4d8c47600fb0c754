// steppe/containers.hpp — the standard library in a store.
//
//   auto store = steppe::store::open("parts.db");
//   auto* index = store.root<steppe::map<steppe::string, steppe::vector<Part*>>>("index");
//   (*index)["bolts"].push_back(store.make<Part>());   // nodes, strings, buffers: all in the store
//   store.commit();
//
// The real libstdc++ containers persist when they allocate through
// steppe::allocator<T> (in the calling thread's current store, see
// allocator.hpp). Every object the engine swizzles needs a layout, so this
// header describes (steppe::describe) the container objects and the node
// types they allocate:
//
//   steppe::vector, string (short strings inside the object), basic_string,
//   list, forward_list, deque, map, multimap, set, multiset, unordered_map,
//   unordered_multimap, unordered_set, unordered_multiset   (aliases below)
//   std::tuple, std::optional, std::variant as members (std::pair and
//   std::array are built into layout.hpp)
//
// They nest to any depth. A container of the same kind with std::allocator
// does not compile as a stored type (its memory would be transient).
//
// Keys that are pointers: the same object can sit at another address after a
// reopen, so ordering or hashing by pointer value breaks a map or set the next
// time the store opens. steppe::persistent_less<T*> / persistent_hash<T*>
// order and hash by the object's persistent address instead; the aliases
// below choose them for pointer keys, and a stored tree or hash table keyed
// by T* with std::less / std::greater / std::hash does not compile.
//
// How the layouts are derived (libstdc++ of GCC 12, the C++11 ABI):
// offsetof on the real types for public and protected members (protected ones
// through a derived "peek" class); for the members libstdc++ keeps private
// (basic_string, _Hashtable, optional, variant) the offsets follow from the
// declarations, every size is static_asserted, and the first use of each
// such layout checks the offsets against a live object, throwing
// steppe::error(unsupported) if libstdc++ disagrees, before anything is
// stored with them. std::tuple's element offsets are read from std::get on
// first use. With another standard library, or with _GLIBCXX_DEBUG (whose
// containers carry transient bookkeeping), no container layouts are defined
// and a stored container does not compile.
#pragma once

#include <steppe/allocator.hpp>
#include <steppe/error.hpp>
#include <steppe/layout.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <forward_list>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#if defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI && !defined(_GLIBCXX_DEBUG)
#define STEPPE_LIBSTDCXX_LAYOUTS 1
#else
#define STEPPE_LIBSTDCXX_LAYOUTS 0
#endif

// ---- 1. Pointer keys ---------------------------------------------------------
namespace steppe {

// Orders pointers by the persistent address of their target (objects outside
// every open store sort after all stored ones, by address). Stable across
// reopen: use it for any ordered container keyed by pointers to stored objects.
template<class T> struct persistent_less;
template<class T> struct persistent_less<T*> {
    bool operator()(const T* a, const T* b) const noexcept {
        return detail::persistent_address_of(a) < detail::persistent_address_of(b);
    }
};

// Hashes pointers by the persistent address of their target: the same value
// in every process that opens the store.
template<class T> struct persistent_hash;
template<class T> struct persistent_hash<T*> {
    std::size_t operator()(const T* p) const noexcept {
        std::uint64_t x = detail::persistent_address_of(p);  // splitmix64's finalizer
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return static_cast<std::size_t>(x ^ (x >> 31));
    }
};

// Hashes any string of C by its characters, as std::hash<std::basic_string<C>>
// does (the same value for the same characters, in every process), and is
// transparent: an unordered container of steppe::string with string_hash and
// std::equal_to<> finds a std::string_view or const C* without building a
// key (which, for a long key, would allocate in the store).
template<class C> struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::basic_string_view<C> s) const noexcept {
        return std::hash<std::basic_string_view<C>>{}(s);
    }
};

// ---- 2. Aliases --------------------------------------------------------------

template<class C, class Traits = std::char_traits<C>>
using basic_string = std::basic_string<C, Traits, allocator<C>>;
using string = basic_string<char>;
using wstring = basic_string<wchar_t>;
using u8string = basic_string<char8_t>;
using u16string = basic_string<char16_t>;
using u32string = basic_string<char32_t>;

namespace detail::stl {
// The default order and hash of the aliases: by persistent address for
// pointer keys; transparent for steppe strings (lookups by string_view or
// const C* build no key).
template<class K> struct defaults {
    using less = std::less<K>;
    using hash = std::hash<K>;
    using equal = std::equal_to<K>;
};
template<class T> struct defaults<T*> {
    using less = persistent_less<T*>;
    using hash = persistent_hash<T*>;
    using equal = std::equal_to<T*>;
};
template<class C> struct defaults<std::basic_string<C, std::char_traits<C>, allocator<C>>> {
    using less = std::less<>;
    using hash = string_hash<C>;
    using equal = std::equal_to<>;
};
}  // namespace detail::stl

template<class T> using vector = std::vector<T, allocator<T>>;
template<class T> using list = std::list<T, allocator<T>>;
template<class T> using forward_list = std::forward_list<T, allocator<T>>;
template<class T> using deque = std::deque<T, allocator<T>>;
template<class K, class V, class Compare = typename detail::stl::defaults<K>::less>
using map = std::map<K, V, Compare, allocator<std::pair<const K, V>>>;
template<class K, class V, class Compare = typename detail::stl::defaults<K>::less>
using multimap = std::multimap<K, V, Compare, allocator<std::pair<const K, V>>>;
template<class K, class Compare = typename detail::stl::defaults<K>::less>
using set = std::set<K, Compare, allocator<K>>;
template<class K, class Compare = typename detail::stl::defaults<K>::less>
using multiset = std::multiset<K, Compare, allocator<K>>;
template<class K, class V, class Hash = typename detail::stl::defaults<K>::hash,
         class Equal = typename detail::stl::defaults<K>::equal>
using unordered_map = std::unordered_map<K, V, Hash, Equal, allocator<std::pair<const K, V>>>;
template<class K, class V, class Hash = typename detail::stl::defaults<K>::hash,
         class Equal = typename detail::stl::defaults<K>::equal>
using unordered_multimap = std::unordered_multimap<K, V, Hash, Equal, allocator<std::pair<const K, V>>>;
template<class K, class Hash = typename detail::stl::defaults<K>::hash,
         class Equal = typename detail::stl::defaults<K>::equal>
using unordered_set = std::unordered_set<K, Hash, Equal, allocator<K>>;
template<class K, class Hash = typename detail::stl::defaults<K>::hash,
         class Equal = typename detail::stl::defaults<K>::equal>
using unordered_multiset = std::unordered_multiset<K, Hash, Equal, allocator<K>>;

// A steppe string compares with a std::string (or any basic_string of the
// same characters) by its characters, as strings of one allocator do.
template<class C, class Traits, class Other>
    requires(!std::is_same_v<Other, allocator<C>>)
bool operator==(const std::basic_string<C, Traits, allocator<C>>& a,
                const std::basic_string<C, Traits, Other>& b) noexcept {
    return std::basic_string_view<C, Traits>(a) == std::basic_string_view<C, Traits>(b);
}
template<class C, class Traits, class Other>
    requires(!std::is_same_v<Other, allocator<C>>)
auto operator<=>(const std::basic_string<C, Traits, allocator<C>>& a,
                 const std::basic_string<C, Traits, Other>& b) noexcept {
    return std::basic_string_view<C, Traits>(a) <=> std::basic_string_view<C, Traits>(b);
}

}  // namespace steppe

// std::hash of a steppe string: the same value as for the std::string with
// the same characters (std::hash is only defined for std::allocator's).
template<class C>
struct std::hash<std::basic_string<C, std::char_traits<C>, steppe::allocator<C>>> {
    std::size_t operator()(const std::basic_string<C, std::char_traits<C>, steppe::allocator<C>>& s) const noexcept {
        return std::hash<std::basic_string_view<C>>{}(s);
    }
};

// ---- 3. Helpers for the layouts ---------------------------------------------
namespace steppe::detail::stl {

// A field whose offset is computed (and checked) on first use rather than
// given as a constant: the descriptor form steppe::at uses, with the offset
// read through a function when layout_of builds the layout.
struct offset_thunk {
    std::size_t (*compute)();
    operator std::size_t() const { return compute(); }
};
template<class M> struct computed_field {
    using type = M;
    offset_thunk offset;
    const char* name;
};
template<class M> constexpr computed_field<M> computed(std::size_t (*compute)(), const char* name) noexcept {
    return {{compute}, name};
}

template<class... D> constexpr field_list<D...> as_fields(std::tuple<D...> items) noexcept { return {items}; }

constexpr std::size_t round_up(std::size_t n, std::size_t align) noexcept { return (n + align - 1) / align * align; }

[[noreturn]] inline void layout_changed(const char* what) {
    throw error(errc::unsupported, std::string("steppe/containers.hpp: the standard library's layout of ") + what +
                                       " is not the one steppe describes (libstdc++ of GCC 12, C++11 ABI); storing "
                                       "it would corrupt the store");
}
template<class T> T word_at(const void* object, std::size_t offset) noexcept {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(object) + offset, sizeof v);
    return v;
}
inline const void* address_at(const void* object, std::size_t offset) noexcept {
    return static_cast<const unsigned char*>(object) + offset;
}

// Comparators and hashes that order or hash a pointer by its value.
template<class C, class K> inline constexpr bool orders_by_value =
    std::is_same_v<C, std::less<K>> || std::is_same_v<C, std::greater<K>> ||
    std::is_same_v<C, std::less_equal<K>> || std::is_same_v<C, std::greater_equal<K>> ||
    std::is_same_v<C, std::less<>> || std::is_same_v<C, std::greater<>> ||
    std::is_same_v<C, std::ranges::less> || std::is_same_v<C, std::ranges::greater>;
template<class H, class K> inline constexpr bool hashes_by_value = std::is_same_v<H, std::hash<K>>;

template<class T> struct dependent_false : std::false_type {};

}  // namespace steppe::detail::stl

#if STEPPE_LIBSTDCXX_LAYOUTS

// ---- 4. Offsets of the libstdc++ internals ----------------------------------
// offsetof on classes that are not standard-layout is conditionally
// supported; g++ and clang compute it exactly for non-virtual bases.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"

namespace steppe::detail::stl {

template<class T> struct vector_peek {
    using base = std::_Vector_base<T, allocator<T>>;  // _M_impl is public there
    static constexpr std::size_t start() { return offsetof(base, _M_impl._M_start); }
    static constexpr std::size_t finish() { return offsetof(base, _M_impl._M_finish); }
    static constexpr std::size_t end_of_storage() { return offsetof(base, _M_impl._M_end_of_storage); }
};

struct bvector_peek : std::_Bvector_base<allocator<bool>> {
    using base = std::_Bvector_base<allocator<bool>>;
    static constexpr std::size_t start_p() { return offsetof(bvector_peek, _M_impl._M_start._M_p); }
    static constexpr std::size_t start_offset() { return offsetof(bvector_peek, _M_impl._M_start._M_offset); }
    static constexpr std::size_t finish_p() { return offsetof(bvector_peek, _M_impl._M_finish._M_p); }
    static constexpr std::size_t finish_offset() { return offsetof(bvector_peek, _M_impl._M_finish._M_offset); }
    static constexpr std::size_t end_of_storage() { return offsetof(bvector_peek, _M_impl._M_end_of_storage); }
};

template<class T> struct list_peek : std::_List_base<T, allocator<T>> {
    using base = std::_List_base<T, allocator<T>>;
    static constexpr std::size_t next() { return offsetof(list_peek, _M_impl._M_node._M_next); }
    static constexpr std::size_t prev() { return offsetof(list_peek, _M_impl._M_node._M_prev); }
    static constexpr std::size_t size() { return offsetof(list_peek, _M_impl._M_node._M_size); }
};

template<class T> struct forward_list_peek : std::_Fwd_list_base<T, allocator<T>> {
    using base = std::_Fwd_list_base<T, allocator<T>>;
    static constexpr std::size_t head() { return offsetof(forward_list_peek, _M_impl._M_head._M_next); }
};

template<class T> struct deque_peek : std::_Deque_base<T, allocator<T>> {
    using base = std::_Deque_base<T, allocator<T>>;
    static constexpr std::size_t map() { return offsetof(deque_peek, _M_impl._M_map); }
    static constexpr std::size_t map_size() { return offsetof(deque_peek, _M_impl._M_map_size); }
    static constexpr std::size_t start() { return offsetof(deque_peek, _M_impl._M_start); }
    static constexpr std::size_t finish() { return offsetof(deque_peek, _M_impl._M_finish); }
};

template<class Tree> struct tree_peek : Tree {
    static constexpr std::size_t key_compare() { return offsetof(tree_peek, _M_impl._M_key_compare); }
    static constexpr std::size_t header() { return offsetof(tree_peek, _M_impl._M_header); }
    static constexpr std::size_t node_count() { return offsetof(tree_peek, _M_impl._M_node_count); }
};

// The tree inside each ordered container (their only member, _M_t).
template<class K, class V, class C> using map_tree =
    std::_Rb_tree<K, std::pair<const K, V>, std::_Select1st<std::pair<const K, V>>, C, allocator<std::pair<const K, V>>>;
template<class K, class C> using set_tree = std::_Rb_tree<K, K, std::_Identity<K>, C, allocator<K>>;

// ---- private members: offsets from the declarations, checked on first use --

// basic_string: { _Alloc_hider{pointer _M_p} _M_dataplus; size_type
// _M_string_length; union { C _M_local_buf[16 / sizeof(C)]; size_type
// _M_allocated_capacity; }; } — _M_p points at _M_local_buf while short.
inline constexpr std::size_t string_p = 0, string_length = 8, string_local = 16;
template<class C> std::size_t string_probe() {
    static const bool ok = [] {
        using S = std::basic_string<C>;  // the same layout (both allocators are empty)
        S small(3, C('a')), large(100, C('b'));
        return word_at<const C*>(&small, string_p) == small.data() &&
               address_at(&small, string_local) == small.data() &&
               word_at<std::size_t>(&small, string_length) == 3 &&
               word_at<const C*>(&large, string_p) == large.data() &&
               word_at<std::size_t>(&large, string_length) == 100 &&
               word_at<std::size_t>(&large, string_local) == large.capacity();
    }();
    if (!ok) layout_changed("std::basic_string");
    return string_p;
}

// _Hashtable: its bases (the hash and key-equality functors, empty unless
// stateful; the rest empty) come first, then { __buckets_ptr _M_buckets;
// size_type _M_bucket_count; __node_base _M_before_begin; size_type
// _M_element_count; _RehashPolicy _M_rehash_policy; __node_base_ptr
// _M_single_bucket; }, 56 bytes at the end of the object.
inline constexpr std::size_t table_members = 56;
inline constexpr std::size_t table_buckets = 0, table_bucket_count = 8, table_before_begin = 16,
                             table_element_count = 24, table_rehash_policy = 32, table_single_bucket = 48;
inline std::size_t table_probe() {
    static const bool ok = [] {
        using M = std::unordered_map<long, long>;
        using node = std::__detail::_Hash_node<std::pair<const long, long>, false>;
        static_assert(sizeof(M) == table_members);
        M empty, one;
        one.emplace(7, 8);
        const void* first = word_at<const void*>(&one, table_before_begin);
        const void** buckets = word_at<const void**>(&one, table_buckets);
        return word_at<const void*>(&empty, table_buckets) == address_at(&empty, table_single_bucket) &&
               word_at<std::size_t>(&empty, table_bucket_count) == 1 &&
               word_at<float>(&empty, table_rehash_policy) == empty.max_load_factor() &&
               word_at<std::size_t>(&one, table_bucket_count) == one.bucket_count() &&
               word_at<std::size_t>(&one, table_element_count) == 1 &&
               address_at(first, offsetof(node, _M_storage)) == static_cast<const void*>(&*one.begin()) &&
               buckets[one.bucket(7)] == address_at(&one, table_before_begin);
    }();
    if (!ok) layout_changed("std::_Hashtable (unordered containers)");
    return 0;
}
template<class Table> struct table_shape {
    static_assert(alignof(Table) == alignof(void*) && sizeof(Table) >= table_members,
                  "steppe: libstdc++'s _Hashtable is not the one steppe/containers.hpp describes");
    static constexpr std::size_t at = sizeof(Table) - table_members;  // after the bases
    static std::size_t buckets() { return table_probe() + at + table_buckets; }
};

// optional<T>: { union { _Empty_byte; T _M_value; } _M_payload; bool _M_engaged; }
template<class T> inline constexpr std::size_t optional_engaged = sizeof(T);
inline std::size_t optional_probe() {
    static const bool ok = [] {
        std::optional<long> o(5);
        std::optional<char> c('x');
        bool engaged = word_at<long>(&o, 0) == 5 && word_at<bool>(&o, optional_engaged<long>) &&
                       word_at<char>(&c, 0) == 'x' && word_at<bool>(&c, optional_engaged<char>);
        o.reset();
        return engaged && !word_at<bool>(&o, optional_engaged<long>);
    }();
    if (!ok) layout_changed("std::optional");
    return 0;
}

// variant<A...>: { union of the alternatives _M_u; index _M_index; }
template<class... A> struct variant_shape {
    static constexpr std::size_t align = std::max({alignof(A)...});
    static constexpr std::size_t union_size = round_up(std::max({sizeof(A)...}), align);
    using index_type = std::conditional_t<(sizeof...(A) <= 255), unsigned char, unsigned short>;
    static constexpr std::size_t index = union_size;
    static constexpr std::size_t size = round_up(index + sizeof(index_type), std::max(align, alignof(index_type)));
};
inline std::size_t variant_probe() {
    static const bool ok = [] {
        std::variant<char, long> v(7L);
        std::variant<char, short> w(short(3));
        using V = variant_shape<char, long>;
        using W = variant_shape<char, short>;
        return sizeof(v) == V::size && sizeof(w) == W::size && word_at<long>(&v, 0) == 7 &&
               word_at<unsigned char>(&v, V::index) == 1 && word_at<short>(&w, 0) == 3 &&
               word_at<unsigned char>(&w, W::index) == 1;
    }();
    if (!ok) layout_changed("std::variant");
    return 0;
}
template<class... A> std::size_t variant_index() { return variant_probe() + variant_shape<A...>::index; }

// Which variants have a layout of fixed pointer offsets: every alternative
// holding pointers is one type (or all are single pointers, 8 bytes with a
// pointer in them), and every other alternative is empty (std::monostate).
// Pointer-free variants are plain bytes.
template<class A> consteval bool has_slots() { return types::detail::has_slots<std::remove_cv_t<A>>(); }
template<class A> inline constexpr bool word_pointer =
    has_slots<A>() && sizeof(A) == sizeof(void*) && !types::detail::is_dynamic<A>;
template<class... A> struct first_with_slots { using type = void; };
template<class A, class... R> struct first_with_slots<A, R...> {
    using type = std::conditional_t<has_slots<A>(), A, typename first_with_slots<R...>::type>;
};
template<class... A> struct variant_rule {
    using slot_type = typename first_with_slots<A...>::type;
    static constexpr bool any_slots = (has_slots<A>() || ...);
    static constexpr bool others_empty = ((has_slots<A>() || std::is_empty_v<A>) && ...);
    static constexpr bool one_type = ((!has_slots<A>() || std::is_same_v<A, slot_type>) && ...);
    static constexpr bool all_words = ((!has_slots<A>() || word_pointer<A>) && ...);
    static constexpr bool storable = !any_slots || (others_empty && (one_type || all_words));
    // With several single-pointer types, one pointer field stands for all of
    // them: each must still have a layout of its own.
    static constexpr bool all_persistable = ((!has_slots<A>() || persistable<A>) && ...);
};
template<class A> constexpr auto variant_alternative_field() noexcept {
    if constexpr (has_slots<A>()) return std::tuple<>{};  // the one slot field stands for them
    else return std::tuple<at_field<A>>{at<A>(0, "_M_u")};
}

// tuple: elements live in _Head_base subobjects of a recursive _Tuple_impl;
// their offsets come from std::get on first use.
template<class Tuple, std::size_t I> std::size_t tuple_offset() {
    alignas(Tuple) static unsigned char storage[sizeof(Tuple)];  // never constructed: only addresses are taken
    Tuple& t = *reinterpret_cast<Tuple*>(storage);
    return static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(std::addressof(std::get<I>(t))) -
                                    storage);
}
inline constexpr const char* tuple_names[] = {"get<0>",  "get<1>",  "get<2>",  "get<3>",  "get<4>",  "get<5>",
                                              "get<6>",  "get<7>",  "get<8>",  "get<9>",  "get<10>", "get<11>",
                                              "get<12>", "get<13>", "get<14>", "get<15>"};
constexpr const char* tuple_name(std::size_t i) noexcept { return i < 16 ? tuple_names[i] : ""; }

}  // namespace steppe::detail::stl

// ---- 5. The layouts -----------------------------------------------------------
namespace steppe {

// vector<T>: three pointers into one allocated T array.
template<class T> struct describe<std::vector<T, allocator<T>>> {
    using peek = detail::stl::vector_peek<T>;
    static_assert(sizeof(std::vector<T, allocator<T>>) == sizeof(typename peek::base) &&
                      sizeof(typename peek::base) == 3 * sizeof(void*),
                  "steppe: libstdc++'s std::vector is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<T*>(peek::start(), "_M_impl._M_start"),
                                                  at<T*>(peek::finish(), "_M_impl._M_finish"),
                                                  at<T*>(peek::end_of_storage(), "_M_impl._M_end_of_storage"));
};

// vector<bool>: two bit iterators {word pointer, bit offset} and a pointer.
template<> struct describe<std::vector<bool, allocator<bool>>> {
    using peek = detail::stl::bvector_peek;
    using word = std::_Bit_type;
    static_assert(sizeof(std::vector<bool, allocator<bool>>) == sizeof(peek::base) && sizeof(peek::base) == 40,
                  "steppe: libstdc++'s std::vector<bool> is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(
        at<word*>(peek::start_p(), "_M_impl._M_start._M_p"), at<unsigned>(peek::start_offset(), "_M_impl._M_start._M_offset"),
        at<word*>(peek::finish_p(), "_M_impl._M_finish._M_p"),
        at<unsigned>(peek::finish_offset(), "_M_impl._M_finish._M_offset"),
        at<word*>(peek::end_of_storage(), "_M_impl._M_end_of_storage"));
};

// basic_string: the data pointer (to the local buffer inside the object
// while the string is short, else to an allocated C array), the length, and
// the local buffer (or the capacity).
template<class C, class Traits> struct describe<std::basic_string<C, Traits, allocator<C>>> {
    static_assert(sizeof(std::basic_string<C, Traits, allocator<C>>) == 32 &&
                      sizeof(std::basic_string<C>) == 32 && std::is_empty_v<allocator<C>>,
                  "steppe: libstdc++'s std::basic_string is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(
        detail::stl::computed<C*>(&detail::stl::string_probe<C>, "_M_dataplus._M_p"),
        at<std::size_t>(detail::stl::string_length, "_M_string_length"),
        at<C[16 / sizeof(C)]>(detail::stl::string_local, "_M_local_buf"));
};

// list<T>: a sentinel node inside the object {next, prev} and the size.
template<class T> struct describe<std::list<T, allocator<T>>> {
    using peek = detail::stl::list_peek<T>;
    using link = std::__detail::_List_node_base*;
    static_assert(sizeof(std::list<T, allocator<T>>) == sizeof(typename peek::base) &&
                      sizeof(typename peek::base) == 3 * sizeof(void*),
                  "steppe: libstdc++'s std::list is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<link>(peek::next(), "_M_impl._M_node._M_next"),
                                                  at<link>(peek::prev(), "_M_impl._M_node._M_prev"),
                                                  at<std::size_t>(peek::size(), "_M_impl._M_node._M_size"));
};
template<class T> struct describe<std::_List_node<T>> {
    using node = std::_List_node<T>;
    using link = std::__detail::_List_node_base*;
    static constexpr auto fields = steppe::fields(at<link>(offsetof(node, _M_next), "_M_next"),
                                                  at<link>(offsetof(node, _M_prev), "_M_prev"),
                                                  at<T>(offsetof(node, _M_storage), "_M_storage"));
};

// forward_list<T>: the head's next pointer.
template<class T> struct describe<std::forward_list<T, allocator<T>>> {
    using peek = detail::stl::forward_list_peek<T>;
    static_assert(sizeof(std::forward_list<T, allocator<T>>) == sizeof(typename peek::base) &&
                      sizeof(typename peek::base) == sizeof(void*),
                  "steppe: libstdc++'s std::forward_list is not the one steppe/containers.hpp describes");
    static constexpr auto fields =
        steppe::fields(at<std::_Fwd_list_node_base*>(peek::head(), "_M_impl._M_head._M_next"));
};
template<class T> struct describe<std::_Fwd_list_node<T>> {
    using node = std::_Fwd_list_node<T>;
    static constexpr auto fields =
        steppe::fields(at<std::_Fwd_list_node_base*>(offsetof(node, _M_next), "_M_next"),
                       at<T>(offsetof(node, _M_storage), "_M_storage"));
};

// deque<T>: the map (an allocated array of T* buffer pointers) and two
// iterators {cur, first, last into a buffer; node into the map}.
template<class T> struct describe<std::_Deque_iterator<T, T&, T*>> {
    using it = std::_Deque_iterator<T, T&, T*>;
    static_assert(sizeof(it) == 4 * sizeof(void*),
                  "steppe: libstdc++'s std::deque iterator is not the one steppe/containers.hpp describes");
    static constexpr auto fields =
        steppe::fields(at<T*>(offsetof(it, _M_cur), "_M_cur"), at<T*>(offsetof(it, _M_first), "_M_first"),
                       at<T*>(offsetof(it, _M_last), "_M_last"), at<T**>(offsetof(it, _M_node), "_M_node"));
};
template<class T> struct describe<std::deque<T, allocator<T>>> {
    using peek = detail::stl::deque_peek<T>;
    using it = std::_Deque_iterator<T, T&, T*>;
    static_assert(sizeof(std::deque<T, allocator<T>>) == sizeof(typename peek::base) &&
                      sizeof(typename peek::base) == 2 * sizeof(void*) + 2 * sizeof(it),
                  "steppe: libstdc++'s std::deque is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<T**>(peek::map(), "_M_impl._M_map"),
                                                  at<std::size_t>(peek::map_size(), "_M_impl._M_map_size"),
                                                  at<it>(peek::start(), "_M_impl._M_start"),
                                                  at<it>(peek::finish(), "_M_impl._M_finish"));
};

// map, multimap, set, multiset: an _Rb_tree {comparator; header node
// {color, root, leftmost, rightmost}; node count}; an empty tree's leftmost
// and rightmost point at the header inside the object, as does the root's parent.
template<class K, class V, class KeyOfValue, class Compare>
struct describe<std::_Rb_tree<K, V, KeyOfValue, Compare, allocator<V>>> {
    using tree = std::_Rb_tree<K, V, KeyOfValue, Compare, allocator<V>>;
    using peek = detail::stl::tree_peek<tree>;
    using base = std::_Rb_tree_node_base;
    static_assert(!(std::is_pointer_v<K> && detail::stl::orders_by_value<Compare, K>),
                  "steppe: a stored map or set keyed by pointers must not order them by address: the same "
                  "object can sit at another address after a reopen, and the tree would be out of order. Use "
                  "steppe::persistent_less<T*> (the default of steppe::map and steppe::set)");
    static_assert(sizeof(base) == 4 * sizeof(void*) && sizeof(tree) >= sizeof(base) + 2 * sizeof(void*),
                  "steppe: libstdc++'s _Rb_tree is not the one steppe/containers.hpp describes");
    static constexpr std::size_t h = peek::header();
    static constexpr auto fields = steppe::fields(
        at<Compare>(peek::key_compare(), "_M_impl._M_key_compare"),
        at<std::_Rb_tree_color>(h + offsetof(base, _M_color), "_M_impl._M_header._M_color"),
        at<base*>(h + offsetof(base, _M_parent), "_M_impl._M_header._M_parent"),
        at<base*>(h + offsetof(base, _M_left), "_M_impl._M_header._M_left"),
        at<base*>(h + offsetof(base, _M_right), "_M_impl._M_header._M_right"),
        at<std::size_t>(peek::node_count(), "_M_impl._M_node_count"));
};
template<class V> struct describe<std::_Rb_tree_node<V>> {
    using node = std::_Rb_tree_node<V>;
    using base = std::_Rb_tree_node_base;
    static constexpr auto fields = steppe::fields(
        at<std::_Rb_tree_color>(offsetof(node, _M_color), "_M_color"),
        at<base*>(offsetof(node, _M_parent), "_M_parent"), at<base*>(offsetof(node, _M_left), "_M_left"),
        at<base*>(offsetof(node, _M_right), "_M_right"), at<V>(offsetof(node, _M_storage), "_M_storage"));
};
template<class K, class V, class C> struct describe<std::map<K, V, C, allocator<std::pair<const K, V>>>> {
    using tree = detail::stl::map_tree<K, V, C>;
    static_assert(sizeof(std::map<K, V, C, allocator<std::pair<const K, V>>>) == sizeof(tree),
                  "steppe: libstdc++'s std::map is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<tree>(0, "_M_t"));
};
template<class K, class V, class C> struct describe<std::multimap<K, V, C, allocator<std::pair<const K, V>>>> {
    using tree = detail::stl::map_tree<K, V, C>;
    static_assert(sizeof(std::multimap<K, V, C, allocator<std::pair<const K, V>>>) == sizeof(tree),
                  "steppe: libstdc++'s std::multimap is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<tree>(0, "_M_t"));
};
template<class K, class C> struct describe<std::set<K, C, allocator<K>>> {
    using tree = detail::stl::set_tree<K, C>;
    static_assert(sizeof(std::set<K, C, allocator<K>>) == sizeof(tree),
                  "steppe: libstdc++'s std::set is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<tree>(0, "_M_t"));
};
template<class K, class C> struct describe<std::multiset<K, C, allocator<K>>> {
    using tree = detail::stl::set_tree<K, C>;
    static_assert(sizeof(std::multiset<K, C, allocator<K>>) == sizeof(tree),
                  "steppe: libstdc++'s std::multiset is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<tree>(0, "_M_t"));
};

// unordered_*: a _Hashtable {bucket array pointer (to an allocated array of
// node-base pointers, or to _M_single_bucket inside the object); bucket
// count; before-begin node {next}; element count; rehash policy; single
// bucket}. A bucket holds the node before its first one, which may be the
// before-begin node inside the object.
template<class K, class V, class Extract, class Equal, class Hash, class RangeHash, class Unused, class Rehash,
         class Traits>
struct describe<std::_Hashtable<K, V, allocator<V>, Extract, Equal, Hash, RangeHash, Unused, Rehash, Traits>> {
    using table = std::_Hashtable<K, V, allocator<V>, Extract, Equal, Hash, RangeHash, Unused, Rehash, Traits>;
    using shape = detail::stl::table_shape<table>;
    using link = std::__detail::_Hash_node_base*;
    static_assert(!(std::is_pointer_v<K> && detail::stl::hashes_by_value<Hash, K>),
                  "steppe: a stored unordered container keyed by pointers must not hash them by address: the "
                  "same object can sit at another address after a reopen, and lookups would miss. Use "
                  "steppe::persistent_hash<T*> (the default of steppe::unordered_map and steppe::unordered_set)");
    static_assert(!detail::stl::has_slots<Hash>() && !detail::stl::has_slots<Equal>(),
                  "steppe: the hash and key-equality functors of a stored unordered container must hold no "
                  "pointers (steppe cannot locate them inside the table)");
    static_assert(shape::at == 0 || !(std::is_empty_v<Hash> && std::is_empty_v<Equal>),
                  "steppe: libstdc++'s _Hashtable is not the one steppe/containers.hpp describes");
    static constexpr std::size_t s = shape::at;
    static constexpr auto fields = steppe::fields(
        detail::stl::computed<link*>(&shape::buckets, "_M_buckets"),
        at<std::size_t>(s + detail::stl::table_bucket_count, "_M_bucket_count"),
        at<link>(s + detail::stl::table_before_begin, "_M_before_begin._M_nxt"),
        at<std::size_t>(s + detail::stl::table_element_count, "_M_element_count"),
        at<Rehash>(s + detail::stl::table_rehash_policy, "_M_rehash_policy"),
        at<link>(s + detail::stl::table_single_bucket, "_M_single_bucket"));
};
template<> struct describe<std::__detail::_Prime_rehash_policy> {
    using policy = std::__detail::_Prime_rehash_policy;
    static constexpr auto fields = steppe::fields(at<float>(offsetof(policy, _M_max_load_factor), "_M_max_load_factor"),
                                                  at<std::size_t>(offsetof(policy, _M_next_resize), "_M_next_resize"));
};
template<> struct describe<std::__detail::_Power2_rehash_policy> {
    using policy = std::__detail::_Power2_rehash_policy;
    static constexpr auto fields = steppe::fields(at<float>(offsetof(policy, _M_max_load_factor), "_M_max_load_factor"),
                                                  at<std::size_t>(offsetof(policy, _M_next_resize), "_M_next_resize"));
};
// A node: {next; value; the cached hash code when the hash is not "fast"}.
template<class V, bool Cached> struct describe<std::__detail::_Hash_node<V, Cached>> {
    using node = std::__detail::_Hash_node<V, Cached>;
    static constexpr auto make() noexcept {
        if constexpr (Cached)
            return steppe::fields(at<std::__detail::_Hash_node_base*>(offsetof(node, _M_nxt), "_M_nxt"),
                                  at<V>(offsetof(node, _M_storage), "_M_storage"),
                                  at<std::size_t>(offsetof(node, _M_hash_code), "_M_hash_code"));
        else
            return steppe::fields(at<std::__detail::_Hash_node_base*>(offsetof(node, _M_nxt), "_M_nxt"),
                                  at<V>(offsetof(node, _M_storage), "_M_storage"));
    }
    static constexpr auto fields = make();
};
template<class K, class V, class H, class E>
struct describe<std::unordered_map<K, V, H, E, allocator<std::pair<const K, V>>>> {
    using table = std::__umap_hashtable<K, V, H, E, allocator<std::pair<const K, V>>>;
    static_assert(sizeof(std::unordered_map<K, V, H, E, allocator<std::pair<const K, V>>>) == sizeof(table),
                  "steppe: libstdc++'s std::unordered_map is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<table>(0, "_M_h"));
};
template<class K, class V, class H, class E>
struct describe<std::unordered_multimap<K, V, H, E, allocator<std::pair<const K, V>>>> {
    using table = std::__ummap_hashtable<K, V, H, E, allocator<std::pair<const K, V>>>;
    static_assert(sizeof(std::unordered_multimap<K, V, H, E, allocator<std::pair<const K, V>>>) == sizeof(table),
                  "steppe: libstdc++'s std::unordered_multimap is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<table>(0, "_M_h"));
};
template<class K, class H, class E> struct describe<std::unordered_set<K, H, E, allocator<K>>> {
    using table = std::__uset_hashtable<K, H, E, allocator<K>>;
    static_assert(sizeof(std::unordered_set<K, H, E, allocator<K>>) == sizeof(table),
                  "steppe: libstdc++'s std::unordered_set is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<table>(0, "_M_h"));
};
template<class K, class H, class E> struct describe<std::unordered_multiset<K, H, E, allocator<K>>> {
    using table = std::__umset_hashtable<K, H, E, allocator<K>>;
    static_assert(sizeof(std::unordered_multiset<K, H, E, allocator<K>>) == sizeof(table),
                  "steppe: libstdc++'s std::unordered_multiset is not the one steppe/containers.hpp describes");
    static constexpr auto fields = steppe::fields(at<table>(0, "_M_h"));
};

// tuple: every element, where std::get finds it.
template<class... T> struct describe<std::tuple<T...>> {
    static constexpr auto fields = []<std::size_t... I>(std::index_sequence<I...>) {
        return steppe::fields(detail::stl::computed<T>(&detail::stl::tuple_offset<std::tuple<T...>, I>,
                                                       detail::stl::tuple_name(I))...);
    }(std::index_sequence_for<T...>{});
};

// optional<T>: the value and the engaged flag. The value's pointers are
// swizzled whether or not it is engaged; see docs/types.md.
template<class T> struct describe<std::optional<T>> {
    using value = std::remove_const_t<T>;
    static_assert(sizeof(std::optional<T>) ==
                      detail::stl::round_up(detail::stl::optional_engaged<value> + 1, alignof(value)),
                  "steppe: libstdc++'s std::optional is not the one steppe/containers.hpp describes");
    static constexpr auto fields =
        steppe::fields(detail::stl::computed<value>(&detail::stl::optional_probe, "_M_payload._M_value"),
                       at<bool>(detail::stl::optional_engaged<value>, "_M_payload._M_engaged"));
};

// variant<A...>: the alternatives overlap at offset 0, then the index.
template<class... A> struct describe<std::variant<A...>> {
    using rule = detail::stl::variant_rule<A...>;
    using shape = detail::stl::variant_shape<A...>;
    static_assert(rule::storable,
                  "steppe: this std::variant cannot be stored: steppe swizzles pointers at fixed offsets "
                  "whatever alternative is active, and here one alternative's pointer shares its bytes with "
                  "another's non-pointer data (or with a pointer at another place). A storable variant's "
                  "alternatives are all pointer-free, or those holding pointers are all of one type (or are all "
                  "single data pointers) and the others are empty, like std::monostate. Store a tag and separate "
                  "members instead");
    static_assert(rule::all_persistable, "steppe: a std::variant alternative holding a pointer has no layout");
    static_assert(sizeof(std::variant<A...>) == shape::size,
                  "steppe: libstdc++'s std::variant is not the one steppe/containers.hpp describes");
    static constexpr auto make() noexcept {
        using index_type = typename shape::index_type;
        auto index = std::tuple<detail::stl::computed_field<index_type>>{
            detail::stl::computed<index_type>(&detail::stl::variant_index<A...>, "_M_index")};
        auto plain = std::tuple_cat(detail::stl::variant_alternative_field<A>()...);
        if constexpr (!rule::any_slots)
            return detail::stl::as_fields(std::tuple_cat(plain, index));
        else if constexpr (rule::one_type)
            return detail::stl::as_fields(std::tuple_cat(
                std::tuple<at_field<typename rule::slot_type>>{at<typename rule::slot_type>(0, "_M_u")}, plain, index));
        else
            return detail::stl::as_fields(
                std::tuple_cat(std::tuple<at_field<void*>>{at<void*>(0, "_M_u")}, plain, index));
    }
    static constexpr auto fields = make();
};

}  // namespace steppe

#pragma GCC diagnostic pop

#endif  // STEPPE_LIBSTDCXX_LAYOUTS

// ---- 6. Refused: the containers with std::allocator --------------------------
namespace steppe {

#define STEPPE_DETAIL_TRANSIENT_CONTAINER(use)                                                                \
    static_assert(detail::stl::dependent_false<T>::value,                                                     \
                  "steppe: a std container with std::allocator cannot live in a store: its memory would be "  \
                  "transient. Use " use " (the same container with steppe::allocator), from <steppe/containers.hpp>"); \
    static constexpr auto fields = steppe::fields()
template<class T> struct describe<std::vector<T, std::allocator<T>>> { STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::vector<T>"); };
template<class T> struct describe<std::basic_string<T, std::char_traits<T>, std::allocator<T>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::string / steppe::basic_string<C>");
};
template<class T> struct describe<std::list<T, std::allocator<T>>> { STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::list<T>"); };
template<class T> struct describe<std::forward_list<T, std::allocator<T>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::forward_list<T>");
};
template<class T> struct describe<std::deque<T, std::allocator<T>>> { STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::deque<T>"); };
template<class K, class T, class C> struct describe<std::map<K, T, C, std::allocator<std::pair<const K, T>>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::map<K, V>");
};
template<class K, class T, class C> struct describe<std::multimap<K, T, C, std::allocator<std::pair<const K, T>>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::multimap<K, V>");
};
template<class T, class C> struct describe<std::set<T, C, std::allocator<T>>> { STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::set<K>"); };
template<class T, class C> struct describe<std::multiset<T, C, std::allocator<T>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::multiset<K>");
};
template<class K, class T, class H, class E>
struct describe<std::unordered_map<K, T, H, E, std::allocator<std::pair<const K, T>>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::unordered_map<K, V>");
};
template<class K, class T, class H, class E>
struct describe<std::unordered_multimap<K, T, H, E, std::allocator<std::pair<const K, T>>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::unordered_multimap<K, V>");
};
template<class T, class H, class E> struct describe<std::unordered_set<T, H, E, std::allocator<T>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::unordered_set<K>");
};
template<class T, class H, class E> struct describe<std::unordered_multiset<T, H, E, std::allocator<T>>> {
    STEPPE_DETAIL_TRANSIENT_CONTAINER("steppe::unordered_multiset<K>");
};
#undef STEPPE_DETAIL_TRANSIENT_CONTAINER

}  // namespace steppe
