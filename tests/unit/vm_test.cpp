// vm module: arenas, fault backends, write tracking.
//
// Every behavioural test runs under each backend and, for uffd, under each
// write-tracking variant this kernel supports (VmTest/<backend>_<tracking>).

#include "vm/vm.hpp"

#include <steppe/error.hpp>

#include <gtest/gtest.h>

#include "support/proc_status.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

namespace {

using namespace steppe::vm;
using steppe::errc;

// Sets an environment variable for a scope.
class scoped_env {
public:
    scoped_env(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        setenv(name, value, 1);
    }
    ~scoped_env() {
        if (old_) {
            setenv(name_, old_->c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

// A pager that knows one arena: it counts fills per page and produces
// contents that identify the pager (tag) and the page.
struct pager {
    explicit pager(std::size_t pages, std::uint64_t tag = 1) : npages(pages), tag(tag), fills(new std::atomic<int>[pages]) {
        for (std::size_t i = 0; i < npages; ++i) fills[i] = 0;
    }

    static bool fill(void* ctx, std::uintptr_t page, std::byte* out) noexcept {
        auto* self = static_cast<pager*>(ctx);
        const std::uintptr_t base = self->base.load();
        if (page < base || page >= base + self->npages * page_size || self->refuse.load() == page) {
            self->refused.fetch_add(1);
            return false;
        }
        self->fills[(page - base) / page_size].fetch_add(1);
        if (const long ns = self->fill_delay_ns.load()) {
            const timespec delay{0, ns};
            nanosleep(&delay, nullptr);  // async-signal-safe: lets other threads pile up on this page
        }
        auto* words = reinterpret_cast<std::uint64_t*>(out);
        for (std::size_t i = 0; i < page_size / sizeof(std::uint64_t); ++i) words[i] = self->word(page, i);
        return true;
    }

    std::uint64_t word(std::uintptr_t page, std::size_t i) const { return (tag << 56) ^ (page * 31) ^ i; }
    std::uintptr_t page(std::size_t i) const { return base.load() + i * page_size; }
    int fills_of(std::size_t i) const { return fills[i].load(); }

    std::atomic<std::uintptr_t> base{0};
    const std::size_t npages;
    const std::uint64_t tag;
    std::unique_ptr<std::atomic<int>[]> fills;
    std::atomic<std::uintptr_t> refuse{0};  // a page whose fill says "no contents"
    std::atomic<long> fill_delay_ns{0};      // a slow fill, as from disk
    std::atomic<int> refused{0};
};

std::uint64_t load(std::uintptr_t page, std::size_t i) { return reinterpret_cast<volatile std::uint64_t*>(page)[i]; }
void store(std::uintptr_t page, std::size_t i, std::uint64_t v) { reinterpret_cast<volatile std::uint64_t*>(page)[i] = v; }

// Checks a few words of the page, which touches it.
void expect_contents(const pager& p, std::size_t i) {
    const std::uintptr_t page = p.page(i);
    for (std::size_t w : {std::size_t{0}, std::size_t{1}, std::size_t{255}, page_size / 8 - 1}) {
        ASSERT_EQ(load(page, w), p.word(page, w)) << "page " << i << " word " << w;
    }
}

// `protect`: hold() makes pages read-only even where it could move them.
struct config {
    backend_kind backend;
    tracking_kind tracking;
    bool protect = false;
};

void PrintTo(const config& c, std::ostream* out) {
    *out << to_string(c.backend) << '/' << to_string(c.tracking) << (c.protect ? "/protect" : "");
}

std::vector<config> all_configs() {
    std::vector<config> configs;
    for (backend_kind backend : {backend_kind::uffd, backend_kind::mprotect}) {
        for (tracking_kind tracking : supported_tracking(backend)) {
            configs.push_back({backend, tracking});
            if (kernel().uffd_move && backend == backend_kind::uffd && tracking != tracking_kind::mprotect)
                configs.push_back({backend, tracking, true});
        }
    }
    return configs;
}

std::string config_name(const ::testing::TestParamInfo<config>& info) {
    return std::string(to_string(info.param.backend)) + "_" + to_string(info.param.tracking) +
           (info.param.protect ? "_protect" : "");
}

class VmTest : public ::testing::TestWithParam<config> {
protected:
    std::unique_ptr<fault_space> make(pager& p) {
        scoped_env move("STEPPE_UFFD_MOVE", GetParam().protect ? "0" : "1");
        auto space = fault_space::create(GetParam().backend, &pager::fill, &p, GetParam().tracking);
        p.base = space->reserve(p.npages * page_size);
        return space;
    }

    std::vector<std::uintptr_t> pages_of(const pager& p, std::initializer_list<std::size_t> indexes) {
        std::vector<std::uintptr_t> pages;
        for (std::size_t i : indexes) pages.push_back(p.page(i));
        return pages;
    }
};

TEST_P(VmTest, ReportsItsConfiguration) {
    pager p(1);
    auto space = make(p);
    EXPECT_EQ(space->backend(), GetParam().backend);
    EXPECT_EQ(space->tracking(), GetParam().tracking);
    EXPECT_EQ(p.base % page_size, 0u);
}

TEST_P(VmTest, FillIsCalledOncePerPageWithTheRightContents) {
    pager p(64);
    auto space = make(p);
    for (std::size_t i = 0; i < 48; ++i) EXPECT_FALSE(space->is_resident(p.page(i)));
    for (int round = 0; round < 3; ++round) {
        for (std::size_t i = 0; i < 48; ++i) expect_contents(p, i);
    }
    for (std::size_t i = 0; i < 48; ++i) {
        EXPECT_EQ(p.fills_of(i), 1) << "page " << i;
        EXPECT_TRUE(space->is_resident(p.page(i)));
    }
    for (std::size_t i = 48; i < 64; ++i) {
        EXPECT_EQ(p.fills_of(i), 0) << "untouched page " << i;
        EXPECT_FALSE(space->is_resident(p.page(i)));
    }
    const space_stats stats = space->stats();
    EXPECT_EQ(stats.faults, 48u);
    EXPECT_EQ(stats.installs, 48u);
    EXPECT_EQ(stats.write_faults, 0u);
    EXPECT_EQ(stats.discards, 0u);
    EXPECT_EQ(p.refused.load(), 0);
}

TEST_P(VmTest, DiscardMakesPagesFaultAgainWithFreshContents) {
    pager p(8);
    auto space = make(p);
    for (std::size_t i = 0; i < 8; ++i) expect_contents(p, i);
    store(p.page(3), 0, 42);
    space->discard(p.page(2), 3);
    EXPECT_TRUE(space->is_resident(p.page(1)));
    for (std::size_t i = 2; i < 5; ++i) EXPECT_FALSE(space->is_resident(p.page(i)));
    EXPECT_TRUE(space->is_resident(p.page(5)));
    EXPECT_EQ(space->stats().discards, 3u);
    EXPECT_TRUE(space->take_dirty().empty()) << "discard drops the dirtiness of what it drops";

    expect_contents(p, 3);  // the write is gone
    EXPECT_EQ(p.fills_of(3), 2);
    EXPECT_EQ(p.fills_of(1), 1);
    EXPECT_EQ(p.fills_of(2), 1) << "not touched again yet";

    // A discarded page that is written again is dirty again.
    store(p.page(4), 1, 7);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {4}));
    EXPECT_EQ(load(p.page(4), 0), p.word(p.page(4), 0));
}

TEST_P(VmTest, TakeDirtyReturnsExactlyTheWrittenPagesAndRearms) {
    pager p(64);
    auto space = make(p);
    for (std::size_t i = 0; i < 64; ++i) expect_contents(p, i);
    EXPECT_TRUE(space->take_dirty().empty()) << "reading dirties nothing";

    for (std::size_t i : {63, 1, 5, 6, 7, 40}) store(p.page(i), 2, 1000 + i);
    store(p.page(6), 3, 1);  // twice to one page
    EXPECT_EQ(space->take_dirty(), pages_of(p, {1, 5, 6, 7, 40, 63}));
    EXPECT_TRUE(space->take_dirty().empty()) << "nothing written since";

    store(p.page(5), 2, 2);  // the next write after re-arming is seen again
    EXPECT_EQ(space->take_dirty(), pages_of(p, {5}));
    EXPECT_TRUE(space->take_dirty().empty());

    EXPECT_EQ(load(p.page(5), 2), 2u);
    EXPECT_EQ(load(p.page(6), 3), 1u);
    EXPECT_EQ(load(p.page(40), 2), 1040u);
    EXPECT_EQ(load(p.page(40), 3), p.word(p.page(40), 3));
    if (GetParam().tracking != tracking_kind::wp_async) {
        EXPECT_EQ(space->stats().write_faults, 7u);
    }
}

// take_dirty() re-protects runs of dirty pages in one call, across clean
// pages; missing pages in between must stay missing.
TEST_P(VmTest, RearmingLeavesMissingPagesMissing) {
    pager p(16);
    auto space = make(p);
    for (std::size_t i = 0; i < 16; ++i) {
        if (i != 4) expect_contents(p, i);
    }
    space->discard(p.page(8), 1);
    for (std::size_t i : {3, 5, 7, 9}) store(p.page(i), 0, i);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {3, 5, 7, 9}));
    EXPECT_FALSE(space->is_resident(p.page(4)));
    EXPECT_FALSE(space->is_resident(p.page(8)));
    expect_contents(p, 4);
    expect_contents(p, 8);
    EXPECT_EQ(p.fills_of(4), 1);
    EXPECT_EQ(p.fills_of(8), 2);
    for (std::size_t i : {3, 6, 9}) store(p.page(i), 1, i);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {3, 6, 9}));
    EXPECT_EQ(load(p.page(7), 0), 7u);
}

