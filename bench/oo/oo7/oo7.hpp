// oo7.hpp — the OO7 benchmark (Carey, DeWitt & Naughton, SIGMOD 1993),
// written once over a pointer policy (../oo1/policies.hpp); LMDB, which
// holds records rather than objects, has its own model (lmdb_oo7.hpp).
//
//   database   one module: a manual; a design hierarchy of complex assemblies
//              (7 levels, fan-out 3: 364 complex + 729 base assemblies); a
//              library of 500 composite parts, each with a document and a
//              graph of atomic parts (20 small / 200 medium) joined by
//              connection objects (3 out of each part: a ring for
//              connectivity plus 2 random); every base assembly uses 3
//              composite parts chosen at random; indexes on atomic part id
//              and on document title
//   T1         traverse the hierarchy; at every base assembly, each composite
//              part: depth-first over its atomic parts, each once
//   T2a/b/c    T1, swapping x and y of the root part of each composite (a), of
//              every atomic part (b), of every atomic part 4 times (c); commit
//   T6         T1 visiting only the root atomic part of each composite
//   Q1         10 random atomic part ids through the index
//   Q4         100 random document titles through the title index, then the
//              base assemblies using that document's composite part
//   insert     5 new composite parts (documents, atomic parts, connections,
//              index entries) each attached to a random base assembly; commit
//   delete     deletes 5 composite parts an untimed insert just created, with
//              everything they own and every reference to them; commit
//
// The null procedure is called on every atomic part visited (x, y, type) and
// every base assembly Q4 finds; counts and checksums are compared across
// systems by the driver.
//
// A model M gives (what oo7_main.cpp calls):
//   generate(config, seed, show_progress)      builds the database, durable at the end
//   db().seed, db().atomic_per_comp            what the store holds
//   traverse(mode) q1(input) q4(input)         -> {count, checksum}
//   begin() ... commit()                       around T2 (traverse 1-3), insert(input, ids),
//                                              remove(ids); commit makes it durable
//   composite_count() atomic_count() doc_count()
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

namespace oo7 {

struct config {
    const char* name;
    int atomic_per_comp;
    int doc_size;
    int manual_size;
    int comp_per_module;
    int assm_levels;  // levels incl. the base assemblies
    int fanout;       // assemblies per complex assembly, composites per base assembly
};
inline constexpr config small{"small", 20, 2000, 100000, 500, 7, 3};
inline constexpr config medium{"medium", 200, 20000, 1000000, 500, 7, 3};
inline constexpr int conn_per_atomic = 3;
inline constexpr int q1_lookups = 10;
inline constexpr int q4_lookups = 100;
inline constexpr int sm_composites = 5;  // inserted / deleted per structural modification

inline int base_assemblies(const config& c) {
    int n = 1;
    for (int l = 1; l < c.assm_levels; ++l) n *= c.fanout;
    return n;
}
inline std::int64_t t1_visits(const config& c) {
    return static_cast<std::int64_t>(base_assemblies(c)) * c.fanout * c.atomic_per_comp;
}

// ---- the null procedure ----

using bench::g_sink;
using bench::null_proc;
[[gnu::noinline]] inline void null_assembly(std::int32_t id) {
    ++g_sink.count;
    g_sink.sum += id;
}

inline void type_string(char out[10], std::uint64_t r) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "type%06d", static_cast<int>(r % 10));
    std::memcpy(out, buf, 10);
}
inline void doc_title(char out[40], std::int32_t comp_id) {
    std::memset(out, 0, 40);
    std::snprintf(out, 40, "Composite Part %08d", comp_id);
}
inline void manual_title(char out[40], std::int32_t module_id) {
    std::memset(out, 0, 40);
    std::snprintf(out, 40, "Manual for module %d", module_id);
}
// A document's or the manual's text: its title repeated, in lines of 64.
inline void fill_text(char* t, int n, const char* title) {
    std::size_t len = std::strlen(title);
    for (int i = 0; i < n; ++i) t[i] = i % 64 == 63 ? '\n' : title[static_cast<std::size_t>(i) % len];
}

// ---- what the database holds: pure functions of (seed, id), so that every
// model (pointers or LMDB records) builds the same one ----

