// Stored pointers are validated where they enter: what a pointer word of a
// data page aims at, for the fault path (swizzling), store::check and
// to_pointer alike.
//
// Invariant (S1): every non-null pointer word of a committed data page aims
// inside an allocated object of a data page or exactly one past its end, or
// is dangling: it aims at memory that held one when the word was written.
//   * a plain word a: the byte at a lies in an allocated object (a small
//     chunk whose bitmap bit is set, or the elements of a large object), or
//     a is not page-aligned and the byte at a - 1 does (one past the end
//     inside the same page: std::vector's end and end-of-storage);
//   * an end-tagged word (translate/swizzle.hpp) end_tag | a: a is
//     page-aligned and the byte at a - 1, the last of its unit, lies in an
//     allocated object (one past the end of a unit, which maps to its guard);
//   * dangling: an object destroyed while a page that is not written again
//     still points at it leaves such a word (a deque's map keeps the blocks
//     pop_front freed, its blocks the buffers of the strings it popped, a
//     vector's spare capacity what it held). The freed memory may since be
//     a free chunk or page, or any part of a page reused in another role:
//     heap or store metadata, a small page of another size class (its tail
//     past the last chunk), another large object (past its elements). So a
//     word into any page the heap hands out is accepted; one into a free page
//     or a metadata page is swizzled to a page that is never mapped, one into
//     a data page to that page.
// No word aims at the storage layer's pages (never handed out), beyond the
// store (page_count never shrinks), or is end-tagged off a page boundary:
// that is damage, and the fault handler ends the process naming the page,
// the offset, the word and what it aims at; store::check (`steppe check`)
// reports it the same way.
// The unswizzler writes S1 words for every pointer a program can form
// without undefined behaviour (pager::unswizzle_into stores a pointer into a
// retired range or the dead page, or one past the end of either, as null). Checked by aim_of() in the fault handler for every
// pointer it swizzles, and by check_pointers() for every pointer of every
// data page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "heap/heap.hpp"
#include "common/sigsafe.hpp"
#include "translate/swizzle.hpp"

namespace steppe::page {

struct pointer_aim {
    heap::place what = heap::place::object;
    std::uint64_t page = 0;                  // the page aimed into
    bool off_boundary = false;               // an end-tagged word that is not page-aligned
    bool ok() const noexcept { return what == heap::place::object && !off_boundary; }
    bool dangling() const noexcept {
        return !ok() && !off_boundary && what != heap::place::beyond && what != heap::place::reserved;
    }
    bool admitted() const noexcept { return ok() || dangling(); }  // S1 holds for this word
};

// What the non-null stored word `word` aims at in heap `h`. O(1), no
// allocation, async-signal-safe; inline, as it runs for every pointer the
// fault handler swizzles.
inline pointer_aim aim_of(const heap& h, std::uint64_t word) noexcept {
    constexpr std::uint64_t page_bytes = translate::page_size;
    const std::uint64_t a = word & ~translate::end_tag;
    if (word & translate::end_tag) {
        // The unswizzler makes these only from a guard page's first byte.
        if (a == 0 || a % page_bytes != 0) return {h.place_of(a), a / page_bytes, true};
        return {h.place_of(a - 1), (a - 1) / page_bytes, false};
    }
    const pointer_aim at{h.place_of(a), a / page_bytes, false};
    if (at.ok() || a % page_bytes == 0 || h.place_of(a - 1) != heap::place::object) return at;
    return {heap::place::object, a / page_bytes, false};  // one past the end inside the page
}

// aim_of(h, word).admitted() without reading a descriptor, and the page the
// word aims into (a - 1's for an end-tagged word). Of everything aim_of
// tells apart, S1 refuses only an end tag off a page boundary, a page beyond
// the store and the storage layer's pages, and those are exactly the pages
// below reserved_pages (H1 in heap.hpp). The fault handler asks this for
// every pointer it swizzles: descriptors that are out of memory
// (desc_table.hpp) come back only for the targets it must reserve.
inline bool admitted(const heap& h, std::uint64_t word, std::uint64_t& page) noexcept {
    const std::uint64_t a = word & ~translate::end_tag;
    std::uint64_t byte = a;
    if (word & translate::end_tag) {
        if (a == 0 || a % translate::page_size != 0) return false;
        byte = a - 1;
    }
    page = byte / translate::page_size;
    return page >= h.reserved_pages() && page < h.page_count();
}

// Appends "holds 0x..., which aims at <what>" (no allocation).
void describe_aim(common::fixed_message& m, std::uint64_t word, const pointer_aim& aim, const heap& h) noexcept;

// Appends "the pointer at offset 40 (offset 8 in type T, in field 2 'next'
// (T*))" (no allocation: the field's words were made with the shape).
void describe_field(common::fixed_message& m, std::size_t at, std::uint32_t field,
                    const translate::type_shape* type) noexcept;


// store::check's part: one finding, prefixed with `prefix`, for every pointer
// of data page `page` (its stored image, laid out as `layout`) that breaks S1.
void check_pointers(const heap& h, const translate::page_layout& layout, std::uint64_t page,
                    const std::byte* image, const std::string& prefix, std::vector<std::string>& findings);

}  // namespace steppe::page