TEST_P(VmTest, WritesToPagesNeverReadAreSeen) {
    pager p(32);
    auto space = make(p);
    store(p.page(17), 0, 5);
    store(p.page(3), 9, 6);
    EXPECT_EQ(p.fills_of(17), 1) << "the page is filled before the write lands";
    EXPECT_EQ(load(p.page(17), 0), 5u);
    EXPECT_EQ(load(p.page(17), 1), p.word(p.page(17), 1));
    EXPECT_EQ(load(p.page(3), 8), p.word(p.page(3), 8));
    EXPECT_EQ(space->take_dirty(), pages_of(p, {3, 17}));
    EXPECT_TRUE(space->take_dirty().empty());
}

TEST_P(VmTest, HoldSaysWrittenOrCleanAndReleaseDropsOrKeeps) {
    pager p(6);
    auto space = make(p);
    for (std::size_t i = 0; i < 5; ++i) expect_contents(p, i);
    store(p.page(1), 5, 77);
    store(p.page(2), 6, 88);
    store(p.page(4), 7, 99);
    using held = fault_space::held;
    // Pages 0-3 are one run (one mprotect); 5 was never touched.
    const auto pages = pages_of(p, {0, 1, 2, 3, 5});
    std::vector<held> how(pages.size());
    std::vector<const std::byte*> contents(pages.size());
    space->hold(pages, how, contents);
    EXPECT_EQ(how, (std::vector<held>{held::clean, held::written, held::written, held::clean, held::none}));
    EXPECT_EQ(load(reinterpret_cast<std::uintptr_t>(contents[1]), 5), 77u) << "a held page's contents can be read";
    EXPECT_EQ(load(reinterpret_cast<std::uintptr_t>(contents[3]), 9), p.word(p.page(3), 9));
    EXPECT_FALSE(space->is_resident(p.page(1)));
    EXPECT_TRUE(space->is_resident(p.page(4)));

    space->release(pages_of(p, {0, 1, 3}), true);
    space->release(pages_of(p, {2}), false);
    EXPECT_EQ(space->stats().evictions, 3u);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {2, 4})) << "a kept page is as written as it was; dropped ones are not";
    EXPECT_EQ(load(p.page(2), 6), 88u);
    store(p.page(2), 6, 89);  // writable again
    EXPECT_EQ(load(p.page(2), 6), 89u);
    expect_contents(p, 1);  // dropped: filled again, the write gone
    EXPECT_EQ(p.fills_of(1), 2);
    EXPECT_EQ(p.fills_of(0), 1) << "not touched again yet";
    EXPECT_EQ(space->take_dirty(), pages_of(p, {2})) << "written after its release";
}