struct design_attrs {  // of the module, an assembly or a composite part
    char type[10];
    std::int32_t build;
};
inline design_attrs module_attrs(std::uint64_t seed) {
    design_attrs d{};
    type_string(d.type, bench::rnd(seed, 0, 1));
    d.build = 1000;
    return d;
}
inline design_attrs assembly_attrs(std::uint64_t seed, std::int32_t id) {
    design_attrs d{};
    type_string(d.type, bench::rnd(seed, 1000000 + id, 1));
    d.build = static_cast<std::int32_t>(bench::rnd(seed, 1000000 + id, 2) % 10000);
    return d;
}
inline design_attrs composite_attrs(std::uint64_t seed, std::int32_t id) {
    design_attrs d{};
    type_string(d.type, bench::rnd(seed, id, 2));
    d.build = static_cast<std::int32_t>(bench::rnd(seed, id, 3) % 10000);
    return d;
}
struct atomic_attrs {
    char type[10];
    std::int32_t build, x, y;
};
inline atomic_attrs atomic_spec(std::uint64_t seed, std::int32_t id) {
    atomic_attrs a{};
    type_string(a.type, bench::rnd(seed, id, 4));
    a.build = static_cast<std::int32_t>(bench::rnd(seed, id, 5) % 10000);
    a.x = static_cast<std::int32_t>(bench::rnd(seed, id, 6) % 100000);
    a.y = static_cast<std::int32_t>(bench::rnd(seed, id, 7) % 100000);
    return a;
}
struct connection_attrs {
    char type[10];
    std::int32_t length;
    int target;  // the index, within its composite part, of the atomic part it leads to
};
// Connection j out of atomic part `id`, the k-th of a composite part's n:
// j = 0 makes a ring (connectivity), the others go anywhere in the composite.
inline connection_attrs connection_spec(std::uint64_t seed, std::int32_t id, int k, int j, int n) {
    connection_attrs c{};
    c.target = j == 0 ? (k + 1) % n : static_cast<int>(bench::rnd(seed, id, 10 + j) % static_cast<std::uint64_t>(n));
    type_string(c.type, bench::rnd(seed, id, 20 + j));
    c.length = static_cast<std::int32_t>(bench::rnd(seed, id, 30 + j) % 1000);
    return c;
}
// The library position of the j-th composite part base assembly `id` uses.
inline std::uint64_t component_pick(std::uint64_t seed, std::int32_t id, int j, std::uint64_t library_size) {
    return bench::rnd(seed, 1000000 + id, 10 + j) % library_size;
}
inline constexpr std::uint64_t insert_salt = 0x5157;  // inserted composite parts: seed ^ insert_salt

// The operations' inputs, drawn from the operation's stream.
inline std::int64_t q1_id(bench::rng& r, const config& c) {
    return 1 + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(c.comp_per_module) * c.atomic_per_comp));
}
inline void q4_title(bench::rng& r, const config& c, char out[40]) {
    doc_title(out, static_cast<std::int32_t>(1 + r.below(static_cast<std::uint64_t>(c.comp_per_module))));
}

inline std::uint64_t title_hash(const char* t) {
    std::uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 40 && t[i]; ++i) h = (h ^ static_cast<unsigned char>(t[i])) * 1099511628211ull;
    return h | 1;  // 0 = empty slot
}

// A set of atomic part ids for one depth-first search (at most 2 * 200 parts).
class id_set {
public:
    bool insert(std::int32_t id) {
        std::uint32_t h = static_cast<std::uint32_t>(id) * 2654435761u >> 22;  // 1024 slots
        while (keys_[h] != 0) {
            if (keys_[h] == id) return false;
            h = (h + 1) & 1023;
        }
        keys_[h] = id;
        used_[n_++] = h;
        return true;
    }
    void clear() {
        for (std::uint32_t i = 0; i < n_; ++i) keys_[used_[i]] = 0;
        n_ = 0;
    }

private:
    std::int32_t keys_[1024] = {};
    std::uint32_t used_[1024] = {};
    std::uint32_t n_ = 0;
};

