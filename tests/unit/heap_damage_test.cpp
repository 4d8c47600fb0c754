// A page-engine store whose heap metadata was rewritten with every checksum
// valid (support/heap_damage.hpp), so that it contradicts the store's other
// metadata or its pages. Each case was a store `steppe check` passed, that
// an open served, or that the next commit destroyed (a tester's findings).
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/heap_damage.hpp"
#include "support/store_fixture.hpp"

namespace heap_damage_test {
struct Node {
    long id;
    Node* next;
};
struct Pair {  // Node's size, no pointers
    long a;
    long b;
};
struct Point {
    double x, y;
};
struct Stats {
    long counters[8];
    std::array<Point, 4> corners;
    Point pts[3];
};
struct Named {
    virtual ~Named() = default;
    long tag = 0;
    STEPPE_FIELDS(tag)
};
struct Solid {
    virtual ~Solid() = default;
    double volume = 0;
    STEPPE_FIELDS(volume)
};
struct Cylinder : Named, Solid {
    double height = 0;
    STEPPE_BASES(Named, Solid)
    STEPPE_FIELDS(height)
};
}  // namespace heap_damage_test

using heap_damage_test::Node;
using heap_damage_test::Pair;

namespace {

constexpr long nodes = 300;  // two pages of 16-byte chunks

void read_only(steppe::open_options& o) { o.read_only = true; }

constexpr long longs = 600, fewer_longs = 520;  // both on two pages

class HeapDamage : public steppe::test::store_fixture {
protected:
    void SetUp() override {
        auto s = open();
        Node** head = s.root<Node*>("list");
        for (long i = nodes - 1; i >= 0; --i) *head = s.make<Node>(Node{i, *head});
        long* values = s.make_array<long>(longs);
        for (long i = 0; i < longs; ++i) values[i] = i + 1;
        *s.root<long*>("values") = values;
        *s.root<Pair>("pair") = Pair{7, 0};  // alone on its page
        s.commit();
    }

    // The first page of `kind` whose element size is `elem_size` (and, for
    // small pages, with `used` chunks if not 0).
    static std::uint64_t page_of(steppe::test::heap_metadata& m, std::uint8_t kind, std::uint32_t elem_size,
                                 std::uint16_t used = 0) {
        for (std::uint64_t p = 0; p < m.page_count(); ++p) {
            std::uint32_t size = 0;
            std::uint16_t chunks = 0;
            std::memcpy(&size, m.descriptor(p) + 8, sizeof size);
            std::memcpy(&chunks, m.descriptor(p) + 2, sizeof chunks);
            if (std::to_integer<std::uint8_t>(m.descriptor(p)[0]) == kind && size == elem_size &&
                (used == 0 || chunks == used))
                return p;
        }
        ADD_FAILURE() << "no page of kind " << int{kind} << " with elements of " << elem_size << " bytes";
        return 0;
    }

