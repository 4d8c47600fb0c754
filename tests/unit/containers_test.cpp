// The libstdc++ containers in a store (steppe/containers.hpp): each written in
// one process and checked in a fresh one, under both fault backends, after
// commit and after rollback; their layouts checked word by word against live
// objects; pointer keys ordered and hashed by persistent address.
//
// STEPPE_CONTAINERS_ENTRIES overrides the size of the nested-map test
// (100,000 entries by default; 20,000 under AddressSanitizer, where the
// rehash test also shrinks from 30,000 to 10,000 entries).
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <set>
#include <string>

#include "support/expect_error.hpp"
#include "support/store_fixture.hpp"

namespace {

struct Part {
    int id;
    char type[10];
    int x, y;
    long build;
    Part* to[3];
};

// Every member kind of issue 4 in one aggregate.
struct Record {
    std::pair<steppe::string, Part*> pair;
    std::tuple<int, steppe::string, Part*> tuple;
    std::array<Part*, 3> array;
    std::optional<steppe::string> name;
    std::optional<Part*> maybe;
    std::variant<std::monostate, Part*, Record*> link;  // single pointers and an empty alternative
    std::variant<int, double, long> number;            // pointer-free
    std::variant<std::monostate, steppe::vector<long>> numbers;
    std::array<steppe::string, 2> names;
    // Declared rather than reflected: counting the members of an aggregate
    // that holds a std::optional trips g++ (see docs/types.md).
    STEPPE_FIELDS(pair, tuple, array, name, maybe, link, number, numbers, names)
};

// A hash that is not noexcept, so libstdc++ caches hash codes in the nodes.
struct slow_hash {
    std::size_t operator()(long v) const { return std::hash<long>{}(v * 7919); }
};

#if defined(__SANITIZE_ADDRESS__)
constexpr long default_entries = 20'000;
constexpr long rehash_entries = 10'000;
#else
constexpr long default_entries = 100'000;
constexpr long rehash_entries = 30'000;
#endif
long nested_entries() {
    const char* e = std::getenv("STEPPE_CONTAINERS_ENTRIES");
    return e ? std::atol(e) : default_entries;
}

// Keys of every length: empty, short (inside the string), exactly at the
// boundary (15), and long.
std::string text(long i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "k%06ld", i);
    std::string s(buf);
    switch (i % 5) {
    case 0: return s;
    case 1: return s + "-long-enough-to-leave-the-object";
    case 2: return (s + "abcdefghijklmnopq").substr(0, 15);
    case 3: return (s + "abcdefghijklmnopq").substr(0, 16);
    default: return s + std::string(static_cast<std::size_t>(i % 97), 'x');
    }
}
steppe::string stext(long i) { return steppe::string(text(i)); }

using PartVec = steppe::vector<Part*>;
using Index = steppe::map<steppe::string, PartVec>;

// ---- Checking a layout against a live object ----------------------------------

// Into a store object, or one past the end of one (which may be the guard
// page after a unit, outside every object).
bool in_store(const void* p) {
    if (!p) return false;
    constexpr std::uint64_t top = std::uint64_t{1} << 63;
    auto held = [](const void* q) { return q && !(steppe::detail::persistent_address_of(q) & top); };
    return held(p) || held(static_cast<const char*>(p) - 1);
}

// Every aligned word of `object` that points into the store or into the
// object itself is a listed pointer, and every listed pointer does (or is null).
template<class T>
::testing::AssertionResult audit(const void* object) {
    const steppe::types::layout& l = steppe::types::layout_of<T>();
    auto base = static_cast<const unsigned char*>(object);
    for (std::size_t at = 0; at + sizeof(void*) <= l.size; at += sizeof(void*)) {
        const void* w;
        std::memcpy(&w, base + at, sizeof w);
        auto v = reinterpret_cast<const unsigned char*>(w);
        bool pointerish = in_store(w) || (v >= base && v <= base + l.size);
        bool listed = std::binary_search(l.pointers.begin(), l.pointers.end(), static_cast<std::uint32_t>(at));
        if (pointerish && !listed)
            return ::testing::AssertionFailure() << l.name << ": offset " << at << " holds a pointer the layout misses";
        if (listed && w && !pointerish)
            return ::testing::AssertionFailure() << l.name << ": offset " << at << " is listed but holds " << w;
    }
    return ::testing::AssertionSuccess();
}

// ---- Fixture -------------------------------------------------------------------

class ContainersTest : public steppe::test::store_fixture {
protected:
    static void expect_sound(steppe::store& s) {
        auto findings = s.check();
        EXPECT_TRUE(findings.empty()) << findings.front();
    }
};

Part* make_part(steppe::store& s, int id) {
    Part* p = s.make<Part>();
    p->id = id;
    std::snprintf(p->type, sizeof p->type, "part%d", id % 1000);
    p->x = id * 2;
    p->y = id * 3;
    p->build = id * 10L;
    return p;
}
steppe::vector<Part*>* make_parts(steppe::store& s, int n) {
    auto* parts = s.root<steppe::vector<Part*>>("parts");
    for (int i = 0; i < n; ++i) parts->push_back(make_part(s, i));
    for (int i = 0; i < n; ++i) (*parts)[i]->to[0] = (*parts)[(i + 1) % n];
    return parts;
}
void expect_parts(steppe::store& s, int n) {
    auto* parts = s.find_root<steppe::vector<Part*>>("parts");
    ASSERT_NE(parts, nullptr);
    ASSERT_EQ(parts->size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ((*parts)[i]->id, i);
        ASSERT_EQ((*parts)[i]->to[0], (*parts)[(i + 1) % n]);
    }
}

// ---- Layouts ---------------------------------------------------------------------

using u32s = std::vector<std::uint32_t>;
template<class T> u32s pointers() { return steppe::types::layout_of<T>().pointers; }