enum class op { t1, t2a, t2b, t2c, t6, q1, q4, insert, del };
inline const char* to_string(op o) {
    switch (o) {
        case op::t1: return "t1";
        case op::t2a: return "t2a";
        case op::t2b: return "t2b";
        case op::t2c: return "t2c";
        case op::t6: return "t6";
        case op::q1: return "q1";
        case op::q4: return "q4";
        case op::insert: return "insert";
        case op::del: return "delete";
    }
    return "?";
}
inline bool updates(op o) { return o == op::t2a || o == op::t2b || o == op::t2c || o == op::insert || o == op::del; }

template <class P>
struct types {
    template <class T>
    using ptr = typename P::template ptr<T>;
    template <class T>
    struct Vec {  // a growable array, the same code for every system
        ptr<T> data;
        std::uint32_t size;
        std::uint32_t cap;
    };
    struct AtomicPart;
    struct CompositePart;
    struct BaseAssembly;
    struct ComplexAssembly;
    struct Module;
    struct Connection {
        char type[10];
        std::int32_t length;
        ptr<AtomicPart> from;
        ptr<AtomicPart> to;
    };
    struct AtomicPart {
        std::int32_t id;
        char type[10];
        std::int32_t build;
        std::int32_t x, y;
        std::int32_t doc_id;
        ptr<Connection> to[conn_per_atomic];
        Vec<ptr<Connection>> from;
        ptr<CompositePart> part_of;
    };
    struct Document {
        char title[40];
        std::int32_t id;
        std::int32_t text_len;
        ptr<char> text;
        ptr<CompositePart> part;
    };
    struct CompositePart {
        std::int32_t id;
        char type[10];
        std::int32_t build;
        std::int32_t nparts;
        ptr<Document> doc;
        Vec<ptr<BaseAssembly>> used_in;
        ptr<ptr<AtomicPart>> parts;
        ptr<AtomicPart> root;
    };
    struct BaseAssembly {
        std::int32_t id;
        char type[10];
        std::int32_t build;
        ptr<ComplexAssembly> super;
        ptr<Module> module;
        Vec<ptr<CompositePart>> components;
    };
    struct ComplexAssembly {
        std::int32_t id;
        char type[10];
        std::int32_t build;
        std::int32_t level;
        ptr<ComplexAssembly> super;
        ptr<Module> module;
        ptr<ComplexAssembly> sub_complex[3];  // levels above the last
        ptr<BaseAssembly> sub_base[3];        // the last level
    };
    struct Manual {
        char title[40];
        std::int32_t id;
        std::int32_t text_len;
        ptr<char> text;
        ptr<Module> mod;
    };
    struct Module {
        std::int32_t id;
        char type[10];
        std::int32_t build;
        ptr<Manual> man;
        ptr<ComplexAssembly> design_root;
    };
    struct AtomicSlot {  // identity hash (dense ids), linear probing; id 0 empty, -1 deleted
        std::int64_t id;
        ptr<AtomicPart> part;
    };
    struct DocSlot {  // hash 0 empty, 2 deleted (real hashes are odd)
        std::uint64_t hash;
        ptr<Document> doc;
    };
    struct Db {
        std::int32_t atomic_per_comp, doc_size, manual_size, comp_per_module, assm_levels, fanout;
        std::uint64_t seed;
        std::int32_t next_comp_id, next_atomic_id, next_assembly_id;
        std::int32_t generated;
        ptr<Module> module;
        ptr<AtomicSlot> atomic_index;
        std::uint64_t atomic_cap;
        std::int64_t atomic_count;
        ptr<DocSlot> doc_index;
        std::uint64_t doc_cap;
        std::int64_t doc_count;
        Vec<ptr<CompositePart>> composites;
        Vec<ptr<BaseAssembly>> bases;
    };
};

template <class P>
class pointer_model {
public:
    using T = types<P>;
    template <class X>
    using ptr = typename T::template ptr<X>;
    template <class X>
    using Vec = typename T::template Vec<X>;
    using AtomicPart = typename T::AtomicPart;
    using Connection = typename T::Connection;
    using CompositePart = typename T::CompositePart;
    using Document = typename T::Document;
    using BaseAssembly = typename T::BaseAssembly;
    using ComplexAssembly = typename T::ComplexAssembly;
    using Manual = typename T::Manual;
    using Module = typename T::Module;
    using AtomicSlot = typename T::AtomicSlot;
    using DocSlot = typename T::DocSlot;
    using Db = typename T::Db;

