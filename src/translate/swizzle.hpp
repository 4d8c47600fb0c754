// steppe::translate — swizzling (persistent -> virtual, at fault time) and
// unswizzling (virtual -> persistent, at commit) of the pointers in one page.
//
// Persistent pointer encoding (a 64-bit word in a stored page):
//   0                       null
//   page * 4096 + offset    a pointer into persistent page `page` (>= 1)
//   end_tag | (a + 1)       a one-past-the-end pointer of the unit whose last
//                           byte is persistent address a: it points at the
//                           unit's guard page in memory, and must come back
//                           there, not into whatever page follows in the file.
//
// Which words of a page are pointers follows from the page's layout: small
// pages hold allocated chunks of one type (free chunks are never touched),
// large objects are arrays whose elements may straddle page boundaries.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "translate/page_map.hpp"

namespace steppe::translate {

inline constexpr std::uint64_t end_tag = std::uint64_t{1} << 63;

// The pointer layout of one stored type, as the swizzler needs it.
struct type_shape {
    std::string name;
    std::uint32_t size = 0;
    std::vector<std::uint32_t> pointers;  // sorted byte offsets of pointer fields in one element
    std::vector<std::uint32_t> vptrs;     // sorted byte offsets of vtable pointers in one element
    // The type's members and bases as messages name them (", in field 2
    // 'next' (Node*)", types::field_context), made in normal context so that
    // the fault handler can name the field at an offset without allocating.
    struct field {
        std::uint32_t offset = 0, size = 0;
        std::string context;
    };
    std::vector<field> fields;  // by offset

    // The context of the field holding byte `offset` of an element, or "".
    // No allocation: usable in the fault handler.
    const char* field_context(std::uint32_t offset) const noexcept {
        for (std::size_t i = fields.size(); i-- > 0;)
            if (fields[i].offset <= offset && offset < std::uint64_t{fields[i].offset} + fields[i].size)
                return fields[i].context.c_str();
        return "";
    }
};

// What the swizzler needs to know about one persistent page.
struct page_layout {
    enum class kind { opaque, small, large } what = kind::opaque;
    const type_shape* type = nullptr;
    std::uint32_t elem_size = 0;
    // small pages
    std::uint32_t chunk_size = 0;
    const std::uint64_t* bitmap = nullptr;  // 4 words: bit i = chunk i allocated
    // large objects
    std::uint64_t offset_in_object = 0;  // of this page's first byte
    std::uint64_t elem_count = 0;
};

// Calls f(offset_in_page, field_offset) for every word of the page that lies
// at one of `fields` (byte offsets within an element) of an allocated element.
// No allocation: usable in the fault handler (with a non-throwing f). Only
// words within the page: a descriptor whose element size is smaller than
// its type's (damage check names, E1) put the last element's fields past
// the page, and the swizzler and check read and wrote beyond its buffer (ASan).
template <class F>
void for_each_slot(const page_layout& l, const std::vector<std::uint32_t>& fields, F&& f) {
    if (l.what == page_layout::kind::opaque || fields.empty() || l.elem_size == 0) return;
    if (l.what == page_layout::kind::small) {
        if (l.chunk_size == 0) return;
        std::uint32_t per_chunk = l.chunk_size / l.elem_size;
        for (std::uint32_t chunk = 0; chunk < page_size / l.chunk_size; ++chunk) {
            if (!((l.bitmap[chunk / 64] >> (chunk % 64)) & 1)) continue;
            for (std::uint32_t e = 0; e < per_chunk; ++e)
                for (std::uint32_t field : fields) {
                    const std::uint32_t at = chunk * l.chunk_size + e * l.elem_size + field;
                    if (at + sizeof(std::uint64_t) <= page_size) f(at, field);
                }
        }
        return;
    }
    std::uint64_t begin = l.offset_in_object, end = begin + page_size;
    std::uint64_t last = std::min<std::uint64_t>(l.elem_count, (end + l.elem_size - 1) / l.elem_size);
    for (std::uint64_t e = begin / l.elem_size; e < last; ++e) {
        for (std::uint32_t field : fields) {
            std::uint64_t at = e * l.elem_size + field;
            if (at >= begin && at + sizeof(std::uint64_t) <= end) f(static_cast<std::size_t>(at - begin), field);
        }
    }
}

template <class F>
void for_each_pointer(const page_layout& l, F&& f) {
    if (l.type) for_each_slot(l, l.type->pointers, f);
}
template <class F>
void for_each_vptr(const page_layout& l, F&& f) {
    if (l.type) for_each_slot(l, l.type->vptrs, f);
}

// Virtual -> persistent. Returns false if `v` points outside the store's
// mapped units (transient memory, a guard interior, a retired unit).
bool to_persistent(const page_map& map, std::uintptr_t v, std::uint64_t& out) noexcept;

}  // namespace steppe::translate
