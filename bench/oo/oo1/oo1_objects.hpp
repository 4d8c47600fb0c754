// oo1_objects.hpp — OO1 on steppe's object engine (<steppe/objects.hpp>):
// the same database and operations as oo1::pointer_model (oo1.hpp), with
// objects reached through steppe::objects::ref<T> (the residency check at
// every dereference, mut() and its write barrier before every write) and
// persistence by reachability from one root.
//
// The object engine's scheme is chosen when the program is compiled
// (-DSTEPPE_OBJECTS_DETECTION=..., -DSTEPPE_OBJECTS_BARRIER=...), so each
// scheme is its own executable (bench/oo/oo1/CMakeLists.txt: oo1_objects_fb,
// oo1_objects_id, oo1_objects_idsh, oo1_objects_pf); `oo1 --system objects-*` runs the one of
// its scheme.
//
// The data structures mirror the pointer model as closely as objects allow:
//   Part        the same fields; reverse connections as a ref to an array
//               object of refs plus a count (an array object has a fixed
//               size: a full one is replaced by one twice as large, as the
//               pointer model's make_array + copy + destroy, minus destroy:
//               the old array is simply no longer reachable)
//   the index   the same open addressing with linear probing and the identity
//               hash over the same capacity, its slots split into array
//               objects of 256 slots (4 KiB, a page's worth) under a
//               directory array object. The object engine writes, logs and
//               faults whole objects, so one array of all slots (1 MiB small,
//               8 MiB large) would be written whole by every insert commit and
//               read whole by the first lookup; chunks of a page give it the
//               page engine's granularity, at the cost of one more residency
//               check per probe.
//   building    everything made, then one commit, as the pointer model's
//               bulk_begin / bulk_end (the commit clusters what the root
//               reaches breadth-first: the index, then the parts in id order,
//               then their reverse arrays)
#pragma once

#include <steppe/objects.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "harness.hpp"
#include "objects_support.hpp"
#include "oo1.hpp"

namespace oo1 {

namespace so = steppe::objects;

// The stored types (aggregates: steppe describes them itself).
struct OPart;
struct OConn {
    so::ref<OPart> to;
    char type[10];
    std::int32_t length;
};
struct OPart {
    std::int32_t id;
    char type[10];
    std::int32_t x, y;
    std::int64_t build;
    OConn to[fanout];
    so::ref<so::array<so::ref<OPart>>> from;  // the parts connecting to this one; capacity = the array's size
    std::uint32_t from_size;
};
struct OSlot {  // id 0 = empty
    std::int64_t id;
    so::ref<OPart> part;
};
using OChunk = so::array<OSlot>;
struct ODb {
    std::int64_t parts;
    std::int64_t max_id;
    std::int64_t base_parts;
    std::uint64_t seed;
    so::ref<so::array<so::ref<OChunk>>> index;  // the directory: index_cap / chunk slots chunks
    std::uint64_t index_cap;                    // slots, a power of two
    std::uint64_t chunk_slots_max;              // slots per chunk at most, a power of two (index_chunk_slots())
};

// Slots per index chunk for the databases generate() builds from now on:
// 256 (4 KiB) unless a driver's `--index-chunk-slots N` set it (a power of
// two; one at least the index's capacity makes the index one flat array
// object, as the pointer model's: the experiments' control for the
// directory hop).
inline std::uint64_t& index_chunk_slots() {
    static std::uint64_t n = 256;
    return n;
}

class object_model {
public:
    using Part = OPart;
    using handle = const OPart*;


    // Opens (or, with `create`, makes anew) the store at `path`.
    object_model(const std::string& path, bool create) : store_(open(path, create)), path_(path) {
        db_ = store_.root<ODb>("oo1");
    }

