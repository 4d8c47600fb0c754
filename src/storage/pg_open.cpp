// pg_store's open, the statements it sends (pg_store.hpp; docs/design.md,
// "Round trips"): the tables, the store row, the writer's lock and fence
// (P2), a reader's registration (P3), the version map and its digest (P6),
// a standby's catch-up (P5). pg_store::open, in pg_store.cpp, makes the
// connections and the fetch thread and calls these in turn.
#include <sys/random.h>
#include <steppe/error.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "common/system_error.hpp"
#include "storage/pg_connection.hpp"
#include "storage/pg_store.hpp"
#include "storage/pg_text.hpp"

namespace steppe::storage {

using namespace pg_text;

// P5: the standby has replayed this reader's registration, and so its
// snapshot, before the first fetch. Replication lag past fault_wait_s is
// `unavailable`.
void pg_store::wait_for_standby(pg_connection& fetch) const {
    const auto deadline = std::chrono::steady_clock::now() + address_.fault_wait;
    const std::string id = std::to_string(reader_id_);
    const char* what = "waiting for the standby to replay this reader's registration";
    // A standby that has not replayed the tables' creation yet lags too.
    auto replayed = [&] {
        return fetch.exec(what, "SELECT to_regclass('steppe_reader') IS NOT NULL").text(0, 0) == "t" &&
               fetch.exec(what, "SELECT count(*) FROM steppe_reader WHERE store = $1 AND id = $2", {address_.store, id})
                       .integer(0, 0) != 0;
    };
    while (!replayed()) {
        if (std::chrono::steady_clock::now() >= deadline)
            throw error(errc::io,
                        path_ + ": the standby (PostgreSQL backend " + std::to_string(fetch.backend_pid()) +
                            ") has not replayed this reader's registration within " +
                            std::to_string(address_.fault_wait.count()) +
                            " s (replication lag, or a standby of another primary); open again, raise fault_wait_s, "
                            "or read from the primary (pages_from=primary)");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

namespace {
// Whether steppe's tables are there, and of format 2 (steppe_store has the
// digest column, P6) or from before it.
enum class tables { none, without_digest, current };
tables tables_in(pg_connection& c) {
    pg_result r = c.exec("looking for steppe's tables",
                         "SELECT to_regclass('steppe_store') IS NOT NULL, EXISTS (SELECT 1 FROM pg_attribute WHERE "
                         "attrelid = to_regclass('steppe_store') AND attname = 'digest' AND NOT attisdropped)");
    if (r.text(0, 0) != "t") return tables::none;
    return r.text(0, 1) == "t" ? tables::current : tables::without_digest;
}
}  // namespace

namespace {
// A commit's last statement (commit_transaction), prepared once a session
// (the tables exist by then): planned once, not at every commit. $6 and $7
// are the digest's terms the commit adds and those it takes away (P6).
constexpr const char* prepare_move_row =
    "PREPARE steppe_move_row(text, bigint, bigint, bytea, text, numeric, numeric) AS "
    "WITH row AS (UPDATE steppe_store SET txn = $2, page_count = $3, meta = $4, "
    "digest = digest + $6 - $7 WHERE name = $1 RETURNING name) "
    "SELECT pg_notify('steppe', $5) FROM row";
}  // namespace

// What every session of the control connection sets before its first
// statement; sent in the same round trip as that statement.
std::string pg_store::session_settings() const {
    // Read committed whatever the server's default: P2's statement takes the
    // lock after its snapshot, and its UPDATE must then see the row a
    // writer that just let go committed (repeatable read fails it instead).
    return std::string("SET bytea_output = 'hex'; SET default_transaction_isolation = 'read committed'; ") +
           (opts_.durable ? "" : "SET synchronous_commit = off; ");
}

// The settings and the commit statement, for a session that has neither
// (a reconnected one, or a first open that found no tables).
void pg_store::set_up_session() {
    session_ready_ = false;
    PGresult* done = control_->try_exec_script("DEALLOCATE ALL; " + session_settings() + prepare_move_row);
    if (!done) control_->fail_last("setting the session up");
    libpq().PQclear(done);
    session_ready_ = true;
}

void pg_store::ensure_tables() {
    // Serialized by a transaction-level advisory lock: two first opens at
    // once would otherwise race in CREATE TABLE IF NOT EXISTS.
    const char* what = "making steppe's tables";
    control_->exec(what, "BEGIN");
    try {
        control_->exec(what, "SELECT pg_advisory_xact_lock(1398031440)");
        const tables found = tables_in(*control_);
        if (found == tables::current) {  // the usual case: nothing to make, and no ALTER's exclusive lock
            control_->exec(what, "COMMIT");
            return;
        }
        if (found == tables::without_digest) {  // format 1's tables: its store rows are upgraded as they open
            control_->exec(what, "ALTER TABLE steppe_store ADD COLUMN IF NOT EXISTS digest numeric NOT NULL DEFAULT 0");
            control_->exec(what, "COMMIT");
            return;
        }
        control_->exec(what,
                       "CREATE TABLE IF NOT EXISTS steppe_store (name text PRIMARY KEY, "
                       "id integer GENERATED ALWAYS AS IDENTITY UNIQUE, store_id text NOT NULL, "
                       "format integer NOT NULL, txn bigint NOT NULL, page_count bigint NOT NULL, "
                       "meta bytea NOT NULL, fence bigint NOT NULL, digest numeric NOT NULL DEFAULT 0)");
        control_->exec(what,
                       "CREATE TABLE IF NOT EXISTS steppe_page (store text NOT NULL, page bigint NOT NULL, "
                       "txn bigint NOT NULL, sum integer NOT NULL, image bytea NOT NULL, "
                       "PRIMARY KEY (store, page, txn) INCLUDE (sum))");
        set_image_storage(what);
        control_->exec(what,
                       "CREATE TABLE IF NOT EXISTS steppe_reader (store text NOT NULL, id integer NOT NULL, "
                       "txn bigint NOT NULL, since timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (store, id))");
        control_->exec(what, "CREATE SEQUENCE IF NOT EXISTS steppe_reader_id AS integer CYCLE");
        control_->exec(what, "COMMIT");
    } catch (...) {
        control_->rollback();
        throw;
    }
}

// Page images stay in their rows, compressed by lz4 where the server has
// it (PostgreSQL 14 and later, built with lz4): on OO1 pages, reading them
// took 0.43x the time of images kept out of line (TOAST's three chunks and
// index lookups a page), writing 0.6x, the table 0.4x the size
// (docs/benchmarks.md, "Page images compressed in their rows"). Without
// lz4 they stay out of line, uncompressed: pglz took 6x as long to write.
void pg_store::set_image_storage(const char* what) {
    control_->exec(what, "SAVEPOINT image_storage");
    if (PGresult* lz4 = control_->try_exec("ALTER TABLE steppe_page ALTER COLUMN image SET COMPRESSION lz4, "
                                           "ALTER COLUMN image SET STORAGE MAIN",
                                           {}, false)) {
        libpq().PQclear(lz4);
        return;
    }
    // 0A000: no lz4 in this server; 42601: no COMPRESSION (before 14).
    if (!control_->last_failed_with("0A000") && !control_->last_failed_with("42601")) control_->fail_last(what);
    // As a script, which also forgets the failure (lost() would read it).
    PGresult* back = control_->try_exec_script("ROLLBACK TO SAVEPOINT image_storage");
    if (!back) control_->fail_last(what);
    libpq().PQclear(back);
    control_->exec(what, "ALTER TABLE steppe_page ALTER COLUMN image SET STORAGE EXTERNAL");
}

void pg_store::adopt_store_row(const pg_result& row) {
    // Columns: id, store_id, format, txn, page_count, meta, fence, digest.
    // Format 1 is read as it is (no digest); a writer's open upgrades it.
    if (row.integer(0, 2) != pg_format && row.integer(0, 2) != pg_format_without_digest)
        throw error(errc::version, path_ + ": the store is of steppe's PostgreSQL format " + row.text(0, 2) +
                                       "; this build reads format " + std::to_string(pg_format));
    digest_known_ = row.integer(0, 2) == pg_format;
    if (digest_known_ && !parse_digest(row.text(0, 7), digest_))
        throw error(errc::corrupt, path_ + ": the store's row in steppe_store is damaged (its digest is " +
                                       row.text(0, 7) + ", not a count); run `steppe check " + path_ + "`");
    store_key_ = row.integer(0, 0);
    store_id_ = row.text(0, 1);
    txn_seq_ = std::uint64_t(row.integer(0, 3));
    page_count_ = page_no(row.integer(0, 4));
    pages_.store(page_count_, std::memory_order_relaxed);
    fence_ = row.integer(0, 6);
    auto meta = bytea_of(row, 0, 5, path_);
    if (meta.size() != meta_size || row.integer(0, 4) < 0 || page_count_ > max_pages || row.integer(0, 3) < 0)
        throw error(errc::corrupt, path_ + ": the store's row in steppe_store is damaged (meta of " +
                                       std::to_string(meta.size()) + " bytes, " + row.text(0, 4) + " pages, commit " +
                                       row.text(0, 3) + "); run `steppe check " + path_ + "`");
    std::memcpy(meta_.data(), meta.data(), meta_size);
    snapshot_.store(txn_seq_, std::memory_order_release);
}

namespace {
constexpr const char* store_columns = "id, store_id, format, txn, page_count, meta, fence, digest";

// P2 in one statement: the writer's advisory lock tried and, if taken, the
// fence moved (taking it ends any earlier writer's right to commit). One
// row: the store row's columns as moved (NULL when not), whether the lock
// was taken (NULL: there is no store row), and the row's id. The name is a
// literal: valid_store_name lets no quote into it.
std::string take_writer_sql(const std::string& store) {
    const std::string name = "'" + store + "'";
    return "WITH s AS (SELECT id FROM steppe_store WHERE name = " + name + "), l AS (SELECT pg_try_advisory_lock(" +
           std::to_string(writer_class) + ", s.id) AS got FROM s), u AS (UPDATE steppe_store SET fence = fence + 1 "
           "FROM l WHERE name = " + name + " AND l.got RETURNING " + store_columns +
           ") SELECT u.*, (SELECT got FROM l), (SELECT id FROM s) FROM (SELECT 1) one LEFT JOIN u ON true";
}
constexpr int taken_column = 8, key_column = 9;  // after store_columns' eight
}  // namespace

// An existing store opens in one round trip on the control connection: the
// session's settings, the commit statement prepared, and P2's lock and
// fence, in one script. Missing tables (or format 1's), a missing store
// row and exclusive_create take the long way, make_store_row.
void pg_store::open_as_writer() {
    const std::string take = take_writer_sql(address_.store);
    PGresult* first = nullptr;
    if (!opts_.exclusive_create) {
        first = control_->try_exec_script(session_settings() + prepare_move_row + "; " + take);
        // 42P01, 42703: no such table or column (no tables yet, or format 1's)
        if (!first && !control_->last_failed_with("42P01") && !control_->last_failed_with("42703"))
            control_->fail_last("opening the store for writing");
    }
    session_ready_ = first != nullptr;  // the script's SETs and PREPARE took effect
    if (!first || libpq().PQgetisnull(first, 0, taken_column)) {
        libpq().PQclear(first);
        first = nullptr;
        make_store_row();
        if (!session_ready_) set_up_session();
    }
    const char* what = "taking the writer's lock";
    const auto deadline = std::chrono::steady_clock::now() + opts_.lock_timeout;
    pg_result row = first ? pg_result(first) : control_->exec(what, take.c_str());
    while (row.is_null(0, taken_column) || row.text(0, taken_column) != "t") {
        if (row.is_null(0, taken_column))
            throw error(errc::not_found, "store " + path_ + " was deleted while this writer opened it");
        if (std::chrono::steady_clock::now() >= deadline) {
            pg_result holder = control_->exec(
                "looking for the writer", "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid "
                                          "AND objid = $2::oid AND objsubid = 2 AND granted",
                {std::to_string(writer_class), row.text(0, key_column)});
            throw error(errc::locked, "store " + path_ + " is held by another writer (PostgreSQL backend " +
                                          (holder.rows() ? holder.text(0, 0) : "unknown") +
                                          "); a store has one writer at a time: open it read-only, or wait "
                                          "(open_options::lock_timeout)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        row = control_->exec(what, take.c_str());
    }
    if (row.is_null(0, 0))  // the lock taken, but no row moved: it went (or changed) between the CTE's parts
        throw error(errc::not_found, "store " + path_ + " was deleted or replaced while this writer opened it; open "
                                                        "it again");
    adopt_store_row(row);
    if (!digest_known_) upgrade_format();
}

// The long way to a store row: steppe's tables made or brought to format 2,
// and the row made if the options allow.
void pg_store::make_store_row() {
    const tables found = tables_in(*control_);
    if (found == tables::none && !opts_.create) throw error(errc::not_found, "store " + path_ + " does not exist");
    if (found != tables::current) ensure_tables();
    const char* select = "SELECT 1 FROM steppe_store WHERE name = $1";
    if (control_->exec("reading the store's row", select, {address_.store}).rows() != 0) {
        if (opts_.exclusive_create)
            throw error(errc::exists, "store " + path_ + " exists already (exclusive_create was asked for; nothing "
                                                         "was changed)");
        return;
    }
    if (!opts_.create) throw error(errc::not_found, "store " + path_ + " does not exist");
    // Page versions without their store's row are damage (the row was
    // deleted), not room for a new store: its commits would show them.
    // (Unless another process made the store, and committed, just now.)
    if (control_->exec("looking for the store's pages", "SELECT 1 FROM steppe_page WHERE store = $1 LIMIT 1",
                       {address_.store})
                .rows() != 0 &&
        control_->exec("reading the store's row", select, {address_.store}).rows() == 0)
        throw error(errc::corrupt, "store " + path_ + ": its row in steppe_store is gone but its page versions "
                                                      "are in steppe_page; no new store is made over them (restore "
                                                      "the row, or delete the versions to start afresh)");
    meta_bytes zeros{};
    std::byte id[16];
    if (getrandom(id, sizeof id, 0) != ssize_t(sizeof id))
        common::throw_system_error("getrandom", errno, path_, "the new store's id");
    std::string id_text;
    append_hex(id_text, id, sizeof id);
    pg_result made = control_->exec("creating the store",
                                    "INSERT INTO steppe_store (name, store_id, format, txn, page_count, meta, "
                                    "fence) VALUES ($1, $2, $3, 0, 0, $4, 0) ON CONFLICT (name) DO NOTHING "
                                    "RETURNING id",
                                    {address_.store, id_text, std::to_string(pg_format),
                                     hex_bytea(zeros.data(), zeros.size())});
    if (made.rows() == 0 && opts_.exclusive_create)  // another process made it between the two statements
        throw error(errc::exists, "store " + path_ + " exists already (exclusive_create was asked for; "
                                                     "nothing was changed)");
}

// P6 for a format-1 store: its digest, added up from the versions as they
// are (there is nothing older to check them against), and format 2.
void pg_store::upgrade_format() {
    const char* sql =
        "UPDATE steppe_store SET format = $3, digest = (SELECT coalesce(sum(v.txn::numeric * (v.page + 1) * CASE WHEN "
        "v.sum = 0 THEN 2 ELSE 1 END), 0) FROM (SELECT DISTINCT ON (page) page, txn, sum FROM steppe_page WHERE store = $1 AND txn <= $2 ORDER BY page, txn DESC) "
        "v) WHERE name = $1 AND fence = $4 RETURNING digest";
    pg_result row = control_->exec("bringing the store to format 2", sql,
                                   {address_.store, std::to_string(txn_seq_), std::to_string(pg_format),
                                    std::to_string(fence_)});
    if (row.rows() == 0)
        throw error(errc::locked, path_ + ": another writer took the store over while this one opened it");
    if (!parse_digest(row.text(0, 0), digest_))
        throw error(errc::corrupt, path_ + ": the digest made for the store's row is " + row.text(0, 0));
    digest_known_ = true;
}

// C4, P6: the server's identity (C2) and the newest version of every page
// at the handle's snapshot, in one round trip on the fetch connection,
// added up for the digest; for a reader only while its registration (P3)
// keeps those versions (if it does not, the map stays unloaded: the first
// fetch says why). A writer reads every page's newest version, past its
// commit too: one there is P1 broken, which verify_versions refuses, and
// the scan open would otherwise make for it is this one. Pages come in
// descending order: a backward scan of the key (which INCLUDEs sum) reads
// the index alone once the table is vacuumed, where images kept in the
// rows make the table itself the store's size (OO1 huge: 55 against 200 ms).
pg_store::loaded_versions pg_store::load_versions(pg_connection& conn) {
    const std::uint64_t snapshot = snapshot_.load(std::memory_order_acquire);
    const bool writer = reader_id_ == 0;
    pg_result rows = conn.exec(
        "reading the page versions of the snapshot",
        "SELECT (SELECT system_identifier FROM pg_control_system()), reg.n, v.page, v.txn, v.sum FROM "
        "(SELECT count(*) AS n FROM steppe_reader WHERE store = $1 AND id = $3) reg LEFT JOIN LATERAL "
        "(SELECT DISTINCT ON (page) page, txn, sum FROM steppe_page WHERE store = $1 AND txn <= $2 "
        "ORDER BY page DESC, txn DESC) v ON true",
        {address_.store, writer ? std::to_string(INT64_MAX) : std::to_string(snapshot), std::to_string(reader_id_)},
        true);
    return take_versions(rows, !writer);
}

// The version map read ahead of the store row (open, on the fetch
// connection while the control connection registers or takes the lock),
// in the round trip that prepares the fetch statement (`prepare_fetch`;
// `prepared` says whether it was): every page's newest version and, from
// the same statement's snapshot, the store row's newest commit. No rows if
// it failed (no tables yet, say): open then reads the map the usual way.
pg_result pg_store::speculate_versions(pg_connection& conn, const char* prepare_fetch, const std::string& store,
                                       bool& prepared) {
    const auto [first_ok, rows] = conn.try_exec_pair(
        prepare_fetch,
        "SELECT (SELECT system_identifier FROM pg_control_system()), s.txn, v.page, v.txn, v.sum FROM "
        "(SELECT txn FROM steppe_store WHERE name = $1) s LEFT JOIN LATERAL "
        "(SELECT DISTINCT ON (page) page, txn, sum FROM steppe_page WHERE store = $1 "
        "ORDER BY page DESC, txn DESC) v ON true",
        {store}, true);
    prepared = first_ok;
    return pg_result(rows);
}

// Whether the map read ahead is the one load_versions would read now: the
// store row's commit was the one the registration or the lock returned, so
// no commit came between (each moves it), and the newest versions then are
// the newest at this snapshot; none of them is past it (a writer's map
// keeps such a version for verify_versions to refuse, as load_versions'
// does; a reader's would lack the older version its snapshot reads, so it
// reads the map the usual way). A version newest at this snapshot is never
// collected (P3), so the registration coming after the read loses nothing.
bool pg_store::take_speculated_versions(const pg_result& rows, loaded_versions& loaded) {
    const std::uint64_t snapshot = snapshot_.load(std::memory_order_acquire);
    if (rows.rows() == 0 || rows.is_null(0, 1) || std::uint64_t(rows.binary_integer(0, 1)) != snapshot) return false;
    if (reader_id_ != 0)
        for (int i = 0; i < rows.rows(); ++i)
            if (!rows.is_null(i, 2) && std::uint64_t(rows.binary_integer(i, 3)) > snapshot) return false;
    loaded = take_versions(rows, false);
    return true;
}

// The rows of either query into the map, added up for the digest.
// `registered_column`: column 1 counts the reader's registration, and with
// none the map stays unloaded (the first fetch says why).
pg_store::loaded_versions pg_store::take_versions(const pg_result& rows, bool registered_column) {
    const std::uint64_t snapshot = snapshot_.load(std::memory_order_acquire);
    key_.server = std::uint64_t(rows.binary_integer(0, 0));  // before the fetch thread starts
    loaded_versions loaded;
    if (registered_column && rows.binary_integer(0, 1) == 0) return loaded;
    for (int i = 0; i < rows.rows(); ++i) {
        if (rows.is_null(i, 2)) continue;
        const auto txn = std::uint64_t(rows.binary_integer(i, 3));
        const auto page = page_no(rows.binary_integer(i, 2));
        if (txn > snapshot) {
            loaded.past_page = page;
            loaded.past_txn = txn;
            return loaded;
        }
        const auto sum = std::uint32_t(rows.binary_integer(i, 4));
        versions_->set(page, txn, sum);
        loaded.digest += pg_digest_term(page, txn, sum == 0);  // no image's sum is 0: a zero version's (P7)
    }
    versions_->publish();
    return loaded;
}

// P6: what open's version map added up to against the store row. A writer
// opened with salvage takes the versions as they are and says so.
void pg_store::verify_versions(const loaded_versions& loaded) {
    // P1 says no version is past the store row's commit. One that is (the
    // store row restored from an older copy than steppe_page, a row added
    // by hand) would become part of the next commit, which is to write
    // versions of that number: refuse rather than adopt it.
    if (loaded.past_txn != 0)
        throw error(errc::corrupt, path_ + ": page " + std::to_string(loaded.past_page) + " has a version of commit " +
                                       std::to_string(loaded.past_txn) + ", past the store's newest commit " +
                                       std::to_string(txn_seq_) +
                                       " in steppe_store (P1); the next commit would take it for its own, so no "
                                       "writer opens the store: run `steppe check " + path_ + "`");
    if (!digest_known_ || !versions_->loaded() || loaded.digest == digest_) return;
    const std::string what = digest_mismatch(path_, txn_seq_, digest_, loaded.digest);
    if (!opts_.salvage || opts_.read_only)
        throw error(errc::corrupt, what + "; no page of it is read as if it were whole. `steppe recover " +
                                       path_ + "` takes the versions as they are (the missing pages read as their "
                                               "older versions, or zeros)");
    control_->exec("taking the versions as they are",
                   "UPDATE steppe_store SET digest = $2 WHERE name = $1 AND fence = $3",
                   {address_.store, digest_text(loaded.digest), std::to_string(fence_)});
    salvage_report_ = what + "; the store now holds its versions as they are (the digest was set to " +
                      digest_text(loaded.digest) + ")";
    digest_ = loaded.digest;
}

// P3 in one round trip: one implicit transaction that LISTENs (from its
// commit on, every commit of the store notifies this session, for
// wait_for_commit), reads the store row under its share lock (so no
// collection, which locks it for update, runs until the registration is
// visible, and no commit lands between the snapshot and the LISTEN), and
// registers under a session advisory lock of its own. The name is a
// literal: valid_store_name lets no quote into it.
void pg_store::open_as_reader() {
    const std::string name = "'" + address_.store + "'";
    const std::string script =
        session_settings() + "LISTEN steppe; WITH s AS (SELECT " + store_columns + " FROM steppe_store WHERE name = " + name +
        " FOR SHARE), r AS (SELECT nextval('steppe_reader_id')::integer AS id), l AS (SELECT pg_advisory_lock(" +
        std::to_string(reader_class) + ", (SELECT id FROM r))), i AS (INSERT INTO steppe_reader (store, id, txn) "
        "SELECT " + name + ", r.id, s.txn FROM s, r RETURNING id) SELECT s.*, (SELECT id FROM i), (SELECT count(*) "
        "FROM l) FROM s";
    PGresult* raw = control_->try_exec_script(script);
    if (!raw) {
        switch (tables_in(*control_)) {  // what is missing, if anything
        case tables::none:
            throw error(errc::not_found, "store " + path_ + " does not exist");
        case tables::without_digest:
            throw error(errc::version, path_ + ": steppe's tables in this database are of PostgreSQL format " +
                                           std::to_string(pg_format_without_digest) + "; this build reads format " +
                                           std::to_string(pg_format) +
                                           ": open the store once for writing, which brings them up to date");
        case tables::current:
            control_->fail_last("registering a reader");
        }
    }
    pg_result row(raw);
    if (row.rows() == 0) throw error(errc::not_found, "store " + path_ + " does not exist");
    adopt_store_row(row);
    reader_id_ = row.integer(0, 8);
}

int pg_store::backend_pid() const noexcept { return control_->backend_pid(); }

}  // namespace steppe::storage
