// The object engine's functional suite, run once per scheme (CMakeLists.txt
// builds it with each -DSTEPPE_OBJECTS_DETECTION / _BARRIER) and, inside,
// for each fetch granularity.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>
#include <string>
#include <tuple>

#include "support/child.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "common/sigsafe.hpp"
#include "objects/object_engine.hpp"
#include "storage/storage.hpp"
#include "support/temp_dir.hpp"
#include "third_throws.hpp"

namespace so = steppe::objects;

using steppe::errc;

namespace {

struct Node {
    std::int64_t value;
    so::ref<Node> next;
    so::ref<Node> other;
};
struct List {
    std::int64_t count;
    so::ref<Node> head;
    so::ref<so::array<so::ref<Node>>> index;
};
struct Raw {
    int* p;
};
struct Tiny {
    std::int8_t v;
};

using fetch_and_place = std::tuple<so::granularity, so::placement>;

class ObjectsTest : public ::testing::TestWithParam<fetch_and_place> {
protected:
    so::options opts() const {
        so::options o;
        o.durable = false;
        o.fetch = fetch();
        o.place = std::get<1>(GetParam());
        o.segment_objects = 16;
        return o;
    }
    so::store open() { return so::store::open(path, opts()); }
    so::store open_reader() const {
        so::options ro = opts();
        ro.read_only = true;
        ro.create = false;
        return so::store::open(path, ro);
    }
    so::granularity fetch() const { return std::get<0>(GetParam()); }

    // A list of n nodes (values 0..n-1), each `other` pointing k ahead, and an index array.
    static void build(so::store& s, std::int64_t n) {
        auto list = s.root<List>("list");
        auto index = s.make_array<so::ref<Node>>(static_cast<std::size_t>(n));
        so::ref<Node> head;
        for (std::int64_t i = n - 1; i >= 0; --i) {
            head = s.make<Node>(i, head, so::ref<Node>());
            index.mut()->operator[](static_cast<std::size_t>(i)) = head;
        }
        for (std::int64_t i = 0; i < n; ++i) index->operator[](static_cast<std::size_t>(i)).mut()->other = index->operator[](static_cast<std::size_t>((i * 7) % n));
        list.mut()->count = n;
        list.mut()->head = head;
        list.mut()->index = index;
    }
    static void verify(so::store& s, std::int64_t n) {
        auto list = s.find_root<List>("list");
        ASSERT_TRUE(list);
        ASSERT_EQ(list->count, n);
        std::int64_t i = 0;
        for (so::ref<Node> p = list->head; p; p = p->next, ++i) {
            ASSERT_EQ(p->value, i);
            ASSERT_EQ(p->other->value, (i * 7) % n);
        }
        ASSERT_EQ(i, n);
        const so::array<so::ref<Node>>& index = *list->index;
        ASSERT_EQ(index.size(), static_cast<std::size_t>(n));
        for (std::int64_t k = 0; k < n; ++k) ASSERT_EQ(index[static_cast<std::size_t>(k)]->value, k);
    }

    // Rewrites segments through the storage manager (valid checksums, bytes
    // of a buggy or hostile writer): `edit` gets each segment's first page
    // (header, object table, first objects) and says whether it changed it.
    // Returns whether any changed.
    bool patch_segments(const std::function<bool(std::byte* page)>& edit) {
        auto files = steppe::storage::storage::open(path);
        std::vector<std::byte> page(steppe::storage::page_size);
        bool changed = false;
        for (steppe::storage::page_no p = 1; p < files->page_count(); ++p) {
            files->read_page(p, page.data());
            std::uint32_t magic;
            std::memcpy(&magic, page.data(), 4);
            if (magic != so::format::segment_magic || !edit(page.data())) continue;
            steppe::storage::page_image img{p, page.data()};
            files->commit({&img, 1}, files->meta());
            changed = true;
        }
        return changed;
    }

