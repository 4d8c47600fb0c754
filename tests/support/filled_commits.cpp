#include "support/filled_commits.hpp"

#include <string>
#include <vector>

namespace steppe::test {

void commit_filled(storage::storage& s, std::uint8_t txn, std::uint64_t pages) {
    std::vector<std::byte> image(storage::page_size, std::byte{txn});
    std::vector<storage::page_image> images;
    for (std::uint64_t p = 0; p < pages; ++p) images.push_back({p, image.data()});
    storage::meta_bytes meta{};
    meta[0] = std::byte{txn};
    s.commit(images, meta);
}

std::string filled_problem(const storage::storage& s, std::uint8_t txn) {
    if (std::uint8_t(s.txn_seq()) != txn) return "at commit " + std::to_string(s.txn_seq()) + ", not " + std::to_string(txn);
    if (s.meta()[0] != std::byte{txn}) return "the meta is commit " + std::to_string(int(s.meta()[0])) + "'s";
    std::vector<std::byte> page(storage::page_size);
    for (std::uint64_t p = 0; p < s.page_count(); ++p) {
        s.read_page(p, page.data());
        for (std::byte b : page)
            if (b != std::byte{txn})
                return "page " + std::to_string(p) + " holds commit " + std::to_string(int(b)) + "'s bytes";
    }
    return "";
}

}  // namespace steppe::test
