// lmdb_oo7.hpp — OO7 in LMDB: the objects of oo7.hpp's pointer model as
// records keyed by integer ids, every reference an id.
//
//   database      key -> value (ids are unsigned MDB_INTEGERKEY keys; a reference 0 is null)
//   "module"      1 -> Module {id, type, build, manual, design root}
//   "manual"      1 -> Manual {title, id, text length, module} + the text
//   "complex"     assembly id -> ComplexAssembly {id, type, build, level, super, module,
//                 sub_complex[3], sub_base[3]}
//   "base"        assembly id -> BaseAssembly {id, type, build, super, module, n} + n composite part ids
//   "composite"   id -> CompositePart {id, type, build, nparts, document, root, n} + nparts atomic
//                 part ids + n base assembly ids (used in); in id order it is the module's library
//   "atomic"      id -> AtomicPart {id, type, build, x, y, doc id, part of, 3 connection ids};
//                 its B+tree is the index on atomic part id
//   "from"        atomic part id -> the connections into it, as sorted duplicates
//                 (MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP)
//   "connection"  id -> Connection {type, length, from, to}; a connection's id is its source
//                 part's id * 3 + its number, unique without a counter
//   "document"    id (= its composite part's) -> Document {title, id, text length, part} + the text
//   "title"       title -> document id: the index on document title
//   "meta"        "meta" -> configuration, seed, id counters; "bases" -> the module's base
//                 assemblies in creation order (what insert draws from)
// The counts the driver checks (composite and atomic parts, documents) are the
// databases' entry counts. No operation queries by build date, so, as in the
// pointer model, there is no index on it.
//
// Reads run in one read transaction per operation (mdb_txn_renew /
// mdb_txn_reset); T2a/b/c, insert and delete run in the caller's write
// transaction (begin() / commit()), committed with LMDB's default full sync.
// Where LMDB cannot do what the pointer systems do, it does this instead:
//   - following a reference is an mdb_get (a B+tree descent); the record is
//     read in place in the map (valid for the transaction, and in a write
//     transaction until its database is written: records about to be
//     rewritten are copied first)
//   - an update writes the whole record back with mdb_put (T2c: 4 puts per
//     atomic part, as the pointer systems write x and y 4 times); a record
//     holding a list (a base assembly's components) is rewritten whole when
//     the list changes
//   - a depth-first search tests "visited" on the id it holds, before
//     fetching the part (the pointer model must read the part to learn its id)
//   - delete finds a composite part by its key, not by scanning the library
#pragma once

#include <lmdb.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "lmdb_env.hpp"
#include "oo7.hpp"

namespace oo7 {

class lmdb_model {
public:
    using ref = std::uint32_t;  // the key of the record referred to; 0: none

    // LMDB values are only 2-byte aligned in the map: packed records.
    struct [[gnu::packed]] Module {
        std::int32_t id;
        char type[10];
        std::int32_t build;
        ref manual, design_root;
    };
    struct [[gnu::packed]] Manual {  // + the text
        char title[40];
        std::int32_t id, text_len;
        ref module;
    };
    struct [[gnu::packed]] ComplexAssembly {
        std::int32_t id;
        char type[10];
        std::int32_t build, level;
        ref super, module;
        ref sub_complex[3];  // levels above the last
        ref sub_base[3];     // the last level
    };
    struct [[gnu::packed]] BaseAssembly {  // + ncomponents composite part ids
        std::int32_t id;
        char type[10];
        std::int32_t build;
        ref super, module;
        std::uint32_t ncomponents;
    };
    struct [[gnu::packed]] CompositePart {  // + nparts atomic part ids + nused base assembly ids
        std::int32_t id;
        char type[10];
        std::int32_t build, nparts;
        ref doc, root;
        std::uint32_t nused;
    };
    struct [[gnu::packed]] AtomicPart {
        std::int32_t id;
        char type[10];
        std::int32_t build, x, y, doc_id;
        ref part_of;
        ref to[conn_per_atomic];  // connections
    };
    struct [[gnu::packed]] Connection {
        char type[10];
        std::int32_t length;
        ref from, to;
    };
    struct [[gnu::packed]] Document {  // + the text
        char title[40];
        std::int32_t id, text_len;
        ref part;
    };
    struct meta {  // the driver reads db().seed and db().atomic_per_comp, as from the pointer model's Db
        std::int32_t atomic_per_comp = 0, doc_size = 0, manual_size = 0, comp_per_module = 0, assm_levels = 0,
                     fanout = 0;
        std::uint64_t seed = 0;
        std::int32_t next_comp_id = 0, next_atomic_id = 0, next_assembly_id = 0, generated = 0;
        bool operator==(const meta&) const = default;
    };

