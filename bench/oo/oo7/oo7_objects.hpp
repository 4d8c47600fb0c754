// oo7_objects.hpp — OO7 on steppe's object engine (<steppe/objects.hpp>): the
// same database and operations as oo7::pointer_model (oo7.hpp), with objects
// reached through steppe::objects::ref<T> (the residency check at every
// dereference), every write to an existing object through mut() (its write
// barrier), and persistence by reachability from one root.
//
// The scheme is compiled in (-DSTEPPE_OBJECTS_DETECTION, -BARRIER), so each
// scheme is its own executable (bench/oo/oo7/CMakeLists.txt: oo7_objects_fb,
// oo7_objects_id, oo7_objects_idsh); `oo7 --system objects-*` runs the one of
// its scheme (bench/oo/harness/objects_support.hpp).
//
// The data structures mirror the pointer model as closely as objects allow:
//   the objects   the same types and fields, ptr<T> as so::ref<T>; a ptr to
//                 n elements (document and manual text, a composite part's
//                 atomic parts) as a ref to an array object
//   Vec<X>        the same {data, size, cap}, data a ref to an array object
//                 of cap elements; a full one is replaced by one twice as
//                 large (as the pointer model's push, minus destroy: the old
//                 array is simply no longer reachable)
//   the indexes   the same open addressing, hashes, probing, capacities,
//                 deleted markers and growth, the slots split into array
//                 objects of 4 KiB (256 slots) under a directory array object,
//                 as OO1's port does: the engine writes, logs and faults whole
//                 objects, so one array of all atomic-part slots (512 KiB
//                 small) would be written whole by every insert or delete
//                 commit and read whole by the first Q1; chunks of a page give
//                 it the page engine's granularity, for one more residency
//                 check per probe
//   building      everything made, then one commit, as the pointer model's
//                 bulk_begin / bulk_end (the commit clusters what the root
//                 reaches, breadth first)
//   delete        the pointer model destroys what the composite part owns;
//                 here there is no destroy: it unlinks every reference to the
//                 composite part and to what it owns (the base assemblies'
//                 component lists, the module's library, both indexes), so the
//                 next commit finds them unreachable and writes nothing of
//                 them. They stay in the store file as garbage (the engine has
//                 no collector of its file yet). One deviation follows: a
//                 vector's vacated last slot is nulled (the pointer model
//                 leaves a stale copy past `size`), since a reference left
//                 there would keep the deleted composite part reachable.
//
// Reads dereference references where they lie in their objects (not copies),
// so that id_self_heal patches the stored slot as it would any reference.
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
#include "oo7.hpp"

