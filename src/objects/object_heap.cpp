// The object engine's heap (object_heap.hpp): reservation, bump allocation,
// cards and the walk over them, and the H1-H3 checker.
#include "objects/object_heap.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/system_error.hpp"

namespace steppe::objects {

namespace {
std::uint64_t round16(std::uint64_t n) { return (n + 15) & ~std::uint64_t{15}; }

void* reserve(std::uint64_t bytes, const char* what) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        common::throw_system_error("mmap", errno, "object heap",
                                   std::string("reserving its ") + what + ": " + std::to_string(bytes >> 20) +
                                       " MiB of address space");
    return p;
}
}  // namespace

object_heap::object_heap(std::uint64_t limit, std::uint32_t card_bytes) : limit_bytes_(limit) {
    if (!std::has_single_bit(card_bytes) || card_bytes < 16 || card_bytes > 4096)
        throw error(errc::invalid_argument, "object store: card_bytes " + std::to_string(card_bytes) +
                                                " is not a power of two from 16 to 4096");
    card_shift_ = static_cast<unsigned>(std::countr_zero(card_bytes));
    base_ = top_ = reinterpret_cast<std::uintptr_t>(reserve(limit, "objects"));
    limit_ = base_ + limit;
    card_count_ = (limit >> card_shift_) + 1;
    try {
        cards_ = static_cast<std::uint8_t*>(reserve(card_count_, "card table"));
        first_in_card_ = static_cast<std::uint32_t*>(reserve(card_count_ * sizeof(std::uint32_t), "card starts"));
    } catch (...) {
        this->~object_heap();
        throw;
    }
}

object_heap::~object_heap() {
    if (base_) ::munmap(reinterpret_cast<void*>(base_), limit_bytes_);
    if (cards_) ::munmap(cards_, card_count_);
    if (first_in_card_) ::munmap(first_in_card_, card_count_ * sizeof(std::uint32_t));
    base_ = 0;
    cards_ = nullptr;
    first_in_card_ = nullptr;
}

object_heap::header* object_heap::allocate(std::uint64_t body_bytes) {
    std::uint64_t extent = sizeof(header) + round16(body_bytes);
    if (body_bytes > limit_bytes_ || extent > limit_ - top_)
        throw error(errc::no_space, "object store: the heap is full (" + std::to_string(limit_bytes_ >> 20) +
                                        " MiB, options::heap_limit); an object of " + std::to_string(body_bytes) +
                                        " bytes does not fit");
    if (header* reused = take_free(extent)) return reused;
    auto* h = reinterpret_cast<header*>(top_);
    note_header(top_);
    top_ += extent;
    return h;
}

// H2: the first header in a card is its lowest one.
void object_heap::note_header(std::uintptr_t at) noexcept {
    std::uint64_t c = card_of(at);
    std::uint32_t offset = offset_in_card(at) + 1;
    if (first_in_card_[c] == no_header || first_in_card_[c] > offset) first_in_card_[c] = offset;
}

// An exact fit, or a block at least one header larger, split.
object_heap::header* object_heap::take_free(std::uint64_t extent) {
    auto it = free_.find(extent);
    if (it == free_.end()) it = free_.lower_bound(extent + sizeof(header));
    if (it == free_.end()) return nullptr;
    std::uint64_t size = it->first;
    std::uintptr_t at = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    free_bytes_ -= size;
    if (size > extent) make_free(at + extent, size - extent);
    return reinterpret_cast<header*>(at);
}

