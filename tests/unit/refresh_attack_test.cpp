// store::refresh of a read-only page-engine store (the refresh in place:
// page_engine::refresh_in_place, storage::changed_since, pager::move_to)
// attacked from outside, on a file store and on a store in PostgreSQL, by
// what the first tests of it did not do:
//   - a reader under a small resident budget (eviction, the cooling pool on
//     and off), with the mprotect backend as well as the default one, whose
//     pages are a random mix of resident, cooling and evicted when it
//     refreshes;
//   - several threads walking the store between refreshes;
//   - a writer that runs free, checkpointing by itself (small
//     checkpoint_bytes) while the reader refreshes as fast as it can;
//   - types the writer first uses after the reader opened, std containers on
//     steppe::allocator, virtual classes, roots removed and made again with
//     other types;
//   - refreshes with nothing new, and after a checkpoint only;
//   - compaction under a reader (PostgreSQL: allowed, the reader refreshes
//     onto the compacted store; files: refused while the reader is open);
//   - a small address space, so that the refresh's retired units push the
//     store into address-space reuse rounds;
//   - a refresh whose open fails (the store stays on its snapshot);
//   - two readers of one store in one process;
//   - another store renamed over the name (the refresh opens it again);
//   - a writer killed at any instant, and the next writer after it.
// It found one bug, fixed since (cooling::claim): with the cooling pool, a
// page the ring named twice after a refresh's discards could get a second
// cooling slot (MprotectCoolingReaderFollowsEveryCommit,
// CoolingThreadsReadTheCommitAfterRefreshes).
// Each walk compares everything with a fingerprint the writer stored and
// with a model the reader keeps by replaying the writer's random choices.
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/open_internal.hpp"
#include "support/child.hpp"
#include "support/expect_error.hpp"
#include "support/fault_env.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;

