// Relinking vtable pointers (reference 002 §1.7): a vptr is never stored as
// an address. In persistent form it is a token — the index of a vtable
// symbol in the store's vtable table, and the offset of the address point
// within that symbol — and on load it becomes the address of the same point
// in the running executable, whatever its build, link order or ASLR slide.
//
// Itanium C++ ABI facts used here: a vptr points into the vtable group
// `_ZTV<mangled type>`; the word before the address point is the RTTI pointer
// of the complete object's type (for a member subobject: of the member's
// type), whichever of the object's vptrs it is (the primary one, a secondary
// one in a non-virtual base, or one in a virtual base), so the symbol that
// holds any vptr is found from the vptr alone and the token's offset is just
// the distance from the symbol. The group opens with the primary vtable:
// vcall and vbase offsets (none without virtual bases), offset-to-top (0),
// the RTTI pointer, then the primary address point, so a dynamic class
// without virtual bases has it 16 bytes into the symbol.
//
// A token's offset is only worth relinking while it is still the same
// address point: a class whose vtable group changed shape (a virtual
// function added to a primary base or to the class itself moves every
// secondary address point) would have its secondary vptrs land on other
// slots. So the table records, for each token it made, the offset-to-top
// found before that address point (the RTTI pointer is the class's own at
// every address point of its group), and open checks each against this
// program's group: within the symbol, the class's RTTI pointer before it,
// the same offset-to-top (require_same_address_points). Tokens a version 1
// table did not record are checked at relink, where only the RTTI pointer
// can be.
//
// A symbol this executable does not have is relinked to a stand-in
// (missing_class.hpp): its objects load, and only using one through its
// vtable ends the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "types/missing_class.hpp"

namespace steppe::types {

class catalog;

// "_ZTV" + the mangled name of `type`: its vtable group.
std::string vtable_symbol_for(const std::type_info& type);
// "_ZTVN3geo6CircleE" -> "geo::Circle"; the symbol itself if it does not demangle.
std::string class_of_vtable(const std::string& vtable_symbol);
// "_ZTV" + the mangled name of the type whose vtable group holds `vptr`.
std::string vtable_symbol_of(const void* vptr);

// The run-time address of `symbol` in this process: the dynamic symbol table
// (shared libraries, -rdynamic), else the executable's own symbol table. 0 if
// neither has it (a stripped executable without -rdynamic).
std::uintptr_t resolve_symbol(const std::string& symbol);
// True if the executable has no symbol table (it was stripped), so that
// resolve_symbol finds only dynamic symbols.
bool executable_is_stripped();

// The primary address point of dynamic class `type`, whose objects are
// `object_size` bytes: the value of the vptr at offset 0 of a complete
// object. 0 if the vtable group is not found or does not look as expected.
std::uintptr_t primary_address_point(const std::type_info& type, std::size_t object_size);

// The store's vtable symbols, by token index, with their addresses here.
class vtable_table {
public:
    // Token index of `symbol`, adding it (and resolving it) if new.
    std::uint32_t index_of(const std::string& symbol);
    // The same without adding: `absent` if new. Safe while other threads
    // call address() (nothing moves).
    static constexpr std::uint32_t absent = ~std::uint32_t{0};
    std::uint32_t find(const std::string& symbol) const;
    // Tells the table where `symbol` is when resolve_symbol cannot (a vptr of
    // a freshly constructed object is proof).
    void note_address(const std::string& symbol, std::uintptr_t address);
    std::size_t size() const noexcept { return names_.size(); }
    const std::string& name(std::uint32_t i) const { return names_.at(i); }
    // 0 when unresolved. Async-signal-safe (no allocation) for i < size().
    std::uintptr_t address(std::uint32_t i) const noexcept { return i < groups_.size() ? groups_[i].address : 0; }
    // Records that a token of symbol `i` was made at `offset`, where this
    // program's group has `offset_to_top` before it.
    void note_address_point(std::uint32_t i, std::uint32_t offset, std::int64_t offset_to_top);
    bool knows_address_point(std::uint32_t i, std::uint32_t offset) const;
    // Symbols and address points recorded: it grows when the table learns.
    std::size_t learned() const noexcept { return names_.size() + address_points_; }

    // Gives every symbol resolve_symbol did not find a stand-in, whose
    // message names store `store`; `hook` runs before a stand-in ends the
    // process. Called at open, after decode.
    void stand_in_for_missing(const std::string& store, void (*hook)(const char*));
    // Throws steppe::error(type_mismatch) if the store at `store` holds
    // objects of a class (an entry of `stored`) whose vtable this program has
    // but whose layout it never noted (types::declare): its virtual functions
    // would read the store's objects under a layout nobody compared. Called at
    // open, after decode.
    void require_noted_classes(const catalog& stored, const std::string& store) const;
    // Throws steppe::error(type_mismatch) if a recorded token of a symbol
    // this program has is not the same address point here: not one at all,
    // or one with another offset-to-top. Called at open, after decode.
    void require_same_address_points(const std::string& store) const;
    // The vptr for `token` (index << 32 | offset): the point in the symbol's
    // vtable, else in its stand-in; 0 if the token names neither (an index
    // past the table, an offset a stand-in cannot hold) or names a symbol
    // this program has at an offset that is not an address point of its
    // group here (moved_address_point). Async-signal-safe.
    std::uintptr_t relink(std::uint64_t token) const noexcept;
    // True if `token` names a symbol this program has at an offset that is
    // no address point of the class's group here. Async-signal-safe.
    bool moved_address_point(std::uint64_t token) const noexcept;
    // The token of a vptr that points into one of the table's stand-ins.
    // Does some class of the table have a stand-in (stand_in_for_missing)?
    bool has_stand_ins() const noexcept { return missing_ != nullptr; }
    std::optional<std::uint64_t> stand_in_token(std::uintptr_t vptr) const noexcept {
        return missing_ ? missing_->token_of(vptr) : std::nullopt;
    }

    // Version 2: u32 0xFFFFFFFF, u32 version (2), u32 count, then per
    // symbol: u32 length, bytes, u32 address point count, per address point
    // (by offset): u32 offset, i64 offset-to-top. Version 1 (read too) is
    // u32 count, then per symbol: u32 length, bytes; its count is never
    // 0xFFFFFFFF (that many symbols would take 32 GiB). Validated by decode
    // (errc::corrupt), which resolves every symbol.
    std::vector<std::byte> encode() const;
    static vtable_table decode(std::span<const std::byte> bytes);

private:
    // Where a symbol's vtable group is in this program. size and rtti are 0
    // when unknown (an address noted from an object: a stripped executable),
    // and then its tokens are not checked.
    struct group {
        std::uintptr_t address = 0;
        std::size_t size = 0;
        std::uintptr_t rtti = 0;  // the class's type_info, before every address point
        // Does the group here have an address point at `offset`? Async-signal-safe.
        bool has_address_point(std::uint32_t offset) const noexcept;
        std::int64_t offset_to_top(std::uint32_t offset) const noexcept;
    };
    static group find_group(const std::string& symbol);

    std::vector<std::string> names_;
    std::vector<group> groups_;
    // Per symbol: offset -> offset-to-top of each token made of it.
    std::vector<std::map<std::uint32_t, std::int64_t>> points_;
    std::size_t address_points_ = 0;
    // The stand-ins of the symbols missing at open (null if none), shared by
    // the copies of the table (page_engine's committed and live states).
    std::shared_ptr<missing_classes> missing_;
    std::unordered_map<std::string, std::uint32_t> index_;
};

}  // namespace steppe::types
