// Storage-level commits whose every page says which commit wrote it: a
// reader or a copy that mixes two commits shows it (readers_test,
// backup_test).
#pragma once

#include <cstdint>
#include <string>

#include "storage/storage.hpp"

namespace steppe::test {

// Commits pages 0..pages-1, each filled with the byte `txn`, and a meta
// whose first byte is `txn`.
void commit_filled(storage::storage& s, std::uint8_t txn, std::uint64_t pages);

// "" if `s` is at commit `txn` (its low byte) and every page and the meta
// hold `txn`, else what differs.
std::string filled_problem(const storage::storage& s, std::uint8_t txn);

}  // namespace steppe::test