namespace refresh_attack {

// ---- The stored world ----------------------------------------------------------

struct Node {
    long key;
    long value;
    Node* next;
    char pad[40];  // 64 bytes: 64 to a page
};

constexpr int buckets = 24, arrays = 6;

// The large arrays, each `long[n]` with n in its element 0. The holder is
// big enough to sit on a page of its own, which does not change when an
// array is replaced at the same address by one of another size: a kept page
// pointing into a unit that changed shape.
struct Arrays {
    long* a[arrays];
    char pad[3000];
};

struct World {
    long round;
    std::uint64_t fingerprint;  // of everything below, as the writer left it
    Node* bucket[buckets];
    Arrays* arrays;
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

std::uint64_t fingerprint_of(const World& w) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (int b = 0; b < buckets; ++b)
        for (const Node* n = w.bucket[b]; n; n = n->next) h = mix(mix(h, std::uint64_t(n->key)), std::uint64_t(n->value));
    for (int i = 0; i < arrays; ++i) {
        const long* a = w.arrays ? w.arrays->a[i] : nullptr;
        if (!a) {
            h = mix(h, 0x5eed);
            continue;
        }
        for (long j = 0; j < a[0]; ++j) h = mix(h, std::uint64_t(a[j]));
    }
    return h;
}

// The same content as plain values.
struct plain_world {
    std::vector<std::map<long, long>> bucket = std::vector<std::map<long, long>>(buckets);
    std::vector<std::vector<long>> array = std::vector<std::vector<long>>(arrays);  // empty: none
};

// How a round is drawn.
struct mix_of_ops {
    int max_ops = 40;
    long max_array = 6000;   // longs in a large array
    int array_share = 2;     // of 10 draws, this many replace or touch an array
    long initial_nodes = 0;  // round 1 fills the buckets with this many nodes, bucket by bucket
};

struct op {
    enum kind { insert, erase, update, replace_array, touch_array, drop_array } what;
    int where;
    long key, value;
};

struct round_plan {
    std::vector<op> ops;
    bool checkpoint_first = false;
};

round_plan plan_round(std::mt19937_64& rng, const plain_world& m, long round, const mix_of_ops& how) {
    round_plan p;
    p.checkpoint_first = round % 5 == 3;
    long next_key = round * 100000;
    if (round == 1) {
        for (long k = 0; k < how.initial_nodes; ++k)
            p.ops.push_back({op::insert, int(k * buckets / std::max(how.initial_nodes, 1L)), next_key++, long(rng() % 1000000)});
        for (int i = 0; i < arrays; ++i)
            p.ops.push_back({op::replace_array, i, long(1 + rng() % std::uint64_t(how.max_array)), long(rng() % 1000)});
    }
    const int count = 1 + int(rng() % std::uint64_t(how.max_ops));
    for (int i = 0; i < count; ++i) {
        const int b = int(rng() % buckets);
        const int draw = int(rng() % 10);
        if (draw < how.array_share) {
            const int a = int(rng() % arrays);
            switch (rng() % 6) {
                case 0: case 1: case 2:  // another size: its pages change unit (or become small chunks)
                    p.ops.push_back({op::replace_array, a, long(1 + rng() % std::uint64_t(how.max_array)), long(rng() % 1000)});
                    break;
                case 3:  // the same size, other values: the same unit, new images
                    p.ops.push_back({op::replace_array, a, m.array[a].empty() ? 100 : long(m.array[a].size()),
                                     long(rng() % 1000)});
                    break;
                case 4: p.ops.push_back({op::touch_array, a, long(rng() % 1000000), long(rng() % 1000)}); break;
                default: p.ops.push_back({op::drop_array, a, 0, 0});
            }
            continue;
        }
        const auto& bucket = m.bucket[b];
        switch (draw % 3) {
            case 0: p.ops.push_back({op::insert, b, next_key++, long(rng() % 1000000)}); break;
            case 1:
                if (!bucket.empty())
                    p.ops.push_back({op::erase, b, std::next(bucket.begin(), long(rng() % bucket.size()))->first, 0});
                break;
            default:
                if (!bucket.empty())
                    p.ops.push_back({op::update, b, std::next(bucket.begin(), long(rng() % bucket.size()))->first,
                                     long(rng() % 1000000)});
        }
    }
    // Whole pages of nodes freed at once now and then.
    if (round % 4 == 2) {
        const int b = int(rng() % buckets);
        for (const auto& [key, value] : m.bucket[b]) p.ops.push_back({op::erase, b, key, 0});
    }
    return p;
}

// An array of n longs as the writer fills it: n, then base + j.
long element(long n, long base, long j) { return j == 0 ? n : base * 7919 + j; }

void apply(plain_world& m, const round_plan& p) {
    for (const op& o : p.ops) {
        auto& bucket = m.bucket[std::size_t(o.where)];
        auto& array = m.array[std::size_t(o.where)];
        switch (o.what) {
            case op::insert: bucket[o.key] = o.value; break;
            case op::erase: bucket.erase(o.key); break;
            case op::update:
                if (auto it = bucket.find(o.key); it != bucket.end()) it->second = o.value;
                break;
            case op::replace_array:
                array.resize(std::size_t(o.key));
                for (long j = 0; j < o.key; ++j) array[std::size_t(j)] = element(o.key, o.value, j);
                break;
            case op::touch_array:
                if (array.size() > 1) array[1 + std::size_t(o.key) % (array.size() - 1)] = o.value;
                break;
            case op::drop_array: array.clear(); break;
        }
    }
}

Node** find(Node** head, long key) {
    for (; *head; head = &(*head)->next)
        if ((*head)->key == key) return head;
    return nullptr;
}

// An op on large array `a` (its slot in the world's holder).
void apply_to_array(store& s, long*& a, const op& o) {
    switch (o.what) {
        case op::replace_array:
            if (a) s.destroy(a, std::size_t(a[0]));
            a = s.make_array<long>(std::size_t(o.key));
            for (long j = 0; j < o.key; ++j) a[j] = element(o.key, o.value, j);
            break;
        case op::touch_array:
            if (a && a[0] > 1) a[1 + o.key % (a[0] - 1)] = o.value;
            break;
        case op::drop_array:
            if (a) s.destroy(a, std::size_t(a[0]));
            a = nullptr;
            break;
        default: break;
    }
}

void apply(store& s, World& w, const round_plan& p) {
    if (!w.arrays) w.arrays = s.make<Arrays>();
    for (const op& o : p.ops) {
        Node** head = &w.bucket[o.where];
        switch (o.what) {
            case op::insert: *head = s.make<Node>(Node{o.key, o.value, *head, {}}); break;
            case op::erase:
                if (Node** at = find(head, o.key)) {
                    Node* gone = *at;
                    *at = gone->next;
                    s.destroy(gone);
                }
                break;
            case op::update:
                if (Node** at = find(head, o.key)) (*at)->value = o.value;
                break;
            case op::replace_array:
            case op::touch_array:
            case op::drop_array: apply_to_array(s, w.arrays->a[o.where], o); break;  // `where` is an array's index here
        }
    }
}

// What the reader sees must be the plain model, whole.
::testing::AssertionResult equals(const World& w, const plain_world& want) {
    for (int b = 0; b < buckets; ++b) {
        std::map<long, long> seen;
        for (const Node* n = w.bucket[b]; n; n = n->next) seen[n->key] = n->value;
        if (seen != want.bucket[std::size_t(b)])
            return ::testing::AssertionFailure() << "bucket " << b << " holds " << seen.size() << " nodes, the model "
                                                 << want.bucket[std::size_t(b)].size() << " (or other values)";
    }
    for (int i = 0; i < arrays; ++i) {
        const long* a = w.arrays ? w.arrays->a[i] : nullptr;
        std::vector<long> seen = a ? std::vector<long>(a, a + a[0]) : std::vector<long>{};
        if (seen != want.array[std::size_t(i)])
            return ::testing::AssertionFailure() << "large array " << i << " holds " << seen.size()
                                                 << " longs, the model " << want.array[std::size_t(i)].size()
                                                 << " (or other values)";
    }
    return ::testing::AssertionSuccess();
}

// The world at `round`: the round, the writer's fingerprint, the model.
::testing::AssertionResult sees(store& r, const plain_world& want, long round) {
    const World* w = r.find_root<World>("world");
    if (!w) return ::testing::AssertionFailure() << "no root 'world'";
    if (w->round != round) return ::testing::AssertionFailure() << "at round " << w->round << ", not " << round;
    const std::uint64_t f = fingerprint_of(*w);
    if (f != w->fingerprint)
        return ::testing::AssertionFailure() << "round " << round << ": the walk's fingerprint differs from the "
                                             << "writer's (a page kept or mixed from another commit)";
    return equals(*w, want);
}

// Touches a random part of the world, so that what is resident, cooling and
// evicted when the next refresh comes is a random mix.
std::uint64_t touch_some(const World& w, std::mt19937_64& rng) {
    std::uint64_t sum = 0;
    for (int b = 0; b < buckets; ++b)
        if (rng() % 3 == 0)
            for (const Node* n = w.bucket[b]; n; n = n->next) sum += std::uint64_t(n->value);
    for (int i = 0; i < arrays; ++i)
        if (const long* a = w.arrays ? w.arrays->a[i] : nullptr; a && rng() % 2 == 0) sum += std::uint64_t(a[a[0] - 1]);
    return sum;
}

// ---- The writer, in another process -------------------------------------------

struct writer_plan {
    std::uint64_t seed = 1;
    long rounds = 20;
    mix_of_ops how;
    bool lockstep = true;   // report and wait for go after every commit; else run free after the first go
    bool checkpoints = true;  // the plan's checkpoints, while the reader is at the newest commit (lockstep only)
    open_options options;
};

// A plan of `rounds` rounds from `seed` over `nodes` first nodes.
writer_plan plan_of(std::uint64_t seed, long rounds, long nodes) {
    writer_plan p;
    p.seed = seed;
    p.rounds = rounds;
    p.how.initial_nodes = nodes;
    return p;
}

// Stamps the world as round `round` (its number and fingerprint), commits
// and reports, waiting for the test's go.
void commit_and_report(store& s, World& w, long round, test::child& me) {
    w.round = round;
    w.fingerprint = fingerprint_of(w);
    s.commit();
    me.report_and_wait();
}

// Commits an empty world and reports; then runs the rounds. Lockstep:
// reports after each commit and waits. Free: runs them all, sends its
// checkpoint count and reports once more.
test::child run_writer(const std::string& where, const writer_plan& plan) {
    return test::child([=](test::child& me) {
        auto s = store::open(where, plan.options);
        World* w = s.root<World>("world");
        w->fingerprint = fingerprint_of(*w);
        s.commit();
        me.report_and_wait();
        std::mt19937_64 rng(plan.seed);
        plain_world plain;
        for (long round = 1; round <= plan.rounds; ++round) {
            const round_plan p = plan_round(rng, plain, round, plan.how);
            if (plan.lockstep && plan.checkpoints && p.checkpoint_first) s.checkpoint();
            apply(plain, p);
            apply(s, *w, p);
            w->round = round;
            w->fingerprint = fingerprint_of(*w);
            s.commit();
            if (plan.lockstep) me.report_and_wait();
        }
        if (!plan.lockstep) {
            me.send(s.stats().checkpoints);
            me.report_and_wait();
        }
        return 0;
    });
}

// The reader's side of run_writer: the model at each round.
struct follower {
    explicit follower(const writer_plan& plan) : plan_(plan), rng_(plan.seed) {}
    const plain_world& at(long round) {
        for (; round_ < round; ++round_) apply(plain_, plan_round(rng_, plain_, round_ + 1, plan_.how));
        return plain_;
    }

private:
    writer_plan plan_;
    std::mt19937_64 rng_;
    plain_world plain_;
    long round_ = 0;
};

using kind = test::store_kind;

class RefreshAttack : public test::file_or_pg_test {
protected:
    // A lockstep writer of `rounds` rounds and a reader under a 1 MiB
    // budget (with or without cooling) whose three threads walk everything
    // twice between its refreshes (threads_walk).
    void threads_follow(long rounds, bool cooling);
    // The writer's next round: its go and report, the reader's refresh,
    // and everything the reader sees and checks.
    void next_round(store& r, follower& model, test::child& writer, long round);
    // A reader under a 1 MiB budget, with or without the cooling pool.
    store budgeted_reader(bool cooling) const {
        open_options o;
        o.resident_budget = 1ull << 20;
        o.cooling = cooling;
        return open_reader_with(o);
    }
    store open_reader_with(const open_options& base) const {
        open_options o = base;
        o.read_only = true;
        o.create = false;
        return store::open(where, o);
    }

