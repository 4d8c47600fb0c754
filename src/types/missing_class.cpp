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
#include "common/sparse_mapping.hpp"
#include "common/system_error.hpp"
#include "types/vtables.hpp"

namespace steppe::types {

namespace {

class rtti;

enum stand_in_state : std::uint32_t { unmade, making, made, failed };

}  // namespace

struct missing_classes::stand_in {
    const missing_classes& owner;
    std::uint32_t index;       // in the store's vtable table
    std::string symbol, name;  // "_ZTVN3geo6CircleE", "geo::Circle"
    std::string rtti_name;     // "*steppe: missing class geo::Circle"
    std::unique_ptr<rtti> type;
    std::uintptr_t* words;  // its `size` bytes in the owner's region
    std::atomic<std::uint32_t> state{unmade};
    std::size_t trap = 0;  // which trap its slots hold, once made

    bool make() noexcept;
    [[noreturn]] void end_process() const noexcept;
};

// The traps. A virtual call passes `this` in the first argument register,
// unless the function returns a class in memory (then it is the second), so
// a trap cannot reliably learn which object it was called for; instead each
// stand-in in use owns one of trap_count traps, and trap<I> knows its owner.
// A process with more stand-ins than that in use at once gives the rest a
// trap that cannot name the class.
namespace {

constexpr std::size_t trap_count = 1024;
constexpr std::size_t no_trap = trap_count;
std::array<std::atomic<const missing_classes::stand_in*>, trap_count> trap_owners{};

template <std::size_t I>
[[noreturn]] void trap() noexcept {
    trap_owners[I].load(std::memory_order_acquire)->end_process();
}

[[noreturn]] void anonymous_trap() noexcept {
    common::fatal_exit(
        "steppe: fatal: a virtual function was called on an object of a class this executable has no vtable for. "
        "More than 1024 such classes are in use in the open stores, so steppe cannot say which one; the process "
        "ends. See docs/types.md, \"Classes this program lacks\".\n");
}

using trap_function = void (*)() noexcept;

template <std::size_t... I>
constexpr std::array<trap_function, sizeof...(I)> make_traps(std::index_sequence<I...>) {
    return {&trap<I>...};
}
constexpr std::array<trap_function, trap_count> traps = make_traps(std::make_index_sequence<trap_count>{});

std::size_t claim_trap(const missing_classes::stand_in* owner) noexcept {
    for (std::size_t i = 0; i < trap_count; ++i) {
        const missing_classes::stand_in* expected = nullptr;
        if (trap_owners[i].compare_exchange_strong(expected, owner, std::memory_order_acq_rel)) return i;
    }
    return no_trap;
}

constexpr std::size_t stride = missing_classes::size + common::page_size;  // a guard page after each

// Why this executable has no vtable of a class, and what to do about it.
struct cause_and_fix {
    const char* cause;
    const char* fix;
};
cause_and_fix why_missing() {
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

// The stand-in's RTTI. Its name starts with '*', so that type_info compares
// it by address alone (equal to no other type's) and name() drops the '*'.
// __dynamic_cast asks the complete object's type to find the target
// (__do_dyncast) unless the target is that type itself, which no program can
// name: there the process ends, as at a virtual call.
class rtti final : public __cxxabiv1::__class_type_info {
public:
    rtti(const char* name, const missing_classes::stand_in& owner) : __class_type_info(name), owner_(owner) {}

    bool __do_dyncast(std::ptrdiff_t, __sub_kind, const __class_type_info*, const void*, const __class_type_info*,
                      const void*, __dyncast_result&) const override {
        owner_.end_process();
    }

private:
    const missing_classes::stand_in& owner_;
};

}  // namespace

missing_classes::missing_classes(const std::vector<std::string>& symbols, const std::string& store,
                                 void (*hook)(const char*))
    : store_(store), hook_(hook) {
    const cause_and_fix why = why_missing();
    cause_ = why.cause;
    fix_ = why.fix;
    by_index_.resize(symbols.size());
    for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (symbols[i].empty()) continue;
        std::unique_ptr<stand_in> s(
            new stand_in{*this, static_cast<std::uint32_t>(i), symbols[i], class_of_vtable(symbols[i]), {}, {}, nullptr});
        s->rtti_name = "*steppe: missing class " + s->name;
        s->type = std::make_unique<rtti>(s->rtti_name.c_str(), *s);
        by_slot_.push_back(s.get());
        by_index_[i] = std::move(s);
    }
    // Address space only (no access, no swap reserved): a stand-in gets its
    // memory when its first object loads.
    const std::size_t bytes = by_slot_.size() * stride;
    void* p = common::map_sparse(bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        common::throw_system_error("mmap", errno, "types: " + std::to_string(by_slot_.size()) +
                                                      " stand-ins for vtables this executable lacks");
    region_ = static_cast<std::byte*>(p);
    for (std::size_t slot = 0; slot < by_slot_.size(); ++slot)
        by_slot_[slot]->words = reinterpret_cast<std::uintptr_t*>(region_ + slot * stride);
}

missing_classes::~missing_classes() {
    for (stand_in* s : by_slot_)
        if (s->state.load(std::memory_order_acquire) == made && s->trap != no_trap)
            trap_owners[s->trap].store(nullptr, std::memory_order_release);
    ::munmap(region_, by_slot_.size() * stride);
}

// At the first relink into the stand-in (the fault path): the thread that
// gets to make it maps and fills it, others wait for it.
bool missing_classes::stand_in::make() noexcept {
    std::uint32_t seen = unmade;
    if (state.compare_exchange_strong(seen, making, std::memory_order_acquire)) {
        bool ok = ::mprotect(words, size, PROT_READ | PROT_WRITE) == 0;
        if (ok) {
            trap = claim_trap(this);
            const auto target = reinterpret_cast<std::uintptr_t>(trap == no_trap ? &anonymous_trap : traps[trap]);
            for (std::size_t i = 0; i < size / sizeof(std::uintptr_t); ++i) words[i] = target;
        }
        state.store(ok ? made : failed, std::memory_order_release);
        common::futex_wake_all(common::futex_word(state));
        return ok;
    }
    while ((seen = state.load(std::memory_order_acquire)) == making) common::futex_wait(common::futex_word(state), making);
    return seen == made;
}

std::uintptr_t missing_classes::address_point(std::uint32_t index, std::uint32_t offset) noexcept {
    // Itanium: offset-to-top and the RTTI pointer are the two words before
    // an address point, so none lies before byte 16 of a group.
    if (index >= by_index_.size() || !by_index_[index] || offset < 2 * sizeof(std::uintptr_t) || offset >= size ||
        offset % sizeof(std::uintptr_t) != 0)
        return 0;
    stand_in& s = *by_index_[index];
    if (!s.make()) return 0;
    const std::size_t at = offset / sizeof(std::uintptr_t);
    // Other threads may be relinking the same address point: they store the
    // same values. The two words may be virtual slots of another address
    // point of the group only where the real group has the same two words
    // there, so no slot a real call would use is overwritten.
    std::atomic_ref<std::uintptr_t>(s.words[at - 2]).store(0, std::memory_order_relaxed);
    std::atomic_ref<std::uintptr_t>(s.words[at - 1])
        .store(reinterpret_cast<std::uintptr_t>(s.type.get()), std::memory_order_relaxed);
    return reinterpret_cast<std::uintptr_t>(s.words + at);
}

std::optional<std::uint64_t> missing_classes::token_of(std::uintptr_t vptr) const noexcept {
    const auto base = reinterpret_cast<std::uintptr_t>(region_);
    if (vptr < base || vptr >= base + by_slot_.size() * stride || (vptr - base) % stride >= size) return std::nullopt;
    return (std::uint64_t{by_slot_[(vptr - base) / stride]->index} << 32) | (vptr - base) % stride;
}

void missing_classes::stand_in::end_process() const noexcept {
    static char buf[4096];
    common::fixed_message(buf, sizeof buf)
        << "steppe: fatal: an object of class " << name.c_str() << " from store " << owner.store_.c_str()
        << " was used through its vtable (a virtual function call or a dynamic_cast), but this executable has no "
           "vtable for the class (symbol "
        << symbol.c_str() << "): " << owner.cause_
        << ". Its objects load and their members can be read and written, but nothing virtual can run without "
           "the class's code, so the process ends. To fix it, "
        << owner.fix_ << ".\n";
    if (owner.hook_) owner.hook_(buf);
    common::fatal_exit(buf);
}

}  // namespace steppe::types
