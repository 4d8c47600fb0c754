// types — run-time type description (include/steppe/layout.hpp) and the
// store's type catalog.
//
// The catalog lists every type ever allocated in a store: name, size,
// alignment, pointer and vptr offsets, fields and fingerprint. The swizzler
// reads pointer offsets from the STORED entry, so an object whose type the
// program never names is still swizzled correctly. Opening a store whose entry
// for a type differs from the program's layout is a type_mismatch naming the
// type and the first difference (reference 002 §1.6: store and program types
// must match on name and structure; member names too, where both know them).
// Schema evolution will build on this.
//
// Not thread-safe: the store serializes access to its catalog.
#pragma once

#include <steppe/error.hpp>
#include <steppe/layout.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace steppe::types {

// "" when `stored` and `program` are read the same way (same_structure)
// and no field known by name on both sides has another name in each;
// otherwise the first difference, e.g. "size 64 in store, 72 in program",
// "pointer field at offset 24 in store moved to offset 32 in program",
// "field 3 'x' (int) at offset 16 became long int" or "field 1 (int) at
// offset 0 is named 'x' in store, 'y' in program; ..." (with what to do: a
// reorder or rename is migrated). Fields count from 1.
std::string difference(const layout& stored, const layout& program);
// The first field that differs ("field 3 'x' (int) at offset 16 became long
// int", "... in program is not in store"), or "" if the fields agree.
std::string field_list_difference(const layout& stored, const layout& program);

// ", in field 3 'x' (int)": the direct member or base of `l` whose bytes hold
// `offset`, for messages; "" if none does.
std::string field_context(const layout& l, std::uint32_t offset);

// The layout of every type this program instantiated layout_of for (or named
// in types::declare), in no particular order, built now; those that cannot
// be built in this process (layout_of throws) are left out.
std::vector<const layout*> program_types();

// Longest type or member name a catalog holds (template-heavy names are long).
inline constexpr std::uint32_t max_name_length = 65536;

class catalog {
public:
    using index = std::uint32_t;

    // The index of the entry named l.name, adding l if there is none. Throws
    // steppe::error(type_mismatch, "type Part: <difference>") if the entry
    // exists with a different structure, steppe::error(invalid_argument) for
    // a layout the encoding cannot hold (name longer than max_name_length).
    // Indices never change. A version 2 entry (references without targets)
    // that matches l in everything else takes l's targets. A new entry
    // brings the program's layouts of its nested types with it (so a changed
    // nested type is named as itself), which must match theirs too.
    index find_or_add(const layout& l);
    // Entry i becomes l (migrate: a stored type takes the program's new
    // layout, keeping its index, so the heap's objects stay of type i). l's
    // nested types are added as find_or_add adds them. Throws
    // steppe::error(unsupported) if another entry has l's name, and what
    // find_or_add throws for the nested types.
    void replace(index i, const layout& l);

    // "" if every type of this catalog that the program has a layout for
    // (program_types) is read the same way by the program, under the same
    // member names where both know them (difference); otherwise what
    // differs, naming the innermost changed type, a stored type holding it,
    // and the field, e.g. "type Contact (in std::_Rb_tree_node<...>): field 5
    // 'twitter' (...) at offset 200 in program is not in store". A name the
    // program uses for several different types (local classes of separate
    // translation units) is not compared.
    std::string program_difference() const;
    // Throws steppe::error(type_mismatch) with program_difference() and what
    // to do, for the store at `path`.
    void require_program_match(const std::string& path) const;
    // Findings of the catalog's own consistency: C1, a nested field's stored
    // type fingerprint equals its type's entry.
    std::vector<std::string> check() const;
    // Counts additions and upgrades by find_or_add: the catalog needs writing
    // when it moved.
    std::uint64_t changes() const noexcept { return changes_; }

    std::optional<index> find(std::string_view name) const;
    // Throws steppe::error(invalid_argument) for an index out of range.
    const layout& at(index i) const;
    std::size_t size() const noexcept { return entries_.size(); }
    const std::vector<layout>& entries() const noexcept { return entries_; }

    // Byte format and validity rules: catalog_format.cpp.
    std::vector<std::byte> encode() const;
    // Validates everything; throws steppe::error(corrupt) on any damage and
    // never reads outside `bytes`.
    static catalog decode(std::span<const std::byte> bytes);

private:
    index add(layout l);
    static bool learn_targets(layout& stored, const layout& program);

    std::vector<layout> entries_;
    std::unordered_map<std::string, index> by_name_;
    std::uint64_t changes_ = 0;
};

}  // namespace steppe::types
