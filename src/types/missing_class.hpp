// Stand-ins for the vtables of classes this executable lacks (docs/types.md,
// "Classes this program lacks"). A store may hold objects of a class whose
// vtable group `_ZTV...` this executable does not have or cannot find (the
// class has no key function and nothing here constructs one, its object file
// was not linked, the executable is stripped). Their pages still load: each
// of their vtable pointers is relinked into the class's stand-in, at the
// token's offset, so that
//   - every virtual function slot holds a trap that ends the process with a
//     message naming the class, the cause and the fix;
//   - the word before each address point in use is the RTTI pointer of a
//     type_info of the stand-in's own ("steppe: missing class geo::Circle"),
//     whose dynamic_cast hook ends the process with the same message, and
//     the word before that, offset-to-top, is 0;
//   - commit turns a vptr inside a stand-in back into the token it came from,
//     so a program that lacks the class writes such objects back unchanged.
// The store's open reserves address space for them and builds their names
// and type_infos; the fault path makes a stand-in at the first relink into
// it (mprotect, fill its slots), so a class whose objects are never loaded
// costs no memory. That and the traps (write(2), _exit) are
// async-signal-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace steppe::types {

class missing_classes {
public:
    // The group's bytes a stand-in covers: address points (token offsets) in
    // [16, size), and the virtual slots after them up to `size`.
    static constexpr std::size_t size = 64 * 1024;

    // Stand-ins for symbols[i] where it is not empty (by the index of the
    // store's vtable table; empty where this executable has the symbol; at
    // least one is not), for
    // store `store`; `hook` (may be null) gets the message before the
    // process ends. Throws system errors (mmap).
    missing_classes(const std::vector<std::string>& symbols, const std::string& store, void (*hook)(const char*));
    ~missing_classes();
    missing_classes(const missing_classes&) = delete;
    missing_classes& operator=(const missing_classes&) = delete;

    // The vptr that stands for `offset` into group `index`, its RTTI and
    // offset-to-top words set; 0 if `index` has no stand-in, `offset` cannot
    // be an address point, or the stand-in could not be made (mprotect
    // failed). Async-signal-safe.
    std::uintptr_t address_point(std::uint32_t index, std::uint32_t offset) noexcept;
    // The token (index << 32 | offset) of a vptr into one of the stand-ins.
    std::optional<std::uint64_t> token_of(std::uintptr_t vptr) const noexcept;

    struct stand_in;  // one class's (missing_class.cpp); public for its traps

private:
    std::string store_;
    void (*hook_)(const char*);
    const char *cause_, *fix_;  // why the executable lacks the symbols, what to do (the same for all)
    std::vector<std::unique_ptr<stand_in>> by_index_;  // null where the symbol was found
    std::vector<stand_in*> by_slot_;                   // in the order of their slots in region_
    std::byte* region_ = nullptr;                      // per stand-in: `size` bytes, a guard page
};

}  // namespace steppe::types