// The checker of I1-I7 finds nothing between operations, after fills,
// writes, take_dirty, holds, releases and discards; during a hold it sees
// the claimed pages (I1), which shows it looks.
TEST_P(VmTest, InvariantsHoldBetweenOperations) {
    pager p(70);  // past one dirty word, so the summary level (I4) has two words to check
    auto space = make(p);
    using findings = std::vector<std::string>;
    EXPECT_EQ(space->check_invariants(), findings{}) << "fresh";
    for (std::size_t i = 0; i < 70; ++i) expect_contents(p, i);
    EXPECT_EQ(space->check_invariants(), findings{}) << "after fills";
    for (std::size_t i : {1u, 2u, 65u, 69u}) store(p.page(i), 3, 1234);
    EXPECT_EQ(space->check_invariants(), findings{}) << "after writes";
    space->take_dirty();
    EXPECT_EQ(space->check_invariants(), findings{}) << "after take_dirty";
    store(p.page(66), 0, 5);

    using held = fault_space::held;
    const auto pages = pages_of(p, {0, 1, 66});
    std::vector<held> how(pages.size());
    std::vector<const std::byte*> contents(pages.size());
    space->hold(pages, how, contents);
    const findings during = space->check_invariants();
    EXPECT_FALSE(during.empty()) << "a hold under way claims its pages";
    EXPECT_TRUE(std::any_of(during.begin(), during.end(), [](const std::string& f) { return f.starts_with("I1"); }));
    space->release(pages_of(p, {0, 1}), true);
    space->release(pages_of(p, {66}), false);
    EXPECT_EQ(space->check_invariants(), findings{}) << "after releases";

    space->discard(p.page(60), 10);
    EXPECT_EQ(space->check_invariants(), findings{}) << "after a discard of dirty pages";
    for (std::size_t i = 60; i < 70; ++i) expect_contents(p, i);
    store(p.page(64), 1, 9);
    EXPECT_EQ(space->check_invariants(), findings{}) << "after refills";
}

bool fill_zeros(void*, std::uintptr_t, std::byte* out) noexcept {
    std::memset(out, 0, page_size);
    return true;
}

// The checker reads each arena's side table only below the highest page
// ever touched (I6): on an arena as large as the page engine's with the
// default address-space limit (64 GiB, 16M pages) it faults in none of the
// rest of the table, and the counters follow the pages touched (I7).
TEST_P(VmTest, CheckerReadsOnlyTheTouchedPartOfAHugeArena) {
    scoped_env move("STEPPE_UFFD_MOVE", GetParam().protect ? "0" : "1");
    auto space = fault_space::create(GetParam().backend, &fill_zeros, nullptr, GetParam().tracking);
    const std::uintptr_t base = space->reserve(std::size_t{64} << 30);
    const std::vector<std::uintptr_t> touched = {base, base + page_size, base + 1000 * page_size};
    for (std::uintptr_t page : touched) EXPECT_EQ(load(page, 0), 0u);
    store(touched[1], 0, 1);
    using findings = std::vector<std::string>;
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const findings found = space->check_invariants();
    getrusage(RUSAGE_SELF, &after);
    EXPECT_EQ(found, findings{});
    EXPECT_LT(after.ru_minflt - before.ru_minflt, 64) << "the checker read the side table past the touched pages";
    EXPECT_EQ(space->resident_pages(), touched);
    space->discard(touched[0], 1);
    EXPECT_EQ(space->check_invariants(), findings{}) << "after a discard";
    EXPECT_TRUE(space->is_missing(touched[0]));
    EXPECT_FALSE(space->is_missing(touched[1]));
    EXPECT_TRUE(space->is_missing(base + 2 * page_size)) << "never touched";
}

// The point of hold(): a write from another thread while the page is held
// waits, and lands after the release, whichever way it goes.
TEST_P(VmTest, AWriteToAHeldPageWaitsForTheRelease) {
    for (bool drop : {true, false}) {
        pager p(1);
        auto space = make(p);
        store(p.page(0), 0, 1);
        std::vector<fault_space::held> how(1);
        std::vector<const std::byte*> contents(1);
        space->hold(pages_of(p, {0}), how, contents);
        ASSERT_EQ(how[0], fault_space::held::written);
        std::atomic<bool> wrote{false};
        std::thread writer([&] {
            store(p.page(0), 9, 1234);
            wrote = true;
        });
        const timespec pause{0, 50'000'000};
        nanosleep(&pause, nullptr);
        EXPECT_FALSE(wrote.load()) << "the write waits while the page is held";
        EXPECT_EQ(load(reinterpret_cast<std::uintptr_t>(contents[0]), 9), p.word(p.page(0), 9))
            << "and the held contents do not change";
        space->release(pages_of(p, {0}), drop);
        writer.join();
        EXPECT_EQ(load(p.page(0), 9), 1234u) << (drop ? "dropped" : "kept") << ": the write landed";
        EXPECT_EQ(load(p.page(0), 0), drop ? p.word(p.page(0), 0) : 1u);
        EXPECT_EQ(p.fills_of(0), drop ? 2 : 1);
        EXPECT_EQ(space->take_dirty(), pages_of(p, {0}));
    }
}

// A pager whose pages live in an array: what an evictor saves there comes
// back on the next fill, as pages spilled to a log do.
struct backing_pager {
    explicit backing_pager(std::size_t pages) : words(pages * page_size / 8) {}
    static bool fill(void* ctx, std::uintptr_t page, std::byte* out) noexcept {
        auto* self = static_cast<backing_pager*>(ctx);
        std::memcpy(out, self->words.data() + (page - self->base) / 8, page_size);
        return true;
    }
    std::uintptr_t base = 0;
    std::vector<std::uint64_t> words;
};