namespace oo7 {

namespace so = steppe::objects;

// ---- the stored types (aggregates: steppe describes them itself) ----

struct OAtomicPart;
struct OCompositePart;
struct OBaseAssembly;
struct OComplexAssembly;
struct OModule;

template <class X>
struct OVec {  // a growable array: data holds cap elements, the first size used
    so::ref<so::array<X>> data;
    std::uint32_t size;
    std::uint32_t cap;
};
struct OConnection {
    char type[10];
    std::int32_t length;
    so::ref<OAtomicPart> from;
    so::ref<OAtomicPart> to;
};
struct OAtomicPart {
    std::int32_t id;
    char type[10];
    std::int32_t build;
    std::int32_t x, y;
    std::int32_t doc_id;
    so::ref<OConnection> to[conn_per_atomic];
    OVec<so::ref<OConnection>> from;
    so::ref<OCompositePart> part_of;
};
struct ODocument {
    char title[40];
    std::int32_t id;
    std::int32_t text_len;
    so::ref<so::array<char>> text;
    so::ref<OCompositePart> part;
};
struct OCompositePart {
    std::int32_t id;
    char type[10];
    std::int32_t build;
    std::int32_t nparts;
    so::ref<ODocument> doc;
    OVec<so::ref<OBaseAssembly>> used_in;
    so::ref<so::array<so::ref<OAtomicPart>>> parts;
    so::ref<OAtomicPart> root;
};
struct OBaseAssembly {
    std::int32_t id;
    char type[10];
    std::int32_t build;
    so::ref<OComplexAssembly> super;
    so::ref<OModule> module;
    OVec<so::ref<OCompositePart>> components;
};
struct OComplexAssembly {
    std::int32_t id;
    char type[10];
    std::int32_t build;
    std::int32_t level;
    so::ref<OComplexAssembly> super;
    so::ref<OModule> module;
    so::ref<OComplexAssembly> sub_complex[3];  // levels above the last
    so::ref<OBaseAssembly> sub_base[3];        // the last level
};
struct OManual {
    char title[40];
    std::int32_t id;
    std::int32_t text_len;
    so::ref<so::array<char>> text;
    so::ref<OModule> mod;
};
struct OModule {
    std::int32_t id;
    char type[10];
    std::int32_t build;
    so::ref<OManual> man;
    so::ref<OComplexAssembly> design_root;
};
struct OAtomicSlot {  // identity hash (dense ids), linear probing; id 0 empty, -1 deleted
    std::int64_t id;
    so::ref<OAtomicPart> part;
};
struct ODocSlot {  // hash 0 empty, 2 deleted (real hashes are odd)
    std::uint64_t hash;
    so::ref<ODocument> doc;
};
template <class S>
using ODirectory = so::ref<so::array<so::ref<so::array<S>>>>;  // chunks of an index's slots
struct ODb {
    std::int32_t atomic_per_comp, doc_size, manual_size, comp_per_module, assm_levels, fanout;
    std::uint64_t seed;
    std::int32_t next_comp_id, next_atomic_id, next_assembly_id;
    std::int32_t generated;
    so::ref<OModule> module;
    ODirectory<OAtomicSlot> atomic_index;
    std::uint64_t atomic_cap;
    std::int64_t atomic_count;
    ODirectory<ODocSlot> doc_index;
    std::uint64_t doc_cap;
    std::int64_t doc_count;
    OVec<so::ref<OCompositePart>> composites;
    OVec<so::ref<OBaseAssembly>> bases;
};

class object_model {
public:
    template <class X>
    using ref = so::ref<X>;

    static constexpr std::uint64_t chunk_bytes = 4096;  // an index chunk: a page's worth of slots

    // Opens (or, with `create`, makes anew) the store at `path`.
    object_model(const std::string& path, bool create)
        : store_(bench::open_object_store(path, create)), path_(path), db_(store_.root<ODb>("oo7")) {}

    const ODb& db() const { return *db_; }
    config cfg() const {
        const ODb& d = *db_;
        return {"", d.atomic_per_comp, d.doc_size, d.manual_size, d.comp_per_module, d.assm_levels, d.fanout};
    }

