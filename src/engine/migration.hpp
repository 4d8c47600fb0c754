// Migration (steppe::migrate, docs/design.md "Migration"), what both engines
// share: the plan each engine's copying pass follows to convert the objects
// of changed types (the page engine's page/compact.cpp, the object engine's
// objects/compact.cpp). plan_migration checks everything it can before a
// byte is written: the types named, the field mapping, what the catalog
// becomes, and that the program will open the result.
#pragma once

#include <steppe/steppe.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "types/types.hpp"

namespace steppe::migrating {

// Which engine's store is migrated: what its objects may hold.
enum class engine_kind {
    page,     // raw pointers (and vtable pointers, not migrated yet); no object-engine references
    objects,  // object-engine references (oids); no raw or vtable pointers
};

// One stored type converted: the stored entry, the program's layout, and
// where each carried field's bytes go.
struct conversion {
    struct carried {
        std::uint32_t from = 0, to = 0, size = 0;  // offsets in the old and new object, bytes
    };
    types::catalog::index type = 0;  // its catalog index, the same after
    const types::layout* from = nullptr;  // the stored layout (the old catalog's entry)
    const types::layout* to = nullptr;    // the program's layout
    const migration::conversion* how = nullptr;
    std::vector<carried> fields;  // by `from`
    std::uint64_t objects = 0, elements = 0;  // converted by the pass

    // The new object built from the old one at `old` into `out` (to->size
    // bytes): start (T{}), the carried fields copied, the function run. Its
    // pointer and reference words still hold the old store's addresses or
    // oids: the caller forwards them.
    void build(const std::byte* old, std::byte* out) const;
    // Byte `offset` of an old allocation of `count` objects, in the new one:
    // an object's start (or the end) maps to the new object's start (end), a
    // byte of a carried field to the same byte of it there; anything else
    // (a dropped field, padding, one past a field: it may be the next
    // field's start) has no place (nothing). The page engine's interior
    // pointers need it; an object-engine reference names a whole object.
    std::optional<std::uint64_t> map(std::uint64_t offset, std::uint64_t count) const;
};

struct migration_plan {
    types::catalog catalog;  // the new store's: the old one with each converted entry replaced
    std::map<types::catalog::index, conversion> by_type;
    std::string path;  // the store's, for messages

    conversion* find(std::uint32_t type) {
        auto it = by_type.find(type);
        return it == by_type.end() ? nullptr : &it->second;
    }
    // unsupported naming the type and offset: a pointer aims at byte
    // `offset` of a converted object that map() has no place for.
    [[noreturn]] void refuse_pointer(const conversion& c, std::uint64_t offset) const;
};

// Checks `m` against the store's catalog `old` (see steppe::migrate for what
// it throws), plans it and checks that the program would open the result
// (type_mismatch naming the type it would still refuse). `old` must outlive
// the plan.
migration_plan plan_migration(const types::catalog& old, const migration& m, const std::string& path,
                              engine_kind kind);

// steppe::migrate on either engine, the steps around its pass: plan (so a
// refusal leaves the files as they were), `pass(plan)` (the engine's
// rewrite: its compaction with the plan, written and swapped in unless a
// dry run), the report in the migration's order.
migrate_report run_migration(const types::catalog& old, const migration& m, const std::string& path, engine_kind kind,
                             const std::function<compact_report(migration_plan& plan)>& pass);

}  // namespace steppe::migrating
