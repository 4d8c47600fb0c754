#include "page/stored_pointer.hpp"

#include <cstring>

namespace steppe::page {

void describe_aim(common::fixed_message& m, std::uint64_t word, const pointer_aim& aim, const heap& h) noexcept {
    m << "holds " << common::in_hex{word} << ", which aims ";
    if (aim.off_boundary) {
        m << "one past the end of a unit but not at a page boundary (page " << aim.page << ")";
        return;
    }
    switch (aim.what) {
    case heap::place::object: m << "into an allocated object of page " << aim.page; return;
    case heap::place::beyond: m << "beyond the store's " << h.page_count() << " pages (page " << aim.page << ")"; return;
    case heap::place::reserved: m << "at page " << aim.page << ", which the storage layer reserves"; return;
    case heap::place::free_page: m << "at a free page (page " << aim.page << ")"; return;
    case heap::place::heap_metadata: m << "at heap metadata page " << aim.page; return;
    case heap::place::system_page: m << "at store metadata page " << aim.page << " (type catalog or roots)"; return;
    case heap::place::free_chunk:
        m << "inside page " << aim.page << " but not in an allocated object (a free chunk)";
        return;
    case heap::place::past_chunks:
        m << "inside page " << aim.page << " but not in an allocated object (past its last chunk)";
        return;
    case heap::place::past_object:
        m << "inside page " << aim.page << " but not in an allocated object (past the end of its large object)";
        return;
    }
}

void describe_field(common::fixed_message& m, std::size_t at, std::uint32_t field,
                    const translate::type_shape* type) noexcept {
    m << "the pointer at offset " << at;
    if (!type) return;
    m << " (offset " << field << " in type " << type->name.c_str() << type->field_context(field) << ")";
}

void check_pointers(const heap& h, const translate::page_layout& layout, std::uint64_t page,
                    const std::byte* image, const std::string& prefix, std::vector<std::string>& findings) {
    translate::for_each_pointer(layout, [&](std::size_t at, std::uint32_t field) {
        std::uint64_t word;
        std::memcpy(&word, image + at, sizeof word);
        if (word == 0) return;
        const pointer_aim aim = aim_of(h, word);
        if (aim.admitted()) return;
        char buf[512];
        common::fixed_message m(buf, sizeof buf);
        m << "page " << page << ": ";
        describe_field(m, at, field, layout.type);
        m << " ";
        describe_aim(m, word, aim, h);
        findings.push_back(prefix + buf);
    });
}

}  // namespace steppe::page