// Another thread keeps writing while pages are held and dropped over and
// over, the written ones saved first: every write must survive.
TEST_P(VmTest, EvictingWhileAnotherThreadWritesLosesNoWrite) {
    constexpr std::size_t pages = 64;
    constexpr std::uint64_t rounds = 1000;
    backing_pager b(pages);
    scoped_env move("STEPPE_UFFD_MOVE", GetParam().protect ? "0" : "1");
    auto space = fault_space::create(GetParam().backend, &backing_pager::fill, &b, GetParam().tracking);
    b.base = space->reserve(pages * page_size);
    std::atomic<bool> done{false};
    std::atomic<int> passes{0};
    std::thread writer([&] {
        while (passes.load() == 0) std::this_thread::yield();  // overlap with the passes, however the threads are scheduled
        for (std::uint64_t r = 0; r < rounds; ++r)
            for (std::size_t i = 0; i < pages; ++i) {
                const std::uintptr_t page = b.base + i * page_size;
                store(page, i, load(page, i) + 1);
            }
        done = true;
    });
    std::vector<std::uintptr_t> all;
    for (std::size_t i = 0; i < pages; ++i) all.push_back(b.base + i * page_size);
    std::vector<fault_space::held> how(pages);
    std::vector<const std::byte*> contents(pages);
    int saved = 0;
    while (!done || passes < 20) {
        space->hold(all, how, contents);
        std::vector<std::uintptr_t> dropped;
        for (std::size_t i = 0; i < pages; ++i) {
            if (how[i] == fault_space::held::written) {
                std::memcpy(b.words.data() + i * page_size / 8, contents[i], page_size);
                ++saved;
            }
            if (how[i] != fault_space::held::none) dropped.push_back(all[i]);
        }
        space->release(dropped, true);
        ++passes;
        const timespec breath{0, 200'000};  // let the writer run between passes, as it would with a budget
        nanosleep(&breath, nullptr);
    }
    writer.join();
    for (std::size_t i = 0; i < pages; ++i) ASSERT_EQ(load(all[i], i), rounds) << "page " << i;
    EXPECT_GT(passes, 3);
    EXPECT_GT(saved, 0);
    EXPECT_GT(space->stats().evictions, 0u);
}

// The same for evict_clean() on a faulting thread: only clean pages go, and
// a write racing the eviction is never lost. take_dirty() stands for the
// commit: it saves what was written, so those pages may go again. The copy
// a dropped page leaves (the page engine's cooling stage keeps it) is its
// contents as last saved.
TEST_P(VmTest, EvictingCleanPagesWhileAnotherThreadWritesLosesNoWrite) {
    constexpr std::size_t pages = 8;  // few, so that evictions and writes often meet
    constexpr std::uint64_t rounds = 100000;
    backing_pager b(pages);
    scoped_env move("STEPPE_UFFD_MOVE", GetParam().protect ? "0" : "1");
    auto space = fault_space::create(GetParam().backend, &backing_pager::fill, &b, GetParam().tracking);
    b.base = space->reserve(pages * page_size);
    for (std::size_t i = 0; i < pages; ++i) (void)load(b.base + i * page_size, 0);  // resident and clean: the first pass drops them
    std::atomic<bool> done{false};
    std::atomic<int> passes{0};
    std::thread writer([&] {
        while (passes.load() == 0) std::this_thread::yield();
        for (std::uint64_t r = 0; r < rounds; ++r)
            for (std::size_t i = 0; i < pages; ++i) {
                const std::uintptr_t page = b.base + i * page_size;
                store(page, i, load(page, i) + 1);
            }
        done = true;
    });
    std::vector<std::byte> copy(page_size);
    std::size_t copies_differing = 0;
    while (!done || passes < 20) {
        for (std::size_t i = 0; i < pages; ++i)
            if (space->evict_clean(b.base + i * page_size, copy.data()))
                copies_differing += std::memcmp(copy.data(), b.words.data() + i * page_size / 8, page_size) != 0;
        for (std::uintptr_t page : space->take_dirty())
            std::memcpy(b.words.data() + (page - b.base) / 8, reinterpret_cast<const void*>(page), page_size);
        ++passes;
    }
    writer.join();
    for (std::size_t i = 0; i < pages; ++i) ASSERT_EQ(load(b.base + i * page_size, i), rounds) << "page " << i;
    EXPECT_EQ(copies_differing, 0u);
    const bool can_evict = GetParam().tracking != tracking_kind::wp_async || !GetParam().protect;
    if (can_evict) {
        EXPECT_GE(space->stats().evictions, pages);
    }
}

TEST_P(VmTest, InstallMakesAResidentCleanPage) {
    pager p(8);
    auto space = make(p);
    std::vector<std::uint64_t> content(page_size / 8 + 1);
    for (std::size_t i = 0; i < content.size(); ++i) content[i] = 0xabc000 + i;
    // Unaligned source on purpose: install takes any alignment.
    const auto* source = reinterpret_cast<const std::byte*>(content.data()) + 4;
    EXPECT_TRUE(space->install(p.page(4), source));
    EXPECT_TRUE(space->is_resident(p.page(4)));
    std::uint64_t expected;
    std::memcpy(&expected, source + 8, 8);
    EXPECT_EQ(load(p.page(4), 1), expected);
    EXPECT_EQ(p.fills_of(4), 0);
    EXPECT_TRUE(space->take_dirty().empty()) << "installed pages are clean";

    EXPECT_FALSE(space->install(p.page(4), source)) << "already resident";
    expect_contents(p, 5);
    EXPECT_FALSE(space->install(p.page(5), source)) << "already faulted in";
    expect_contents(p, 5);

    store(p.page(4), 0, 1);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {4}));
    EXPECT_EQ(space->stats().installs, 2u);
    EXPECT_EQ(space->stats().faults, 1u);
}

// fill_ahead: a touch's fill without the touch. The page is then resident
// and clean (a write is tracked), a touch does not fill it again, and what
// is not missing, or not the space's, or refused by the fill, is left as it
// was (a refused page is filled by its touch, as always).
TEST_P(VmTest, FillAheadFillsAMissingPageAsItsTouchWould) {
    pager p(8);
    auto space = make(p);
    using ahead = fault_space::ahead;
    EXPECT_EQ(space->fill_ahead(p.page(2)), ahead::filled);
    EXPECT_TRUE(space->is_resident(p.page(2)));
    EXPECT_EQ(p.fills_of(2), 1);
    expect_contents(p, 2);
    EXPECT_EQ(p.fills_of(2), 1) << "the touch found it resident";
    EXPECT_TRUE(space->take_dirty().empty()) << "filled ahead, clean";
    store(p.page(2), 3, 7);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {2}));

    EXPECT_EQ(space->fill_ahead(p.page(2)), ahead::not_missing) << "resident already";
    expect_contents(p, 3);
    EXPECT_EQ(space->fill_ahead(p.page(3)), ahead::not_missing) << "faulted in already";
    std::uint64_t elsewhere[page_size / 8];
    EXPECT_EQ(space->fill_ahead(reinterpret_cast<std::uintptr_t>(elsewhere) & ~(page_size - 1)), ahead::not_missing)
        << "not an arena page";

    p.refuse = p.page(5);
    EXPECT_EQ(space->fill_ahead(p.page(5)), ahead::refused);
    EXPECT_TRUE(space->is_missing(p.page(5))) << "a refused fill leaves the page missing";
    p.refuse = 0;
    expect_contents(p, 5);
    EXPECT_EQ(p.fills_of(5), 1);

    const space_stats stats = space->stats();
    EXPECT_EQ(stats.filled_ahead, 1u);
    EXPECT_EQ(stats.faults, 2u) << "pages 3 and 5, touched";
    EXPECT_EQ(stats.installs, 3u);
    EXPECT_TRUE(space->check_invariants().empty());
}