    lmdb_model(const std::string& path, bool create, std::size_t map_bytes)
        : path_(path), env_(bench::lmdb::open_env(path, create, 11, map_bytes)) {
        open_databases();
        ok(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &rtxn_), "mdb_txn_begin read");
        mdb_txn_reset(rtxn_);
        load_meta();
    }
    ~lmdb_model() {
        if (rtxn_) mdb_txn_abort(rtxn_);
        if (wtxn_) mdb_txn_abort(wtxn_);
        mdb_env_close(env_);
    }
    lmdb_model(const lmdb_model&) = delete;
    lmdb_model& operator=(const lmdb_model&) = delete;

    const meta& db() const { return meta_; }
    config cfg() const {
        return {"", meta_.atomic_per_comp, meta_.doc_size, meta_.manual_size, meta_.comp_per_module,
                meta_.assm_levels, meta_.fanout};
    }

    // ---- building: one write transaction, keys appended in order where they come in order
    void generate(const config& c, std::uint64_t seed, bool show_progress) {
        bench::check(!meta_.generated, "the store already holds a database");
        begin();
        bulk_ = true;
        meta_ = meta{c.atomic_per_comp, c.doc_size, c.manual_size, c.comp_per_module, c.assm_levels, c.fanout,
                     seed, 1, 1, 1, 0};
        put_manual(c);
        std::vector<composite_obj> library;
        bench::progress prog("composite parts", static_cast<std::uint64_t>(c.comp_per_module));
        for (int i = 0; i < c.comp_per_module; ++i) {
            library.push_back(make_composite(c, seed));
            if (show_progress && (i + 1) % 25 == 0) prog(static_cast<std::uint64_t>(i + 1));
        }
        std::vector<base_obj> bases;
        Module m{};
        m.id = module_id;
        set_design(m, module_attrs(seed));
        m.manual = module_id;
        m.design_root = make_complex(c, seed, 0, 1, bases);
        put(module_, module_id, m, 0);
        attach_components(c, seed, library, bases);
        for (const composite_obj& cp : library) put_composite(cp, MDB_APPEND);
        put_bases(bases);
        meta_.generated = 1;
        commit();
    }

    // ---- traversals: mode 0 T1 (read), 1 T2a, 2 T2b, 3 T2c, 6 T6
    bench::op_result traverse(int mode) {
        read_scope rs(*this);
        g_sink = {};
        updates_ = 0;
        walk_complex(get<Module>(module_, module_id).design_root, mode);
        return {g_sink.count, g_sink.sum + updates_};
    }

    // ---- queries
    bench::op_result q1(std::uint64_t input) {
        read_scope rs(*this);
        bench::rng r(input);
        g_sink = {};
        config c = cfg();
        std::int64_t hits = 0;
        for (int k = 0; k < q1_lookups; ++k) {
            if (const AtomicPart* a = find<AtomicPart>(atomic_, static_cast<ref>(q1_id(r, c)))) {
                null_proc(a->x, a->y, a->type);
                ++hits;
            }
        }
        return {hits, g_sink.sum};
    }
    bench::op_result q4(std::uint64_t input) {
        read_scope rs(*this);
        bench::rng r(input);
        g_sink = {};
        config c = cfg();
        for (int k = 0; k < q4_lookups; ++k) {
            char title[40];
            q4_title(r, c, title);
            ref doc = find_title(title);
            if (!doc) continue;
            const CompositePart& cp = get<CompositePart>(composite_, get<Document>(document_, doc).part);
            for (std::uint32_t i = 0; i < cp.nused; ++i)
                null_assembly(get<BaseAssembly>(base_, list_at(cp, static_cast<std::uint32_t>(cp.nparts) + i)).id);
        }
        return {g_sink.count, g_sink.sum};
    }

