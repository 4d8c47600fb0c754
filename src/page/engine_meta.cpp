// The page engine's own metadata: the pages of its blobs (system_pages) and
// the heap a meta pins (load_heap). Layout: page/engine_format.hpp.
#include "page/engine_meta.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>

#include "common/sigsafe.hpp"
#include "storage/checksum.hpp"

namespace steppe::page {

storage::page_source system_pages(heap& h) {
    return {[&h](std::uint32_t owner, std::uint64_t index) { return h.allocate_system_page(owner, index); },
            [&h](storage::page_no page) { h.free_system_page(page); }};
}

namespace {
// The storage's newest committed image of a metadata page (the snapshot's,
// for a reader). Async-signal-safe: a fault may bring a group back.
bool read_descriptor_page(const void* context, std::uint64_t page, std::byte* out, char* why,
                          std::size_t why_size) noexcept {
    storage::read_failure failure;
    if (static_cast<const storage::storage*>(context)->read_page_nothrow(page, out, &failure)) return true;
    common::fixed_message(why, why_size) << failure.message;
    return false;
}
}  // namespace

namespace {
std::string kind_name(const heap::page_desc& d) {
    switch (d.kind()) {
    case heap::page_kind::free: return "a free page";
    case heap::page_kind::small: return "a page of small objects";
    case heap::page_kind::large_head:
    case heap::page_kind::large_tail: return "a page of a large object";
    case heap::page_kind::system:
        return d.owner() == heap::heap_owner ? "a page of the heap's metadata"
                                             : "a system page of owner " + std::to_string(d.owner());
    default: return "a page the storage layer reserves";
    }
}
}  // namespace

// M1 (engine_meta.hpp).
std::vector<std::string> blob_chain_findings(const heap& h, std::uint64_t storage_pages,
                                             std::initializer_list<blob_chain> chains) {
    std::vector<std::string> out;
    if (storage_pages > h.page_count())
        out.push_back("the storage holds " + std::to_string(storage_pages) + " pages but the heap describes only " +
                      std::to_string(h.page_count()) + " (its root's page count is short)");
    for (const blob_chain& c : chains)
        for (std::size_t i = 0; i < c.pages.size(); ++i) {
            const std::uint64_t p = c.pages[i];
            const heap::page_desc* d = h.describe(p);
            const std::string where = "page " + std::to_string(p) + " (page " + std::to_string(i) + " of the " +
                                      c.what + "'s chain, owner " + std::to_string(c.owner) + ")";
            if (!d)
                out.push_back(where + " lies past the heap's " + std::to_string(h.page_count()) + " pages");
            else if (d->kind() != heap::page_kind::system || d->owner() != c.owner)
                out.push_back(where + " is " + kind_name(*d) + " in the heap's descriptors, so a commit may "
                              "hand it out and overwrite the " + c.what);
        }
    return out;
}

heap_detail::descriptor_source descriptors_from(const storage::storage& files) noexcept {
    return {&read_descriptor_page, &files};
}

std::unique_ptr<heap> load_heap(const storage::storage& files, const engine_meta& meta,
                                std::uint64_t keep_descriptor_bytes) {
    if (std::all_of(std::begin(meta.heap), std::end(meta.heap),
                    [](std::byte b) { return b == std::byte{0}; }))
        return std::make_unique<heap>(1);  // page 0 stays unused: address 0 is null
    heap_root root = heap_root::from_bytes(meta.heap);
    std::vector<std::byte> buf(storage::page_size);
    heap::descriptor_paging paging;
    if (keep_descriptor_bytes != 0) paging = {descriptors_from(files), keep_descriptor_bytes};
    return std::make_unique<heap>(heap::decode(
        root,
        [&](std::uint64_t page) {
            files.read_page(page, buf.data());
            return std::span<const std::byte>(buf);
        },
        [&](std::uint64_t page) { files.prefetch(page); }, paging));
}

}  // namespace steppe::page
