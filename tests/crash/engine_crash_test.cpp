// kill -9 at random instants of a process that builds and commits pointer
// structures through the PUBLIC API (steppe::store), not raw storage pages:
// eight doubly linked lists of items, some carrying multi-page arrays, under
// one root. Transaction t inserts, removes (destroy) and updates items as
// plan(t) says; the child reports each commit that returned through a pipe.
// After the kill a fresh process reopens the store and walks it: it must be
// exactly the state after the last reported commit or after the one in
// flight, with every pointer (next, prev, tail, blob) intact, and
// store::check() clean. STEPPE_ENGINE_KILL_ITERATIONS sets the number of kills
// (default: a CI slice of 100); STEPPE_ENGINE_KILL_MAX_US the longest delay.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.hpp"

namespace engine_crash {

struct Item {
    std::uint64_t key, value;
    Item* next;
    Item* prev;
    std::uint64_t* blob;  // blob_len words, blob[i] = blob_word(key, i); large ones span pages
    std::uint64_t blob_len;
};
constexpr int kLists = 8;
struct Catalog {
    std::uint64_t txn;  // the last transaction committed
    Item* head[kLists];
    Item* tail[kLists];
    std::uint64_t count[kLists];
};

}  // namespace engine_crash

using namespace engine_crash;

namespace {

std::uint64_t blob_word(std::uint64_t key, std::uint64_t i) {
    std::uint64_t z = key * 0x9E3779B97F4A7C15ull + i;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    return z ^ (z >> 29);
}

// ---- The workload: what transaction t does, from the list sizes alone ----
struct action {
    enum kind_t { insert, remove, update } kind;
    int list;
    std::size_t index;  // remove, update: position from the head
    std::uint64_t key, value, blob_len;
};
using sizes_t = std::array<std::size_t, kLists>;

std::vector<action> plan(std::uint64_t t, sizes_t sizes) {
    std::mt19937_64 rng(t * 7919 + 1);
    std::vector<action> out;
    int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
        int list = static_cast<int>(rng() % kLists);
        std::uint64_t r = rng() % 10;
        if (sizes[list] == 0 || (r < 5 && sizes[list] < 150)) {
            std::uint64_t b = rng() % 20;
            std::uint64_t blob = b == 0 ? 1500 : b < 3 ? 300 : b < 6 ? 4 : 0;  // 1500 words: 3 pages
            out.push_back({action::insert, list, 0, t * 100 + static_cast<std::uint64_t>(i), rng(), blob});
            ++sizes[list];
        } else if (r < 8) {
            out.push_back({action::remove, list, rng() % sizes[list], 0, 0, 0});
            --sizes[list];
        } else {
            out.push_back({action::update, list, rng() % sizes[list], 0, rng(), 0});
        }
    }
    return out;
}

// The model: per list, the items from head to tail.
struct mitem {
    std::uint64_t key, value, blob_len;
};
using model_t = std::array<std::vector<mitem>, kLists>;

sizes_t sizes_of(const model_t& m) {
    sizes_t s{};
    for (int l = 0; l < kLists; ++l) s[l] = m[l].size();
    return s;
}
void apply(model_t& m, std::uint64_t t) {
    for (const action& a : plan(t, sizes_of(m))) {
        auto& v = m[a.list];
        switch (a.kind) {
        case action::insert: v.insert(v.begin(), {a.key, a.value, a.blob_len}); break;
        case action::remove: v.erase(v.begin() + static_cast<long>(a.index)); break;
        case action::update: v[a.index].value = a.value; break;
        }
    }
}

Item* at(Catalog* c, int list, std::size_t index) {
    Item* p = c->head[list];
    while (index--) p = p->next;
    return p;
}

void apply(steppe::store& s, Catalog* c, std::uint64_t t) {
    sizes_t sizes{};
    for (int l = 0; l < kLists; ++l) sizes[l] = c->count[l];
    for (const action& a : plan(t, sizes)) {
        int l = a.list;
        switch (a.kind) {
        case action::insert: {
            Item* it = s.make<Item>(Item{a.key, a.value, c->head[l], nullptr, nullptr, a.blob_len});
            if (a.blob_len) {
                it->blob = s.make_array<std::uint64_t>(a.blob_len);
                for (std::uint64_t i = 0; i < a.blob_len; ++i) it->blob[i] = blob_word(a.key, i);
            }
            if (c->head[l]) c->head[l]->prev = it;
            else c->tail[l] = it;
            c->head[l] = it;
            ++c->count[l];
            break;
        }
        case action::remove: {
            Item* it = at(c, l, a.index);
            (it->prev ? it->prev->next : c->head[l]) = it->next;
            (it->next ? it->next->prev : c->tail[l]) = it->prev;
            --c->count[l];
            if (it->blob) s.destroy(it->blob, it->blob_len);
            s.destroy(it);
            break;
        }
        case action::update: at(c, l, a.index)->value = a.value; break;
        }
    }
    c->txn = t;
}