TEST_P(VmTest, RejectsPagesOutsideItsArenas) {
    pager p(4);
    auto space = make(p);
    std::vector<std::byte> content(page_size);
    const auto expect_invalid = [](auto&& call) {
        try {
            call();
            ADD_FAILURE() << "no error";
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
        }
    };
    expect_invalid([&] { space->install(p.page(1) + 8, content.data()); });
    expect_invalid([&] { space->install(reinterpret_cast<std::uintptr_t>(&content) & ~(page_size - 1), content.data()); });
    expect_invalid([&] { space->discard(p.page(2), 3); });
    expect_invalid([&] { space->reserve(0); });
    EXPECT_FALSE(space->is_resident(p.page(4)));
    pager other(1);
    auto other_space = make(other);
    expect_invalid([&] { space->discard(other.page(0), 1); });
}

TEST_P(VmTest, EightThreadsFaultTheSameAndDifferentPages) {
    constexpr std::size_t pages = 512, threads = 8;
    pager p(pages);
    auto space = make(p);
    for (int round = 1; round <= 3; ++round) {
        p.fill_delay_ns = round == 2 ? 20'000 : 0;  // round 2: threads wait for each other's fills
        std::latch start(threads);
        std::vector<std::thread> workers;
        std::atomic<int> wrong{0};
        for (std::size_t t = 0; t < threads; ++t) {
            workers.emplace_back([&, t] {
                start.arrive_and_wait();
                // Every thread reads every page, starting at different places
                // and going different ways, so that threads meet on pages.
                for (std::size_t k = 0; k < pages; ++k) {
                    const std::size_t i = t % 2 ? (t * 61 + k) % pages : (t * 61 + pages - k) % pages;
                    if (load(p.page(i), 7) != p.word(p.page(i), 7)) wrong.fetch_add(1);
                    // Pages with i % 16 == t are written, by thread t only.
                    if (i % 16 == t) store(p.page(i), 1, round * 1000 + i);
                }
            });
        }
        for (auto& worker : workers) worker.join();
        EXPECT_EQ(wrong.load(), 0);

        std::vector<std::uintptr_t> written;
        for (std::size_t i = 0; i < pages; ++i) {
            ASSERT_EQ(p.fills_of(i), round) << "page " << i << ": one fill per page per round";
            const std::uint64_t expected = i % 16 < threads ? round * 1000 + i : p.word(p.page(i), 1);
            ASSERT_EQ(load(p.page(i), 1), expected) << "page " << i;
            if (i % 16 < threads) written.push_back(p.page(i));
        }
        EXPECT_EQ(space->take_dirty(), written);
        space->discard(p.page(0), pages);
    }
    EXPECT_EQ(space->stats().faults, 3 * pages);
}

TEST_P(VmTest, TwoSpacesAtOnce) {
    pager pa(16, 0xa), pb(16, 0xb);
    auto a = make(pa);
    auto b = make(pb);
    for (std::size_t i = 0; i < 16; ++i) {
        expect_contents(pa, i);
        expect_contents(pb, 15 - i);
    }
    store(pa.page(2), 0, 1);
    EXPECT_TRUE(b->take_dirty().empty());
    EXPECT_EQ(a->take_dirty(), pages_of(pa, {2}));
    EXPECT_FALSE(a->is_resident(pb.page(0))) << "another space's page";
    a.reset();
    store(pb.page(9), 0, 1);
    expect_contents(pb, 10);
    EXPECT_EQ(b->take_dirty(), pages_of(pb, {9}));
    EXPECT_EQ(pa.refused.load() + pb.refused.load(), 0);
    EXPECT_EQ(pb.fills_of(9), 1);
}

TEST_P(VmTest, SeveralArenasInOneSpace) {
    pager p(4), q(4, 2);
    // A second arena of the same space, with its own pager: route by address.
    struct router {
        pager* first;
        pager* second;
        static bool fill(void* ctx, std::uintptr_t page, std::byte* out) noexcept {
            auto* self = static_cast<router*>(ctx);
            const std::uintptr_t b = self->second->base.load();
            return pager::fill(page >= b && page < b + 4 * page_size ? self->second : self->first, page, out);
        }
    } route{&p, &q};
    auto routed = fault_space::create(GetParam().backend, &router::fill, &route, GetParam().tracking);
    p.base = routed->reserve(4 * page_size);
    q.base = routed->reserve(4 * page_size);
    expect_contents(q, 3);
    expect_contents(p, 0);
    store(q.page(1), 0, 1);
    store(p.page(3), 0, 1);
    std::vector<std::uintptr_t> expected = {p.page(3), q.page(1)};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(routed->take_dirty(), expected);
}

// A fill function may reserve more address space: try_reserve is async-signal-safe.
TEST_P(VmTest, FillMayReserveInSignalContext) {
    struct reserving {
        fault_space* space = nullptr;
        std::atomic<std::uintptr_t> reserved{0};
        static bool fill(void* ctx, std::uintptr_t, std::byte* out) noexcept {
            auto* self = static_cast<reserving*>(ctx);
            std::memset(out, 0x5a, page_size);
            if (self->reserved.load() == 0) self->reserved = self->space->try_reserve(page_size * 3).base;
            return true;
        }
    } ctx;
    auto space = fault_space::create(GetParam().backend, &reserving::fill, &ctx, GetParam().tracking);
    ctx.space = space.get();
    const std::uintptr_t base = space->reserve(page_size);
    EXPECT_EQ(load(base, 0), 0x5a5a5a5a5a5a5a5aull);
    ASSERT_NE(ctx.reserved.load(), 0u);
    EXPECT_EQ(load(ctx.reserved.load() + 2 * page_size, 3), 0x5a5a5a5a5a5a5a5aull);
    EXPECT_EQ(space->stats().faults, 2u);
}

