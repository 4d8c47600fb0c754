// steppe::page::cooling — the cooling stage of eviction (docs/design.md,
// "Larger than memory"), as LeanStore and vmcache have one. An evictor that
// drops a clean page from the fault space keeps its bytes here a while: a
// touch meanwhile faults, and the fill puts the same bytes back (no read, no
// checksum, no swizzle) and the page is hot again; the pages nobody touched
// while cooling are the ones that leave memory. The oldest-first ring then
// acts as a second chance that knows what was used.
//
// A pool of `capacity` page-sized slots taken round-robin: the slot a page
// cools into held the oldest cooling page, which so leaves memory for good.
// Lock-free and async-signal-safe, because faulting threads cool pages
// (drop_oldest_clean) and rewarm them (fill_page): per persistent page, an
// entry names its slot; per slot, a word names its page, and a claim bit
// keeps other coolers off a slot whose bytes are being written or whose
// page's eviction is not decided yet. Each reuse of a slot bumps its
// generation, which the entry carries too, so a cooler that read a slot's
// word before others reused it cannot take the page that is in it now.
//
// (C1) Between operations (no cool or rewarm under way), every slot is free
//      or names a page whose entry names that slot back, and no slot is
//      claimed: a cooler publishes the slot's word before the entry and
//      clears the claim (settle) or frees the slot when it keeps the page; a
//      rewarm takes the entry before it frees the slot; a cooler reusing a
//      slot takes the entry of the page in it first, and skips the slot when
//      a rewarm took it. Checked by check_invariants(); what the page engine
//      promises of the pages in it (R7, R8) is in pager.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace steppe::page {

class cooling {
public:
    // `pages`: the largest persistent page number + 1 the entries cover;
    // `capacity` is taken between 1 and max_capacity.
    static constexpr std::size_t max_capacity = (std::size_t{1} << 20) - 1;
    cooling(std::size_t capacity, std::uint64_t pages);
    ~cooling();
    cooling(const cooling&) = delete;
    cooling& operator=(const cooling&) = delete;

    static constexpr std::size_t no_slot = ~std::size_t{0};
    // A slot for `page`, claimed and published: rewarm(page) finds it once
    // the page is missing, so call it while the page is still resident
    // (claimed by the evictor), write its bytes at bytes(slot) before the
    // page leaves, then settle(). no_slot when every slot it tried was busy.
    std::size_t claim(std::uint64_t page) noexcept;
    std::byte* bytes(std::size_t slot) const noexcept { return pool_ + slot * page_bytes; }
    // The page left (the slot keeps it cooling) or stayed (the slot is freed).
    void settle(std::size_t slot, std::uint64_t page, bool left) noexcept;
    // Fill path: copies the page's bytes to `out` and frees its slot; false
    // if it is not cooling.
    bool rewarm(std::uint64_t page, std::byte* out) noexcept;
    // Forgets every cooling page, while no other thread cools or rewarms.
    void clear() noexcept;

    std::uint64_t cooled() const noexcept { return cooled_.load(std::memory_order_relaxed); }
    std::uint64_t rewarmed() const noexcept { return rewarmed_.load(std::memory_order_relaxed); }
    // Memory its slots hold: those ever written (NORESERVE); all of them.
    std::uint64_t memory_bytes() const noexcept;
    std::uint64_t capacity_bytes() const noexcept { return capacity_ * page_bytes; }
    // For checkers, between operations: the cooling pages (persistent page
    // numbers), and C1, one line per finding.
    std::vector<std::uint64_t> pages() const;
    std::vector<std::string> check_invariants() const;

private:
    static constexpr std::size_t page_bytes = 4096;
    // A slot's word: its page + 1 (0: free) in the low 33 bits, its
    // generation above, and the claim bit on top.
    static constexpr std::uint64_t page_mask = (std::uint64_t{1} << 33) - 1, claimed = std::uint64_t{1} << 63;
    static constexpr int generation_shift = 33, slot_bits = 20;
    static constexpr std::uint32_t generation_mask = (1u << (32 - slot_bits)) - 1;
    static std::uint32_t generation(std::uint64_t word) noexcept {
        return static_cast<std::uint32_t>(word >> generation_shift) & generation_mask;
    }
    static std::uint64_t with_generation(std::uint32_t g) noexcept {
        return std::uint64_t{g & generation_mask} << generation_shift;
    }
    static std::uint32_t entry_of(std::uint32_t g, std::size_t slot) noexcept {
        return (g & generation_mask) << slot_bits | static_cast<std::uint32_t>(slot + 1);
    }
    static std::size_t slot_of(std::uint32_t entry) noexcept { return (entry & ((1u << slot_bits) - 1)) - 1; }
    bool take_slot(std::size_t slot, std::uint32_t& g) noexcept;

    std::byte* pool_ = nullptr;
    std::atomic<std::uint64_t>* words_ = nullptr;  // per slot, as above
    std::atomic<std::uint32_t>* entries_ = nullptr;  // per persistent page: 0, or entry_of(its slot's generation, slot)
    std::size_t capacity_;
    std::uint64_t pages_;
    std::atomic<std::uint64_t> hand_{0};
    std::atomic<std::uint64_t> cooled_{0}, rewarmed_{0};
};

}  // namespace steppe::page
