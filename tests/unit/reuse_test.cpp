// Address-space reuse: stores many times open_options::address_space_limit
// are built and walked in chunks with commit() or rollback() between them, so
// the reserved address space is reclaimed and handed out again many times;
// pointers in the store and pointers the program keeps to pages it touches
// stay right throughout. Without a commit or rollback the walk ends with a
// message saying what to do.
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "support/store_fixture.hpp"

namespace reuse {
struct Node {
    long value;
    Node* next;   // the node made before this one
    Node* skip;   // the first node of the previous chunk
    long payload[29];  // 256 bytes: 16 nodes per page
};
struct Hub {
    Node* target;
};
}  // namespace reuse

using reuse::Hub;
using reuse::Node;

namespace {

constexpr std::uint64_t kLimit = std::uint64_t{4} << 20;  // the smallest limit: 64 arenas of 16 pages
constexpr long kPerPage = 4096 / sizeof(Node);
constexpr long kChunk = 32 * kPerPage;                    // nodes made or walked per transaction
constexpr long kNodes = 10 * kLimit / 4096 * kPerPage;    // a store of 10x the limit

long payload_word(long value, int i, long version) { return value * 31 + i + version * 1'000'000'007L; }

class ReuseTest : public steppe::test::store_fixture {
protected:
    steppe::store open_limited(const std::function<void(steppe::open_options&)>& adjust = {}) const {
        return store_fixture::open([&](steppe::open_options& o) {
            o.address_space_limit = kLimit;
            if (adjust) adjust(o);
        });
    }

    // The list "list" of kNodes nodes, newest first, made kChunk per commit
    // under the limit: building it needs reuse already.
    void build() const {
        auto s = open_limited();
        Node** head = s.root<Node*>("list");
        Node *first = nullptr, *previous_first = nullptr;  // of this chunk and the one before
        for (long i = 0; i < kNodes; ++i) {
            if (i % kChunk == 0) previous_first = std::exchange(first, nullptr);
            Node* n = s.make<Node>();
            n->value = i;
            n->next = *head;
            n->skip = previous_first;
            for (int w = 0; w < 29; ++w) n->payload[w] = payload_word(i, w, 0);
            *head = n;
            if (!first) first = n;
            if (i % kChunk == kChunk - 1) s.commit();
        }
        s.commit();
        EXPECT_GT(s.stats().reuse_rounds, 3u) << "making 10x the limit needs reuse";
    }
};

// Checks node n, which should hold `value`, at data version `version`.
::testing::AssertionResult node_is(const Node* n, long value, long version) {
    if (!n) return ::testing::AssertionFailure() << "node " << value << " is missing";
    if (n->value != value) return ::testing::AssertionFailure() << "node " << value << " holds " << n->value;
    for (int w = 0; w < 29; ++w)
        if (n->payload[w] != payload_word(value, w, version))
            return ::testing::AssertionFailure() << "node " << value << " word " << w << " is " << n->payload[w];
    long chunk = value / kChunk;
    long skip = chunk == 0 ? -1 : (chunk - 1) * kChunk;
    if ((n->skip ? n->skip->value : -1) != skip)
        return ::testing::AssertionFailure() << "node " << value << ": skip leads to "
                                             << (n->skip ? n->skip->value : -1) << ", not " << skip;
    return ::testing::AssertionSuccess();
}

// Walks the whole list, kChunk nodes per transaction, ending each with
// `between` (commit or rollback); `visit` may change the node. Returns the
// nodes seen.
long walk(steppe::store& s, long version, const std::function<void(Node*)>& visit,
          const std::function<void()>& between) {
    long expect = kNodes - 1, seen = 0;
    for (Node* n = *s.find_root<Node*>("list"); n;) {
        for (long k = 0; n && k < kChunk; ++k, n = n->next, --expect, ++seen) {
            EXPECT_TRUE(node_is(n, expect, version));
            if (::testing::Test::HasFailure()) return seen;
            visit(n);
        }
        between();  // n was named by a page touched in this transaction: it stays valid
    }
    return seen;
}

void expect_address_space_reused(const steppe::store& s, const char* what) {
    auto st = s.stats();
    EXPECT_EQ(st.address_space_limit, kLimit);
    EXPECT_GE(st.reuse_rounds, 5u) << what;
    EXPECT_GE(st.reclaimed_arenas, 20u) << what;
    EXPECT_GE(st.reclaimed_pages, 8 * kLimit / 4096) << what << ": most of the walk's address space came back";
    EXPECT_LE(st.reserved_virtual_pages, kLimit / 4096);
    EXPECT_GE(st.faults, static_cast<std::uint64_t>(kNodes / kPerPage)) << "every page was loaded";
}

TEST_P(ReuseTest, StoreTenTimesTheLimitIsWalkedWithCommitsBetweenChunks) {
    build();
    {
        auto s = open_limited();
        EXPECT_EQ(walk(s, 0, [](Node*) {}, [&] { s.commit(); }), kNodes);
        expect_address_space_reused(s, "walk with commits");
    }
    in_fresh_process([](steppe::store& s) { EXPECT_TRUE(s.check().empty()); });
}

// A reader cannot commit, but rollback() ends its transaction just as well.
TEST_P(ReuseTest, ReadOnlyWalkWithRollbacksReusesAddressSpace) {
    build();
    auto s = open_limited([](steppe::open_options& o) { o.read_only = true; });
    EXPECT_EQ(walk(s, 0, [](Node*) {}, [&] { s.rollback(); }), kNodes);
    expect_address_space_reused(s, "walk with rollbacks");
}

TEST_P(ReuseTest, WritesAcrossReuseRoundsAreCommitted) {
    build();
    {
        auto s = open_limited();
        auto rewrite = [](Node* n) {
            for (int w = 0; w < 29; ++w) n->payload[w] = payload_word(n->value, w, 1);
        };
        EXPECT_EQ(walk(s, 0, rewrite, [&] { s.commit(); }), kNodes);
        expect_address_space_reused(s, "writing walk");
    }
    in_fresh_process([](steppe::store& s) {
        EXPECT_EQ(walk(s, 1, [](Node*) {}, [] {}), kNodes) << "every node holds what the writing walk wrote";
        EXPECT_TRUE(s.check().empty());
    });
}

// The program keeps a pointer to the newest node and touches it in every
// transaction: across every round it stays valid and where the store maps it.
TEST_P(ReuseTest, PointerToAPageTouchedInEachEpochStaysValid) {
    build();
    auto s = open_limited();
    Node* newest = *s.find_root<Node*>("list");
    long touches = 0;
    EXPECT_EQ(walk(s, 0, [](Node*) {}, [&] {
                  touches += newest->value == kNodes - 1;
                  s.commit();
              }),
              kNodes);
    EXPECT_EQ(touches, kNodes / kChunk);
    EXPECT_GE(s.stats().reuse_rounds, 5u);
    EXPECT_EQ(newest, *s.find_root<Node*>("list")) << "the same address, although the space around it was reused";
    EXPECT_TRUE(node_is(newest, kNodes - 1, 0));
}

TEST_P(ReuseTest, ExplicitRoundKeepsPointersToTouchedPagesAndRefaults) {
    build();
    auto s = open_limited();
    Node* n = *s.find_root<Node*>("list");
    Node* second = n->next;
    auto before = s.stats();
    s.reuse_address_space();
    auto after = s.stats();
    EXPECT_EQ(after.reuse_rounds, before.reuse_rounds + 1);
    EXPECT_TRUE(node_is(n, kNodes - 1, 0)) << "faulted in again at the same address";
    EXPECT_EQ(n->next, second);
    EXPECT_GT(s.stats().faults, after.faults);
    n->payload[0] = 7;
    EXPECT_THROW(
        try { s.reuse_address_space(); } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
            EXPECT_NE(std::string(e.what()).find("commit() or rollback() first"), std::string::npos) << e.what();
            throw;
        },
        steppe::error);
    s.rollback();
    s.make<Node>();
    EXPECT_THROW(s.reuse_address_space(), steppe::error) << "a made object is a change too";
    s.commit();
    s.reuse_address_space();
    EXPECT_TRUE(node_is(n, kNodes - 1, 0)) << "the rollback undid the write";
}

// Four threads walk each chunk together, racing to fault the same pages and
// reserve the same units, while arenas fill and reclaimed ones are handed
// out again; the rounds run between chunks, with the threads joined.
TEST_P(ReuseTest, ThreadsWalkingTogetherBetweenRoundsSeeEveryNode) {
    build();
    auto s = open_limited();
    // All 64 arenas (16 pages each) are made first, by one thread: TSan sees
    // the mmap of an arena as a write to all of it but not the kernel's
    // UFFDIO_COPY that fills a page later, so a thread reading a page that
    // another thread faulted into a new arena would look like a race to it.
    for (Node* n = *s.find_root<Node*>("list"); s.stats().reserved_virtual_pages <= kLimit / 4096 - 16;)
        for (long k = 0; k < kPerPage; ++k) n = n->next;  // a page reserves at most 4 virtual pages
    s.rollback();
    s.reuse_address_space();  // nothing used since the rollback's round: every arena is empty again
    Node* start = *s.find_root<Node*>("list");
    for (long first = kNodes - 1; start; first -= kChunk) {
        std::atomic<long> wrong{0};
        Node* next = nullptr;
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&, t] {
                Node* n = start;
                for (long k = 0, expect = first; n && k < kChunk; ++k, n = n->next, --expect)
                    if (!node_is(n, expect, 0)) wrong.fetch_add(1);
                if (t == 0) next = n;
            });
        for (auto& t : threads) t.join();
        ASSERT_EQ(wrong.load(), 0) << "in the chunk from node " << first;
        start = next;
        s.commit();
    }
    EXPECT_GE(s.stats().reuse_rounds, 5u);
}