// The pages of one chunk of the side table (I8, fault_space.cpp): the
// pages whose state words share one page of it.
constexpr std::size_t chunk_pages = page_size / sizeof(std::uint32_t);

// This process's anonymous resident memory, from the kernel.
std::int64_t rss_anon_bytes() { return static_cast<std::int64_t>(steppe::test::proc_status_bytes("RssAnon:")); }

// A chunk whose pages are all missing again (discarded, held and dropped,
// evicted clean) gives its table pages back, and a touch there afterwards
// is an ordinary fill (I8): table_bytes() follows the chunks in use.
TEST_P(VmTest, AChunkWhosePagesAreAllMissingGivesItsTableBack) {
    pager p(3 * chunk_pages + 5);  // three whole chunks and a partial one, never given back
    auto space = make(p);
    for (std::size_t i = 0; i < p.npages; ++i) (void)load(p.page(i), 0);
    using findings = std::vector<std::string>;
    const std::uint64_t full = space->table_bytes();
    const std::uint64_t per_chunk = GetParam().tracking == tracking_kind::wp_async && !GetParam().protect &&
                                            GetParam().backend == backend_kind::uffd && kernel().uffd_move
                                        ? 2 * page_size  // states and checksums
                                        : page_size;

    space->discard(p.page(chunk_pages), chunk_pages - 1);
    EXPECT_EQ(space->table_bytes(), full) << "one page of the chunk is still resident";
    space->discard(p.page(2 * chunk_pages - 1), 1);
    EXPECT_EQ(space->table_bytes(), full - per_chunk) << "chunk 1 is all missing";
    EXPECT_EQ(space->check_invariants(), findings{});

    using held = fault_space::held;
    std::vector<std::uintptr_t> pages;
    for (std::size_t i = 2 * chunk_pages; i < 3 * chunk_pages; ++i) pages.push_back(p.page(i));
    std::vector<held> how(pages.size());
    std::vector<const std::byte*> contents(pages.size());
    space->hold(pages, how, contents);
    EXPECT_TRUE(std::all_of(how.begin(), how.end(), [](held h) { return h == held::clean; }));
    space->release(pages, true);
    EXPECT_EQ(space->table_bytes(), full - 2 * per_chunk) << "chunk 2, held and dropped";
    EXPECT_EQ(space->check_invariants(), findings{});

    std::size_t evicted = 0;
    for (std::size_t i = 0; i < chunk_pages; ++i) evicted += space->evict_clean(p.page(i), nullptr);
    if (evicted == chunk_pages) {
        EXPECT_EQ(space->table_bytes(), full - 3 * per_chunk) << "chunk 0, evicted clean";
    }
    EXPECT_EQ(space->check_invariants(), findings{});

    for (std::size_t i : {std::size_t{0}, chunk_pages + 7, 2 * chunk_pages + 1, 3 * chunk_pages + 4}) {
        expect_contents(p, i);
        EXPECT_TRUE(space->is_resident(p.page(i)));
    }
    EXPECT_EQ(p.fills_of(chunk_pages + 7), 2);
    EXPECT_EQ(space->table_bytes(), full) << "each chunk has a resident page again";
    store(p.page(chunk_pages + 7), 2, 77);
    EXPECT_EQ(space->take_dirty(), pages_of(p, {chunk_pages + 7}));
    EXPECT_EQ(space->check_invariants(), findings{});
}

// The memory really goes back: one page touched in each of 512 chunks
// costs a page of states (and of checksums) each, and discarding them
// returns it to the system, as the kernel counts it.
TEST_P(VmTest, DiscardingEveryPageGivesTheSideTableBackToTheSystem) {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "ThreadSanitizer's shadow memory of the side table is resident memory too: skipped under the "
                    "sanitizer (the debug build runs it)";
#endif
    constexpr std::size_t chunks = 512;
    pager p(chunks * chunk_pages);  // 2 GiB of arena
    auto space = make(p);
    const std::int64_t before = rss_anon_bytes();
    for (std::size_t c = 0; c < chunks; ++c) (void)load(p.page(c * chunk_pages), 0);
    const std::int64_t touched = rss_anon_bytes();
    EXPECT_GE(touched - before, static_cast<std::int64_t>(chunks * page_size)) << "a page of states per chunk";
    for (std::size_t c = 0; c < chunks; ++c) space->discard(p.page(c * chunk_pages), 1);
    const std::int64_t after = rss_anon_bytes();
    EXPECT_LT(after - before, static_cast<std::int64_t>(chunks * page_size / 4))
        << "before " << before << ", with the pages " << touched << ", after discarding them " << after;
    // What table_bytes() still counts: the dirty bits below the touched
    // mark (a bit a page, read but never written here) and the chunk counts.
    EXPECT_EQ(space->table_bytes(), chunks * chunk_pages / 8 + page_size);
    EXPECT_EQ(space->check_invariants(), std::vector<std::string>{});
}

// Chunks are given back while other threads fault pages of the same chunks:
// no claim is lost to the zeroing (a lost one would leave a page resident
// that its state says is missing, or a thread waiting forever), every read
// sees the page's contents, and the counts stay right (I7, I8).
TEST_P(VmTest, ChunksAreGivenBackWhileOtherThreadsFaultInThem) {
    constexpr std::size_t chunks = 2;
    pager p(chunks * chunk_pages);
    auto space = make(p);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> reads{0};
    std::vector<std::thread> readers;
    for (unsigned t = 0; t < 2; ++t)
        readers.emplace_back([&, t] {
            std::uint64_t x = 88172645463325252ull + t;
            while (!stop.load(std::memory_order_relaxed)) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                // Few pages at a time, so that chunks often become empty.
                const std::size_t i = (x % chunks) * chunk_pages + (x >> 32) % 8;
                const std::uintptr_t page = p.page(i);
                if (load(page, 5) != p.word(page, 5)) {
                    ADD_FAILURE() << "page " << i << " read wrong contents";
                    return;
                }
                reads.fetch_add(1, std::memory_order_relaxed);
            }
        });
    using held = fault_space::held;
    std::vector<std::uintptr_t> pages;
    for (std::size_t i = 0; i < p.npages; ++i) pages.push_back(p.page(i));
    std::vector<held> how(fault_space::max_held);
    std::vector<const std::byte*> contents(fault_space::max_held);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    std::uint64_t rounds = 0;
    while (std::chrono::steady_clock::now() < deadline || rounds < 100) {
        // Each round after a new read of the readers' (waiting up to 1 s):
        // a loaded machine may starve them, and rounds that outran their
        // faults found nothing to evict, which proves nothing (4 of 6
        // backends failed "evictions >= rounds" under ctest -j2 beside a build).
        const std::uint64_t seen = reads.load();
        for (int waited_ms = 0; waited_ms < 1000 && reads.load() == seen; ++waited_ms)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (std::size_t c = 0; c < chunks; ++c) {
            const std::span<const std::uintptr_t> chunk(pages.data() + c * chunk_pages, chunk_pages);
            space->hold(chunk, how, contents);
            std::vector<std::uintptr_t> taken;
            for (std::size_t i = 0; i < chunk.size(); ++i)
                if (how[i] != held::none) taken.push_back(chunk[i]);
            space->release(taken, true);  // the readers never write: nothing to save
            for (std::size_t i = 0; i < 8; ++i) space->evict_clean(chunk[i], nullptr);
        }
        ++rounds;
    }
    stop = true;
    for (std::thread& t : readers) t.join();
    EXPECT_GT(reads.load(), rounds);
    EXPECT_GE(space->stats().evictions, rounds);
    EXPECT_EQ(space->check_invariants(), std::vector<std::string>{});
    for (std::size_t c = 0; c < chunks; ++c)
        for (std::size_t i = 0; i < 8; ++i) expect_contents(p, c * chunk_pages + i);
    EXPECT_EQ(space->check_invariants(), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Backends, VmTest, ::testing::ValuesIn(all_configs()), config_name);

