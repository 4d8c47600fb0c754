// steppe::pref<T>, the pointer translated at each use (Texas §3.8): stored as
// a persistent address and never swizzled, so its target's page is reserved
// only when the pref is dereferenced; round trips across reopen, null, large
// objects and the misuse errors, under both fault backends.
#include <gtest/gtest.h>
#include <steppe/pref.hpp>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "support/store_fixture.hpp"

namespace {

struct Leaf {  // 3 KiB: one to a page, so every leaf is a page of its own
    long value;
    char pad[3000];
};
constexpr int fan = 64;
struct FarFan {  // the targets behind prefs: reserved one by one, at use
    long n;
    steppe::pref<Leaf> leaves[fan];
};
struct NearFan {  // the same with raw pointers: all reserved when this page faults in
    long n;
    Leaf* leaves[fan];
};
struct PNode {
    long value;
    steppe::pref<PNode> next;
};
struct Holder {
    steppe::pref<Leaf> one;
    steppe::pref<Leaf> into_array;  // an element in the middle of a large object
};

class pref_test : public steppe::test::store_fixture {};

void expect_error(const std::function<void()>& f, steppe::errc code, const std::string& part) {
    try {
        f();
        ADD_FAILURE() << "no error; expected " << steppe::to_string(code);
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
}

TEST_P(pref_test, list_round_trips_across_reopen) {
    {
        auto s = open();
        auto* head = s.root<PNode>("list");
        PNode* tail = head;
        for (long i = 1; i <= 500; ++i) {
            PNode* n = s.make<PNode>();
            n->value = i;
            tail->next = n;
            tail = n;
        }
        s.commit();
    }
    for (int round = 0; round < 2; ++round) {
        in_fresh_process([](steppe::store& s) {
            long sum = 0, count = 0;
            for (PNode* n = s.find_root<PNode>("list")->next.get(); n; n = n->next.get()) sum += n->value, ++count;
            EXPECT_EQ(count, 500);
            EXPECT_EQ(sum, 500 * 501 / 2);
            EXPECT_EQ(s.stats().pointers_swizzled, 0u) << "a pref is data: nothing swizzled";
            EXPECT_TRUE(s.check().empty());
        });
    }
}

TEST_P(pref_test, targets_are_reserved_only_when_dereferenced) {
    {
        auto s = open();
        auto* far = s.root<FarFan>("far");
        auto* near = s.root<NearFan>("near");
        for (int i = 0; i < fan; ++i) {
            Leaf* a = s.make<Leaf>();
            a->value = i;
            far->leaves[i] = a;
            Leaf* b = s.make<Leaf>();
            b->value = 100 + i;
            near->leaves[i] = b;
        }
        far->n = near->n = fan;
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* far = s.find_root<FarFan>("far");
        auto* near = s.find_root<NearFan>("near");
        const auto before = s.stats();
        EXPECT_EQ(far->n, fan);  // faults the fan's page in: its prefs reserve nothing
        const auto loaded = s.stats();
        EXPECT_EQ(loaded.faults, before.faults + 1);
        EXPECT_EQ(loaded.reserved_virtual_pages, before.reserved_virtual_pages);

        EXPECT_EQ(far->leaves[5]->value, 5);  // one leaf: its page and guard reserved, then faulted in
        const auto used = s.stats();
        EXPECT_EQ(used.reserved_virtual_pages, loaded.reserved_virtual_pages + 2);
        EXPECT_EQ(used.faults, loaded.faults + 1);
        EXPECT_EQ(far->leaves[5].get(), far->leaves[5].get()) << "the same address at every use";
        EXPECT_EQ(s.stats().faults, used.faults) << "a resident target is translated without a fault";

        EXPECT_EQ(near->n, fan);  // raw pointers: every target reserved as the page is swizzled
        EXPECT_EQ(s.stats().reserved_virtual_pages, used.reserved_virtual_pages + 2 * fan);
        EXPECT_GT(s.stats().miss_io_ns, 0u);
        EXPECT_GT(s.stats().miss_swizzle_ns, 0u);
        EXPECT_GT(s.stats().miss_handler_ns, 0u);
    });
}

TEST_P(pref_test, null_and_equality) {
    {
        auto s = open();
        auto* h = s.root<Holder>("h");
        EXPECT_FALSE(h->one);
        EXPECT_EQ(h->one.get(), nullptr);
        EXPECT_TRUE(h->one == nullptr);
        Leaf* l = s.make<Leaf>();
        h->one = l;
        EXPECT_TRUE(h->one);
        EXPECT_EQ(h->one.get(), l);
        steppe::pref<Leaf> copy = h->one;  // a copy outside the store: the current store translates it
        EXPECT_EQ(copy, h->one);
        EXPECT_EQ(copy.get(), l);
        h->into_array = l;
        h->into_array = nullptr;
        EXPECT_EQ(h->into_array.persistent_address(), 0u);
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* h = s.find_root<Holder>("h");
        EXPECT_TRUE(h->one);
        EXPECT_FALSE(h->into_array);
        EXPECT_EQ(h->into_array.get(), nullptr);
        EXPECT_NE(h->one.persistent_address(), 0u);
    });
}