    // ---- structural modifications (inside begin() / commit())
    // Creates 5 composite parts, each used by a random base assembly; returns their ids.
    bench::op_result insert(std::uint64_t input, std::vector<std::int32_t>* ids) {
        bench::check(wtxn_ != nullptr, "insert outside a write transaction");
        bench::rng r(input);
        config c = cfg();
        std::int64_t atomics = 0, sum = 0;
        for (int k = 0; k < sm_composites; ++k) {
            composite_obj cp = make_composite(c, meta_.seed ^ insert_salt);
            ref base = random_base(r);
            cp.used_in.push_back(base);
            put_composite(cp, 0);
            std::int32_t id = cp.h.id, base_id = add_component(base, static_cast<ref>(id));
            atomics += cp.h.nparts;
            sum += id * 7 + base_id;
            if (ids) ids->push_back(id);
        }
        return {atomics, sum};
    }
    // Deletes the composite parts with these ids and everything they own.
    bench::op_result remove(const std::vector<std::int32_t>& ids) {
        bench::check(wtxn_ != nullptr, "delete outside a write transaction");
        std::int64_t objects = 0, sum = 0;
        for (std::int32_t id : ids) {
            const CompositePart* p = find<CompositePart>(composite_, static_cast<ref>(id));
            bench::check(p != nullptr, "delete: composite part " + std::to_string(id) + " not found");
            composite_obj cp = read_composite(*p);  // a copy: the deletes below move the map's records
            for (ref u : cp.used_in) remove_component(u, static_cast<ref>(id));
            for (ref a : cp.parts) {
                objects += remove_atomic(a);
                sum += a;
            }
            remove_document(cp.h.doc);
            del(composite_, static_cast<ref>(id));
            objects += 3;
            sum += id;
        }
        return {objects, sum};
    }

    void begin() { ok(mdb_txn_begin(env_, nullptr, 0, &wtxn_), "mdb_txn_begin (write)"); }
    void commit() {
        if (meta_ != stored_) {  // T2 leaves the counters alone: its commit writes only atomic parts
            MDB_val k = name("meta"), v{sizeof meta_, &meta_};
            ok(mdb_put(wtxn_, meta_dbi_, &k, &v, 0), "mdb_put meta");
        }
        int rc = mdb_txn_commit(wtxn_);
        wtxn_ = nullptr;
        bulk_ = false;
        ok(rc, "mdb_txn_commit");
        stored_ = meta_;
    }
    std::int64_t composite_count() const { return entries(composite_); }
    std::int64_t atomic_count() const { return entries(atomic_); }
    std::int64_t doc_count() const { return entries(document_); }

    std::map<std::string, std::int64_t> counters() const { return bench::lmdb::counters(env_); }
    std::vector<std::string> files() const { return bench::lmdb::files(path_); }
    std::string describe() const {
        return "LMDB 0.9.24: OO7 objects as records keyed by id, references as ids (an mdb_get per reference "
               "followed), B+trees as the indexes on atomic part id and document title, texts in the values; "
               "default durable commit";
    }

private:
    static constexpr ref module_id = 1;  // one module (and its manual)

    // Records with lists, in memory while they are built or changed.
    struct base_obj {
        BaseAssembly h;
        std::vector<ref> components;
    };
    struct composite_obj {
        CompositePart h;
        std::vector<ref> parts, used_in;
    };

    // The operation's read transaction, unless it runs inside begin() / commit().
    class read_scope {
    public:
        explicit read_scope(const lmdb_model& m) : txn_(m.wtxn_ ? nullptr : m.rtxn_) {
            if (txn_) ok(mdb_txn_renew(txn_), "mdb_txn_renew");
        }
        ~read_scope() {
            if (txn_) mdb_txn_reset(txn_);
        }
        read_scope(const read_scope&) = delete;
        read_scope& operator=(const read_scope&) = delete;