    // ---- building ----
    void generate(std::int64_t n, std::uint64_t seed, bool show_progress) {
        bench::check(db_->parts == 0, "the store already holds a database");
        {
            ODb* d = db_.mut();
            d->base_parts = n;
            d->seed = seed;
            d->chunk_slots_max = index_chunk_slots();
            bench::check(d->chunk_slots_max && !(d->chunk_slots_max & (d->chunk_slots_max - 1)),
                         "--index-chunk-slots must be a power of two");
        }
        std::uint64_t cap = 16;
        while (cap < static_cast<std::uint64_t>(n) * 2) cap *= 2;
        make_index(cap);
        std::vector<so::ref<OPart>> by_id(static_cast<std::size_t>(n) + 1);
        std::vector<std::uint32_t> indegree(static_cast<std::size_t>(n) + 1);
        bench::progress prog("parts", static_cast<std::uint64_t>(n));
        for (std::int64_t id = 1; id <= n; ++id) {
            part_spec s = spec(seed, n, id);
            so::ref<OPart> pp = make_part(s);
            by_id[static_cast<std::size_t>(id)] = pp;
            for (const auto& c : s.conn) ++indegree[static_cast<std::size_t>(c.to)];
            index_put(id, pp);
            if (show_progress && id % 4096 == 0) prog(static_cast<std::uint64_t>(id));
        }
        if (show_progress) prog(static_cast<std::uint64_t>(n));
        bench::progress prog2("connections", static_cast<std::uint64_t>(n));
        for (std::int64_t id = 1; id <= n; ++id) {  // reverse arrays sized exactly
            std::uint32_t k = indegree[static_cast<std::size_t>(id)];
            if (k) by_id[static_cast<std::size_t>(id)].mut()->from = store_.make_array<so::ref<OPart>>(k);
        }
        for (std::int64_t id = 1; id <= n; ++id) {
            part_spec s = spec(seed, n, id);
            const so::ref<OPart>& pp = by_id[static_cast<std::size_t>(id)];
            OPart* p = pp.mut();
            for (int c = 0; c < fanout; ++c) {
                const so::ref<OPart>& target = by_id[static_cast<std::size_t>(s.conn[c].to)];
                p->to[c].to = target;
                std::memcpy(p->to[c].type, s.conn[c].type, 10);
                p->to[c].length = s.conn[c].length;
                OPart* t = target.mut();
                t->from.mut()->data()[t->from_size++] = pp;
            }
            if (show_progress && id % 4096 == 0) prog2(static_cast<std::uint64_t>(id));
        }
        if (show_progress) prog2(static_cast<std::uint64_t>(n));
        {
            ODb* d = db_.mut();
            d->parts = n;
            d->max_id = n;
        }
        store_.commit();
    }

    // ---- reading ----
    // Dereferences the index slot in place (not a copy of it), so that
    // id_self_heal patches the slot as it would any stored reference.
    handle find(std::int64_t id) const {
        const so::ref<OPart>* slot = find_slot(id);
        return slot ? slot->get() : nullptr;
    }
    const OPart& part(handle h) const { return *h; }
    handle out(const OPart& p, int c) const { return p.to[c].to.get(); }
    template <class F>
    void for_each_from(const OPart& p, int, F&& f) const {
        if (!p.from_size) return;
        const so::array<so::ref<OPart>>& a = *p.from;
        for (std::uint32_t k = 0; k < p.from_size; ++k) f(a[k].get());
    }
    void begin_read() {}
    void end_read() {}
    std::int64_t part_count() const { return db_->parts; }
    std::int64_t max_id() const { return db_->max_id; }
    std::int64_t base_parts() const { return db_->base_parts; }
    std::uint64_t seed() const { return db_->seed; }
    std::uint32_t from_count(handle h) const { return h->from_size; }

    // ---- the update traversal (oo1.hpp, update_traversal) ----
    // The way to a part is the slot that holds its reference (not a copy of
    // it), so that the check patches the slot as any stored reference's, and
    // mut() on it runs the write barrier.
    using uhandle = const so::ref<OPart>*;
    uhandle uroot(std::int64_t id) const { return find_slot(id); }
    const OPart& upart(uhandle u) const { return **u; }
    uhandle uout(const OPart& p, int c) const { return &p.to[c].to; }
    void update(uhandle u) const {
        OPart* w = u->mut();
        w->x += 1;
        w->y += 1;
    }

    // ---- updating ----
    void begin_update() {}
    void commit() { store_.commit(); }
    void insert(const part_spec& s) {
        so::ref<OPart> pp = make_part(s);
        OPart* p = pp.mut();
        for (int c = 0; c < fanout; ++c) {
            const so::ref<OPart>* slot = find_slot(s.conn[c].to);
            bench::check(slot != nullptr, "insert: connection target missing");
            so::ref<OPart> target = *slot;
            p->to[c].to = target;
            std::memcpy(p->to[c].type, s.conn[c].type, 10);
            p->to[c].length = s.conn[c].length;
            push_from(target, pp);
        }
        index_put(s.id, pp);
        ODb* d = db_.mut();
        d->parts += 1;
        d->max_id = std::max<std::int64_t>(d->max_id, s.id);
    }

    // ---- the system ----
    std::map<std::string, std::int64_t> counters() const { return bench::object_counters(store_); }
    std::vector<std::string> files() const { return {path_, path_ + "-wal"}; }
    std::vector<std::string> check() const { return store_.check(); }
    std::string describe() const {
        return "steppe object engine, " + store_.stats().scheme +
               "; refs with a software residency check, mut() write barrier, persistence by reachability; "
               "index in 4 KiB array objects; durable commit (fdatasync)";
    }
    std::string scheme() const { return store_.stats().scheme; }

private:
    static so::store open(const std::string& path, bool create) { return bench::open_object_store(path, create); }

