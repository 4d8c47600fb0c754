// steppe::allocator<T> — a stateless standard allocator whose memory lives in
// a store, so the real libstdc++ containers persist:
//
//   auto store = steppe::store::open("x.db");
//   auto* names = store.root<steppe::vector<steppe::string>>("names");
//   names->emplace_back("Ada");          // element array and string buffer in the store
//   store.commit();
//
// It allocates in the calling thread's *current* store: the most recently
// opened one on this thread, or the one a steppe::use_store scope names.
// Memory is returned to whichever open store it came from. With no current
// store, allocate throws errc::invalid_argument.
//
// The container's node and element types must have layouts (see layout.hpp);
// <steppe/containers.hpp> provides them for the libstdc++ containers.
#pragma once

#include <steppe/layout.hpp>

#include <cstddef>
#include <cstdint>

namespace steppe {

class store;

namespace detail {
// Zeroed memory for `count` objects of `layout` in the current store.
void* allocate_in_current(const types::layout& layout, std::size_t count);
// Frees memory from whichever open store holds it.
void deallocate_anywhere(void* object) noexcept;
// The persistent address of p if an open store holds it (stable across runs);
// otherwise p's own value with bit 63 set, so that every pointer still has
// one place in a total order. Null is 0.
std::uint64_t persistent_address_of(const void* p) noexcept;
}  // namespace detail

template <class T>
struct allocator {
    using value_type = T;
    // Each notes T (layout.hpp, types::declare): a container a program only
    // reads still has its node types compared with the store's at open.
    allocator() noexcept { static_cast<void>(types::detail::noted<T>); }
    template <class U>
    allocator(const allocator<U>&) noexcept { static_cast<void>(types::detail::noted<T>); }
    T* allocate(std::size_t n) { return static_cast<T*>(detail::allocate_in_current(types::layout_of<T>(), n)); }
    void deallocate(T* p, std::size_t) noexcept { detail::deallocate_anywhere(p); }
    friend bool operator==(const allocator&, const allocator&) noexcept { return true; }
};

// Makes `s` the current store of this thread for the scope's lifetime.
class use_store {
public:
    explicit use_store(store& s) noexcept;
    ~use_store();
    use_store(const use_store&) = delete;
    use_store& operator=(const use_store&) = delete;

private:
    void* previous_;
};

}  // namespace steppe