    private:
        MDB_txn* txn_;
    };

    static void ok(int rc, const std::string& what) { bench::lmdb::ok(rc, what); }
    static MDB_val name(const char* key) { return {std::strlen(key), const_cast<char*>(key)}; }

    void open_databases() {
        MDB_txn* txn;
        ok(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
        const std::pair<const char*, MDB_dbi*> by_id[] = {
            {"module", &module_}, {"manual", &manual_},         {"complex", &complex_},   {"base", &base_},
            {"composite", &composite_}, {"atomic", &atomic_}, {"connection", &connection_}, {"document", &document_}};
        for (const auto& [db, dbi] : by_id)
            ok(mdb_dbi_open(txn, db, MDB_INTEGERKEY | MDB_CREATE, dbi), std::string("mdb_dbi_open ") + db);
        ok(mdb_dbi_open(txn, "from", MDB_INTEGERKEY | MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP | MDB_CREATE, &from_),
           "mdb_dbi_open from");
        ok(mdb_dbi_open(txn, "title", MDB_CREATE, &title_), "mdb_dbi_open title");
        ok(mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_dbi_), "mdb_dbi_open meta");
        ok(mdb_txn_commit(txn), "mdb_txn_commit");
    }
    void load_meta() {
        read_scope rs(*this);
        MDB_val k = name("meta"), v;
        if (mdb_get(rtxn_, meta_dbi_, &k, &v) == 0 && v.mv_size == sizeof meta_) std::memcpy(&meta_, v.mv_data, sizeof meta_);
        stored_ = meta_;
    }
    std::int64_t entries(MDB_dbi dbi) const {
        read_scope rs(*this);
        MDB_stat st;
        ok(mdb_stat(txn(), dbi, &st), "mdb_stat");
        return static_cast<std::int64_t>(st.ms_entries);
    }

    // ---- records ----
    MDB_txn* txn() const { return wtxn_ ? wtxn_ : rtxn_; }
    template <class R>
    const R* find(MDB_dbi dbi, ref id) const {  // in place in the map, or null
        MDB_val k{sizeof id, &id}, v;
        int rc = mdb_get(txn(), dbi, &k, &v);
        if (rc == MDB_NOTFOUND) return nullptr;
        ok(rc, "mdb_get");
        return static_cast<const R*>(v.mv_data);
    }
    template <class R>
    const R& get(MDB_dbi dbi, ref id) const {  // a record that must exist
        const R* r = find<R>(dbi, id);
        if (!r) bench::fail("LMDB: record " + std::to_string(id) + " missing");
        return *r;
    }
    template <class R>
    static ref list_at(const R& r, std::uint32_t i) {  // the i-th id after the record's fixed part
        ref v;
        std::memcpy(&v, reinterpret_cast<const char*>(&r) + sizeof r + i * sizeof v, sizeof v);
        return v;
    }
    // Room for a value of `size` bytes, written in place (MDB_RESERVE: no staging copy).
    char* reserve(MDB_dbi dbi, ref id, std::size_t size, unsigned flags) {
        MDB_val k{sizeof id, &id}, v{size, nullptr};
        ok(mdb_put(wtxn_, dbi, &k, &v, flags | MDB_RESERVE), "mdb_put");
        return static_cast<char*>(v.mv_data);
    }
    // The record, then its lists. flags: MDB_APPEND while building, where keys come in order.
    template <class R>
    void put(MDB_dbi dbi, ref id, const R& r, unsigned flags, std::initializer_list<const std::vector<ref>*> lists = {}) {
        std::size_t size = sizeof r;
        for (const auto* l : lists) size += l->size() * sizeof(ref);
        char* p = reserve(dbi, id, size, bulk_ ? flags : 0);
        std::memcpy(p, &r, sizeof r);
        p += sizeof r;
        for (const auto* l : lists) {
            if (!l->empty()) std::memcpy(p, l->data(), l->size() * sizeof(ref));
            p += l->size() * sizeof(ref);
        }
    }
    template <class R>
    void put_text(MDB_dbi dbi, ref id, const R& r) {  // the record, then its text
        char* p = reserve(dbi, id, sizeof r + static_cast<std::size_t>(r.text_len), bulk_ ? MDB_APPEND : 0);
        std::memcpy(p, &r, sizeof r);
        fill_text(p + sizeof r, r.text_len, r.title);
    }
    void del(MDB_dbi dbi, ref id) {  // in a DUPSORT database, with all its duplicates
        MDB_val k{sizeof id, &id};
        ok(mdb_del(wtxn_, dbi, &k, nullptr), "mdb_del");
    }
    template <class R>
    static void set_design(R& r, const design_attrs& d) {
        std::memcpy(r.type, d.type, sizeof r.type);
        r.build = d.build;
    }

