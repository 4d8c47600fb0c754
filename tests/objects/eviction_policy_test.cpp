// The eviction policies (options::eviction_policy, src/objects/evict.cpp),
// run once per scheme with the rest of tests/objects/ (CMakeLists.txt) and,
// inside, per policy and fetch granularity: a graph eight times the budget is
// walked and written a little between safe points; each policy must keep the
// memory bound it promises, every value must read back after eviction, and
// check() must stay clean. Schemes that cannot evict (id_self_heal,
// page_fault) keep everything and refuse total and random by name.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include "objects/object_engine.hpp"
#include "support/expect_error.hpp"
#include "support/child.hpp"
#include "support/memory_cgroup.hpp"
#include "support/proc_status.hpp"
#include "support/temp_dir.hpp"

namespace so = steppe::objects;
using policy = so::options::eviction_policy;

namespace {

// A complete binary tree over an index: item i's children are items 2i+1 and 2i+2.
struct Item {
    std::int64_t value;
    so::ref<Item> left, right;
    std::int64_t payload[5];  // 64 bytes an item, so the tree is many budgets big
};
struct Tree {
    std::int64_t count;
    so::ref<Item> top;
    so::ref<so::array<so::ref<Item>>> items;
};

constexpr std::int64_t items = 4000;
constexpr std::uint64_t budget = 32 << 10;  // the tree takes about 8 times this
// Allowance for what a safe point cannot evict or count exactly (the root
// and the index array written in a round, the in_place blocks' rounding), as
// objects_test's budget test allows.
constexpr std::uint64_t slack = 64 << 10;

bool scheme_can_evict() {
    auto d = so::detail::compiled_scheme.detect;
    return d != so::detection::id_self_heal && d != so::detection::page_fault;
}

using params = std::tuple<policy, so::granularity, so::placement>;

class EvictionPolicyTest : public ::testing::TestWithParam<params> {
protected:
    so::options opts() const {
        so::options o;
        o.durable = false;
        o.fetch = std::get<1>(GetParam());
        o.place = std::get<2>(GetParam());
        o.segment_objects = 16;
        return o;
    }
    policy asked() const { return std::get<0>(GetParam()); }

    void build() {
        auto s = so::store::open(path, opts());
        auto tree = s.root<Tree>("tree");
        auto index = s.make_array<so::ref<Item>>(static_cast<std::size_t>(items));
        for (std::int64_t i = 0; i < items; ++i) {
            so::ref<Item> it = s.make<Item>();
            it.mut()->value = i * 3;
            it.mut()->payload[4] = i;
            index.mut()->operator[](static_cast<std::size_t>(i)) = it;
        }
        for (std::int64_t i = 0; i < items; ++i) {
            Item* it = index->operator[](static_cast<std::size_t>(i)).mut();
            if (2 * i + 1 < items) it->left = index->operator[](static_cast<std::size_t>(2 * i + 1));
            if (2 * i + 2 < items) it->right = index->operator[](static_cast<std::size_t>(2 * i + 2));
        }
        tree.mut()->count = items;
        tree.mut()->top = index->operator[](0);
        tree.mut()->items = index;
        s.commit();
    }

    // Every item through the tree (depth first) and through the index: its
    // value (i * 3, item `bumped` + round) and payload.
    static void verify(so::store& s, std::int64_t bumped, std::int64_t round) {
        auto tree = s.find_root<Tree>("tree");
        ASSERT_TRUE(tree);
        ASSERT_EQ(tree->count, items);
        auto want = [&](std::int64_t i) { return i * 3 + (i == bumped ? round : 0); };
        std::int64_t seen = 0;
        std::vector<std::pair<so::ref<Item>, std::int64_t>> stack{{tree->top, 0}};
        while (!stack.empty()) {
            auto [it, i] = stack.back();
            stack.pop_back();
            ASSERT_EQ(it->value, want(i)) << "item " << i;
            ASSERT_EQ(it->payload[4], i);
            ++seen;
            if (it->left) stack.emplace_back(it->left, 2 * i + 1);
            if (it->right) stack.emplace_back(it->right, 2 * i + 2);
        }
        ASSERT_EQ(seen, items);
        const so::array<so::ref<Item>>& index = *tree->items;
        for (std::int64_t i = 0; i < items; ++i) ASSERT_EQ(index[static_cast<std::size_t>(i)]->value, want(i));
    }

