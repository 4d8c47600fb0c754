// lmdb_oo1.hpp — OO1 in LMDB: parts as records, connections as ids.
//
//   "parts"  key: part id (unsigned int, MDB_INTEGERKEY)
//            value: the part record with its 3 connections {to id, type, length}
//   "from"   key: part id; duplicates (MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP):
//            from_id * 4 + connection number, one per connection into the part,
//            so two connections from the same part stay two entries and the
//            order (by source id, then connection) matches the pointer systems'
//   the B+tree on "parts" is the index on part id
//
// A handle is a pointer into LMDB's map, valid for the read transaction;
// following a connection is an mdb_get. Reads run in one read transaction
// per operation (mdb_txn_renew / mdb_txn_reset); an insert is one write
// transaction committed with LMDB's default full sync (two fdatasyncs).
#pragma once

#include <lmdb.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "harness.hpp"
#include "lmdb_env.hpp"
#include "oo1.hpp"

namespace oo1 {

class lmdb_model {
public:
    struct [[gnu::packed]] Conn {  // LMDB values are only 2-byte aligned in the map
        std::uint32_t to;
        char type[10];
        std::int32_t length;
    };
    struct [[gnu::packed]] Part {
        std::int32_t id;
        char type[10];
        std::int32_t x, y;
        std::int64_t build;
        Conn to[fanout];
    };
    using handle = const Part*;

    lmdb_model(const std::string& path, bool create, std::size_t map_bytes)
        : path_(path), env_(bench::lmdb::open_env(path, create, 4, map_bytes)) {
        MDB_txn* txn;
        ok(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
        ok(mdb_dbi_open(txn, "parts", MDB_INTEGERKEY | MDB_CREATE, &parts_), "mdb_dbi_open parts");
        ok(mdb_dbi_open(txn, "from", MDB_INTEGERKEY | MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP | MDB_CREATE, &from_),
           "mdb_dbi_open from");
        ok(mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_dbi_), "mdb_dbi_open meta");
        ok(mdb_txn_commit(txn), "mdb_txn_commit");
        ok(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &rtxn_), "mdb_txn_begin read");
        for (auto& c : cursors_) ok(mdb_cursor_open(rtxn_, from_, &c), "mdb_cursor_open");
        mdb_txn_reset(rtxn_);
        load_meta();
    }
    ~lmdb_model() {
        for (auto& c : cursors_) mdb_cursor_close(c);
        if (rtxn_) mdb_txn_abort(rtxn_);
        if (wtxn_) mdb_txn_abort(wtxn_);
        mdb_env_close(env_);
    }
    lmdb_model(const lmdb_model&) = delete;
    lmdb_model& operator=(const lmdb_model&) = delete;

    // ---- building ----
    void generate(std::int64_t n, std::uint64_t seed, bool show_progress) {
        bench::check(meta_.parts == 0, "the store already holds a database");
        MDB_txn* txn;
        ok(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
        // reverse connections first gathered in memory, then appended in key order
        std::vector<std::uint32_t> indegree(static_cast<std::size_t>(n) + 2);
        bench::progress prog("parts", static_cast<std::uint64_t>(n));
        for (std::int64_t id = 1; id <= n; ++id) {
            part_spec s = spec(seed, n, id);
            Part rec = record(s);
            put(txn, parts_, static_cast<unsigned>(id), &rec, sizeof rec, MDB_APPEND);
            for (const auto& c : s.conn) ++indegree[static_cast<std::size_t>(c.to)];
            if (show_progress && id % 4096 == 0) prog(static_cast<std::uint64_t>(id));
        }
        if (show_progress) prog(static_cast<std::uint64_t>(n));
        std::vector<std::uint64_t> start(static_cast<std::size_t>(n) + 2);
        for (std::int64_t id = 1; id <= n; ++id)
            start[static_cast<std::size_t>(id) + 1] = start[static_cast<std::size_t>(id)] + indegree[static_cast<std::size_t>(id)];
        std::vector<std::uint64_t> entries(start[static_cast<std::size_t>(n) + 1]);
        std::vector<std::uint64_t> fill(start.begin(), start.end());
        for (std::int64_t id = 1; id <= n; ++id) {
            part_spec s = spec(seed, n, id);
            for (int c = 0; c < fanout; ++c)
                entries[fill[static_cast<std::size_t>(s.conn[c].to)]++] = static_cast<std::uint64_t>(id) * 4 + static_cast<std::uint64_t>(c);
        }
        bench::progress prog2("connections", static_cast<std::uint64_t>(n));
        for (std::int64_t id = 1; id <= n; ++id) {
            for (std::uint64_t k = start[static_cast<std::size_t>(id)]; k < start[static_cast<std::size_t>(id) + 1]; ++k) {
                std::size_t v = entries[k];
                put(txn, from_, static_cast<unsigned>(id), &v, sizeof v, MDB_APPENDDUP);
            }
            if (show_progress && id % 4096 == 0) prog2(static_cast<std::uint64_t>(id));
        }
        if (show_progress) prog2(static_cast<std::uint64_t>(n));
        meta_ = {n, n, n, seed};
        put_meta(txn);
        ok(mdb_txn_commit(txn), "mdb_txn_commit (generate)");
    }

    // ---- reading ----
    handle find(std::int64_t id) const {
        unsigned key = static_cast<unsigned>(id);
        MDB_val k{sizeof key, &key}, v;
        MDB_txn* txn = wtxn_ ? wtxn_ : rtxn_;
        int rc = mdb_get(txn, parts_, &k, &v);
        if (rc == MDB_NOTFOUND) return nullptr;
        ok(rc, "mdb_get");
        return static_cast<const Part*>(v.mv_data);
    }
    const Part& part(handle h) const { return *h; }
    handle out(const Part& p, int c) const { return find(p.to[c].to); }
    template <class F>
    void for_each_from(const Part& p, int depth, F&& f) const {
        MDB_cursor* cur = cursors_[static_cast<std::size_t>(depth)];
        unsigned key = static_cast<unsigned>(p.id);
        MDB_val k{sizeof key, &key}, v;
        int rc = mdb_cursor_get(cur, &k, &v, MDB_SET);
        while (rc == 0) {
            std::size_t from;
            std::memcpy(&from, v.mv_data, sizeof from);
            f(find(static_cast<std::int64_t>(from / 4)));
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP);
        }
        if (rc != MDB_NOTFOUND) ok(rc, "mdb_cursor_get");
    }
    void begin_read() {
        ok(mdb_txn_renew(rtxn_), "mdb_txn_renew");
        for (auto& c : cursors_) ok(mdb_cursor_renew(rtxn_, c), "mdb_cursor_renew");
    }
    void end_read() { mdb_txn_reset(rtxn_); }
    std::int64_t part_count() const { return meta_.parts; }
    std::int64_t max_id() const { return meta_.max_id; }
    std::int64_t base_parts() const { return meta_.base_parts; }
    std::uint64_t seed() const { return meta_.seed; }
    std::uint32_t from_count(handle h) const {
        unsigned key = static_cast<unsigned>(h->id);
        MDB_val k{sizeof key, &key}, v;
        MDB_cursor* cur;
        MDB_txn* txn = wtxn_ ? wtxn_ : rtxn_;
        ok(mdb_cursor_open(txn, from_, &cur), "mdb_cursor_open");
        std::size_t n = 0;
        if (mdb_cursor_get(cur, &k, &v, MDB_SET) == 0) ok(mdb_cursor_count(cur, &n), "mdb_cursor_count");
        mdb_cursor_close(cur);
        return static_cast<std::uint32_t>(n);
    }

