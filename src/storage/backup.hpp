// A store's backup: one self-contained main file holding its last commit,
// taken while a writer may go on (backup.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "storage/storage.hpp"

namespace steppe::storage {

struct backup_result {
    std::uint64_t pages = 0;   // pages of the store (page_count)
    std::uint64_t copied = 0;  // of those, written (pages never written are left out)
    std::uint64_t txn = 0;     // the commit the backup holds
};

// Copies the last commit of the store at `source` (as a reader: a writer in
// this or another process goes on committing) to a new store at `dest`: its
// pages and meta, checkpointed, so `dest` is one main file with no log. It is
// built under a temporary name beside `dest` and renamed into place only
// once complete and durable, so `dest` never holds a partial copy; then it
// is opened and checked. Throws exists if `dest` exists, and what opening
// either store, reading or writing throws (the temporary files are removed).
backup_result backup(const std::string& source, const std::string& dest, env* io = nullptr);
// The same from a handle this process holds (an engine's own, while no
// commit, checkpoint or spill runs on it): its last commit, without the
// pages a transaction in progress spilled.
backup_result backup_from(const storage& from, const std::string& dest, env* io = nullptr);

}  // namespace steppe::storage