// A pointer the program read from a page touched since the last round stays
// valid across the next round even if the page it names was not touched: the
// page that named it marks its address space as used. (The target was mapped
// in an earlier epoch, so only that mark keeps its arena.)
TEST_P(ReuseTest, PointerReadFromATouchedPageSurvivesARoundWithoutTouchingItsTarget) {
    constexpr long nodes = 40 * kPerPage;
    {
        auto s = open_limited();
        Node** head = s.root<Node*>("list");
        for (long i = 0; i < nodes; ++i) *head = s.make<Node>(Node{i, *head, nullptr, {}});
        Node* oldest = *head;
        while (oldest->next) oldest = oldest->next;
        s.root<Hub>("hub")->target = oldest;
        s.commit();
    }
    auto s = open_limited();
    Hub* hub = s.find_root<Hub>("hub");
    Node* n = *s.find_root<Node*>("list");
    for (long k = 0; k < 20 * kPerPage; ++k) n = n->next;  // 20 pages: their units fill a few arenas
    Node* t = hub->target;                                 // the oldest node's page is named now
    s.reuse_address_space();
    EXPECT_EQ(hub->target, t) << "the hub's page faults in again and names the same address";
    std::size_t before = steppe::persistent_hash<Node*>{}(t);
    s.reuse_address_space();
    EXPECT_GE(s.stats().reclaimed_arenas, 1u) << "an arena that holds only pages walked in the first epoch";
    EXPECT_EQ(steppe::persistent_hash<Node*>{}(t), before) << "t still names the oldest node";
    EXPECT_EQ(t->value, 0);
    EXPECT_EQ(hub->target, t);
}