    // ---- building ----------------------------------------------------------
    void generate(const config& c, std::uint64_t seed, bool show_progress) {
        bench::check(!db_->generated, "the store already holds a database");
        {
            ODb* d = db_.mut();
            d->atomic_per_comp = c.atomic_per_comp;
            d->doc_size = c.doc_size;
            d->manual_size = c.manual_size;
            d->comp_per_module = c.comp_per_module;
            d->assm_levels = c.assm_levels;
            d->fanout = c.fanout;
            d->seed = seed;
            d->next_comp_id = d->next_atomic_id = d->next_assembly_id = 1;
            std::uint64_t cap = 16;
            while (cap < static_cast<std::uint64_t>(c.comp_per_module) * c.atomic_per_comp * 2) cap *= 2;
            d->atomic_index = new_directory<OAtomicSlot>(cap);
            d->atomic_cap = cap;
            cap = 16;
            while (cap < static_cast<std::uint64_t>(c.comp_per_module) * 2) cap *= 2;
            d->doc_index = new_directory<ODocSlot>(cap);
            d->doc_cap = cap;
        }

        ref<OModule> mod = store_.make<OModule>();
        db_.mut()->module = mod;
        OModule* m = mod.mut();
        m->id = 1;
        design_attrs ma = module_attrs(seed);
        std::memcpy(m->type, ma.type, sizeof m->type);
        m->build = ma.build;
        ref<OManual> man = store_.make<OManual>();
        m->man = man;
        OManual* mn = man.mut();
        manual_title(mn->title, m->id);
        mn->id = 1;
        mn->text_len = c.manual_size;
        mn->text = store_.make_array<char>(static_cast<std::size_t>(c.manual_size));
        fill_text(mn->text.mut()->data(), c.manual_size, mn->title);
        mn->mod = mod;

        reserve(db_.mut()->composites, static_cast<std::uint32_t>(c.comp_per_module));
        bench::progress prog("composite parts", static_cast<std::uint64_t>(c.comp_per_module));
        for (int i = 0; i < c.comp_per_module; ++i) {
            make_composite(c, seed);
            if (show_progress && (i + 1) % 25 == 0) prog(static_cast<std::uint64_t>(i + 1));
        }
        {
            ODb* d = db_.mut();
            d->bases.data = store_.make_array<ref<OBaseAssembly>>(static_cast<std::size_t>(base_assemblies(c)));
            d->bases.cap = static_cast<std::uint32_t>(base_assemblies(c));
        }
        ref<OComplexAssembly> design_root = make_complex(c, seed, mod, ref<OComplexAssembly>{}, 1);
        mod.mut()->design_root = design_root;
        attach_components(c, seed);
        db_.mut()->generated = 1;
        store_.commit();
    }

    // ---- traversals -----------------------------------------------------------
    // mode: 0 T1 (read), 1 T2a, 2 T2b, 3 T2c, 6 T6
    bench::op_result traverse(int mode) {
        g_sink = {};
        updates_ = 0;
        walk_complex(db_->module->design_root.get(), mode);
        return {g_sink.count, g_sink.sum + updates_};
    }

    // ---- queries -----------------------------------------------------------------
    bench::op_result q1(std::uint64_t input) {
        bench::rng r(input);
        g_sink = {};
        config c = cfg();
        std::int64_t hits = 0;
        for (int k = 0; k < q1_lookups; ++k) {
            const ref<OAtomicPart>* slot = find_atomic(q1_id(r, c));
            if (slot && *slot) {
                const OAtomicPart* a = slot->get();
                null_proc(a->x, a->y, a->type);
                ++hits;
            }
        }
        return {hits, g_sink.sum};
    }
    bench::op_result q4(std::uint64_t input) {
        bench::rng r(input);
        g_sink = {};
        config c = cfg();
        for (int k = 0; k < q4_lookups; ++k) {
            char title[40];
            q4_title(r, c, title);
            const ref<ODocument>* slot = find_doc(title);
            if (!slot) continue;
            const OCompositePart* cp = (*slot)->part.get();
            if (!cp->used_in.size) continue;
            const so::array<ref<OBaseAssembly>>& b = *cp->used_in.data;
            for (std::uint32_t i = 0; i < cp->used_in.size; ++i) null_assembly(b[i]->id);
        }
        return {g_sink.count, g_sink.sum};
    }

