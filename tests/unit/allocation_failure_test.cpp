// Allocation failures inside the storage manager, at every allocation in
// turn (as SQLite's out-of-memory tests do): this program replaces the
// global operator new, so that the Nth allocation from now throws
// std::bad_alloc, and runs each operation once per N until it gets through.
//   - log_index (N2, storage/log_index.hpp): add() and absorb() change
//     nothing or complete; a merge that ran out of memory half-way left
//     runs whose chunks it had freed, and the next lookup ended the process.
//   - the page engine: a make or destroy that runs out of memory half-way
//     (the heap's structures are not all-or-nothing) breaks the transaction:
//     make, destroy and commit say poisoned until a rollback, after which the
//     store is sound and goes on.
//   - the object engine: a commit whose allocations fail is whole, and the
//     store goes on after a rollback or (durable, poisoned) a reopen.
//   - file_store::commit: a commit that fails before its fdatasync leaves
//     the store as it was; one that fails after it (indexing its pages) is
//     durable, and the handle says poisoned rather than read the pages that
//     commit superseded; a reopen finds it.
#include <gtest/gtest.h>
#include <steppe/error.hpp>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <new>
#include <string>
#include <vector>

#include "storage/file_format.hpp"
#include "storage/log_index.hpp"
#include "storage/storage.hpp"
#include "support/temp_dir.hpp"

namespace {
// Per thread: only the test's own thread fails (a store's eviction thread
// allocates too, and is not under test here).
thread_local long g_fail_in = 0;  // > 0: the g_fail_in-th allocation from now throws
thread_local long g_allocations = 0;

void* allocate(std::size_t n) {
    ++g_allocations;
    if (g_fail_in > 0 && --g_fail_in == 0) throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}

// While it lives, this thread's nth allocation from now fails (0: none);
// whatever leaves its scope, normally or by an exception, disarms it.
struct failing_allocation {
    explicit failing_allocation(long n) noexcept { g_fail_in = n; }
    ~failing_allocation() { g_fail_in = 0; }
    failing_allocation(const failing_allocation&) = delete;
    failing_allocation& operator=(const failing_allocation&) = delete;
};

// Runs op with this thread's nth allocation failing; whether it threw
// std::bad_alloc (other exceptions go on to the caller).
template <class Op>
bool throws_bad_alloc_at(long n, Op&& op) {
    failing_allocation armed(n);
    try {
        op();
    } catch (const std::bad_alloc&) {
        return true;
    }
    return false;
}
}  // namespace

// Every form a delete here can meet (the nothrow forms too: std::stable_sort
// takes its buffer with them, and frees it with the plain delete, which a
// sanitizer would otherwise see freeing another allocator's memory).
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return allocate(n);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using steppe::storage::log_index;

// Runs `op` on a state `make()` builds, once with no failure (counting its
// allocations), then once with each of them failing in turn, and hands
// `check` the state and whether op threw. (Some failures are absorbed:
// std::stable_sort does without its buffer, a merge that cannot start is
// left for later; those runs must complete.)
template <class Make, class Op, class Check>
void fail_each_allocation(Make make, Op op, Check check) {
    long total = 0;
    {
        auto state = make();
        const long at = g_allocations;
        op(state);
        total = g_allocations - at;
        check(state, false, "no allocation failed");
    }
    ASSERT_GE(total, 3) << "the operation allocates: each of its allocations must be made to fail";
    for (long n = 1; n <= total && !::testing::Test::HasFatalFailure(); ++n) {
        auto state = make();
        const bool threw = throws_bad_alloc_at(n, [&] { op(state); });
        check(state, threw, "allocation " + std::to_string(n) + " of " + std::to_string(total) + " failed");
    }
}

std::vector<log_index::entry> pages(std::uint32_t first, std::uint32_t count, std::uint32_t step, std::uint32_t sum) {
    std::vector<log_index::entry> out;
    for (std::uint32_t k = 0; k < count; ++k) out.push_back({first + k * step, sum, k});
    return out;
}