// A vector's spare capacity keeps the pointers of an element destroyed in
// it. Its page faulted in again after a round, the element's pointers into
// its freed buffer (a run of pages) lead to the page that is never mapped,
// and its end of storage, one past the run, to one past that page: all are
// committed as null, as every pointer into freed store memory is (a
// tester's finding: the end was refused as transient_pointer).
TEST_P(ReuseTest, EndOfAFreedRunLeftInSpareCapacityIsCommittedAsNull) {
    using rows = steppe::vector<steppe::vector<unsigned long>>;
    {
        auto s = open();
        rows* v = s.root<rows>("rows");
        v->reserve(4);
        v->emplace_back();
        v->emplace_back();
        for (unsigned long i = 0; i < 3000; ++i) (*v)[1].push_back(i);  // a buffer of 8 pages
        s.commit();
        v->pop_back();
        s.commit();
        s.reuse_address_space();
        v = s.find_root<rows>("rows");
        (*v)[0].push_back(7);  // the page of the spare capacity is written
        ASSERT_NO_THROW(s.commit());
        EXPECT_EQ(s.check(), std::vector<std::string>{});
    }
    in_fresh_process([](steppe::store& fresh) {
        const rows* stored = fresh.find_root<rows>("rows");
        ASSERT_EQ(stored->size(), 1u);
        ASSERT_EQ((*stored)[0].size(), 1u);
        EXPECT_EQ((*stored)[0][0], 7u);
    });
}

