// One program built twice: as version 1 (-DEVOLUTION_VERSION=1) and as
// version 2, in which one type of each case changed. Version 1 writes a store
// per case; version 2 opens it and must be refused before it reads a byte
// under its own layout (issue 14 item 1, docs/types.md "Changed types").
//
//   evolution_v1 write CASE STORE      exit 0 when written
//   evolution_v2 read CASE STORE       exit 0 and "refused: <message>" when
//                                      refused with type_mismatch; exit 1
//                                      after "read: ..." if it read anyway
//   evolution_v1 read CASE STORE       the writer's own build reads it back
//   evolution_v2 migrate CASE STORE    converts a swapped or renamed case's
//                                      store to version 2's layout
//
// Cases: added, removed, retyped, reordered (an aggregate Contact kept in a
// steppe::map<steppe::string, Contact>), fields (a STEPPE_FIELDS class in a
// steppe::vector), unordered (unordered_map node), list (list node), base
// (a Rect read through Shape*, named by steppe::types::declare), swapped and
// renamed (same bytes, other member names: only the names tell), and
// objects_swapped, objects_renamed (the same two in the object engine).
#include <steppe/containers.hpp>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#ifndef EVOLUTION_VERSION
#error "build with -DEVOLUTION_VERSION=1 or 2"
#endif
constexpr bool v2 = EVOLUTION_VERSION == 2;

namespace book {
struct Added {  // v2 adds a field at the end
    steppe::string name;
    int age;
#if EVOLUTION_VERSION == 2
    long twitter;
#endif
};
struct Removed {  // v2 drops `note`
    steppe::string name;
#if EVOLUTION_VERSION == 1
    long note;
#endif
    int age;
};
struct Retyped {  // v2 widens `age`
    steppe::string name;
#if EVOLUTION_VERSION == 1
    int age;
#else
    long age;
#endif
};
struct Reordered {  // v2 swaps two fields of the same size
#if EVOLUTION_VERSION == 1
    int age;
    float height;
#else
    float height;
    int age;
#endif
};
struct Swapped {  // v2 swaps two fields of the same type: the bytes line up, the names do not
#if EVOLUTION_VERSION == 1
    int x;
    int y;
#else
    int y;
    int x;
#endif
};
struct Renamed {  // v2 renames both fields
#if EVOLUTION_VERSION == 1
    int x, y;
#else
    int px, py;
#endif
};
class Account {  // a STEPPE_FIELDS class; v2 adds `limit_`
public:
    Account() = default;
    explicit Account(long balance) : balance_(balance) {}
    long balance() const { return balance_; }
#if EVOLUTION_VERSION == 2
    STEPPE_FIELDS(balance_, limit_)
#else
    STEPPE_FIELDS(balance_)
#endif
private:
    long balance_ = 0;
#if EVOLUTION_VERSION == 2
    long limit_ = 0;
#endif
};
struct Item {  // in an unordered_map and a list; v2 adds a field
    int count = 0;
#if EVOLUTION_VERSION == 2
    int reserved = 0;
#endif
};

class Shape {
public:
    virtual ~Shape() = default;
    virtual long area() const = 0;
    STEPPE_FIELDS()
};
class Rect : public Shape {  // v2 adds a field a virtual function writes
public:
    Rect(long w, long h) : w_(w), h_(h) {}
    long area() const override;
    STEPPE_BASES(Shape)
#if EVOLUTION_VERSION == 2
    STEPPE_FIELDS(w_, h_, cached_)
#else
    STEPPE_FIELDS(w_, h_)
#endif
private:
    long w_, h_;
#if EVOLUTION_VERSION == 2
    long cached_ = 0;
#endif
};
long Rect::area() const { return w_ * h_; }
}  // namespace book