    // ---- building ----
    // A composite part with its document, atomic parts and connections; the
    // composite record itself is the caller's to write, once its used-in list is known.
    composite_obj make_composite(const config& c, std::uint64_t seed) {
        composite_obj cp{};
        std::int32_t id = meta_.next_comp_id++;
        cp.h.id = id;
        set_design(cp.h, composite_attrs(seed, id));
        cp.h.nparts = c.atomic_per_comp;
        cp.h.doc = static_cast<ref>(id);
        put_document(c, id);
        ref first = static_cast<ref>(meta_.next_atomic_id);
        meta_.next_atomic_id += c.atomic_per_comp;
        cp.h.root = first;
        std::vector<std::pair<ref, ref>> into;  // (part, a connection into it)
        for (int k = 0; k < c.atomic_per_comp; ++k) {
            put_atomic(seed, id, first, k, c.atomic_per_comp, into);
            cp.parts.push_back(first + static_cast<ref>(k));
        }
        std::sort(into.begin(), into.end());  // sorted, so building appends
        for (auto [part, conn] : into) {
            MDB_val k{sizeof part, &part}, v{sizeof conn, &conn};
            ok(mdb_put(wtxn_, from_, &k, &v, bulk_ ? MDB_APPENDDUP : 0), "mdb_put from");
        }
        return cp;
    }
    void put_manual(const config& c) {
        Manual man{};
        manual_title(man.title, module_id);
        man.id = module_id;
        man.text_len = c.manual_size;
        man.module = module_id;
        put_text(manual_, module_id, man);
    }
    // The base assembly records, and their ids in creation order for random_base().
    void put_bases(const std::vector<base_obj>& bases) {
        std::vector<ref> ids;
        for (const base_obj& b : bases) {
            put_base(b, MDB_APPEND);
            ids.push_back(static_cast<ref>(b.h.id));
        }
        MDB_val k = name("bases"), v{ids.size() * sizeof(ref), ids.data()};
        ok(mdb_put(wtxn_, meta_dbi_, &k, &v, 0), "mdb_put bases");
    }
    void put_document(const config& c, std::int32_t id) {
        ref doc = static_cast<ref>(id);
        Document d{};
        doc_title(d.title, id);
        d.id = id;
        d.text_len = c.doc_size;
        d.part = doc;
        put_text(document_, doc, d);
        MDB_val k = title_key(d.title), v{sizeof doc, &doc};
        ok(mdb_put(wtxn_, title_, &k, &v, 0), "mdb_put title");
    }
    // The k-th of a composite part's n atomic parts (ids from `first` on) and its outgoing connections;
    // `into` collects the reverse connections.
    void put_atomic(std::uint64_t seed, std::int32_t composite, ref first, int k, int n,
                    std::vector<std::pair<ref, ref>>& into) {
        ref id = first + static_cast<ref>(k);
        atomic_attrs s = atomic_spec(seed, static_cast<std::int32_t>(id));
        AtomicPart a{};
        a.id = static_cast<std::int32_t>(id);
        std::memcpy(a.type, s.type, sizeof a.type);
        a.build = s.build;
        a.x = s.x;
        a.y = s.y;
        a.doc_id = composite;
        a.part_of = static_cast<ref>(composite);
        for (int j = 0; j < conn_per_atomic; ++j) {
            connection_attrs cs = connection_spec(seed, a.id, k, j, n);
            ref conn = id * conn_per_atomic + static_cast<ref>(j), to = first + static_cast<ref>(cs.target);
            Connection x{};
            std::memcpy(x.type, cs.type, sizeof x.type);
            x.length = cs.length;
            x.from = id;
            x.to = to;
            put(connection_, conn, x, MDB_APPEND);
            a.to[j] = conn;
            into.emplace_back(to, conn);
        }
        put(atomic_, id, a, MDB_APPEND);
    }
    void put_composite(const composite_obj& cp, unsigned flags) {
        CompositePart h = cp.h;
        h.nparts = static_cast<std::int32_t>(cp.parts.size());
        h.nused = static_cast<std::uint32_t>(cp.used_in.size());
        put(composite_, static_cast<ref>(h.id), h, flags, {&cp.parts, &cp.used_in});
    }
    void put_base(const base_obj& b, unsigned flags) {
        BaseAssembly h = b.h;
        h.ncomponents = static_cast<std::uint32_t>(b.components.size());
        put(base_, static_cast<ref>(h.id), h, flags, {&b.components});
    }
    // Assembly ids in the pointer model's order; the base assemblies, in
    // creation order, wait in `bases` for their components.
    ref make_complex(const config& c, std::uint64_t seed, ref super, int level, std::vector<base_obj>& bases) {
        ComplexAssembly a{};
        a.id = meta_.next_assembly_id++;
        set_design(a, assembly_attrs(seed, a.id));
        a.level = level;
        a.super = super;
        a.module = module_id;
        ref self = static_cast<ref>(a.id);
        for (int k = 0; k < c.fanout; ++k) {
            if (level + 1 < c.assm_levels) {
                a.sub_complex[k] = make_complex(c, seed, self, level + 1, bases);
            } else {
                base_obj b{};
                b.h.id = meta_.next_assembly_id++;
                set_design(b.h, assembly_attrs(seed, b.h.id));
                b.h.super = self;
                b.h.module = module_id;
                a.sub_base[k] = static_cast<ref>(b.h.id);
                bases.push_back(b);
            }
        }
        put(complex_, self, a, 0);  // after its subtree, so out of key order
        return self;
    }
    // Every base assembly uses `fanout` composite parts chosen at random.
    static void attach_components(const config& c, std::uint64_t seed, std::vector<composite_obj>& library,
                                  std::vector<base_obj>& bases) {
        for (base_obj& b : bases) {
            for (int j = 0; j < c.fanout; ++j) {
                composite_obj& cp = library[component_pick(seed, b.h.id, j, library.size())];
                b.components.push_back(static_cast<ref>(cp.h.id));
                cp.used_in.push_back(static_cast<ref>(b.h.id));
            }
        }
    }