    explicit pointer_model(P& sys) : sys_(sys), db_(sys.template root<Db>("oo7")) {}

    const Db& db() const { return *db_; }
    config cfg() const {
        return {"", db_->atomic_per_comp, db_->doc_size, db_->manual_size, db_->comp_per_module, db_->assm_levels,
                db_->fanout};
    }

    // ---- building ----------------------------------------------------------
    void generate(const config& c, std::uint64_t seed, bool show_progress) {
        bench::check(!db_->generated, "the store already holds a database");
        sys_.bulk_begin();
        db_->atomic_per_comp = c.atomic_per_comp;
        db_->doc_size = c.doc_size;
        db_->manual_size = c.manual_size;
        db_->comp_per_module = c.comp_per_module;
        db_->assm_levels = c.assm_levels;
        db_->fanout = c.fanout;
        db_->seed = seed;
        db_->next_comp_id = db_->next_atomic_id = db_->next_assembly_id = 1;
        std::uint64_t cap = 16;
        while (cap < static_cast<std::uint64_t>(c.comp_per_module) * c.atomic_per_comp * 2) cap *= 2;
        db_->atomic_index = sys_.template make_array<AtomicSlot>(cap);
        db_->atomic_cap = cap;
        cap = 16;
        while (cap < static_cast<std::uint64_t>(c.comp_per_module) * 2) cap *= 2;
        db_->doc_index = sys_.template make_array<DocSlot>(cap);
        db_->doc_cap = cap;

        ptr<Module> mod = sys_.template make<Module>();
        db_->module = mod;
        Module* m = P::get(mod);
        m->id = 1;
        design_attrs ma = module_attrs(seed);
        std::memcpy(m->type, ma.type, sizeof m->type);
        m->build = ma.build;
        ptr<Manual> man = sys_.template make<Manual>();
        m->man = man;
        Manual* mn = P::get(man);
        manual_title(mn->title, m->id);
        mn->id = 1;
        mn->text_len = c.manual_size;
        mn->text = sys_.template make_array<char>(static_cast<std::size_t>(c.manual_size));
        fill_text(P::get(mn->text), c.manual_size, mn->title);
        mn->mod = mod;

        reserve(db_->composites, static_cast<std::uint32_t>(c.comp_per_module));
        bench::progress prog("composite parts", static_cast<std::uint64_t>(c.comp_per_module));
        for (int i = 0; i < c.comp_per_module; ++i) {
            make_composite(c, seed);
            if (show_progress && (i + 1) % 25 == 0) prog(static_cast<std::uint64_t>(i + 1));
        }
        db_->bases.data = sys_.template make_array<ptr<BaseAssembly>>(static_cast<std::size_t>(base_assemblies(c)));
        db_->bases.cap = static_cast<std::uint32_t>(base_assemblies(c));
        m->design_root = make_complex(c, seed, mod, ptr<ComplexAssembly>{}, 1);
        attach_components(c, seed);
        db_->generated = 1;
        sys_.bulk_end();
    }

    // ---- traversals -----------------------------------------------------------
    // mode: 0 T1 (read), 1 T2a, 2 T2b, 3 T2c, 6 T6
    bench::op_result traverse(int mode) {
        g_sink = {};
        updates_ = 0;
        walk_complex(P::get(P::get(db_->module)->design_root), mode);
        return {g_sink.count, g_sink.sum + updates_};
    }