// Faults that are not ours must not be swallowed.
using VmDeathTest = VmTest;

TEST_P(VmDeathTest, FaultOutsideAnyArenaIsNotSwallowed) {
    pager p(1);
    auto space = make(p);  // the handlers are installed
    expect_contents(p, 0);
    void* none = mmap(nullptr, page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(none, MAP_FAILED);
    EXPECT_DEATH(*static_cast<volatile char*>(none) = 1, "");
    // SIGBUS outside an arena: a shared mapping past the end of its (empty) file.
    const int fd = static_cast<int>(syscall(SYS_memfd_create, "vm-test", 0));
    ASSERT_GE(fd, 0);
    void* beyond = mmap(nullptr, page_size, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(beyond, MAP_FAILED);
    EXPECT_DEATH((void)*static_cast<volatile char*>(beyond), "");
    EXPECT_DEATH(raise(SIGBUS), "");
    munmap(none, page_size);
    munmap(beyond, page_size);
    close(fd);
}

TEST_P(VmDeathTest, PageWithoutContentsCrashesLikeAWildAccess) {
    pager p(2);
    auto space = make(p);
    p.refuse = p.page(1);
    expect_contents(p, 0);
    EXPECT_DEATH((void)load(p.page(1), 0), "");
}

TEST_P(VmDeathTest, ArenaOfADestroyedSpaceIsForgotten) {
    pager p(2);
    auto space = make(p);
    expect_contents(p, 0);
    space.reset();
    // Put an inaccessible mapping where the arena was, so that a touch faults
    // there for sure (anything may have been mapped into the freed range).
    void* where = reinterpret_cast<void*>(p.page(0));
    void* placeholder = mmap(where, 2 * page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (placeholder != where) GTEST_SKIP() << "the freed range was reused meanwhile";
    EXPECT_DEATH((void)load(p.page(0), 0), "");
    EXPECT_DEATH((void)load(p.page(1), 0), "");
    EXPECT_EQ(p.fills_of(1), 0);
    munmap(placeholder, 2 * page_size);
}

TEST_P(VmDeathTest, ArenasAreNotInheritedByFork) {
    // The "fast" style forks: the child is a copy of this process.
    const std::string style = ::testing::GTEST_FLAG(death_test_style);
    ::testing::GTEST_FLAG(death_test_style) = "fast";
    pager p(2);
    auto space = make(p);
    expect_contents(p, 0);
    // In the child the range is free (MADV_DONTFORK): an inaccessible mapping
    // fits there exactly, and a touch of it is not mistaken for an arena fault.
    const auto touch_in_child = [&](std::size_t i) {
        void* where = reinterpret_cast<void*>(p.page(0));
        if (mmap(where, 2 * page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != where) {
            std::_Exit(0);  // the arena was inherited: no death, the test fails
        }
        (void)load(p.page(i), 0);
    };
    EXPECT_DEATH(touch_in_child(0), "");
    EXPECT_DEATH(touch_in_child(1), "");
    ::testing::GTEST_FLAG(death_test_style) = style;
    expect_contents(p, 1);  // the parent is unaffected
    EXPECT_EQ(p.fills_of(1), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, VmDeathTest, ::testing::ValuesIn(all_configs()), config_name);

// vm.max_map_count: only protection-based paths split mappings per page.
class MaxMapCountDeathTest : public ::testing::Test {
protected:
    static long limit() {
        long value = 0;
        std::ifstream("/proc/sys/vm/max_map_count") >> value;
        return value;
    }

    // An mprotect space with every other page installed (each one a
    // mapping of its own) until the kernel refuses one.
    struct at_the_limit {
        std::unique_ptr<pager> p;
        std::unique_ptr<fault_space> space;
        std::size_t installed = 0;  // pages 0, 2, 4, ...
        std::optional<steppe::error> refused;
    };
    static at_the_limit install_to_the_limit() {
        at_the_limit l;
        const std::size_t pages = static_cast<std::size_t>(limit()) * 2 + 4096;
        l.p = std::make_unique<pager>(pages);
        l.space = fault_space::create(backend_kind::mprotect, &pager::fill, l.p.get());
        l.p->base = l.space->reserve(pages * page_size);
        std::vector<std::byte> content(page_size, std::byte{1});
        try {
            for (; 2 * l.installed < pages; ++l.installed) l.space->install(l.p->page(2 * l.installed), content.data());
        } catch (const steppe::error& e) {
            l.refused = e;
        }
        return l;
    }
};

TEST_F(MaxMapCountDeathTest, InstallPastTheLimitThrowsNamingIt) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer's allocator maps memory for new size classes, and at vm.max_map_count no "
                    "mapping can be made: the error message itself could not be allocated";
#endif
    const at_the_limit l = install_to_the_limit();
    ASSERT_TRUE(l.refused) << "installed " << l.installed << " separate pages without reaching vm.max_map_count";
    EXPECT_EQ(l.refused->code(), errc::io);
    EXPECT_NE(std::string(l.refused->what()).find("vm.max_map_count"), std::string::npos) << l.refused->what();
    EXPECT_NE(std::string(l.refused->what()).find("mprotect"), std::string::npos) << l.refused->what();
    EXPECT_GT(l.installed, 1000u);
}

// A load ahead (fill_ahead) that meets the limit gives the page up, where a
// touch would end the process: the loader must not end a program that may
// never touch that page.
TEST_F(MaxMapCountDeathTest, FillAheadPastTheLimitGivesThePageUp) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer's allocator cannot map memory at vm.max_map_count (see above)";
#endif
    const at_the_limit l = install_to_the_limit();
    ASSERT_TRUE(l.refused) << "reached no limit";
    const std::uintptr_t beyond = l.p->page(2 * l.installed + 4);
    EXPECT_EQ(l.space->fill_ahead(beyond), fault_space::ahead::refused);
    EXPECT_TRUE(l.space->is_missing(beyond));
    EXPECT_EQ(l.space->stats().filled_ahead, 0u);
}

TEST_F(MaxMapCountDeathTest, FaultPastTheLimitExitsWithAClearLine) {
    const std::size_t pages = static_cast<std::size_t>(limit()) * 2 + 4096;
    EXPECT_EXIT(
        {
            pager p(pages);
            auto space = fault_space::create(backend_kind::mprotect, &pager::fill, &p);
            p.base = space->reserve(pages * page_size);
            for (std::size_t i = 0; i < pages; i += 2) (void)load(p.page(i), 0);
            std::_Exit(0);
        },
        ::testing::ExitedWithCode(fatal_exit_status), "mprotect failed in the page-fault handler.*vm.max_map_count");
}

// The environment and the choice of variants.

errc error_code_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const steppe::error& e) {
        return e.code();
    }
    ADD_FAILURE() << "no error";
    return errc::corrupt;
}

TEST(VmChoice, BackendFromEnvironment) {
    {
        scoped_env env("STEPPE_FAULT_BACKEND", "mprotect");
        EXPECT_EQ(choose_backend(backend_kind::uffd), backend_kind::mprotect);
    }
    {
        scoped_env env("STEPPE_FAULT_BACKEND", "uffd");
        EXPECT_EQ(choose_backend(backend_kind::mprotect), backend_kind::uffd);
    }
    {
        scoped_env env("STEPPE_FAULT_BACKEND", "fast");
        EXPECT_EQ(error_code_of([] { choose_backend(backend_kind::uffd); }), errc::invalid_argument);
    }
    {
        scoped_env env("STEPPE_FAULT_BACKEND", "");
        EXPECT_EQ(choose_backend(backend_kind::mprotect), backend_kind::mprotect);
        EXPECT_EQ(choose_backend(backend_kind::uffd), kernel().uffd ? backend_kind::uffd : backend_kind::mprotect);
    }
}

TEST(VmChoice, TrackingFromEnvironmentAndKernel) {
    scoped_env unset("STEPPE_WRITE_TRACKING", "");
    const auto noop = [](void*, std::uintptr_t, std::byte*) noexcept { return true; };
    EXPECT_EQ(fault_space::create(backend_kind::mprotect, noop, nullptr)->tracking(), tracking_kind::mprotect);
    EXPECT_EQ(error_code_of([&] { fault_space::create(backend_kind::mprotect, noop, nullptr, tracking_kind::wp_sync); }),
              errc::unsupported);
    EXPECT_EQ(error_code_of([&] { fault_space::create(backend_kind::uffd, nullptr, nullptr); }), errc::invalid_argument);
    if (!kernel().uffd) GTEST_SKIP() << kernel().uffd_problem;
    EXPECT_EQ(fault_space::create(backend_kind::uffd, noop, nullptr)->tracking(), supported_tracking(backend_kind::uffd).front());
    for (tracking_kind tracking : supported_tracking(backend_kind::uffd)) {
        scoped_env env("STEPPE_WRITE_TRACKING", to_string(tracking));
        EXPECT_EQ(fault_space::create(backend_kind::uffd, noop, nullptr)->tracking(), tracking);
    }
    scoped_env env("STEPPE_WRITE_TRACKING", "cards");
    EXPECT_EQ(error_code_of([&] { fault_space::create(backend_kind::uffd, noop, nullptr); }), errc::invalid_argument);
}

TEST(VmChoice, KernelSupportIsConsistent) {
    const kernel_support& k = kernel();
    std::printf("kernel: uffd %d (%s), uffd_wp %d, wp_async %d, pagemap_scan %d, features %#llx\n", k.uffd,
                k.uffd_problem.c_str(), k.uffd_wp, k.wp_async, k.pagemap_scan,
                static_cast<unsigned long long>(k.uffd_features));
    EXPECT_TRUE(!k.wp_async || k.uffd_wp);
    EXPECT_TRUE(!k.uffd_wp || k.uffd);
    EXPECT_EQ(k.uffd, k.uffd_problem.empty());
    EXPECT_EQ(supported_tracking(backend_kind::mprotect), std::vector<tracking_kind>{tracking_kind::mprotect});
    const auto uffd_variants = supported_tracking(backend_kind::uffd);
    EXPECT_EQ(uffd_variants.size(), k.uffd ? 1u + k.uffd_wp + (k.wp_async && k.pagemap_scan) : 0u);
}

TEST(VmCrossBackend, UffdAndMprotectSpacesSideBySide) {
    pager pu(8, 3), pm(8, 4);
    auto u = fault_space::create(choose_backend(backend_kind::uffd), &pager::fill, &pu);
    auto m = fault_space::create(backend_kind::mprotect, &pager::fill, &pm);
    pu.base = u->reserve(8 * page_size);
    pm.base = m->reserve(8 * page_size);
    std::thread other([&] {
        for (std::size_t i = 0; i < 8; ++i) expect_contents(pm, i);
    });
    for (std::size_t i = 0; i < 8; ++i) expect_contents(pu, i);
    other.join();
    store(pm.page(1), 0, 1);
    store(pu.page(2), 0, 1);
    EXPECT_EQ(m->take_dirty(), std::vector<std::uintptr_t>{pm.page(1)});
    EXPECT_EQ(u->take_dirty(), std::vector<std::uintptr_t>{pu.page(2)});
}

}  // namespace
