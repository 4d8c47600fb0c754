// A store's backup: one self-contained main file holding its last commit,
// taken while a writer may go on (backup.cpp).
#pragma once

#include <steppe/steppe.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "storage/bulk_writer.hpp"
#include "storage/storage.hpp"

namespace steppe::storage {

struct backup_result {
    std::uint64_t pages = 0;   // pages of the store (page_count)
    std::uint64_t copied = 0;  // of those, written (pages never written are left out)
    std::uint64_t txn = 0;     // the commit the backup holds
};

// Copies the last commit of the store at `source` (as a reader: a writer in
// this or another process goes on committing) to a new store at `dest`: its
// pages and meta in one main file with no log (write_main_file). It is
// built under a temporary name beside `dest` and renamed into place only
// once complete and durable, so `dest` never holds a partial copy; then it
// is opened and checked. Throws exists if `dest` exists, and what opening
// either store, reading or writing throws (the temporary files are removed).
backup_result backup(const std::string& source, const std::string& dest, env* io = nullptr);
// The same from a handle this process holds (an engine's own, while no
// commit, checkpoint or spill runs on it): its last commit, without the
// pages a transaction in progress spilled.
backup_result backup_from(const storage& from, const std::string& dest, env* io = nullptr);

// Copies the last commit of the store `source` into the store `dest` — any
// name storage::open takes; made for moving a local store into PostgreSQL
// (`steppe import`) — as one commit: pages spilled in batches, then
// committed with the meta, then checked. `dest` is made if absent; exists if
// it holds a commit already (a failed import leaves it empty: run it again).
backup_result import_store(const std::string& source, const std::string& dest, env* io = nullptr);

// Writes a new main file at `temp` in one pass (bulk_writer.hpp; a crashed
// attempt's files by that name are removed first): `fill` writes the pages
// and returns the meta; each page is written once, in its place, with no
// log and no checkpoint, and the file is synced once at the end. `temp` is
// then one durable main file, a store once renamed. On failure it removes
// what it made and rethrows.
void write_main_file(const std::string& temp, const page_fill& fill, env* io = nullptr);

// Replaces the store at `path`, checkpointed and held by the caller's writer
// lock, by the main file `temp` (write_main_file): a crash at any point
// leaves the old store or the new one, never a mix (compaction's swap,
// docs/design.md "Compaction").
void replace_store(const std::string& path, const std::string& temp, env* io = nullptr);

// The steps of a rewrite (compaction, migration) both engines share, on the
// store `s` at `path` held by the caller's writer lock with nothing
// uncommitted; `what` names the operation in messages, `pass` computes the
// new store and writes it through the target it is given; the sizes before
// and after are filled in the report it returns.
// - In files: refuse a reader (locked), checkpoint (the main file alone
//   holds the store), the new main file NAME.compact (write_main_file), the
//   swap (replace_store; NAME.compact removed if it fails).
// - In PostgreSQL: one commit (storage::commit_rewrite). Readers stay: they
//   keep their snapshots, whose versions collection keeps, and refresh to
//   the rewritten store; then a collection drops what no reader needs.
compact_report rewrite_store(storage& s, const std::string& path, const std::string& what, bool write, env* io,
                             const std::function<compact_report(const rewrite_target& target)>& pass);

}  // namespace steppe::storage
