// The type catalog: lookup by name, and the precise type_mismatch message.
#include <algorithm>
#include <unordered_map>

#include "types/types.hpp"

namespace steppe::types {

namespace {

std::string num(std::uint64_t v) { return std::to_string(v); }

// "field 3 'x' (int)": 1-based, the name when known.
std::string describe_field(const field& f, std::size_t i) {
    std::string s = "field " + num(i + 1);
    if (!f.name.empty()) s += " '" + f.name + "'";
    return s + " (" + f.type + ")";
}


// First difference between two sorted offset lists, or "".
std::string slot_difference(const char* what, const layout& stored, const std::vector<std::uint32_t>& s,
                            const layout& program, const std::vector<std::uint32_t>& p) {
    std::vector<std::uint32_t> only_s, only_p;
    std::set_difference(s.begin(), s.end(), p.begin(), p.end(), std::back_inserter(only_s));
    std::set_difference(p.begin(), p.end(), s.begin(), s.end(), std::back_inserter(only_p));
    if (!only_s.empty() && !only_p.empty())
        return std::string(what) + " at offset " + num(only_s[0]) + " in store moved to offset " + num(only_p[0]) +
               " in program" + field_context(program, only_p[0]);
    if (!only_s.empty())
        return std::string(what) + " at offset " + num(only_s[0]) + " in store is not a pointer in program" +
               field_context(stored, only_s[0]);
    if (!only_p.empty())
        return std::string(what) + " at offset " + num(only_p[0]) + " in program is not a pointer in store" +
               field_context(program, only_p[0]);
    return {};
}

// The first reference (at the same offset in both) whose target differs.
std::string target_difference(const layout& stored, const layout& program) {
    if (stored.ref_targets.size() != program.ref_targets.size())
        return "the store does not record what its references refer to";
    for (std::size_t i = 0; i < stored.ref_targets.size(); ++i)
        if (stored.ref_targets[i].type != program.ref_targets[i].type)
            return "reference field at offset " + num(stored.refs[i]) + field_context(program, stored.refs[i]) +
                   " refers to " + stored.ref_targets[i].type + " in store, " + program.ref_targets[i].type +
                   " in program";
    return {};
}

std::string field_difference(const field& s, const field& p, std::size_t i) {
    std::string head = describe_field(s, i) + " at offset " + num(s.offset);
    if (s.offset != p.offset) return head + " in store is at offset " + num(p.offset) + " in program";
    if (s.kind != p.kind || s.size != p.size)
        return head + " became " + p.type + " (" + to_string(s.kind) + " of " + num(s.size) + " bytes in store, " +
               to_string(p.kind) + " of " + num(p.size) + " bytes in program)";
    if (s.type != p.type) return head + " became " + p.type;
    return head + ": the layout of " + s.type + " changed";  // same name, different fingerprint inside
}

// Where every field has a member name on both sides (bases have none), they
// are matched by name, so a removed or added member is named as such rather
// than as a change of whatever moved into its place. "" otherwise, or if
// names say nothing (then fields are compared in order).
std::string named_field_difference(const std::vector<field>& sf, const std::vector<field>& pf) {
    auto all_named = [](const std::vector<field>& v) {
        return std::all_of(v.begin(), v.end(), [](const field& f) { return !f.name.empty(); });
    };
    if (!all_named(sf) || !all_named(pf)) return {};
    auto position = [](const std::vector<field>& v, const std::string& name) {
        return static_cast<std::size_t>(
            std::find_if(v.begin(), v.end(), [&](const field& f) { return f.name == name; }) - v.begin());
    };
    for (std::size_t i = 0; i < sf.size(); ++i)
        if (position(pf, sf[i].name) == pf.size())
            return describe_field(sf[i], i) + " at offset " + num(sf[i].offset) + " in store is missing in program";
    for (std::size_t i = 0; i < pf.size(); ++i) {
        std::size_t j = position(sf, pf[i].name);
        if (j == sf.size())
            return describe_field(pf[i], i) + " at offset " + num(pf[i].offset) + " in program is not in store";
        const field& s = sf[j];
        const field& p = pf[i];
        if (s.offset != p.offset || s.size != p.size || s.kind != p.kind || s.type_fp != p.type_fp)
            return field_difference(s, p, j);
    }
    return {};
}

// What to do about fields that kept their bytes but not their names:
// migration carries fields by name, so a reorder needs only the conversion,
// a rename (the stored name gone from the program) also says where it went.
std::string rename_advice(const layout& stored, const layout& program, const std::string& from,
                          const std::string& to) {
    const bool kept = std::any_of(program.fields.begin(), program.fields.end(),
                                  [&](const field& f) { return f.name == from; });
    return "; fields are matched by name, so this program would read the store's '" + from + "' as '" + to +
           "': if the fields were " + (kept ? "reordered" : "renamed") +
           " on purpose, migrate the store (steppe::migrate, convert<" + program.name + ">(\"" + stored.name +
           "\")" + (kept ? "" : ".rename(\"" + from + "\", \"" + to + "\")") + ")";
}

// Member names are a field's identity (migration matches fields by them),
// so layouts of the same structure still differ where a field has another
// name in each (a reorder of same-typed fields, a rename): the first such
// field, or "". A field unnamed on either side (a base, an old or
// undescribed entry) is not compared.
std::string name_difference(const layout& stored, const layout& program) {
    for (std::size_t i = 0; i < stored.fields.size() && i < program.fields.size(); ++i) {
        const field& s = stored.fields[i];
        const std::string& p = program.fields[i].name;
        if (!s.name.empty() && !p.empty() && s.name != p)
            return "field " + num(i + 1) + " (" + s.type + ") at offset " + num(s.offset) + " is named '" + s.name +
                   "' in store, '" + p + "' in program" + rename_advice(stored, program, s.name, p);
    }
    return {};
}

// Read the same way and naming their fields alike: what opening requires.
bool same_layout(const layout& a, const layout& b) {
    return same_structure(a, b) && name_difference(a, b).empty();
}

}  // namespace

std::string field_context(const layout& l, std::uint32_t offset) {
    for (std::size_t i = l.fields.size(); i-- > 0;) {
        const field& f = l.fields[i];
        if (f.offset <= offset && offset < std::uint64_t{f.offset} + f.size) return ", in " + describe_field(f, i);
    }
    return {};
}

std::string difference(const layout& stored, const layout& program) {
    if (same_structure(stored, program)) return name_difference(stored, program);
    std::string fields = field_list_difference(stored, program);
    if (stored.size != program.size)
        return "size " + num(stored.size) + " in store, " + num(program.size) + " in program" +
               (fields.empty() ? "" : ": " + fields);
    if (stored.align != program.align)
        return "alignment " + num(stored.align) + " in store, " + num(program.align) + " in program";
    std::string d = slot_difference("pointer field", stored, stored.pointers, program, program.pointers);
    if (d.empty()) d = slot_difference("vtable pointer", stored, stored.vptrs, program, program.vptrs);
    if (d.empty()) d = slot_difference("reference field", stored, stored.refs, program, program.refs);
    if (d.empty()) d = target_difference(stored, program);
    if (!d.empty()) return d;
    return fields.empty() ? "fingerprint differs" : fields;  // "fingerprint" not reached: same_structure compares the above
}

// The first field that differs, or "".
std::string field_list_difference(const layout& stored, const layout& program) {
    const auto& sf = stored.fields;
    const auto& pf = program.fields;
    if (std::string d = named_field_difference(sf, pf); !d.empty()) return d;
    for (std::size_t i = 0; i < std::min(sf.size(), pf.size()); ++i) {
        const field& s = sf[i];
        const field& p = pf[i];
        if (s.offset != p.offset || s.size != p.size || s.kind != p.kind || s.type_fp != p.type_fp)
            return field_difference(s, p, i);
    }
    if (sf.size() > pf.size())
        return describe_field(sf[pf.size()], pf.size()) + " at offset " + num(sf[pf.size()].offset) +
               " in store is missing in program";
    if (pf.size() > sf.size())
        return describe_field(pf[sf.size()], sf.size()) + " at offset " + num(pf[sf.size()].offset) +
               " in program is not in store";
    return {};
}

catalog::index catalog::find_or_add(const layout& l) {
    if (auto i = find(l.name)) {
        layout& stored = entries_[*i];
        if (learn_targets(stored, l)) ++changes_;
        if (std::string d = difference(stored, l); !d.empty())
            throw error(errc::type_mismatch, "type " + l.name + ": " + d);
        return *i;
    }
    for (const field& f : l.fields) {
        if (!f.nested.get) continue;
        try {
            find_or_add(f.nested.get());
        } catch (const error& e) {
            if (e.code() != errc::type_mismatch) throw;
            throw error(errc::type_mismatch, e.what() + std::string(" (in ") + l.name + ")");
        }
    }
    ++changes_;
    return add(l);
}

void catalog::replace(index i, const layout& l) {
    const std::string old_name = at(i).name;
    if (auto other = find(l.name); other && *other != i)
        throw error(errc::unsupported, "type " + old_name + " cannot become " + l.name + ": the store already has a " +
                                           "type of that name");
    for (const field& f : l.fields)
        if (f.nested.get) find_or_add(f.nested.get());
    by_name_.erase(old_name);
    by_name_.emplace(l.name, i);
    entries_[i] = l;
    ++changes_;
}

std::string catalog::program_difference() const {
    std::unordered_map<std::string, const layout*> program;
    std::unordered_map<std::string, bool> ambiguous;
    for (const layout* l : program_types()) {
        auto [it, fresh] = program.try_emplace(l->name, l);
        if (!fresh && !same_layout(*it->second, *l)) ambiguous[l->name] = true;
    }
    std::vector<index> changed;
    for (index i = 0; i < entries_.size(); ++i) {
        auto it = program.find(entries_[i].name);
        if (it != program.end() && !ambiguous.count(it->first) && !same_layout(entries_[i], *it->second))
            changed.push_back(i);
    }
    if (changed.empty()) return {};
    // The innermost: no nested field's type is itself changed.
    auto holds_changed = [&](index i) {
        for (const field& f : entries_[i].fields)
            for (index c : changed)
                if (f.type == entries_[c].name) return true;
        return false;
    };
    index inner = changed.front();
    for (index c : changed)
        if (!holds_changed(c)) {
            inner = c;
            break;
        }
    const layout& stored = entries_[inner];
    // The outermost changed type holding it (a container's node, whose name
    // holds the element's), else one with a field of its type.
    auto has_field_of = [&](index c) {
        return std::any_of(entries_[c].fields.begin(), entries_[c].fields.end(),
                           [&](const field& f) { return f.type == stored.name; });
    };
    std::string where;
    for (index c : changed)
        if (c != inner && entries_[c].name.find(stored.name) != std::string::npos &&
            entries_[c].name.size() + 6 > where.size())
            where = " (in " + entries_[c].name + ")";
    for (index c : changed)
        if (where.empty() && c != inner && has_field_of(c)) where = " (in " + entries_[c].name + ")";
    return "type " + stored.name + where + ": " + difference(stored, *program.at(stored.name));
}

void catalog::require_program_match(const std::string& path) const {
    std::string d = program_difference();
    if (d.empty()) return;
    throw error(errc::type_mismatch,
                path + ": " + d +
                    "; this program's type is not the one the store was written with, and reading the store's "
                    "objects as it would misread them: open the store with a build whose types match "
                    "(`steppe stats " + path + "` lists the stored types)");
}

std::vector<std::string> catalog::check() const {
    std::vector<std::string> findings;
    for (const layout& l : entries_)
        for (const field& f : l.fields) {
            if (f.kind != field_kind::nested) continue;
            std::optional<index> i = find(f.type);
            if (i && entries_[*i].fingerprint != f.type_fp)
                findings.push_back("type catalog: C1: type " + l.name + ", field '" + f.name + "' (" + f.type +
                                   ") at offset " + num(f.offset) + " was stored with another layout of " + f.type +
                                   " than the catalog's entry for it");
        }
    return findings;
}

// A version 2 entry did not record its references' targets: it takes the
// program's when everything else agrees (then they were the same type).
bool catalog::learn_targets(layout& stored, const layout& program) {
    if (stored.refs.empty() || !stored.ref_targets.empty() || program.ref_targets.size() != stored.refs.size())
        return false;
    layout upgraded = stored;
    upgraded.ref_targets = program.ref_targets;
    upgraded.fingerprint = fingerprint(upgraded);
    if (!same_structure(upgraded, program)) return false;
    stored = std::move(upgraded);
    return true;
}

std::optional<catalog::index> catalog::find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
}

const layout& catalog::at(index i) const {
    if (i >= entries_.size())
        throw error(errc::invalid_argument,
                    "type catalog: index " + num(i) + " out of range (" + num(entries_.size()) + " entries)");
    return entries_[i];
}

catalog::index catalog::add(layout l) {
    // Never accept what encode() would write and decode() refuse.
    auto bad_name = [](const std::string& n, std::size_t min) {
        return n.size() < min || n.size() > max_name_length || n.find('\0') != std::string::npos;
    };
    bool bad = bad_name(l.name, 1);
    for (const field& f : l.fields) bad = bad || bad_name(f.type, 1) || bad_name(f.name, 0);
    for (const ref_target& t : l.ref_targets) bad = bad || bad_name(t.type, 1);
    if (bad) throw error(errc::invalid_argument, "type catalog: a name of type " + l.name.substr(0, 200) + " is empty or too long");
    auto i = static_cast<index>(entries_.size());
    by_name_.emplace(l.name, i);
    entries_.push_back(std::move(l));
    return i;
}

}  // namespace steppe::types