// Every entry of `expected` is what the index finds for its page, and N1 holds.
void expect_holds(const log_index& index, const std::vector<log_index::entry>& expected, const std::string& when) {
    ASSERT_TRUE(index.check().empty()) << when << ": " << index.check()[0];
    ASSERT_EQ(index.distinct(), expected.size()) << when;
    for (const log_index::entry& e : expected) {
        log_index::entry found{};
        ASSERT_TRUE(index.find(e.page, found)) << when << ": page " << e.page;
        ASSERT_EQ(found.sum, e.sum) << when << ": page " << e.page << " has an older version";
    }
}

// Runs of 6,000 even pages, then odd pages and a third of the evens again,
// newer: adding them merges runs of several chunks each.
TEST(AllocationFailure, AnAddThatRunsOutOfMemoryChangesNothingOrCompletes) {
    const std::vector<log_index::entry> evens = pages(0, 6000, 2, 1), odds = pages(1, 6000, 2, 2);
    std::vector<log_index::entry> more = odds, after = odds;
    for (const auto& e : pages(0, 2000, 6, 3)) more.push_back(e);
    for (const auto& e : evens) after.push_back(e.page % 6 == 0 ? log_index::entry{e.page, 3, 0} : e);
    fail_each_allocation(
        [&] {
            auto index = std::make_unique<log_index>();
            index->add(evens);
            return index;
        },
        [&](std::unique_ptr<log_index>& index) { index->add(more); },
        [&](const std::unique_ptr<log_index>& index, bool threw, const std::string& when) {
            expect_holds(*index, threw ? evens : after, when + (threw ? ", and add threw" : ", and add went through"));
        });
}

// A commit's spilled pages move into the committed index (absorb), which
// then merges them with what was there (more pages than it had: a merge).
TEST(AllocationFailure, AnAbsorbThatRunsOutOfMemoryChangesNothingOrCompletes) {
    const std::vector<log_index::entry> before = pages(0, 3000, 1, 1), spilled = pages(0, 4000, 3, 2);
    std::vector<log_index::entry> after;
    for (std::uint32_t p = 0; p < 3000; ++p) after.push_back({p, p % 3 == 0 ? 2u : 1u, 0});
    for (std::uint32_t p = 3000; p < 12000; p += 3) after.push_back({p, 2, 0});
    struct both {
        log_index committed, spilled;
    };
    fail_each_allocation(
        [&] {
            auto b = std::make_unique<both>();
            b->committed.add(before);
            b->spilled.add(spilled);
            return b;
        },
        [&](std::unique_ptr<both>& b) { b->committed.absorb(std::move(b->spilled)); },
        [&](const std::unique_ptr<both>& b, bool threw, const std::string& when) {
            expect_holds(b->committed, threw ? before : after, when + (threw ? ", and absorb threw" : ""));
        });
}

struct Node {
    long value;
    Node* next;
    long pad[6];  // 64 bytes
};

long sum_of(const Node* n) {
    long sum = 0;
    for (; n; n = n->next) sum += n->value;
    return sum;
}

