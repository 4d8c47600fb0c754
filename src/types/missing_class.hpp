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
// Everything is built when the store opens (vtable_table::stand_in_for_missing);
// the fault path only writes the two words before an address point, and the
// traps only write(2) and _exit: async-signal-safe both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace steppe::types {

class missing_class {
public:
    // The group's bytes a stand-in covers: address points (token offsets) in
    // [16, size), and the virtual slots after them up to `size`.
    static constexpr std::size_t size = 64 * 1024;

    // The stand-in for vtable group `symbol` of store `store`; `hook` (may be
    // null) gets the message before the process ends. Throws system errors
    // (mmap).
    missing_class(const std::string& symbol, const std::string& store, void (*hook)(const char*));
    ~missing_class();
    missing_class(const missing_class&) = delete;
    missing_class& operator=(const missing_class&) = delete;

    // The vptr that stands for `offset` into the group, its RTTI and
    // offset-to-top words set; 0 if `offset` cannot be an address point.
    // Async-signal-safe.
    std::uintptr_t address_point(std::uint32_t offset) const noexcept;
    // The offset into the group that `vptr` stands for, if it points into
    // this stand-in.
    std::optional<std::uint32_t> offset_of(std::uintptr_t vptr) const noexcept;

    // Runs the hook, writes the message and ends the process: what using
    // such an object through its vtable does.
    [[noreturn]] void end_process() const noexcept;

private:
    class rtti;
    std::uintptr_t* words_;  // mmap'd: `size` bytes of slots, then a guard page
    std::string message_, type_name_;
    std::unique_ptr<rtti> rtti_;
    void (*hook_)(const char*);
    std::size_t trap_;  // which trap its slots hold (missing_class.cpp)
};

}  // namespace steppe::types
