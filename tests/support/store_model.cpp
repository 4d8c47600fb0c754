#include "support/store_model.hpp"

#include <cstring>
#include <vector>

namespace steppe::test {
namespace {

std::vector<std::uint64_t> pages_of(std::uint64_t txn) {
    std::size_t count = txn % 10 == 0 ? 24 : 1 + txn % 5;  // every tenth commit is large
    std::vector<std::uint64_t> pages;
    for (std::size_t j = 0; j < count; ++j) {
        std::uint64_t p = 1 + (txn * 7 + j * 13) % workload::pages;
        bool seen = false;
        for (auto q : pages) seen |= q == p;
        if (!seen) pages.push_back(p);
    }
    return pages;
}

// Two of three commits name their txn in the first 256 bytes only, so
// rewriting a page changes a few words and the log holds it as a
// difference (wal_format.hpp); the third rewrites the whole page.
void fill(std::byte* page, std::uint64_t txn, std::uint64_t p) {
    const std::size_t named = txn % 3 == 0 ? storage::page_size : 256;
    for (std::size_t i = 0; i < storage::page_size; i += 16) {
        std::uint64_t words[2] = {i < named ? txn : p, p * 1000003 + i};
        std::memcpy(page + i, words, 16);
    }
}

}  // namespace

void workload::run_one(storage::storage& s, std::uint64_t txn, bool spill) {
    auto pages = pages_of(txn);
    std::vector<std::byte> images(pages.size() * storage::page_size);
    std::vector<storage::page_image> writes;
    for (std::size_t i = 0; i < pages.size(); ++i) {
        fill(images.data() + i * storage::page_size, txn, pages[i]);
        writes.push_back({pages[i], images.data() + i * storage::page_size});
    }
    storage::meta_bytes meta{};
    std::memcpy(meta.data(), &txn, sizeof txn);
    const std::size_t spilled = spill ? writes.size() / 2 : 0;
    if (spilled) s.spill({writes.data(), spilled});
    s.commit({writes.data() + spilled, writes.size() - spilled}, meta);
}

void workload::run(storage::storage& s, std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t t = first; t <= last; ++t) run_one(s, t);
}

std::uint64_t workload::committed_txn(const storage::storage& s) {
    std::uint64_t txn;
    std::memcpy(&txn, s.meta().data(), sizeof txn);
    return txn;
}

std::string workload::verify(const storage::storage& s) {
    std::uint64_t txn = committed_txn(s);
    std::vector<std::uint64_t> writer(pages + 1, 0);
    for (std::uint64_t t = 1; t <= txn; ++t)
        for (auto p : pages_of(t)) writer[p] = t;
    std::vector<std::byte> expected(storage::page_size), actual(storage::page_size);
    for (std::uint64_t p = 1; p <= pages; ++p) {
        if (writer[p] == 0) {
            if (p < s.page_count()) {
                s.read_page(p, actual.data());
                for (auto b : actual)
                    if (b != std::byte{0}) return "page " + std::to_string(p) + " should be zero";
            }
            continue;
        }
        fill(expected.data(), writer[p], p);
        s.read_page(p, actual.data());
        if (expected != actual) {
            std::uint64_t got;
            std::memcpy(&got, actual.data(), sizeof got);
            return "at txn " + std::to_string(txn) + " page " + std::to_string(p) + " should be from txn " +
                   std::to_string(writer[p]) + " but holds txn " + std::to_string(got);
        }
    }
    return {};
}

}  // namespace steppe::test
