#include "types/missing_class.hpp"

#include <cxxabi.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "common/page_size.hpp"
#include "common/sigsafe.hpp"
#include "common/system_error.hpp"
#include "types/vtables.hpp"

namespace steppe::types {

// The traps. A virtual call passes `this` in the first argument register,
// unless the function returns a class in memory (then it is the second), so
// a trap cannot reliably learn which object it was called for; instead each
// live stand-in owns one of trap_count traps, and trap<I> knows its owner.
// A process with more stand-ins than that at once gives the rest a trap that
// cannot name the class.
namespace {

constexpr std::size_t trap_count = 1024;
constexpr std::size_t no_trap = trap_count;
std::array<std::atomic<const missing_class*>, trap_count> trap_owners{};

template <std::size_t I>
[[noreturn]] void trap() noexcept {
    trap_owners[I].load(std::memory_order_acquire)->end_process();
}

[[noreturn]] void anonymous_trap() noexcept {
    common::fatal_exit(
        "steppe: fatal: a virtual function was called on an object of a class this executable has no vtable for. "
        "More than 1024 such classes are in the open stores, so steppe cannot say which one; the process ends. "
        "See docs/types.md, \"Classes this program lacks\".\n");
}

using trap_function = void (*)() noexcept;

template <std::size_t... I>
constexpr std::array<trap_function, sizeof...(I)> make_traps(std::index_sequence<I...>) {
    return {&trap<I>...};
}
constexpr std::array<trap_function, trap_count> traps = make_traps(std::make_index_sequence<trap_count>{});

std::size_t claim_trap(const missing_class* owner) noexcept {
    for (std::size_t i = 0; i < trap_count; ++i) {
        const missing_class* expected = nullptr;
        if (trap_owners[i].compare_exchange_strong(expected, owner, std::memory_order_acq_rel)) return i;
    }
    return no_trap;
}

// "_ZTVN3geo6CircleE" -> "geo::Circle" (a bare type's mangling such as
// "N3geo6CircleE" does not demangle on its own); the symbol if it does not
// demangle.
std::string class_of(const std::string& vtable_symbol) {
    int status = 0;
    char* text = abi::__cxa_demangle(vtable_symbol.c_str(), nullptr, nullptr, &status);
    const std::string prefix = "vtable for ";
    std::string name = status == 0 && text ? text : vtable_symbol;
    std::free(text);
    return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// Why this executable has no vtable of a class, and what to do about it.
std::pair<std::string, std::string> cause_and_fix() {
    if (executable_is_stripped())
        return {"the executable is stripped, and steppe finds the vtables an executable defines by name in its "
                "symbol table (they are not dynamic symbols)",
                "do not strip the executable, or link it with -rdynamic, or put the class in a shared library"};
    return {"no code linked into this program defines it: either the class has no key function (all its virtual "
            "functions are defined in the class), so the compiler emits its vtable only where an object is "
            "constructed and this program constructs none, or the code that defines the class is not linked in "
            "(its object file in a static library, which the linker drops when the program refers to nothing in "
            "it, or a shared library the program does not load)",
            "give the class a key function (a virtual function defined outside the class) in a source file that "
            "every program using the class links, and make sure that code is linked (refer to the class from the "
            "program, or link the static library with -Wl,--whole-archive)"};
}

}  // namespace

// The stand-in's RTTI. Its name starts with '*', so that type_info compares
// it by address alone (equal to no other type's) and name() drops the '*'.
// __dynamic_cast asks the complete object's type to find the target
// (__do_dyncast) unless the target is that type itself, which no program can
// name: there the process ends, as at a virtual call.
class missing_class::rtti final : public __cxxabiv1::__class_type_info {
public:
    rtti(const char* name, const missing_class& owner) : __class_type_info(name), owner_(owner) {}

    bool __do_dyncast(std::ptrdiff_t, __sub_kind, const __class_type_info*, const void*, const __class_type_info*,
                      const void*, __dyncast_result&) const override {
        owner_.end_process();
    }

private:
    const missing_class& owner_;
};

missing_class::missing_class(const std::string& symbol, const std::string& store, void (*hook)(const char*))
    : hook_(hook) {
    const std::string name = class_of(symbol);
    auto [cause, fix] = cause_and_fix();
    message_ = "steppe: fatal: an object of class " + name + " from store " + store +
               " was used through its vtable (a virtual function call or a dynamic_cast), but this executable has "
               "no vtable for the class (symbol " + symbol + "): " + cause +
               ". Its objects load and their members can be read and written, but nothing virtual can run without "
               "the class's code, so the process ends. To fix it, " + fix + ".\n";
    type_name_ = "*steppe: missing class " + name;
    rtti_ = std::make_unique<rtti>(type_name_.c_str(), *this);

    const std::size_t mapped = size + common::page_size;
    void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) common::throw_system_error("mmap", errno, "types: a stand-in for vtable " + symbol);
    // The guard page: a virtual slot past the stand-in faults rather than
    // jumping through whatever follows it.
    if (::mprotect(static_cast<std::byte*>(p) + size, common::page_size, PROT_NONE) != 0) {
        const int err = errno;
        ::munmap(p, mapped);
        common::throw_system_error("mprotect", err, "types: a stand-in for vtable " + symbol);
    }
    words_ = static_cast<std::uintptr_t*>(p);
    trap_ = claim_trap(this);
    const auto target = reinterpret_cast<std::uintptr_t>(trap_ == no_trap ? &anonymous_trap : traps[trap_]);
    for (std::size_t i = 0; i < size / sizeof(std::uintptr_t); ++i) words_[i] = target;
}

missing_class::~missing_class() {
    if (trap_ != no_trap) trap_owners[trap_].store(nullptr, std::memory_order_release);
    ::munmap(words_, size + common::page_size);
}

std::uintptr_t missing_class::address_point(std::uint32_t offset) const noexcept {
    // Itanium: offset-to-top and the RTTI pointer are the two words before
    // an address point, so none lies before byte 16 of a group.
    if (offset < 2 * sizeof(std::uintptr_t) || offset >= size || offset % sizeof(std::uintptr_t) != 0) return 0;
    const std::size_t at = offset / sizeof(std::uintptr_t);
    // Other threads may be relinking the same address point: they store the
    // same values. The two words may be virtual slots of another address
    // point of the group only where the real group has the same two words
    // there, so no slot a real call would use is overwritten.
    std::atomic_ref<std::uintptr_t>(words_[at - 2]).store(0, std::memory_order_relaxed);
    std::atomic_ref<std::uintptr_t>(words_[at - 1])
        .store(reinterpret_cast<std::uintptr_t>(rtti_.get()), std::memory_order_relaxed);
    return reinterpret_cast<std::uintptr_t>(words_ + at);
}

std::optional<std::uint32_t> missing_class::offset_of(std::uintptr_t vptr) const noexcept {
    const auto base = reinterpret_cast<std::uintptr_t>(words_);
    if (vptr < base || vptr >= base + size) return std::nullopt;
    return static_cast<std::uint32_t>(vptr - base);
}

void missing_class::end_process() const noexcept {
    if (hook_) hook_(message_.c_str());
    common::fatal_exit(message_.c_str());
}

}  // namespace steppe::types