    // ---- structural modifications ----------------------------------------------------
    // Creates 5 composite parts, each used by a random base assembly; returns their ids.
    bench::op_result insert(std::uint64_t input, std::vector<std::int32_t>* ids) {
        bench::rng r(input);
        config c = cfg();
        std::int64_t atomics = 0, sum = 0;
        for (int k = 0; k < sm_composites; ++k) {
            ref<OCompositePart> cp = make_composite(c, db_->seed ^ insert_salt);
            const ODb& d = *db_;
            ref<OBaseAssembly> bp = (*d.bases.data)[r.below(d.bases.size)];
            push(bp.mut()->components, cp);
            push(cp.mut()->used_in, bp);
            const OCompositePart* p = cp.get();
            atomics += p->nparts;
            sum += p->id * 7 + bp->id;
            if (ids) ids->push_back(p->id);
        }
        return {atomics, sum};
    }
    // Deletes the composite parts with these ids: unlinks every reference to
    // them and to what they own (the next commit drops what nothing reaches).
    bench::op_result remove(const std::vector<std::int32_t>& ids) {
        std::int64_t objects = 0, sum = 0;
        for (std::int32_t id : ids) {
            const OVec<ref<OCompositePart>>& library = db_->composites;
            const so::array<ref<OCompositePart>>& comps = *library.data;
            std::uint32_t at = library.size;
            for (std::uint32_t i = library.size; i-- > 0;)  // new ones are at the end
                if (comps[i]->id == id) {
                    at = i;
                    break;
                }
            bench::check(at < library.size, "delete: composite part " + std::to_string(id) + " not found");
            ref<OCompositePart> self = comps[at];
            const OCompositePart* p = self.get();
            // every base assembly that uses it
            if (p->used_in.size) {
                const so::array<ref<OBaseAssembly>>& users = *p->used_in.data;
                for (std::uint32_t u = 0; u < p->used_in.size; ++u)
                    erase_value(users[u], &OBaseAssembly::components, self);
            }
            // atomic parts (their connections lead only to atomic parts of
            // the same composite part) out of the index
            const so::array<ref<OAtomicPart>>& parts = *p->parts;
            for (std::int32_t k = 0; k < p->nparts; ++k) {
                const OAtomicPart* a = parts[static_cast<std::size_t>(k)].get();
                objects += conn_per_atomic;
                index_erase_atomic(a->id);
                sum += a->id;
                ++objects;
            }
            index_erase_doc(p->doc->title);
            // out of the module's library (order kept: the same for every system)
            {
                ODb* d = db_.mut();
                ref<OCompositePart>* w = d->composites.data.mut()->data();
                for (std::uint32_t i = at; i + 1 < d->composites.size; ++i) w[i] = w[i + 1];
                d->composites.size -= 1;
                w[d->composites.size] = nullptr;  // no reference left past size
            }
            objects += 3;
            sum += id;
        }
        return {objects, sum};
    }

    void begin() {}
    void commit() { store_.commit(); }
    std::int64_t composite_count() const { return db_->composites.size; }
    std::int64_t atomic_count() const { return db_->atomic_count; }
    std::int64_t doc_count() const { return db_->doc_count; }

