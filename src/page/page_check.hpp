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
// root's type. find_root<T> checks the root's type against T; only this
// ties that type to the object the root names.
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

// M2 for root `name`: empty if it holds, else what breaks it.
std::string root_finding(const heap& h, const types::catalog& catalog, const std::string& name,
                         const root_entry& e);

}  // namespace steppe::page