TEST_P(pref_test, element_of_a_large_object) {
    {
        auto s = open();
        auto* h = s.root<Holder>("h");
        Leaf* array = s.make_array<Leaf>(12);  // 12 pages' worth: one unit, faulted a page at a time
        for (long i = 0; i < 12; ++i) array[i].value = 1000 + i;
        h->into_array = array + 9;
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* h = s.find_root<Holder>("h");
        Leaf* nine = h->into_array.get();
        EXPECT_EQ(nine->value, 1009);
        EXPECT_EQ((nine - 9)->value, 1000) << "the whole object is contiguous";
    });
}

TEST_P(pref_test, a_pointer_outside_the_store_is_refused) {
    auto s = open();
    auto* h = s.root<Holder>("h");
    Leaf transient{};
    expect_error([&] { h->one = &transient; }, steppe::errc::transient_pointer, "in no open store");
    EXPECT_FALSE(h->one) << "the pref is unchanged";
}

TEST_P(pref_test, a_pointer_into_another_store_is_refused) {
    auto a = open();
    auto b = steppe::store::open(dir.path("b.db"), options());
    Leaf* in_b = b.make<Leaf>();
    auto* h = a.root<Holder>("h");
    expect_error([&] { h->one = in_b; }, steppe::errc::transient_pointer, dir.path("b.db"));
}

TEST_P(pref_test, dereference_with_no_store_is_an_error) {
    steppe::pref<Leaf> copy;
    {
        auto s = open();
        auto* h = s.root<Holder>("h");
        h->one = s.make<Leaf>();
        copy = h->one;
    }
    expect_error([&] { copy.get(); }, steppe::errc::invalid_argument, "no current store");
}

TEST_P(pref_test, dereference_with_another_store_is_an_error) {
    auto a = open();
    auto* far = a.root<FarFan>("far");
    for (int i = 0; i < fan; ++i) far->leaves[i] = a.make<Leaf>();
    const steppe::pref<Leaf> copy = far->leaves[fan - 1];  // a page number B does not have
    auto b = steppe::store::open(dir.path("b.db"), options());
    steppe::use_store use(b);
    expect_error([&] { copy.get(); }, steppe::errc::invalid_argument, dir.path("b.db") + ": a steppe::pref");
}

TEST_P(pref_test, a_forked_child_cannot_translate) {
    auto s = open();
    auto* h = s.root<Holder>("h");
    h->one = s.make<Leaf>();
    const steppe::pref<Leaf> copy = h->one;
    const pid_t child = ::fork();
    if (child == 0) {
        try {
            copy.get();
            ::_exit(1);
        } catch (const steppe::error& e) {
            const bool named = std::string(e.what()).find("forked") != std::string::npos;
            ::_exit(e.code() == steppe::errc::invalid_argument && named ? 0 : 2);
        }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: translated in the child; 2: another error";
}

STEPPE_BOTH_BACKENDS(pref_test);

}  // namespace