TEST(ContainerLayouts, PointerOffsetsOfTheLibstdcxxTypes) {
    EXPECT_EQ(pointers<steppe::vector<Part*>>(), (u32s{0, 8, 16}));
    EXPECT_EQ(pointers<steppe::vector<bool>>(), (u32s{0, 16, 32}));
    EXPECT_EQ(pointers<steppe::string>(), (u32s{0}));
    EXPECT_EQ(pointers<steppe::u32string>(), (u32s{0}));
    EXPECT_EQ(pointers<steppe::list<long>>(), (u32s{0, 8}));
    EXPECT_EQ(pointers<std::_List_node<steppe::string>>(), (u32s{0, 8, 16}));
    EXPECT_EQ(pointers<steppe::forward_list<long>>(), (u32s{0}));
    EXPECT_EQ(pointers<std::_Fwd_list_node<Part*>>(), (u32s{0, 8}));
    EXPECT_EQ(pointers<steppe::deque<long>>(), (u32s{0, 16, 24, 32, 40, 48, 56, 64, 72}));
    EXPECT_EQ((pointers<steppe::map<long, long>>()), (u32s{16, 24, 32}));
    EXPECT_EQ(pointers<steppe::set<Part*>>(), (u32s{16, 24, 32}));
    EXPECT_EQ((pointers<std::_Rb_tree_node<std::pair<const steppe::string, PartVec>>>()),
              (u32s{8, 16, 24, 32, 64, 72, 80}));
    EXPECT_EQ((pointers<steppe::unordered_map<steppe::string, long>>()), (u32s{0, 16, 48}));
    EXPECT_EQ(pointers<steppe::unordered_multiset<Part*>>(), (u32s{0, 16, 48}));
    EXPECT_EQ((pointers<std::__detail::_Hash_node<std::pair<const steppe::string, Part*>, false>>()),
              (u32s{0, 8, 40}));
    EXPECT_EQ((steppe::types::layout_of<std::__detail::_Hash_node<long, true>>().size), 24u);
    // The tuple is stored last element first.
    EXPECT_EQ((pointers<std::tuple<int, steppe::string, Part*>>()), (u32s{0, 8}));
    EXPECT_EQ(pointers<std::optional<Part*>>(), (u32s{0}));
    EXPECT_EQ(pointers<std::optional<steppe::string>>(), (u32s{0}));
    EXPECT_EQ((pointers<std::variant<std::monostate, Part*, long*>>()), (u32s{0}));
    EXPECT_EQ((pointers<std::variant<std::monostate, steppe::string>>()), (u32s{0}));
    EXPECT_EQ((pointers<std::variant<int, double>>()), (u32s{}));
    EXPECT_EQ((pointers<std::pair<steppe::string, steppe::vector<long>>>()), (u32s{0, 32, 40, 48}));
    EXPECT_EQ(pointers<Record>().size(), 15u);  // 2 + 2 + 3 + 1 + 1 + 1 + 0 + 3 + 2
}

TEST(ContainerLayouts, StoredTypeNamesAreTheRealOnes) {
    EXPECT_EQ(steppe::types::layout_of<steppe::vector<long>>().name, "std::vector<long, steppe::allocator<long>>");
    EXPECT_EQ(steppe::types::layout_of<steppe::set<long>>().name,
              "std::set<long, std::less<long>, steppe::allocator<long>>");
}

TEST(ContainerLayouts, DefaultsOrderAndHashPointersByPersistentAddress) {
    static_assert(std::is_same_v<steppe::set<Part*>::key_compare, steppe::persistent_less<Part*>>);
    static_assert(std::is_same_v<steppe::map<const Part*, int>::key_compare, steppe::persistent_less<const Part*>>);
    static_assert(std::is_same_v<steppe::unordered_set<Part*>::hasher, steppe::persistent_hash<Part*>>);
    static_assert(std::is_same_v<steppe::map<steppe::string, int>::key_compare, std::less<>>);
    static_assert(std::is_same_v<steppe::unordered_map<steppe::string, int>::hasher, steppe::string_hash<char>>);
    static_assert(std::is_same_v<steppe::map<long, int>::key_compare, std::less<long>>);
    // The same hash as the std::string with the same characters.
    EXPECT_EQ(std::hash<steppe::string>{}(steppe::string("abc")), std::hash<std::string>{}("abc"));
    EXPECT_EQ(steppe::string_hash<char>{}("abc"), std::hash<std::string>{}("abc"));
}

TEST(ContainerLayouts, PersistentAddressOfTransientMemoryIsItsAddressWithTheTopBit) {
    long x = 0;
    EXPECT_EQ(steppe::detail::persistent_address_of(&x),
              reinterpret_cast<std::uintptr_t>(&x) | (std::uint64_t{1} << 63));
    EXPECT_EQ(steppe::detail::persistent_address_of(nullptr), 0u);
    long y[2];
    EXPECT_TRUE(steppe::persistent_less<long*>{}(&y[0], &y[1]));
}

