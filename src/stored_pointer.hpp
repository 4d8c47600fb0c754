// Stored pointers are validated where they enter: what a pointer word of a
// data page aims at, for the fault path (swizzling), store::check and
// to_pointer alike.
//
// Invariant (S1): every non-null pointer word of a committed data page aims
// inside an allocated object of a data page, or exactly one past its end, or
// at memory a destroyed object left behind:
//   * a plain word a: the byte at a lies in an allocated object (a small
//     chunk whose bitmap bit is set, or the elements of a large object), or
//     a is not page-aligned and the byte at a - 1 does (one past the end
//     inside the same page: std::vector's end and end-of-storage);
//   * an end-tagged word (translate/swizzle.hpp) end_tag | a: a is
//     page-aligned and the byte at a - 1, the last of its unit, lies in an
//     allocated object (one past the end of a unit, which maps to its guard);
//   * dangling: the byte aimed at (a, or a - 1 for an end-tagged word) lies
//     in a free chunk or a free page. An object destroyed while a page that
//     is not written again still points at it leaves such a word: a deque's
//     map keeps the blocks pop_front freed, a vector's spare capacity the
//     pointers it held, a program its own stale pointers. They cannot be told
//     from crafted ones, so they are accepted: a word into a free page is
//     swizzled to a page that is never mapped, one into a free chunk to the
//     (zeroed) chunk.
// Anything else (heap or store metadata, the storage layer's pages, a small
// page's tail past its last chunk, a large run past its object, beyond the
// store, an end-tagged word off a page boundary) no sequence of store calls
// writes, so it is damage: the fault handler ends the process naming the
// page, the offset, the word and what it aims at, and store::check (`steppe
// check`) reports it the same way.
// The unswizzler writes S1 words for every pointer a program can form
// without undefined behaviour (pager::unswizzle_into stores a pointer into a
// retired range as null). Checked by aim_of() in the fault handler for
// every pointer it swizzles, and by check_pointers() for every pointer of
// every data page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "heap/heap.hpp"
#include "storage/fixed_message.hpp"
#include "translate/swizzle.hpp"

namespace steppe {

struct pointer_aim {
    heap::place what = heap::place::object;
    std::uint64_t page = 0;                  // the page aimed into
    bool off_boundary = false;               // an end-tagged word that is not page-aligned
    bool ok() const noexcept { return what == heap::place::object && !off_boundary; }
    bool dangling() const noexcept {
        return !off_boundary && (what == heap::place::free_chunk || what == heap::place::free_page);
    }
    bool admitted() const noexcept { return ok() || dangling(); }  // S1 holds for this word
};

// What the non-null stored word `word` aims at in heap `h`. O(1), no
// allocation, async-signal-safe.
pointer_aim aim_of(const heap& h, std::uint64_t word) noexcept;

// Appends "holds 0x..., which aims at <what>" (no allocation).
void describe_aim(storage::fixed_message& m, std::uint64_t word, const pointer_aim& aim, const heap& h) noexcept;

// Appends "the pointer at offset 40 (offset 8 in type T)" (no allocation).
void describe_field(storage::fixed_message& m, std::size_t at, std::uint32_t field,
                    const translate::type_shape* type) noexcept;

// Appends `v` as 0x... (no allocation).
void append_hex(storage::fixed_message& m, std::uint64_t v) noexcept;

// store::check's part: one finding, prefixed with `prefix`, for every pointer
// of data page `page` (its stored image, laid out as `layout`) that breaks S1.
void check_pointers(const heap& h, const translate::page_layout& layout, std::uint64_t page,
                    const std::byte* image, const std::string& prefix, std::vector<std::string>& findings);

}  // namespace steppe
