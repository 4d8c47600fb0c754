// steppe::allocator<T> — a stateless standard allocator whose memory lives in
// a store, so the real libstdc++ containers persist:
//
//   auto store = steppe::store::open("x.db");
//   auto* names = store.root<steppe::vector<steppe::string>>("names");
//   names->emplace_back("Ada");          // element array and string buffer in the store
//   store.commit();
//
// Where it allocates follows the container: an allocator that lives in a
// store (inside a container there, or inside an object a container there
// holds) allocates in that store, whichever store is current. An allocator
// outside every store (a container on the stack or the heap) allocates in
// the calling thread's *current* store: the most recently opened one on this
// thread, or the one a steppe::use_store scope names. libstdc++ also
// allocates through copies of a container's allocator on the stack (a
// deque's map, a hash table's buckets, the new buffer of vector::assign or
// shrink_to_fit); such a copy allocates where the allocator it was copied
// from would. A copy of a whole container starts afresh
// (select_on_container_copy_construction): a container copied to the stack
// uses the current store. Memory is returned to whichever open store it came
// from. With no store to allocate in, allocate throws errc::invalid_argument.
//
// A container built on the stack and then moved into a stored one keeps the
// memory it allocated in the current store: construct elements in place
// (emplace_back, emplace, try_emplace) when the current store may be
// another. Such memory makes the commit fail with transient_pointer.
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
// Zeroed memory for `count` objects of `layout` for the allocator object at
// `allocator`: in the open store holding it, else (for a copy) the store
// holding the allocator it was copied from, else the current store.
void* allocate_for(const void* allocator, const types::layout& layout, std::size_t count);
// Bookkeeping of allocator objects on this thread, so a copy on the stack
// allocates where its origin would (no lookup here: it is done at
// allocation, and only for allocators outside every store). Addresses are
// passed as integers: they are identities, never read through, and a pointer
// to a just-constructed empty object makes GCC -O2 warn maybe-uninitialized.
void note_allocator_made(std::uintptr_t allocator) noexcept;
void note_allocator_copied(std::uintptr_t allocator, std::uintptr_t from) noexcept;
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
    // Each constructor also notes T (layout.hpp, types::declare): a container a
    // program only reads still has its node types compared with the store's at open.
    allocator() noexcept {
        static_cast<void>(types::detail::noted<T>);
        detail::note_allocator_made(reinterpret_cast<std::uintptr_t>(this));
    }
    allocator(const allocator& other) noexcept {
        static_cast<void>(types::detail::noted<T>);
        detail::note_allocator_copied(reinterpret_cast<std::uintptr_t>(this), reinterpret_cast<std::uintptr_t>(&other));
    }
    template <class U>
    allocator(const allocator<U>& other) noexcept {
        static_cast<void>(types::detail::noted<T>);
        detail::note_allocator_copied(reinterpret_cast<std::uintptr_t>(this), reinterpret_cast<std::uintptr_t>(&other));
    }
    allocator& operator=(const allocator&) noexcept = default;  // stateless: nothing to follow
    // A container's copy does not follow the original's store.
    allocator select_on_container_copy_construction() const noexcept { return allocator(); }
    T* allocate(std::size_t n) { return static_cast<T*>(detail::allocate_for(this, types::layout_of<T>(), n)); }
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