    std::vector<std::string> check() { return open(read_only).check(); }
};

// M1: the roots table's page marked free was handed out by the next commit,
// which overwrote the roots table; every later open failed.
TEST_P(HeapDamage, ABlobPageTheHeapCallsFreeIsRefusedAtOpen) {
    std::uint64_t page = 0;
    {
        steppe::test::heap_metadata m(path);
        page = m.meta().roots.first_page;
        std::memset(m.descriptor(page), 0, 48);
        m.commit();
    }
    const std::string what = "page " + std::to_string(page) +
                             " (page 0 of the roots table's chain, owner 2) is a free page in the heap's descriptors";
    EXPECT_ERROR(steppe::errc::corrupt, what, open());
    EXPECT_ERROR(steppe::errc::corrupt, what, open(read_only));
}

TEST_P(HeapDamage, ABlobPageOfAnotherOwnerIsRefusedAtOpen) {
    std::uint64_t page = 0;
    {
        steppe::test::heap_metadata m(path);
        page = m.meta().catalog.first_page;
        const std::uint32_t vtables_owner = 3;
        std::memcpy(m.descriptor(page) + 4, &vtables_owner, sizeof vtables_owner);
        m.commit();
    }
    EXPECT_ERROR(steppe::errc::corrupt,
                 "page " + std::to_string(page) + " (page 0 of the type catalog's chain, owner 1) is a system page "
                 "of owner 3",
                 open(read_only));
}

// The heap's root and last metadata page shortened alike: the pages past its
// end (the blobs' here) would be handed out again as the heap grows.
TEST_P(HeapDamage, AHeapShorterThanTheStorageIsRefusedAtOpen) {
    std::uint64_t count = 0;
    {
        steppe::test::heap_metadata m(path);
        count = m.page_count();
        m.shrink_to(count - 1);
        m.commit();
    }
    EXPECT_ERROR(steppe::errc::corrupt,
                 "the storage holds " + std::to_string(count) + " pages but the heap describes only " +
                     std::to_string(count - 1),
                 open(read_only));
}

// Z1: a live node's allocation bit cleared (its page's count lowered with
// it). check said 0 findings; the node read as zeros, compaction dropped it.
TEST_P(HeapDamage, ALiveChunkTheBitmapCallsFreeIsNamedByCheck) {
    std::uint64_t page = 0;
    {
        steppe::test::heap_metadata m(path);
        page = page_of(m, 1, sizeof(Node));
        std::byte* d = m.descriptor(page);
        d[16] &= std::byte{0xfd};  // chunk 1
        std::uint16_t used;
        std::memcpy(&used, d + 2, sizeof used);
        --used;
        std::memcpy(d + 2, &used, sizeof used);
        m.commit();
    }
    const std::vector<std::string> findings = check();
    ASSERT_EQ(findings.size(), 1u) << (findings.empty() ? "no findings" : findings[0]);
    EXPECT_CONTAINS(findings[0], "page " + std::to_string(page) + ": free chunk 1 holds a nonzero byte at offset 16");
}

// Z1: a large object's element count lowered within its pages: the elements
// past it were neither swizzled nor copied.
TEST_P(HeapDamage, ElementsPastALargeObjectsCountAreNamedByCheck) {
    std::uint64_t head = 0;
    {
        steppe::test::heap_metadata m(path);
        head = page_of(m, 2, sizeof(long));
        const std::uint64_t count = fewer_longs;
        std::memcpy(m.descriptor(head) + 24, &count, sizeof count);
        m.commit();
    }
    const std::vector<std::string> findings = check();
    ASSERT_EQ(findings.size(), 1u) << (findings.empty() ? "no findings" : findings[0]);
    EXPECT_CONTAINS(findings[0], "page " + std::to_string(head + 1) + ": the last page of the large object at page " +
                                     std::to_string(head) + " (520 elements of 8 bytes), past its elements, holds a "
                                     "nonzero byte at offset " + std::to_string(fewer_longs * 8 - 4096));
}

// M2: the page of the root 'pair' retyped to Node, of the same size.
// find_root<Pair> returned a Node, and check said 0 findings.
TEST_P(HeapDamage, ARootWhoseObjectIsOfAnotherTypeIsNamedByCheckAndFindRoot) {
    {
        steppe::test::heap_metadata m(path);
        std::memcpy(m.descriptor(page_of(m, 1, sizeof(Pair), 1)) + 4, m.descriptor(page_of(m, 1, sizeof(Node))) + 4, 4);
        m.commit();
    }
    const std::vector<std::string> findings = check();
    ASSERT_EQ(findings.size(), 1u) << (findings.empty() ? "no findings" : findings[0]);
    EXPECT_CONTAINS(findings[0], "root 'pair' names a heap_damage_test::Pair at ");
    EXPECT_CONTAINS(findings[0], "but the object there is a heap_damage_test::Node, which holds no "
                                 "heap_damage_test::Pair at offset 0 of its 16 bytes (M2)");
    EXPECT_ERROR(steppe::errc::corrupt, "root 'pair' names a heap_damage_test::Pair",
                 open(read_only).find_root<Pair>("pair"));
    EXPECT_ERROR(steppe::errc::corrupt, "root 'pair' names a heap_damage_test::Pair", steppe::compact(path));
}

// E1: the nodes' element size halved. check named the pointers it then read
// at the wrong offsets, but compaction carried the page as it was.
TEST_P(HeapDamage, AnElementSizeThatIsNotItsTypesIsNamedByCheckAndRefusedByCompaction) {
    std::uint64_t page = 0;
    {
        steppe::test::heap_metadata m(path);
        page = page_of(m, 1, sizeof(Node));
        const std::uint32_t half = sizeof(Node) / 2;
        std::memcpy(m.descriptor(page) + 8, &half, sizeof half);
        m.commit();
    }
    const std::string what = "page " + std::to_string(page) + ": its elements are 8 bytes, but its type "
                             "heap_damage_test::Node is 16 (E1)";
    const std::vector<std::string> findings = check();
    ASSERT_FALSE(findings.empty());
    EXPECT_CONTAINS(findings[0], what);
    EXPECT_ERROR(steppe::errc::corrupt, "compaction of " + path + " refused: " + what,
                 steppe::compact(path));
}

// E1: the pair's page moved to the 24-byte class, which no allocation of
// 16-byte elements gets. check said 0 findings; only compaction refused.
TEST_P(HeapDamage, ASizeClassNoAllocationGivesIsNamedByCheck) {
    std::uint64_t page = 0;
    {
        steppe::test::heap_metadata m(path);
        page = page_of(m, 1, sizeof(Pair), 1);
        m.descriptor(page)[1] = std::byte{1};  // class 24
        m.commit();
    }
    const std::vector<std::string> findings = check();
    ASSERT_EQ(findings.size(), 1u) << (findings.empty() ? "no findings" : findings[0]);
    EXPECT_CONTAINS(findings[0], "page " + std::to_string(page) + ": its elements of 16 bytes cannot be in its "
                                 "chunks of 24 (no allocation makes that size class for them) (E1)");
}

// M2 where the catalog cannot say what a member holds: an element of an
// array member (it keeps no element type to step by), a member of a base
// the store never made on its own. Refused by find_root, check and
// compaction when M2 came in (a tester's finding); healthy, so allowed.
TEST_P(HeapDamage, RootsToArrayElementsAndToMembersOfASecondBaseAreHealthy) {
    using namespace heap_damage_test;
    {
        auto s = open();
        Stats* stats = s.root<Stats>("stats");
        for (int i = 0; i < 8; ++i) stats->counters[i] = i;
        Cylinder* cylinder = s.make<Cylinder>();
        cylinder->volume = 4;
        s.set_root<long>("counter 3", &stats->counters[3]);
        s.set_root<Point>("corner 2", &stats->corners[2]);
        s.set_root<double>("corner 2 y", &stats->corners[2].y);
        s.set_root<Point>("point 1", &stats->pts[1]);
        s.set_root<double>("volume", &cylinder->volume);
        s.commit();
    }
    auto s = open(read_only);
    EXPECT_EQ(*s.find_root<long>("counter 3"), 3);
    EXPECT_NE(s.find_root<Point>("corner 2"), nullptr);
    EXPECT_NE(s.find_root<double>("corner 2 y"), nullptr);
    EXPECT_NE(s.find_root<Point>("point 1"), nullptr);
    EXPECT_EQ(*s.find_root<double>("volume"), 4);
    const std::vector<std::string> findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings[0];
}

TEST_P(HeapDamage, UntouchedStoreChecksClean) {
    const std::vector<std::string> findings = check();
    EXPECT_TRUE(findings.empty()) << findings[0];
}

STEPPE_BOTH_BACKENDS(HeapDamage);

}  // namespace
