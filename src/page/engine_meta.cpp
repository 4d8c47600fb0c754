// The page engine's own metadata: the roots codec (encode_roots,
// decode_roots), blob chains (read_blob, write_blob, blob_page_crc) and the
// heap a meta pins (load_heap). Layout: page/engine_format.hpp.
#include "page/engine_meta.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>

#include "common/bytes.hpp"
#include "storage/checksum.hpp"

namespace steppe::page {

namespace {
std::uint32_t blob_page_crc(blob_page_header h, const std::byte* payload) {
    h.crc = 0;
    return storage::crc32c(storage::crc32c(0, &h, sizeof h), payload, blob_payload);
}
}  // namespace

std::vector<std::byte> encode_roots(const root_table& roots) {
    common::byte_writer w;
    w.put(static_cast<std::uint32_t>(roots.size()));
    for (const auto& [name, e] : roots) {
        w.put(name);
        w.put(e.type);
        w.put(e.address);
    }
    return w.take();
}

root_table decode_roots(std::span<const std::byte> in, const std::string& where) {
    root_table roots;
    common::byte_reader r(in, where + ": the roots table");
    for (auto count = r.get<std::uint32_t>(); count > 0; --count) {
        std::string name = r.get_string();
        root_entry e;
        e.type = r.get<std::uint32_t>();
        e.address = r.get<std::uint64_t>();
        roots[name] = e;
    }
    r.expect_end();
    return roots;
}

std::vector<std::byte> read_blob(const storage::storage& files, const blob_ref& ref, std::uint32_t owner,
                                 const char* what, std::vector<std::uint64_t>& pages) {
    std::vector<std::byte> out;
    pages.clear();
    std::vector<std::byte> buf(storage::page_size);
    std::uint64_t page = ref.first_page;
    auto fail = [&](const std::string& why) {
        return error(errc::corrupt, files.path() + ": the " + what + " (page " + std::to_string(page) +
                                        ") is damaged: " + why);
    };
    for (std::uint32_t i = 0; i < ref.pages; ++i) {
        if (page == 0 || page >= files.page_count()) throw fail("its chain leaves the store");
        files.read_page(page, buf.data());
        blob_page_header h;
        std::memcpy(&h, buf.data(), sizeof h);
        if (h.magic != blob_magic || h.owner != owner || h.index != i || h.used > blob_payload ||
            h.crc != blob_page_crc(h, buf.data() + sizeof h))
            throw fail("bad page header or checksum");
        pages.push_back(page);
        out.insert(out.end(), buf.begin() + sizeof h, buf.begin() + static_cast<long>(sizeof h + h.used));
        page = h.next;
    }
    if (out.size() != ref.length || storage::crc32c(out) != ref.crc) throw fail("its length or checksum differs");
    return out;
}

blob_ref write_blob(heap& h, std::span<const std::byte> bytes, std::uint32_t owner, std::vector<std::uint64_t>& pages,
                    std::deque<std::array<std::byte, storage::page_size>>& buffers,
                    std::vector<storage::page_image>& images) {
    std::size_t n = std::max<std::size_t>(1, (bytes.size() + blob_payload - 1) / blob_payload);
    while (pages.size() < n) pages.push_back(h.allocate_system_page(owner, pages.size()));
    while (pages.size() > n) {
        h.free_system_page(pages.back());
        pages.pop_back();
    }
    for (std::size_t i = 0; i < n; ++i) {
        auto& page = buffers.emplace_back();
        page.fill(std::byte{0});
        std::size_t used = std::min(blob_payload, bytes.size() - std::min(bytes.size(), i * blob_payload));
        blob_page_header hdr{blob_magic, owner, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(used),
                             i + 1 < n ? pages[i + 1] : 0, 0, 0};
        if (used) std::memcpy(page.data() + sizeof hdr, bytes.data() + i * blob_payload, used);
        hdr.crc = blob_page_crc(hdr, page.data() + sizeof hdr);
        std::memcpy(page.data(), &hdr, sizeof hdr);
        images.push_back({pages[i], page.data()});
    }
    return {pages[0], bytes.size(), storage::crc32c(bytes), static_cast<std::uint32_t>(n)};
}

std::unique_ptr<heap> load_heap(const storage::storage& files, const engine_meta& meta) {
    if (std::all_of(std::begin(meta.heap), std::end(meta.heap),
                    [](std::byte b) { return b == std::byte{0}; }))
        return std::make_unique<heap>(1);  // page 0 stays unused: address 0 is null
    heap_root root = heap_root::from_bytes(meta.heap);
    std::vector<std::byte> buf(storage::page_size);
    return std::make_unique<heap>(heap::decode(root, [&](std::uint64_t page) {
        files.read_page(page, buf.data());
        return std::span<const std::byte>(buf);
    }));
}

}  // namespace steppe::page
