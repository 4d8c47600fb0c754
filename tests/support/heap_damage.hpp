// Damaging a page-engine store's heap metadata on purpose, with every
// checksum valid (as a bug or an attacker would): descriptors and the heap
// root are edited in place, then the metadata pages' checksums, the root's
// checksum over them and the meta are recomputed and written in one storage
// commit. Layout: src/heap/heap_format.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "heap/heap.hpp"
#include "page/engine_format.hpp"
#include "storage/storage.hpp"

namespace steppe::test {

class heap_metadata {
public:
    explicit heap_metadata(const std::string& store);
    heap_metadata(const heap_metadata&) = delete;
    heap_metadata& operator=(const heap_metadata&) = delete;

    const page::engine_meta& meta() const { return meta_; }
    std::uint64_t page_count() const { return root_.page_count; }
    // The 48 descriptor bytes of `page`.
    std::byte* descriptor(std::uint64_t page);
    // The heap describes only pages below `count`: the root's page count, the
    // last metadata page's descriptor count and slots. Keeps the metadata pages.
    void shrink_to(std::uint64_t count);
    // Writes the metadata pages and the meta, checksummed.
    void commit();

private:
    std::unique_ptr<storage::storage> files_;
    page::engine_meta meta_{};
    heap_root root_;
    std::vector<std::uint64_t> pages_;  // logical page of metadata page i
    std::vector<std::array<std::byte, storage::page_size>> images_;
};

}  // namespace steppe::test
