// How many pages a fault's fetch brings, for a store in PostgreSQL (the
// pg_store's fetch thread), from what the pages fetched so far were worth.
//
// A page fetched beside the one a fault asked for costs its share of the
// fetch (`page_ns`: the server's read, the transfer, the check and the
// caches' copies, ~20 µs on the development VM) and, if it is ever used,
// saves the round trip its own fault would have made (`trip_ns`: the time
// to a fetch's first row, 0.5 ms and more over a network, ~0.1 ms on a Unix
// socket). So a larger cluster pays while the share of such pages used *at
// any later time* exceeds page_ns / trip_ns. That is the difference from a
// file's read-around (read_around.hpp), which counts only uses inside its
// last 8 clusters, soon after their read: random lookups over a store of
// 10,000 pages use a sixth of the pages fetched, but late, which that
// window never sees (docs/benchmarks.md, "Clusters judged by what their
// pages were worth").
//
// Both costs are measured on the fetches themselves (moving averages); the
// share over the last few thousand pages fetched. A fetched page is marked
// in a hashed bitmap until its first use (two pages sharing a bit blur the
// count a little). Judged after every fault's fetch: the cluster doubles
// while the pages were worth twice their cost, halves below half of it,
// between min_pages and the limit (powers of two; clusters are aligned).
// used() is lock-free and async-signal-safe (faulting threads); the rest is
// the fetch thread's.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>

#include "storage/storage.hpp"

namespace steppe::storage {

class fetch_worth {
public:
    static constexpr std::uint64_t start_pages = 32, min_pages = 8, max_pages = 2048;
    static constexpr std::uint64_t judge_after = 256;  // pages fetched before the first judgement
    static constexpr std::uint64_t kept = 8192;        // the share is of about the last this many

    // The largest cluster, in pages (rounded down to a power of two, within
    // [start_pages, max_pages]); at start_pages the cluster never changes.
    void set_limit(std::uint64_t pages) noexcept {
        limit_ = std::bit_floor(std::clamp(pages, start_pages, max_pages));
    }
    std::uint64_t limit() const noexcept { return limit_; }
    std::uint64_t pages() const noexcept { return pages_; }

    // The aligned cluster around `page`: [first, first + pages()).
    page_no cluster_first(page_no page) const noexcept { return page & ~(pages_ - 1); }

    // A page a fault's fetch brought beside the one it asked for.
    void fetched(page_no page) noexcept {
        marks_[slot(page)].fetch_or(bit(page), std::memory_order_relaxed);
        fetched_.fetch_add(1, std::memory_order_relaxed);
    }
    // A read found `page` in a cache: counted if it was fetched beside
    // another and not used before.
    void used(page_no page) noexcept {
        if (marks_[slot(page)].fetch_and(~bit(page), std::memory_order_relaxed) & bit(page))
            used_.fetch_add(1, std::memory_order_relaxed);
    }

    // A fetch of `rows` rows: the first came `first_row_ns` after the
    // statement was sent, the last `rest_ns` after the first. The trip is
    // taken from small fetches only: the server sorts a range before its
    // first row (~1.3 µs a page), which a large cluster would count as trip.
    void timed(std::uint64_t rows, std::uint64_t first_row_ns, std::uint64_t rest_ns) noexcept {
        if (rows == 0) return;
        if (rows <= 64) trip_ns_ = trip_ns_ ? (3 * trip_ns_ + first_row_ns) / 4 : first_row_ns;
        if (rows >= 16) {
            const std::uint64_t per_row = rest_ns / (rows - 1);
            page_ns_ = page_ns_ ? (3 * page_ns_ + per_row) / 4 : per_row;
        }
    }

    // After a fault's fetch.
    void judge() noexcept {
        const std::uint64_t fetched = fetched_.load(std::memory_order_relaxed);
        const std::uint64_t used = used_.load(std::memory_order_relaxed);
        if (limit_ == start_pages || fetched < judge_after || page_ns_ == 0 || trip_ns_ == 0) return;
        const double worth_ns = double(used) / double(fetched) * double(trip_ns_);
        if (worth_ns > 2.0 * double(page_ns_))
            pages_ = std::min(pages_ * 2, limit_);
        else if (2.0 * worth_ns < double(page_ns_))
            pages_ = std::max(pages_ / 2, min_pages);
        if (fetched > kept) {  // racing used() only blurs the share
            fetched_.fetch_sub(fetched / 2, std::memory_order_relaxed);
            used_.fetch_sub(std::min(used / 2, used_.load(std::memory_order_relaxed)), std::memory_order_relaxed);
        }
    }

    std::uint64_t trip_ns() const noexcept { return trip_ns_; }
    std::uint64_t page_ns() const noexcept { return page_ns_; }

private:
    static constexpr std::uint64_t mark_words = 4096;  // 262,144 bits: 1 GiB of store before pages share
    static std::uint64_t slot(page_no page) noexcept { return (page / 64) % mark_words; }
    static std::uint64_t bit(page_no page) noexcept { return std::uint64_t{1} << (page % 64); }

    std::uint64_t limit_ = start_pages;
    std::uint64_t pages_ = start_pages;
    std::uint64_t trip_ns_ = 0, page_ns_ = 0;
    std::atomic<std::uint64_t> fetched_{0}, used_{0};
    std::atomic<std::uint64_t> marks_[mark_words] = {};
};

}  // namespace steppe::storage
