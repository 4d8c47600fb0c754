// A page-engine store whose heap metadata was rewritten with every checksum
// valid (support/heap_damage.hpp), so that it contradicts the store's other
// metadata or its pages. Each case was a store `steppe check` passed, that
// an open served, or that the next commit destroyed (a tester's findings).
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

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
}  // namespace heap_damage_test

using heap_damage_test::Node;

namespace {

constexpr long nodes = 300;  // two pages of 16-byte chunks

void read_only(steppe::open_options& o) { o.read_only = true; }

class HeapDamage : public steppe::test::store_fixture {
protected:
    void SetUp() override {
        auto s = open();
        Node** head = s.root<Node*>("list");
        for (long i = nodes - 1; i >= 0; --i) *head = s.make<Node>(Node{i, *head});
        s.commit();
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

TEST_P(HeapDamage, UntouchedStoreChecksClean) {
    const std::vector<std::string> findings = check();
    EXPECT_TRUE(findings.empty()) << findings[0];
}

STEPPE_BOTH_BACKENDS(HeapDamage);

}  // namespace
