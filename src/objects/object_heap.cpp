// The object engine's heap (object_heap.hpp): reservation, bump allocation,
// cards and the walk over them, and the H1-H3 checker.
#include "objects/object_heap.hpp"

#include <sys/mman.h>

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
    auto* h = reinterpret_cast<header*>(top_);
    // H2: allocation goes up, so the first header made in a card is its lowest.
    std::uint64_t c = card_of(top_);
    if (first_in_card_[c] == no_header) first_in_card_[c] = offset_in_card(top_) + 1;
    top_ += extent;
    return h;
}

void object_heap::set_type_size(std::uint32_t type, std::uint32_t size) {
    if (type >= type_sizes_.size()) type_sizes_.resize(type + 1, 0);
    type_sizes_[type] = size;
}

std::uint64_t object_heap::extent_of(const header* h) const noexcept {
    if (h->type == header::fault_block_type) return sizeof(header) + fault_block_body;
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
        if (h->type != header::fault_block_type && (h->type >= type_sizes_.size() || type_sizes_[h->type] == 0)) {
            findings.push_back("object heap: H1: the header at offset " + std::to_string(a - base_) +
                               " names type " + std::to_string(h->type) + ", which the heap does not know");
            return findings;
        }
        std::uint64_t c = card_of(a);
        if (expected[c] == no_header) expected[c] = offset_in_card(a) + 1;
        a += extent_of(h);
    }
    if (a != top_) findings.push_back("object heap: H1: the last extent ends past the top");
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
