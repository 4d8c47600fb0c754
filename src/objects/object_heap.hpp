// The object engine's heap: one reserved range of virtual memory where objects
// (copied in from segments, or made by the program) and fault blocks live,
// each behind a detail::header. Allocation takes a free block of the size
// (or splits a larger one) and otherwise bumps the top. Memory is freed by
// eviction only (release); transient objects nothing reaches stay where they
// are (there is no collector), and so do the objects a rollback made
// unreachable. Free blocks keep a header (free_type) so the heap stays
// walkable; their whole pages are given back to the kernel.
//
// With barrier::cards it also keeps the card table the inline barrier marks
// (one byte per card of card_bytes, indexed by header address) and, per card,
// the first header that starts in it, so a commit can walk the objects of a
// dirty card. With barrier::pages the heap is an arena of the vm module
// (src/vm/vm.hpp) whose write tracking (userfaultfd write-protect or
// mprotect) reports the pages written; they mark 4 KiB cards, and a card's
// objects then include the one that covers its start.
//
// Invariants (check()):
//  H1 headers tile [base, top): each object's extent (header + body, rounded
//     to 16) starts where the previous one ends;
//  H2 first_in_card[c] is the lowest header in card c, or none if none starts there;
//  H3 every marked card holds the start of a header;
//  H4 the free lists name exactly the free blocks, and free_bytes is their sum.
//
// Closed ranges: a heap's addresses (and a page_fault store's mirror) are not
// given back when its store closes; they become closed ranges of the vm
// module (vm::retire_range, src/vm/vm.hpp), whose touch ends the process
// with "a reference followed after its store closed".
#pragma once

#include <steppe/objects.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vm/vm.hpp"


namespace steppe::objects {

class object_heap {
public:
    using header = detail::header;

    // Reserves `limit` bytes of address space (MAP_NORESERVE: memory is used
    // as objects are made). card_bytes: a power of two, 16..4096.
    // track_pages: the memory comes from a vm arena with write tracking, and
    // cards are pages.
    object_heap(std::uint64_t limit, std::uint32_t card_bytes, bool track_pages = false);
    ~object_heap();
    object_heap(const object_heap&) = delete;
    object_heap& operator=(const object_heap&) = delete;
    // At the store's close: its memory goes back, its addresses become a
    // closed range naming `store_path`, and the heap is empty from then on.
    void retire(const std::string& store_path) noexcept;

    // A header followed by `body_bytes` (not zeroed), 16-byte aligned;
    // no_space naming the limit when the heap is full. The type sizes must
    // know the header's type (set_type_size) before the heap is walked.
    header* allocate(std::uint64_t body_bytes);
    // Frees h's extent past its first `keep` bytes (0: all of it; else a
    // multiple of 16 that leaves h a smaller block the caller re-describes).
    void release(header* h, std::uint64_t keep);
    // placement::in_place carves a block it allocated into objects and free
    // blocks: the range [at, at + extent) becomes a free block; an object's
    // header placed inside the block is noted (H2).
    void free_range(std::uintptr_t at, std::uint64_t extent);
    void note_object(const header* h) noexcept { note_header(reinterpret_cast<std::uintptr_t>(h)); }
    // Before a system call writes into [at, at + bytes): a vm arena's pages
    // must be resident, or the call fails with EFAULT (barrier::pages).
    void make_resident(std::byte* at, std::uint64_t bytes) const noexcept;
    void set_type_size(std::uint32_t type, std::uint32_t size);
    // Bytes an object's or fault block's extent takes, header included.
    std::uint64_t extent_of(const header* h) const noexcept;

    bool contains(const void* p) const noexcept {
        auto a = reinterpret_cast<std::uintptr_t>(p);
        return a >= base_ && a < top_;
    }
    std::uintptr_t base() const noexcept { return base_; }
    std::uint8_t* cards() const noexcept { return cards_; }
    unsigned card_shift() const noexcept { return card_shift_; }
    std::uint64_t bytes_used() const noexcept { return top_ - base_; }
    std::uint64_t limit() const noexcept { return limit_bytes_; }
    std::uint64_t free_bytes() const noexcept { return free_bytes_; }

    // Every header, in address order.
    void for_each(const std::function<void(header*)>& visit) const;
    // barrier::pages: marks the cards of the pages written since the last call.
    void mark_written_pages();
    const char* write_tracking() const noexcept;
    // Every header that starts in a marked card (with page tracking, or
    // covers its start), each once, in address order.
    void for_each_in_dirty_cards(const std::function<void(header*)>& visit);
    void clear_cards() noexcept;
    std::vector<std::string> check() const;

    // Fault blocks: a header and one word (the object's address once it is in memory).
    static constexpr std::uint64_t fault_block_body = 16;

private:
    // first_in_card_ holds 1 + the offset in its card of the card's first
    // header, so the zeros of fresh memory say "none".
    static constexpr std::uint32_t no_header = 0;
    std::uint64_t card_of(std::uintptr_t a) const noexcept { return (a - base_) >> card_shift_; }
    std::uint32_t offset_in_card(std::uintptr_t a) const noexcept {
        return static_cast<std::uint32_t>((a - base_) & ((std::uintptr_t{1} << card_shift_) - 1));
    }

    std::uintptr_t base_ = 0, top_ = 0;
    std::uintptr_t end() const noexcept { return base_ + limit_bytes_; }
    std::uint8_t* cards_ = nullptr;
    std::uint64_t card_count_ = 0;
    std::uint32_t* first_in_card_ = nullptr;
    std::map<std::uint64_t, std::vector<std::uintptr_t>> free_;  // extent -> free blocks of it
    std::uint64_t free_bytes_ = 0;
    std::unique_ptr<vm::fault_space> pages_;  // barrier::pages only
    header* covering(std::uint64_t card) const noexcept;
    void give_back(std::uintptr_t from, std::uintptr_t to);

    header* take_free(std::uint64_t extent);
    void grow(std::uintptr_t end);
    static constexpr std::uintptr_t grow_step = std::uintptr_t{16} << 20;
    std::uintptr_t open_end_ = 0;  // [base, open_end) and its cards are readable and writable
    void free_block(std::uintptr_t at, std::uint64_t extent);
    void note_header(std::uintptr_t at) noexcept;
    unsigned card_shift_ = 0;
    std::uint64_t limit_bytes_ = 0;
    std::vector<std::uint32_t> type_sizes_;
};

// What a touch of a closed store's heap or mirror says (vm::retire_range).
inline constexpr vm::closed_words closed_references{
    "object store", "a reference",
    "a reference does not outlive its store's close(): keep a root's name and find it again in the store opened "
    "next"};

}  // namespace steppe::objects