    // ---- the system ----
    std::map<std::string, std::int64_t> counters() const { return bench::object_counters(store_); }
    std::vector<std::string> files() const { return {path_, path_ + "-wal"}; }
    std::vector<std::string> check() const { return store_.check(); }
    std::string describe() const {
        return "steppe object engine, " + store_.stats().scheme +
               "; refs with a software residency check, mut() write barrier, persistence by reachability "
               "(delete unlinks); indexes in 4 KiB array objects; durable commit (fdatasync)";
    }
    std::string scheme() const { return store_.stats().scheme; }
    std::uint64_t resident_bytes() const { return store_.stats().resident_bytes; }  // what the budget bounds

private:
    ref<OCompositePart> make_composite(const config& c, std::uint64_t seed) {
        std::int32_t cid = db_.mut()->next_comp_id++;
        ref<OCompositePart> cp = store_.make<OCompositePart>();
        OCompositePart* p = cp.mut();
        p->id = cid;
        design_attrs pa = composite_attrs(seed, cid);
        std::memcpy(p->type, pa.type, sizeof p->type);
        p->build = pa.build;
        // document
        ref<ODocument> dp = store_.make<ODocument>();
        ODocument* d = dp.mut();
        doc_title(d->title, cid);
        d->id = cid;
        d->text_len = c.doc_size;
        d->text = store_.make_array<char>(static_cast<std::size_t>(c.doc_size));
        fill_text(d->text.mut()->data(), c.doc_size, d->title);
        d->part = cp;
        p->doc = dp;
        index_put_doc(d->title, dp);
        // atomic parts
        p->nparts = c.atomic_per_comp;
        p->parts = store_.make_array<ref<OAtomicPart>>(static_cast<std::size_t>(c.atomic_per_comp));
        ref<OAtomicPart>* parts = p->parts.mut()->data();
        for (int k = 0; k < c.atomic_per_comp; ++k) {
            std::int32_t aid = db_.mut()->next_atomic_id++;
            ref<OAtomicPart> ap = store_.make<OAtomicPart>();
            OAtomicPart* a = ap.mut();
            a->id = aid;
            atomic_attrs s = atomic_spec(seed, aid);
            std::memcpy(a->type, s.type, sizeof a->type);
            a->build = s.build;
            a->x = s.x;
            a->y = s.y;
            a->doc_id = cid;
            a->part_of = cp;
            parts[k] = ap;
            index_put_atomic(aid, ap);
        }
        p->root = parts[0];
        // connections: a ring, plus random ones inside the composite part;
        // reverse lists sized exactly first, so building replaces nothing
        std::vector<connection_attrs> spec(static_cast<std::size_t>(c.atomic_per_comp) * conn_per_atomic);
        std::vector<std::uint32_t> indegree(static_cast<std::size_t>(c.atomic_per_comp));
        for (int k = 0; k < c.atomic_per_comp; ++k)
            for (int j = 0; j < conn_per_atomic; ++j) {
                connection_attrs& s = spec[static_cast<std::size_t>(k * conn_per_atomic + j)];
                s = connection_spec(seed, parts[k]->id, k, j, c.atomic_per_comp);
                ++indegree[static_cast<std::size_t>(s.target)];
            }
        for (int k = 0; k < c.atomic_per_comp; ++k)
            reserve(parts[k].mut()->from, indegree[static_cast<std::size_t>(k)]);
        for (int k = 0; k < c.atomic_per_comp; ++k) {
            OAtomicPart* a = parts[k].mut();
            for (int j = 0; j < conn_per_atomic; ++j) {
                const connection_attrs& s = spec[static_cast<std::size_t>(k * conn_per_atomic + j)];
                int t = s.target;
                ref<OConnection> cn = store_.make<OConnection>();
                OConnection* x = cn.mut();
                std::memcpy(x->type, s.type, sizeof x->type);
                x->length = s.length;
                x->from = parts[k];
                x->to = parts[t];
                a->to[j] = cn;
                push(parts[t].mut()->from, cn);
            }
        }
        push(db_.mut()->composites, cp);
        return cp;
    }

    // Every base assembly uses `fanout` composite parts chosen at random; the
    // composite parts' used-in lists are sized exactly first.
    void attach_components(const config& c, std::uint64_t seed) {
        const ODb& d = *db_;
        const so::array<ref<OBaseAssembly>>& bases = *d.bases.data;
        const so::array<ref<OCompositePart>>& comps = *d.composites.data;
        auto pick = [&](const OBaseAssembly* b, int j) { return component_pick(seed, b->id, j, d.composites.size); };
        std::vector<std::uint32_t> uses(d.composites.size);
        for (std::uint32_t i = 0; i < d.bases.size; ++i)
            for (int j = 0; j < c.fanout; ++j) ++uses[pick(bases[i].get(), j)];
        for (std::uint32_t k = 0; k < d.composites.size; ++k) reserve(comps[k].mut()->used_in, uses[k]);
        for (std::uint32_t i = 0; i < d.bases.size; ++i) {
            OBaseAssembly* b = bases[i].mut();
            reserve(b->components, static_cast<std::uint32_t>(c.fanout));
            for (int j = 0; j < c.fanout; ++j) {
                ref<OCompositePart> cp = comps[pick(b, j)];
                push(b->components, cp);
                push(cp.mut()->used_in, bases[i]);
            }
        }
    }

