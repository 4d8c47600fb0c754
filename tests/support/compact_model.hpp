// A store for the compaction tests (unit/compact_test.cpp,
// crash/compact_kill_test.cpp): a linked list of items with strings,
// vectors, a map, virtual functions, large objects and interior pointers;
// most of it deleted again; and a fingerprint of everything the roots reach
// that compaction must keep (values, pointers checked as they are followed,
// virtual calls).
#pragma once

#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <string>

namespace compact_model {

struct Item {
    virtual ~Item() = default;
    virtual long weight() const { return value; }
    Item* next = nullptr;  // the item made before, the list's order
    long value = 0;
    steppe::string name;
    steppe::vector<long> numbers;
    long* inside = nullptr;  // an interior pointer: &numbers[1]
    STEPPE_FIELDS(next, value, name, numbers, inside)
};

// More than 2048 bytes: a large object on its own pages.
struct Heavy : Item {
    long weight() const override { return value * 2 + 1; }
    long extra[300] = {};
    STEPPE_BASES(Item)
    STEPPE_FIELDS(extra)
};

struct Catalogue {
    Item* newest = nullptr;
    steppe::vector<Item*> items;
    steppe::map<steppe::string, long> index;
    // Pointers into blocks and one past their ends (deque), into the
    // container itself (the hash table's first node points at its
    // before-begin member), a node list.
    steppe::deque<long> history;
    steppe::unordered_map<long, steppe::string> by_value;
    steppe::list<long> values;
    STEPPE_FIELDS(newest, items, index, history, by_value, values)
};

// Left unreachable for --collect.
struct Junk {
    Junk* next = nullptr;
    long payload[5] = {};
    STEPPE_FIELDS(next, payload)
};

inline std::string item_name(long i) { return "item number " + std::to_string(i) + " of the compaction test"; }

inline Item* make_item(steppe::store& s, long i, Item* next) {
    Item* it = i % 50 == 5 ? s.make<Heavy>() : s.make<Item>();
    if (auto* h = dynamic_cast<Heavy*>(it))
        for (long k = 0; k < 300; ++k) h->extra[k] = i * 1000 + k;
    it->value = i;
    it->next = next;
    it->name = item_name(i);
    for (long k = 0; k < i % 7 + 3; ++k) it->numbers.push_back(i + k);
    it->inside = &it->numbers[1];
    return it;
}

// `count` items, then every item but each fifth destroyed (80 %), the list
// and the map relinked over the survivors; `junk` Junk objects on a root
// that is then removed.
inline void build(const std::string& path, long count, long junk = 0) {
    auto s = steppe::store::open(path);
    Catalogue* c = s.root<Catalogue>("catalogue");
    for (long i = 0; i < count; ++i) {
        c->newest = make_item(s, i, c->newest);
        c->items.push_back(c->newest);
        c->index[steppe::string(item_name(i))] = i;
        c->history.push_back(i);
        c->by_value[i] = steppe::string(item_name(i));
        c->values.push_back(i);
    }
    Junk** j = s.root<Junk*>("junk");
    for (long i = 0; i < junk; ++i) {
        Junk* n = s.make<Junk>();
        n->next = *j;
        n->payload[0] = i;
        *j = n;
    }
    s.commit();
    steppe::vector<Item*> kept;
    Item* newest = nullptr;
    for (Item* it : c->items) {
        if (it->value % 5 != 0) {
            c->index.erase(steppe::string(it->name));
            c->by_value.erase(it->value);
            s.destroy(it);
            continue;
        }
        it->next = newest;
        newest = it;
        kept.push_back(it);
    }
    c->items = std::move(kept);
    while (c->history.size() > static_cast<std::size_t>(count / 5)) c->history.pop_front();
    c->values.remove_if([](long v) { return v % 5 != 0; });
    c->newest = newest;
    s.remove_root("junk");
    s.commit();
}

inline std::string describe(const Item& it) {
    std::string out = std::to_string(it.value) + ":" + std::string(it.name) + ":w" + std::to_string(it.weight());
    for (long n : it.numbers) out += "," + std::to_string(n);
    out += it.inside == it.numbers.data() + 1 ? ":in" : ":INSIDE-BROKEN";
    if (auto* h = dynamic_cast<const Heavy*>(&it)) {
        long sum = 0;
        for (long e : h->extra) sum += e;
        out += ":heavy" + std::to_string(sum);
    }
    return out;
}

// Everything the roots reach, as text; "" if the catalogue is missing.
inline std::string fingerprint(steppe::store& s) {
    Catalogue* c = s.find_root<Catalogue>("catalogue");
    if (!c) return "";
    std::string out;
    for (Item* it = c->newest; it; it = it->next) out += describe(*it) + "\n";
    out += "vector:";
    for (Item* it : c->items) out += std::to_string(it->value) + ",";
    out += "\nindex:";
    for (const auto& [name, value] : c->index) out += std::string(name) + "=" + std::to_string(value) + ";";
    out += "\nhistory:";
    for (long v : c->history) out += std::to_string(v) + ",";
    out += "\nby value:";
    for (long v : c->values) {
        auto it = c->by_value.find(v);
        out += it == c->by_value.end() ? "MISSING" : std::string(it->second) + ";";
    }
    out += std::to_string(c->by_value.size());
    return out;
}

inline std::string fingerprint(const std::string& path) {
    auto s = steppe::store::open(path, {.create = false});
    return fingerprint(s);
}

}  // namespace compact_model
