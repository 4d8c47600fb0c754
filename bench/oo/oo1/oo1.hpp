// oo1.hpp — the OO1 benchmark (Cattell & Skeen, ACM TODS 17(1), 1992),
// written once over a "model": the pointer model below (instantiated with each
// pointer policy of policies.hpp) or LMDB's record model (lmdb_oo1.hpp).
//
//   database   N parts {id, type[10], x, y, build}; 3 outgoing connections per
//              part {to, type[10], length}, 90 % to a part among the 1 % of ids
//              closest to it, 10 % to any part; the reverse connections of each
//              part (who connects to it); an index on part id
//   lookup     1,000 random ids through the index, null procedure on x, y, type
//   traversal  from a random part, depth first along connections, 7 hops:
//              1 + 3 + ... + 3^7 = 3,280 visits (duplicates included)
//   reverse    the same along reverse connections (visits vary with in-degree)
//   insert     100 new parts, each with 3 connections chosen by the same rule,
//              index and reverse connections updated, then commit
//
// Every input (the database, the lookup ids, the traversal roots, the inserted
// parts) is a pure function of (seed, index), so every system sees the same.
//
// A model M gives:
//   M::handle              a resident record (a raw pointer for every system)
//   find(id) -> handle     through the index (null if absent)
//   part(h) -> const Part& with x, y, type, to[c]
//   out(part, c) -> handle follow connection c (a fancy pointer, or a B-tree lookup)
//   for_each_from(part, depth, f)   reverse connections
//   begin_read() / end_read()       around a read-only operation
//   begin_update() / insert(spec) / commit()
//   part_count(), max_id()
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "harness.hpp"

namespace oo1 {

inline constexpr int fanout = 3;
inline constexpr int traversal_depth = 7;  // hops
inline constexpr int lookups = 1000;
inline constexpr int inserts = 100;
inline constexpr std::int64_t traversal_visits = 3280;

// ---- what the database holds, as a pure function of (seed, id) -----------------

struct conn_spec {
    std::int32_t to;
    char type[10];
    std::int32_t length;
};
struct part_spec {
    std::int32_t id;
    char type[10];
    std::int32_t x, y;
    std::int64_t build;
    conn_spec conn[fanout];
};

inline void type_string(char out[10], const char* prefix, std::uint64_t r) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%d", prefix, static_cast<int>(r % 10));  // 10 chars, 10 values
    std::memcpy(out, buf, 10);
}

// Part `id` of a database of `n` parts (1 <= id <= n), or a part inserted
// later (id > n), whose connections go to the parts that exist before it.
inline part_spec spec(std::uint64_t seed, std::int64_t n, std::int64_t id) {
    part_spec s{};
    s.id = static_cast<std::int32_t>(id);
    type_string(s.type, "part-type", bench::rnd(seed, id, 1));
    s.x = static_cast<std::int32_t>(bench::rnd(seed, id, 2) % 100000);
    s.y = static_cast<std::int32_t>(bench::rnd(seed, id, 3) % 100000);
    s.build = 631152000 + static_cast<std::int64_t>(bench::rnd(seed, id, 4) % (10 * 365 * 86400ull));  // 1990s
    std::int64_t window = std::max<std::int64_t>(1, n / 100);  // the closest 1 % of ids
    for (int c = 0; c < fanout; ++c) {
        std::uint64_t r = bench::rnd(seed, id, 10 + c);
        std::int64_t target;
        if (id <= n) {
            if (r % 10 < 9) {
                std::int64_t lo = std::clamp<std::int64_t>(id - window / 2, 1, std::max<std::int64_t>(1, n - window + 1));
                target = lo + static_cast<std::int64_t>((r >> 8) % static_cast<std::uint64_t>(window));
                if (target == id) target = target < n ? target + 1 : target - 1;  // no self-connections
            } else {
                target = 1 + static_cast<std::int64_t>((r >> 8) % static_cast<std::uint64_t>(n));
                if (target == id) target = target < n ? target + 1 : target - 1;
            }
        } else {  // inserted: among the parts before it
            std::int64_t last = id - 1;
            if (r % 10 < 9) {
                std::int64_t w = std::min(window, last);
                target = last - static_cast<std::int64_t>((r >> 8) % static_cast<std::uint64_t>(w));
            } else {
                target = 1 + static_cast<std::int64_t>((r >> 8) % static_cast<std::uint64_t>(last));
            }
        }
        s.conn[c].to = static_cast<std::int32_t>(std::max<std::int64_t>(1, target));
        type_string(s.conn[c].type, "conn-type", r >> 40);
        s.conn[c].length = static_cast<std::int32_t>(bench::rnd(seed, id, 20 + c) % 1000);
    }
    return s;
}

