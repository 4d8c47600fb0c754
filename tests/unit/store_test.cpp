// The page engine end to end through the public API: structures written in
// one process and walked in a fresh one, under both fault backends, after
// commit, after rollback and after reopening twice.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <thread>

#include "storage/storage.hpp"
#include "support/damage.hpp"
#include "support/expect_error.hpp"
#include "support/store_fixture.hpp"
#include "vm/vm.hpp"

namespace shapes {

struct Node {
    long value;
    Node* next;
};
struct DNode {
    long value;
    DNode* prev;
    DNode* next;
};
struct Tree {
    long key;
    Tree* left;
    Tree* right;
};
struct Vertex {
    int id;
    Vertex* edges[3];
};
struct Big {  // > 3 pages: a large object
    long header;
    Node* slots[2000];
};
struct Holder {
    Node** into_big;  // points into the middle of a Big
    Big* big;
};
struct Buffer {  // a std::vector-like triple
    long* begin;
    long* end;
    long* capacity;
};
struct Edge {
    long weight;
    Node* to;
};
struct Route {  // a pointer inside a member struct: named by the member
    long id;
    Edge first;
};
class Link {  // a declared class
public:
    long id = 0;
    Node* target = nullptr;
    STEPPE_FIELDS(id, target)
};

}  // namespace shapes

using namespace shapes;

namespace {

class StoreTest : public steppe::test::store_fixture {};

TEST_P(StoreTest, SinglyLinkedList) {
    {
        auto s = open();
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 5000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        long expect = 4999, count = 0;
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next, --expect, ++count) ASSERT_EQ(n->value, expect);
        EXPECT_EQ(count, 5000);
        EXPECT_GT(s.stats().faults, 0u);
        EXPECT_GT(s.stats().pointers_swizzled, 4000u);
    });
}

TEST_P(StoreTest, StatsCountWrittenPagesAndArePrintedAtCloseWhenAsked) {
    {
        auto s = open();
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 5000; ++i) *head = s.make<Node>(Node{i, *head});  // 5000 x 16 bytes: 20 pages
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        long count = 0;
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) count += n->value >= 0;
        EXPECT_EQ(count, 5000);
        EXPECT_EQ(s.stats().dirty_pages, 0u) << "reading writes nothing";
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) n->value += 1;
        auto st = s.stats();
        EXPECT_GE(st.dirty_pages, 19u);
        EXPECT_LE(st.dirty_pages, st.resident_pages + 1);
        s.commit();
        EXPECT_EQ(s.stats().dirty_pages, 0u) << "a commit makes them clean";
        const std::string text = steppe::to_string(s.stats());
        EXPECT_NE(text.find("faults"), std::string::npos) << text;
        EXPECT_NE(text.find("evictions"), std::string::npos) << text;
        EXPECT_EQ(s.stats().server_round_trips, 0u) << "a file store has no server";
        EXPECT_EQ(text.find("round trips"), std::string::npos) << text;
    });
    // STEPPE_STATS=1: closing the store prints its counters to stderr.
    int err[2];
    ASSERT_EQ(::pipe(err), 0);
    pid_t child = ::fork();
    if (child == 0) {
        ::dup2(err[1], 2);
        ::setenv("STEPPE_STATS", "1", 1);
        {
            auto s = open();
            long sum = 0;  // checked, so an optimising build cannot drop the walk
            for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) sum += n->value;
            if (sum != 5000L * 5001 / 2) ::_exit(1);  // each of 0..4999 incremented once above
        }
        ::_exit(0);
    }
    ::close(err[1]);
    std::string printed;
    char buf[4096];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) printed.append(buf, static_cast<std::size_t>(n));
    ::close(err[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_EQ(status, 0);
    EXPECT_NE(printed.find("steppe: stats of " + path + " at close"), std::string::npos) << printed;
    EXPECT_NE(printed.find("faults              2"), std::string::npos) << "20 pages and the root's: " << printed;
}

TEST_P(StoreTest, AMillionNodes) {
    constexpr long n = 1'000'000;
    {
        auto s = open();
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < n; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        long expect = n - 1, sum = 0;
        for (Node* p = *s.find_root<Node*>("list"); p; p = p->next) {
            ASSERT_EQ(p->value, expect--);
            sum += p->value;
        }
        EXPECT_EQ(expect, -1);
        EXPECT_EQ(sum, n * (n - 1) / 2);
        EXPECT_GE(s.stats().faults, static_cast<std::uint64_t>(n / 256));
    });
}

