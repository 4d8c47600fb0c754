// store::refresh of the page engine moves a read-only store to the newest
// commit in place (page_engine::refresh_in_place, pager::move_to, T15 in
// pager.hpp): the pages the newer commits did not change stay resident, and
// every page they changed (its image, its chunks, its unit) shows the new
// commit. Attacked from outside, on a file store and on a store in
// PostgreSQL: a writer in another process changes values in place, adds and
// frees nodes (pages that appear and pages freed whole), replaces large
// arrays by arrays of other sizes in the same pages (units that change
// shape), and checkpoints while the reader is at its newest commit (a new log
// generation); after each of its commits the reader refreshes and walks
// everything, comparing with a fingerprint the writer stored and with a model
// of its own.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "storage/storage.hpp"
#include "support/child.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;

namespace {

struct Node {
    long key;
    long value;
    Node* next;
    char pad[40];  // 64 bytes: a page holds 64
};

constexpr int buckets = 16, bigs = 4;

struct Model {
    long round;
    std::uint64_t fingerprint;  // of everything below, as the writer left it
    Node* bucket[buckets];
    long* big[bigs];
    long big_count[bigs];
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

// What a walk from the root sees, in a fixed order.
std::uint64_t fingerprint_of(const Model& m) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (int b = 0; b < buckets; ++b)
        for (const Node* n = m.bucket[b]; n; n = n->next) h = mix(mix(h, std::uint64_t(n->key)), std::uint64_t(n->value));
    for (int i = 0; i < bigs; ++i) {
        h = mix(h, std::uint64_t(m.big_count[i]));
        for (long j = 0; j < m.big_count[i]; ++j) h = mix(h, std::uint64_t(m.big[i][j]));
    }
    return h;
}

// The same content as plain values: the model the reader keeps by replaying
// the writer's random choices.
struct plain_model {
    std::vector<std::map<long, long>> bucket = std::vector<std::map<long, long>>(buckets);  // key -> value
    std::vector<std::vector<long>> big = std::vector<std::vector<long>>(bigs);
};

// One round of the writer's changes, applied by `apply` to whatever holds the
// data (the store, or the plain model); the same seed gives the same round.
struct round_plan {
    struct op {
        enum kind { update, insert, erase, replace_big, touch_big } what;
        int where;
        long key, value;
    };
    std::vector<op> ops;
    bool checkpoint_first;
};

round_plan plan_round(std::mt19937_64& rng, const plain_model& m, long round) {
    round_plan p;
    p.checkpoint_first = round % 5 == 3;
    const int count = 1 + int(rng() % 40);
    long next_key = round * 1000;
    for (int i = 0; i < count; ++i) {
        const int b = int(rng() % buckets);
        switch (rng() % 10) {
            case 0: case 1: case 2:
                p.ops.push_back({round_plan::op::insert, b, next_key++, long(rng() % 1000000)});
                break;
            case 3: case 4: {
                if (m.bucket[b].empty()) break;
                auto it = std::next(m.bucket[b].begin(), long(rng() % m.bucket[b].size()));
                p.ops.push_back({round_plan::op::erase, b, it->first, 0});
                break;
            }
            case 5: case 6: case 7: {
                if (m.bucket[b].empty()) break;
                auto it = std::next(m.bucket[b].begin(), long(rng() % m.bucket[b].size()));
                p.ops.push_back({round_plan::op::update, b, it->first, long(rng() % 1000000)});
                break;
            }
            case 8:  // a large array of another size: its pages change unit
                p.ops.push_back({round_plan::op::replace_big, b % bigs, long(1 + rng() % 5000), long(rng() % 1000)});
                break;
            default:
                p.ops.push_back({round_plan::op::touch_big, b % bigs, long(rng() % 1000000), long(rng() % 1000)});
        }
    }
    // Whole pages of nodes freed at once now and then: units retired.
    if (round % 4 == 2) {
        const int b = int(rng() % buckets);
        for (const auto& [key, value] : m.bucket[b]) p.ops.push_back({round_plan::op::erase, b, key, 0});
    }
    return p;
}

// The plan on the plain model, op by op as the writer does it (an erase of a
// key an earlier op of the round erased does nothing).
void apply(plain_model& m, const round_plan& p) {
    for (const auto& o : p.ops) {
        auto& bucket = m.bucket[o.where];
        switch (o.what) {
            case round_plan::op::insert: bucket[o.key] = o.value; break;
            case round_plan::op::erase: bucket.erase(o.key); break;
            case round_plan::op::update:
                if (auto it = bucket.find(o.key); it != bucket.end()) it->second = o.value;
                break;
            case round_plan::op::replace_big: m.big[o.where].assign(std::size_t(o.key), o.value); break;
            case round_plan::op::touch_big:
                if (!m.big[o.where].empty()) m.big[o.where][std::size_t(o.key) % m.big[o.where].size()] = o.value;
                break;
        }
    }
}

Node** find(Node** head, long key) {
    for (; *head; head = &(*head)->next)
        if ((*head)->key == key) return head;
    return nullptr;
}

// The plan on the store (the writer's side).
void apply(store& s, Model& m, const round_plan& p) {
    for (const auto& o : p.ops) {
        Node** head = &m.bucket[o.where];
        switch (o.what) {
            case round_plan::op::insert: *head = s.make<Node>(Node{o.key, o.value, *head, {}}); break;
            case round_plan::op::erase:
                if (Node** at = find(head, o.key)) {
                    Node* gone = *at;
                    *at = gone->next;
                    s.destroy(gone);
                }
                break;
            case round_plan::op::update:
                if (Node** at = find(head, o.key)) (*at)->value = o.value;
                break;
            case round_plan::op::replace_big: {
                if (m.big[o.where]) s.destroy(m.big[o.where], std::size_t(m.big_count[o.where]));
                long* a = s.make_array<long>(std::size_t(o.key));
                for (long j = 0; j < o.key; ++j) a[j] = o.value;
                m.big[o.where] = a;
                m.big_count[o.where] = o.key;
                break;
            }
            case round_plan::op::touch_big:
                if (m.big_count[o.where]) m.big[o.where][o.key % m.big_count[o.where]] = o.value;
                break;
        }
    }
}

// What the reader sees must be the plain model, whole.
::testing::AssertionResult equals(const Model& m, const plain_model& want) {
    for (int b = 0; b < buckets; ++b) {
        std::map<long, long> seen;
        for (const Node* n = m.bucket[b]; n; n = n->next) seen[n->key] = n->value;
        if (seen != want.bucket[b])
            return ::testing::AssertionFailure() << "bucket " << b << " holds " << seen.size() << " nodes, the model "
                                                 << want.bucket[b].size() << " (or other values)";
    }
    for (int i = 0; i < bigs; ++i) {
        std::vector<long> seen(m.big[i], m.big[i] + m.big_count[i]);
        if (seen != want.big[i])
            return ::testing::AssertionFailure() << "large array " << i << " differs from the model";
    }
    return ::testing::AssertionSuccess();
}

using kind = test::store_kind;

class RefreshInPlace : public test::file_or_pg_test {};

// A writer that runs `rounds` rounds of plan_round from `seed`, each one
// commit (after a checkpoint where the plan says, while the reader is at
// the newest commit), reporting after each and waiting to go on.
test::child model_writer(const std::string& where, std::uint64_t seed, long rounds) {
    return test::child([=](test::child& me) {
        auto s = store::open(where);
        Model* m = s.root<Model>("model");
        std::mt19937_64 rng(seed);
        plain_model plain;
        s.commit();
        me.report_and_wait();
        for (long round = 1; round <= rounds; ++round) {
            const round_plan p = plan_round(rng, plain, round);
            if (p.checkpoint_first) s.checkpoint();
            apply(plain, p);
            apply(s, *m, p);
            m->round = round;
            m->fingerprint = fingerprint_of(*m);
            s.commit();
            me.report_and_wait();
        }
        return 0;
    });
}

TEST_P(RefreshInPlace, EveryRefreshShowsTheNewCommitWhateverItChanged) {
    constexpr std::uint64_t seed = 20261201;
    constexpr long rounds = 40;
    test::child writer = model_writer(where, seed, rounds);
    ASSERT_TRUE(writer.wait_for_report());
    store r = open_reader();
    std::mt19937_64 rng(seed);
    plain_model plain;
    for (long round = 1; round <= rounds; ++round) {
        apply(plain, plan_round(rng, plain, round));
        writer.go();
        ASSERT_TRUE(writer.wait_for_report()) << "round " << round;
        r.refresh();
        const Model* m = r.find_root<Model>("model");
        ASSERT_NE(m, nullptr);
        ASSERT_EQ(m->round, round);
        ASSERT_EQ(fingerprint_of(*m), m->fingerprint) << "round " << round << ": a page kept from before the refresh";
        ASSERT_TRUE(equals(*m, plain)) << "round " << round;
    }
    EXPECT_TRUE(r.check().empty());
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// The point of it: a reader that refreshes after a small commit faults only
// what that commit changed, not its whole working set again.
TEST_P(RefreshInPlace, AReaderKeepsThePagesTheNewCommitDidNotChange) {
    constexpr long nodes = 4000;  // about 63 pages of nodes
    test::child writer([this](test::child& me) {
        auto s = store::open(where);
        Model* m = s.root<Model>("model");
        for (long k = 0; k < nodes; ++k) m->bucket[k % buckets] = s.make<Node>(Node{k, k, m->bucket[k % buckets], {}});
        m->fingerprint = fingerprint_of(*m);
        s.commit();
        me.report_and_wait();
        m->bucket[3]->value = -1;  // one page of nodes
        m->round = 1;
        m->fingerprint = fingerprint_of(*m);
        s.commit();
        me.report_and_wait();
        return 0;
    });
    ASSERT_TRUE(writer.wait_for_report());
    store r = open_reader();
    const Model* m = r.find_root<Model>("model");
    ASSERT_EQ(fingerprint_of(*m), m->fingerprint);
    const std::uint64_t walked = r.stats().faults;
    ASSERT_GT(walked, 60u);
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    r.refresh();
    m = r.find_root<Model>("model");
    ASSERT_EQ(m->round, 1);
    EXPECT_EQ(m->bucket[3]->value, -1);
    EXPECT_EQ(fingerprint_of(*m), m->fingerprint);
    const std::uint64_t again = r.stats().faults;
    // The root's page and the changed node's (the store counts faults since
    // its open, which a refresh in place does not repeat).
    EXPECT_GE(again, walked + 2);
    EXPECT_LE(again, walked + 4) << "a refresh that reloaded pages the commit did not change";
    writer.go();
    EXPECT_EQ(writer.exit_code(), 0);
}

// The storage's part: which pages differ between two readers' snapshots.
// Within one log generation, across a checkpoint run while the older reader
// was at the newest commit, and as the store grows; and nothing to compare
// with another store under the name.
// Two handles show the same commit: its number, meta, size and every page.
::testing::AssertionResult same_snapshot(const storage::storage& x, const storage::storage& y) {
    if (x.txn_seq() != y.txn_seq() || x.meta() != y.meta() || x.page_count() != y.page_count())
        return ::testing::AssertionFailure() << "commit " << x.txn_seq() << " of " << x.page_count() << " pages, and "
                                             << y.txn_seq() << " of " << y.page_count();
    std::vector<std::byte> a(storage::page_size), b(storage::page_size);
    for (storage::page_no p = 0; p < x.page_count(); ++p) {
        x.read_page(p, a.data());
        y.read_page(p, b.data());
        if (a != b) return ::testing::AssertionFailure() << "page " << p << " differs";
    }
    return ::testing::AssertionSuccess();
}

TEST_P(RefreshInPlace, TheStorageNamesThePagesThatDifferBetweenTwoSnapshots) {
    using pages = std::vector<storage::page_no>;
    // The writer, in another process (a file store is opened once per
    // process): one step per go.
    test::child writer([this](test::child& me) {
        storage::options wo;
        wo.durable = false;
        wo.checkpoint_bytes = 1ull << 40;  // only when asked
        std::vector<std::byte> image(storage::page_size);
        auto commit = [&](storage::storage& w, std::initializer_list<storage::page_no> written, std::uint8_t fill) {
            std::vector<storage::page_image> images;
            std::memset(image.data(), fill, image.size());
            for (storage::page_no p : written) images.push_back({p, image.data()});
            w.commit(images, storage::meta_bytes{std::byte{fill}});
        };
        auto w = storage::storage::open(where, wo);
        commit(*w, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 1);
        me.report_and_wait();
        commit(*w, {3, 7}, 2);
        commit(*w, {7}, 3);
        me.report_and_wait();
        w->checkpoint();  // the only reader is at the newest commit, so it runs
        commit(*w, {5, 12}, 4);
        me.report_and_wait();
        w.reset();
        if (GetParam() == kind::file) {
            // Another store under the name: one made beside it and renamed
            // over it, as compaction does.
            const std::string other = dir.path("other.db");
            auto o = storage::storage::open(other, wo);
            commit(*o, {1}, 9);
            o->checkpoint();
            o.reset();
            for (const char* file : {"", "-wal"})
                if (std::rename((other + file).c_str(), (where + file).c_str()) != 0) return 1;
        }
        return 0;
    });
    storage::options ro;
    ro.read_only = true;
    ASSERT_TRUE(writer.wait_for_report());
    auto a = storage::storage::open(where, ro);
    EXPECT_EQ(a->changed_since(*a), pages{}) << "a snapshot against itself";
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    storage::options after_a = ro;
    after_a.after = a.get();  // a refresh's open: the log a read is not read again
    auto b = storage::storage::open(where, after_a);
    EXPECT_EQ(b->changed_since(*a), (pages{3, 7}));
    EXPECT_TRUE(same_snapshot(*b, *storage::storage::open(where, ro))) << "opened after a, and opened afresh";
    a.reset();
    writer.go();
    ASSERT_TRUE(writer.wait_for_report());
    storage::options after_b = ro;
    after_b.after = b.get();
    auto c = storage::storage::open(where, after_b);
    EXPECT_EQ(c->changed_since(*b), (pages{5, 12})) << "across a checkpoint";
    EXPECT_TRUE(same_snapshot(*c, *storage::storage::open(where, ro)));
    writer.go();
    ASSERT_EQ(writer.exit_code(), 0);
    if (GetParam() == kind::file) {
        auto d = storage::storage::open(where, ro);
        EXPECT_EQ(d->changed_since(*c), std::nullopt) << "another store under the name";
    }
}

INSTANTIATE_TEST_SUITE_P(Stores, RefreshInPlace, ::testing::Values(kind::file, kind::postgresql),
                         [](const auto& info) { return info.param == kind::file ? "file" : "postgresql"; });

}  // namespace
