#include "support/heap_damage.hpp"

#include <cstring>

#include "storage/checksum.hpp"

namespace steppe::test {

namespace {
constexpr std::size_t descs_per_page = 84, desc_bytes = 48, first_slot = 32;
}

heap_metadata::heap_metadata(const std::string& store) : files_(storage::storage::open(store)) {
    std::memcpy(&meta_, files_->meta().data(), sizeof meta_);
    root_ = heap_root::from_bytes(std::span(meta_.heap, heap_root::size));
    std::uint64_t next = root_.first_meta_page;
    for (std::uint64_t i = 0; i < root_.meta_page_count; ++i) {
        pages_.push_back(next);
        files_->read_page(next, images_.emplace_back().data());
        std::memcpy(&next, images_.back().data() + 16, sizeof next);
    }
}

std::byte* heap_metadata::descriptor(std::uint64_t page) {
    return images_.at(page / descs_per_page).data() + first_slot + desc_bytes * (page % descs_per_page);
}

void heap_metadata::shrink_to(std::uint64_t count) {
    for (std::uint64_t p = count; p < root_.page_count; ++p) std::memset(descriptor(p), 0, desc_bytes);
    const auto in_last = static_cast<std::uint16_t>(count - descs_per_page * (images_.size() - 1));
    std::memcpy(images_.back().data() + 24, &in_last, sizeof in_last);
    root_.page_count = count;
}

void heap_metadata::commit() {
    std::vector<std::byte> crcs;
    std::vector<storage::page_image> images;
    for (std::size_t i = 0; i < images_.size(); ++i) {
        std::byte* image = images_[i].data();
        const std::uint32_t crc = storage::crc32c(std::span(image + 8, storage::page_size - 8));
        std::memcpy(image + 4, &crc, sizeof crc);
        crcs.insert(crcs.end(), image + 4, image + 8);
        images.push_back({pages_[i], image});
    }
    root_.pages_crc = storage::crc32c(crcs);
    const auto root = root_.to_bytes();
    std::memcpy(meta_.heap, root.data(), root.size());
    storage::meta_bytes raw = files_->meta();
    std::memcpy(raw.data(), &meta_, sizeof meta_);
    files_->commit(images, raw);
}

}  // namespace steppe::test
