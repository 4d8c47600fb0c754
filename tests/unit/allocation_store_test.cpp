// Which store steppe::allocator allocates in (issue 14, item 3): a container
// that lives in a store allocates there whichever store is current, on any
// thread; a container outside every store uses the current one. Checked the
// hard way: every store commits (a pointer into another store would be
// transient_pointer), is sound, and reads back in a fresh process. Both
// fault backends.
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <array>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/expect_error.hpp"
#include "support/store_fixture.hpp"

namespace {

// Long enough to leave the string object: every string is an allocation.
std::string text(int store, long i) { return "store " + std::to_string(store) + " item " + std::to_string(i) + " ......"; }

// One of each container whose growth allocates something other than its
// elements' own memory: a deque's map and a hash table's buckets come from a
// converted copy of the container's allocator on the stack.
struct Shelf {
    steppe::vector<steppe::string> vector;
    steppe::deque<steppe::string> deque;
    steppe::list<steppe::string> list;
    steppe::map<steppe::string, steppe::vector<long>> map;
    steppe::unordered_map<long, steppe::string> table;
    steppe::vector<long> numbers;  // assign and shrink_to_fit build new buffers in stack temporaries
    STEPPE_FIELDS(vector, deque, list, map, table, numbers)
};

void fill(Shelf& s, int store, long from, long to) {
    for (long i = from; i < to; ++i) {
        s.vector.emplace_back(text(store, i));
        s.deque.emplace_front(text(store, i));
        s.list.emplace_back(text(store, i));
        s.map.emplace(std::piecewise_construct, std::forward_as_tuple(text(store, i)), std::forward_as_tuple(1, i));
        s.table.try_emplace(i, text(store, i));
    }
    s.numbers.assign(static_cast<std::size_t>(to) * 2, store);
    s.numbers.resize(static_cast<std::size_t>(to));
    s.numbers.shrink_to_fit();
    s.vector.shrink_to_fit();
}

void expect_filled(const Shelf& s, int store, long count) {
    ASSERT_EQ(s.vector.size(), static_cast<std::size_t>(count));
    ASSERT_EQ(s.table.size(), static_cast<std::size_t>(count));
    ASSERT_EQ(s.map.size(), static_cast<std::size_t>(count));
    ASSERT_EQ(s.numbers, steppe::vector<long>(static_cast<std::size_t>(count), store));
    for (long i = 0; i < count; ++i) {
        ASSERT_EQ(s.vector[static_cast<std::size_t>(i)], text(store, i));
        ASSERT_EQ(s.deque[static_cast<std::size_t>(count - 1 - i)], text(store, i));
        ASSERT_EQ(s.table.at(i), text(store, i));
        auto it = s.map.find(text(store, i));  // no key built: nothing allocated
        ASSERT_NE(it, s.map.end());
        ASSERT_EQ(it->second.at(0), i);
    }
}

void expect_sound(steppe::store& s) {
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings.front();
}

class AllocationStore : public steppe::test::store_fixture {
protected:
    std::array<std::string, 3> paths{path, dir.path("b.db"), dir.path("c.db")};
    std::vector<steppe::store> open_all() const {
        std::vector<steppe::store> stores;
        for (const auto& p : paths) stores.push_back(steppe::store::open(p, options()));
        return stores;
    }
    // Every store reopened in a fresh process holds `count` items per shelf.
    void expect_all_filled(long count, const char* shelf) const {
        in_fresh_process([&](steppe::store& first) {
            std::vector<steppe::store> others;
            for (std::size_t i = 1; i < paths.size(); ++i) others.push_back(steppe::store::open(paths[i], options()));
            for (int i = 0; i < 3; ++i) {
                steppe::store& s = i == 0 ? first : others[static_cast<std::size_t>(i - 1)];
                Shelf* shelf_in_s = s.find_root<Shelf>(shelf);
                ASSERT_NE(shelf_in_s, nullptr);
                expect_filled(*shelf_in_s, i, count);
                expect_sound(s);
            }
        });
    }
};

TEST_P(AllocationStore, ContainersOfThreeStoresAllocateInTheirOwnWhicheverIsCurrent) {
    constexpr long count = 600;  // deques remap, hash tables rehash several times
    {
        std::vector<steppe::store> stores = open_all();  // c.db is current
        std::array<Shelf*, 3> shelves{};
        for (std::size_t i = 0; i < 3; ++i) shelves[i] = stores[i].root<Shelf>("shelf");
        for (long step = 0; step < count; step += 50) {
            // Each store's shelf grows while each store in turn is current.
            steppe::use_store current(stores[static_cast<std::size_t>(step / 50 % 3)]);
            for (int i = 0; i < 3; ++i) fill(*shelves[static_cast<std::size_t>(i)], i, step, step + 50);
        }
        for (auto& s : stores) {
            s.commit();
            expect_sound(s);
        }
    }
    expect_all_filled(count, "shelf");
}

TEST_P(AllocationStore, TwoStoresTheOtherCurrent) {
    {
        auto a = open();
        auto b = steppe::store::open(paths[1], options());  // b is current
        Shelf* in_a = a.root<Shelf>("shelf");
        fill(*in_a, 0, 0, 300);
        a.commit();
        expect_sound(a);
        EXPECT_EQ(b.types().size(), 0u) << "nothing was allocated in b";
    }
    in_fresh_process([](steppe::store& a) { expect_filled(*a.find_root<Shelf>("shelf"), 0, 300); });
}

TEST_P(AllocationStore, ThreadsWithAnyCurrentStoreGrowContainersOfEveryStore) {
    constexpr long count = 300;
    {
        std::vector<steppe::store> stores = open_all();
        // One shelf per thread in every store: containers are not thread-safe
        // for writing, stores take turns in make.
        std::array<std::array<Shelf*, 3>, 4> shelves{};
        for (std::size_t t = 0; t < shelves.size(); ++t)
            for (std::size_t i = 0; i < 3; ++i)
                shelves[t][i] = stores[i].root<Shelf>("thread " + std::to_string(t));
        std::vector<std::thread> threads;
        for (std::size_t t = 0; t < shelves.size(); ++t)
            threads.emplace_back([&, t] {
                // Thread 3 has no current store at all.
                std::optional<steppe::use_store> current;
                if (t < 3) current.emplace(stores[t]);
                for (long step = 0; step < count; step += 30)
                    for (int i = 0; i < 3; ++i) fill(*shelves[t][static_cast<std::size_t>(i)], i, step, step + 30);
            });
        for (auto& th : threads) th.join();
        for (auto& s : stores) s.commit();
    }
    for (int t = 0; t < 4; ++t) expect_all_filled(count, ("thread " + std::to_string(t)).c_str());
}

struct Pointers {
    long* p;
    char* text;
};

TEST_P(AllocationStore, AContainerOutsideEveryStoreUsesTheCurrentStore) {
    auto a = open();
    auto b = steppe::store::open(paths[1], options());
    Pointers* in_a = a.root<Pointers>("p");
    Pointers* in_b = b.root<Pointers>("p");
    a.commit();
    b.commit();
    steppe::vector<long> on_stack(100, 7);  // b is current
    {
        steppe::use_store current(a);
        steppe::vector<long> copy(on_stack);  // a copy of a container outside every store: a
        in_a->p = copy.data();
        a.commit();
        in_a->p = nullptr;
        a.commit();
    }
    in_b->p = on_stack.data();
    b.commit();
    in_a->p = on_stack.data();
    EXPECT_EQ(steppe::test::error_of([&] { a.commit(); }).code(), steppe::errc::transient_pointer)
        << "a committed a pointer into b";
    a.rollback();
}

TEST_P(AllocationStore, ACopyOfAStoredContainerOnTheStackUsesTheCurrentStore) {
    auto a = open();
    auto b = steppe::store::open(paths[1], options());  // b is current
    auto* in_a = a.root<steppe::vector<long>>("v");
    in_a->assign(50, 1);
    a.commit();
    Pointers* in_b = b.root<Pointers>("p");
    steppe::vector<long> copy(*in_a);  // outside every store: b, not a
    copy.push_back(2);
    in_b->p = copy.data();
    EXPECT_NO_THROW(b.commit());
    in_b->p = nullptr;
    b.commit();
}

// The documented limit: an element built on the stack while another store is
// current brings that store's memory along when it is moved in.
TEST_P(AllocationStore, KeysBuiltOnTheStackKeepTheCurrentStoresMemory) {
    auto a = open();
    auto b = steppe::store::open(paths[1], options());  // b is current
    auto* in_a = a.root<steppe::vector<steppe::string>>("v");
    in_a->emplace_back(text(0, 1));  // built in place: a
    a.commit();
    in_a->push_back(steppe::string(text(0, 2)));  // built on the stack: its buffer is b's
    EXPECT_EQ(steppe::test::error_of([&] { a.commit(); }).code(), steppe::errc::transient_pointer)
        << "a committed a pointer into b";
    a.rollback();
    ASSERT_EQ(in_a->size(), 1u);
    EXPECT_EQ((*in_a)[0], text(0, 1));
}

TEST_P(AllocationStore, AContainerOfAReadOnlyStoreDoesNotAllocateInTheCurrentOne) {
    {
        auto a = open();
        a.root<steppe::vector<steppe::string>>("v");
        a.commit();
    }
    auto a = open([](steppe::open_options& o) { o.read_only = true; });
    auto b = steppe::store::open(paths[1], options());  // b is current and writable
    auto* in_a = a.find_root<steppe::vector<steppe::string>>("v");
    ASSERT_NE(in_a, nullptr);
    try {
        in_a->emplace_back(text(0, 1));
        FAIL() << "a read-only store's vector grew";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(in_a->empty());
    EXPECT_EQ(b.types().size(), 0u) << "nothing was allocated in b";
}

TEST_P(AllocationStore, WithNoStoreToAllocateInTheAllocatorThrows) {
    std::thread([] {
        try {
            steppe::vector<long> v;
            v.push_back(1);
            ADD_FAILURE() << "allocated with no store";
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
            EXPECT_NE(std::string(e.what()).find("no current store"), std::string::npos) << e.what();
        }
    }).join();
}

STEPPE_BOTH_BACKENDS(AllocationStore);

}  // namespace
