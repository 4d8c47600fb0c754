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
        static executable_symbols instance;
        return instance;
    }
    std::uintptr_t find(const std::string& name) const {
        auto it = symbols_.find(name);
        return it == symbols_.end() ? 0 : it->second + bias_;
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
                if (std::strncmp(name, "_ZTV", std::min<std::size_t>(4, max)) == 0 && strnlen(name, max) < max)
                    symbols_.emplace(name, sym.st_value);
            }
        }
    }
    std::unordered_map<std::string, std::uintptr_t> symbols_;
    std::uintptr_t bias_ = 0;
    bool has_symbol_table_ = false;
};

}  // namespace

std::uintptr_t resolve_symbol(const std::string& symbol) {
    if (void* p = ::dlsym(RTLD_DEFAULT, symbol.c_str())) return reinterpret_cast<std::uintptr_t>(p);
    return executable_symbols::get().find(symbol);
}

bool executable_is_stripped() { return !executable_symbols::get().has_symbol_table(); }

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
        if (addresses_[i] == 0) continue;  // missing: a stand-in, whose use ends with a message
        std::string name = class_of_vtable(names_[i]);
        if (!stored.find(name) || noted.count(name)) continue;
        throw error(errc::type_mismatch,
                    store + ": the store holds objects of class " + name +
                        ", which this program has (its vtable is linked in) but never names, so steppe cannot "
                        "check that the program's layout of it is the store's before its virtual functions read "
                        "them: name it once, e.g. steppe::types::declare<" + name + ">(); (docs/types.md)");
    }
}

std::uint32_t vtable_table::index_of(const std::string& symbol) {
    auto [it, fresh] = index_.try_emplace(symbol, static_cast<std::uint32_t>(names_.size()));
    if (fresh) {
        names_.push_back(symbol);
        addresses_.push_back(resolve_symbol(symbol));
    }
    return it->second;
}

std::uint32_t vtable_table::find(const std::string& symbol) const {
    auto it = index_.find(symbol);
    return it == index_.end() ? absent : it->second;
}

void vtable_table::note_address(const std::string& symbol, std::uintptr_t address) {
    std::uint32_t i = index_of(symbol);
    if (addresses_[i] == 0) addresses_[i] = address;
}

void vtable_table::stand_in_for_missing(const std::string& store, void (*hook)(const char*)) {
    std::vector<std::string> missing(names_.size());
    bool any = false;
    for (std::size_t i = 0; i < names_.size(); ++i)
        if (addresses_[i] == 0) {
            missing[i] = names_[i];
            any = true;
        }
    if (any) missing_ = std::make_shared<missing_classes>(missing, store, hook);
}

std::uintptr_t vtable_table::relink(std::uint64_t token) const noexcept {
    const auto i = static_cast<std::uint32_t>(token >> 32);
    const auto offset = static_cast<std::uint32_t>(token);
    if (i < addresses_.size() && addresses_[i] != 0) return addresses_[i] + offset;
    return missing_ ? missing_->address_point(i, offset) : 0;
}

std::vector<std::byte> vtable_table::encode() const {
    common::byte_writer w;
    w.put(static_cast<std::uint32_t>(names_.size()));
    for (const auto& n : names_) w.put(n);
    return w.take();
}

vtable_table vtable_table::decode(std::span<const std::byte> bytes) {
    vtable_table t;
    common::byte_reader r(bytes, "the vtable table");
    for (auto count = r.get<std::uint32_t>(); count > 0; --count) {
        std::string name = r.get_string();
        if (name.rfind("_ZTV", 0) != 0 || t.index_.count(name))
            throw error(errc::corrupt, "the vtable table holds a bad or repeated symbol");
        t.index_of(name);
    }
    r.expect_end();
    return t;
}

}  // namespace steppe::types