TEST_P(StoreTest, DoublyLinkedListWalksBothWays) {
    {
        auto s = open();
        auto* ends = s.root<DNode*[2]>("ends");
        DNode* prev = nullptr;
        for (long i = 0; i < 3000; ++i) {
            DNode* n = s.make<DNode>(DNode{i, prev, nullptr});
            if (prev) prev->next = n; else (*ends)[0] = n;
            prev = n;
        }
        (*ends)[1] = prev;
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* ends = s.find_root<DNode*[2]>("ends");
        long i = 2999;
        DNode* n = (*ends)[1];
        for (; n->prev; n = n->prev) ASSERT_EQ(n->value, i--);
        EXPECT_EQ(n, (*ends)[0]);
        long forward = 0;
        for (DNode* m = (*ends)[0]; m; m = m->next) ASSERT_EQ(m->value, forward++);
        EXPECT_EQ(forward, 3000);
    });
}

Tree* insert(steppe::store& s, Tree* t, long key) {
    if (!t) return s.make<Tree>(Tree{key, nullptr, nullptr});
    if (key < t->key) t->left = insert(s, t->left, key);
    else t->right = insert(s, t->right, key);
    return t;
}
long sum_and_check(const Tree* t, long lo, long hi, long& count) {
    if (!t) return 0;
    EXPECT_TRUE(t->key >= lo && t->key < hi);
    ++count;
    return t->key + sum_and_check(t->left, lo, t->key, count) + sum_and_check(t->right, t->key, hi, count);
}

TEST_P(StoreTest, BinaryTree) {
    long expected_sum = 0;
    {
        auto s = open();
        auto* root = s.root<Tree*>("tree");
        std::uint64_t x = 88172645463325252ull;
        for (int i = 0; i < 20000; ++i) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            long key = static_cast<long>(x % 1000000);
            expected_sum += key;
            *root = insert(s, *root, key);
        }
        s.commit();
    }
    in_fresh_process([expected_sum](steppe::store& s) {
        long count = 0;
        EXPECT_EQ(sum_and_check(*s.find_root<Tree*>("tree"), -1, 1 << 30, count), expected_sum);
        EXPECT_EQ(count, 20000);
    });
}

TEST_P(StoreTest, CyclicGraphAndSharedDag) {
    {
        auto s = open();
        auto* ring = s.root<Vertex*>("ring");
        std::vector<Vertex*> v;
        for (int i = 0; i < 1000; ++i) v.push_back(s.make<Vertex>(Vertex{i, {}}));
        for (int i = 0; i < 1000; ++i) {
            v[i]->edges[0] = v[(i + 1) % 1000];    // a cycle
            v[i]->edges[1] = v[(i * 7) % 1000];    // chords
            v[i]->edges[2] = v[0];                 // shared by all: a DAG sink
        }
        *ring = v[0];
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        Vertex* start = *s.find_root<Vertex*>("ring");
        Vertex* n = start;
        for (int i = 0; i < 1000; ++i, n = n->edges[0]) {
            ASSERT_EQ(n->id, i);
            ASSERT_EQ(n->edges[2], start) << "sharing must survive: one object, one address";
            ASSERT_EQ(n->edges[1]->id, (i * 7) % 1000);
        }
        EXPECT_EQ(n, start) << "the cycle closes";
    });
}

