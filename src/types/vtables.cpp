#include "types/vtables.hpp"

#include "common/bytes.hpp"
#include "types/types.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <steppe/error.hpp>

#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <fstream>
#include <typeinfo>
#include <unordered_set>

namespace steppe::types {

std::string vtable_symbol_for(const std::type_info& type) { return std::string("_ZTV") + type.name(); }

std::string vtable_symbol_of(const void* vptr) {
    return vtable_symbol_for(*static_cast<const std::type_info* const*>(vptr)[-1]);
}

namespace {

// The executable's static symbol table (.symtab), read once: vtables of
// classes defined in the executable are not dynamic symbols unless it was
// linked with -rdynamic.
class executable_symbols {
public:
    static const executable_symbols& get() {
        static const executable_symbols& instance = *new executable_symbols;  // never destroyed, as posix_env()
        return instance;
    }
    std::uintptr_t find(const std::string& name) const {
        auto it = symbols_.find(name);
        return it == symbols_.end() ? 0 : it->second.st_value + bias_;
    }
    std::size_t size_of(const std::string& name) const {
        auto it = symbols_.find(name);
        return it == symbols_.end() ? 0 : it->second.st_size;
    }
    bool has_symbol_table() const noexcept { return has_symbol_table_; }

private:
    executable_symbols() {
        dl_iterate_phdr(
            [](dl_phdr_info* info, std::size_t, void* self) {
                static_cast<executable_symbols*>(self)->bias_ = info->dlpi_addr;
                return 1;  // the first entry is the executable
            },
            this);
        // One read: an unoptimized streambuf iterator takes a second or more
        // over a debug executable.
        std::ifstream f("/proc/self/exe", std::ios::binary | std::ios::ate);
        std::streamoff size = f.tellg();
        if (size < static_cast<std::streamoff>(sizeof(Elf64_Ehdr))) return;
        std::vector<char> image(static_cast<std::size_t>(size));
        if (!f.seekg(0).read(image.data(), size)) return;
        Elf64_Ehdr eh;
        std::memcpy(&eh, image.data(), sizeof eh);
        if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return;
        if (eh.e_shoff + std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > image.size()) return;
        std::vector<Elf64_Shdr> sections(eh.e_shnum);
        std::memcpy(sections.data(), image.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
        for (const auto& s : sections) {
            if (s.sh_type != SHT_SYMTAB || s.sh_link >= sections.size()) continue;
            has_symbol_table_ = true;
            const auto& strtab = sections[s.sh_link];
            if (s.sh_offset + s.sh_size > image.size() || strtab.sh_offset + strtab.sh_size > image.size()) continue;
            for (std::uint64_t at = 0; at + sizeof(Elf64_Sym) <= s.sh_size; at += sizeof(Elf64_Sym)) {
                Elf64_Sym sym;
                std::memcpy(&sym, image.data() + s.sh_offset + at, sizeof sym);
                if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_name >= strtab.sh_size) continue;
                const char* name = image.data() + strtab.sh_offset + sym.st_name;
                std::size_t max = strtab.sh_size - sym.st_name;
                // Vtable groups, and the type_info each holds before its address points.
                bool wanted = std::strncmp(name, "_ZTV", std::min<std::size_t>(4, max)) == 0 ||
                              std::strncmp(name, "_ZTI", std::min<std::size_t>(4, max)) == 0;
                if (wanted && strnlen(name, max) < max) symbols_.emplace(name, sym);
            }
        }
    }
    std::unordered_map<std::string, Elf64_Sym> symbols_;
    std::uintptr_t bias_ = 0;
    bool has_symbol_table_ = false;
};

}  // namespace

std::uintptr_t resolve_symbol(const std::string& symbol) {
    if (void* p = ::dlsym(RTLD_DEFAULT, symbol.c_str())) return reinterpret_cast<std::uintptr_t>(p);
    return executable_symbols::get().find(symbol);
}

bool executable_is_stripped() { return !executable_symbols::get().has_symbol_table(); }

namespace {

// The size of `symbol`, found at `address` by resolve_symbol; 0 if unknown.
std::size_t symbol_size(const std::string& symbol, std::uintptr_t address) {
    Dl_info info;
    void* entry = nullptr;
    auto* at = reinterpret_cast<void*>(address);
    if (::dladdr1(at, &info, &entry, RTLD_DL_SYMENT) && entry && info.dli_saddr == at && info.dli_sname &&
        symbol == info.dli_sname)
        return static_cast<const Elf64_Sym*>(entry)->st_size;
    return executable_symbols::get().size_of(symbol);
}

const std::intptr_t* words_at(std::uintptr_t address) { return reinterpret_cast<const std::intptr_t*>(address); }

}  // namespace

vtable_table::group vtable_table::find_group(const std::string& symbol) {
    group g;
    g.address = resolve_symbol(symbol);
    if (g.address == 0) return g;
    g.size = symbol_size(symbol, g.address);
    g.rtti = resolve_symbol("_ZTI" + symbol.substr(4));
    // Unchecked unless the group is known to hold that type_info: a token
    // is refused only on evidence from the group itself.
    const auto* words = words_at(g.address);
    bool holds_rtti = false;
    for (std::size_t i = 0; i < g.size / sizeof(void*) && !holds_rtti; ++i)
        holds_rtti = static_cast<std::uintptr_t>(words[i]) == g.rtti;
    if (!holds_rtti || g.rtti == 0) g.size = g.rtti = 0;
    return g;
}

// Itanium: every address point follows the RTTI pointer (at -8) and
// offset-to-top (at -16); a vtable without virtual functions (one holding
// only virtual base offsets) ends at its address point.
bool vtable_table::group::has_address_point(std::uint32_t offset) const noexcept {
    if (rtti == 0) return true;  // unchecked
    if (offset % sizeof(void*) != 0 || offset < 2 * sizeof(void*) || offset > size) return false;
    return static_cast<std::uintptr_t>(words_at(address + offset)[-1]) == rtti;
}

std::int64_t vtable_table::group::offset_to_top(std::uint32_t offset) const noexcept {
    return words_at(address + offset)[-2];
}

std::uintptr_t primary_address_point(const std::type_info& type, std::size_t object_size) {
    std::uintptr_t group = resolve_symbol(vtable_symbol_for(type));
    if (group == 0) return 0;
    // Every word before the primary vtable's RTTI pointer is an offset within
    // the object (vcall, vbase, offset-to-top), smaller than the object; the
    // first word that is not must be the RTTI pointer, after offset-to-top 0.
    // The scan never reads past it, so never past the symbol.
    const auto* words = reinterpret_cast<const std::intptr_t*>(group);
    auto limit = static_cast<std::intptr_t>(object_size);
    std::size_t i = 0;
    while (words[i] > -limit && words[i] < limit) ++i;
    const auto* rtti = reinterpret_cast<const std::type_info*>(words[i]);
    if (i == 0 || words[i - 1] != 0 || (rtti != &type && *rtti != type)) return 0;
    return group + (i + 1) * sizeof(void*);
}

// A bare type's mangling such as "N3geo6CircleE" does not demangle on its
// own; the vtable symbol's does, as "vtable for geo::Circle".
std::string class_of_vtable(const std::string& vtable_symbol) {
    int status = 0;
    char* text = abi::__cxa_demangle(vtable_symbol.c_str(), nullptr, nullptr, &status);
    const std::string prefix = "vtable for ";
    std::string name = status == 0 && text ? text : vtable_symbol;
    std::free(text);
    return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

void vtable_table::require_noted_classes(const catalog& stored, const std::string& store) const {
    std::unordered_set<std::string> noted;
    for (const layout* l : program_types()) noted.insert(l->name);
    for (std::size_t i = 0; i < names_.size(); ++i) {
        if (groups_[i].address == 0) continue;  // missing: a stand-in, whose use ends with a message
        std::string name = class_of_vtable(names_[i]);
        if (!stored.find(name) || noted.count(name)) continue;
        throw error(errc::type_mismatch,
                    store + ": the store holds objects of class " + name +
                        ", which this program has (its vtable is linked in) but never names, so steppe cannot "
                        "check that the program's layout of it is the store's before its virtual functions read "
                        "them: name it once, e.g. steppe::types::declare<" + name + ">(); (docs/types.md)");
    }
}

void vtable_table::require_same_address_points(const std::string& store) const {
    for (std::size_t i = 0; i < names_.size(); ++i) {
        const group& g = groups_[i];
        if (g.rtti == 0) continue;  // missing (a stand-in) or unchecked
        for (auto [offset, offset_to_top] : points_[i]) {
            std::string now;
            if (!g.has_address_point(offset))
                now = "is no address point of the class's vtable group";
            else if (g.offset_to_top(offset) != offset_to_top)
                now = "is an address point with offset-to-top " + std::to_string(g.offset_to_top(offset));
            if (now.empty()) continue;
            std::string name = class_of_vtable(names_[i]);
            throw error(errc::type_mismatch,
                        store + ": the store holds objects of class " + name + " with a vtable pointer to " +
                            names_[i] + " + " + std::to_string(offset) + " (an address point with offset-to-top " +
                            std::to_string(offset_to_top) + "), which in this program " + now +
                            ": the class's vtable group changed shape (virtual functions added or removed, in " +
                            name + " or a base of it?), so its objects' vtable pointers cannot be relinked; "
                            "rebuild with the old class, or copy the objects out with a program built with it "
                            "(docs/types.md)");
        }
    }
}

std::uint32_t vtable_table::index_of(const std::string& symbol) {
    auto [it, fresh] = index_.try_emplace(symbol, static_cast<std::uint32_t>(names_.size()));
    if (fresh) {
        names_.push_back(symbol);
        groups_.push_back(find_group(symbol));
        points_.emplace_back();
    }
    return it->second;
}

void vtable_table::note_address_point(std::uint32_t i, std::uint32_t offset, std::int64_t offset_to_top) {
    if (points_.at(i).emplace(offset, offset_to_top).second) ++address_points_;
}

bool vtable_table::knows_address_point(std::uint32_t i, std::uint32_t offset) const {
    return i < points_.size() && points_[i].count(offset) != 0;
}

std::uint32_t vtable_table::find(const std::string& symbol) const {
    auto it = index_.find(symbol);
    return it == index_.end() ? absent : it->second;
}

void vtable_table::note_address(const std::string& symbol, std::uintptr_t address) {
    std::uint32_t i = index_of(symbol);
    if (groups_[i].address == 0) groups_[i].address = address;
}

void vtable_table::stand_in_for_missing(const std::string& store, void (*hook)(const char*)) {
    std::vector<std::string> missing(names_.size());
    bool any = false;
    for (std::size_t i = 0; i < names_.size(); ++i)
        if (groups_[i].address == 0) {
            missing[i] = names_[i];
            any = true;
        }
    if (any) missing_ = std::make_shared<missing_classes>(missing, store, hook);
}

std::uintptr_t vtable_table::relink(std::uint64_t token) const noexcept {
    const auto i = static_cast<std::uint32_t>(token >> 32);
    const auto offset = static_cast<std::uint32_t>(token);
    if (i < groups_.size() && groups_[i].address != 0)
        return groups_[i].has_address_point(offset) ? groups_[i].address + offset : 0;
    return missing_ ? missing_->address_point(i, offset) : 0;
}

bool vtable_table::moved_address_point(std::uint64_t token) const noexcept {
    const auto i = static_cast<std::uint32_t>(token >> 32);
    const auto offset = static_cast<std::uint32_t>(token);
    return i < groups_.size() && groups_[i].address != 0 && !groups_[i].has_address_point(offset);
}

namespace {

constexpr std::uint32_t versioned = ~std::uint32_t{0}, table_version = 2;

}  // namespace

std::vector<std::byte> vtable_table::encode() const {
    common::byte_writer w;
    w.put(versioned);
    w.put(table_version);
    w.put(static_cast<std::uint32_t>(names_.size()));
    for (std::size_t i = 0; i < names_.size(); ++i) {
        w.put(names_[i]);
        w.put(static_cast<std::uint32_t>(points_[i].size()));
        for (auto [offset, offset_to_top] : points_[i]) {
            w.put(offset);
            w.put(offset_to_top);
        }
    }
    return w.take();
}

vtable_table vtable_table::decode(std::span<const std::byte> bytes) {
    vtable_table t;
    common::byte_reader r(bytes, "the vtable table");
    auto count = r.get<std::uint32_t>();
    const bool with_points = count == versioned;
    if (with_points) {
        if (auto version = r.get<std::uint32_t>(); version != table_version)
            throw error(errc::version, "the vtable table is of version " + std::to_string(version) +
                                           ", which this build does not read (it reads 1 and 2)");
        count = r.get<std::uint32_t>();
    }
    for (; count > 0; --count) {
        std::string name = r.get_string();
        if (name.rfind("_ZTV", 0) != 0 || t.index_.count(name))
            throw error(errc::corrupt, "the vtable table holds a bad or repeated symbol");
        std::uint32_t i = t.index_of(name);
        for (auto points = with_points ? r.get<std::uint32_t>() : 0; points > 0; --points) {
            auto offset = r.get<std::uint32_t>();
            auto offset_to_top = r.get<std::int64_t>();
            // Address points follow offset-to-top and RTTI, word-aligned, in offset order.
            bool in_order = t.points_[i].empty() || t.points_[i].rbegin()->first < offset;
            if (offset % sizeof(void*) != 0 || offset < 2 * sizeof(void*) || !in_order)
                throw error(errc::corrupt, "the vtable table holds a bad address point of " + name);
            t.note_address_point(i, offset, offset_to_top);
        }
    }
    r.expect_end();
    return t;
}

}  // namespace steppe::types