// One long walk with no commit or rollback cannot reuse anything: the fault
// that finds the address space full ends the process and says what to do.
TEST_P(ReuseTest, WalkBeyondTheLimitWithoutCommitEndsWithAMessageSayingWhatToDo) {
    build();
    EXPECT_EXIT(
        {
            auto s = open_limited();
            long sum = 0;
            for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) sum += n->value;
            std::printf("%ld\n", sum);
        },
        ::testing::ExitedWithCode(71),
        "fatal: cannot reserve address space for page [0-9]+ of store .*s.db: all 4 MiB of its address space "
        "\\(open_options::address_space_limit\\) are reserved.*commit\\(\\) or rollback\\(\\).*"
        "larger address_space_limit");
}

// make() in one transaction beyond the limit: no_space, and after a rollback
// the store goes on.
TEST_P(ReuseTest, TransactionBeyondTheLimitIsNoSpaceAndRollbackRecovers) {
    auto s = open_limited();
    Node** head = s.root<Node*>("list");
    s.commit();
    try {
        for (long i = 0; i < kNodes; ++i) *head = s.make<Node>(Node{i, *head, nullptr, {}});
        FAIL() << "10x the limit was made in one transaction";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::no_space);
        EXPECT_NE(std::string(e.what()).find("commit() or rollback()"), std::string::npos) << e.what();
    }
    s.rollback();
    EXPECT_EQ(*head, nullptr);
    EXPECT_GE(s.stats().reuse_rounds, 1u);
    for (long i = 0; i < 4 * kChunk; ++i) {
        *head = s.make<Node>(Node{i, *head, nullptr, {}});
        if (i % kChunk == kChunk - 1) s.commit();
    }
    EXPECT_EQ((*head)->value, 4 * kChunk - 1);
}

TEST_P(ReuseTest, ObjectBiggerThanAnArenaIsNoSpaceNamingTheLimitNeeded) {
    auto s = open_limited();
    try {
        s.make_array<long>(16 * 4096 / sizeof(long));  // 16 pages + a guard: more than an arena
        FAIL() << "made";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::no_space);
        EXPECT_NE(std::string(e.what()).find("at least 5 MiB"), std::string::npos) << e.what();
    }
    long* fits = s.make_array<long>(15 * 4096 / sizeof(long));
    fits[15 * 4096 / sizeof(long) - 1] = 1;
    s.commit();
}

TEST_P(ReuseTest, LimitBelowTheSmallestIsRefused) {
    try {
        open_limited([](steppe::open_options& o) { o.address_space_limit = kLimit - 4096; });
        FAIL() << "opened";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("address_space_limit"), std::string::npos) << e.what();
    }
}

// The page map's entries are 4 bytes: arenas of at most 2^25 pages.
TEST_P(ReuseTest, LimitAboveTheLargestIsRefused) {
    try {
        open_limited([](steppe::open_options& o) { o.address_space_limit = (std::uint64_t{8} << 40) + (64 << 12); });
        FAIL() << "opened";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("is above the largest, 8388608 MiB"), std::string::npos) << e.what();
    }
    auto s = open_limited([](steppe::open_options& o) { o.address_space_limit = std::uint64_t{8} << 40; });
    long* fits = s.make<long>(7);
    EXPECT_EQ(*fits, 7);
}

STEPPE_BOTH_BACKENDS(ReuseTest);

}  // namespace