TEST_P(StoreTest, InteriorPointerIntoTheMiddleOfALargeObject) {
    {
        auto s = open();
        auto* h = s.root<Holder>("holder");
        h->big = s.make<Big>();
        for (int i = 0; i < 2000; ++i) h->big->slots[i] = s.make<Node>(Node{i, nullptr});
        h->into_big = &h->big->slots[1000];  // page 2 of a 4-page object
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* h = s.find_root<Holder>("holder");
        EXPECT_EQ((*h->into_big)->value, 1000) << "touching the middle first";
        EXPECT_EQ(h->into_big, &h->big->slots[1000]) << "the run is contiguous";
        for (int i = 0; i < 2000; ++i) ASSERT_EQ(h->big->slots[i]->value, i);
    });
}

TEST_P(StoreTest, OnePastTheEndPointersOnPageBoundariesRoundTrip) {
    {
        auto s = open();
        auto* bufs = s.root<Buffer[3]>("buffers");
        long* whole_page = s.make_array<long>(512);   // a one-page large object: end = its guard
        long* half_a = s.make_array<long>(256);       // two 2048-byte chunks share a page:
        long* half_b = s.make_array<long>(256);       // the second one ends on the page boundary
        (*bufs)[0] = {whole_page, whole_page + 512, whole_page + 512};
        (*bufs)[1] = {half_a, half_a + 256, half_a + 256};
        (*bufs)[2] = {half_b, half_b + 256, half_b + 256};
        for (int i = 0; i < 512; ++i) whole_page[i] = i;
        for (int i = 0; i < 256; ++i) half_a[i] = half_b[i] = -i;
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* bufs = s.find_root<Buffer[3]>("buffers");
        long sizes[3] = {512, 256, 256};
        for (int b = 0; b < 3; ++b) {
            Buffer& x = (*bufs)[b];
            ASSERT_EQ(x.end - x.begin, sizes[b]) << "buffer " << b;
            ASSERT_EQ(x.capacity, x.end);
            long sum = 0;
            for (long* p = x.begin; p != x.end; ++p) sum += *p;
            EXPECT_EQ(sum, b == 0 ? 511 * 512 / 2 : -255 * 256 / 2);
        }
    });
}

TEST_P(StoreTest, RollbackRestoresCommittedContentsAndKeepsPointersValid) {
  {
    auto s = open();
    auto* head = s.root<Node*>("list");
    for (long i = 0; i < 100; ++i) *head = s.make<Node>(Node{i, *head});
    s.commit();
    Node* first = *head;
    first->value = -1;                             // change a committed object
    *head = s.make<Node>(Node{1000, first});       // and add one
    s.set_root("extra", s.make<Node>(Node{7, nullptr}));
    s.rollback();
    EXPECT_EQ(*head, first) << "the root's slot is back";
    EXPECT_EQ(first->value, 99) << "the pointer we held shows the committed contents";
    EXPECT_EQ(s.find_root<Node>("extra"), nullptr);
    long n = 0;
    for (Node* p = *head; p; p = p->next) ++n;
    EXPECT_EQ(n, 100);
    *head = s.make<Node>(Node{500, *head});  // the store goes on after a rollback
    s.commit();
  }
    in_fresh_process([](steppe::store& s) {
        Node* h = *s.find_root<Node*>("list");
        EXPECT_EQ(h->value, 500);
        EXPECT_EQ(h->next->value, 99);
    });
}

TEST_P(StoreTest, RollbackAfterDestroyingCommittedObjects) {
    auto s = open();
    auto* head = s.root<Node*>("list");
    for (long i = 0; i < 600; ++i) *head = s.make<Node>(Node{i, *head});
    s.commit();
    Node* n = *head;  // destroy everything: whole pages go back to the heap
    while (n) {
        Node* next = n->next;
        s.destroy(n);
        n = next;
    }
    *head = s.make<Node>(Node{-5, nullptr});
    s.rollback();
    long expect = 599;
    for (Node* p = *head; p; p = p->next) ASSERT_EQ(p->value, expect--);
    EXPECT_EQ(expect, -1);
}

