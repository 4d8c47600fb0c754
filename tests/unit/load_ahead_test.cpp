// Loading ahead (open_options::load_ahead; src/page/load_ahead.cpp): a
// thread makes the store's pages resident before the program touches them,
// each loaded exactly as its first touch would load it. What must hold:
// every page it loads reads as the store holds it, with no fault left for
// the program; it loads nothing when the store would crowd the budget; a
// damaged page it meets does not end a process that never touches it, and
// a touch still reports it; commits, rollbacks, allocations, refreshes and
// closes while it runs lose nothing. Counts, not times.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "support/damage.hpp"
#include "support/store_fixture.hpp"

namespace load_ahead_test {
struct Block {  // one page
    long id;
    long payload[511];
};
struct Node {
    long value;
    Node* next;
};
struct Page {  // one page each
    long id;
    Page* next;
    long pad[510];
};
}  // namespace load_ahead_test

using load_ahead_test::Block;
using load_ahead_test::Node;
using load_ahead_test::Page;

namespace {

constexpr long kBlocks = 1500;  // ~6 MiB: a quarter of a 64 MiB budget holds it
constexpr long kNodes = 20000;  // ~80 pages of small nodes
constexpr std::uint64_t kBudget = std::uint64_t{64} << 20;

Block* blocks(steppe::store& s) { return *s.find_root<Block*>("blocks"); }

bool block_ok(const Block& b, long i, long added) {
    return b.id == i + added && b.payload[0] == 3 * i && b.payload[510] == -i;
}

long list_sum(steppe::store& s) {
    long sum = 0;
    for (Node* n = *s.find_root<Node*>("list"); n; n = n->next) sum += n->value;
    return sum;
}

constexpr long kListSum = kNodes * (kNodes - 1) / 2;

// Waits until the loader has stopped adding pages for a while (it runs on
// its own thread; 10 s at most), and returns how many it loaded.
std::uint64_t settled_loads(const steppe::store& s) {
    std::uint64_t seen = s.stats().loaded_ahead_pages;
    int quiet = 0;
    for (int waited = 0; waited < 1000 && quiet < 10; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const std::uint64_t now = s.stats().loaded_ahead_pages;
        quiet = now == seen ? quiet + 1 : 0;
        seen = now;
    }
    return seen;
}

class LoadAheadTest : public steppe::test::store_fixture {
protected:
    void SetUp() override {
        auto s = steppe::store::open(path, options());
        Block* b = s.make_array<Block>(kBlocks);
        for (long i = 0; i < kBlocks; ++i) {
            b[i].id = i;
            b[i].payload[0] = 3 * i;
            b[i].payload[1] = -1;  // not a page of nodes to damage_pages
            b[i].payload[510] = -i;
        }
        *s.root<Block*>("blocks") = b;
        Node** head = s.root<Node*>("list");
        for (long i = 0; i < kNodes; ++i) *head = s.make<Node>(Node{i, *head});
        s.commit();
    }

    steppe::store open_loading(std::uint64_t budget = kBudget, bool read_only = false) const {
        return open([budget, read_only](steppe::open_options& o) {
            o.resident_budget = budget;
            o.load_ahead = true;
            o.read_only = read_only;
        });
    }

    static void expect_sound(const steppe::store& s, const char* when) {
        const std::vector<std::string> findings = s.check();
        EXPECT_TRUE(findings.empty()) << when << ": " << findings.size() << " findings, the first: " << findings[0];
    }

