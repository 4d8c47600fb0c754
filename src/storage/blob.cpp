// Blob chains: read_blob, write_blob (layout in blob.hpp).
#include "storage/blob.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>

#include "storage/checksum.hpp"

namespace steppe::storage {

namespace {
std::uint32_t blob_page_crc(blob_page_header h, const std::byte* payload) {
    h.crc = 0;
    return crc32c(crc32c(0, &h, sizeof h), payload, blob_payload);
}
}  // namespace

std::vector<std::byte> read_blob(const storage& files, const blob_ref& ref, std::uint32_t owner, const char* what,
                                 std::vector<page_no>& pages) {
    std::vector<std::byte> out;
    pages.clear();
    std::vector<std::byte> buf(page_size);
    page_no page = ref.first_page;
    auto fail = [&](const std::string& why) {
        return error(errc::corrupt, files.path() + ": the " + what + " (page " + std::to_string(page) +
                                        ") is damaged: " + why + "; run `steppe check` on the store");
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
    if (out.size() != ref.length || crc32c(out) != ref.crc) throw fail("its length or checksum differs");
    return out;
}

blob_ref write_blob(std::span<const std::byte> bytes, std::uint32_t owner, std::vector<page_no>& pages,
                    const page_source& source, std::deque<std::array<std::byte, page_size>>& buffers,
                    std::vector<page_image>& images) {
    std::size_t n = std::max<std::size_t>(1, (bytes.size() + blob_payload - 1) / blob_payload);
    while (pages.size() < n) pages.push_back(source.take(owner, pages.size()));
    while (pages.size() > n) {
        source.give_back(pages.back());
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
    return {pages[0], bytes.size(), crc32c(bytes), static_cast<std::uint32_t>(n)};
}

}  // namespace steppe::storage