// ---- the null procedure -------------------------------------------------------------

using bench::g_sink;
using bench::null_proc;

// ---- operations, identical for every system ---------------------------------------------

enum class op { lookup, traversal, reverse, insert, update };
inline const char* to_string(op o) {
    switch (o) {
        case op::lookup: return "lookup";
        case op::traversal: return "traversal";
        case op::reverse: return "reverse";
        case op::insert: return "insert";
        case op::update: return "update";
    }
    return "?";
}
inline std::uint64_t input_seed(std::uint64_t seed, op o, int iteration) {
    return bench::rnd(seed ^ 0x0011u, static_cast<std::uint64_t>(o) + 1, static_cast<std::uint64_t>(iteration));
}

template <class M>
bench::op_result lookup(M& m, std::int64_t n, std::uint64_t seed, int iteration) {
    bench::rng r(input_seed(seed, op::lookup, iteration));
    g_sink = {};
    std::int64_t hits = 0;
    m.begin_read();
    for (int k = 0; k < lookups; ++k) {
        std::int64_t id = 1 + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(n)));
        if (auto h = m.find(id)) {
            const auto& p = m.part(h);
            null_proc(p.x, p.y, p.type);
            ++hits;
        }
    }
    m.end_read();
    return {hits, g_sink.sum};
}

template <class M>
void traverse(M& m, typename M::handle h, int depth) {
    const auto& p = m.part(h);
    null_proc(p.x, p.y, p.type);
    if (depth == 0) return;
    for (int c = 0; c < fanout; ++c) traverse(m, m.out(p, c), depth - 1);
}

template <class M>
void traverse_reverse(M& m, typename M::handle h, int depth) {
    const auto& p = m.part(h);
    null_proc(p.x, p.y, p.type);
    if (depth == 0) return;
    m.for_each_from(p, depth, [&](typename M::handle from) { traverse_reverse(m, from, depth - 1); });
}

template <class M>
bench::op_result traversal(M& m, std::int64_t n, std::uint64_t seed, int iteration, bool reverse) {
    std::int64_t root = 1 + static_cast<std::int64_t>(
                                bench::rnd(input_seed(seed, reverse ? op::reverse : op::traversal, iteration), 7) %
                                static_cast<std::uint64_t>(n));
    g_sink = {};
    m.begin_read();
    auto h = m.find(root);
    bench::check(static_cast<bool>(h), "traversal root " + std::to_string(root) + " not found");
    if (reverse) traverse_reverse(m, h, traversal_depth);
    else traverse(m, h, traversal_depth);
    m.end_read();
    return {g_sink.count, g_sink.sum};
}

// ---- the update traversal (White & DeWitt 1992; Hosking 1995's write-barrier study) ----
//
// The traversal, each visit modifying the part it visits with probability p:
// x and y incremented, 2 updates per modified part (duplicates included: a
// part visited twice may be modified twice). Whether a visit modifies is
// drawn from a stream seeded by the input alone, visit by visit, so every
// system modifies the same parts. No commit: the caller decides (Hosking's
// long-running transaction, or a checkpoint after each traversal).
//
// A model that supports it gives
//   M::uhandle              a way to the part that can also write it
//   uroot(id) -> uhandle    through the index
//   upart(u) -> const Part& the residency check (read barrier)
//   uout(part, c) -> uhandle
//   update(u)               the write barrier, then the two updates
//
// Result: count = visits (3,280), sum = (modified visits << 40) + the sum of
// the ids of the parts modified: independent of x and y, so a hot repeat of
// an input (which modifies the same parts again) gives the same answer.
inline double& update_probability() {
    static double p = 1.0;
    return p;
}
inline std::int64_t updates_of(const bench::op_result& r) { return r.sum >> 40; }