TEST_P(StoreTest, DestroyedObjectsAreReusedAndChangesCommitAcrossReopens) {
    for (int round = 0; round < 3; ++round) {
        auto s = open();
        auto* head = s.root<Node*>("list");
        // Drop the odd values, append new ones.
        Node** link = head;
        while (*link) {
            if ((*link)->value % 2) {
                Node* dead = *link;
                *link = dead->next;
                s.destroy(dead);
            } else {
                link = &(*link)->next;
            }
        }
        for (long i = 0; i < 200; ++i) *head = s.make<Node>(Node{round * 1000 + i, *head});
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        std::map<long, int> seen;
        for (Node* p = *s.find_root<Node*>("list"); p; p = p->next) seen[p->value]++;
        // round 2 keeps all 200 new; rounds 0 and 1 keep their even values.
        EXPECT_EQ(seen.size(), 200u + 100u + 100u);
        for (auto& [v, c] : seen) ASSERT_EQ(c, 1) << v;
    });
}

TEST_P(StoreTest, PointerToTransientMemoryIsAnErrorNamingTheType) {
    auto s = open();
    auto* head = s.root<Node*>("list");
    Node on_stack{1, nullptr};
    *head = s.make<Node>(Node{2, &on_stack});
    try {
        s.commit();
        FAIL() << "commit accepted a pointer to the stack";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::transient_pointer);
        EXPECT_NE(std::string(e.what()).find("shapes::Node"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("offset 8, in field 2 'next' (shapes::Node*)"), std::string::npos)
            << e.what();
    }
    (*head)->next = nullptr;  // fix it: the commit goes through
    s.commit();
}

// Issue 14, item 6: every field offset in a message comes with the field's
// name where the layout has one.
TEST_P(StoreTest, TransientPointerMessagesNameTheField) {
    auto s = open();
    Node on_stack{1, nullptr};
    const auto expect_refused = [&](const std::string& words) {
        try {
            s.commit();
            ADD_FAILURE() << "commit accepted a pointer to the stack";
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::transient_pointer);
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what() << "\nlacks\n" << words;
        }
        s.rollback();
    };
    s.make<Route>()->first.to = &on_stack;
    expect_refused("type shapes::Route: the pointer at offset 16, in field 2 'first' (shapes::Edge), of the object");
    s.make<Link>()->target = &on_stack;
    expect_refused("type shapes::Link: the pointer at offset 8, in field 2 'target' (shapes::Node*), of the object");
    s.make_array<Node*>(3)[2] = &on_stack;  // a field without a name: its number and type
    expect_refused("type shapes::Node*: the pointer at offset 0, in field 1 (shapes::Node*), of the object");
}

// A commit of more than 1,024 pages sends its first chunks to the log before
// it meets a transient pointer on its last page: the failed commit must
// leave the transaction as it was, to be fixed and committed, or rolled back.
TEST_P(StoreTest, BigCommitFailingOnItsLastPageCanBeFixedOrRolledBack) {
    constexpr long n = 300'000;  // 16-byte nodes: 1,172 pages
    for (bool fix : {true, false}) {
        std::filesystem::remove(path);
        std::filesystem::remove(path + "-wal");
        {
            auto s = open();
            auto* head = s.root<Node*>("list");
            *head = s.make<Node>(Node{-1, nullptr});
            s.commit();
            for (long i = 0; i < n; ++i) *head = s.make<Node>(Node{i, *head});
            Node on_stack{0, nullptr};
            Node* newest = *head;  // on the highest page: unswizzled last
            Node* second = newest->next;
            newest->next = &on_stack;
            EXPECT_THROW(s.commit(), steppe::error);
            if (fix) {
                newest->next = second;
                s.commit();
            } else {
                s.rollback();
            }
        }
        in_fresh_process([&](steppe::store& s) {
            long expect = fix ? n - 1 : -1, count = 0;
            for (Node* p = *s.find_root<Node*>("list"); p; p = p->next, ++count, --expect)
                ASSERT_EQ(p->value, expect);  // n - 1, ..., 0, then the first commit's -1
            EXPECT_EQ(count, fix ? n + 1 : 1);
            EXPECT_TRUE(s.check().empty());
        });
    }
}