    // ---- queries -----------------------------------------------------------------
    bench::op_result q1(std::uint64_t input) {
        bench::rng r(input);
        g_sink = {};
        config c = cfg();
        std::int64_t hits = 0;
        for (int k = 0; k < q1_lookups; ++k) {
            if (AtomicPart* a = P::get(find_atomic(q1_id(r, c)))) {
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
            Document* d = P::get(find_doc(title));
            if (!d) continue;
            CompositePart* cp = P::get(d->part);
            const ptr<BaseAssembly>* b = P::get(cp->used_in.data);
            for (std::uint32_t i = 0; i < cp->used_in.size; ++i) null_assembly(P::get(b[i])->id);
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
            ptr<CompositePart> cp = make_composite(c, db_->seed ^ insert_salt);
            CompositePart* p = P::get(cp);
            ptr<BaseAssembly> bp = P::get(db_->bases.data)[r.below(db_->bases.size)];
            BaseAssembly* b = P::get(bp);
            push(b->components, cp);
            push(p->used_in, bp);
            atomics += p->nparts;
            sum += p->id * 7 + b->id;
            if (ids) ids->push_back(p->id);
        }
        return {atomics, sum};
    }
    // Deletes the composite parts with these ids and everything they own.
    bench::op_result remove(const std::vector<std::int32_t>& ids) {
        std::int64_t objects = 0, sum = 0;
        for (std::int32_t id : ids) {
            CompositePart* p = nullptr;
            std::uint32_t at = 0;
            ptr<CompositePart>* comps = P::get(db_->composites.data);
            for (std::uint32_t i = db_->composites.size; i-- > 0;)  // new ones are at the end
                if (P::get(comps[i])->id == id) {
                    p = P::get(comps[i]);
                    at = i;
                    break;
                }
            bench::check(p != nullptr, "delete: composite part " + std::to_string(id) + " not found");
            ptr<CompositePart> self = comps[at];
            // every base assembly that uses it
            const ptr<BaseAssembly>* users = P::get(p->used_in.data);
            for (std::uint32_t u = 0; u < p->used_in.size; ++u) erase_value(P::get(users[u])->components, self);
            // atomic parts, their connections and index entries
            ptr<AtomicPart>* parts = P::get(p->parts);
            for (std::int32_t k = 0; k < p->nparts; ++k) {
                AtomicPart* a = P::get(parts[k]);
                for (auto& c : a->to) {
                    sys_.destroy(c, 1);
                    ++objects;
                }
                if (a->from.cap) sys_.destroy(a->from.data, a->from.cap);
                index_erase_atomic(a->id);
                sum += a->id;
                sys_.destroy(parts[k], 1);
                ++objects;
            }
            sys_.destroy(p->parts, static_cast<std::size_t>(p->nparts));
            Document* d = P::get(p->doc);
            index_erase_doc(d->title);
            sys_.destroy(d->text, static_cast<std::size_t>(d->text_len));
            sys_.destroy(p->doc, 1);
            if (p->used_in.cap) sys_.destroy(p->used_in.data, p->used_in.cap);
            // out of the module's library (order kept: the same for every system)
            sys_.will_write(&db_->composites);
            for (std::uint32_t i = at; i + 1 < db_->composites.size; ++i) {
                sys_.will_write(&comps[i]);
                comps[i] = comps[i + 1];
            }
            db_->composites.size -= 1;
            sys_.destroy(self, 1);
            objects += 3;
            sum += id;
        }
        return {objects, sum};
    }

    void begin() { sys_.begin(); }
    void commit() { sys_.commit(); }
    std::int64_t composite_count() const { return db_->composites.size; }
    std::int64_t atomic_count() const { return db_->atomic_count; }
    std::int64_t doc_count() const { return db_->doc_count; }

private:
    ptr<CompositePart> make_composite(const config& c, std::uint64_t seed) {
        std::int32_t cid = db_->next_comp_id++;
        ptr<CompositePart> cp = sys_.template make<CompositePart>();
        CompositePart* p = P::get(cp);
        p->id = cid;
        design_attrs pa = composite_attrs(seed, cid);
        std::memcpy(p->type, pa.type, sizeof p->type);
        p->build = pa.build;
        // document
        ptr<Document> dp = sys_.template make<Document>();
        Document* d = P::get(dp);
        doc_title(d->title, cid);
        d->id = cid;
        d->text_len = c.doc_size;
        d->text = sys_.template make_array<char>(static_cast<std::size_t>(c.doc_size));
        fill_text(P::get(d->text), c.doc_size, d->title);
        d->part = cp;
        p->doc = dp;
        index_put_doc(d->title, dp);
        // atomic parts
        p->nparts = c.atomic_per_comp;
        p->parts = sys_.template make_array<ptr<AtomicPart>>(static_cast<std::size_t>(c.atomic_per_comp));
        ptr<AtomicPart>* parts = P::get(p->parts);
        for (int k = 0; k < c.atomic_per_comp; ++k) {
            std::int32_t aid = db_->next_atomic_id++;
            ptr<AtomicPart> ap = sys_.template make<AtomicPart>();
            AtomicPart* a = P::get(ap);
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
        // reverse lists sized exactly first, so building frees nothing
        std::vector<connection_attrs> spec(static_cast<std::size_t>(c.atomic_per_comp) * conn_per_atomic);
        std::vector<std::uint32_t> indegree(static_cast<std::size_t>(c.atomic_per_comp));
        for (int k = 0; k < c.atomic_per_comp; ++k)
            for (int j = 0; j < conn_per_atomic; ++j) {
                connection_attrs& s = spec[static_cast<std::size_t>(k * conn_per_atomic + j)];
                s = connection_spec(seed, P::get(parts[k])->id, k, j, c.atomic_per_comp);
                ++indegree[static_cast<std::size_t>(s.target)];
            }
        for (int k = 0; k < c.atomic_per_comp; ++k) reserve(P::get(parts[k])->from, indegree[static_cast<std::size_t>(k)]);
        for (int k = 0; k < c.atomic_per_comp; ++k) {
            AtomicPart* a = P::get(parts[k]);
            for (int j = 0; j < conn_per_atomic; ++j) {
                const connection_attrs& s = spec[static_cast<std::size_t>(k * conn_per_atomic + j)];
                int t = s.target;
                ptr<Connection> cn = sys_.template make<Connection>();
                Connection* x = P::get(cn);
                std::memcpy(x->type, s.type, sizeof x->type);
                x->length = s.length;
                x->from = parts[k];
                x->to = parts[t];
                a->to[j] = cn;
                push(P::get(parts[t])->from, cn);
            }
        }
        push(db_->composites, cp);
        return cp;
    }

    // Every base assembly uses `fanout` composite parts chosen at random; the
    // composite parts' used-in lists are sized exactly first.
    void attach_components(const config& c, std::uint64_t seed) {
        const ptr<BaseAssembly>* bases = P::get(db_->bases.data);
        ptr<CompositePart>* comps = P::get(db_->composites.data);
        auto pick = [&](const BaseAssembly* b, int j) { return component_pick(seed, b->id, j, db_->composites.size); };
        std::vector<std::uint32_t> uses(db_->composites.size);
        for (std::uint32_t i = 0; i < db_->bases.size; ++i)
            for (int j = 0; j < c.fanout; ++j) ++uses[pick(P::get(bases[i]), j)];
        for (std::uint32_t k = 0; k < db_->composites.size; ++k) reserve(P::get(comps[k])->used_in, uses[k]);
        for (std::uint32_t i = 0; i < db_->bases.size; ++i) {
            BaseAssembly* b = P::get(bases[i]);
            reserve(b->components, static_cast<std::uint32_t>(c.fanout));
            for (int j = 0; j < c.fanout; ++j) {
                ptr<CompositePart> cp = comps[pick(b, j)];
                push(b->components, cp);
                push(P::get(cp)->used_in, bases[i]);
            }
        }
    }

    ptr<ComplexAssembly> make_complex(const config& c, std::uint64_t seed, const ptr<Module>& mod,
                                      const ptr<ComplexAssembly>& super, int level) {
        ptr<ComplexAssembly> ca = sys_.template make<ComplexAssembly>();
        ComplexAssembly* a = P::get(ca);
        a->id = db_->next_assembly_id++;
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
                ptr<BaseAssembly> ba = sys_.template make<BaseAssembly>();
                BaseAssembly* b = P::get(ba);
                b->id = db_->next_assembly_id++;
                design_attrs base_attrs = assembly_attrs(seed, b->id);
                std::memcpy(b->type, base_attrs.type, sizeof b->type);
                b->build = base_attrs.build;
                b->super = ca;
                b->module = mod;
                P::get(db_->bases.data)[db_->bases.size++] = ba;  // components: attach_components()
                a->sub_base[k] = ba;
            }
        }
        return ca;
    }