template <class M>
void traverse_update(M& m, typename M::uhandle u, int depth, bench::rng& r, std::uint64_t threshold, bool all,
                     std::int64_t& modified, std::int64_t& ids) {
    const auto& p = m.upart(u);
    null_proc(p.x, p.y, p.type);
    // a draw at every visit, p = 1 too, so p = 0 and p = 1 differ only by the updates
    bool hit = r.next() < threshold;
    if (all || hit) {
        m.update(u);
        ++modified;
        ids += p.id;
    }
    if (depth == 0) return;
    for (int c = 0; c < fanout; ++c) traverse_update(m, m.uout(p, c), depth - 1, r, threshold, all, modified, ids);
}

template <class M>
bench::op_result update_traversal(M& m, std::int64_t n, std::uint64_t seed, int iteration, double p) {
    std::uint64_t in = input_seed(seed, op::update, iteration);
    std::int64_t root = 1 + static_cast<std::int64_t>(bench::rnd(in, 7) % static_cast<std::uint64_t>(n));
    bench::rng r(bench::rnd(in, 8));
    bool all = p >= 1.0;
    std::uint64_t threshold = p <= 0 ? 0 : static_cast<std::uint64_t>(p * 18446744073709551616.0);
    std::int64_t modified = 0, ids = 0;
    g_sink = {};
    auto u = m.uroot(root);
    bench::check(static_cast<bool>(u), "update root " + std::to_string(root) + " not found");
    traverse_update(m, u, traversal_depth, r, threshold, all, modified, ids);
    return {g_sink.count, (modified << 40) + ids};
}

// A checksum of every part's x and y (ids 1..max_id): the state the updates
// left, compared between the committing process, the reopened store and
// every system.
template <class M>
std::int64_t state_checksum(M& m, std::int64_t max_id) {
    std::uint64_t h = 0;
    m.begin_read();
    for (std::int64_t id = 1; id <= max_id; ++id) {
        const auto& p = m.part(m.find(id));
        h = bench::splitmix(h ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.x)) << 32 |
                                 static_cast<std::uint32_t>(p.y)));
    }
    m.end_read();
    return static_cast<std::int64_t>(h >> 1);
}

// 100 parts with their connections, then commit. Returns {parts, checksum};
// *commit_ms receives the commit's share of the time.
template <class M>
bench::op_result insert(M& m, std::int64_t n, std::uint64_t seed, double* commit_ms) {
    std::int64_t first = m.max_id() + 1;
    std::int64_t sum = 0;
    m.begin_update();
    for (int k = 0; k < inserts; ++k) {
        part_spec s = spec(seed, n, first + k);
        m.insert(s);
        sum += s.x + s.conn[0].to + s.conn[1].to + s.conn[2].to;
    }
    auto t = bench::clock_type::now();
    m.commit();
    *commit_ms = bench::ms_since(t);
    return {inserts, sum};
}

// ---- the pointer model ------------------------------------------------------------------

// What the index's slots store to refer to a part: P::index_ptr where the
// policy has one (Texas's mixed granularity, texas_policies.hpp: pointers
// translated at each use in the index only), else P::ptr like every other field.
template <class P, class T>
struct index_ptr_of {
    using type = typename P::template ptr<T>;
};
template <class P, class T>
    requires requires { typename P::template index_ptr<T>; }
struct index_ptr_of<P, T> {
    using type = typename P::template index_ptr<T>;
};

template <class P>
struct types {
    template <class T>
    using ptr = typename P::template ptr<T>;
    template <class T>
    using index_ptr = typename index_ptr_of<P, T>::type;
    struct Part;
    struct Conn {
        ptr<Part> to;
        char type[10];
        std::int32_t length;
    };
    struct FromList {  // reverse connections: a growable array of the connecting parts
        ptr<ptr<Part>> data;
        std::uint32_t size;
        std::uint32_t cap;
    };
    struct Part {
        std::int32_t id;
        char type[10];
        std::int32_t x, y;
        std::int64_t build;
        Conn to[fanout];
        FromList from;
    };
    struct Slot {  // the index: open addressing, linear probing, identity hash, id 0 = empty
        std::int64_t id;
        index_ptr<Part> part;
    };
    struct Db {
        std::int64_t parts;
        std::int64_t max_id;
        std::int64_t base_parts;
        std::uint64_t seed;
        ptr<Slot> index;
        std::uint64_t index_cap;  // a power of two
    };
};