TEST_P(StoreTest, TransientPointersCanBeNulledByOption) {
    {
        auto s = open([](steppe::open_options& o) { o.null_transient_pointers = true; });
        Node on_stack{1, nullptr};
        *s.root<Node*>("list") = s.make<Node>(Node{2, &on_stack});
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        Node* h = *s.find_root<Node*>("list");
        EXPECT_EQ(h->value, 2);
        EXPECT_EQ(h->next, nullptr);
    });
}

TEST_P(StoreTest, RootsAreNamedTypedAndListed) {
  {
    auto s = open();
    *s.root<long>("answer") = 42;
    s.root<Node>("node")->value = 7;
    EXPECT_EQ(s.roots().size(), 2u);
    try {
        s.find_root<Tree>("node");
        FAIL();
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::type_mismatch);
        EXPECT_NE(std::string(e.what()).find("holds a shapes::Node, not a shapes::Tree"), std::string::npos)
            << e.what();
    }
    s.commit();
    EXPECT_TRUE(s.remove_root("answer"));
    EXPECT_FALSE(s.remove_root("answer"));
    s.commit();
  }
    in_fresh_process([](steppe::store& s) {
        auto roots = s.roots();
        ASSERT_EQ(roots.size(), 1u);
        EXPECT_EQ(roots[0].name, "node");
        EXPECT_EQ(roots[0].type, "shapes::Node");
        EXPECT_EQ(s.find_root<Node>("node")->value, 7);
        EXPECT_EQ(s.find_root<long>("answer"), nullptr);
    });
}

