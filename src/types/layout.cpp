// The non-template half of steppe/layout.hpp: names, fingerprints, and the
// checks every freshly built layout passes before anyone sees it.
#include <steppe/error.hpp>
#include <steppe/layout.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "types/hash.hpp"
#include "types/types.hpp"
#include "types/vtables.hpp"

namespace steppe::types {

namespace {
struct program_type_list {
    std::mutex mutex;
    std::vector<const layout& (*)()> types;
};
program_type_list& program_type_list_() {
    static program_type_list* list = new program_type_list;  // never destroyed: used by static destructors too
    return *list;
}
}  // namespace

void detail::note_program_type(const layout& (*get)()) noexcept {
    program_type_list& list = program_type_list_();
    std::lock_guard lock(list.mutex);
    try {
        list.types.push_back(get);
    } catch (...) {  // out of memory at start-up: the type is only not compared at open
    }
}

std::vector<const layout*> program_types() {
    std::vector<const layout& (*)()> noted;
    {
        program_type_list& list = program_type_list_();
        std::lock_guard lock(list.mutex);
        noted = list.types;
    }
    std::vector<const layout*> out;
    for (const layout& (*get)() : noted) {
        try {
            out.push_back(&get());
        } catch (const error&) {  // cannot be built here: its own error says why when the program uses it
        }
    }
    return out;
}

const char* to_string(field_kind kind) noexcept {
    switch (kind) {
    case field_kind::scalar: return "scalar";
    case field_kind::pointer: return "pointer";
    case field_kind::nested: return "nested";
    case field_kind::array: return "array";
    case field_kind::base: return "base";
    case field_kind::reference: return "reference";
    }
    return "unknown";
}

std::uint64_t fingerprint(const layout& l) noexcept {
    detail::fnv1a h;
    h.u64(l.size, 4);
    h.u64(l.align, 4);
    h.u64(l.pointers.size(), 4);
    for (std::uint32_t p : l.pointers) h.u64(p, 4);
    h.u64(l.vptrs.size(), 4);
    for (std::uint32_t v : l.vptrs) h.u64(v, 4);
    // Only types holding references hash them, so every type without any
    // keeps the fingerprint it had before references existed.
    if (!l.refs.empty()) {
        h.u64('r', 1);
        h.u64(l.refs.size(), 4);
        for (std::uint32_t r : l.refs) h.u64(r, 4);
    }
    // Targets are hashed where known (catalog version 3 and programs), so a
    // version 2 entry keeps the fingerprint it was stored with.
    if (!l.ref_targets.empty()) {
        h.u64('t', 1);
        for (const ref_target& t : l.ref_targets) {
            h.u64(t.type.size(), 4);
            h.text(t.type);
        }
    }
    h.u64(l.fields.size(), 4);
    for (const field& f : l.fields) {
        h.u64(f.offset, 4);
        h.u64(f.size, 4);
        h.u64(static_cast<std::uint8_t>(f.kind), 1);
        h.u64(f.type_fp);
    }
    return h.value();
}

bool same_structure(const layout& a, const layout& b) noexcept {
    auto same_field = [](const field& x, const field& y) {
        return x.offset == y.offset && x.size == y.size && x.kind == y.kind && x.type_fp == y.type_fp;
    };
    return a.size == b.size && a.align == b.align && a.pointers == b.pointers && a.vptrs == b.vptrs && a.refs == b.refs &&
           a.ref_targets == b.ref_targets && std::equal(a.fields.begin(), a.fields.end(), b.fields.begin(), b.fields.end(), same_field);
}

namespace detail {

namespace {

bool identifier_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Type names key the catalog, so a store written by a g++-built program must
// find its entries from a clang-built one: spell builtins and anonymous
// namespaces as clang does, keep a space only between two identifier
// characters and after commas ("Part*", "char[10]", "std::pair<int, long>").
std::string canonical(std::string_view name) {
    std::string compact;
    for (std::size_t i = 0; i < name.size(); ++i) {
        char c = name[i];
        if (c != ' ') {
            compact += c;
            if (c == ',') compact += ' ';
        } else if (!compact.empty() && identifier_char(compact.back()) && i + 1 < name.size() &&
                   identifier_char(name[i + 1])) {
            compact += ' ';
        }
    }
    static constexpr std::pair<std::string_view, std::string_view> spellings[] = {
        {"long long unsigned int", "unsigned long long"}, {"long long int", "long long"},
        {"long unsigned int", "unsigned long"}, {"short unsigned int", "unsigned short"},
        {"__int128 unsigned", "unsigned __int128"}, {"long int", "long"}, {"short int", "short"},
        {"{anonymous}", "(anonymous namespace)"},
    };
    std::string out;
    for (std::size_t i = 0; i < compact.size();) {
        bool at_word = i == 0 || !identifier_char(compact[i - 1]);
        bool replaced = false;
        for (auto [from, to] : spellings) {
            std::size_t end = i + from.size();
            if (at_word && compact.compare(i, from.size(), from) == 0 &&
                (end == compact.size() || !identifier_char(compact[end]))) {
                out += to;
                i = end;
                replaced = true;
                break;
            }
        }
        if (!replaced) out += compact[i++];
    }
    return out;
}

}  // namespace

std::string type_name_from(std::string_view pretty) {
    // g++: "... raw_type_name() [with T = Part]"; clang: "... raw_type_name() [T = Part]".
    std::size_t at = pretty.find("[with T = ");
    std::size_t skip = 10;
    if (at == std::string_view::npos) {
        at = pretty.find("[T = ");
        skip = 5;
    }
    std::size_t end = pretty.rfind(']');
    if (at == std::string_view::npos || end == std::string_view::npos || end < at + skip) return canonical(pretty);
    return canonical(pretty.substr(at + skip, end - at - skip));
}

std::string member_name_from(std::string_view pretty) {
    // g++: "... [with auto P = (& fake_object<Part>.<...>::value.Part::build)]".
    std::size_t end = pretty.rfind(')');
    if (end == std::string_view::npos) return {};
    std::string_view head = pretty.substr(0, end);
    std::size_t colon = head.rfind("::");
    if (colon == std::string_view::npos) return {};
    std::string_view name = head.substr(colon + 2);
    bool identifier = !name.empty() && std::all_of(name.begin(), name.end(), identifier_char);
    return identifier ? std::string(name) : std::string();
}

std::uint64_t code_fp(char code, std::size_t size) noexcept {
    fnv1a h;
    h.u64(static_cast<unsigned char>(code), 1);
    h.u64(size);
    return h.value();
}

std::uint64_t array_fp(std::uint64_t element_fp, std::size_t count) noexcept {
    fnv1a h;
    h.u64('a', 1);
    h.u64(element_fp);
    h.u64(count);
    return h.value();
}

void append_shifted(layout& out, const layout& inner, std::size_t offset) {
    for (std::uint32_t p : inner.pointers) out.pointers.push_back(static_cast<std::uint32_t>(offset + p));
    for (std::uint32_t v : inner.vptrs) out.vptrs.push_back(static_cast<std::uint32_t>(offset + v));
    for (std::uint32_t r : inner.refs) out.refs.push_back(static_cast<std::uint32_t>(offset + r));
    out.ref_targets.insert(out.ref_targets.end(), inner.ref_targets.begin(), inner.ref_targets.end());
}

void size_to(layout& l, const std::vector<extent>& parts) noexcept {
    // Itanium: nvsize is where the last non-virtual part ends, not rounded up
    // (a derived class may reuse the tail padding), nvalign their largest.
    l.size = 0;
    l.align = 1;
    for (const extent& e : parts) {
        l.size = std::max(l.size, static_cast<std::uint32_t>(e.offset + e.size));
        l.align = std::max(l.align, static_cast<std::uint32_t>(e.align));
    }
}

vtable_shell::vtable_shell(const std::type_info& type, const std::string& name, std::size_t size, std::size_t align)
    : storage_(nullptr), align_(align) {
    std::uintptr_t point = primary_address_point(type, size);
    if (point == 0)
        throw error(errc::unsupported,
                    "type " + name + ": cannot find where its virtual bases are, because its vtable " +
                        vtable_symbol_for(type) +
                        " is not in this process's symbol tables; link in the code that defines the class, and "
                        "do not strip the executable or link it with -rdynamic");
    storage_ = ::operator new(size, std::align_val_t{align});
    std::memset(storage_, 0, size);
    std::memcpy(storage_, &point, sizeof point);
}

vtable_shell::~vtable_shell() { ::operator delete(storage_, std::align_val_t{align_}); }

namespace {

[[noreturn]] void refuse(const layout& l, const std::string& what) {
    throw error(errc::invalid_argument, "type " + l.name + ": " + what);
}

// Padding before a member is shorter than the member's alignment, and tail
// padding shorter than the type's; any longer gap is an unlisted member. A
// missing pointer always leaves such a gap unless the next member is aligned
// beyond 8 bytes. Overlaps are fine: derived members may reuse a base's tail
// padding and empty members share addresses.
void check_coverage(const layout& l, std::vector<extent> extents) {
    std::sort(extents.begin(), extents.end(),
              [](const extent& a, const extent& b) { return a.offset < b.offset; });
    std::size_t pos = 0;
    auto hole = [&](std::size_t from, std::size_t to) {
        refuse(l, "bytes [" + std::to_string(from) + ", " + std::to_string(to) +
                      ") belong to no member listed in STEPPE_FIELDS nor base in STEPPE_BASES; list every "
                      "data member and base (an unlisted pointer would never be swizzled)");
    };
    for (const extent& e : extents) {
        if (e.offset > pos && e.offset - pos >= e.align) hole(pos, e.offset);
        pos = std::max(pos, e.offset + e.size);
    }
    std::size_t end = (pos + l.align - 1) / l.align * l.align;
    if (end < l.size) hole(pos, l.size);
}

// Orders the reference offsets, each keeping its target.
void sort_refs(layout& l) {
    std::vector<std::size_t> order(l.refs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return l.refs[a] < l.refs[b]; });
    std::vector<std::uint32_t> refs;
    std::vector<ref_target> targets;
    for (std::size_t i : order) {
        refs.push_back(l.refs[i]);
        targets.push_back(std::move(l.ref_targets[i]));
    }
    l.refs = std::move(refs);
    l.ref_targets = std::move(targets);
}

}  // namespace

void finish(layout& l, const std::vector<extent>* declared) {
    std::stable_sort(l.fields.begin(), l.fields.end(),
                     [](const field& a, const field& b) { return a.offset < b.offset; });
    for (const field& f : l.fields)
        if (std::uint64_t{f.offset} + f.size > l.size)
            refuse(l, "field '" + f.name + "' (" + f.type + ") at offset " + std::to_string(f.offset) +
                          " ends beyond the type's " + std::to_string(l.size) + " bytes");
    std::sort(l.pointers.begin(), l.pointers.end());
    std::sort(l.vptrs.begin(), l.vptrs.end());
    sort_refs(l);
    // A derived class shares its primary base's vptr at offset 0.
    l.vptrs.erase(std::unique(l.vptrs.begin(), l.vptrs.end()), l.vptrs.end());
    std::vector<std::uint32_t> slots(l.pointers);
    slots.insert(slots.end(), l.vptrs.begin(), l.vptrs.end());
    slots.insert(slots.end(), l.refs.begin(), l.refs.end());
    std::sort(slots.begin(), slots.end());
    for (std::size_t i = 1; i < slots.size(); ++i)
        if (slots[i] - slots[i - 1] < sizeof(void*))
            refuse(l, "two pointer fields overlap at offsets " + std::to_string(slots[i - 1]) + " and " +
                          std::to_string(slots[i]) + " (check steppe::describe offsets)");
    if (declared) check_coverage(l, *declared);
    l.fingerprint = fingerprint(l);
}

}  // namespace detail
}  // namespace steppe::types
