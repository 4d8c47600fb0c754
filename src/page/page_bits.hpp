// A bit per persistent page, set and tested lock-free (async-signal-safe: the
// fault handler and the evictors use them), in a NORESERVE mapping as large
// as the largest store, so only the words of pages near marked ones take
// memory. The pager keeps two: pages new and not in the log (R3), and pages
// with a read-ahead hint outstanding. They were a byte a page (4 MiB of an
// 8 GiB store's memory for the two); a bit is an eighth of that.
#pragma once

#include "common/sparse_mapping.hpp"

#include <atomic>
#include <cstdint>

namespace steppe::page {

class page_bits {
public:
    page_bits() = default;
    // Maps room for `pages` bits; mapped() is false when the mmap failed.
    explicit page_bits(std::uint64_t pages) noexcept : words_(bytes_for(pages) / 8) {}

    bool mapped() const noexcept { return words_.mapped(); }
    bool test(std::uint64_t page, std::memory_order order) const noexcept {
        return (words_[page / 64].load(order) & bit(page)) != 0;
    }
    // Sets or clears the page's bit; returns whether it was set.
    bool exchange(std::uint64_t page, bool value, std::memory_order order) noexcept {
        const std::uint64_t was = value ? words_[page / 64].fetch_or(bit(page), order)
                                        : words_[page / 64].fetch_and(~bit(page), order);
        return (was & bit(page)) != 0;
    }
    // What the bits of pages [0, pages) take once written.
    static std::uint64_t bytes_for(std::uint64_t pages) noexcept { return (pages + 63) / 64 * 8; }

private:
    static std::uint64_t bit(std::uint64_t page) noexcept { return std::uint64_t{1} << (page % 64); }
    common::sparse_array<std::atomic<std::uint64_t>> words_;
};

}  // namespace steppe::page
