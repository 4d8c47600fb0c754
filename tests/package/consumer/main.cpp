// An outside program that only sees the installed headers and library: it
// writes a small list and a few standard containers into a store, commits,
// reopens and reads them back. It is built optimised with warnings as errors
// (run.cmake), as a user's release build would be: the installed headers
// must compile cleanly there, not only in steppe's own debug builds.
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <cstdio>
#include <string>
#include <string_view>

struct Item {
    int value;
    Item* next;
};

struct Catalog {
    steppe::vector<steppe::string> names;
    steppe::map<steppe::string, steppe::vector<long>> parts;
    steppe::unordered_map<long, steppe::string> by_id;
    STEPPE_FIELDS(names, parts, by_id)
};

// A container on the stack allocates in the current store and frees there.
// This shape, compiled on its own (external linkage, not inlined into its
// caller), made GCC 12 -O2 warn maybe-uninitialized in allocator.hpp.
long through_a_scratch_vector(long value) {
    steppe::vector<long> scratch;
    scratch.push_back(value);
    return scratch.back();
}

namespace {

// Long enough to leave the string object: every name is an allocation.
std::string name(int i) { return "part number " + std::to_string(i) + " of the consumer's catalog"; }

void write(const std::string& path) {
    auto store = steppe::store::open(path);
    auto* head = store.root<Item*>("items");
    for (int i = 1; i <= 3; ++i) *head = store.make<Item>(Item{i, *head});
    auto* catalog = store.root<Catalog>("catalog");
    for (long i = 0; i < 100; ++i) {
        catalog->names.emplace_back(name(static_cast<int>(i)));
        catalog->parts.try_emplace(steppe::string(name(static_cast<int>(i))), steppe::vector<long>(static_cast<std::size_t>(i % 7 + 1), i));
        catalog->by_id.try_emplace(i, name(static_cast<int>(i)));
    }
    store.commit();
}

int check(const std::string& path) {
    auto store = steppe::store::open(path);
    int sum = 0;
    for (Item* i = *store.find_root<Item*>("items"); i; i = i->next) sum += i->value;
    const Catalog& catalog = *store.find_root<Catalog>("catalog");
    int wrong = 0;
    for (int i = 0; i < 100; ++i)
        if (std::string_view(catalog.names[static_cast<std::size_t>(i)]) != name(i) ||
            std::string_view(catalog.by_id.at(i)) != name(i))
            ++wrong;
    for (const auto& [key, numbers] : catalog.parts)  // each value: i % 7 + 1 copies of its key's i
        if (numbers.empty() || std::string_view(key) != name(static_cast<int>(numbers[0])) ||
            numbers.size() != static_cast<std::size_t>(numbers[0] % 7 + 1))
            ++wrong;
    if (catalog.parts.size() != 100) ++wrong;
    if (through_a_scratch_vector(42) != 42) ++wrong;
    std::printf("sum of the stored items: %d; catalog entries wrong: %d\n", sum, wrong);
    return sum == 6 && wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::string path = argc > 1 ? argv[1] : "consumer.db";
    write(path);
    return check(path);
}
