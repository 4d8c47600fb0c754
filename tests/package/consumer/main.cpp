// An outside program that only sees the installed headers and library: it
// writes a small list into a store, commits, reopens and reads it back.
#include <steppe/steppe.hpp>

#include <cstdio>
#include <string>

struct Item {
    int value;
    Item* next;
};

int main(int argc, char** argv) {
    std::string path = argc > 1 ? argv[1] : "consumer.db";
    {
        auto store = steppe::store::open(path);
        auto* head = store.root<Item*>("items");
        for (int i = 1; i <= 3; ++i) *head = store.make<Item>(Item{i, *head});
        store.commit();
    }
    auto store = steppe::store::open(path);
    int sum = 0;
    for (Item* i = *store.find_root<Item*>("items"); i; i = i->next) sum += i->value;
    std::printf("sum of the stored items: %d\n", sum);
    return sum == 6 ? 0 : 1;
}