    // ---- updating ----
    void begin_update() { ok(mdb_txn_begin(env_, nullptr, 0, &wtxn_), "mdb_txn_begin (write)"); }
    void insert(const part_spec& s) {
        Part rec = record(s);
        put(wtxn_, parts_, static_cast<unsigned>(s.id), &rec, sizeof rec, MDB_NOOVERWRITE);
        for (int c = 0; c < fanout; ++c) {
            bench::check(find(s.conn[c].to) != nullptr, "insert: connection target missing");
            std::size_t v = static_cast<std::size_t>(s.id) * 4 + static_cast<std::size_t>(c);
            put(wtxn_, from_, static_cast<unsigned>(s.conn[c].to), &v, sizeof v, 0);
        }
        meta_.parts += 1;
        meta_.max_id = std::max<std::int64_t>(meta_.max_id, s.id);
    }
    void commit() {
        put_meta(wtxn_);
        int rc = mdb_txn_commit(wtxn_);
        wtxn_ = nullptr;
        ok(rc, "mdb_txn_commit");
    }

    std::map<std::string, std::int64_t> counters() const { return bench::lmdb::counters(env_); }
    std::vector<std::string> files() const { return bench::lmdb::files(path_); }
    std::string describe() const {
        return "LMDB 0.9.24: parts as records keyed by id (B+tree = the index), connections as ids, reverse "
               "connections as sorted duplicates; default durable commit";
    }

private:
    struct meta {
        std::int64_t parts = 0, max_id = 0, base_parts = 0;
        std::uint64_t seed = 0;
    };
    static void ok(int rc, const std::string& what) { bench::lmdb::ok(rc, what); }
    static Part record(const part_spec& s) {
        Part r{};
        r.id = s.id;
        std::memcpy(r.type, s.type, 10);
        r.x = s.x;
        r.y = s.y;
        r.build = s.build;
        for (int c = 0; c < fanout; ++c) {
            r.to[c].to = static_cast<std::uint32_t>(s.conn[c].to);
            std::memcpy(r.to[c].type, s.conn[c].type, 10);
            r.to[c].length = s.conn[c].length;
        }
        return r;
    }
    static void put(MDB_txn* txn, MDB_dbi dbi, unsigned key, const void* data, std::size_t size, unsigned flags) {
        MDB_val k{sizeof key, &key}, v{size, const_cast<void*>(data)};
        ok(mdb_put(txn, dbi, &k, &v, flags), "mdb_put");
    }
    void put_meta(MDB_txn* txn) {
        MDB_val k{4, const_cast<char*>("meta")}, v{sizeof meta_, &meta_};
        ok(mdb_put(txn, meta_dbi(), &k, &v, 0), "mdb_put meta");
    }
    void load_meta() {
        MDB_txn* txn;
        ok(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
        MDB_val k{4, const_cast<char*>("meta")}, v;
        if (mdb_get(txn, meta_dbi(), &k, &v) == 0 && v.mv_size == sizeof meta_) std::memcpy(&meta_, v.mv_data, sizeof meta_);
        mdb_txn_abort(txn);
    }
    MDB_dbi meta_dbi() const { return meta_dbi_; }

    std::string path_;
    MDB_env* env_ = nullptr;
    MDB_dbi parts_ = 0, from_ = 0, meta_dbi_ = 0;
    MDB_txn* rtxn_ = nullptr;
    MDB_txn* wtxn_ = nullptr;
    std::array<MDB_cursor*, traversal_depth + 2> cursors_{};
    meta meta_;
};

}  // namespace oo1