    // ---- traversal ----
    void walk_complex(ComplexAssembly* a, int mode) {
        for (int k = 0; k < 3; ++k) {
            if (ComplexAssembly* sub = P::get(a->sub_complex[k])) walk_complex(sub, mode);
            else if (BaseAssembly* b = P::get(a->sub_base[k])) walk_base(b, mode);
        }
    }
    void walk_base(BaseAssembly* b, int mode) {
        const ptr<CompositePart>* comps = P::get(b->components.data);
        for (std::uint32_t i = 0; i < b->components.size; ++i) {
            CompositePart* cp = P::get(comps[i]);
            AtomicPart* root = P::get(cp->root);
            if (mode == 6) {
                null_proc(root->x, root->y, root->type);
                continue;
            }
            seen_.clear();
            dfs(root, mode);
            if (mode == 1) swap_xy(root);
        }
    }
    void dfs(AtomicPart* a, int mode) {
        if (!seen_.insert(a->id)) return;
        null_proc(a->x, a->y, a->type);
        if (mode == 2) swap_xy(a);
        if (mode == 3)
            for (int k = 0; k < 4; ++k) swap_xy(a);
        for (int k = 0; k < conn_per_atomic; ++k) dfs(P::get(P::get(a->to[k])->to), mode);
    }
    void swap_xy(AtomicPart* a) {
        sys_.will_write(&a->x, 2 * sizeof(std::int32_t));
        std::swap(a->x, a->y);
        ++updates_;
    }