    ref<OComplexAssembly> make_complex(const config& c, std::uint64_t seed, const ref<OModule>& mod,
                                       const ref<OComplexAssembly>& super, int level) {
        ref<OComplexAssembly> ca = store_.make<OComplexAssembly>();
        OComplexAssembly* a = ca.mut();
        a->id = db_.mut()->next_assembly_id++;
        design_attrs attrs = assembly_attrs(seed, a->id);
        std::memcpy(a->type, attrs.type, sizeof a->type);
        a->build = attrs.build;
        a->level = level;
        a->super = super;
        a->module = mod;
        for (int k = 0; k < c.fanout; ++k) {
            if (level + 1 < c.assm_levels) {
                a->sub_complex[k] = make_complex(c, seed, mod, ca, level + 1);
            } else {
                ref<OBaseAssembly> ba = store_.make<OBaseAssembly>();
                OBaseAssembly* b = ba.mut();
                b->id = db_.mut()->next_assembly_id++;
                design_attrs base_attrs = assembly_attrs(seed, b->id);
                std::memcpy(b->type, base_attrs.type, sizeof b->type);
                b->build = base_attrs.build;
                b->super = ca;
                b->module = mod;
                ODb* d = db_.mut();
                d->bases.data.mut()->data()[d->bases.size++] = ba;  // components: attach_components()
                a->sub_base[k] = ba;
            }
        }
        return ca;
    }

    // ---- traversal ----
    void walk_complex(const OComplexAssembly* a, int mode) {
        for (int k = 0; k < 3; ++k) {
            if (a->sub_complex[k]) walk_complex(a->sub_complex[k].get(), mode);
            else if (a->sub_base[k]) walk_base(a->sub_base[k].get(), mode);
        }
    }
    void walk_base(const OBaseAssembly* b, int mode) {
        if (!b->components.size) return;
        const so::array<ref<OCompositePart>>& comps = *b->components.data;
        for (std::uint32_t i = 0; i < b->components.size; ++i) {
            const OCompositePart* cp = comps[i].get();
            if (mode == 6) {
                const OAtomicPart* root = cp->root.get();
                null_proc(root->x, root->y, root->type);
                continue;
            }
            seen_.clear();
            dfs(cp->root, mode);
            if (mode == 1) swap_xy(cp->root);
        }
    }
    void dfs(const ref<OAtomicPart>& r, int mode) {
        const OAtomicPart* a = r.get();
        if (!seen_.insert(a->id)) return;
        null_proc(a->x, a->y, a->type);
        if (mode == 2) swap_xy(r);
        if (mode == 3)
            for (int k = 0; k < 4; ++k) swap_xy(r);
        for (int k = 0; k < conn_per_atomic; ++k) dfs(a->to[k]->to, mode);
    }
    void swap_xy(const ref<OAtomicPart>& r) {
        OAtomicPart* a = r.mut();
        std::swap(a->x, a->y);
        ++updates_;
    }

    // ---- containers (a Vec lies in an object the caller got through mut()) ----
    template <class X>
    void reserve(OVec<X>& v, std::uint32_t n) {  // an empty vector, exactly n places
        if (n == 0 || v.cap) return;
        v.data = store_.template make_array<X>(n);
        v.cap = n;
    }
    template <class X>
    void push(OVec<X>& v, const X& value) {
        if (v.size == v.cap) {
            std::uint32_t cap = std::max<std::uint32_t>(4, v.cap * 2);
            ref<so::array<X>> fresh = store_.template make_array<X>(cap);
            X* to = fresh.mut()->data();
            if (v.cap) {
                const so::array<X>& old = *v.data;
                for (std::uint32_t k = 0; k < v.size; ++k) to[k] = old[k];
            }
            v.data = fresh;  // the old array is no longer reachable
            v.cap = cap;
        }
        v.data.mut()->data()[v.size++] = value;
    }
    // Removes `value` from owner's vector `field` (order kept), writing the
    // owner only if it holds the value.
    template <class O, class X>
    void erase_value(const ref<O>& owner, OVec<X> O::*field, const X& value) {
        const OVec<X>& v = owner.get()->*field;
        if (!v.size) return;
        const so::array<X>& d = *v.data;
        for (std::uint32_t i = 0; i < v.size; ++i) {
            if (!(d[i] == value)) continue;
            OVec<X>& w = owner.mut()->*field;
            X* e = w.data.mut()->data();
            for (std::uint32_t k = i; k + 1 < w.size; ++k) e[k] = e[k + 1];
            w.size -= 1;
            e[w.size] = X{};  // no reference left past size
            return;
        }
    }