    // ---- traversal ----
    // Assembly and composite records are read in place: T2 writes only atomic parts.
    void walk_complex(ref id, int mode) {
        const ComplexAssembly& a = get<ComplexAssembly>(complex_, id);
        for (int k = 0; k < 3; ++k) {
            if (a.sub_complex[k]) walk_complex(a.sub_complex[k], mode);
            else if (a.sub_base[k]) walk_base(a.sub_base[k], mode);
        }
    }
    void walk_base(ref id, int mode) {
        const BaseAssembly& b = get<BaseAssembly>(base_, id);
        for (std::uint32_t i = 0; i < b.ncomponents; ++i) {
            ref root = get<CompositePart>(composite_, list_at(b, i)).root;
            if (mode == 6) {
                const AtomicPart& r = get<AtomicPart>(atomic_, root);
                null_proc(r.x, r.y, r.type);
                continue;
            }
            seen_.clear();
            dfs(root, mode);
            if (mode == 1) {
                AtomicPart r = get<AtomicPart>(atomic_, root);
                swap_xy(r);
            }
        }
    }
    void dfs(ref id, int mode) {
        if (!seen_.insert(static_cast<std::int32_t>(id))) return;
        AtomicPart a = get<AtomicPart>(atomic_, id);  // a copy: T2 rewrites the record
        null_proc(a.x, a.y, a.type);
        if (mode == 2) swap_xy(a);
        if (mode == 3)
            for (int k = 0; k < 4; ++k) swap_xy(a);
        for (int k = 0; k < conn_per_atomic; ++k) dfs(get<Connection>(connection_, a.to[k]).to, mode);
    }
    void swap_xy(AtomicPart& a) {  // and write the record back
        std::int32_t x = a.x;
        a.x = a.y;
        a.y = x;
        put(atomic_, static_cast<ref>(a.id), a, 0);
        ++updates_;
    }

