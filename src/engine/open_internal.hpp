// The internal way to open a store: what store::open does, with the file
// system the storage layer opens the store's files through given. Tests
// pass a fault-injecting one (tests/support/fault_env.hpp) to crash the
// public API at any I/O call or simulate a power loss under it; the public
// header does not offer it, so programs cannot depend on the storage layer.
#pragma once

#include <steppe/steppe.hpp>

#include <string>

namespace steppe {

namespace storage {
class env;
}

namespace detail {

// store::open(path, options), every file of the store (main file, log, lock
// file, the damaged log's copy) opened, written, synced, renamed and removed
// through `io` (nullptr: the real file system). `io` must outlive the store.
store open_with_env(const std::string& path, const open_options& options, storage::env* io);
// steppe::compact(path, options) with every file, the new one's too, through `io`.
compact_report compact_with_env(const std::string& path, const compact_options& options, storage::env* io);
// steppe::migrate(path, m, options), likewise.
migrate_report migrate_with_env(const std::string& path, const migration& m, const migrate_options& options,
                                storage::env* io);

}  // namespace detail
}  // namespace steppe