// A transaction of makes (single objects and arrays) and destroys, each of
// its allocations failing in turn.
TEST(AllocationFailure, AMakeThatRunsOutOfMemoryBreaksTheTransactionUntilARollback) {
    steppe::test::temp_dir dir;
    const std::string path = dir.path("s.db");
    auto s = steppe::store::open(path);
    Node* head = nullptr;
    for (long i = 1; i <= 200; ++i) head = new (s.make<Node>()) Node{i, head, {}};
    *s.root<Node*>("list") = head;
    s.commit();
    auto transaction = [&s] {
        Node*& list = *s.root<Node*>("list");
        std::vector<long*> arrays;
        for (long i = 0; i < 150; ++i) {
            list = new (s.make<Node>()) Node{1000 + i, list, {}};
            arrays.push_back(s.make_array<long>(static_cast<std::size_t>(8 + i % 300)));
            if (i % 3 == 0) {
                s.destroy(arrays.back(), static_cast<std::size_t>(8 + i % 300));
                arrays.pop_back();
            }
        }
    };
    long total = 0;
    {
        const long at = g_allocations;
        transaction();
        total = g_allocations - at;
        s.rollback();
    }
    ASSERT_GE(total, 150);
    // A failure outside the engine (the test's own vector, a root's name)
    // leaves a sound transaction, which commits; one inside leaves it broken.
    int broken = 0;
    long committed_sum = 200 * 201 / 2;
    for (long n = 1; n <= total && !HasFatalFailure(); ++n) {
        const bool threw = throws_bad_alloc_at(n, transaction);
        const std::string when = "allocation " + std::to_string(n) + " of " + std::to_string(total);
        bool committed = false;
        if (threw) {
            try {
                s.commit();
                committed = true;
                committed_sum = sum_of(*s.root<Node*>("list"));
            } catch (const steppe::error& e) {
                ASSERT_EQ(e.code(), steppe::errc::poisoned) << when << ": " << e.what();
                ASSERT_NE(std::string(e.what()).find("rollback()"), std::string::npos) << e.what();
                EXPECT_THROW(s.make<Node>(), steppe::error) << when << ": a make in a broken transaction";
                ++broken;
            }
        }
        if (!committed) s.rollback();
        const std::vector<std::string> findings = s.check();
        ASSERT_TRUE(findings.empty()) << when << (threw ? " failed" : " was absorbed")
                                      << (committed ? ", then a commit: " : ", then a rollback: ") << findings[0];
        ASSERT_EQ(sum_of(*s.root<Node*>("list")), committed_sum) << when;
    }
    EXPECT_GT(broken, total / 2) << "most of the transaction's allocations are the engine's";
    transaction();  // and the store goes on
    s.commit();
    EXPECT_TRUE(s.check().empty());
}

struct Cell {
    long value;
    steppe::objects::ref<Cell> next;
};

// The object engine: a transaction of makes and its commit (persistence by
// reachability, then one storage commit), each allocation failing in turn.
// A failure before the storage commit leaves the store as it was and a
// rollback goes on from there; one after its fdatasync is durable and says
// poisoned, and a reopen finds it; either way check() finds nothing.
TEST(AllocationFailure, AnObjectStoreCommitThatRunsOutOfMemoryIsWholeAndTheStoreGoesOn) {
    namespace so = steppe::objects;
    steppe::test::temp_dir dir;
    const std::string path = dir.path("o.ods");
    std::optional<so::store> s(so::store::open(path));
    {
        so::ref<Cell> head = s->root<Cell>("list");
        for (long i = 1; i <= 200; ++i) head.mut()->next = s->make<Cell>(i, head->next);
        s->commit();
    }
    constexpr long added_sum = 150 * 1000 + 149 * 150 / 2;
    auto transaction = [&s] {
        so::ref<Cell> head = s->root<Cell>("list");
        for (long i = 0; i < 150; ++i) head.mut()->next = s->make<Cell>(1000 + i, head->next);
        s->commit();
    };
    auto sum = [&s] {
        long total = 0;
        for (so::ref<Cell> c = s->root<Cell>("list")->next; c; c = c->next) total += c->value;
        return total;
    };
    long total = 0;
    {
        const long at = g_allocations;
        transaction();
        total = g_allocations - at;
    }
    ASSERT_GE(total, 100);
    long expected = sum();
    int durable_but_poisoned = 0;
    for (long n = 1; n <= total && !HasFatalFailure(); ++n) {
        const std::string when = "allocation " + std::to_string(n) + " of " + std::to_string(total);
        bool threw = false;
        try {
            threw = throws_bad_alloc_at(n, transaction);
        } catch (const steppe::error& e) {
            ASSERT_EQ(e.code(), steppe::errc::poisoned) << when << ": " << e.what();
            threw = true;
        }
        if (threw) {
            try {
                s->rollback();
            } catch (const steppe::error& e) {
                ASSERT_EQ(e.code(), steppe::errc::poisoned) << when << ", then a rollback: " << e.what();
                ++durable_but_poisoned;
                s.reset();
                s.emplace(so::store::open(path));
            }
        }
        const std::vector<std::string> findings = s->check();
        ASSERT_TRUE(findings.empty()) << when << (threw ? " failed: " : " was absorbed: ") << findings[0];
        const long now = sum();
        ASSERT_TRUE(now == expected || now == expected + added_sum) << when << ": a part of a transaction";
        expected = now;
    }
    EXPECT_GT(durable_but_poisoned, 0) << "no failure came after a commit's fdatasync";
}

