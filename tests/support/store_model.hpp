// A deterministic commit workload for crash tests: transaction t writes a
// few pages whose contents name (t, page); the meta records t. Given the meta
// the recovered store holds, every page's expected content follows.
#pragma once

#include <cstdint>
#include <string>

#include "storage/storage.hpp"

namespace steppe::test {

struct workload {
    static constexpr std::uint64_t pages = 48;
    // Runs transactions first..last (inclusive) against `s`.
    static void run(storage::storage& s, std::uint64_t first, std::uint64_t last);
    // With `spill`, half of the transaction's pages go through spill() first
    // and the commit names only the rest.
    static void run_one(storage::storage& s, std::uint64_t txn, bool spill = false);
    // The transaction number the store's meta records (0 for a fresh store).
    static std::uint64_t committed_txn(const storage::storage& s);
    // Empty if every page holds exactly what the model says for committed_txn(s);
    // otherwise the first difference.
    static std::string verify(const storage::storage& s);
};

}  // namespace steppe::test