    steppe::test::temp_dir dir;
    std::string path = dir.path("eviction.ods");
};

TEST_P(EvictionPolicyTest, KeepsItsMemoryBoundAndEveryValueComesBack) {
    build();
    so::options o = opts();
    o.resident_budget = budget;
    o.eviction = asked();
    if (!scheme_can_evict() && (asked() == policy::total || asked() == policy::random)) {
        steppe::error e = steppe::test::error_of([&] { (void)so::store::open(path, o); });
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << e.what();
        EXPECT_CONTAINS(e.what(), std::string("eviction ") + to_string(asked()));
        EXPECT_CONTAINS(e.what(), "use eviction none");
        return;
    }
    auto s = so::store::open(path, o);
    const std::int64_t bumped = 1234;
    std::uint64_t faulted_before = 0;
    for (std::int64_t round = 0; round < 4; ++round) {
        verify(s, bumped, round);
        if (round > 0 && scheme_can_evict() && asked() != policy::none && asked() != policy::second_chance) {
            EXPECT_GT(s.stats().objects_faulted, faulted_before) << "what left came back by faulting";
        }
        auto tree = s.find_root<Tree>("tree");
        so::ref<Item> it = tree->items->operator[](static_cast<std::size_t>(bumped));
        it.mut()->value = it->value + 1;  // dirty at the commit: it must not leave before being written
        s.commit();                       // a safe point
        auto st = s.stats();
        faulted_before = st.objects_faulted;
        auto findings = s.check();
        ASSERT_TRUE(findings.empty()) << findings[0];
        if (!scheme_can_evict() || asked() == policy::none) {
            EXPECT_EQ(st.evicted_objects, 0u) << so::to_string(st);
            EXPECT_GT(st.resident_bytes, 4 * budget) << "the whole tree stays, past the budget";
            continue;
        }
        EXPECT_GT(st.evicted_objects, 0u) << so::to_string(st);
        switch (asked()) {
            case policy::total: EXPECT_LE(st.resident_bytes, slack) << so::to_string(st); break;
            case policy::random: EXPECT_LE(st.resident_bytes, budget + slack) << so::to_string(st); break;
            case policy::second_chance: EXPECT_LE(st.resident_bytes, 2 * budget + slack) << so::to_string(st); break;
            case policy::none: break;
        }
    }
    verify(s, bumped, 4);
    s.rollback();  // a safe point too
    verify(s, bumped, 4);
    EXPECT_TRUE(s.check().empty());
    s.close();
    auto again = so::store::open(path, opts());  // what the last commit wrote is what a new process reads
    verify(again, bumped, 4);
}

TEST_P(EvictionPolicyTest, WithinTheBudgetNothingLeaves) {
    build();
    so::options o = opts();
    o.resident_budget = std::uint64_t{64} << 20;
    o.eviction = asked();
    if (!scheme_can_evict() && (asked() == policy::total || asked() == policy::random))
        GTEST_SKIP() << "this scheme refuses total and random at open (KeepsItsMemoryBound... checks that)";
    auto s = so::store::open(path, o);
    for (std::int64_t round = 0; round < 2; ++round) {
        verify(s, -1, 0);
        s.commit();
    }
    auto st = s.stats();
    EXPECT_EQ(st.evicted_objects, 0u);
    EXPECT_GE(st.objects_faulted, static_cast<std::uint64_t>(items));
    EXPECT_LE(st.objects_faulted, static_cast<std::uint64_t>(items) + 2) << "nothing faulted twice";
}

// A store larger than its process's memory cap, walked with default
// options in a real 96 MiB cgroup v1 group: the default budget leaves room
// for what second chance keeps, the table and what the walk touches between
// safe points, so the walk ends (with half of the memory as the budget, as
// before, the OOM killer ended it after 800,000 objects). Only under id: fault_block leaves a fault block for each object
// evicted, and the other schemes evict nothing (docs/objects.md, "What the
// budget bounds, and what grows").
struct Link {
    std::int64_t value;
    so::ref<Link> next;
    std::int64_t pad[4];
};
struct Chain {
    std::int64_t count;
    so::ref<Link> first;
};

TEST(ObjectsMemoryCap, AStoreLargerThanItsCgroupIsWalkedWithDefaultOptions) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "a sanitizer's shadow memory does not fit under a 96 MiB cgroup";
#endif
    if (so::detail::compiled_scheme.detect != so::detection::id)
        GTEST_SKIP() << "only id evicts objects whole (docs/objects.md)";
    constexpr std::uint64_t cap = 96 << 20;
    constexpr std::int64_t links = 1'000'000, every = 200'000;  // 80 MB with the headers
    const std::string group = steppe::test::make_memory_group(cap, "objects-walk");
    if (group.empty()) GTEST_SKIP() << "cannot create a memory cgroup here (cgroup v1 memory controller, root)";
    steppe::test::temp_dir dir;
    const std::string path = dir.path("chain.ods");
    ASSERT_EQ(steppe::test::in_child([&] {
                  auto s = so::store::open(path);
                  so::ref<Chain> chain = s.root<Chain>("chain");
                  so::ref<Link> prev;
                  for (std::int64_t i = 0; i < links; ++i) {
                      so::ref<Link> l = s.make<Link>();
                      l.mut()->value = i;
                      l.mut()->next = prev;
                      prev = l;
                  }
                  chain.mut()->first = prev;
                  chain.mut()->count = links;
                  s.commit();
                  return std::string("built");
              }),
              "built");
    const std::string report = steppe::test::in_child([&] {
        steppe::test::join_memory_group(group);
        auto s = so::store::open(path);
        std::int64_t seen = 0, expect = links - 1;
        for (so::ref<Link> l = s.root<Chain>("chain")->first; l; l = l->next, --expect) {
            if (l->value != expect) return "link " + std::to_string(seen) + " is wrong";
            if (++seen % every == 0) s.rollback();
        }
        return "walked " + std::to_string(seen) + "|peak " +
               std::to_string(steppe::test::proc_status_bytes("VmHWM:")) + "|budget " +
               std::to_string(s.stats().resident_budget) + "|" + s.stats().resident_budget_source;
    });
    steppe::test::remove_memory_group(group);
    std::printf("  the walk in a %llu MiB group: %s\n", static_cast<unsigned long long>(cap >> 20), report.c_str());
    ASSERT_EQ(report.rfind("walked " + std::to_string(links) + "|", 0), 0u) << report;
    EXPECT_NE(report.find("a fifth of "), std::string::npos) << report;
    EXPECT_NE(report.find("cgroup v1"), std::string::npos) << report;
    EXPECT_LT(std::stoull(report.substr(report.find("|peak ") + 6)), cap) << report;
}