// The identity, as libstdc++'s std::hash<int>: dense ids fill consecutive
// slots, so the 100 parts an insert adds dirty one or two index pages rather
// than a hundred scattered ones (for every system alike).
inline std::uint64_t slot_hash(std::int64_t id) { return static_cast<std::uint64_t>(id); }

template <class P>
class pointer_model {
public:
    using T = types<P>;
    using Part = typename T::Part;
    using Slot = typename T::Slot;
    using Db = typename T::Db;
    template <class X>
    using ptr = typename T::template ptr<X>;
    using handle = Part*;

    explicit pointer_model(P& sys) : sys_(sys), db_(sys.template root<Db>("oo1")) {}

    // ---- building ----
    void generate(std::int64_t n, std::uint64_t seed, bool show_progress) {
        bench::check(db_->parts == 0, "the store already holds a database");
        sys_.bulk_begin();
        db_->base_parts = n;
        db_->seed = seed;
        std::uint64_t cap = 16;
        while (cap < static_cast<std::uint64_t>(n) * 2) cap *= 2;
        db_->index = sys_.template make_array<Slot>(cap);
        db_->index_cap = cap;
        std::vector<ptr<Part>> by_id(static_cast<std::size_t>(n) + 1);
        std::vector<std::uint32_t> indegree(static_cast<std::size_t>(n) + 1);
        bench::progress prog("parts", static_cast<std::uint64_t>(n));
        for (std::int64_t id = 1; id <= n; ++id) {
            part_spec s = spec(seed, n, id);
            ptr<Part> pp = make_part(s);
            by_id[static_cast<std::size_t>(id)] = pp;
            for (const auto& c : s.conn) ++indegree[static_cast<std::size_t>(c.to)];
            index_put(id, pp);
            if (show_progress && id % 4096 == 0) prog(static_cast<std::uint64_t>(id));
        }
        if (show_progress) prog(static_cast<std::uint64_t>(n));
        bench::progress prog2("connections", static_cast<std::uint64_t>(n));
        for (std::int64_t id = 1; id <= n; ++id) {  // reverse lists sized exactly
            Part* p = P::get(by_id[static_cast<std::size_t>(id)]);
            std::uint32_t k = indegree[static_cast<std::size_t>(id)];
            if (k) p->from.data = sys_.template make_array<ptr<Part>>(k);
            p->from.cap = k;
        }
        for (std::int64_t id = 1; id <= n; ++id) {
            part_spec s = spec(seed, n, id);
            const ptr<Part>& pp = by_id[static_cast<std::size_t>(id)];
            Part* p = P::get(pp);
            for (int c = 0; c < fanout; ++c) {
                const ptr<Part>& target = by_id[static_cast<std::size_t>(s.conn[c].to)];
                p->to[c].to = target;
                std::memcpy(p->to[c].type, s.conn[c].type, 10);
                p->to[c].length = s.conn[c].length;
                Part* t = P::get(target);
                P::get(t->from.data)[t->from.size++] = pp;
            }
            if (show_progress && id % 4096 == 0) prog2(static_cast<std::uint64_t>(id));
        }
        if (show_progress) prog2(static_cast<std::uint64_t>(n));
        db_->parts = n;
        db_->max_id = n;
        sys_.bulk_end();
    }

    // ---- reading ----
    handle find(std::int64_t id) const { return P::get(find_ptr(id)); }
    const Part& part(handle h) const { return *h; }
    handle out(const Part& p, int c) const { return P::get(p.to[c].to); }
    template <class F>
    void for_each_from(const Part& p, int, F&& f) const {
        const ptr<Part>* d = P::get(p.from.data);
        for (std::uint32_t k = 0; k < p.from.size; ++k) f(P::get(d[k]));
    }
    void begin_read() {}
    void end_read() {}
    std::int64_t part_count() const { return db_->parts; }
    std::int64_t max_id() const { return db_->max_id; }
    std::int64_t base_parts() const { return db_->base_parts; }
    std::uint64_t seed() const { return db_->seed; }
    std::uint32_t from_count(handle h) const { return h->from.size; }