namespace {

template<class V> using book_map = steppe::map<steppe::string, V>;

template<class V> void write_map(steppe::store& s, V value) {
    auto* m = s.root<book_map<V>>("book");
    for (int i = 0; i < 50; ++i) m->emplace(steppe::string(("contact " + std::to_string(i)).c_str()), value);
}
template<class V> long read_map(steppe::store& s) {
    long n = 0;
    for (const auto& entry : *s.root<book_map<V>>("book")) n += static_cast<long>(entry.first.size()) + 1;
    return n;
}

long run(const std::string& what, const std::string& c, steppe::store& s) {
    using namespace book;
    bool write = what == "write";
    if (c == "added") {
        if (write) write_map(s, Added{});
        return write ? 0 : read_map<Added>(s);
    }
    if (c == "removed") {
        if (write) write_map(s, Removed{});
        return write ? 0 : read_map<Removed>(s);
    }
    if (c == "retyped") {
        if (write) write_map(s, Retyped{});
        return write ? 0 : read_map<Retyped>(s);
    }
    if (c == "reordered") {
        if (write) write_map(s, Reordered{});
        return write ? 0 : read_map<Reordered>(s);
    }
    if (c == "fields") {
        auto* v = s.root<steppe::vector<Account>>("accounts");
        if (write) for (long i = 0; i < 100; ++i) v->emplace_back(i);
        long sum = 0;
        for (const Account& a : *v) sum += a.balance();
        return sum;
    }
    if (c == "unordered") {
        auto* m = s.root<steppe::unordered_map<int, Item>>("items");
        if (write) for (int i = 0; i < 100; ++i) m->emplace(i, Item{i});
        long sum = 0;
        for (const auto& [k, item] : *m) sum += k + item.count;
        return sum;
    }
    if (c == "list") {
        auto* l = s.root<steppe::list<Item>>("items");
        if (write) for (int i = 0; i < 100; ++i) l->push_back(Item{i});
        long sum = 0;
        for (const Item& item : *l) sum += item.count;
        return sum;
    }
    if (c == "base") {
        steppe::types::declare<Rect>();  // read only through Shape*: named so it is compared
        auto** first = s.root<Shape*>("first");
        if (write) *first = s.make<Rect>(3, 4);
        return (*first)->area();
    }
    std::fprintf(stderr, "unknown case %s\n", c.c_str());
    std::exit(2);
}

// 56 as v1 wrote them; v2 reading the swapped fields anyway would say 65.
long pair_value(const book::Swapped& p) { return 10L * p.x + p.y; }
long pair_value(const book::Renamed& p) {
    const auto& [first, second] = p;
    return 10L * first + second;
}

template<class Pair, class Root> long pair_case(const std::string& what, Root root) {
    if (what == "write") *root.mut() = Pair{5, 6};
    return pair_value(*root);
}

// The page engine's swapped and renamed cases.
template<class Pair> long page_pair(const std::string& what, steppe::store& s) {
    struct pointer {  // what pair_case needs of a root: mut() and *
        Pair* p;
        Pair* mut() const { return p; }
        Pair& operator*() const { return *p; }
    };
    return pair_case<Pair>(what, pointer{s.root<Pair>("pair")});
}

// The object-engine cases: "objects_" and a page-engine case's name.
long run_objects(const std::string& what, const std::string& c, const std::string& path) {
    steppe::objects::options o;
    o.durable = false;
    auto s = steppe::objects::store::open(path, o);
    long answer = c == "objects_swapped" ? pair_case<book::Swapped>(what, s.root<book::Swapped>("pair"))
                                         : pair_case<book::Renamed>(what, s.root<book::Renamed>("pair"));
    if (what == "write") s.commit();
    return answer;
}

// v2 converts a swapped or renamed case's store, its fields carried by
// name, as the refusal advises: afterwards v2 reads 56 (and v1 is refused).
long migrate_pair(const std::string& c, const std::string& path) {
    steppe::migration m;
    if (c.ends_with("swapped")) m.convert<book::Swapped>("book::Swapped");
    else m.convert<book::Renamed>("book::Renamed").rename("x", "px").rename("y", "py");
    return static_cast<long>(steppe::migrate(path, m).converted.at(0).objects);
}

long run_page(const std::string& what, const std::string& c, const std::string& path) {
    steppe::open_options o;
    o.durable = false;
    auto s = steppe::store::open(path, o);
    long answer = c == "swapped"   ? page_pair<book::Swapped>(what, s)
                  : c == "renamed" ? page_pair<book::Renamed>(what, s)
                                   : run(what, c, s);
    if (what == "write") s.commit();
    return answer;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s write|read|migrate CASE STORE\n", argv[0]);
        return 2;
    }
    std::string what = argv[1], c = argv[2], path = argv[3];
    try {
        long answer = what == "migrate"                  ? migrate_pair(c, path)
                      : c.rfind("objects_", 0) == 0 ? run_objects(what, c, path)
                                                    : run_page(what, c, path);
        std::printf("%s: %ld (version %d)\n", what.c_str(), answer, EVOLUTION_VERSION);
        return v2 && what == "read" ? 1 : 0;
    } catch (const steppe::error& e) {
        std::printf("refused: %s\n", e.what());
        return e.code() == steppe::errc::type_mismatch ? 0 : 3;
    }
}
