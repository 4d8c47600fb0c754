// The heap's page descriptors in memory, a group of 84 (one metadata page's
// worth) per 4 KiB slot, so that the groups nobody needs can leave memory and
// come back from their metadata page on the next access (issue 13: a store's
// descriptors cost 12 MiB per GiB of store, and a budget of 256 MiB cannot
// hold an 8 GiB store's).
//
// A slot holds its group's metadata page as it is stored (heap_format.hpp):
// a 32-byte header, then 84 descriptors of 48 bytes whose in-memory layout is
// their stored layout (static_asserts in heap_codec.cpp). So a group is
// brought back by reading its metadata page straight into its slot and
// checking the page's checksum against the one the heap last wrote or read
// for it; no copy, no allocation, nothing that is not async-signal-safe:
// the fault path asks for descriptors.
//
// Group states: absent (the slot's memory was given back; reads as zeros),
// loading (one thread reads it in), present. Rules, kept by the heap
// (invariant H8 in heap.hpp):
//   D1 Only a group whose metadata page is written as it is in memory (not
//      dirty) is dropped, and `drop` records that page and its checksum.
//   D2 Groups are dropped only inside an `exclusive` section, which its
//      caller opens where no heap call runs (a pause of the page engine, or
//      its eviction thread's pass), and which waits until no fault reads
//      descriptors: faults read them inside a `reading` scope, and while a
//      section is open new scopes wait for it to end. So a trim may run while
//      other threads fault (a walk, a long transaction), and no reader ever
//      sees a group vanish under it. Faults on any number of threads may
//      bring groups back concurrently (a CAS decides which one reads, the
//      others wait for it).
//   D3 Every access to a descriptor goes through `at`, which brings the
//      group back first: an absent group read as zeros would say "free".
// Without a source (a fresh heap, the tests' heaps) nothing is dropped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace steppe::heap_detail {

// Where dropped groups come back from: reads the newest committed image of a
// logical page (4096 bytes into `out`) without allocating or throwing, so it
// can run in a signal handler. On failure it writes why into `why`.
struct descriptor_source {
    bool (*read)(const void* context, std::uint64_t page, std::byte* out, char* why, std::size_t why_size) noexcept =
        nullptr;
    const void* context = nullptr;
    explicit operator bool() const noexcept { return read != nullptr; }
};

// How much of a decoded heap's descriptors stay in memory: with a source,
// heap::decode drops the oldest groups, a batch at a time, once more than
// `keep_bytes` of them are in memory (so up to 5/4 of it stays), and gives
// the heap that source: a big store opens in bounded memory. Without a
// source, every group stays.
struct descriptor_paging {
    descriptor_source source;
    std::uint64_t keep_bytes = 0;
};

class desc_table {
public:
    static constexpr std::size_t slot_bytes = 4096, header_bytes = 32, desc_bytes = 48, per_group = 84;

    desc_table() = default;
    desc_table(desc_table&& other) noexcept;
    desc_table& operator=(desc_table&& other) noexcept;
    desc_table(const desc_table& other);  // a deep copy (the tests compare heaps)
    desc_table& operator=(const desc_table& other) { return *this = desc_table(other); }
    ~desc_table();

    std::uint64_t size() const noexcept { return size_.load(std::memory_order_acquire); }
    // Grows to `count` descriptors; new ones are all zero bytes. Never
    // shrinks. May move the slots and the per-group arrays, so it runs in an
    // exclusive section that waits as long as readings last: the heap grows
    // under an allocation while other threads fault.
    void resize(std::uint64_t count);

    // The bytes of page p's descriptor, its group brought back first (D3).
    std::byte* at(std::uint64_t page) const noexcept {
        const std::uint64_t g = page / per_group;
        if (state_[g].load(std::memory_order_acquire) != present) bring_back(g);
        return base_ + g * slot_bytes + header_bytes + (page % per_group) * desc_bytes;
    }
    // Starts loading page p's descriptor into the cache, if its group is present.
    const std::byte* address_if_present(std::uint64_t page) const noexcept {
        const std::uint64_t g = page / per_group;
        if (state_[g].load(std::memory_order_relaxed) != present) return nullptr;
        return base_ + g * slot_bytes + header_bytes + (page % per_group) * desc_bytes;
    }