// Empty if the store's lists are exactly `m`; else the first difference.
std::string compare(Catalog* c, const model_t& m) {
    for (int l = 0; l < kLists; ++l) {
        std::string where = "list " + std::to_string(l);
        if (c->count[l] != m[l].size())
            return where + ": count " + std::to_string(c->count[l]) + ", expected " + std::to_string(m[l].size());
        Item* prev = nullptr;
        Item* p = c->head[l];
        for (std::size_t i = 0; i < m[l].size(); ++i, prev = p, p = p->next) {
            std::string w = where + " item " + std::to_string(i);
            if (!p) return w + ": the list ends early";
            if (p->prev != prev) return w + ": prev does not point to the item before it";
            if (p->key != m[l][i].key || p->value != m[l][i].value || p->blob_len != m[l][i].blob_len)
                return w + ": key/value/blob_len " + std::to_string(p->key) + "/" + std::to_string(p->value) + "/" +
                       std::to_string(p->blob_len) + ", expected " + std::to_string(m[l][i].key) + "/" +
                       std::to_string(m[l][i].value) + "/" + std::to_string(m[l][i].blob_len);
            if ((p->blob == nullptr) != (p->blob_len == 0)) return w + ": blob pointer and length disagree";
            for (std::uint64_t k = 0; k < p->blob_len; ++k)
                if (p->blob[k] != blob_word(p->key, k)) return w + ": blob word " + std::to_string(k) + " differs";
        }
        if (p) return where + ": the list goes on past its count";
        if (c->tail[l] != prev) return where + ": tail is not the last item";
    }
    return "";
}

steppe::open_options options(std::uint64_t iteration) {
    steppe::open_options o;
    o.backend = iteration % 2 ? steppe::fault_backend::mprotect : steppe::fault_backend::uffd;
    o.checkpoint_bytes = 256 << 10;  // checkpoints happen while we kill
    o.durable = true;
    return o;
}

[[noreturn]] void child_commits(const std::string& path, std::uint64_t iteration, int report) {
    try {
        auto s = steppe::store::open(path, options(iteration));
        Catalog* c = s.root<Catalog>("catalog");
        for (std::uint64_t t = c->txn + 1;; ++t) {
            apply(s, c, t);
            s.commit();
            if (::write(report, &t, sizeof t) != sizeof t) ::_exit(3);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        ::_exit(2);
    }
}

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atol(v) : fallback;
}

TEST(EngineKillNine, RandomKillsLeaveExactlyTheLastOrInFlightCommit) {
    const long iterations = env_long("STEPPE_ENGINE_KILL_ITERATIONS", 100);
    const long max_us = env_long("STEPPE_ENGINE_KILL_MAX_US", 40000);
    steppe::test::temp_dir dir;
    const std::string path = dir.path("s.db");
    std::mt19937_64 rng(4242);
    model_t verified{};  // the state after txn `verified_txn`
    std::uint64_t verified_txn = 0, in_flight_kept = 0, in_flight_lost = 0, max_items = 0;
    for (long i = 0; i < iterations; ++i) {
        int report[2];
        ASSERT_EQ(::pipe(report), 0);
        std::fflush(stdout);
        pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            ::close(report[0]);
            child_commits(path, static_cast<std::uint64_t>(i), report[1]);
        }
        ::close(report[1]);
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<std::uint64_t>(max_us)));
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        ASSERT_TRUE(WIFSIGNALED(status)) << "kill " << i << ": the child ended on its own, status " << status;
        std::uint64_t t, last_reported = verified_txn;
        while (::read(report[0], &t, sizeof t) == sizeof t) last_reported = t;
        ::close(report[0]);
        ASSERT_GE(last_reported, verified_txn);

        // The two states allowed: after last_reported, and after the one in flight.
        model_t last = verified;
        for (std::uint64_t k = verified_txn + 1; k <= last_reported; ++k) apply(last, k);
        model_t next = last;
        apply(next, last_reported + 1);

        // Check in a fresh process (no page of the store mapped yet); it
        // reports the txn it found, or 0 with a message on failure.
        int answer[2];
        ASSERT_EQ(::pipe(answer), 0);
        pid_t checker = ::fork();
        ASSERT_GE(checker, 0);
        if (checker == 0) {
            ::close(answer[0]);
            std::uint64_t found = ~0ull;
            try {
                auto s = steppe::store::open(path, options(static_cast<std::uint64_t>(i) + 1));
                Catalog* c = s.find_root<Catalog>("catalog");
                std::uint64_t txn = c ? c->txn : 0;
                std::string diff = "recovered txn " + std::to_string(txn) + " but the last reported commit was " +
                                   std::to_string(last_reported);
                if (txn == last_reported) diff = c ? compare(c, last) : (last_reported == 0 ? "" : "no catalog");
                else if (txn == last_reported + 1) diff = compare(c, next);
                if (diff.empty()) {
                    auto findings = s.check();
                    if (!findings.empty()) diff = "store::check(): " + findings[0];
                }
                if (diff.empty()) found = txn;
                else std::fprintf(stderr, "kill %ld: %s\n", i, diff.c_str());
            } catch (const std::exception& e) {
                std::fprintf(stderr, "kill %ld: reopening threw: %s\n", i, e.what());
            }
            (void)!::write(answer[1], &found, sizeof found);
            ::_exit(0);
        }
        ::close(answer[1]);
        std::uint64_t found = ~0ull;
        bool got = ::read(answer[0], &found, sizeof found) == sizeof found;
        ::close(answer[0]);
        ::waitpid(checker, &status, 0);
        ASSERT_TRUE(got && found != ~0ull) << "kill " << i << ": the reopened store is neither the last reported "
                                           << "commit (" << last_reported << ") nor the one in flight (see above; "
                                           << "checker status " << status << ")";
        if (found == last_reported + 1) ++in_flight_kept;
        else ++in_flight_lost;
        verified = found == last_reported ? last : next;
        verified_txn = found;
        std::uint64_t items = 0;
        for (auto& l : verified) items += l.size();
        max_items = std::max(max_items, items);
    }
    std::printf("engine kill -9: %ld kills, %llu commits survived in order (in-flight commit kept %llu times, "
                "not yet durable %llu times), up to %llu items in the store\n",
                iterations, static_cast<unsigned long long>(verified_txn),
                static_cast<unsigned long long>(in_flight_kept), static_cast<unsigned long long>(in_flight_lost),
                static_cast<unsigned long long>(max_items));
}

}  // namespace