TEST_P(ContainersTest, LayoutsMatchLiveObjectsWordForWord) {
    auto s = open();
    auto* v = s.root<steppe::vector<steppe::string>>("v");
    for (long i = 0; i < 10; ++i) v->push_back(stext(i));
    EXPECT_TRUE(audit<steppe::vector<steppe::string>>(v));
    for (auto& e : *v) EXPECT_TRUE(audit<steppe::string>(&e));
    auto* empty_string = s.root<steppe::string>("empty");
    EXPECT_TRUE(audit<steppe::string>(empty_string));

    auto* bits = s.root<steppe::vector<bool>>("bits");
    for (int i = 0; i < 100; ++i) bits->push_back(i % 3 == 0);
    EXPECT_TRUE(audit<steppe::vector<bool>>(bits));

    auto* l = s.root<steppe::list<steppe::string>>("list");
    EXPECT_TRUE(audit<steppe::list<steppe::string>>(l));  // empty: the sentinel points at itself
    for (long i = 0; i < 5; ++i) l->push_back(stext(i));
    EXPECT_TRUE(audit<steppe::list<steppe::string>>(l));
    for (auto it = l->begin(); it != l->end(); ++it) EXPECT_TRUE(audit<std::_List_node<steppe::string>>(it._M_node));

    auto* f = s.root<steppe::forward_list<Part*>>("flist");
    for (int i = 0; i < 5; ++i) f->push_front(make_part(s, i));
    EXPECT_TRUE(audit<steppe::forward_list<Part*>>(f));
    for (auto it = f->begin(); it != f->end(); ++it) EXPECT_TRUE(audit<std::_Fwd_list_node<Part*>>(it._M_node));

    auto* d = s.root<steppe::deque<steppe::string>>("deque");
    for (long i = 0; i < 100; ++i) d->push_front(stext(i)), d->push_back(stext(i));
    EXPECT_TRUE(audit<steppe::deque<steppe::string>>(d));

    auto* m = s.root<Index>("map");
    EXPECT_TRUE(audit<Index>(m));
    for (long i = 0; i < 20; ++i) (*m)[stext(i)].push_back(make_part(s, static_cast<int>(i)));
    EXPECT_TRUE(audit<Index>(m));
    using MapNode = std::_Rb_tree_node<Index::value_type>;
    for (auto it = m->begin(); it != m->end(); ++it) EXPECT_TRUE(audit<MapNode>(it._M_node));

    auto* ps = s.root<steppe::set<Part*>>("set");
    for (auto& [k, parts] : *m) ps->insert(parts[0]);
    EXPECT_TRUE(audit<steppe::set<Part*>>(ps));

    using Table = steppe::unordered_map<steppe::string, Part*>;
    auto* u = s.root<Table>("table");
    EXPECT_TRUE(audit<Table>(u));  // empty: the bucket pointer points at the single bucket inside
    for (long i = 0; i < 100; ++i) u->emplace(stext(i), make_part(s, static_cast<int>(i)));
    EXPECT_TRUE(audit<Table>(u));
    using TableNode = std::__detail::_Hash_node<Table::value_type, false>;
    for (auto it = u->begin(); it != u->end(); ++it) EXPECT_TRUE(audit<TableNode>(it._M_cur));

    using Cached = steppe::unordered_map<long, steppe::string, slow_hash>;
    auto* c = s.root<Cached>("cached");
    for (long i = 0; i < 50; ++i) c->emplace(i, stext(i));
    using CachedNode = std::__detail::_Hash_node<Cached::value_type, true>;
    for (auto it = c->begin(); it != c->end(); ++it) {
        EXPECT_TRUE(audit<CachedNode>(it._M_cur));
        EXPECT_EQ(it._M_cur->_M_hash_code, slow_hash{}(it->first)) << "the code is cached where the layout says";
    }

    auto* r = s.root<Record>("record");
    EXPECT_TRUE(audit<Record>(r));
    *r = Record{{stext(1), make_part(s, 1)}, {2, stext(2), make_part(s, 2)}, {make_part(s, 3), nullptr, nullptr},
                stext(4), make_part(s, 5), make_part(s, 6), 7L, steppe::vector<long>{1, 2, 3},
                {stext(8), stext(9)}};
    EXPECT_TRUE(audit<Record>(r));
    r->link = r;
    r->maybe.reset();
    r->name.reset();
    EXPECT_TRUE(audit<Record>(r));
    s.commit();
    expect_sound(s);
}

// ---- Round trips ---------------------------------------------------------------------