    // A fault's reading of descriptors (D2): async-signal-safe, allocation
    // free; waits while an exclusive section is open (it only drops groups).
    class reading {
    public:
        explicit reading(const desc_table& t) noexcept;
        ~reading() { table_.readers_.fetch_sub(1, std::memory_order_release); }
        reading(const reading&) = delete;
        reading& operator=(const reading&) = delete;

    private:
        const desc_table& table_;
    };
    // Where groups may be dropped (D2): keeps new readings out and waits for
    // the current ones to end, up to `max_wait_ns`; false if they did not
    // (the section is then not open, and nothing may be dropped). Its end
    // gives the dropped groups' memory back, a run of groups at a time.
    class exclusive {
    public:
        static constexpr std::uint64_t wait_forever = ~std::uint64_t{0};
        exclusive(desc_table& t, std::uint64_t max_wait_ns) noexcept;
        ~exclusive();
        exclusive(const exclusive&) = delete;
        exclusive& operator=(const exclusive&) = delete;
        explicit operator bool() const noexcept { return open_; }

    private:
        desc_table& table_;
        bool open_ = false;
    };

    void set_source(descriptor_source source) noexcept { source_ = source; }
    bool has_source() const noexcept { return static_cast<bool>(source_); }
    std::uint64_t group_count() const noexcept { return (size() + per_group - 1) / per_group; }
    bool is_present(std::uint64_t group) const noexcept {
        return state_[group].load(std::memory_order_acquire) == present;
    }
    // Drops group g (D1; inside an exclusive section, D2, whose end gives its
    // memory back): it comes back from logical page `page`, which must hold
    // a metadata page whose checksum is `crc`.
    void drop(const exclusive& section, std::uint64_t group, std::uint64_t page, std::uint32_t crc) noexcept;
    struct source_page {
        std::uint64_t page = 0;
        std::uint32_t crc = 0;
    };
    // Where an absent group comes back from (what `drop` recorded).
    source_page dropped_from(std::uint64_t group) const noexcept { return backing_[group]; }
    std::uint64_t present_groups() const noexcept { return present_.load(std::memory_order_relaxed); }
    std::uint64_t dropped_total() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    std::uint64_t loaded_total() const noexcept { return loaded_.load(std::memory_order_relaxed); }
    // Memory held: the present slots and the per-group bookkeeping.
    std::uint64_t memory_bytes() const noexcept;

private:
    static constexpr std::uint8_t absent = 0, loading = 1, present = 2;

    void bring_back(std::uint64_t group) const noexcept;
    [[noreturn]] void cannot_bring_back(std::uint64_t group, const char* why) const noexcept;
    void release() noexcept;
    void give_back_pending() noexcept;

    std::byte* base_ = nullptr;            // capacity_ slots, mmap'd
    std::uint64_t capacity_ = 0;           // in groups
    std::atomic<std::uint64_t> size_{0};   // descriptors (faults read it outside readings too: page_count)
    std::unique_ptr<std::atomic<std::uint8_t>[]> state_;
    std::unique_ptr<source_page[]> backing_;   // where each dropped group comes back from
    descriptor_source source_;
    mutable std::atomic<std::uint64_t> present_{0}, dropped_{0}, loaded_{0};
    // D2's gate: readings in progress, and whether an exclusive section is open.
    mutable std::atomic<std::uint32_t> readers_{0};
    std::atomic<bool> closed_{false};
    // The run of groups dropped in the open section whose memory is not given back yet.
    std::uint64_t pending_first_ = 0, pending_count_ = 0;
};

}  // namespace steppe::heap_detail
