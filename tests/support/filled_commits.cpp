#include "support/filled_commits.hpp"

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

}  // namespace steppe::test
