// Migration (migration.hpp, docs/design.md "Migration"): the public API's
// view of an old object, and the plan both engines follow: for each
// converted type, which stored field each new field takes (by name where
// both layouts name every field, else by position), checked before anything
// is written.
#include "engine/migration.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>

namespace steppe {

std::optional<std::size_t> old_object::find(std::string_view name) const {
    for (std::size_t i = 0; i < layout_->fields.size(); ++i)
        if (!name.empty() && layout_->fields[i].name == name) return i;
    return std::nullopt;
}

const types::field& old_object::named(std::string_view name) const {
    if (std::optional<std::size_t> i = find(name)) return layout_->fields[*i];
    throw error(errc::type_mismatch, "migration: the stored type " + layout_->name + " has no field named '" +
                                         std::string(name) + "'");
}

const types::field& old_object::at(std::size_t index) const {
    if (index < layout_->fields.size()) return layout_->fields[index];
    throw error(errc::type_mismatch, "migration: the stored type " + layout_->name + " has " +
                                         std::to_string(layout_->fields.size()) + " fields, not field " +
                                         std::to_string(index));
}

std::span<const std::byte> old_object::bytes(std::string_view name) const {
    const types::field& f = named(name);
    return {bytes_ + f.offset, f.size};
}

void old_object::require(const types::field& f, std::size_t size, types::field_kind kind, std::uint64_t type_fp,
                         std::string (*name_of_as)()) const {
    if (f.size == size && f.kind == kind && f.type_fp == type_fp) return;
    throw error(errc::type_mismatch, "migration: field '" + f.name + "' at offset " + std::to_string(f.offset) +
                                         " of the stored type " + layout_->name + " is " + f.type + " (" +
                                         types::to_string(f.kind) + ", " + std::to_string(f.size) +
                                         " bytes), not " + name_of_as());
}

namespace migrating {
namespace {

std::string describe(const types::field& f, std::size_t index) {
    return "field " + std::to_string(index + 1) + (f.name.empty() ? "" : " '" + f.name + "'") + " (" + f.type +
           ", " + std::to_string(f.size) + " bytes)";
}

bool names_every_field(const types::layout& l) {
    return !l.fields.empty() && std::all_of(l.fields.begin(), l.fields.end(), [](const types::field& f) {
        return f.kind == types::field_kind::base || !f.name.empty();
    });
}

const types::field* named(const types::layout& l, const std::string& name) {
    for (const types::field& f : l.fields)
        if (f.name == name) return &f;
    return nullptr;
}

// The name a stored type has after the migration: its conversion's new
// type's, or its own.
std::string name_after(const migration& m, const std::string& stored) {
    for (const migration::conversion& c : m.conversions())
        if (c.from == stored) return c.to().name;
    return stored;
}

// What the engine's objects cannot hold, in the old type or the new.
void refuse_contents(const types::layout& from, const types::layout& to, engine_kind kind, const std::string& where) {
    if (!from.vptrs.empty())
        throw error(errc::unsupported, where + " has virtual functions (vtable pointers); such types are not " +
                                           "migrated yet");
    if (kind == engine_kind::page && !from.refs.empty())
        throw error(errc::unsupported, where + " holds object-engine references; not migrated");
    if (kind == engine_kind::objects && !to.pointers.empty())
        throw error(errc::unsupported, where + " would become " + to.name + ", which holds a raw pointer at offset " +
                                           std::to_string(to.pointers[0]) + types::field_context(to, to.pointers[0]) +
                                           "; the object engine stores references (steppe::objects::ref<T>)");
    if (kind == engine_kind::objects && to.align > 16)
        throw error(errc::unsupported, where + " would become " + to.name + ", aligned to " +
                                           std::to_string(to.align) + " bytes; the object engine aligns to 16");
}

// A type held by value in another changes that type's layout too (not yet).
void refuse_held_by_value(const types::catalog& old, const types::layout& from, const std::string& where) {
    for (const types::layout& l : old.entries())
        for (const types::field& f : l.fields) {
            if (f.kind == types::field_kind::pointer || f.kind == types::field_kind::scalar ||
                f.kind == types::field_kind::reference)
                continue;
            bool holds = f.type == from.name || f.type.rfind(from.name + " [", 0) == 0 ||
                         f.type.rfind(from.name + "[", 0) == 0;
            if (holds && &l != &from)
                throw error(errc::unsupported, where + " is held by value in type " + l.name +
                                                   (f.name.empty() ? "" : " (field '" + f.name + "')") +
                                                   "; a type held by value is not migrated yet (only " +
                                                   "objects allocated on their own)");
        }
}

void refuse_unknown_renames(const types::layout& from, const migration::conversion& c, const std::string& where) {
    for (const auto& [stored, renamed] : c.renames) {
        if (!named(from, stored))
            throw error(errc::invalid_argument, where + " has no field '" + stored + "' to rename");
        if (!named(c.to(), renamed))
            throw error(errc::invalid_argument, where + ": the rename to '" + renamed + "' names no field of " +
                                                    c.to().name);
    }
}

// Refusals that hold for the type whatever its fields.
void refuse_type(const types::catalog& old, const types::layout& from, const migration::conversion& c,
                 const std::string& path, engine_kind kind) {
    const std::string where = "migration of " + path + ": type " + from.name;
    refuse_contents(from, c.to(), kind, where);
    refuse_held_by_value(old, from, where);
    refuse_unknown_renames(from, c, where);
}

// Where a matched field of the same bytes still changed meaning: an
// object-engine reference inside it that referred to one type and now
// refers to another (not the first's new name): "refers to A in the store,
// to B in the program", else "". A version 2 entry recorded no targets.
std::string target_change(const migration& m, const types::layout& from, const types::field& g,
                          const types::layout& to, const types::field& f) {
    if (from.ref_targets.size() != from.refs.size() || to.ref_targets.size() != to.refs.size()) return {};
    for (std::size_t i = 0; i < from.refs.size(); ++i) {
        if (from.refs[i] < g.offset || from.refs[i] >= g.offset + g.size) continue;
        const std::uint32_t at = f.offset + (from.refs[i] - g.offset);
        for (std::size_t j = 0; j < to.refs.size(); ++j)
            if (to.refs[j] == at && to.ref_targets[j].type != name_after(m, from.ref_targets[i].type))
                return "refers to " + from.ref_targets[i].type + " in the store, to " + to.ref_targets[j].type +
                       " in " + to.name;
    }
    return {};
}

// A type the migration leaves as it is must not refer to one it renames: its
// catalog entry would name a type the store no longer has.
void refuse_stale_targets(const types::catalog& old, const migration& m, const std::string& path) {
    for (const types::layout& l : old.entries()) {
        bool converted = false;
        for (const migration::conversion& c : m.conversions()) converted = converted || c.from == l.name;
        if (converted) continue;
        for (std::size_t i = 0; i < l.ref_targets.size() && i < l.refs.size(); ++i) {
            const std::string& target = l.ref_targets[i].type;
            if (name_after(m, target) == target) continue;
            throw error(errc::type_mismatch,
                        "migration of " + path + ": type " + l.name + " refers to " + target + " (offset " +
                            std::to_string(l.refs[i]) + types::field_context(l, l.refs[i]) + "), which becomes " +
                            name_after(m, target) + "; convert " + l.name + " too (its fields are carried over)");
        }
    }
}

// The stored field new field `index` takes, if any.
const types::field* source(const types::layout& from, const types::layout& to, std::size_t index,
                           const migration::conversion& c, bool by_name) {
    const types::field& f = to.fields[index];
    if (f.kind == types::field_kind::base) {
        for (const types::field& g : from.fields)
            if (g.kind == types::field_kind::base && g.type == f.type) return &g;
        return nullptr;
    }
    if (!by_name) return index < from.fields.size() ? &from.fields[index] : nullptr;
    for (const auto& [stored, renamed] : c.renames)
        if (renamed == f.name) return named(from, stored);
    for (const auto& [stored, renamed] : c.renames)
        if (stored == f.name) return nullptr;  // the stored field of this name went to another
    return named(from, f.name);
}

// The fields conversion `c` carries from the stored layout `from`, sorted
// by their old offset; a matched field that changed (kind, size, encoding, a
// reference's target) is left to the conversion function, type_mismatch
// naming type and field if it has none.
std::vector<conversion::carried> carried_fields(const types::layout& from, const migration& m,
                                                const migration::conversion& c, const std::string& path) {
    const types::layout& to = c.to();
    const bool by_name = names_every_field(from) && names_every_field(to);
    std::vector<conversion::carried> carried;
    for (std::size_t k = 0; k < to.fields.size(); ++k) {
        const types::field* g = source(from, to, k, c, by_name);
        if (!g) continue;  // new: as T{} made it
        const types::field& f = to.fields[k];
        std::string change = g->kind == f.kind && g->size == f.size && g->type_fp == f.type_fp
                                 ? target_change(m, from, *g, to, f)
                                 : "is " + describe(f, k) + " in " + to.name;
        if (change.empty()) {
            carried.push_back({g->offset, f.offset, f.size});
            continue;
        }
        if (!c.fill)
            throw error(errc::type_mismatch, "migration of " + path + ": type " + from.name + ", " +
                                                 describe(*g, static_cast<std::size_t>(g - from.fields.data())) +
                                                 " " + change + ": its bytes cannot be carried over; give convert<" +
                                                 to.name + ">(\"" + c.from +
                                                 "\") a conversion function (.with) that fills it");
    }
    std::sort(carried.begin(), carried.end(),
              [](const conversion::carried& a, const conversion::carried& b) { return a.from < b.from; });
    return carried;
}

}  // namespace

void conversion::build(const std::byte* old, std::byte* out) const {
    how->start(out);
    for (const carried& f : fields) std::memcpy(out + f.to, old + f.from, f.size);
    if (how->fill) how->fill(old_object(*from, old), out);
}

std::optional<std::uint64_t> conversion::map(std::uint64_t offset, std::uint64_t count) const {
    const std::uint64_t e = offset / from->size, r = offset % from->size;
    if (e > count || (e == count && r != 0)) return std::nullopt;
    if (r == 0) return e * to->size;
    for (const carried& f : fields)
        if (r >= f.from && r < f.from + f.size) return e * to->size + f.to + (r - f.from);
    return std::nullopt;
}

void migration_plan::refuse_pointer(const conversion& c, std::uint64_t offset) const {
    const std::uint64_t r = offset % c.from->size;
    throw error(errc::unsupported, "migration of " + path + ": a pointer aims at offset " + std::to_string(r) +
                                       " of a " + c.from->name + types::field_context(*c.from, static_cast<std::uint32_t>(r)) +
                                       ", which " + c.to->name + " does not keep; such a pointer cannot be " +
                                       "forwarded (keep the field, or clear the pointer first)");
}

migration_plan plan_migration(const types::catalog& old, const migration& m, const std::string& path,
                              engine_kind kind) {
    migration_plan plan{old, {}, path};
    for (const migration::conversion& c : m.conversions()) {
        std::optional<types::catalog::index> i = old.find(c.from);
        if (!i)
            throw error(errc::not_found, "migration of " + path + ": the store has no type named " + c.from +
                                             " (`steppe stats` lists its types)");
        if (plan.by_type.count(*i))
            throw error(errc::invalid_argument, "migration of " + path + ": type " + c.from + " is converted twice");
        const types::layout& from = old.at(*i);
        const types::layout& to = c.to();
        refuse_type(old, from, c, path, kind);
        plan.by_type[*i] = {*i, &from, &to, &c, carried_fields(from, m, c, path), 0, 0};
    }
    refuse_stale_targets(old, m, path);
    // Every name checked first: a replaced entry must not hide a later lookup.
    for (auto& [index, c] : plan.by_type) {
        try {
            plan.catalog.replace(index, *c.to);
        } catch (const error& e) {
            throw error(e.code(), "migration of " + path + ": " + e.what());
        }
    }
    if (std::string d = plan.catalog.program_difference(); !d.empty())
        throw error(errc::type_mismatch, "migration of " + path + ": the program would still not open the " +
                                             "store afterwards: " + d + "; convert that type too");
    return plan;
}

migrate_report run_migration(const types::catalog& old, const migration& m, const std::string& path, engine_kind kind,
                             const std::function<compact_report(migration_plan& plan)>& pass) {
    migration_plan plan = plan_migration(old, m, path, kind);
    migrate_report r;
    r.compaction = pass(plan);
    for (const migration::conversion& c : m.conversions())
        for (const auto& [index, done] : plan.by_type)
            if (done.how == &c) r.converted.push_back({c.from, done.to->name, done.objects, done.elements});
    return r;
}

}  // namespace migrating
}  // namespace steppe