void object_heap::make_free(std::uintptr_t at, std::uint64_t extent) {
    auto* h = reinterpret_cast<header*>(at);
    h->word = 0;
    h->type = header::free_type;
    h->count = static_cast<std::uint32_t>(extent);
    note_header(at);
    free_[extent].push_back(at);
    free_bytes_ += extent;
    // Whole pages past the free block's header go back to the kernel.
    std::uintptr_t page = 4096, from = (at + sizeof(header) + page - 1) & ~(page - 1), to = (at + extent) & ~(page - 1);
    if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void object_heap::release(header* h, std::uint64_t keep) {
    std::uint64_t extent = extent_of(h);
    // A free block's size is a u32: bigger extents free in pieces.
    constexpr std::uint64_t piece = std::uint64_t{1} << 31;
    for (std::uint64_t at = keep; at < extent; at += piece)
        make_free(reinterpret_cast<std::uintptr_t>(h) + at, std::min(piece, extent - at));
}

void object_heap::set_type_size(std::uint32_t type, std::uint32_t size) {
    if (type >= type_sizes_.size()) type_sizes_.resize(type + 1, 0);
    type_sizes_[type] = size;
}

std::uint64_t object_heap::extent_of(const header* h) const noexcept {
    if (h->type == header::fault_block_type) return sizeof(header) + fault_block_body;
    if (h->type == header::free_type) return h->count;
    return sizeof(header) + round16(std::uint64_t{type_sizes_[h->type]} * h->count);
}

void object_heap::for_each(const std::function<void(header*)>& visit) const {
    for (std::uintptr_t a = base_; a < top_;) {
        auto* h = reinterpret_cast<header*>(a);
        a += extent_of(h);
        visit(h);
    }
}

void object_heap::for_each_in_dirty_cards(const std::function<void(header*)>& visit) {
    std::uint64_t used = top_ == base_ ? 0 : card_of(top_ - 1) + 1;
    for (std::uint64_t c = 0; c < used; ++c) {
        if (!cards_[c]) continue;
        if (first_in_card_[c] == no_header) continue;
        std::uintptr_t card_end = base_ + ((c + 1) << card_shift_);
        for (std::uintptr_t a = base_ + (c << card_shift_) + first_in_card_[c] - 1; a < card_end && a < top_;) {
            auto* h = reinterpret_cast<header*>(a);
            a += extent_of(h);
            visit(h);
        }
    }
}

void object_heap::clear_cards() noexcept {
    std::uint64_t used = top_ == base_ ? 0 : card_of(top_ - 1) + 1;
    std::memset(cards_, 0, used);
}

std::vector<std::string> object_heap::check() const {
    std::vector<std::string> findings;
    std::uint64_t used = top_ == base_ ? 0 : card_of(top_ - 1) + 1;
    std::vector<std::uint32_t> expected(used, no_header);
    std::uintptr_t a = base_;
    for (; a < top_;) {
        auto* h = reinterpret_cast<const header*>(a);
        bool special = h->type == header::fault_block_type || h->type == header::free_type;
        if (!special && (h->type >= type_sizes_.size() || type_sizes_[h->type] == 0)) {
            findings.push_back("object heap: H1: the header at offset " + std::to_string(a - base_) +
                               " names type " + std::to_string(h->type) + ", which the heap does not know");
            return findings;
        }
        std::uint64_t c = card_of(a);
        if (expected[c] == no_header) expected[c] = offset_in_card(a) + 1;
        a += extent_of(h);
    }
    if (a != top_) findings.push_back("object heap: H1: the last extent ends past the top");
    std::uint64_t listed = 0, walked = 0;
    for (const auto& [extent, blocks] : free_)
        for (std::uintptr_t b : blocks) {
            auto* h = reinterpret_cast<const header*>(b);
            listed += extent;
            if (h->type != header::free_type || h->count != extent)
                findings.push_back("object heap: H4: the free list names offset " + std::to_string(b - base_) +
                                   ", which is not a free block of " + std::to_string(extent) + " bytes");
        }
    for_each([&](header* h) {
        if (h->type == header::free_type) walked += h->count;
    });
    if (listed != free_bytes_ || walked != free_bytes_)
        findings.push_back("object heap: H4: free bytes " + std::to_string(free_bytes_) + ", the lists hold " +
                           std::to_string(listed) + ", the heap " + std::to_string(walked));
    for (std::uint64_t c = 0; c < used; ++c) {
        if (first_in_card_[c] != expected[c])
            findings.push_back("object heap: H2: card " + std::to_string(c) + " records its first header at " +
                               std::to_string(first_in_card_[c]) + ", the heap has it at " + std::to_string(expected[c]));
        if (cards_[c] && expected[c] == no_header)
            findings.push_back("object heap: H3: card " + std::to_string(c) + " is marked but holds no header");
    }
    return findings;
}

}  // namespace steppe::objects