TEST(EvictionPolicyOptions, AnUnknownPolicyIsRefusedByName) {
    steppe::test::temp_dir dir;
    so::options o;
    o.durable = false;
    o.eviction = static_cast<policy>(9);
    steppe::error e = steppe::test::error_of([&] { (void)so::store::open(dir.path("bad.ods"), o); });
    EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << e.what();
    EXPECT_CONTAINS(e.what(), "eviction policy 9");
    EXPECT_CONTAINS(e.what(), "bad.ods");
}

TEST(EvictionPolicyOptions, InStorePlacementTakesOnlyTheDefault) {
    steppe::test::temp_dir dir;
    so::options o;
    o.durable = false;
    o.place = so::placement::in_store;
    for (policy p : {policy::total, policy::random, policy::none}) {
        o.eviction = p;
        steppe::error e = steppe::test::error_of([&] { (void)so::store::open(dir.path("in_store.ods"), o); });
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << e.what();
        EXPECT_CONTAINS(e.what(), "does not apply to placement in_store");
    }
    o.eviction = policy::second_chance;
    so::store::open(dir.path("in_store.ods"), o).close();
}

TEST(EvictionPolicyOptions, EachPolicyHasAName) {
    EXPECT_STREQ(to_string(policy::second_chance), "second_chance");
    EXPECT_STREQ(to_string(policy::total), "total");
    EXPECT_STREQ(to_string(policy::random), "random");
    EXPECT_STREQ(to_string(policy::none), "none");
}

INSTANTIATE_TEST_SUITE_P(
    Policies, EvictionPolicyTest,
    ::testing::Combine(::testing::Values(policy::second_chance, policy::total, policy::random, policy::none),
                       ::testing::Values(so::granularity::logical_segment, so::granularity::object),
                       ::testing::Values(so::placement::copy, so::placement::in_place)),
    [](const auto& info) {
        return std::string(to_string(std::get<0>(info.param))) + "_" +
               so::to_string(std::get<1>(info.param)) + "_" + so::to_string(std::get<2>(info.param));
    });

}  // namespace