TEST_P(ContainersTest, Vectors) {
    {
        auto s = open();
        auto* parts = make_parts(s, 5000);
        auto* longs = s.root<steppe::vector<long>>("longs");
        for (long i = 0; i < 100'000; ++i) longs->push_back(i * i);
        auto* bits = s.root<steppe::vector<bool>>("bits");
        for (int i = 0; i < 10'000; ++i) bits->push_back(i % 7 == 0);
        auto* values = s.root<steppe::vector<Part>>("values");  // structs with pointers, by value
        for (int i = 0; i < 1000; ++i) values->push_back(Part{i, "v", i, i, i, {(*parts)[i], nullptr, nullptr}});
        auto* nested = s.root<steppe::vector<steppe::vector<long>>>("nested");
        for (long i = 0; i < 300; ++i) nested->emplace_back(static_cast<std::size_t>(i), i);
        auto* shrunk = s.root<steppe::vector<long>>("shrunk");
        shrunk->resize(10'000);
        shrunk->resize(3);
        shrunk->shrink_to_fit();
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        expect_parts(s, 5000);
        auto* longs = s.find_root<steppe::vector<long>>("longs");
        ASSERT_EQ(longs->size(), 100'000u);
        for (long i = 0; i < 100'000; ++i) ASSERT_EQ((*longs)[i], i * i);
        EXPECT_GE(longs->capacity(), longs->size());
        auto* bits = s.find_root<steppe::vector<bool>>("bits");
        ASSERT_EQ(bits->size(), 10'000u);
        for (int i = 0; i < 10'000; ++i) ASSERT_EQ((*bits)[i], i % 7 == 0);
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        auto* values = s.find_root<steppe::vector<Part>>("values");
        ASSERT_EQ(values->size(), 1000u);
        for (int i = 0; i < 1000; ++i) {
            ASSERT_EQ((*values)[i].id, i);
            ASSERT_EQ((*values)[i].to[0], (*parts)[i]);
        }
        auto* nested = s.find_root<steppe::vector<steppe::vector<long>>>("nested");
        ASSERT_EQ(nested->size(), 300u);
        for (long i = 0; i < 300; ++i) {
            ASSERT_EQ((*nested)[i].size(), static_cast<std::size_t>(i));
            ASSERT_TRUE(std::all_of((*nested)[i].begin(), (*nested)[i].end(), [i](long v) { return v == i; }));
        }
        EXPECT_EQ(*s.find_root<steppe::vector<long>>("shrunk"), (steppe::vector<long>{0, 0, 0}));
        // The store goes on: grow them in this process too.
        longs->push_back(-1);
        (*nested)[0].push_back(5);
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        EXPECT_EQ(s.find_root<steppe::vector<long>>("longs")->back(), -1);
        EXPECT_EQ((*s.find_root<steppe::vector<steppe::vector<long>>>("nested"))[0], (steppe::vector<long>{5}));
    });
}

struct Texts {
    steppe::string empty;
    steppe::string small;   // inside the object
    steppe::string edge;    // 15 characters: the most that fit inside
    steppe::string large;   // allocated
    steppe::string grown;   // short, then long
    steppe::string shrunk;  // long, then short again after shrink_to_fit
    steppe::wstring wide;
    steppe::u16string u16;
    steppe::u32string u32;
};

TEST_P(ContainersTest, StringsShortAndLong) {
    {
        auto s = open();
        auto* t = s.root<Texts>("texts");
        t->small = "abc";
        t->edge = "0123456789abcde";
        t->large = steppe::string(1000, 'L');
        t->grown = "g";
        for (int i = 0; i < 100; ++i) t->grown += "rown";
        t->shrunk = steppe::string(500, 's');
        t->shrunk.resize(4);
        t->shrunk.shrink_to_fit();
        t->wide = L"w\u00e9de, and long enough to be allocated";
        t->u16 = u"u16";
        t->u32 = U"\U0001F600 u32 long enough to leave the object";
        auto* many = s.root<steppe::vector<steppe::string>>("many");
        for (long i = 0; i < 20'000; ++i) many->push_back(stext(i));  // reallocation moves short strings
        auto* moved = s.root<steppe::vector<steppe::string>>("moved");
        for (long i = 0; i < 100; ++i) moved->push_back(stext(i));
        std::reverse(moved->begin(), moved->end());
        moved->erase(moved->begin(), moved->begin() + 10);
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* t = s.find_root<Texts>("texts");
        EXPECT_TRUE(t->empty.empty());
        EXPECT_EQ(t->small, "abc");
        EXPECT_EQ(t->small.data(), reinterpret_cast<const char*>(&t->small) + 16) << "still inside the object";
        EXPECT_EQ(t->edge, "0123456789abcde");
        EXPECT_EQ(t->large, std::string(1000, 'L'));
        EXPECT_EQ(t->grown.size(), 401u);
        EXPECT_EQ(t->grown.substr(0, 9), "grownrown");
        EXPECT_EQ(t->shrunk, "ssss");
        EXPECT_EQ(t->wide, L"w\u00e9de, and long enough to be allocated");
        EXPECT_EQ(t->u16, u"u16");
        EXPECT_EQ(t->u32, U"\U0001F600 u32 long enough to leave the object");
        auto* many = s.find_root<steppe::vector<steppe::string>>("many");
        ASSERT_EQ(many->size(), 20'000u);
        for (long i = 0; i < 20'000; ++i) ASSERT_EQ((*many)[i], text(i));
        auto* moved = s.find_root<steppe::vector<steppe::string>>("moved");
        ASSERT_EQ(moved->size(), 90u);
        for (long i = 0; i < 90; ++i) ASSERT_EQ((*moved)[i], text(89 - i));
        // Change them here: short to long and back.
        t->small.append(100, '+');
        t->large = "tiny";
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        auto* t = s.find_root<Texts>("texts");
        EXPECT_EQ(t->small, "abc" + std::string(100, '+'));
        EXPECT_EQ(t->large, "tiny");
    });
}

TEST_P(ContainersTest, ListsAndSplice) {
    {
        auto s = open();
        auto* a = s.root<steppe::list<steppe::string>>("a");
        auto* b = s.root<steppe::list<steppe::string>>("b");
        for (long i = 0; i < 1000; ++i) a->push_back(stext(i));
        for (long i = 1000; i < 2000; ++i) b->push_front(stext(i));
        // b: 1999..1000. Move a's 100..199 to b's front, all of a's rest after b's 10th.
        auto from = std::next(a->begin(), 100), to = std::next(a->begin(), 200);
        b->splice(b->begin(), *a, from, to);
        b->splice(std::next(b->begin(), 110), *a);
        auto* empty = s.root<steppe::list<long>>("empty");
        empty->push_back(1);
        empty->clear();
        auto* sorted = s.root<steppe::list<long>>("sorted");
        for (long i = 0; i < 5000; ++i) sorted->push_back((i * 7919) % 5000);
        sorted->sort();
        sorted->reverse();
        auto* f = s.root<steppe::forward_list<steppe::string>>("f");
        auto* g = s.root<steppe::forward_list<steppe::string>>("g");
        for (long i = 0; i < 500; ++i) f->push_front(stext(i));
        for (long i = 500; i < 1000; ++i) g->push_front(stext(i));
        f->splice_after(f->before_begin(), *g);  // g's 999..500 before f's 499..0
        f->reverse();
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* a = s.find_root<steppe::list<steppe::string>>("a");
        auto* b = s.find_root<steppe::list<steppe::string>>("b");
        EXPECT_TRUE(a->empty());
        EXPECT_EQ(a->begin(), a->end()) << "the empty sentinel points at itself after the reload";
        std::vector<std::string> expect;
        for (long i = 100; i < 200; ++i) expect.push_back(text(i));
        for (long i = 1999; i >= 1990; --i) expect.push_back(text(i));
        for (long i = 0; i < 100; ++i) expect.push_back(text(i));
        for (long i = 200; i < 1000; ++i) expect.push_back(text(i));
        for (long i = 1989; i >= 1000; --i) expect.push_back(text(i));
        ASSERT_EQ(b->size(), expect.size());
        std::size_t k = 0;
        for (auto& e : *b) ASSERT_EQ(e, expect[k++]);
        k = expect.size();
        for (auto it = b->rbegin(); it != b->rend(); ++it) ASSERT_EQ(*it, expect[--k]) << "backwards too";
        EXPECT_TRUE(s.find_root<steppe::list<long>>("empty")->empty());
        auto* sorted = s.find_root<steppe::list<long>>("sorted");
        long want = 4999;
        for (long v : *sorted) ASSERT_EQ(v, want--);
        auto* f = s.find_root<steppe::forward_list<steppe::string>>("f");
        long i = 0;
        for (auto& e : *f) ASSERT_EQ(e, text(i++));
        EXPECT_EQ(i, 1000);
        EXPECT_TRUE(s.find_root<steppe::forward_list<steppe::string>>("g")->empty());
        // Splice back in this process.
        a->splice(a->end(), *b, b->begin());
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        auto* a = s.find_root<steppe::list<steppe::string>>("a");
        ASSERT_EQ(a->size(), 1u);
        EXPECT_EQ(a->front(), text(100));
        EXPECT_EQ(s.find_root<steppe::list<steppe::string>>("b")->size(), 1999u);
    });
}

TEST_P(ContainersTest, DequeGrowsAtBothEnds) {
    constexpr long n = 30'000;
    {
        auto s = open();
        auto* d = s.root<steppe::deque<long>>("d");
        for (long i = 0; i < n; ++i) {
            d->push_back(i);
            d->push_front(-i - 1);
        }
        auto* ds = s.root<steppe::deque<steppe::string>>("ds");
        for (long i = 0; i < 2000; ++i) (i % 2 ? ds->push_back(stext(i)) : ds->push_front(stext(i)));
        for (int i = 0; i < 100; ++i) ds->pop_front(), ds->pop_back();
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* d = s.find_root<steppe::deque<long>>("d");
        ASSERT_EQ(d->size(), 2u * n);
        for (long i = 0; i < 2 * n; ++i) ASSERT_EQ((*d)[i], i - n) << i;
        long expect = -n;
        for (long v : *d) ASSERT_EQ(v, expect++);
        auto* ds = s.find_root<steppe::deque<steppe::string>>("ds");
        ASSERT_EQ(ds->size(), 1800u);
        // Front: the even ones pushed last come first: 1998, 1996, ...; 100 of them popped.
        EXPECT_EQ(ds->front(), text(1998 - 200));
        EXPECT_EQ(ds->back(), text(1999 - 200));
        // Keep growing in this process: the map must grow at both ends again.
        for (long i = 0; i < n; ++i) d->push_front(-n - 1 - i), d->push_back(n + i);
        for (long i = 0; i < 1000; ++i) d->pop_front();
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        auto* d = s.find_root<steppe::deque<long>>("d");
        ASSERT_EQ(d->size(), 4u * n - 1000);
        long expect = -2 * n + 1000;
        for (long v : *d) ASSERT_EQ(v, expect++);
    });
}

TEST_P(ContainersTest, OrderedContainers) {
    {
        auto s = open();
        auto* m = s.root<steppe::map<long, steppe::string>>("map");
        auto* mm = s.root<steppe::multimap<steppe::string, long>>("multimap");
        auto* st = s.root<steppe::set<steppe::string>>("set");
        auto* ms = s.root<steppe::multiset<long>>("multiset");
        auto* rev = s.root<steppe::set<long, std::greater<long>>>("reversed");
        for (long i = 0; i < 5000; ++i) {
            m->emplace((i * 7919) % 5000, stext(i));
            mm->emplace(stext(i % 100), i);
            st->insert(stext(i));
            ms->insert(i % 10);
            rev->insert(i);
        }
        for (long i = 0; i < 5000; i += 2) m->erase(i);  // rebalance
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* m = s.find_root<steppe::map<long, steppe::string>>("map");
        ASSERT_EQ(m->size(), 2500u);
        long prev = -1;
        for (auto& [k, v] : *m) {
            ASSERT_EQ(k % 2, 1);
            ASSERT_GT(k, prev);
            prev = k;
        }
        for (long i = 0; i < 5000; ++i) {
            long k = (i * 7919) % 5000;
            auto it = m->find(k);
            if (k % 2) {
                ASSERT_NE(it, m->end());
                ASSERT_EQ(it->second, text(i));
            } else {
                ASSERT_EQ(it, m->end());
            }
        }
        auto* mm = s.find_root<steppe::multimap<steppe::string, long>>("multimap");
        ASSERT_EQ(mm->size(), 5000u);
        auto [lo, hi] = mm->equal_range(std::string_view(text(42)));
        std::vector<long> got;
        for (auto it = lo; it != hi; ++it) got.push_back(it->second);
        ASSERT_EQ(got.size(), 50u);
        for (std::size_t j = 0; j < got.size(); ++j) EXPECT_EQ(got[j], 42 + 100 * static_cast<long>(j)) << "insertion order";
        auto* st = s.find_root<steppe::set<steppe::string>>("set");
        ASSERT_EQ(st->size(), 5000u);
        EXPECT_TRUE(std::is_sorted(st->begin(), st->end()));
        for (long i = 0; i < 5000; ++i) ASSERT_TRUE(st->contains(std::string_view(text(i))));
        auto* ms = s.find_root<steppe::multiset<long>>("multiset");
        for (long k = 0; k < 10; ++k) ASSERT_EQ(ms->count(k), 500u);
        auto* rev = s.find_root<steppe::set<long, std::greater<long>>>("reversed");
        EXPECT_EQ(*rev->begin(), 4999);
        EXPECT_EQ(*rev->rbegin(), 0);
        m->clear();  // back to the empty header pointing at itself
        st->erase(st->begin(), std::next(st->begin(), 4000));
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        auto* m = s.find_root<steppe::map<long, steppe::string>>("map");
        EXPECT_TRUE(m->empty());
        EXPECT_EQ(m->begin(), m->end());
        m->emplace(1, "one");  // an emptied tree works after the reload
        EXPECT_EQ(m->at(1), "one");
        EXPECT_EQ(s.find_root<steppe::set<steppe::string>>("set")->size(), 1000u);
    });
}

TEST_P(ContainersTest, UnorderedContainers) {
    {
        auto s = open();
        auto* um = s.root<steppe::unordered_map<steppe::string, long>>("map");
        auto* umm = s.root<steppe::unordered_multimap<long, steppe::string>>("multimap");
        auto* us = s.root<steppe::unordered_set<long>>("set");
        auto* ums = s.root<steppe::unordered_multiset<steppe::string>>("multiset");
        auto* cached = s.root<steppe::unordered_map<long, steppe::string, slow_hash>>("cached");
        for (long i = 0; i < 5000; ++i) {
            um->emplace(stext(i), i);
            umm->emplace(i % 50, stext(i));
            us->insert(i * 3);
            ums->insert(stext(i % 10));
            cached->emplace(i, stext(i));
        }
        for (long i = 0; i < 5000; i += 3) um->erase(stext(i));
        s.root<steppe::unordered_set<long>>("empty");
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* um = s.find_root<steppe::unordered_map<steppe::string, long>>("map");
        ASSERT_EQ(um->size(), 5000u - 1667u);
        for (long i = 0; i < 5000; ++i) {
            auto it = um->find(std::string_view(text(i)));
            if (i % 3) {
                ASSERT_NE(it, um->end()) << text(i);
                ASSERT_EQ(it->second, i);
            } else {
                ASSERT_EQ(it, um->end());
            }
        }
        std::size_t walked = 0;
        for (auto& e : *um) walked += e.first.empty() ? 0 : 1;
        EXPECT_EQ(walked, um->size());
        auto* umm = s.find_root<steppe::unordered_multimap<long, steppe::string>>("multimap");
        ASSERT_EQ(umm->count(7), 100u);
        auto* us = s.find_root<steppe::unordered_set<long>>("set");
        for (long i = 0; i < 15000; ++i) ASSERT_EQ(us->contains(i), i % 3 == 0);
        auto* ums = s.find_root<steppe::unordered_multiset<steppe::string>>("multiset");
        for (long i = 0; i < 10; ++i) ASSERT_EQ(ums->count(std::string_view(text(i))), 500u);
        auto* cached = s.find_root<steppe::unordered_map<long, steppe::string, slow_hash>>("cached");
        for (long i = 0; i < 5000; ++i) ASSERT_EQ(cached->at(i), text(i));
        auto* empty = s.find_root<steppe::unordered_set<long>>("empty");
        EXPECT_TRUE(empty->empty());
        EXPECT_EQ(empty->bucket_count(), 1u);
        EXPECT_FALSE(empty->contains(3)) << "the single bucket inside the object after the reload";
        empty->insert(3);
        um->clear();
        um->emplace(stext(7), 7);
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        EXPECT_TRUE(s.find_root<steppe::unordered_set<long>>("empty")->contains(3));
        auto* um = s.find_root<steppe::unordered_map<steppe::string, long>>("map");
        ASSERT_EQ(um->size(), 1u);
        EXPECT_EQ(um->at(stext(7)), 7);
    });
}

TEST_P(ContainersTest, UnorderedMapRehashedSeveralTimes) {
    using Table = steppe::unordered_map<long, steppe::string>;
    constexpr long n = rehash_entries;
    std::size_t buckets = 0;
    {
        auto s = open();
        auto* t = s.root<Table>("t");
        std::set<std::size_t> seen{t->bucket_count()};
        for (long i = 0; i < n; ++i) {
            t->emplace(i, stext(i));
            seen.insert(t->bucket_count());
        }
        EXPECT_GE(seen.size(), 5u) << "rehashed several times";
        t->max_load_factor(0.5f);  // and once more, explicitly
        t->rehash(0);
        buckets = t->bucket_count();
        s.commit();
    }
    in_fresh_process([buckets](steppe::store& s) {
        auto* t = s.find_root<Table>("t");
        ASSERT_EQ(t->size(), static_cast<std::size_t>(n));
        EXPECT_EQ(t->bucket_count(), buckets);
        EXPECT_FLOAT_EQ(t->max_load_factor(), 0.5f);
        for (long i = 0; i < n; ++i) ASSERT_EQ(t->at(i), text(i));
        // Rehash in the reopened store: the new bucket array is in the store too.
        for (long i = n; i < 3 * n; ++i) t->emplace(i, stext(i));
        EXPECT_GT(t->bucket_count(), buckets);
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        auto* t = s.find_root<Table>("t");
        ASSERT_EQ(t->size(), static_cast<std::size_t>(3 * n));
        for (long i = 0; i < 3 * n; ++i) ASSERT_EQ(t->at(i), text(i));
        std::size_t in_buckets = 0;
        for (std::size_t b = 0; b < t->bucket_count(); ++b) in_buckets += t->bucket_size(b);
        EXPECT_EQ(in_buckets, t->size());
    });
}

TEST_P(ContainersTest, MemberKinds) {
    {
        auto s = open();
        make_parts(s, 100);
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        auto* records = s.root<steppe::vector<Record>>("records");
        records->reserve(500);  // Record::link may point into the buffer
        for (int i = 0; i < 500; ++i) {
            Part* p = (*parts)[i % 100];
            Record& r = records->emplace_back();
            r.pair = {stext(i), p};
            r.tuple = {i, stext(i + 1), p};
            r.array = {p, nullptr, (*parts)[(i + 1) % 100]};
            if (i % 2) r.name = stext(i + 2);
            if (i % 3) r.maybe = p;
            if (i % 4 == 1) r.link = p;
            if (i % 4 == 2) r.link = &r;  // into the vector's own buffer
            if (i % 3 == 0) r.number = i;
            if (i % 3 == 1) r.number = i * 0.5;
            if (i % 3 == 2) r.number = static_cast<long>(i) * 1000;
            if (i % 2 == 0) r.numbers = steppe::vector<long>(static_cast<std::size_t>(i % 7), i);
            r.names = {stext(i + 3), stext(i + 4)};
        }
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        auto* records = s.find_root<steppe::vector<Record>>("records");
        ASSERT_EQ(records->size(), 500u);
        for (int i = 0; i < 500; ++i) {
            Part* p = (*parts)[i % 100];
            Record& r = (*records)[i];
            ASSERT_EQ(r.pair.first, text(i));
            ASSERT_EQ(r.pair.second, p);
            ASSERT_EQ(std::get<0>(r.tuple), i);
            ASSERT_EQ(std::get<1>(r.tuple), text(i + 1));
            ASSERT_EQ(std::get<2>(r.tuple), p);
            ASSERT_EQ(r.array[0], p);
            ASSERT_EQ(r.array[1], nullptr);
            ASSERT_EQ(r.array[2]->id, (i + 1) % 100);
            ASSERT_EQ(r.name.has_value(), i % 2 == 1);
            if (r.name) {
                ASSERT_EQ(*r.name, text(i + 2));
            }
            ASSERT_EQ(r.maybe.has_value(), i % 3 != 0);
            if (r.maybe) {
                ASSERT_EQ(*r.maybe, p);
            }
            switch (i % 4) {
            case 1: ASSERT_EQ(std::get<Part*>(r.link), p); break;
            case 2: ASSERT_EQ(std::get<Record*>(r.link), &r); break;
            default: ASSERT_TRUE(std::holds_alternative<std::monostate>(r.link));
            }
            switch (i % 3) {
            case 0: ASSERT_EQ(std::get<int>(r.number), i); break;
            case 1: ASSERT_EQ(std::get<double>(r.number), i * 0.5); break;
            default: ASSERT_EQ(std::get<long>(r.number), i * 1000L);
            }
            if (i % 2 == 0) {
                ASSERT_EQ(std::get<1>(r.numbers), steppe::vector<long>(static_cast<std::size_t>(i % 7), i));
            } else {
                ASSERT_EQ(r.numbers.index(), 0u);
            }
            ASSERT_EQ(r.names[0], text(i + 3));
            ASSERT_EQ(r.names[1], text(i + 4));
        }
        // Change alternatives here.
        (*records)[0].link = (*parts)[99];
        (*records)[0].numbers = steppe::vector<long>{9, 9};
        (*records)[1].name.reset();
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([](steppe::store& s) {
        auto* records = s.find_root<steppe::vector<Record>>("records");
        EXPECT_EQ(std::get<Part*>((*records)[0].link)->id, 99);
        EXPECT_EQ(std::get<1>((*records)[0].numbers), (steppe::vector<long>{9, 9}));
        EXPECT_FALSE((*records)[1].name.has_value());
    });
}

// map<string, vector<Part*>>: key i holds parts i % P, (i * 7) % P, ...
constexpr int index_parts = 10'000;
std::vector<int> index_entry(long i) {
    std::vector<int> ids;
    for (long k = 0; k <= i % 3; ++k) ids.push_back(static_cast<int>((i * (1 + 6 * k)) % index_parts));
    return ids;
}

TEST_P(ContainersTest, NestedMapOfStringToVectorOfParts) {
    const long n = nested_entries();
    auto started = std::chrono::steady_clock::now();
    {
        auto s = open();
        auto* parts = make_parts(s, index_parts);
        auto* index = s.root<Index>("index");
        for (long i = 0; i < n; ++i) {
            PartVec& v = (*index)[stext(i)];
            for (int id : index_entry(i)) v.push_back((*parts)[id]);
        }
        EXPECT_EQ(index->size(), static_cast<std::size_t>(n));
        s.commit();
    }
    auto written = std::chrono::steady_clock::now();
    in_fresh_process([n](steppe::store& s) {
        auto* index = s.find_root<Index>("index");
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        ASSERT_EQ(index->size(), static_cast<std::size_t>(n));
        std::vector<std::string> keys;
        keys.reserve(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i) keys.push_back(text(i));
        std::vector<long> order(static_cast<std::size_t>(n));
        std::iota(order.begin(), order.end(), 0L);
        std::sort(order.begin(), order.end(), [&](long a, long b) { return keys[a] < keys[b]; });
        auto it = index->begin();
        for (long i : order) {  // in order, every entry
            ASSERT_EQ(it->first, keys[i]);
            std::vector<int> ids = index_entry(i);
            ASSERT_EQ(it->second.size(), ids.size());
            for (std::size_t k = 0; k < ids.size(); ++k) {
                ASSERT_EQ(it->second[k], (*parts)[ids[k]]);
                ASSERT_EQ(it->second[k]->id, ids[k]);
            }
            ++it;
        }
        EXPECT_EQ(it, index->end());
        for (long i = 0; i < n; i += 7) {  // and by lookup
            auto found = index->find(std::string_view(keys[i]));
            ASSERT_NE(found, index->end());
            ASSERT_EQ(found->second.front()->id, index_entry(i)[0]);
        }
        EXPECT_EQ(index->find(std::string_view("no such key")), index->end());
        expect_sound(s);
    });
    auto checked = std::chrono::steady_clock::now();
    auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
    std::printf("[          ] %ld entries: written and committed in %lld ms, checked in a fresh process in %lld ms\n",
                n, static_cast<long long>(ms(written - started)), static_cast<long long>(ms(checked - written)));
}

// Lookups with string_view keys build no key, so they work in a read-only
// store even for keys too long to sit inside a string.
TEST_P(ContainersTest, ReadOnlyLookupsBuildNoKey) {
    {
        auto s = open();
        auto* m = s.root<steppe::map<steppe::string, long>>("m");
        auto* u = s.root<steppe::unordered_map<steppe::string, long>>("u");
        for (long i = 0; i < 1000; ++i) m->emplace(stext(i), i), u->emplace(stext(i), i);
        s.commit();
    }
    auto s = open([](steppe::open_options& o) { o.read_only = true; });
    auto* m = s.find_root<steppe::map<steppe::string, long>>("m");
    auto* u = s.find_root<steppe::unordered_map<steppe::string, long>>("u");
    for (long i = 0; i < 1000; ++i) {
        std::string key = text(i);
        ASSERT_EQ(m->find(std::string_view(key))->second, i);
        ASSERT_EQ(m->find(key.c_str())->second, i);
        ASSERT_EQ(u->find(std::string_view(key))->second, i);
    }
    try {
        (*m)[stext(1)] = 5;  // a long key is a store allocation: refused
        FAIL() << "a read-only store allocated";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << e.what();
    }
}

// The allocator uses the thread's current store: a container of another
// store grows there only inside a use_store scope.
TEST_P(ContainersTest, ContainersOfTwoStoresAndUseStore) {
    std::string other = dir.path("other.db");
    {
        auto a = open();
        auto b = steppe::store::open(other, options());  // b is now current
        auto* in_a = a.root<steppe::vector<steppe::string>>("v");
        auto* in_b = b.root<steppe::vector<steppe::string>>("v");
        {
            steppe::use_store scope(a);
            for (long i = 0; i < 100; ++i) in_a->push_back(stext(i));
        }
        for (long i = 0; i < 100; ++i) in_b->push_back(stext(i + 1000));
        a.commit();
        b.commit();
        in_a->push_back(stext(1));  // built outside the scope: the string's buffer is b's
        EXPECT_EQ(steppe::test::error_of([&] { a.commit(); }).code(), steppe::errc::transient_pointer)
            << "a committed a pointer into b";
        a.rollback();
        EXPECT_EQ(in_a->size(), 100u);
    }
    in_fresh_process([&](steppe::store& a) {
        auto b = steppe::store::open(other, options());
        auto* in_a = a.find_root<steppe::vector<steppe::string>>("v");
        auto* in_b = b.find_root<steppe::vector<steppe::string>>("v");
        ASSERT_EQ(in_a->size(), 100u);
        ASSERT_EQ(in_b->size(), 100u);
        for (long i = 0; i < 100; ++i) {
            ASSERT_EQ((*in_a)[i], text(i));
            ASSERT_EQ((*in_b)[i], text(i + 1000));
        }
    });
}

// ---- Commit and rollback ---------------------------------------------------------

struct Everything {
    Index* index;
    steppe::unordered_map<steppe::string, long>* table;
    steppe::deque<steppe::string>* deque;
    steppe::list<long>* list;
    steppe::vector<steppe::string>* strings;
};
Everything everything(steppe::store& s) {
    return {s.root<Index>("index"), s.root<steppe::unordered_map<steppe::string, long>>("table"),
            s.root<steppe::deque<steppe::string>>("deque"), s.root<steppe::list<long>>("list"),
            s.root<steppe::vector<steppe::string>>("strings")};
}
void expect_committed(steppe::store& s) {
    Everything e = everything(s);
    auto* parts = s.find_root<steppe::vector<Part*>>("parts");
    ASSERT_EQ(e.index->size(), 2000u);
    long i = 0;
    std::vector<std::string> keys;
    for (long k = 0; k < 2000; ++k) keys.push_back(text(k));
    std::sort(keys.begin(), keys.end());
    for (auto& [k, v] : *e.index) {
        ASSERT_EQ(k, keys[static_cast<std::size_t>(i++)]);
        ASSERT_EQ(v.size(), 1u);
        ASSERT_EQ(v[0], (*parts)[0]);
    }
    ASSERT_EQ(e.table->size(), 3000u);
    for (long k = 0; k < 3000; ++k) ASSERT_EQ(e.table->at(stext(k)), k);
    ASSERT_EQ(e.deque->size(), 1000u);
    for (long k = 0; k < 1000; ++k) ASSERT_EQ((*e.deque)[k], text(k));
    ASSERT_EQ(e.list->size(), 1000u);
    long want = 0;
    for (long v : *e.list) ASSERT_EQ(v, want++);
    ASSERT_EQ(e.strings->size(), 100u);
    for (long k = 0; k < 100; ++k) ASSERT_EQ((*e.strings)[k], text(k));
}

TEST_P(ContainersTest, RollbackDiscardsChangesAndKeepsTheCommittedContents) {
    {
        auto s = open();
        make_parts(s, 10);
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        Everything e = everything(s);
        for (long k = 0; k < 2000; ++k) (*e.index)[stext(k)].push_back((*parts)[0]);
        for (long k = 0; k < 3000; ++k) e.table->emplace(stext(k), k);
        for (long k = 0; k < 1000; ++k) e.deque->push_back(stext(k));
        for (long k = 0; k < 1000; ++k) e.list->push_back(k);
        for (long k = 0; k < 100; ++k) e.strings->push_back(stext(k));
        s.commit();
        expect_committed(s);

        // Change everything: new and erased entries, a rehash, both deque ends,
        // strings short to long and long to short, a reallocation, new parts.
        for (long k = 0; k < 2000; k += 2) e.index->erase(stext(k));
        for (long k = 2000; k < 4000; ++k) (*e.index)[stext(k)].push_back(make_part(s, static_cast<int>(k)));
        for (auto& [k, v] : *e.index) v.push_back((*parts)[1]);
        for (long k = 3000; k < 30'000; ++k) e.table->emplace(stext(k), -k);
        e.table->erase(stext(5));
        for (long k = 0; k < 2000; ++k) e.deque->push_front(stext(k + 5000)), e.deque->push_back(stext(k));
        e.deque->pop_front();
        e.list->reverse();
        e.list->resize(10);
        for (auto& str : *e.strings) str.size() < 16 ? str.append(40, 'z') : str.assign("short");
        e.strings->resize(5000);
        s.rollback();
        expect_committed(s);

        // The store goes on after the rollback.
        e.list->push_back(1000);
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* list = s.find_root<steppe::list<long>>("list");
        ASSERT_EQ(list->back(), 1000);
        list->pop_back();
        expect_committed(s);
        expect_sound(s);
    });
}

// ---- Pointer keys ------------------------------------------------------------------

struct PointerKeyed {
    steppe::set<Part*> set;
    steppe::multiset<const Part*> multiset;
    steppe::map<Part*, steppe::string> map;
    steppe::unordered_set<Part*> uset;
    steppe::unordered_map<Part*, long> umap;
};

TEST_P(ContainersTest, PointerKeysOrderAndHashByPersistentAddress) {
    constexpr int n = 3000;
    {
        auto s = open();
        auto* parts = make_parts(s, n);
        auto* k = s.root<PointerKeyed>("keyed");
        for (int i = n - 1; i >= 0; --i) {
            Part* p = (*parts)[(i * 7) % n];
            k->set.insert(p);
            k->multiset.insert(p);
            k->multiset.insert(p);
            k->map.emplace(p, stext(p->id));
            k->uset.insert(p);
            k->umap.emplace(p, p->id);
        }
        s.commit();
    }
    auto verify = [](steppe::store& s, int extra) {
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        auto* k = s.find_root<PointerKeyed>("keyed");
        auto pa = [](const Part* p) { return steppe::detail::persistent_address_of(p); };
        EXPECT_TRUE(std::is_sorted(k->set.begin(), k->set.end(),
                                   [&](const Part* a, const Part* b) { return pa(a) < pa(b); }));
        ASSERT_EQ(k->set.size(), static_cast<std::size_t>(n + extra));
        ASSERT_EQ(k->uset.size(), static_cast<std::size_t>(n + extra));
        for (int i = 0; i < n; ++i) {
            Part* p = (*parts)[i];
            ASSERT_TRUE(k->set.contains(p)) << i;
            ASSERT_EQ(k->multiset.count(p), 2u);
            ASSERT_EQ(k->map.at(p), text(i));
            ASSERT_TRUE(k->uset.contains(p));
            ASSERT_EQ(k->umap.at(p), i);
        }
    };
    in_fresh_process([&](steppe::store& s) {
        verify(s, 0);
        // Insert and erase in the reopened store, with new objects too.
        auto* k = s.find_root<PointerKeyed>("keyed");
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        for (int i = 0; i < 500; ++i) {
            Part* p = make_part(s, n + i);
            parts->push_back(p);
            k->set.insert(p);
            k->multiset.insert(p), k->multiset.insert(p);
            k->map.emplace(p, stext(n + i));
            k->uset.insert(p);
            k->umap.emplace(p, n + i);
            EXPECT_FALSE(k->set.insert((*parts)[static_cast<std::size_t>(i)]).second) << "no duplicates";
            EXPECT_FALSE(k->uset.insert((*parts)[static_cast<std::size_t>(i)]).second) << "no duplicates";
        }
        s.commit();
        expect_sound(s);
    });
    in_fresh_process([&](steppe::store& s) {
        auto* parts = s.find_root<steppe::vector<Part*>>("parts");
        ASSERT_EQ(parts->size(), static_cast<std::size_t>(n + 500));
        auto* k = s.find_root<PointerKeyed>("keyed");
        for (int i = n; i < n + 500; ++i) {
            Part* p = (*parts)[static_cast<std::size_t>(i)];
            ASSERT_TRUE(k->set.contains(p));
            ASSERT_EQ(k->umap.at(p), i);
        }
        // Touch the parts in reverse so they map in another order, then look up again.
        for (auto it = parts->rbegin(); it != parts->rend(); ++it) ASSERT_GE((*it)->id, 0);
        parts->resize(n);
        verify(s, 500);
    });
}

STEPPE_BOTH_BACKENDS(ContainersTest);

}  // namespace
