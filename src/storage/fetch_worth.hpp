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
// until its first use, in a table of words of 32 marks tagged with which
// pages they are for (a page whose word another page's marks hold is
// forgotten: counted unused, never as another's use). Judged after every
// fault's fetch: the cluster doubles while the pages were worth twice their
// cost, halves below half of it, between min_pages and the limit (powers of
// two; clusters are aligned). used() is lock-free and async-signal-safe
// (faulting threads); the rest is the fetch thread's.
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
        std::atomic<std::uint64_t>& w = marks_[slot(page)];
        std::uint64_t seen = w.load(std::memory_order_relaxed);
        std::uint64_t want;
        do
            want = (seen >> 32 == tag(page) ? seen : tag(page) << 32) | bit(page);
        while (!w.compare_exchange_weak(seen, want, std::memory_order_relaxed));
        fetched_.fetch_add(1, std::memory_order_relaxed);
    }
    // A read found `page` in a cache: counted if it was fetched beside
    // another and not used before.
    void used(page_no page) noexcept {
        if (take(page)) used_.fetch_add(1, std::memory_order_relaxed);
    }
    // `page` came again, not beside a fault (its own fault's page, or a
    // hint's): the earlier fetch's mark is not a use to come.
    void forget(page_no page) noexcept { take(page); }

    // Fixes both costs, which timed() then leaves (for tests: a judgement
    // that does not depend on the machine's speed).
    void pin(std::uint64_t trip_ns, std::uint64_t page_ns) noexcept {
        pinned_.store(true, std::memory_order_relaxed);
        trip_ns_.store(trip_ns, std::memory_order_relaxed);
        page_ns_.store(page_ns, std::memory_order_relaxed);
    }

    // A fetch of `rows` rows: the first came `first_row_ns` after the
    // statement was sent, the last `rest_ns` after the first. The trip is
    // taken from small fetches only: the server sorts a range before its
    // first row (~1.3 µs a page), which a large cluster would count as trip.
    void timed(std::uint64_t rows, std::uint64_t first_row_ns, std::uint64_t rest_ns) noexcept {
        if (rows == 0 || pinned_.load(std::memory_order_relaxed)) return;
        if (rows <= 64) average(trip_ns_, first_row_ns);
        if (rows >= 16) average(page_ns_, rest_ns / (rows - 1));
    }

    // After a fault's fetch.
    void judge() noexcept {
        const std::uint64_t fetched = fetched_.load(std::memory_order_relaxed);
        const std::uint64_t used = used_.load(std::memory_order_relaxed);
        const double trip_ns = double(trip_ns_.load(std::memory_order_relaxed));
        const double page_ns = double(page_ns_.load(std::memory_order_relaxed));
        if (limit_ == start_pages || fetched < judge_after || page_ns == 0 || trip_ns == 0) return;
        const double worth_ns = double(used) / double(fetched) * trip_ns;
        if (worth_ns > 2.0 * page_ns)
            pages_ = std::min(pages_ * 2, limit_);
        else if (2.0 * worth_ns < page_ns)
            pages_ = std::max(pages_ / 2, min_pages);
        if (fetched > kept) {  // racing used() only blurs the share
            fetched_.fetch_sub(fetched / 2, std::memory_order_relaxed);
            used_.fetch_sub(used / 2, std::memory_order_relaxed);  // used_ only grows meanwhile
        }
    }

    std::uint64_t trip_ns() const noexcept { return trip_ns_.load(std::memory_order_relaxed); }
    std::uint64_t page_ns() const noexcept { return page_ns_.load(std::memory_order_relaxed); }

private:
    // 8,192 words of 32 marks: 1 GiB of store before pages share a word.
    static constexpr std::uint64_t mark_words = 8192, per_word = 32;
    static std::uint64_t slot(page_no page) noexcept { return (page / per_word) % mark_words; }
    static std::uint64_t tag(page_no page) noexcept { return (page / per_word / mark_words) & 0xffffffff; }
    static std::uint64_t bit(page_no page) noexcept { return std::uint64_t{1} << (page % per_word); }
    // A moving average: a quarter of each new sample (not over a pin()
    // made meanwhile: the exchange then fails).
    static void average(std::atomic<std::uint64_t>& avg, std::uint64_t sample) noexcept {
        std::uint64_t old = avg.load(std::memory_order_relaxed);
        avg.compare_exchange_strong(old, old ? (3 * old + sample) / 4 : sample, std::memory_order_relaxed);
    }
    // Clears page's mark; whether it was set.
    bool take(page_no page) noexcept {
        std::atomic<std::uint64_t>& w = marks_[slot(page)];
        std::uint64_t seen = w.load(std::memory_order_relaxed);
        while (seen >> 32 == tag(page) && (seen & bit(page)))
            if (w.compare_exchange_weak(seen, seen & ~bit(page), std::memory_order_relaxed)) return true;
        return false;
    }

    std::uint64_t limit_ = start_pages;
    std::uint64_t pages_ = start_pages;
    std::atomic<std::uint64_t> trip_ns_{0}, page_ns_{0};  // atomic only for pin(), from another thread
    std::atomic<bool> pinned_{false};
    std::atomic<std::uint64_t> fetched_{0}, used_{0};
    std::atomic<std::uint64_t> marks_[mark_words] = {};
};

}  // namespace steppe::storage
