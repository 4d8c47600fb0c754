#include "support/damage.hpp"

#include <cstring>
#include <fstream>

#include "storage/storage.hpp"

namespace steppe::test {

void flip_byte(const std::string& file, std::uint64_t offset) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 0x40));
}

std::vector<std::uint64_t> node_pages(const std::string& store, long max_value) {
    struct node {
        long value;
        std::uint64_t next;
    };
    std::vector<std::uint64_t> pages;
    auto st = storage::storage::open(store);
    std::vector<std::byte> page(storage::page_size);
    for (std::uint64_t p = 1; p < st->page_count(); ++p) {
        st->read_page(p, page.data());
        node first[2];
        std::memcpy(first, page.data(), sizeof first);
        auto plausible = [&](const node& n) {
            return n.value >= 0 && n.value < max_value && n.next < st->page_count() * storage::page_size;
        };
        if (plausible(first[0]) && plausible(first[1]) && first[0].next) pages.push_back(p);
    }
    return pages;
}

void damage_pages(const std::string& store, const std::vector<std::uint64_t>& pages) {
    for (auto p : pages) flip_byte(store, storage::physical_page(p) * storage::page_size + 100);
}

}  // namespace steppe::test