    // ---- indexes: open addressing over slots in chunks of a page ----
    template <class S>
    static std::uint64_t chunk_slots(std::uint64_t cap) {
        return std::min<std::uint64_t>(cap, chunk_bytes / sizeof(S));
    }
    // A new, empty index of `cap` slots (the caller points the root at it).
    template <class S>
    ODirectory<S> new_directory(std::uint64_t cap) {
        std::uint64_t per = chunk_slots<S>(cap);
        ODirectory<S> dir = store_.template make_array<ref<so::array<S>>>(cap / per);
        ref<so::array<S>>* d = dir.mut()->data();
        for (std::uint64_t k = 0; k < cap / per; ++k) d[k] = store_.template make_array<S>(per);
        return dir;
    }
    // Slot h of an index of `cap` slots under `dir`.
    template <class S>
    struct slots {
        const so::array<ref<so::array<S>>>& dir;
        std::uint64_t mask, per;
        unsigned shift;
        slots(const ODirectory<S>& d, std::uint64_t cap)
            : dir(*d), mask(cap - 1), per(chunk_slots<S>(cap)),
              shift(static_cast<unsigned>(__builtin_ctzll(chunk_slots<S>(cap)))) {}
        const S& at(std::uint64_t h) const { return (*dir[h >> shift])[h & (per - 1)]; }
        S& mut(std::uint64_t h) const { return (*dir[h >> shift].mut())[h & (per - 1)]; }
    };

