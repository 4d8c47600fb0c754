// The type catalog: lookup by name, and the precise type_mismatch message.
#include <algorithm>

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

}  // namespace

std::string field_context(const layout& l, std::uint32_t offset) {
    for (std::size_t i = l.fields.size(); i-- > 0;) {
        const field& f = l.fields[i];
        if (f.offset <= offset && offset < std::uint64_t{f.offset} + f.size) return ", in " + describe_field(f, i);
    }
    return {};
}

std::string difference(const layout& stored, const layout& program) {
    if (same_structure(stored, program)) return {};
    if (stored.size != program.size) return "size " + num(stored.size) + " in store, " + num(program.size) + " in program";
    if (stored.align != program.align)
        return "alignment " + num(stored.align) + " in store, " + num(program.align) + " in program";
    std::string d = slot_difference("pointer field", stored, stored.pointers, program, program.pointers);
    if (d.empty()) d = slot_difference("vtable pointer", stored, stored.vptrs, program, program.vptrs);
    if (d.empty()) d = slot_difference("reference field", stored, stored.refs, program, program.refs);
    if (d.empty()) d = target_difference(stored, program);
    if (!d.empty()) return d;
    const auto& sf = stored.fields;
    const auto& pf = program.fields;
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
    return "fingerprint differs";  // not reached: same_structure compares exactly the above
}

catalog::index catalog::find_or_add(const layout& l) {
    if (auto i = find(l.name)) {
        layout& stored = entries_[*i];
        if (learn_targets(stored, l)) ++changes_;
        if (std::string d = difference(stored, l); !d.empty())
            throw error(errc::type_mismatch, "type " + l.name + ": " + d);
        return *i;
    }
    ++changes_;
    return add(l);
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