    std::uint64_t chunk_slots(std::uint64_t cap) const { return std::min(cap, db_->chunk_slots_max); }

    // A new, empty index of `cap` slots (the caller re-points the root at it).
    so::ref<so::array<so::ref<OChunk>>> new_index(std::uint64_t cap) {
        std::uint64_t per = chunk_slots(cap);
        auto dir = store_.make_array<so::ref<OChunk>>(cap / per);
        so::ref<OChunk>* d = dir.mut()->data();
        for (std::uint64_t k = 0; k < cap / per; ++k) d[k] = store_.make_array<OSlot>(per);
        return dir;
    }
    void make_index(std::uint64_t cap) {
        auto dir = new_index(cap);
        ODb* d = db_.mut();
        d->index = dir;
        d->index_cap = cap;
    }

    so::ref<OPart> make_part(const part_spec& s) {
        so::ref<OPart> pp = store_.make<OPart>();
        OPart* p = pp.mut();
        p->id = s.id;
        std::memcpy(p->type, s.type, 10);
        p->x = s.x;
        p->y = s.y;
        p->build = s.build;
        return pp;
    }

    // The index slot holding part `id`'s reference, null if absent.
    const so::ref<OPart>* find_slot(std::int64_t id) const {
        const ODb* d = db_.get();
        std::uint64_t mask = d->index_cap - 1, per = std::min(d->index_cap, d->chunk_slots_max);
        unsigned shift = static_cast<unsigned>(__builtin_ctzll(per));
        const so::array<so::ref<OChunk>>& dir = *d->index;
        for (std::uint64_t h = slot_hash(id) & mask;; h = (h + 1) & mask) {
            const OSlot& s = (*dir[h >> shift])[h & (per - 1)];
            if (s.id == id) return &s.part;
            if (s.id == 0) return nullptr;
        }
    }
    void index_put(std::int64_t id, const so::ref<OPart>& part) {
        if (static_cast<std::uint64_t>(db_->parts + 1) * 10 > db_->index_cap * 7) grow_index();
        const ODb* d = db_.get();
        std::uint64_t mask = d->index_cap - 1, per = std::min(d->index_cap, d->chunk_slots_max);
        unsigned shift = static_cast<unsigned>(__builtin_ctzll(per));
        const so::array<so::ref<OChunk>>& dir = *d->index;
        std::uint64_t h = slot_hash(id) & mask;
        while ((*dir[h >> shift])[h & (per - 1)].id != 0) h = (h + 1) & mask;
        OSlot& s = (*dir[h >> shift].mut())[h & (per - 1)];
        s.id = id;
        s.part = part;
    }
    void grow_index() {
        const ODb* d = db_.get();
        std::uint64_t old_cap = d->index_cap, old_per = chunk_slots(old_cap);
        std::uint64_t cap = old_cap * 2, mask = cap - 1, per = chunk_slots(cap);
        unsigned shift = static_cast<unsigned>(__builtin_ctzll(per));
        auto fresh = new_index(cap);
        const so::array<so::ref<OChunk>>& to_dir = *fresh;
        const so::array<so::ref<OChunk>>& from_dir = *d->index;
        for (std::uint64_t k = 0; k < old_cap / old_per; ++k) {
            const OChunk& from = *from_dir[k];
            for (std::uint64_t i = 0; i < old_per; ++i) {
                if (from[i].id == 0) continue;
                std::uint64_t h = slot_hash(from[i].id) & mask;
                while ((*to_dir[h >> shift])[h & (per - 1)].id != 0) h = (h + 1) & mask;
                (*to_dir[h >> shift].mut())[h & (per - 1)] = from[i];
            }
        }
        ODb* w = db_.mut();
        w->index = fresh;  // the old directory and chunks are no longer reachable
        w->index_cap = cap;
    }
    void push_from(const so::ref<OPart>& t, const so::ref<OPart>& from) {
        OPart* tp = t.mut();
        std::uint32_t cap = tp->from ? static_cast<std::uint32_t>(tp->from->size()) : 0;
        if (tp->from_size == cap) {
            std::uint32_t fresh_cap = std::max<std::uint32_t>(4, cap * 2);
            auto fresh = store_.make_array<so::ref<OPart>>(fresh_cap);
            so::ref<OPart>* to = fresh.mut()->data();
            if (cap) {
                const so::array<so::ref<OPart>>& old = *tp->from;
                for (std::uint32_t k = 0; k < tp->from_size; ++k) to[k] = old[k];
            }
            tp->from = fresh;
        }
        tp->from.mut()->data()[tp->from_size++] = from;
    }

    so::store store_;
    std::string path_;
    so::ref<ODb> db_;
};

}  // namespace oo1