    // The index slot holding atomic part `id`'s reference, null if absent.
    const ref<OAtomicPart>* find_atomic(std::int64_t id) const {
        const ODb& d = *db_;
        slots<OAtomicSlot> s(d.atomic_index, d.atomic_cap);
        for (std::uint64_t h = static_cast<std::uint64_t>(id) & s.mask;; h = (h + 1) & s.mask) {
            const OAtomicSlot& x = s.at(h);
            if (x.id == id) return &x.part;
            if (x.id == 0) return nullptr;
        }
    }
    void index_put_atomic(std::int64_t id, const ref<OAtomicPart>& part) {
        if (static_cast<std::uint64_t>(db_->atomic_count + 1) * 10 > db_->atomic_cap * 7) grow_atomic();
        const ODb& d = *db_;
        slots<OAtomicSlot> s(d.atomic_index, d.atomic_cap);
        std::uint64_t h = static_cast<std::uint64_t>(id) & s.mask;
        while (s.at(h).id > 0) h = (h + 1) & s.mask;
        OAtomicSlot& w = s.mut(h);
        w.id = id;
        w.part = part;
        db_.mut()->atomic_count += 1;
    }
    void index_erase_atomic(std::int64_t id) {
        const ODb& d = *db_;
        slots<OAtomicSlot> s(d.atomic_index, d.atomic_cap);
        for (std::uint64_t h = static_cast<std::uint64_t>(id) & s.mask;; h = (h + 1) & s.mask) {
            const OAtomicSlot& x = s.at(h);
            if (x.id == 0) bench::fail("delete: atomic part " + std::to_string(id) + " not in the index");
            if (x.id != id) continue;
            OAtomicSlot& w = s.mut(h);
            w.id = -1;
            w.part = nullptr;
            db_.mut()->atomic_count -= 1;
            return;
        }
    }
    void grow_atomic() {
        const ODb& d = *db_;
        std::uint64_t cap = d.atomic_cap * 2;
        ODirectory<OAtomicSlot> fresh = new_directory<OAtomicSlot>(cap);
        slots<OAtomicSlot> to(fresh, cap), from(d.atomic_index, d.atomic_cap);
        for (std::uint64_t i = 0; i < d.atomic_cap; ++i) {
            const OAtomicSlot& x = from.at(i);
            if (x.id <= 0) continue;
            std::uint64_t h = static_cast<std::uint64_t>(x.id) & to.mask;
            while (to.at(h).id != 0) h = (h + 1) & to.mask;
            to.mut(h) = x;
        }
        ODb* w = db_.mut();
        w->atomic_index = fresh;  // the old directory and chunks are no longer reachable
        w->atomic_cap = cap;
    }
    const ref<ODocument>* find_doc(const char* title) const {
        std::uint64_t hv = title_hash(title);
        const ODb& d = *db_;
        slots<ODocSlot> s(d.doc_index, d.doc_cap);
        for (std::uint64_t h = (hv >> 17) & s.mask;; h = (h + 1) & s.mask) {
            const ODocSlot& x = s.at(h);
            if (x.hash == 0) return nullptr;
            if (x.hash == hv && std::strncmp(x.doc->title, title, 40) == 0) return &x.doc;
        }
    }
    void index_put_doc(const char* title, const ref<ODocument>& doc) {
        if (static_cast<std::uint64_t>(db_->doc_count + 1) * 10 > db_->doc_cap * 7) grow_doc();
        std::uint64_t hv = title_hash(title);
        const ODb& d = *db_;
        slots<ODocSlot> s(d.doc_index, d.doc_cap);
        std::uint64_t h = (hv >> 17) & s.mask;
        while (s.at(h).hash != 0 && s.at(h).hash != 2) h = (h + 1) & s.mask;
        ODocSlot& w = s.mut(h);
        w.hash = hv;
        w.doc = doc;
        db_.mut()->doc_count += 1;
    }
    void index_erase_doc(const char* title) {
        std::uint64_t hv = title_hash(title);
        const ODb& d = *db_;
        slots<ODocSlot> s(d.doc_index, d.doc_cap);
        for (std::uint64_t h = (hv >> 17) & s.mask;; h = (h + 1) & s.mask) {
            const ODocSlot& x = s.at(h);
            if (x.hash == 0) bench::fail(std::string("delete: document ") + title + " not in the index");
            if (x.hash != hv || std::strncmp(x.doc->title, title, 40) != 0) continue;
            ODocSlot& w = s.mut(h);
            w.hash = 2;
            w.doc = nullptr;
            db_.mut()->doc_count -= 1;
            return;
        }
    }
    void grow_doc() {
        const ODb& d = *db_;
        std::uint64_t cap = d.doc_cap * 2;
        ODirectory<ODocSlot> fresh = new_directory<ODocSlot>(cap);
        slots<ODocSlot> to(fresh, cap), from(d.doc_index, d.doc_cap);
        for (std::uint64_t i = 0; i < d.doc_cap; ++i) {
            const ODocSlot& x = from.at(i);
            if (x.hash == 0 || x.hash == 2) continue;
            std::uint64_t h = (x.hash >> 17) & to.mask;
            while (to.at(h).hash != 0) h = (h + 1) & to.mask;
            to.mut(h) = x;
        }
        ODb* w = db_.mut();
        w->doc_index = fresh;
        w->doc_cap = cap;
    }

    so::store store_;
    std::string path_;
    ref<ODb> db_;
    id_set seen_;
    std::int64_t updates_ = 0;
};

}  // namespace oo7
