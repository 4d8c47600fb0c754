// Compaction of a page-engine store (steppe::compact, docs/design.md
// "Compaction"): the committed state of a store copied into a new main file
// with its live objects packed together and every pointer to them rewritten.
// page_engine::compact runs it under the store's writer lock and swaps the
// new file in (storage::replace_store).
#pragma once

#include <steppe/steppe.hpp>

#include <string>

#include "engine/migration.hpp"
#include "engine/roots.hpp"
#include "heap/heap.hpp"
#include "page/engine_format.hpp"
#include "storage/storage.hpp"
#include "types/types.hpp"

namespace steppe::page {

// One committed state of a store: what its meta pins, decoded.
struct committed_store {
    const storage::storage& files;
    const engine_meta& meta;
    const heap& h;
    const types::catalog& catalog;
    const root_table& roots;
};

using migrating::conversion;
using migrating::migration_plan;

// Writes the compacted copy of `from` as the new main file `temp`
// (storage::write_main_file, through `io`): every allocated object, or with `collect`
// only those the roots reach, moved and its pointers forwarded. The report's
// sizes before and after are left for the caller. Throws unsupported for a
// store holding containers hashed or ordered by persistent address (their
// order would change), and what reading or writing throws.
// With `plan` (steppe::migrate) the objects of its types are converted
// and the catalog written is the plan's, its counts filled in; it throws
// what the plan's conversions throw. The new store goes to `target`
// (storage::rewrite_store); an empty one writes nothing (a dry run:
// everything checked and converted in memory).
compact_report compact_into(const committed_store& from, const storage::rewrite_target& target, bool collect,
                            migration_plan* plan = nullptr);

}  // namespace steppe::page
