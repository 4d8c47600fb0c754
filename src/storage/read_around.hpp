// How much a page read that misses the page cache brings in around the page
// (file_store::read_main_page), from what the reads so far were worth. (A
// store in PostgreSQL judges its fetches otherwise: fetch_worth.hpp.)
//
// The kernel reads around a page fault of a mapped file by the device's
// read-ahead (8 MiB on the development disk), which is why the mmap peers
// read a cold store in a few large reads while steppe, reading 128 KiB
// clusters, waited for the disk once per cluster (OO1 large, cold
// traversal: 2-3x LMDB, the same bytes read). But the same read-around
// past memory reads megabytes for every random page, the cost the CIDR 2022
// mmap study measured. So the cluster is sized by its use: the last
// `recent` clusters are remembered, and every `window` misses the page
// reads that found their page cached inside one of them (hits; pages the
// page engine's own read-ahead brought in elsewhere do not count) are set
// against the pages those misses asked for. A cluster costs one seek plus
// its transfer: on the development disk a random 128 KiB read takes 0.8 ms
// and 8 MiB stream at ~440 MB/s (9 µs a page), so a page read around pays
// once one in ~90 is used. Used at least one in 32, the cluster doubles, up
// to the device's read-ahead (at most max_bytes); used less than one in
// 256, it halves, down to min_bytes.
// Lock-free, async-signal-safe;
// concurrent faults may race on the counts and the ring, which only blurs
// one judgement.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>

#include "common/memory_limit.hpp"
#include "common/page_size.hpp"

namespace steppe::storage {

class read_around {
public:
    static constexpr std::uint64_t start_bytes = 128 << 10, min_bytes = start_bytes, max_bytes = 8 << 20;
    static constexpr std::uint64_t window = 4, recent = 8;

    // `limit`: the largest cluster in bytes, as the device's read-ahead
    // (0: unknown, start_bytes is the limit), clamped to [start_bytes,
    // max_bytes] and rounded down to a power of two (clusters are aligned).
    explicit read_around(std::uint64_t limit = 0) noexcept { set_limit(limit); }
    // Before the first miss.
    void set_limit(std::uint64_t bytes) noexcept {
        limit_ = std::bit_floor(std::clamp(bytes ? bytes : start_bytes, start_bytes, max_bytes));
    }

    // Before the first miss: clusters start at the limit (a file that fits
    // in memory, read around as the kernel reads around a mapped file).
    void start_at_limit() noexcept { bytes_.store(limit_, std::memory_order_relaxed); }

    // How `bytes` of a file (a main file; a store's slots in the PostgreSQL
    // cache file) are read, decided at open from their size:
    // - no larger than `read_ahead` (the device's): true, and the caller asks
    //   for them whole now (WILLNEED; the kernel reads them while the open
    //   goes on), as a mapped file's first fault brings it for the mmap
    //   peers. OO1 small's cold traversal read 3 MB in 374 faults, a
    //   cluster at a time, in 7.9 ms; 3.6 ms once asked for at open;
    // - no larger than a sixteenth of the memory available: clusters start
    //   at the limit, as the kernel reads around a mapped file's faults, and
    //   shrink if what they bring goes unused. OO1 large (38 MB): cold
    //   lookup 68 -> 52 ms, warm insert + commit 4.6 -> 2.2 ms; cold insert
    //   28 -> 37 ms (its first faults wait for 8 MiB);
    // - larger: clusters start at start_bytes and grow by use, since
    //   read-ahead past memory costs random reads their throughput (the
    //   CIDR 2022 mmap study).
    // May throw bad_alloc (reading the memory available).
    bool plan(std::uint64_t bytes, std::uint64_t read_ahead) {
        if (bytes <= read_ahead) return true;
        if (bytes <= common::available_memory().available / 16) start_at_limit();
        return false;
    }

    // A page read found the page at file offset `offset` in the page cache.
    void hit(std::uint64_t offset) noexcept {
        for (const cluster& c : recent_) {
            if (offset - c.start.load(std::memory_order_relaxed) < c.bytes.load(std::memory_order_relaxed)) {
                hits_.fetch_add(1, std::memory_order_relaxed);
                return;
            }
        }
    }

    // A page read missed the page cache at file offset `offset`: where the
    // cluster to read starts and how long it is (a power of two, aligned, at
    // most limit()).
    struct range {
        std::uint64_t start, bytes;
    };
    range miss(std::uint64_t offset) noexcept {
        const std::uint64_t bytes = bytes_.load(std::memory_order_relaxed);
        const range r{offset & ~(bytes - 1), bytes};
        cluster& c = recent_[next_.fetch_add(1, std::memory_order_relaxed) % recent];
        c.bytes.store(0, std::memory_order_relaxed);  // no hit counts against a half-written entry
        c.start.store(r.start, std::memory_order_relaxed);
        c.bytes.store(r.bytes, std::memory_order_relaxed);
        asked_.fetch_add(bytes / common::page_size, std::memory_order_relaxed);
        if (misses_.fetch_add(1, std::memory_order_relaxed) % window == window - 1) judge();
        return r;
    }

    std::uint64_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
    std::uint64_t limit() const noexcept { return limit_; }

private:
    void judge() noexcept {
        const std::uint64_t hits = hits_.exchange(0, std::memory_order_relaxed);
        const std::uint64_t asked = asked_.exchange(0, std::memory_order_relaxed);
        std::uint64_t b = bytes_.load(std::memory_order_relaxed);
        if (hits * 32 >= asked) b = std::min(b * 2, limit_);
        else if (hits * 256 < asked) b = std::max(b / 2, min_bytes);
        bytes_.store(b, std::memory_order_relaxed);
    }

    std::uint64_t limit_ = start_bytes;
    std::atomic<std::uint64_t> bytes_{start_bytes};
    std::atomic<std::uint64_t> hits_{0}, asked_{0}, misses_{0};
    struct cluster {
        std::atomic<std::uint64_t> start{0}, bytes{0};
    };
    cluster recent_[recent];
    std::atomic<std::uint64_t> next_{0};
};

}  // namespace steppe::storage