    // ---- lists and indexes ----
    static MDB_val title_key(const char* title) { return {strnlen(title, 40), const_cast<char*>(title)}; }
    ref find_title(const char* title) const {
        MDB_val k = title_key(title), v;
        int rc = mdb_get(txn(), title_, &k, &v);
        if (rc == MDB_NOTFOUND) return 0;
        ok(rc, "mdb_get title");
        ref doc;
        std::memcpy(&doc, v.mv_data, sizeof doc);
        return doc;
    }
    // A random base assembly of the module, drawn as the pointer model draws from Db::bases.
    ref random_base(bench::rng& r) const {
        MDB_val k = name("bases"), v;
        ok(mdb_get(txn(), meta_dbi_, &k, &v), "mdb_get bases");
        ref b;
        std::memcpy(&b, static_cast<const char*>(v.mv_data) + r.below(v.mv_size / sizeof b) * sizeof b, sizeof b);
        return b;
    }
    base_obj read_base(ref id) const {
        const BaseAssembly& h = get<BaseAssembly>(base_, id);
        base_obj b{h, {}};
        for (std::uint32_t i = 0; i < h.ncomponents; ++i) b.components.push_back(list_at(h, i));
        return b;
    }
    composite_obj read_composite(const CompositePart& h) const {
        composite_obj cp{h, {}, {}};
        std::uint32_t n = static_cast<std::uint32_t>(h.nparts);
        for (std::uint32_t i = 0; i < n; ++i) cp.parts.push_back(list_at(h, i));
        for (std::uint32_t i = 0; i < h.nused; ++i) cp.used_in.push_back(list_at(h, n + i));
        return cp;
    }
    std::int32_t add_component(ref base, ref composite) {  // -> the base assembly's id
        base_obj b = read_base(base);
        b.components.push_back(composite);
        put_base(b, 0);
        return b.h.id;
    }
    void remove_component(ref base, ref composite) {  // one use, as the pointer model's erase_value
        base_obj b = read_base(base);
        auto at = std::find(b.components.begin(), b.components.end(), composite);
        if (at == b.components.end()) return;
        b.components.erase(at);
        put_base(b, 0);
    }
    // An atomic part with its outgoing connections and its list of incoming ones; -> objects removed.
    std::int64_t remove_atomic(ref id) {
        AtomicPart a = get<AtomicPart>(atomic_, id);  // a copy: deleting moves the map's records
        for (int k = 0; k < conn_per_atomic; ++k) del(connection_, a.to[k]);
        del(from_, id);
        del(atomic_, id);
        return conn_per_atomic + 1;
    }
    void remove_document(ref id) {
        Document d = get<Document>(document_, id);
        MDB_val k = title_key(d.title);
        ok(mdb_del(wtxn_, title_, &k, nullptr), "mdb_del title");
        del(document_, id);
    }

    std::string path_;
    MDB_env* env_ = nullptr;
    MDB_dbi module_ = 0, manual_ = 0, complex_ = 0, base_ = 0, composite_ = 0, atomic_ = 0, from_ = 0,
            connection_ = 0, document_ = 0, title_ = 0, meta_dbi_ = 0;
    MDB_txn* rtxn_ = nullptr;
    MDB_txn* wtxn_ = nullptr;
    bool bulk_ = false;  // generating: keys that come in order are appended
    meta meta_, stored_;
    id_set seen_;
    std::int64_t updates_ = 0;
};

}  // namespace oo7