    // ---- containers ----
    template <class X>
    void reserve(Vec<X>& v, std::uint32_t n) {  // an empty vector, exactly n places
        if (n == 0 || v.cap) return;
        sys_.will_write(&v);
        v.data = sys_.template make_array<X>(n);
        v.cap = n;
    }
    template <class X>
    void push(Vec<X>& v, const X& value) {
        sys_.will_write(&v);
        if (v.size == v.cap) {
            std::uint32_t cap = std::max<std::uint32_t>(4, v.cap * 2);
            ptr<X> fresh = sys_.template make_array<X>(cap);
            X* to = P::get(fresh);
            X* old = P::get(v.data);
            for (std::uint32_t k = 0; k < v.size; ++k) to[k] = old[k];
            if (old) sys_.destroy(v.data, v.cap);
            v.data = fresh;
            v.cap = cap;
        } else {
            sys_.will_write(&P::get(v.data)[v.size]);
        }
        P::get(v.data)[v.size++] = value;
    }
    template <class X>
    void erase_value(Vec<X>& v, const X& value) {
        X* d = P::get(v.data);
        for (std::uint32_t i = 0; i < v.size; ++i) {
            if (P::get(d[i]) != P::get(value)) continue;
            sys_.will_write(&v);
            sys_.will_write(d + i, sizeof(X) * (v.size - i));
            for (std::uint32_t k = i; k + 1 < v.size; ++k) d[k] = d[k + 1];
            v.size -= 1;
            return;
        }
    }

