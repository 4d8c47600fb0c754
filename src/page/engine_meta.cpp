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