// Commits of a store's pages with each allocation failing in turn: the
// handle reads what its last commit says, or refuses (poisoned); a reopen
// reads the last commit whose fdatasync ran, never a mix.
TEST(AllocationFailure, ACommitThatRunsOutOfMemoryIsWholeOrPoisonsTheHandle) {
    steppe::test::temp_dir dir;
    const std::string path = dir.path("s.db");
    steppe::storage::options o;
    o.durable = true;
    constexpr int page_count = 40;
    auto image = [](int page, int generation) {
        std::vector<std::byte> bytes(steppe::storage::page_size, std::byte(generation));
        bytes[0] = std::byte(page);
        return bytes;
    };
    // Spills half of a generation's pages, as a transaction bigger than the
    // budget does, and commits the rest; the nth allocation of the two
    // fails (0: none).
    auto commit = [&](steppe::storage::storage& s, int generation, long fail_at) {
        std::vector<std::vector<std::byte>> images;
        std::vector<steppe::storage::page_image> w;
        for (int p = 0; p < page_count; ++p) images.push_back(image(p, generation));
        for (int p = 0; p < page_count; ++p)
            w.push_back({static_cast<steppe::storage::page_no>(p), images[static_cast<std::size_t>(p)].data()});
        failing_allocation armed(fail_at);
        s.spill({w.data(), page_count / 2});
        s.commit({w.data() + page_count / 2, page_count / 2}, {});
    };
    // Which generation every page reads in a handle; -1 if they disagree.
    auto generation_of = [&](steppe::storage::storage& s) {
        std::vector<std::byte> out(steppe::storage::page_size);
        int seen = -2;
        for (int p = 0; p < page_count; ++p) {
            s.read_page(static_cast<steppe::storage::page_no>(p), out.data());
            const int g = static_cast<int>(out[1]);
            if (seen == -2) seen = g;
            if (g != seen || out[0] != std::byte(p)) return -1;
        }
        return seen;
    };
    {
        auto s = steppe::storage::storage::open(path, o);
        commit(*s, 1, 0);
    }
    int generation = 1;
    for (int n = 1; n < 400; ++n) {
        auto s = steppe::storage::storage::open(path, o);
        ASSERT_EQ(generation_of(*s), generation) << "reopened before allocation " << n << " failed";
        bool failed = false;
        try {
            commit(*s, generation + 1, n);
        } catch (const std::bad_alloc&) {
            failed = true;
        } catch (const steppe::error& e) {
            ASSERT_EQ(e.code(), steppe::errc::poisoned) << e.what();
            failed = true;
        }
        if (!failed) {
            ASSERT_EQ(generation_of(*s), generation + 1) << "after the commit that went through";
            ASSERT_GE(n, 4) << "the commit allocates: this test must see its allocations fail";
            return;
        }
        // A commit that threw and left the handle usable did not reach the
        // disk: its transaction is still in progress, and a rollback leaves
        // the last commit's pages.
        try {
            s->discard_pending();
            ASSERT_EQ(generation_of(*s), generation) << "allocation " << n << ": the handle after a failed commit";
        } catch (const steppe::error& e) {
            ASSERT_EQ(e.code(), steppe::errc::poisoned) << "allocation " << n << ": " << e.what();
        }
        s.reset();
        auto reopened = steppe::storage::storage::open(path, o);
        const int g = generation_of(*reopened);
        ASSERT_TRUE(g == generation || g == generation + 1) << "allocation " << n << ": reopened, pages of mixed commits";
        generation = g;
    }
    FAIL() << "the commit never went through";
}

}  // namespace