    // ---- the update traversal (update_traversal above) ----
    using uhandle = Part*;
    uhandle uroot(std::int64_t id) const { return find(id); }
    const Part& upart(uhandle h) const { return *h; }
    uhandle uout(const Part& p, int c) const { return P::get(p.to[c].to); }
    void update(uhandle h) {
        sys_.will_write(h);
        h->x += 1;
        h->y += 1;
    }

    // ---- updating ----
    void begin_update() { sys_.begin(); }
    void commit() { sys_.commit(); }
    void insert(const part_spec& s) {
        ptr<Part> pp = make_part(s);
        Part* p = P::get(pp);
        for (int c = 0; c < fanout; ++c) {
            ptr<Part> target = find_ptr(s.conn[c].to);
            bench::check(P::get(target) != nullptr, "insert: connection target missing");
            p->to[c].to = target;
            std::memcpy(p->to[c].type, s.conn[c].type, 10);
            p->to[c].length = s.conn[c].length;
            push_from(P::get(target), pp);
        }
        index_put(s.id, pp);
        sys_.will_write(db_);
        db_->parts += 1;
        db_->max_id = std::max<std::int64_t>(db_->max_id, s.id);
    }

private:
    // A new part with the attributes of `s` (connections are the caller's).
    ptr<Part> make_part(const part_spec& s) {
        ptr<Part> pp = sys_.template make<Part>();
        Part* p = P::get(pp);
        p->id = s.id;
        std::memcpy(p->type, s.type, 10);
        p->x = s.x;
        p->y = s.y;
        p->build = s.build;
        return pp;
    }
    ptr<Part> find_ptr(std::int64_t id) const {
        Slot* s = P::get(db_->index);
        std::uint64_t mask = db_->index_cap - 1;
        for (std::uint64_t h = slot_hash(id) & mask;; h = (h + 1) & mask) {
            if (s[h].id == id) {
                if constexpr (std::is_same_v<decltype(s[h].part), ptr<Part>>) return s[h].part;
                else return P::get(s[h].part);  // an index pointer translated at use (Texas's smart-index)
            }
            if (s[h].id == 0) return ptr<Part>{};
        }
    }
    void index_put(std::int64_t id, const ptr<Part>& part) {
        if (static_cast<std::uint64_t>(db_->parts + 1) * 10 > db_->index_cap * 7) grow_index();
        Slot* s = P::get(db_->index);
        std::uint64_t mask = db_->index_cap - 1;
        std::uint64_t h = slot_hash(id) & mask;
        while (s[h].id != 0) h = (h + 1) & mask;
        sys_.will_write(&s[h]);
        s[h].id = id;
        s[h].part = part;
    }
    void grow_index() {
        std::uint64_t cap = db_->index_cap * 2, mask = cap - 1;
        ptr<Slot> fresh = sys_.template make_array<Slot>(cap);
        Slot* to = P::get(fresh);
        Slot* from = P::get(db_->index);
        for (std::uint64_t i = 0; i < db_->index_cap; ++i) {
            if (from[i].id == 0) continue;
            std::uint64_t h = slot_hash(from[i].id) & mask;
            while (to[h].id != 0) h = (h + 1) & mask;
            to[h] = from[i];
        }
        sys_.destroy(db_->index, db_->index_cap);
        sys_.will_write(db_);
        db_->index = fresh;
        db_->index_cap = cap;
    }
    void push_from(Part* t, const ptr<Part>& from) {
        auto& fl = t->from;
        sys_.will_write(&fl);
        if (fl.size == fl.cap) {
            std::uint32_t cap = std::max<std::uint32_t>(4, fl.cap * 2);
            ptr<ptr<Part>> fresh = sys_.template make_array<ptr<Part>>(cap);
            ptr<Part>* to = P::get(fresh);
            ptr<Part>* old = P::get(fl.data);
            for (std::uint32_t k = 0; k < fl.size; ++k) to[k] = old[k];
            if (old) sys_.destroy(fl.data, fl.cap);
            fl.data = fresh;
            fl.cap = cap;
        } else {
            sys_.will_write(&P::get(fl.data)[fl.size]);
        }
        P::get(fl.data)[fl.size++] = from;
    }

    P& sys_;
    Db* db_;
};

}  // namespace oo1