    // A lockstep writer and a reader with `ro`: after each commit the reader
    // refreshes, walks everything, checks itself, and touches a random part;
    // every fourth round it runs an address-space reuse round too.
    void follow_every_commit(writer_plan plan, const open_options& ro) {
        if (GetParam() == kind::postgresql) plan.rounds = plan.rounds * 2 / 3;  // its commits cost more
        test::child writer = run_writer(where, plan);
        ASSERT_TRUE(writer.wait_for_report());
        store r = open_reader_with(ro);
        follower model(plan);
        std::mt19937_64 touch(plan.seed ^ 0x7f);
        for (long round = 1; round <= plan.rounds; ++round) {
            ASSERT_NO_FATAL_FAILURE(next_round(r, model, writer, round));
            touch_some(*r.find_root<World>("world"), touch);
            // Now and then an address-space reuse round between refreshes
            // (every page dropped, arenas unused for an epoch reclaimed).
            if (round % 4 == 0) r.reuse_address_space();
        }
        const store_stats st = r.stats();
        if (ro.resident_budget) {
            EXPECT_GT(st.evictions, 0u) << "the test needs a store larger than the reader's budget";
            if (ro.cooling) {
                EXPECT_GT(st.cooled_pages, 0u) << "the test needs pages cooling";
            }
        }
        writer.go();
        EXPECT_EQ(writer.exit_code(), 0);
    }
};

// ---- 1, 2. Budgets, cooling, backends -----------------------------------------

writer_plan budget_plan(std::uint64_t seed) {
    writer_plan p;
    p.seed = seed;
    p.rounds = 12;
    p.how.initial_nodes = 16000;  // 250 pages of nodes, and up to 6 arrays of 12 pages: over 1 MiB
    p.how.max_ops = 60;
    p.options.durable = false;
    return p;
}

void RefreshAttack::next_round(store& r, follower& model, test::child& writer, long round) {
    writer.go();
    ASSERT_TRUE(writer.wait_for_report()) << "round " << round;
    r.refresh();
    ASSERT_TRUE(sees(r, model.at(round), round)) << "round " << round;
    const std::vector<std::string> findings = r.check();
    ASSERT_TRUE(findings.empty()) << "round " << round << ": " << findings.front();
}

TEST_P(RefreshAttack, ABudgetedReaderWithCoolingFollowsEveryCommit) {
    open_options ro;
    ro.resident_budget = 1ull << 20;
    ro.cooling = true;
    follow_every_commit(budget_plan(101), ro);
}

TEST_P(RefreshAttack, MprotectReaderUnderABudgetFollowsEveryCommit) {
    open_options ro;
    ro.resident_budget = 1ull << 20;
    ro.backend = fault_backend::mprotect;
    follow_every_commit(budget_plan(202), ro);
}

// A reader with open_options::cooling checks clean after refreshes in
// place (follow_every_commit checks it each round). It did not before cooling::claim refused a page that has an entry:
// "residency: C1: slot N holds page P, whose entry names none" at round 2-5
// on both stores and both backends. pager::move_to discards resident pages
// but leaves their entries in the residency ring (residency.hpp allows
// stale ones), the walk after the refresh faults them again and fill_page
// records them again, so the ring named such a page twice; once P cooled
// (slot S1), its second entry reached pager::drop_clean, whose claim gave
// P a second slot S2 before evict_clean found P missing, and settle then
// zeroed P's entry: S1 stuck, P's cooled bytes lost.
TEST_P(RefreshAttack, MprotectCoolingReaderFollowsEveryCommit) {
    open_options ro;
    ro.resident_budget = 2ull << 20;
    ro.cooling = true;
    ro.backend = fault_backend::mprotect;
    writer_plan p = budget_plan(303);
    p.rounds = 10;
    p.how.initial_nodes = 30000;  // 470 pages of nodes: well over the 2 MiB
    follow_every_commit(p, ro);
}

// ---- 4. Threads between refreshes ----------------------------------------------

// Threads walk everything at once between refreshes (each in its own order:
// buckets from its own start, arrays backwards for odd threads), `passes`
// times; each walk must give the model's sum. The refresh itself runs with
// no other thread touching the store.
void threads_walk(store& r, const writer_plan& plan, test::child& writer, int threads, int passes, int stride = 7) {
    follower model(plan);
    for (long round = 1; round <= plan.rounds; ++round) {
        writer.go();
        ASSERT_TRUE(writer.wait_for_report()) << "round " << round;
        r.refresh();
        const World* w = r.find_root<World>("world");
        ASSERT_NE(w, nullptr);
        ASSERT_EQ(w->round, round);
        std::vector<std::vector<std::uint64_t>> seen(static_cast<std::size_t>(threads),
                                                     std::vector<std::uint64_t>(static_cast<std::size_t>(passes)));
        std::vector<std::thread> walkers;
        for (int t = 0; t < threads; ++t)
            walkers.emplace_back([&, t] {
                for (int pass = 0; pass < passes; ++pass) {
                    std::uint64_t h = 0;
                    for (int k = 0; k < buckets; ++k) {
                        const int b = (k + t * stride) % buckets;
                        for (const Node* n = w->bucket[b]; n; n = n->next)
                            h += mix(std::uint64_t(n->key), std::uint64_t(n->value));
                    }
                    for (int k = 0; k < arrays; ++k) {
                        const long* a = w->arrays->a[t % 2 ? arrays - 1 - k : k];
                        if (a)
                            for (long j = a[0] - 1; j >= 0; --j) h += mix(std::uint64_t(j), std::uint64_t(a[j]));
                    }
                    seen[std::size_t(t)][std::size_t(pass)] = h;
                }
            });
        for (auto& t : walkers) t.join();
        std::uint64_t want = 0;
        const plain_world& m = model.at(round);
        for (int b = 0; b < buckets; ++b)
            for (const auto& [key, value] : m.bucket[std::size_t(b)]) want += mix(std::uint64_t(key), std::uint64_t(value));
        for (int i = 0; i < arrays; ++i)
            for (std::size_t j = 0; j < m.array[std::size_t(i)].size(); ++j)
                want += mix(std::uint64_t(j), std::uint64_t(m.array[std::size_t(i)][j]));
        int wrong = 0;
        for (int t = 0; t < threads; ++t)
            for (int pass = 0; pass < passes; ++pass)
                if (seen[std::size_t(t)][std::size_t(pass)] != want) {
                    ++wrong;
                    ADD_FAILURE() << "round " << round << ": thread " << t << ", walk " << pass
                                  << " read other values than the commit holds";
                }
        ASSERT_TRUE(sees(r, m, round)) << "round " << round << " (" << wrong << " of the threads' walks were wrong)";
        ASSERT_EQ(wrong, 0) << "round " << round << ": the wrong values were read but did not stay";
        const std::vector<std::string> findings = r.check();
        ASSERT_TRUE(findings.empty()) << "round " << round << ": " << findings.front();
    }
    EXPECT_GT(r.stats().evictions, 0u);
}

void RefreshAttack::threads_follow(long rounds, bool cooling) {
    writer_plan plan = budget_plan(404);
    plan.rounds = rounds;
    test::child writer = run_writer(where, plan);
    ASSERT_TRUE(writer.wait_for_report());
    store r = budgeted_reader(cooling);
    threads_walk(r, plan, writer, 3, 2);
    if (HasFatalFailure()) return;  // the writer waits for a go that does not come: killed by its destructor
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// Without cooling (with it, see CoolingThreadsReadTheCommitAfterRefreshes).
TEST_P(RefreshAttack, ThreadsWalkTheStoreBetweenRefreshes) {
    threads_follow(GetParam() == kind::postgresql ? 6 : 10, false);
}

// Threads reading a cooling reader between refreshes read what the commit
// holds. Before cooling::claim refused a page that has an entry (see
// MprotectCoolingReaderFollowsEveryCommit), a thread faulting P between
// another's claim of S2 and its settle took the entry naming S2 and copied
// bytes(S2), another page's, as P's: seen in 3 of 30 runs of 10 rounds
// (wrong values twice, a SIGSEGV once), never without cooling or without
// the refreshes.
TEST_P(RefreshAttack, CoolingThreadsReadTheCommitAfterRefreshes) {
    threads_follow(GetParam() == kind::postgresql ? 20 : 60, true);
}

// ---- 6. A writer that runs free and checkpoints by itself ----------------------

// The writer commits as fast as it can with a small checkpoint_bytes, and
// pauses at each due checkpoint until the reader is at its newest commit
// (checkpoint_wait), so checkpoints run under the reader's feet while it
// walks and between its refreshes; the reader refreshes whenever a commit
// came, at whatever round that is, and must always see one whole commit.
TEST_P(RefreshAttack, RefreshesBesideAFreeWriterThatCheckpoints) {
    writer_plan plan = plan_of(606, 60, 3000);
    plan.lockstep = false;
    plan.how.max_array = 3000;
    plan.options.durable = false;
    plan.options.checkpoint_bytes = 64 << 10;
    plan.options.checkpoint_wait = std::chrono::seconds(20);
    test::child writer = run_writer(where, plan);
    ASSERT_TRUE(writer.wait_for_report());
    store r = budgeted_reader(true);
    follower model(plan);
    writer.go();
    long at = 0, refreshes = 0, rounds_seen = 0;
    while (at < plan.rounds) {
        ASSERT_TRUE(r.wait_for_commit(std::chrono::seconds(60))) << "no commit after round " << at;
        r.refresh();
        ++refreshes;
        const World* w = r.find_root<World>("world");
        ASSERT_NE(w, nullptr);
        ASSERT_GE(w->round, at) << "a refresh went back";
        if (w->round != at) ++rounds_seen;
        at = w->round;
        ASSERT_TRUE(sees(r, model.at(at), at)) << "round " << at << ", refresh " << refreshes;
    }
    const std::vector<std::string> findings = r.check();
    EXPECT_TRUE(findings.empty()) << findings.front();
    std::uint64_t checkpoints = 0;
    ASSERT_TRUE(writer.receive(checkpoints));  // sent before its report
    ASSERT_TRUE(writer.wait_for_report());
    if (GetParam() == kind::file) {
        EXPECT_GT(checkpoints, 0u) << "the writer never checkpointed";
    }
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
    std::printf("    %ld refreshes, %ld distinct rounds seen, %llu writer checkpoints\n", refreshes, rounds_seen,
                static_cast<unsigned long long>(checkpoints));
}

// ---- 5, 7. New types, containers, virtual classes, roots that change type ------

struct Shape {
    virtual ~Shape() = default;
    virtual long kind() const { return 0; }
    virtual long area() const { return -1; }
    long id = 0;
    STEPPE_FIELDS(id)
};
struct Square : Shape {
    long kind() const override { return 1; }
    long area() const override { return side * side; }
    long side = 0;
    STEPPE_BASES(Shape)
    STEPPE_FIELDS(side)
};
struct Rect : Shape {
    long kind() const override { return 2; }
    long area() const override { return w * h; }
    long w = 0, h = 0;
    STEPPE_BASES(Shape)
    STEPPE_FIELDS(w, h)
};
// First used in a later commit than the reader's open.
struct Tri : Shape {
    long kind() const override { return 3; }
    long area() const override { return base * height / 2; }
    long base = 0, height = 0;
    char pad[200];
    STEPPE_BASES(Shape)
    STEPPE_FIELDS(base, height, pad)
};

using Names = steppe::map<long, steppe::string>;
using Shapes = steppe::vector<Shape*>;
using Texts = steppe::vector<steppe::string>;

// A type the reader's program knows but the store has not seen when the
// reader opens.
struct Late {
    long x;
    Late* self;
    steppe::unordered_map<long, long> squares;
    steppe::list<steppe::string> words;
    STEPPE_FIELDS(x, self, squares, words)
};

std::string text(long k, long step) {
    std::string s = "n" + std::to_string(k) + "@" + std::to_string(step);
    if (k % 3 == 0) s += std::string(std::size_t(20 + k % 50), char('a' + k % 26));  // outside the string object
    return s;
}

Shape* make_shape(store& s, long i, long step) {
    Shape* sh;
    switch ((i + step) % (step >= 3 ? 3 : 2)) {
        case 0: {
            auto* q = s.make<Square>();
            q->side = i + step;
            sh = q;
            break;
        }
        case 1: {
            auto* r = s.make<Rect>();
            r->w = i + 1;
            r->h = step + 2;
            sh = r;
            break;
        }
        default: {
            auto* t = s.make<Tri>();
            t->base = 2 * i + 2;
            t->height = step + 1;
            sh = t;
        }
    }
    sh->id = i;
    return sh;
}
long area_of(long i, long step) {
    switch ((i + step) % (step >= 3 ? 3 : 2)) {
        case 0: return (i + step) * (i + step);
        case 1: return (i + 1) * (step + 2);
        default: return (2 * i + 2) * (step + 1) / 2;
    }
}
long kind_of(long i, long step) { return (i + step) % (step >= 3 ? 3 : 2) + 1; }

// The writer's steps; after each, the reader checks what step_checks says.
constexpr long type_steps = 9;

void writer_step(store& s, long step) {
    switch (step) {
        case 1: {  // a map of strings, a type new to the store
            auto* names = s.root<Names>("names");
            for (long k = 0; k < 600; ++k) (*names)[k].assign(text(k, 1));
            break;
        }
        case 2: {  // virtual classes, new too
            auto* shapes = s.root<Shapes>("shapes");
            for (long i = 0; i < 300; ++i) shapes->push_back(make_shape(s, i, 2));
            break;
        }
        case 3: {  // half the names gone, the rest rewritten; shapes replaced by others, a class new to the store
            auto* names = s.find_root<Names>("names");
            for (long k = 0; k < 600; k += 2) names->erase(k);
            for (long k = 1; k < 600; k += 2) (*names)[k].assign(text(k, 3));
            auto* shapes = s.find_root<Shapes>("shapes");
            for (long i = 0; i < long(shapes->size()); ++i) {
                s.destroy((*shapes)[std::size_t(i)]);
                (*shapes)[std::size_t(i)] = make_shape(s, i, 3);
            }
            break;
        }
        case 4: {  // "names" again, as another type
            auto* names = s.find_root<Names>("names");
            names->clear();
            s.destroy(names);
            s.remove_root("names");
            auto* texts = s.root<Texts>("names");
            for (long k = 0; k < 400; ++k) texts->emplace_back(text(k, 4));
            break;
        }
        case 5: {  // a type first used now, holding containers
            auto* late = s.root<Late>("late");
            late->x = 5;
            late->self = late;
            for (long k = 0; k < 500; ++k) late->squares[k] = k * k;
            for (long k = 0; k < 50; ++k) late->words.emplace_back(text(k, 5));
            break;
        }
        case 6: {  // shapes gone whole, the root too; the vector of texts grows past its buffer
            auto* shapes = s.find_root<Shapes>("shapes");
            for (Shape* sh : *shapes) s.destroy(sh);
            shapes->clear();
            shapes->shrink_to_fit();
            s.destroy(shapes);
            s.remove_root("shapes");
            auto* texts = s.find_root<Texts>("names");
            for (long k = 400; k < 1500; ++k) texts->emplace_back(text(k, 6));
            break;
        }
        case 7: {  // "shapes" again, now a Late; the old Late changes in place
            auto* late = s.root<Late>("shapes");
            late->x = 7;
            late->self = late;
            late->squares[7] = 49;
            auto* old = s.find_root<Late>("late");
            for (long k = 0; k < 500; k += 5) old->squares.erase(k);
            old->words.pop_front();
            old->x = 77;
            break;
        }
        case 8: {  // "shapes" once more: virtual objects again, after a checkpoint
            s.checkpoint();
            auto* late = s.find_root<Late>("shapes");
            late->squares.clear();
            late->words.clear();
            s.destroy(late);
            s.remove_root("shapes");
            auto* shapes = s.root<Shapes>("shapes");
            for (long i = 0; i < 200; ++i) shapes->push_back(make_shape(s, i, 8));
            break;
        }
        default: {  // nothing but a root removed
            s.remove_root("late");
        }
    }
}

// What the reader must see after `step`.
::testing::AssertionResult step_checks(store& r, long step) {
    auto fail = [&] { return ::testing::AssertionFailure() << "step " << step << ": "; };
    std::map<std::string, std::string> roots;
    for (const root_info& i : r.roots()) roots[i.name] = i.type;
    // names
    if (step >= 1 && step <= 3) {
        const Names* names = r.find_root<Names>("names");
        if (!names) return fail() << "no names";
        if (names->size() != (step < 3 ? 600u : 300u)) return fail() << names->size() << " names";
        for (const auto& [k, v] : *names)
            if ((step >= 3 && k % 2 == 0) || std::string_view(v.data(), v.size()) != text(k, step < 3 ? 1 : 3))
                return fail() << "name " << k << " is '" << std::string_view(v.data(), v.size()) << "'";
    }
    if (step >= 4) {
        try {
            r.find_root<Names>("names");
            return fail() << "names is still a map";
        } catch (const error& e) {
            if (e.code() != errc::type_mismatch) return fail() << e.what();
        }
        const Texts* texts = r.find_root<Texts>("names");
        if (!texts) return fail() << "no texts";
        if (texts->size() != (step < 6 ? 400u : 1500u)) return fail() << texts->size() << " texts";
        for (long k = 0; k < long(texts->size()); ++k) {
            const steppe::string& t = (*texts)[std::size_t(k)];
            if (std::string_view(t.data(), t.size()) != text(k, k < 400 ? 4 : 6)) return fail() << "text " << k;
        }
    }
    // shapes
    const bool has_shapes = (step >= 2 && step <= 5) || step >= 8;
    if (has_shapes) {
        const long shape_step = step < 3 ? 2 : step < 8 ? 3 : 8;
        const Shapes* shapes = r.find_root<Shapes>("shapes");
        if (!shapes) return fail() << "no shapes";
        if (shapes->size() != (shape_step < 8 ? 300u : 200u)) return fail() << shapes->size() << " shapes";
        for (long i = 0; i < long(shapes->size()); ++i) {
            const Shape* sh = (*shapes)[std::size_t(i)];
            if (sh->id != i || sh->kind() != kind_of(i, shape_step) || sh->area() != area_of(i, shape_step))
                return fail() << "shape " << i << ": id " << sh->id << ", kind " << sh->kind() << ", area " << sh->area();
        }
    } else if (roots.count("shapes") && step != 7) {
        return fail() << "a root 'shapes' that was removed";
    }
    if (step == 7) {
        const Late* late = r.find_root<Late>("shapes");
        if (!late || late->x != 7 || late->self != late || late->squares.size() != 1 || late->squares.at(7) != 49)
            return fail() << "'shapes' as a Late";
    }
    // late
    if (step >= 5 && step <= 8) {
        const Late* late = r.find_root<Late>("late");
        if (!late) return fail() << "no late";
        if (late->self != late) return fail() << "late->self";
        if (late->x != (step < 7 ? 5 : 77)) return fail() << "late->x " << late->x;
        if (late->squares.size() != (step < 7 ? 500u : 400u)) return fail() << late->squares.size() << " squares";
        for (const auto& [k, v] : late->squares)
            if (v != k * k || (step >= 7 && k % 5 == 0)) return fail() << "square " << k;
        long k = step < 7 ? 0 : 1;
        for (const steppe::string& w : late->words)
            if (std::string_view(w.data(), w.size()) != text(k++, 5)) return fail() << "word " << k - 1;
        if (k != 50) return fail() << "words end at " << k;
    } else if (r.find_root<Late>("late")) {
        return fail() << "a root 'late' there should be none of";
    }
    return ::testing::AssertionSuccess();
}

TEST_P(RefreshAttack, TypesContainersAndVirtualClassesTheWriterAddsLater) {
    test::child writer([this](test::child& me) {
        open_options o;
        o.durable = false;
        auto s = store::open(where, o);
        World* w = s.root<World>("world");
        for (long k = 0; k < 500; ++k) w->bucket[k % buckets] = s.make<Node>(Node{k, k, w->bucket[k % buckets], {}});
        w->fingerprint = fingerprint_of(*w);
        s.commit();
        me.report_and_wait();
        for (long step = 1; step <= type_steps; ++step) {
            writer_step(s, step);
            commit_and_report(s, *w, step, me);
        }
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    open_options ro;
    ro.resident_budget = 1ull << 20;
    store r = open_reader_with(ro);
    ASSERT_TRUE(step_checks(r, 0));
    for (long step = 1; step <= type_steps; ++step) {
        writer.go();
        ASSERT_TRUE(writer.wait_for_report()) << "step " << step;
        // Asking for a root as a type the store does not have yet: the
        // reader's catalog takes the type, which the refresh must forget.
        if (step == 2) {
            EXPECT_EQ(r.find_root<Late>("nothing"), nullptr);
        }
        if (step == 4) {
            EXPECT_ERROR(errc::type_mismatch, "holds", r.find_root<Late>("names"));
        }
        r.refresh();
        const World* w = r.find_root<World>("world");
        ASSERT_NE(w, nullptr);
        ASSERT_EQ(w->round, step);
        ASSERT_EQ(fingerprint_of(*w), w->fingerprint) << "step " << step;
        ASSERT_TRUE(step_checks(r, step));
        const std::vector<std::string> findings = r.check();
        ASSERT_TRUE(findings.empty()) << "step " << step << ": " << findings.front();
        // The same again after a second refresh with nothing new.
        r.refresh();
        ASSERT_TRUE(step_checks(r, step)) << "(refreshed again with nothing new)";
    }
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- 6. Nothing new; a checkpoint only ------------------------------------------

TEST_P(RefreshAttack, NothingNewOrACheckpointOnlyReloadsNothing) {
    constexpr long nodes = 6000;  // about 94 pages
    test::child writer([this](test::child& me) {
        open_options o;
        o.durable = false;
        o.checkpoint_bytes = 1ull << 40;  // only when asked
        auto s = store::open(where, o);
        World* w = s.root<World>("world");
        for (long k = 0; k < nodes; ++k) w->bucket[k % buckets] = s.make<Node>(Node{k, k, w->bucket[k % buckets], {}});
        w->fingerprint = fingerprint_of(*w);
        s.commit();
        me.report_and_wait();
        s.checkpoint();  // the reader is at the newest commit: it runs
        me.report_and_wait();
        w->bucket[5]->value = -5;
        commit_and_report(s, *w, 1, me);
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    store r = open_reader_with({});
    auto walk = [&](long round) {
        const World* w = r.find_root<World>("world");
        ASSERT_NE(w, nullptr);
        ASSERT_EQ(w->round, round);
        ASSERT_EQ(fingerprint_of(*w), w->fingerprint);
    };
    walk(0);
    const std::uint64_t walked = r.stats().faults;
    ASSERT_GT(walked, 90u);
    // Kept across the refreshes below: in place, a page whose unit did not
    // change keeps its address, and a pointer into it reads what the newer
    // commit holds there (guarantees.md, "Pointers across refresh()").
    const World* kept_world = r.find_root<World>("world");
    const Node* kept_node = kept_world->bucket[5];
    for (int i = 0; i < 5; ++i) {
        EXPECT_FALSE(r.wait_for_commit());
        r.refresh();
        walk(0);
    }
    EXPECT_EQ(r.stats().faults, walked) << "a refresh with nothing new reloaded pages";
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());  // checkpointed
    EXPECT_FALSE(r.wait_for_commit()) << "a checkpoint is no new commit";
    r.refresh();
    walk(0);
    EXPECT_EQ(r.stats().faults, walked) << "a refresh after a checkpoint alone reloaded pages";
    EXPECT_TRUE(r.check().empty());
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    // (Not zero: a store in PostgreSQL hears of the commit by a NOTIFY that
    // may still be on its way.)
    EXPECT_TRUE(r.wait_for_commit(std::chrono::seconds(30)));
    r.refresh();
    walk(1);
    EXPECT_EQ(r.find_root<World>("world")->bucket[5]->value, -5);
    EXPECT_LE(r.stats().faults, walked + 4) << "a one-page commit after a checkpoint reloaded more";
    EXPECT_EQ(r.find_root<World>("world"), kept_world) << "the root moved: the refresh was not in place";
    EXPECT_EQ(kept_node->value, -5) << "a pointer kept across the refresh in place reads the old commit";
    EXPECT_TRUE(r.check().empty());
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- 3. Compaction ---------------------------------------------------------------

TEST_P(RefreshAttack, ACompactionUnderAReader) {
    writer_plan plan = plan_of(707, 8, 6000);
    plan.options.durable = false;
    const long more = 6;  // rounds after the compaction
    // The writer builds the world, closes; compacts (with --collect) while
    // the reader is open; opens again and goes on.
    test::child writer([&](test::child& me) {
        std::mt19937_64 rng(plan.seed);
        plain_world plain;
        long round = 1;
        auto run_rounds = [&](long until, bool wait) {
            auto s = store::open(where, plan.options);
            World* w = s.root<World>("world");
            for (; round <= until; ++round) {
                const round_plan p = plan_round(rng, plain, round, plan.how);
                apply(plain, p);
                apply(s, *w, p);
                w->round = round;
                w->fingerprint = fingerprint_of(*w);
                s.commit();
                if (wait) me.report_and_wait();
            }
        };
        run_rounds(plan.rounds, false);  // closed: checkpointed
        me.report_and_wait();
        std::uint64_t outcome = 0;  // 1: compacted, 2: locked, 3: another error
        try {
            steppe::compact(where, {.collect = true});
            outcome = 1;
        } catch (const error& e) {
            outcome = e.code() == errc::locked ? 2 : 3;
            if (outcome == 3) std::fprintf(stderr, "compact: %s\n", e.what());
        }
        me.send(outcome);
        me.report_and_wait();
        run_rounds(plan.rounds + more, true);
        me.report_and_wait();
        if (GetParam() == kind::file) {  // now that the reader is gone
            try {
                steppe::compact(where, {.collect = true});
                outcome = 1;
            } catch (const error& e) {
                std::fprintf(stderr, "compact: %s\n", e.what());
                outcome = 3;
            }
            me.send(outcome);
            me.report_and_wait();
        }
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    open_options ro;
    ro.resident_budget = 1ull << 20;
    ro.cooling = true;
    std::optional<store> r = open_reader_with(ro);
    follower model(plan);
    ASSERT_TRUE(sees(*r, model.at(plan.rounds), plan.rounds));
    const std::uint64_t pages_before = r->stats().store_pages;
    writer.go();
    std::uint64_t outcome = 0;
    ASSERT_TRUE(writer.receive(outcome));  // sent before its report
    ASSERT_TRUE(writer.wait_for_report());
    if (GetParam() == kind::postgresql) {
        EXPECT_EQ(outcome, 1u) << "a store in PostgreSQL is compacted beside its readers";
        ASSERT_TRUE(sees(*r, model.at(plan.rounds), plan.rounds)) << "the reader keeps its snapshot";
        r->refresh();
        ASSERT_TRUE(sees(*r, model.at(plan.rounds), plan.rounds)) << "on the compacted store";
        EXPECT_LT(r->stats().store_pages, pages_before) << "the compacted store is smaller";
    } else {
        EXPECT_EQ(outcome, 2u) << "a file store a reader has open is not compacted";
        r->refresh();
        ASSERT_TRUE(sees(*r, model.at(plan.rounds), plan.rounds));
    }
    std::vector<std::string> findings = r->check();
    ASSERT_TRUE(findings.empty()) << findings.front();
    for (long round = plan.rounds + 1; round <= plan.rounds + more; ++round) {
        writer.go();
        ASSERT_TRUE(writer.wait_for_report());
        r->refresh();
        ASSERT_TRUE(sees(*r, model.at(round), round)) << "round " << round;
        findings = r->check();
        ASSERT_TRUE(findings.empty()) << "round " << round << ": " << findings.front();
    }
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());  // closed
    if (GetParam() == kind::file) {
        r.reset();
        writer.go();
        ASSERT_TRUE(writer.receive(outcome));
        ASSERT_TRUE(writer.wait_for_report());
        EXPECT_EQ(outcome, 1u) << "with the reader closed, the compaction runs";
        r = open_reader_with(ro);
        ASSERT_TRUE(sees(*r, model.at(plan.rounds + more), plan.rounds + more));
        EXPECT_TRUE(r->check().empty());
    }
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- Address-space reuse run by the refresh -------------------------------------

// The smallest address space (4 MiB: 1024 virtual pages in 64 arenas of 16)
// and arrays of up to 13 pages replaced by arrays of other sizes in every
// round: each refresh retires the units that changed shape, and the
// reserved space passes the point where the refresh starts a reuse round.
TEST_P(RefreshAttack, RefreshesThatRetireUnitsRunAddressSpaceReuse) {
    writer_plan plan = plan_of(909, 14, 20000);
    plan.how.max_array = 6500;
    plan.how.array_share = 8;
    plan.how.max_ops = 30;
    plan.options.durable = false;
    test::child writer = run_writer(where, plan);
    ASSERT_TRUE(writer.wait_for_report());
    open_options ro;
    ro.address_space_limit = 4ull << 20;
    ro.backend = fault_backend::mprotect;
    store r = open_reader_with(ro);
    follower model(plan);
    for (long round = 1; round <= plan.rounds; ++round) ASSERT_NO_FATAL_FAILURE(next_round(r, model, writer, round));
    EXPECT_GT(r.stats().reuse_rounds, 0u) << "the refreshes never crowded the address space";
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- Two readers in one process ---------------------------------------------------

TEST_P(RefreshAttack, TwoReadersInOneProcessMoveIndependently) {
    writer_plan plan = budget_plan(1001);
    plan.rounds = 6;
    plan.checkpoints = false;  // b lags behind: a checkpoint would wait for it
    plan.how.initial_nodes = 4000;
    test::child writer = run_writer(where, plan);
    ASSERT_TRUE(writer.wait_for_report());
    open_options ro;
    ro.resident_budget = 1ull << 20;
    store a = open_reader_with(ro);
    ro.backend = fault_backend::mprotect;
    store b = open_reader_with(ro);
    follower model(plan);
    std::vector<plain_world> past(1, model.at(0));
    long b_at = 0;
    for (long round = 1; round <= plan.rounds; ++round) {
        writer.go();
        ASSERT_TRUE(writer.wait_for_report());
        past.push_back(model.at(round));
        a.refresh();
        ASSERT_TRUE(sees(a, past.back(), round)) << "round " << round;
        ASSERT_TRUE(sees(b, past[std::size_t(b_at)], b_at)) << "b keeps round " << b_at << " while a moves";
        if (round % 2 == 0) {
            b.refresh();
            b_at = round;
            ASSERT_TRUE(sees(b, past.back(), round));
            ASSERT_TRUE(sees(a, past.back(), round));
        }
    }
    EXPECT_TRUE(a.check().empty());
    EXPECT_TRUE(b.check().empty());
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- A refresh that fails ----------------------------------------------------------

// The refresh's open fails (an injected EIO taking the reader's lock): the
// store stays on its snapshot, whole and usable, and the next refresh moves.
TEST_P(RefreshAttack, ARefreshWhoseOpenFailsLeavesTheReaderOnItsSnapshot) {
    if (GetParam() == kind::postgresql) GTEST_SKIP() << "the injected fault is the file system's";
    writer_plan plan = budget_plan(1111);
    plan.rounds = 3;
    plan.how.initial_nodes = 3000;
    test::child writer = run_writer(where, plan);
    ASSERT_TRUE(writer.wait_for_report());
    test::fault_env env;
    open_options ro;
    ro.read_only = true;
    ro.create = false;
    ro.resident_budget = 1ull << 20;
    store r = detail::open_with_env(where, ro, &env);
    follower model(plan);
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    r.refresh();
    ASSERT_TRUE(sees(r, model.at(1), 1));
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    const plain_world at1 = model.at(1);
    env.fail_after(0, EIO);
    bool failed = false;
    try {
        r.refresh();
    } catch (const error& e) {
        failed = true;
        EXPECT_EQ(e.code(), errc::io) << e.what();
    }
    env.clear_faults();
    ASSERT_TRUE(failed) << "the injected fault did not reach the refresh's open";
    ASSERT_TRUE(sees(r, at1, 1)) << "a failed refresh moved the store";
    EXPECT_TRUE(r.check().empty());
    r.refresh();
    ASSERT_TRUE(sees(r, model.at(2), 2));
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    r.refresh();
    ASSERT_TRUE(sees(r, model.at(3), 3));
    EXPECT_TRUE(r.check().empty());
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- Another store under the name: the refresh opens it again ---------------------

// A file store replaced by another one under its name (as compaction's
// rename leaves, or a copy put back): the snapshots cannot be compared
// (storage::changed_since says nullopt), so the refresh opens the store
// again (store_impl::refresh) and shows the other store, whole.
TEST_P(RefreshAttack, AnotherStoreRenamedOverTheNameIsOpenedAgain) {
    if (GetParam() == kind::postgresql) GTEST_SKIP() << "a store in PostgreSQL is not replaced by a rename";
    const std::string other = dir.path("other.db");
    test::child writer([&](test::child& me) {
        open_options o;
        o.durable = false;
        auto fill = [&](const std::string& at, long round, long nodes) {
            auto s = store::open(at, o);
            World* w = s.root<World>("world");
            for (long k = 0; k < nodes; ++k)
                w->bucket[k % buckets] = s.make<Node>(Node{k * round, k, w->bucket[k % buckets], {}});
            w->arrays = s.make<Arrays>();
            w->arrays->a[round % arrays] = s.make_array<long>(std::size_t(500 * round));
            long* a = w->arrays->a[round % arrays];
            for (long j = 0; j < 500 * round; ++j) a[j] = element(500 * round, round, j);
            w->round = round;
            w->fingerprint = fingerprint_of(*w);
            s.commit();
        };
        fill(where, 1, 3000);  // closed: checkpointed
        me.report_and_wait();
        fill(other, 7, 5000);
        for (const char* file : {"", "-wal"})
            if (std::rename((other + file).c_str(), (where + file).c_str()) != 0 && errno != ENOENT) return 1;
        me.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    open_options ro;
    ro.resident_budget = 1ull << 20;
    store r = open_reader_with(ro);
    const World* w = r.find_root<World>("world");
    ASSERT_EQ(w->round, 1);
    ASSERT_EQ(fingerprint_of(*w), w->fingerprint);
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    r.refresh();
    w = r.find_root<World>("world");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->round, 7);
    EXPECT_EQ(fingerprint_of(*w), w->fingerprint);
    long count = 0;
    for (int b = 0; b < buckets; ++b)
        for (const Node* n = w->bucket[b]; n; n = n->next) ++count;
    EXPECT_EQ(count, 5000);
    const std::vector<std::string> findings = r.check();
    EXPECT_TRUE(findings.empty()) << findings.front();
    r.refresh();  // and once more with nothing new
    EXPECT_EQ(r.find_root<World>("world")->round, 7);
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// ---- A writer killed at any instant, and the next one ----------------------------

// A writer that runs free (checkpointing when it may) is killed with
// SIGKILL at whatever instant the test reaches it; the reader refreshes to
// a whole commit; the next writer opens (recovery, its open-time
// checkpoint), goes on from the last commit, and the reader follows it.
TEST_P(RefreshAttack, RefreshesAcrossAKilledWriterAndTheNextOne) {
    writer_plan plan = plan_of(1212, 1000000, 3000);  // until killed
    plan.lockstep = false;
    plan.how.max_array = 3000;
    plan.options.durable = false;
    plan.options.checkpoint_bytes = 64 << 10;
    plan.options.checkpoint_wait = std::chrono::milliseconds(0);
    constexpr long after = 5;  // rounds of the next writer
    // Forked before the reader opens (a child of a process with the store
    // open could not open it itself); it waits for its go.
    test::child next([&](test::child& me) {
        me.report_and_wait();
        open_options o = plan.options;
        o.lock_timeout = std::chrono::seconds(20);  // the killed writer's lock (a PostgreSQL session) goes
        auto s = store::open(where, o);
        World* w = s.root<World>("world");
        const long from = w->round;
        std::mt19937_64 rng(plan.seed);
        plain_world plain;
        for (long round = 1; round <= from; ++round) apply(plain, plan_round(rng, plain, round, plan.how));
        if (fingerprint_of(*w) != w->fingerprint || !equals(*w, plain)) return 3;  // recovery lost or mixed commits
        me.send(std::uint64_t(from));
        for (long round = from + 1; round <= from + after; ++round) {
            const round_plan p = plan_round(rng, plain, round, plan.how);
            apply(plain, p);
            apply(s, *w, p);
            commit_and_report(s, *w, round, me);
        }
        return 0;
    });
    ASSERT_TRUE(next.wait_for_report());
    test::child writer = run_writer(where, plan);
    ASSERT_TRUE(writer.wait_for_report());
    open_options ro;
    ro.resident_budget = 1ull << 20;
    store r = open_reader_with(ro);
    follower model(plan);
    writer.go();
    long at = 0;
    while (at < 8) {
        ASSERT_TRUE(r.wait_for_commit(std::chrono::seconds(60))) << "no commit after round " << at;
        r.refresh();
        at = r.find_root<World>("world")->round;
        ASSERT_TRUE(sees(r, model.at(at), at)) << "round " << at;
    }
    writer.kill();  // at whatever it is doing: a commit, a checkpoint, between them
    r.refresh();
    const long last = r.find_root<World>("world")->round;
    ASSERT_GE(last, at);
    ASSERT_TRUE(sees(r, model.at(last), last)) << "after the kill";
    next.go();
    std::uint64_t from = 0;
    ASSERT_TRUE(next.receive(from)) << "the next writer did not open, or found the store not as committed (exit "
                                    << next.exit_code() << ")";
    ASSERT_GE(long(from), last);
    for (long round = long(from) + 1; round <= long(from) + after; ++round) {
        ASSERT_TRUE(next.wait_for_report()) << "round " << round;
        r.refresh();
        ASSERT_TRUE(sees(r, model.at(round), round)) << "round " << round << " (the next writer's)";
        const std::vector<std::string> findings = r.check();
        ASSERT_TRUE(findings.empty()) << "round " << round << ": " << findings.front();
        next.go();
    }
    EXPECT_EQ(next.exit_code(), 0);
    std::printf("    killed after round %ld (the reader saw %ld), the next writer went on from %llu\n", at, last,
                static_cast<unsigned long long>(from));
}

INSTANTIATE_TEST_SUITE_P(Stores, RefreshAttack, ::testing::Values(kind::file, kind::postgresql),
                         [](const auto& info) { return info.param == kind::file ? "file" : "postgresql"; });

}  // namespace refresh_attack
