#include "page/page_check.hpp"

#include <algorithm>
#include <optional>

#include "storage/storage.hpp"

namespace steppe::page {

namespace {
constexpr std::uint64_t page_bytes = storage::page_size;

// The first nonzero byte of [from, to) of `image`, or `to`.
std::uint64_t first_nonzero(const std::byte* image, std::uint64_t from, std::uint64_t to) {
    return static_cast<std::uint64_t>(
        std::find_if(image + from, image + to, [](std::byte b) { return b != std::byte{0}; }) - image);
}

void note_nonzero(std::uint64_t page, std::uint64_t at, const std::string& where, const std::string& prefix,
                  std::vector<std::string>& findings) {
    findings.push_back(prefix + "page " + std::to_string(page) + ": " + where + " holds a nonzero byte at offset " +
                       std::to_string(at) + ", where free memory is zeros (Z1): the heap's descriptors call free "
                       "memory an object left (an allocation bit cleared, or an element count lowered)");
}

const types::layout* named(const types::catalog& catalog, const std::string& name) {
    for (const types::layout& l : catalog.entries())
        if (l.name == name) return &l;
    return nullptr;
}

// Can an object of layout `l` hold one of type `want` at `offset`: itself
// at 0, or a member there, at any depth the catalog has the members' types
// of. Where it cannot tell, it says yes: inside an array member (the
// catalog keeps no element type to step by) or a member or base whose type
// the catalog does not hold (a type the store never made or named a root
// of). Saying no there refused healthy roots (`&s->counters[3]`, a member
// of a second base): a tester's finding.
bool holds_at(const types::catalog& catalog, const types::layout& l, std::uint64_t offset, const std::string& want,
              int depth = 0) {
    if (offset == 0 && l.name == want) return true;
    constexpr int deepest = 16;  // a catalog cannot nest a type in itself; this bounds a damaged one
    for (const types::field& f : l.fields) {
        if (offset < f.offset || offset >= std::uint64_t{f.offset} + f.size) continue;
        if (offset == f.offset && f.type == want) return true;
        if (f.kind == types::field_kind::array) return true;
        if (f.kind != types::field_kind::nested && f.kind != types::field_kind::base) continue;
        const types::layout* inner = named(catalog, f.type);
        if (!inner) return true;
        if (depth < deepest && holds_at(catalog, *inner, offset - f.offset, want, depth + 1)) return true;
    }
    return false;
}
}  // namespace

// M2 (page_check.hpp).
std::string root_finding(const heap& h, const types::catalog& catalog, const std::string& name,
                         const root_entry& e) {
    const std::optional<heap::chunk_info> c = h.find_chunk(e.address);
    if (!c)
        return "root '" + name + "' points to " + std::to_string(e.address) + ", which is not an allocated object";
    if (c->type >= catalog.size() || e.type >= catalog.size()) return {};  // validate() refuses these at open
    const types::layout& holder = catalog.at(c->type);
    const types::layout& type = catalog.at(e.type);
    const std::uint64_t offset = (e.address - c->addr) % c->elem_size;
    if (holds_at(catalog, holder, offset, type.name)) return {};
    return "root '" + name + "' names a " + type.name + " at " + std::to_string(e.address) + " (page " +
           std::to_string(e.address / page_bytes) + "), but the object there is a " + holder.name +
           ", which holds no " + type.name + " at offset " + std::to_string(offset) + " of its " +
           std::to_string(c->elem_size) + " bytes (M2): the roots table or the page's descriptor is damaged, and "
           "find_root would return the wrong object";
}

std::optional<std::size_t> count_for_class(std::uint32_t elem_size, std::size_t cls) {
    for (std::size_t n = 1; n * elem_size <= heap::class_size(cls); ++n)
        if (heap::size_class_for(n * elem_size, heap::class_alignment(cls)) == cls) return n;
    return std::nullopt;
}

// E1 (page_check.hpp). A large tail repeats its head's shape (H5).
void check_page_shape(const heap::page_desc& d, std::uint64_t page, const types::catalog& catalog,
                      const std::string& prefix, std::vector<std::string>& findings) {
    if (d.kind() == heap::page_kind::large_tail || d.type() >= catalog.size()) return;
    const types::layout& l = catalog.at(d.type());
    std::string broken;
    if (l.size != 0 && d.elem_size() != l.size)
        broken = "its elements are " + std::to_string(d.elem_size()) + " bytes, but its type " + l.name + " is " +
                 std::to_string(l.size);
    else if (d.kind() == heap::page_kind::small && !count_for_class(d.elem_size(), d.size_class()))
        broken = "its elements of " + std::to_string(d.elem_size()) + " bytes cannot be in its chunks of " +
                 std::to_string(d.chunk_size()) + " (no allocation makes that size class for them)";
    if (!broken.empty())
        findings.push_back(prefix + "page " + std::to_string(page) + ": " + broken +
                           " (E1): its descriptor is damaged, so its objects and pointers are read at the wrong "
                           "offsets, and compaction refuses the store");
}

// Z1 (page_check.hpp).
void check_free_bytes(const heap& h, std::uint64_t page, const std::byte* image, const std::string& prefix,
                      std::vector<std::string>& findings) {
    const heap::page_desc& d = *h.describe(page);
    if (d.kind() == heap::page_kind::small) {
        const std::uint32_t size = d.chunk_size();
        for (std::uint32_t i = 0; i < d.chunk_capacity(); ++i) {
            if (d.chunk_allocated(i)) continue;
            const std::uint64_t at = first_nonzero(image, std::uint64_t{i} * size, std::uint64_t{i + 1} * size);
            if (at < std::uint64_t{i + 1} * size)
                note_nonzero(page, at, "free chunk " + std::to_string(i), prefix, findings);
        }
        return;
    }
    const std::optional<heap::chunk_info> c = h.find_chunk(page * page_bytes);
    if (!c || !c->large) return;
    const std::uint64_t end = c->addr + std::uint64_t{c->elem_size} * c->elem_count;
    if (end / page_bytes != page || end % page_bytes == 0) return;  // not the run's last page, or a full one
    const std::uint64_t at = first_nonzero(image, end % page_bytes, page_bytes);
    if (at < page_bytes)
        note_nonzero(page, at, "the last page of the large object at page " + std::to_string(c->addr / page_bytes) +
                                   " (" + std::to_string(c->elem_count) + " elements of " +
                                   std::to_string(c->elem_size) + " bytes), past its elements,",
                     prefix, findings);
}

}  // namespace steppe::page
