// steppe::pref<T> — a persistent pointer translated at each use (Texas's
// mixed granularity, Kakkad 1997 §3.8; reference 002 §2.10).
//
//   struct Node { long key; steppe::pref<Node> next; };   // in a store
//   Node* n = store.make<Node>();
//   n->next = store.make<Node>();      // stores the target's persistent address
//   long k = n->next->key;             // translated through the page map now
//
// A raw pointer field is swizzled when its page faults in, which reserves
// address space for its target whether or not the program ever follows it:
// a page of a high-fan-out structure (an index) reserves hundreds of pages.
// A pref is one 64-bit word holding the target's persistent address (store
// page x 4096 + offset, 0 = null), described to the type layout as plain data,
// so the page engine never swizzles it: its target's page is reserved (and
// faulted in on first touch, a page at a time as for raw pointers) only when
// the pref is dereferenced. The price is a page-map lookup at every use.
// Nothing is ever written back into the pref (Texas rejected caching the
// translation in the field: it dirties the page).
//
// Which store translates it: the open store that holds the pref itself; a
// pref outside every store (a local copy) is translated by the calling
// thread's current store (the most recently opened one, or the one a
// steppe::use_store names), as steppe::allocator chooses. Errors
// (steppe::error):
//   - assignment from a T* that is in no open store, or in another store than
//     the one holding the pref: transient_pointer naming both;
//   - dereference with no store to translate it: invalid_argument;
//   - dereference of an address that names no object of the translating
//     store (a copy taken from another store, used with this one):
//     invalid_argument naming the store and what the address aims at.
// Equality compares persistent addresses (stable across runs), so prefs can
// key ordered containers without steppe::persistent_less.
#pragma once

#include <steppe/layout.hpp>

#include <compare>
#include <cstddef>
#include <cstdint>

namespace steppe {

namespace detail {
// The address of the object at persistent address `address` (non-zero) in
// the store that holds `slot`, else in the thread's current store; reserves
// its page as a swizzled pointer to it would. Throws as pref.hpp says.
void* pref_translate(const void* slot, std::uint64_t address);
// The persistent address of `target` (non-null) for a pref at `slot`.
std::uint64_t pref_address(const void* slot, const void* target);
}  // namespace detail

template <class T>
class pref {
public:
    pref() noexcept = default;
    pref(std::nullptr_t) noexcept {}
    pref(T* target) : address_(target ? detail::pref_address(this, target) : 0) {}
    pref(const pref&) noexcept = default;
    pref& operator=(const pref&) noexcept = default;
    pref& operator=(T* target) {
        address_ = target ? detail::pref_address(this, target) : 0;
        return *this;
    }
    pref& operator=(std::nullptr_t) noexcept {
        address_ = 0;
        return *this;
    }

    T* get() const { return address_ ? static_cast<T*>(detail::pref_translate(this, address_)) : nullptr; }
    T* operator->() const { return get(); }
    T& operator*() const { return *get(); }
    explicit operator bool() const noexcept { return address_ != 0; }

    // The target's persistent address (0 for null): the same in every run.
    std::uint64_t persistent_address() const noexcept { return address_; }

    friend bool operator==(const pref&, const pref&) noexcept = default;
    friend auto operator<=>(const pref&, const pref&) noexcept = default;
    friend bool operator==(const pref& p, std::nullptr_t) noexcept { return p.address_ == 0; }

    // One scalar word to the layout: the page engine copies it as it is.
    STEPPE_FIELDS(address_)

private:
    std::uint64_t address_ = 0;
};

}  // namespace steppe
