// Checkers store::check (page_engine::check) runs on the committed state,
// beside the heap's audit (H1-H8), M1 (engine_meta.hpp) and S1
// (stored_pointer.hpp).
//
// Invariant (Z1): free memory of a data page reads as zeros in its committed
// image: a small page's free chunks (pager::free zeroes a freed chunk, and
// the page is written whole; new pages are installed zero-filled) and a large
// object's last page past its elements (installed zero-filled, never written
// by a program that keeps to its object). A program reads a free chunk as
// zeros (guarantees.md, on stored pointers). Nonzero bytes there are a live object
// the descriptors call free (an allocation bit cleared) or the elements a
// shortened element count left outside the object, which are then neither
// swizzled nor kept by compaction.
//
// Invariant (M2): a root names the start of an element of an allocated
// chunk whose type is the root's, or a member of that element of the
// root's type (inside an array member, or a member whose type the catalog
// does not hold, the check cannot tell and lets it be). find_root<T> checks
// the root's type against T; only this ties that type to the object the
// root names.
//
// Invariant (E1): a data page's element size is its type's size in the
// catalog (make allocates every object at its layout's size), and a small
// page's size class is one heap::allocate gives some count of such elements
// at the class's own alignment. The swizzler and check find a page's
// pointers by its element size, and compaction places chunks by both
// (count_for_class): a page breaking E1 had its pointers read at the wrong
// offsets, or was refused only by compaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/roots.hpp"
#include "heap/heap.hpp"
#include "types/types.hpp"

namespace steppe::page {

// Z1 for data page `page` (its committed image): one finding per free chunk
// or large tail with a nonzero byte, prefixed with `prefix`.
void check_free_bytes(const heap& h, std::uint64_t page, const std::byte* image, const std::string& prefix,
                      std::vector<std::string>& findings);

// An element count heap::allocate puts in size class `cls` at that class's
// own alignment (so no smaller class qualifies), if there is one (E1).
std::optional<std::size_t> count_for_class(std::uint32_t elem_size, std::size_t cls);

// E1 for data page `page`: a finding, prefixed with `prefix`, if it breaks it.
void check_page_shape(const heap::page_desc& d, std::uint64_t page, const types::catalog& catalog,
                      const std::string& prefix, std::vector<std::string>& findings);

// M2 for root `name`: empty if it holds, else what breaks it.
std::string root_finding(const heap& h, const types::catalog& catalog, const std::string& name,
                         const root_entry& e);

}  // namespace steppe::page