TEST_P(StoreTest, EightThreadsTraverseFromAColdStart) {
    {
        auto s = open();
        auto* heads = s.root<Node*[8]>("lists");
        for (int t = 0; t < 8; ++t)
            for (long i = 0; i < 20000; ++i) (*heads)[t] = s.make<Node>(Node{i, (*heads)[t]});
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        auto* heads = s.find_root<Node*[8]>("lists");
        std::atomic<int> good{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t) {
            threads.emplace_back([&, t] {
                // Every thread walks every list, starting at a different one.
                long total = 0;
                for (int k = 0; k < 8; ++k)
                    for (Node* n = (*heads)[(t + k) % 8]; n; n = n->next) total += n->value;
                if (total == 8 * (19999L * 20000 / 2)) ++good;
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_EQ(good.load(), 8);
    });
}

TEST_P(StoreTest, ReopenTwiceAndChangeInBetween) {
    {
        auto s = open();
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 1000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    {
        auto s = open();
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) n->value *= 2;
        s.commit();
    }
    in_fresh_process([](steppe::store& s) {
        long expect = 999;
        for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) ASSERT_EQ(n->value, 2 * expect--);
    });
    in_fresh_process([](steppe::store& s) { EXPECT_EQ((*s.find_root<Node*>("list"))->value, 1998); });
}

TEST_P(StoreTest, CommitWritesOnlyThePagesWritten) {
    auto s = open();
    auto* head = s.root<Node*>("list");
    for (long i = 0; i < 10000; ++i) *head = s.make<Node>(Node{i, *head});  // ~40 pages of nodes
    s.commit();
    auto before = s.stats().pages_committed;
    (*head)->value = 5;                 // one page
    (*head)->next->next->value = 6;     // the same page
    s.commit();
    EXPECT_EQ(s.stats().pages_committed - before, 1u);
    s.commit();
    EXPECT_EQ(s.stats().pages_committed - before, 1u) << "an empty commit writes no data page";
}

// A T* is good while its store is open. Kept past close(), it must not reach
// the store opened next, whose memory the kernel would gladly put at the
// same address: the closed store's addresses stay reserved (vm.hpp, closed
// ranges), and a touch ends the process naming the closed store.
TEST_P(StoreTest, APointerKeptPastCloseEndsTheProcessInsteadOfReachingTheStoreOpenedNext) {
    Node* stale = nullptr;
    Node* stale_read_only = nullptr;
    {
        auto a = open();
        stale = a.root<Node>("n");
        stale->value = 111;
        a.commit();
    }
    stale_read_only = open([](steppe::open_options& o) { o.read_only = true; }).find_root<Node>("n");
    const std::string other = dir.path("other.db");
    {
        auto b = steppe::store::open(other, options());
        Node* n = b.root<Node>("n");
        n->value = 222;
        b.commit();
        EXPECT_NE(n, stale);
        EXPECT_NE(n, stale_read_only);
        const char* fatal = "fatal: store .*s.db: a pointer followed after its store closed .*find_root";
        EXPECT_EXIT(std::exit(stale->value == 222 ? 0 : 1), ::testing::ExitedWithCode(71), fatal);
        EXPECT_EXIT(std::exit(stale_read_only->value == 222 ? 0 : 1), ::testing::ExitedWithCode(71), fatal);
        EXPECT_EXIT(
            {
                stale->value = 999;
                b.commit();
                std::exit(0);
            },
            ::testing::ExitedWithCode(71), fatal);
    }
    auto b = steppe::store::open(other, options());
    EXPECT_EQ(b.find_root<Node>("n")->value, 222);
    EXPECT_TRUE(b.check().empty());
    EXPECT_EQ(open([](steppe::open_options& o) { o.read_only = true; }).find_root<Node>("n")->value, 111);
}

std::uint64_t count_lines(const char* file) {
    std::ifstream in(file);
    std::uint64_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
}
std::uint64_t virtual_bytes() {
    std::ifstream in("/proc/self/statm");
    std::uint64_t pages = 0;
    in >> pages;
    return pages * 4096;
}

// Closed ranges are bounded (vm::max_closed_ranges): a program that opens
// and closes stores forever keeps a bounded number of mappings, and under
// an address-space rlimit the closed ranges give way to the stores opening.
TEST_P(StoreTest, OpeningAndClosingStoresForeverKeepsMappingsBoundedAndFitsUnderRLIMIT_AS) {
    const auto cycle = [&](long i) {
        auto s = open();
        s.root<Node>("n")->value = i;
        s.commit();
    };
    cycle(0);
    const std::uint64_t maps_before = count_lines("/proc/self/maps");
    for (long i = 1; i < 560; ++i) cycle(i);
    EXPECT_LE(count_lines("/proc/self/maps"), maps_before + steppe::vm::max_closed_ranges + 64);
    EXPECT_EXIT(
        {
            struct rlimit limit{};
            limit.rlim_cur = limit.rlim_max = virtual_bytes() + (std::uint64_t{200} << 30);
            if (::setrlimit(RLIMIT_AS, &limit) != 0) std::exit(2);
            for (long i = 0; i < 20; ++i) cycle(i);  // each close keeps 64 GiB: three fill the limit
            std::exit(open().find_root<Node>("n")->value == 19 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
    // The program's own mappings after a close: the closed ranges keep a
    // quarter of the limit at most (they kept it all: a tester's finding).
    EXPECT_EXIT(
        {
            steppe::vm::give_back_closed_ranges();  // those of the cycles above: as in a fresh process
            struct rlimit limit{};
            limit.rlim_cur = limit.rlim_max = virtual_bytes() + (std::uint64_t{150} << 30);
            if (::setrlimit(RLIMIT_AS, &limit) != 0) std::exit(2);
            for (long i = 0; i < 3; ++i) {
                cycle(i);
                void* own = ::mmap(nullptr, std::uint64_t{100} << 30, PROT_NONE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (own == MAP_FAILED) std::exit(3);
                ::munmap(own, std::uint64_t{100} << 30);
            }
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

// Made by make_array: its third constructor throws.
struct ThirdThrows {
    static inline int made = 0;
    static inline std::vector<int> destroyed;
    int id = 0;
    long pad[100] = {};
    ThirdThrows() : id(made++) {
        if (id == 2) throw std::runtime_error("the third constructor throws");
    }
    ~ThirdThrows() { destroyed.push_back(id); }
    STEPPE_FIELDS(id, pad)
};

// As make<T> does: the elements made are destroyed, the memory goes back,
// the exception goes on; nothing of the array reaches the store.
TEST_P(StoreTest, AThrowingConstructorInMakeArrayDestroysWhatItMadeAndFreesTheArray) {
    auto s = open();
    s.root<Node>("n");
    s.commit();
    const std::uint64_t pages = s.stats().store_pages;
    for (int round = 0; round < 20; ++round) {
        ThirdThrows::made = 0;
        ThirdThrows::destroyed.clear();
        EXPECT_THROW(s.make_array<ThirdThrows>(10), std::runtime_error);
        EXPECT_EQ(ThirdThrows::destroyed, (std::vector<int>{1, 0})) << "the two made, in reverse";
    }
    s.commit();
    for (const steppe::type_usage& t : s.types()) EXPECT_FALSE(t.name == "ThirdThrows" && t.objects != 0);
    EXPECT_EQ(s.stats().store_pages, pages);
    EXPECT_TRUE(s.check().empty());
}

// Every call on a store that closed or was moved from: an error naming the
// call, not a crash through the missing store.
TEST_P(StoreTest, EveryCallOnAClosedOrMovedFromStoreSaysSo) {
    auto closed = open();
    closed.close();
    auto moved_from = open();
    auto moved_to = std::move(moved_from);
    for (steppe::store* st : {&closed, &moved_from}) {
        steppe::store& s = *st;
        const auto expect = [](const char* call, const std::function<void()>& f) {
            EXPECT_ERROR(steppe::errc::invalid_argument, std::string("store: ") + call + " on a closed store", f());
        };
        expect("make", [&] { s.make<Node>(); });
        expect("make", [&] { s.make_array<Node>(3); });
        expect("destroy", [&] { s.destroy(moved_to.root<Node>("n")); });
        expect("find_root", [&] { s.root<Node>("n"); });
        expect("set_root", [&] { s.set_root<Node>("n", nullptr); });
        expect("remove_root", [&] { s.remove_root("n"); });
        expect("roots", [&] { s.roots(); });
        expect("commit", [&] { s.commit(); });
        expect("rollback", [&] { s.rollback(); });
        expect("checkpoint", [&] { s.checkpoint(); });
        expect("backup", [&] { s.backup(dir.path("b.db")); });
        expect("reuse_address_space", [&] { s.reuse_address_space(); });
        expect("refresh", [&] { s.refresh(); });
        expect("wait_for_commit", [&] { s.wait_for_commit(); });
        expect("transaction", [&] { s.transaction(); });
        expect("stats", [&] { s.stats(); });
        expect("types", [&] { s.types(); });
        expect("check", [&] { s.check(); });
        expect("path", [&] { s.path(); });
        expect("salvage_report", [&] { s.salvage_report(); });
        s.close();  // closing again does nothing
    }
    EXPECT_TRUE(moved_to.check().empty());
}

TEST_P(StoreTest, DamagedPageEndsTheProcessWithAMessageNamingIt) {
    {
        auto s = open();
        auto* head = s.root<Node*>("list");
        for (long i = 0; i < 2000; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }
    steppe::test::damage_pages(path, steppe::test::node_pages(path, 2000));
    EXPECT_EXIT(
        {
            auto s = open();
            long sum = 0;
            for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) sum += n->value;
            std::printf("%ld\n", sum);
        },
        ::testing::ExitedWithCode(71), "fatal: cannot load page [0-9]+ of store .*s.db: .*fails its checksum");
}

STEPPE_BOTH_BACKENDS(StoreTest);

}  // namespace