    steppe::test::temp_dir dir;
    std::string path = dir.path("objects.ods");
};

TEST_P(ObjectsTest, WhatARootReachesPersistsAcrossReopen) {
    {
        auto s = open();
        build(s, 1000);
        s.commit();
        verify(s, 1000);
        EXPECT_TRUE(s.check().empty()) << s.check()[0];
    }
    auto s = open();
    verify(s, 1000);
    auto st = s.stats();
    if (fetch() == so::granularity::object)
        EXPECT_GE(st.segment_faults, 1000u);  // one read per object
    else if (fetch() == so::granularity::logical_segment)
        EXPECT_LE(st.segment_faults, 1000u / 16 + 80);  // one read per segment (16 objects)
    else
        EXPECT_LE(st.segment_faults, 1000u / 16 / 8 + 20);  // 8 pages (of one segment each here) per read
    EXPECT_TRUE(s.check().empty());
}

TEST_P(ObjectsTest, ObjectsNothingReachesAreNotWritten) {
    auto s = open();
    build(s, 10);
    for (int i = 0; i < 50; ++i) s.make<Node>(i, so::ref<Node>(), so::ref<Node>());
    s.commit();
    auto st = s.stats();
    EXPECT_EQ(st.new_objects, 1u + 1u + 10u);  // the list, the index array, the nodes
    EXPECT_EQ(st.unreached_objects, 50u);
    s.close();
    auto again = open();
    verify(again, 10);
}

TEST_P(ObjectsTest, AnUncommittedChangeIsGoneAfterReopen) {
    {
        auto s = open();
        build(s, 20);
        s.commit();
        s.find_root<List>("list")->head.mut()->value = 99;
        s.find_root<List>("list").mut()->count = 5;
    }
    auto s = open();
    verify(s, 20);
}

TEST_P(ObjectsTest, ACommittedChangeToAPersistentObjectIsKept) {
    {
        auto s = open();
        build(s, 300);
        s.commit();
    }
    {
        auto s = open();
        auto list = s.find_root<List>("list");
        so::ref<Node> p = list->head;
        for (int i = 0; i < 150; ++i) p = p->next;
        p.mut()->value = -1;
        auto extra = s.make<Node>(7, so::ref<Node>(), so::ref<Node>());
        p.mut()->other = extra;  // a new object reached only through a changed persistent one
        s.commit();
        EXPECT_EQ(s.stats().new_objects, 1u);
    }
    auto s = open();
    so::ref<Node> p = s.find_root<List>("list")->head;
    for (int i = 0; i < 150; ++i) p = p->next;
    EXPECT_EQ(p->value, -1);
    EXPECT_EQ(p->other->value, 7);
    EXPECT_TRUE(s.check().empty());
}

TEST_P(ObjectsTest, RollbackRestoresObjectsAndRoots) {
    auto s = open();
    build(s, 40);
    s.commit();
    auto list = s.find_root<List>("list");
    so::ref<Node> held = list->head;
    held.mut()->value = 1000;
    list.mut()->head = s.make<Node>(5, so::ref<Node>(), so::ref<Node>());
    s.set_root("other", s.make<Node>(6, so::ref<Node>(), so::ref<Node>()));
    s.rollback();
    EXPECT_EQ(held->value, 0);  // the program's reference still works
    EXPECT_FALSE(s.find_root<Node>("other"));
    verify(s, 40);
    // and the store goes on
    s.find_root<List>("list")->head.mut()->value = 0;
    s.commit();
    s.close();
    auto again = open();
    verify(again, 40);
}

TEST_P(ObjectsTest, ArraysOfValuesAndReferences) {
    {
        auto s = open();
        auto values = s.make_array<std::int32_t>(5000);  // larger than a segment's byte budget
        for (int i = 0; i < 5000; ++i) (*values.mut())[static_cast<std::size_t>(i)] = i * 3;
        struct Holder {
            so::ref<so::array<std::int32_t>> values;
        };
        auto h = s.root<Holder>("holder");
        h.mut()->values = values;
        s.commit();
    }
    struct Holder {
        so::ref<so::array<std::int32_t>> values;
    };
    auto s = open();
    auto h = s.find_root<Holder>("holder");
    const auto& values = *h->values;
    ASSERT_EQ(values.size(), 5000u);
    std::int64_t sum = 0;
    for (std::int32_t v : values) sum += v;
    EXPECT_EQ(sum, 3ll * 4999 * 5000 / 2);
}

TEST_P(ObjectsTest, ReferenceEqualityIsIdentity) {
    auto s = open();
    build(s, 30);
    s.commit();
    s.close();
    auto again = open();
    auto list = again.find_root<List>("list");
    so::ref<Node> a = list->index->operator[](3);
    so::ref<Node> b = list->head->next->next->next;
    EXPECT_TRUE(a == b);
    EXPECT_FALSE(a == list->head);
    EXPECT_TRUE(so::ref<Node>() == nullptr);
}

TEST_P(ObjectsTest, AReferenceToAnotherStoresObjectIsRefusedAtCommit) {
    auto s = open();
    auto t = so::store::open(dir.path("other.ods"), opts());
    auto n = s.root<Node>("n");
    n.mut()->next = t.make<Node>(1, so::ref<Node>(), so::ref<Node>());
    EXPECT_ERROR(errc::transient_pointer, "another store", s.commit());
    n.mut()->next = nullptr;
    s.commit();
}

// A reference kept past its store's close() never reaches the objects of a
// store opened after it, even one that took the closed store's slot
// (docs/guarantees.md §9): following it is an error (a tagged id:
// invalid_argument; an address, which no check could refuse with a throw:
// the process ends saying so), and committing it into the other store is
// refused with nothing written.
TEST_P(ObjectsTest, AReferenceKeptPastCloseNeverReachesAnotherStore) {
    {
        auto a = open();
        build(a, 200);
        a.commit();
    }
    const auto slot_of = [](const auto& r) { return so::detail::header_of(r.get())->store(); };
    so::ref<List> kept_root;   // an address under every scheme (a root's object)
    so::ref<Node> kept_field;  // as the root holds it: under the id schemes a tagged id
    so::ref<Node> kept_used;   // a copy followed before the close: an address but under id
    unsigned slot = 0;
    {
        auto a = open();
        kept_root = a.find_root<List>("list");
        kept_field = kept_root->head;
        kept_used = kept_root->head;
        ASSERT_EQ(kept_used->value, 0);
        slot = slot_of(kept_root);
    }
    // Slots are taken in turn: the 255th store opened after takes the same slot.
    for (int i = 0; i < 254; ++i) so::store::open(dir.path("turn.ods"), opts()).close();
    const std::string other = dir.path("other.ods");
    {
        auto b = so::store::open(other, opts());
        build(b, 50);
        b.commit();
        ASSERT_EQ(slot_of(b.find_root<List>("list")), slot) << "the test wants the slot reused";
        const so::detection detect = so::detail::compiled_scheme.detect;
        const bool field_tagged = detect == so::detection::id || detect == so::detection::id_self_heal;
        const bool used_tagged = detect == so::detection::id;
        const char* fatal = "object store .*objects.ods: a reference followed after its store closed";
        for (const auto& kept_and_tagged : {std::pair{kept_field, field_tagged}, std::pair{kept_used, used_tagged}}) {
            const so::ref<Node> kept = kept_and_tagged.first;  // (not a structured binding: lambdas capture it)
            const bool tagged = kept_and_tagged.second;
            if (tagged)
                EXPECT_ERROR(errc::invalid_argument, "followed after its store closed", (void)kept->value);
            else
                EXPECT_EXIT(std::exit(kept->value == 0 ? 0 : 1),
                            ::testing::ExitedWithCode(steppe::common::fatal_exit_status), fatal);
            b.find_root<List>("list").mut()->head = kept;
            EXPECT_ERROR(errc::transient_pointer, "List, reference at offset 8", b.commit());
            b.rollback();
        }
        EXPECT_EXIT(std::exit(kept_root->count == 200 ? 0 : 1),
                    ::testing::ExitedWithCode(steppe::common::fatal_exit_status), fatal);
    }
    auto b = so::store::open(other, opts());
    EXPECT_TRUE(b.check().empty());
    verify(b, 50);
    auto cli = steppe::test::run_cli("check " + other);
    EXPECT_EQ(cli.exit_code, 0) << cli.out;
}

using steppe::test::ThirdThrows;

// The array goes back to the heap, as if never made: the commit finds no
// object made and not reached, and the heap reuses the memory.
TEST_P(ObjectsTest, AThrowingConstructorInMakeArrayGivesTheArrayBack) {
    auto s = open();
    build(s, 10);
    s.commit();
    const std::uint64_t unreached = s.stats().unreached_objects;
    for (int round = 0; round < 20; ++round) {
        ThirdThrows::made = 0;
        EXPECT_THROW(s.make_array<ThirdThrows>(100), std::runtime_error);
    }
    s.commit();
    EXPECT_EQ(s.stats().unreached_objects, unreached);
    EXPECT_TRUE(s.check().empty());
    verify(s, 10);
}

// A moved-from store: an error naming the call, not a crash.
TEST_P(ObjectsTest, EveryCallOnAMovedFromStoreSaysSo) {
    auto from = open();
    auto to = std::move(from);
    const auto expect = [](const char* call, const std::function<void()>& f) {
        EXPECT_ERROR(errc::invalid_argument, std::string("object store: ") + call + " on a closed store", f());
    };
    expect("make", [&] { from.make<Node>(); });
    expect("make", [&] { from.make_array<Node>(2); });
    expect("find_root", [&] { from.root<Node>("n"); });
    expect("set_root", [&] { from.set_root("n", so::ref<Node>()); });
    expect("remove_root", [&] { from.remove_root("n"); });
    expect("roots", [&] { from.roots(); });
    expect("commit", [&] { from.commit(); });
    expect("rollback", [&] { from.rollback(); });
    expect("checkpoint", [&] { from.checkpoint(); });
    expect("backup", [&] { from.backup(dir.path("b.ods")); });
    expect("refresh", [&] { from.refresh(); });
    expect("wait_for_commit", [&] { from.wait_for_commit(); });
    expect("stats", [&] { from.stats(); });
    expect("check", [&] { from.check(); });
    expect("path", [&] { from.path(); });
    expect("salvage_report", [&] { from.salvage_report(); });
    expect("find_stored_root", [&] { from.find_stored_root<Node>("n"); });
    expect("create", [&] { from.create<Node>(); });
    from.close();  // does nothing
    EXPECT_TRUE(to.check().empty());
}

TEST_P(ObjectsTest, TypesTheEngineCannotStoreAreRefused) {
    auto s = open();
    EXPECT_ERROR(errc::invalid_argument, "raw pointer", s.make<Raw>());
    s.root<Node>("n");
    EXPECT_ERROR(errc::type_mismatch, "not a", s.find_root<List>("n"));
}

TEST_P(ObjectsTest, EachEngineRefusesTheOthersStore) {
    {
        auto s = open();
        s.root<Node>("n");
        s.commit();
    }
    EXPECT_ERROR(errc::unsupported, "object engine", steppe::store::open(path));
    steppe::test::temp_dir other;
    { steppe::store::open(other.path("p.db")).root<int>("x"); }
    { auto p = steppe::store::open(other.path("p.db")); *p.root<int>("x") = 1; p.commit(); }
    EXPECT_ERROR(errc::unsupported, "page engine", so::store::open(other.path("p.db"), opts()));
}

TEST_P(ObjectsTest, AStoreRefusesAProgramBuiltForAnotherScheme) {
    { auto s = open(); s.root<Node>("n"); s.commit(); }
    so::scheme mine = so::detail::compiled_scheme;
    so::scheme other = mine;
    other.detect = mine.detect == so::detection::id ? so::detection::fault_block : so::detection::id;
    EXPECT_ERROR(errc::unsupported, "STEPPE_OBJECTS_DETECTION", so::store::open(path, opts(), other));
}

TEST_P(ObjectsTest, ADamagedSegmentIsAnErrorAtTheDereferenceAndInCheck) {
    {
        auto s = open();
        build(s, 100);
        s.commit();
    }
    bool damaged = false;
    ASSERT_TRUE(patch_segments([&](std::byte* page) {
        if (damaged) return false;
        std::uint16_t objects = 200;  // more than the segment holds
        std::memcpy(page + 4, &objects, 2);
        return damaged = true;
    }));
    auto cli = steppe::test::run_cli("check " + path);
    EXPECT_EQ(cli.exit_code, 1) << cli.out;
    EXPECT_CONTAINS(cli.out, "segment at page");
    auto s = open();
    auto findings = s.check();
    ASSERT_FALSE(findings.empty());
    EXPECT_NE(findings[0].find("segment at page"), std::string::npos) << findings[0];
    EXPECT_THROW(verify(s, 100), steppe::error);
}

// An array's count lowered by one, its checksums made to match (a tester's
// crafted store): the program read a shorter array, compaction dropped the
// last element, and check said 0 findings. Where the shorter array ends on
// another 16-byte boundary, every later object is off its place and each
// read of the segment is refused (O6); where it does not, its last element
// is left in the padding, which check names (O5). Compaction refuses both.
TEST_P(ObjectsTest, AnArrayWhoseCountWasLoweredIsRefusedOrNamedByCheck) {
    for (std::int64_t n : {99, 100}) {  // 792 bytes of references, then 784; 800, then 792
        SCOPED_TRACE("an index of " + std::to_string(n));
        path = dir.path("lowered-" + std::to_string(n) + ".ods");
        {
            auto s = open();
            build(s, n);
            s.commit();
        }
        ASSERT_TRUE(patch_segments([&](std::byte* page) {
            so::format::segment_header head;
            std::memcpy(&head, page, sizeof head);
            for (std::uint32_t slot = 0; slot < head.objects; ++slot) {
                std::byte* entry = page + sizeof head + slot * sizeof(so::format::object_entry);
                std::uint32_t count;
                std::memcpy(&count, entry + offsetof(so::format::object_entry, count), sizeof count);
                if (count != static_cast<std::uint32_t>(n)) continue;
                --count;
                std::memcpy(entry + offsetof(so::format::object_entry, count), &count, sizeof count);
                return true;
            }
            return false;
        }));
        const bool packed_elsewhere = n == 99;
        const auto checked = steppe::test::run_cli("check " + path);
        EXPECT_EQ(checked.exit_code, 1) << checked.out;
        EXPECT_CONTAINS(checked.out, packed_elsewhere ? "(invariant O6)" : "in the padding after object");
        const auto compacted = steppe::test::run_cli("compact " + path);
        EXPECT_NE(compacted.exit_code, 0) << compacted.out;
        EXPECT_CONTAINS(compacted.out, packed_elsewhere ? "(read for compaction) is damaged" : "refused");
        EXPECT_EQ(steppe::test::run_cli("check " + path).out, checked.out) << "the same store, the same damage";
        if (!packed_elsewhere) continue;  // the read is the shorter array: only check can tell
        // An error, or under page_fault in a trap the end of the process, saying why
        EXPECT_EXIT(
            {
                try {
                    auto s = open();
                    verify(s, n);
                } catch (const steppe::error& e) {
                    std::fprintf(stderr, "%s\n", e.what());
                    std::_Exit(steppe::common::fatal_exit_status);
                }
                std::exit(0);
            },
            ::testing::ExitedWithCode(steppe::common::fatal_exit_status), "invariant O6");
    }
}

// Under page_fault the residency check is a load that traps, and an
// exception cannot leave a trapped load: a fault that fails there (here a
// damaged segment reached through the list, not through the root) ends the
// process with the error's message, as a page-engine fault does. A program
// that reads damaged stores and must go on uses another scheme.
TEST_P(ObjectsTest, UnderPageFaultAFaultThatFailsInATrapEndsTheProcessSayingWhy) {
    if (so::detail::compiled_scheme.detect != so::detection::page_fault) GTEST_SKIP() << "page_fault only";
    {
        auto s = open();
        build(s, 1000);
        s.commit();
    }
    int segments = 0, seen = 0;
    patch_segments([&](std::byte*) { return ++segments, false; });
    ASSERT_GE(segments, 4);
    ASSERT_TRUE(patch_segments([&](std::byte* page) {
        if (++seen != segments) return false;  // the last: the walk reaches it through references only
        std::uint16_t objects = 300;
        std::memcpy(page + 4, &objects, 2);
        return true;
    }));
    EXPECT_EXIT(
        {
            auto s = open();
            verify(s, 1000);
            std::exit(0);
        },
        ::testing::ExitedWithCode(steppe::common::fatal_exit_status),
        "object store .*objects.ods: a reference led to an object that could not be read in.*segment at page "
        "[0-9]+ \\(read for a (reference|physical segment)\\) is damaged");
}

// Many traps, each served: every stored reference traps once at most (its
// slot is patched when its object comes in, or by the trap), so a second
// walk takes no trap at all.
TEST_P(ObjectsTest, UnderPageFaultEachStoredReferenceTrapsOnceAtMost) {
    if (so::detail::compiled_scheme.detect != so::detection::page_fault) GTEST_SKIP() << "page_fault only";
    {
        auto s = open();
        build(s, 3000);
        s.commit();
    }
    auto s = open();
    verify(s, 3000);
    so::stats first = s.stats();
    EXPECT_GT(first.traps, 0u) << so::to_string(first);
    EXPECT_LE(first.traps, first.refs_swizzled + 1) << so::to_string(first);
    verify(s, 3000);
    EXPECT_EQ(s.stats().traps, first.traps) << so::to_string(s.stats());
    EXPECT_TRUE(s.check().empty());
}

// A forked child cannot use its parent's store (docs/objects.md); under
// page_fault its first trap says so and ends it, instead of waiting for a
// service thread it does not have.
TEST_P(ObjectsTest, UnderPageFaultAForkedChildsTrapEndsItSayingWhy) {
    if (so::detail::compiled_scheme.detect != so::detection::page_fault) GTEST_SKIP() << "page_fault only";
    {
        auto s = open();
        build(s, 500);
        s.commit();
    }
    auto s = open();
    auto list = s.find_root<List>("list");
    ASSERT_EQ(list->count, 500);
    EXPECT_EXIT(
        {
            std::int64_t sum = 0;
            for (so::ref<Node> p = list->head; p; p = p->next) sum += p->value;
            std::exit(sum == 0 ? 2 : 0);
        },
        ::testing::ExitedWithCode(steppe::common::fatal_exit_status),
        "touched in a child forked from the process that opened the store");
    verify(s, 500);  // the parent goes on
}

// Children forked while traps are being served can allocate: the fork
// handlers keep each store's service thread between traps, so no child
// inherits a lock it took inside one (with an allocator that has no fork
// handlers, as GCC 12's AddressSanitizer's, the child's first allocation
// would wait forever). Only the store's threads allocate while the children
// are forked: the walking thread waits in its traps.
TEST_P(ObjectsTest, UnderPageFaultChildrenForkedWhileTrapsAreServedCanAllocate) {
    if (so::detail::compiled_scheme.detect != so::detection::page_fault) GTEST_SKIP() << "page_fault only";
    if (fetch() != so::granularity::logical_segment || std::get<1>(GetParam()) != so::placement::copy)
        GTEST_SKIP() << "the fork handlers do not depend on how objects are fetched: one way shows them";
    constexpr int store_count = 4;
    constexpr std::int64_t nodes = 4000;
    so::options one_per_segment = opts();
    one_per_segment.segment_objects = 1;  // a trap for every object
    for (int t = 0; t < store_count; ++t) {
        auto s = so::store::open(dir.path("f" + std::to_string(t) + ".ods"), one_per_segment);
        build(s, nodes);
        s.commit();
    }
    std::vector<so::store> stores;
    std::vector<so::ref<Node>> heads;
    for (int t = 0; t < store_count; ++t) {
        stores.push_back(so::store::open(dir.path("f" + std::to_string(t) + ".ods"), opts()));
        heads.push_back(stores.back().find_root<List>("list")->head);
    }
    std::atomic<std::int64_t> walked{0};
    std::atomic<bool> done{false};
    std::thread walker([&] {
        for (const so::ref<Node>& head : heads)
            for (so::ref<Node> p = head; p; p = p->next) walked.fetch_add(1, std::memory_order_relaxed);
        done = true;
    });
    const steppe::test::forked_children children = steppe::test::fork_allocating_children(40);
    const bool forked_while_walking = !done;
    walker.join();
    EXPECT_EQ(children.hung, 0) << "children that never finished allocating";
    EXPECT_EQ(children.failed, 0);
    EXPECT_EQ(walked.load(), store_count * nodes);
    EXPECT_TRUE(forked_while_walking) << "the walk ended before the children were forked: the test shows nothing";
    for (auto& s : stores) EXPECT_EQ(s.stats().traps, static_cast<std::uint64_t>(nodes)) << so::to_string(s.stats());
}

// A reader (a process of its own: one process opens a store once) keeps
// its snapshot while the writer commits, and refresh moves it to the
// newest commit; a store open for writing cannot refresh.
TEST_P(ObjectsTest, AReaderSeesItsSnapshotUntilItRefreshes) {
    auto writer = open();
    build(writer, 200);
    writer.commit();
    steppe::test::child reader([&](steppe::test::child& self) {
        auto r = open_reader();
        const bool before = r.find_root<List>("list")->count == 200;
        self.report_and_wait();  // the writer has committed
        const bool kept = r.find_root<List>("list")->count == 200;
        r.refresh();
        const bool moved = r.find_root<List>("list")->count == 7;
        return before && kept && moved && r.check().empty() ? 0 : 2 + !before + 2 * !kept + 4 * !moved;
    });
    ASSERT_TRUE(reader.wait_for_report()) << "the reader did not open (see its message above)";
    writer.find_root<List>("list").mut()->count = 7;
    writer.commit();
    reader.go();
    const int rc = reader.exit_code();
    EXPECT_EQ(rc, 0) << "(99: an error, see stderr; 2 +1: its first read, +2: the snapshot changed under it, +4: "
                        "refresh did not move it; 128+: a signal)";
    EXPECT_ERROR(steppe::errc::invalid_argument, "read-only", writer.refresh());
}

// A forked child cannot change its parent's store: its commit and checkpoint
// are refused, and its close (which would checkpoint) leaves the store alone;
// the parent's store holds the parent's commits only.
TEST_P(ObjectsTest, AForkedChildCannotCommitToItsParentsStore) {
    auto s = open();
    build(s, 100);
    s.commit();
    auto list = s.find_root<List>("list");
    std::fflush(nullptr);
    pid_t child = ::fork();
    if (child == 0) {
        int rc = 0;
        // Its own memory; under the pages barrier the heap is a vm arena,
        // which a child may not touch at all (it would end with exit 71).
        if (so::detail::compiled_scheme.write != so::barrier::pages) list.mut()->count = -1;
        try {
            s.commit();
            rc |= 1;
        } catch (const steppe::error& e) {
            if (std::string(e.what()).find("forked") == std::string::npos) rc |= 2;
        }
        try {
            s.checkpoint();
            rc |= 4;
        } catch (const steppe::error&) {
        }
        s.close();
        ::_exit(rc);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the child committed, 2: the refusal did not say why, 4: it checkpointed";
    EXPECT_EQ(list->count, 100);
    s.commit();
    s.close();
    auto again = open();
    verify(again, 100);
    EXPECT_TRUE(again.check().empty());
}

// A child forked from a reader leaves the reader's snapshot alone, whether
// it closes the store, refreshes it (refused, saying "forked") or lets it
// go out of scope: the writer's checkpoint still waits for the reader, and
// the reader reads its snapshot whole. A child's close let go of the
// reader's slot, and the checkpoint overwrote pages of the parent's
// snapshot ("fails its checksum"; a tester's finding).
TEST_P(ObjectsTest, AChildForkedFromAReaderLeavesItsSnapshotAlone) {
    {
        auto s = open();
        build(s, 400);
        s.commit();
    }
    steppe::test::child reader([&](steppe::test::child& self) {
        auto r = open_reader();
        auto list = r.find_root<List>("list");  // the nodes stay in the store until the walk below
        const std::string said = steppe::test::in_child([&] {
            std::string refresh = "refresh went through";
            try {
                r.refresh();
            } catch (const steppe::error& e) {
                refresh = e.code() == errc::invalid_argument ? e.what() : "refresh threw another error";
            }
            r.close();
            return refresh;
        });
        const std::string scoped = steppe::test::in_child([&] {
            so::store gone = std::move(r);
            return std::string("destroyed");
        });
        if (said.find("forked") == std::string::npos || scoped != "destroyed") {
            std::fprintf(stderr, "the reader's children said: %s; %s\n", said.c_str(), scoped.c_str());
            return 3;
        }
        self.report_and_wait();  // the writer committed and tried to checkpoint
        std::int64_t i = 0;
        for (so::ref<Node> p = list->head; p; p = p->next, ++i)
            if (p->value != i) return 1;
        return i == 400 && r.check().empty() ? 0 : 2;
    });
    ASSERT_TRUE(reader.wait_for_report()) << "the reader did not open, or its children failed (see above)";
    auto w = open();
    for (so::ref<Node> p = w.find_root<List>("list")->head; p; p = p->next) p.mut()->value += 1000;
    w.commit();
    EXPECT_ERROR(errc::locked, "reader process " + std::to_string(reader.pid()), w.checkpoint());
    reader.go();
    EXPECT_EQ(reader.exit_code(), 0) << "1: the reader read another commit's value, 2: its walk or check found "
                                        "the snapshot changed, 3: its children (above), 99: an error (above)";
}

// A writer's close while a reader in another process holds an older
// snapshot leaves the commits in the log, quietly, as the page engine's
// does (checkpoint_on_close, "as steppe::open_options"): it threw locked
// ("no checkpoint: reader process N reads commit 1"), and the destructor
// printed that (a tester's finding). The next open without the reader
// checkpoints them.
TEST_P(ObjectsTest, AWritersCloseLeavesItsCommitsInTheLogForAReaderBehind) {
    {
        auto s = open();
        build(s, 100);
        s.commit();
    }
    steppe::test::child reader([&](steppe::test::child& self) {
        auto r = open_reader();
        self.report_and_wait();  // the writer committed and closed
        return r.find_root<List>("list")->count == 100 ? 0 : 1;
    });
    ASSERT_TRUE(reader.wait_for_report()) << "the reader did not open (see its message above)";
    auto w = open();
    w.find_root<List>("list").mut()->count = 7;
    w.commit();
    EXPECT_NO_THROW(w.close());
    reader.go();
    EXPECT_EQ(reader.exit_code(), 0) << "1: the reader's snapshot changed under it; 99: an error (above)";
    steppe::storage::options look;
    look.read_only = true;  // a writable open would checkpoint
    auto files = steppe::storage::storage::open(path, look);
    EXPECT_GE(files->describe().wal_commits, 1u) << "the close checkpointed over the reader's snapshot";
    files.reset();
    auto again = open();
    EXPECT_EQ(again.find_root<List>("list")->count, 7);
    EXPECT_TRUE(again.check().empty());
}

// Threads on stores of their own trap at once: each trap is served by its
// store's service thread, and every walk reads its own graph.
TEST_P(ObjectsTest, UnderPageFaultThreadsOnTheirOwnStoresTrapAtOnce) {
    if (so::detail::compiled_scheme.detect != so::detection::page_fault) GTEST_SKIP() << "page_fault only";
    constexpr int threads = 4;
    for (int t = 0; t < threads; ++t) {
        auto s = so::store::open(dir.path("t" + std::to_string(t) + ".ods"), opts());
        build(s, 600 + t);
        s.commit();
    }
    std::vector<std::thread> walkers;
    std::atomic<int> good{0};
    for (int t = 0; t < threads; ++t)
        walkers.emplace_back([&, t] {
            auto s = so::store::open(dir.path("t" + std::to_string(t) + ".ods"), opts());
            auto list = s.find_root<List>("list");
            std::int64_t i = 0;
            bool ok = true;
            for (so::ref<Node> p = list->head; p; p = p->next, ++i)
                ok = ok && p->value == i && p->other->value == (i * 7) % (600 + t);
            if (ok && i == 600 + t && s.stats().traps > 0) ++good;
        });
    for (auto& w : walkers) w.join();
    EXPECT_EQ(good.load(), threads);
}

// Moss 1990's eager conversion: the first dereference brings in everything
// the object reaches, so the walk after it faults nothing.
TEST_P(ObjectsTest, EagerConversionBringsInTheWholeCollectionAtTheFirstFault) {
    {
        auto s = open();
        build(s, 2000);
        s.commit();
    }
    so::options o = opts();
    o.convert = so::conversion::eager;
    auto s = so::store::open(path, o);
    EXPECT_EQ(s.find_root<List>("list")->count, 2000);
    so::stats first = s.stats();
    EXPECT_EQ(first.objects_faulted, 2002u) << so::to_string(first);  // the list, the index, 2,000 nodes
    verify(s, 2000);
    EXPECT_EQ(s.stats().segment_faults, first.segment_faults) << so::to_string(s.stats());
    EXPECT_TRUE(s.check().empty());
}

// Hosking 1995's eager swizzling: when an object comes in, every slot that
// was swizzled to its stand-in gets its address; the store's bytes do not
// change, and a lazy reopen reads the same graph.
TEST_P(ObjectsTest, EagerSwizzlingRepointsStoredSlotsAndChangesNothingStored) {
    if (so::detail::compiled_scheme.detect == so::detection::id_self_heal) GTEST_SKIP() << "not for id_self_heal";
    {
        auto s = open();
        build(s, 2000);
        s.commit();
    }
    {
        so::options o = opts();
        o.swizzle = so::swizzling::eager;
        auto s = so::store::open(path, o);
        verify(s, 2000);
        so::stats st = s.stats();
        EXPECT_GT(st.refs_repointed, 0u) << so::to_string(st);
        EXPECT_NE(st.scheme.find("swizzling eager"), std::string::npos) << st.scheme;
        auto list = s.find_root<List>("list");
        list.mut()->count = 2000;  // a write: the commit unswizzles re-pointed slots
        s.commit();
        EXPECT_TRUE(s.check().empty());
    }
    so::options o = opts();
    o.swizzle = so::detail::compiled_scheme.detect == so::detection::id ? so::swizzling::lazy
                                                                         : so::swizzling::opportunistic;
    auto s = so::store::open(path, o);
    verify(s, 2000);
    EXPECT_EQ(s.stats().refs_repointed, 0u);
}

TEST_P(ObjectsTest, ASwizzlingTheSchemeCannotDoIsRefused) {
    {
        auto s = open();
        build(s, 10);
        s.commit();
    }
    so::options o = opts();
    o.swizzle = so::detail::compiled_scheme.detect == so::detection::id_self_heal ? so::swizzling::eager
                                                                                  : so::swizzling::lazy;
    if (so::detail::compiled_scheme.detect == so::detection::id) o.swizzle = so::swizzling::scheme_default;
    if (o.swizzle == so::swizzling::scheme_default) GTEST_SKIP() << "id does every swizzling";
    EXPECT_ERROR(steppe::errc::invalid_argument, "does not go with detection", so::store::open(path, o));
}

// fetch, place and convert outside their enumerators opened and worked as
// whatever the engine's comparisons made of them; they are refused at open,
// before any file is made, as the other options are.
TEST_P(ObjectsTest, AFetchPlacementOrConversionOutsideItsEnumeratorsIsRefused) {
    const struct {
        void (*set)(so::options&);
        const char* says;
    } modes[] = {
        {[](so::options& o) { o.fetch = static_cast<so::granularity>(0); }, "fetch 0 is none of object, "},
        {[](so::options& o) { o.fetch = static_cast<so::granularity>(9); }, "fetch 9 is none of object, "},
        {[](so::options& o) { o.place = static_cast<so::placement>(0); }, "place 0 is none of copy, "},
        {[](so::options& o) { o.place = static_cast<so::placement>(9); }, "place 9 is none of copy, "},
        {[](so::options& o) { o.convert = static_cast<so::conversion>(0); }, "convert 0 is none of lazy, eager"},
        {[](so::options& o) { o.convert = static_cast<so::conversion>(9); }, "convert 9 is none of lazy, eager"},
    };
    for (const auto& mode : modes) {
        so::options o = opts();
        mode.set(o);
        EXPECT_ERROR(steppe::errc::invalid_argument, path + ": " + mode.says, so::store::open(path, o));
        EXPECT_FALSE(std::filesystem::exists(path)) << mode.says << ": the refused open made the store";
    }
}

// Invariant T1: a reference a crafted segment aims at an object of another
// type (here a 1-byte Tiny where a 24-byte Node belongs) is damage, found
// before a Node is read, whatever is resident; the failed fault leaves the
// store as it was. (The whole segment holding the bad reference is refused,
// as a page engine refuses a damaged page.)
TEST_P(ObjectsTest, AReferenceToAnObjectOfAnotherTypeIsDamageNotAMisread) {
    {
        auto s = open();
        s.root<Tiny>("tiny").mut()->v = 7;  // catalog index 0
        auto n = s.root<Node>("n");         // 1
        so::ref<Node> chain;
        for (int i = 0; i < 3; ++i) chain = s.make<Node>(i, chain, so::ref<Node>());
        n.mut()->next = chain;
        s.commit();
    }
    std::uint64_t tiny = 0;
    patch_segments([&](std::byte* page) {
        so::format::segment_header h;
        std::memcpy(&h, page, sizeof h);
        for (std::uint32_t i = 0; i < h.objects; ++i) {
            so::format::object_entry e;
            std::memcpy(&e, page + sizeof h + i * sizeof e, sizeof e);
            if (e.type == 0) tiny = so::format::make_oid(h.first_page, i);
        }
        return false;
    });
    ASSERT_NE(tiny, 0u);
    int patched = 0;
    ASSERT_TRUE(patch_segments([&](std::byte* page) {
        so::format::segment_header h;
        std::memcpy(&h, page, sizeof h);
        bool changed = false;
        for (std::uint32_t i = 0; i < h.objects; ++i) {
            so::format::object_entry e;
            std::memcpy(&e, page + sizeof h + i * sizeof e, sizeof e);
            std::uint64_t next;
            std::memcpy(&next, page + e.offset + offsetof(Node, next), sizeof next);
            if (e.type != 1 || next == 0 || e.offset + sizeof(Node) > steppe::storage::page_size) continue;
            std::memcpy(page + e.offset + offsetof(Node, next), &tiny, sizeof tiny);
            changed = true;
            ++patched;
        }
        return changed;
    }));
    ASSERT_GT(patched, 0);
    auto cli = steppe::test::run_cli("check " + path);
    EXPECT_EQ(cli.exit_code, 1) << cli.out;
    EXPECT_CONTAINS(cli.out, "O2:");
    EXPECT_CONTAINS(cli.out, "Tiny, but the field refers to");
    auto s = open();
    bool by_object = fetch() == so::granularity::object;
    if (by_object) {
        EXPECT_EQ(s.find_root<Tiny>("tiny")->v, 7);  // resident before the bad reference is met
    }
    auto walk = [&] {
        std::int64_t sum = 0;
        for (so::ref<Node> p = s.find_root<Node>("n"); p; p = p->next) sum += p->value;
        return sum;
    };
    EXPECT_ERROR(errc::corrupt, "Tiny", walk());
    EXPECT_ERROR(errc::corrupt, "Tiny", walk());  // the same answer again, nothing half-done
    if (by_object) {
        EXPECT_EQ(s.find_root<Tiny>("tiny")->v, 7);
    }
    for (const std::string& f : s.check()) EXPECT_NE(f.find("O2:"), std::string::npos) << f;
}

// T1 for roots: the roots table says what a root is; a crafted object table
// that calls the root's object something else is damage under every scheme
// (the id schemes keep no fault block to remember the root's type in).
TEST_P(ObjectsTest, ARootWhoseObjectIsOfAnotherTypeIsDamage) {
    {
        auto s = open();
        s.root<Tiny>("tiny").mut()->v = 7;  // catalog index 0
        s.root<Node>("n").mut()->value = 5; // 1
        s.root<List>("list");               // 2, of a Node's size: the segment stays packed (O6)
        s.commit();
    }
    int patched = 0;
    ASSERT_TRUE(patch_segments([&](std::byte* page) {
        so::format::segment_header h;
        std::memcpy(&h, page, sizeof h);
        bool changed = false;
        for (std::uint32_t i = 0; i < h.objects; ++i) {
            so::format::object_entry e;
            std::memcpy(&e, page + sizeof h + i * sizeof e, sizeof e);
            if (e.type != 1) continue;
            e.type = 2;  // the Node's bytes, called a List
            std::memcpy(page + sizeof h + i * sizeof e, &e, sizeof e);
            changed = true;
            ++patched;
        }
        return changed;
    }));
    ASSERT_EQ(patched, 1);
    auto cli = steppe::test::run_cli("check " + path);
    EXPECT_EQ(cli.exit_code, 1) << cli.out;
    EXPECT_CONTAINS(cli.out, "O3:");
    auto s = open();
    EXPECT_ERROR(errc::corrupt, "List", s.find_root<Node>("n")->value);
    EXPECT_ERROR(errc::corrupt, "List", s.find_root<Node>("n")->value);
}

// T1 across types: a program whose Node changed cannot reach stored Nodes
// through a root of another type either.
struct Holder {
    so::ref<Node> node;
};
namespace changed {
struct Node {
    std::int64_t value;
    so::ref<Node> next;
    so::ref<Node> other;
    std::int64_t added;
};
struct Holder {
    so::ref<Node> node;
};
}  // namespace changed

TEST_P(ObjectsTest, ATypeAReferenceLeadsToIsComparedBeforeItIsRead) {
    {
        auto s = open();
        s.root<Holder>("h").mut()->node = s.make<Node>(1, so::ref<Node>(), so::ref<Node>());
        s.commit();
    }
    // The same names, Node one field longer: a different program's types.
    std::string holder = steppe::types::layout_of<Holder>().name, node = steppe::types::layout_of<Node>().name;
    steppe::types::layout h = steppe::types::layout_of<changed::Holder>();
    ASSERT_EQ(h.ref_targets.size(), 1u);
    EXPECT_NE(h.ref_targets[0].type, node);  // the namespaces differ; the test renames below
    auto s = open();
    auto* engine = so::detail::store_access::engine(s);
    steppe::types::layout renamed_node = steppe::types::layout_of<changed::Node>();
    renamed_node.name = node;
    static steppe::types::layout stored_node_name;
    stored_node_name = renamed_node;
    h.name = holder;
    h.ref_targets[0] = {node, {[]() -> const steppe::types::layout& { return stored_node_name; }}};
    h.fingerprint = steppe::types::fingerprint(h);
    EXPECT_ERROR(errc::type_mismatch, "reached by", engine->find_root("h", h));
    EXPECT_ERROR(errc::type_mismatch, "size 24 in store, 32 in program", engine->find_root("h", h));
}

TEST_P(ObjectsTest, TheCommandLineToolReadsObjectStores) {
    {
        auto s = open();
        build(s, 100);
        s.commit();
    }
    auto info = steppe::test::run_cli("info " + path);
    EXPECT_EQ(info.exit_code, 0) << info.out;
    EXPECT_CONTAINS(info.out, "engine       objects: ");
    EXPECT_CONTAINS(info.out, "102 objects");
    auto check = steppe::test::run_cli("check " + path);
    EXPECT_EQ(check.exit_code, 0) << check.out;
    EXPECT_CONTAINS(check.out, "0 findings");
    auto roots = steppe::test::run_cli("roots " + path);
    EXPECT_CONTAINS(roots.out, "list");
    auto stats = steppe::test::run_cli("stats " + path);
    EXPECT_CONTAINS(stats.out, "Node");
    EXPECT_CONTAINS(stats.out, "100");
    EXPECT_EQ(steppe::test::run_cli("checkpoint " + path).exit_code, 0);
}

TEST_P(ObjectsTest, ASmallBudgetEvictsAtSafePointsAndEverythingComesBack) {
    {
        auto s = open();
        build(s, 5000);
        s.commit();
    }
    so::options o = opts();
    o.resident_budget = 32 << 10;
    auto s = so::store::open(path, o);
    for (int round = 0; round < 3; ++round) {
        verify(s, 5000);
        auto list = s.find_root<List>("list");
        so::ref<Node> p = list->head;
        for (int i = 0; i < 100 * round; ++i) p = p->next;
        p.mut()->value = p->value;  // a write (same value) so the commit has work
        s.commit();  // a safe point
        auto st = s.stats();
        auto findings = s.check();
        ASSERT_TRUE(findings.empty()) << findings[0];
        if (so::detail::compiled_scheme.detect == so::detection::id_self_heal ||
            so::detail::compiled_scheme.detect == so::detection::page_fault) {
            EXPECT_EQ(st.evicted_objects, 0u);  // their direct slots cannot be re-pointed
        } else if (round > 0) {
            EXPECT_GT(st.evicted_objects, 0u);
            EXPECT_LE(st.resident_bytes, 2 * o.resident_budget + (64 << 10)) << so::to_string(st);
        }
    }
    verify(s, 5000);
    s.rollback();  // a safe point too
    verify(s, 5000);
    EXPECT_TRUE(s.check().empty());
}

TEST_P(ObjectsTest, ThePagesBarrierSeesWritesMadeWithoutMut) {
    if (so::detail::compiled_scheme.write != so::barrier::pages) GTEST_SKIP() << "only write protection sees these";
    {
        auto s = open();
        build(s, 200);
        s.commit();
        s.close();
    }
    {
        auto s = open();
        so::ref<Node> p = s.find_root<List>("list")->head->next;
        const_cast<Node*>(p.get())->value = 4242;  // no barrier call at all
        s.commit();
    }
    auto s = open();
    EXPECT_EQ(s.find_root<List>("list")->head->next->value, 4242);
    EXPECT_EQ(s.stats().scheme.find("pages ("), s.stats().scheme.find("pages"));
}

INSTANTIATE_TEST_SUITE_P(
    Fetch, ObjectsTest,
    ::testing::Values(fetch_and_place{so::granularity::logical_segment, so::placement::copy},
                      fetch_and_place{so::granularity::object, so::placement::copy},
                      fetch_and_place{so::granularity::physical_segment, so::placement::copy},
                      fetch_and_place{so::granularity::logical_segment, so::placement::in_place},
                      fetch_and_place{so::granularity::physical_segment, so::placement::in_place}),
    [](const auto& info) {
        return std::string(so::to_string(std::get<0>(info.param))) + "_" + so::to_string(std::get<1>(info.param));
    });

}  // namespace