    static long wrong_blocks(steppe::store& s, long added) {
        Block* b = blocks(s);
        long wrong = 0;
        for (long i = 0; i < kBlocks; ++i) wrong += !block_ok(b[i], i, added);
        return wrong;
    }
};

TEST_P(LoadAheadTest, EveryPageIsLoadedBeforeItsTouchAndReadsAsStored) {
    auto s = open_loading();
    const std::uint64_t loaded = settled_loads(s);
    EXPECT_GE(loaded, static_cast<std::uint64_t>(kBlocks)) << "the blocks' pages at least";
    const std::uint64_t faults_before = s.stats().faults;
    EXPECT_EQ(wrong_blocks(s, 0), 0);
    EXPECT_EQ(list_sum(s), kListSum);
    EXPECT_EQ(s.stats().faults, faults_before) << "every page the walks touched was resident already";
    EXPECT_EQ(s.stats().load_ahead, "done");
    expect_sound(s, "after loading ahead");
}

TEST_P(LoadAheadTest, OffNothingIsLoadedAhead) {
    auto s = open([](steppe::open_options& o) { o.resident_budget = kBudget; });
    EXPECT_EQ(settled_loads(s), 0u);
    EXPECT_EQ(s.stats().load_ahead, "off");
    EXPECT_EQ(wrong_blocks(s, 0), 0);
    EXPECT_GE(s.stats().faults, static_cast<std::uint64_t>(kBlocks));
}

// A store of ~6 MiB under an 8 MiB budget would crowd it: pages load on
// touch only, and the walks stay within the budget as without the option.
TEST_P(LoadAheadTest, AStoreLargerThanAQuarterOfTheBudgetIsNotLoadedAhead) {
    auto s = open_loading(std::uint64_t{8} << 20);
    EXPECT_EQ(settled_loads(s), 0u);
    EXPECT_EQ(s.stats().load_ahead.rfind("not started: the store's", 0), 0u) << s.stats().load_ahead;
    EXPECT_NE(s.stats().load_ahead.find("quarter of the budget"), std::string::npos) << s.stats().load_ahead;
    EXPECT_EQ(wrong_blocks(s, 0), 0);
    EXPECT_EQ(list_sum(s), kListSum);
}

// The loader meets the damaged pages of the list, leaves them, and the
// process lives on: the blocks read right. A touch of the list then ends
// the process with the fault path's own report of the damage.
TEST_P(LoadAheadTest, ADamagedPageIsLeftForTheTouchThatReportsIt) {
    steppe::test::damage_pages(path, steppe::test::node_pages(path, kNodes));
    in_fresh_process(
        [](steppe::store& s) {
            settled_loads(s);
            EXPECT_EQ(s.stats().load_ahead.rfind("stopped at page ", 0), 0u) << s.stats().load_ahead;
            EXPECT_EQ(wrong_blocks(s, 0), 0);
        },
        [](steppe::open_options& o) {
            o.resident_budget = kBudget;
            o.load_ahead = true;
        });
    EXPECT_EXIT(
        {
            auto s = open_loading();
            settled_loads(s);
            std::printf("%ld\n", list_sum(s));
        },
        ::testing::ExitedWithCode(71), "fatal: cannot load page [0-9]+ of store .*s.db: .*fails its checksum");
}

// Commits, allocations and rollbacks from the first moment, while the
// loader runs: it waits between its batches, and nothing written is lost.
TEST_P(LoadAheadTest, CommitsRollbacksAndAllocationsWhileLoadingLoseNothing) {
    constexpr long rounds = 40;
    {
        auto s = open_loading();
        for (long r = 1; r <= rounds; ++r) {
            Block* b = blocks(s);
            for (long i = (r * 37) % 50; i < kBlocks; i += 50) b[i].id += 1;  // every block once in 50 rounds
            Node** head = s.root<Node*>("list");
            *head = s.make<Node>(Node{kNodes + r, *head});
            if (r % 5 == 0) {
                b[0].payload[0] = -1;  // thrown away
                s.rollback();
            } else {
                s.commit();
            }
        }
        settled_loads(s);
        expect_sound(s, "after commits while loading");
    }
    in_fresh_process([](steppe::store& s) {
        Block* b = blocks(s);
        long kept_rounds = 0;
        for (long r = 1; r <= rounds; ++r) kept_rounds += r % 5 != 0;
        long total = 0;
        for (long i = 0; i < kBlocks; ++i) {
            ASSERT_EQ(b[i].payload[0], 3 * i) << "block " << i;
            total += b[i].id - i;
        }
        EXPECT_EQ(total, kept_rounds * (kBlocks / 50));
        long expected = kListSum;
        for (long r = 1; r <= rounds; ++r)
            if (r % 5 != 0) expected += kNodes + r;
        EXPECT_EQ(list_sum(s), expected);
    });
}

// Threads reading while the loader fills the same pages: each page is
// filled once, by whichever claims it, and the others wait for that fill.
TEST_P(LoadAheadTest, ThreadsTouchingPagesTheLoaderFillsReadThemRight) {
    auto s = open_loading();
    std::atomic<long> wrong{0};
    std::vector<std::thread> readers;
    Block* b = blocks(s);  // the root functions are not for threads at once
    for (int t = 0; t < 3; ++t) {
        readers.emplace_back([b, &wrong, t] {
            for (long k = 0; k < kBlocks; ++k) {
                const long i = (k * 7 + t * 500) % kBlocks;
                if (!block_ok(b[i], i, 0)) wrong.fetch_add(1);
            }
        });
    }
    for (std::thread& t : readers) t.join();
    EXPECT_EQ(wrong.load(), 0);
    const steppe::store_stats st = s.stats();
    settled_loads(s);
    const steppe::store_stats after = s.stats();
    EXPECT_LE(after.faults + after.loaded_ahead_pages, st.store_pages + 16) << "no page filled twice";
    expect_sound(s, "after threads and the loader");
}

// What the loader brought in is evicted like any page once the program
// needs the memory: new objects of four times the budget, committed in
// parts, with cooling on, leave every loaded page's contents right.
TEST_P(LoadAheadTest, LoadedPagesLeaveMemoryLikeAnyOtherPastTheBudget) {
    constexpr std::uint64_t budget = std::uint64_t{32} << 20;
    {
        auto s = open([](steppe::open_options& o) {
            o.resident_budget = budget;
            o.load_ahead = true;
            o.cooling = true;
        });
        EXPECT_GE(settled_loads(s), static_cast<std::uint64_t>(kBlocks));
        Block** more = s.root<Block*>("more");
        for (int part = 0; part < 4; ++part) {
            constexpr long count = static_cast<long>(budget / sizeof(Block));
            Block* b = s.make_array<Block>(count);
            for (long i = 0; i < count; ++i) b[i].id = part;
            *more = b;
            s.commit();
        }
        const steppe::store_stats st = s.stats();
        EXPECT_GT(st.evictions, 0u);
        EXPECT_LE(st.memory.total(), budget + budget / 8 + (std::uint64_t{1} << 20));
        EXPECT_EQ(wrong_blocks(s, 0), 0);
        EXPECT_EQ(list_sum(s), kListSum);
        expect_sound(s, "after evicting what was loaded");
    }
    in_fresh_process([](steppe::store& s) {
        EXPECT_EQ(wrong_blocks(s, 0), 0);
        EXPECT_EQ((*s.find_root<Block*>("more"))[5].id, 3);
    });
}

// Under an address-space limit the store's units would crowd (a tester's
// case: 3,000 one-page objects, 8 MiB of address space; the loader reserved
// all of it, and the program's walk and make then failed), nothing is
// loaded ahead, and the program reaches what it reaches without the option.
TEST_P(LoadAheadTest, AStoreThatWouldCrowdTheAddressSpaceIsNotLoadedAhead) {
    const std::string pages = dir.path("pages.db");
    {
        auto s = steppe::store::open(pages, options());
        Page** head = s.root<Page*>("pages");
        for (long i = 0; i < 3000; ++i) *head = s.make<Page>(Page{i, *head, {}});
        s.commit();
    }
    steppe::open_options o = options();
    o.resident_budget = kBudget;
    o.load_ahead = true;
    o.address_space_limit = std::uint64_t{8} << 20;  // 2,048 pages
    auto s = steppe::store::open(pages, o);
    EXPECT_EQ(settled_loads(s), 0u);
    EXPECT_NE(s.stats().load_ahead.find("of address space"), std::string::npos) << s.stats().load_ahead;
    long walked = 0, last = 3000;
    for (const Page* p = *s.find_root<Page*>("pages"); p && walked < 1000; p = p->next, ++walked) {
        EXPECT_EQ(p->id, last - 1);
        last = p->id;
    }
    EXPECT_EQ(walked, 1000);
    Page** head = s.root<Page*>("pages");
    for (long i = 0; i < 10; ++i) *head = s.make<Page>(Page{3000 + i, *head, {}});
    s.commit();
}

// Closing while the loader is mid-way stops it; the store reopens whole.
TEST_P(LoadAheadTest, ClosingWhileLoadingStopsTheLoader) {
    for (int round = 0; round < 5; ++round) {
        auto s = open_loading();
        if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    in_fresh_process([](steppe::store& s) {
        EXPECT_EQ(wrong_blocks(s, 0), 0);
        EXPECT_EQ(list_sum(s), kListSum);
    });
}

// A read-only store loads ahead too, and moves to a newer commit while its
// loader runs: what it reads afterwards is the newer commit's.
TEST_P(LoadAheadTest, AReadOnlyStoreRefreshedWhileLoadingReadsTheNewerCommit) {
    auto reader = open_loading(kBudget, true);
    in_fresh_process([](steppe::store& writer) {  // a writer beside the reader: another process
        Block* b = blocks(writer);
        for (long i = 0; i < kBlocks; ++i) b[i].id += 5;
        writer.commit();
    });
    reader.refresh();
    EXPECT_EQ(wrong_blocks(reader, 5), 0);
    settled_loads(reader);
    EXPECT_EQ(wrong_blocks(reader, 5), 0);
    EXPECT_EQ(list_sum(reader), kListSum);
    expect_sound(reader, "after the refresh");
}

// fork() while the loader runs: the parent goes on, the child (which may
// not use the parent's store) exits cleanly.
TEST_P(LoadAheadTest, ForkWhileLoadingLeavesTheParentWhole) {
    auto s = open_loading();
    for (int round = 0; round < 3; ++round) {
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) ::_exit(0);
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(wrong_blocks(s, 0), 0);
    EXPECT_EQ(list_sum(s), kListSum);
    expect_sound(s, "after forks");
}

STEPPE_BOTH_BACKENDS(LoadAheadTest);

}  // namespace