    // ---- indexes ----
    ptr<AtomicPart> find_atomic(std::int64_t id) const {
        const AtomicSlot* s = P::get(db_->atomic_index);
        std::uint64_t mask = db_->atomic_cap - 1;
        for (std::uint64_t h = static_cast<std::uint64_t>(id) & mask;; h = (h + 1) & mask) {
            if (s[h].id == id) return s[h].part;
            if (s[h].id == 0) return ptr<AtomicPart>{};
        }
    }
    void index_put_atomic(std::int64_t id, const ptr<AtomicPart>& part) {
        if (static_cast<std::uint64_t>(db_->atomic_count + 1) * 10 > db_->atomic_cap * 7) grow_atomic();
        AtomicSlot* s = P::get(db_->atomic_index);
        std::uint64_t mask = db_->atomic_cap - 1;
        std::uint64_t h = static_cast<std::uint64_t>(id) & mask;
        while (s[h].id > 0) h = (h + 1) & mask;
        sys_.will_write(&s[h]);
        s[h].id = id;
        s[h].part = part;
        sys_.will_write(db_);
        db_->atomic_count += 1;
    }
    void index_erase_atomic(std::int64_t id) {
        AtomicSlot* s = P::get(db_->atomic_index);
        std::uint64_t mask = db_->atomic_cap - 1;
        for (std::uint64_t h = static_cast<std::uint64_t>(id) & mask;; h = (h + 1) & mask) {
            if (s[h].id == 0) bench::fail("delete: atomic part " + std::to_string(id) + " not in the index");
            if (s[h].id != id) continue;
            sys_.will_write(&s[h]);
            s[h].id = -1;
            s[h].part = ptr<AtomicPart>{};
            sys_.will_write(db_);
            db_->atomic_count -= 1;
            return;
        }
    }
    void grow_atomic() {
        std::uint64_t cap = db_->atomic_cap * 2, mask = cap - 1;
        ptr<AtomicSlot> fresh = sys_.template make_array<AtomicSlot>(cap);
        AtomicSlot* to = P::get(fresh);
        AtomicSlot* from = P::get(db_->atomic_index);
        for (std::uint64_t i = 0; i < db_->atomic_cap; ++i) {
            if (from[i].id <= 0) continue;
            std::uint64_t h = static_cast<std::uint64_t>(from[i].id) & mask;
            while (to[h].id != 0) h = (h + 1) & mask;
            to[h] = from[i];
        }
        sys_.destroy(db_->atomic_index, db_->atomic_cap);
        sys_.will_write(db_);
        db_->atomic_index = fresh;
        db_->atomic_cap = cap;
    }
    ptr<Document> find_doc(const char* title) const {
        std::uint64_t hv = title_hash(title);
        const DocSlot* s = P::get(db_->doc_index);
        std::uint64_t mask = db_->doc_cap - 1;
        for (std::uint64_t h = (hv >> 17) & mask;; h = (h + 1) & mask) {
            if (s[h].hash == 0) return ptr<Document>{};
            if (s[h].hash == hv && std::strncmp(P::get(s[h].doc)->title, title, 40) == 0) return s[h].doc;
        }
    }
    void index_put_doc(const char* title, const ptr<Document>& doc) {
        if (static_cast<std::uint64_t>(db_->doc_count + 1) * 10 > db_->doc_cap * 7) grow_doc();
        std::uint64_t hv = title_hash(title);
        DocSlot* s = P::get(db_->doc_index);
        std::uint64_t mask = db_->doc_cap - 1;
        std::uint64_t h = (hv >> 17) & mask;
        while (s[h].hash != 0 && s[h].hash != 2) h = (h + 1) & mask;
        sys_.will_write(&s[h]);
        s[h].hash = hv;
        s[h].doc = doc;
        sys_.will_write(db_);
        db_->doc_count += 1;
    }
    void index_erase_doc(const char* title) {
        std::uint64_t hv = title_hash(title);
        DocSlot* s = P::get(db_->doc_index);
        std::uint64_t mask = db_->doc_cap - 1;
        for (std::uint64_t h = (hv >> 17) & mask;; h = (h + 1) & mask) {
            if (s[h].hash == 0) bench::fail(std::string("delete: document ") + title + " not in the index");
            if (s[h].hash != hv || std::strncmp(P::get(s[h].doc)->title, title, 40) != 0) continue;
            sys_.will_write(&s[h]);
            s[h].hash = 2;
            s[h].doc = ptr<Document>{};
            sys_.will_write(db_);
            db_->doc_count -= 1;
            return;
        }
    }
    void grow_doc() {
        std::uint64_t cap = db_->doc_cap * 2, mask = cap - 1;
        ptr<DocSlot> fresh = sys_.template make_array<DocSlot>(cap);
        DocSlot* to = P::get(fresh);
        DocSlot* from = P::get(db_->doc_index);
        for (std::uint64_t i = 0; i < db_->doc_cap; ++i) {
            if (from[i].hash == 0 || from[i].hash == 2) continue;
            std::uint64_t h = (from[i].hash >> 17) & mask;
            while (to[h].hash != 0) h = (h + 1) & mask;
            to[h] = from[i];
        }
        sys_.destroy(db_->doc_index, db_->doc_cap);
        sys_.will_write(db_);
        db_->doc_index = fresh;
        db_->doc_cap = cap;
    }

    P& sys_;
    Db* db_;
    id_set seen_;
    std::int64_t updates_ = 0;
};

}  // namespace oo7
