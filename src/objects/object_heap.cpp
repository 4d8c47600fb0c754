// The object engine's heap (object_heap.hpp): reservation, bump allocation,
// cards and the walk over them, and the H1-H3 checker.
#include "objects/object_heap.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/sparse_mapping.hpp"
#include "common/system_error.hpp"
#include "vm/vm.hpp"

namespace steppe::objects {

namespace {
std::uint64_t round16(std::uint64_t n) { return (n + 15) & ~std::uint64_t{15}; }

// A page of the heap's arena never touched: zeros (async-signal-safe).
bool zero_page(void*, std::uintptr_t, std::byte* out) noexcept {
    for (std::size_t i = 0; i < vm::page_size; ++i) out[i] = std::byte{0};
    return true;
}

// Address space only (PROT_NONE is not counted against RLIMIT_DATA or the
// overcommit heuristic); grow() makes it usable as the heap grows.
void* reserve(std::uint64_t bytes, const char* what) {
    void* p = vm::reserve_address_space(bytes);
    if (p == MAP_FAILED)
        common::throw_system_error("mmap", errno, "object heap",
                                   std::string("reserving its ") + what + ": " + std::to_string(bytes >> 20) +
                                       " MiB of address space");
    return p;
}
}  // namespace

object_heap::object_heap(std::uint64_t limit, std::uint32_t card_bytes, bool track_pages) : limit_bytes_(limit) {
    if (track_pages) card_bytes = vm::page_size;
    if (!std::has_single_bit(card_bytes) || card_bytes < 16 || card_bytes > 4096)
        throw error(errc::invalid_argument, "object store: card_bytes " + std::to_string(card_bytes) +
                                                " is not a power of two from 16 to 4096");
    card_shift_ = static_cast<unsigned>(std::countr_zero(card_bytes));
    if (track_pages) {
        pages_ = vm::fault_space::create(vm::choose_backend(vm::backend_kind::uffd), zero_page, nullptr);
        base_ = top_ = pages_->reserve(limit);
    } else {
        base_ = top_ = reinterpret_cast<std::uintptr_t>(reserve(limit, "objects"));
    }
    card_count_ = (limit >> card_shift_) + 1;
    try {
        cards_ = static_cast<std::uint8_t*>(reserve(card_count_, "card table"));
        first_in_card_ = static_cast<std::uint32_t*>(reserve(card_count_ * sizeof(std::uint32_t), "card starts"));
    } catch (...) {
        this->~object_heap();
        throw;
    }
}

void object_heap::retire(const std::string& store_path) noexcept {
    if (!base_) return;
    const std::uintptr_t base = std::exchange(base_, 0);
    if (pages_) {
        pages_->retire_arenas(store_path, closed_references);
        pages_.reset();
    } else {
        vm::retire_range(base, limit_bytes_, store_path, closed_references);
    }
    ::munmap(cards_, card_count_);
    ::munmap(first_in_card_, card_count_ * sizeof(std::uint32_t));
    cards_ = nullptr;
    first_in_card_ = nullptr;
    top_ = open_end_ = 0;
    free_.clear();
    free_bytes_ = 0;
}

object_heap::~object_heap() {
    if (base_ && !pages_) ::munmap(reinterpret_cast<void*>(base_), limit_bytes_);
    pages_.reset();
    if (cards_) ::munmap(cards_, card_count_);
    if (first_in_card_) ::munmap(first_in_card_, card_count_ * sizeof(std::uint32_t));
    base_ = 0;
    cards_ = nullptr;
    first_in_card_ = nullptr;
}

object_heap::header* object_heap::allocate(std::uint64_t body_bytes) {
    std::uint64_t extent = sizeof(header) + round16(body_bytes);
    if (body_bytes > limit_bytes_ || extent > end() - top_)
        throw error(errc::no_space, "object store: the heap is full (" + std::to_string(limit_bytes_ >> 20) +
                                        " MiB, options::heap_limit); an object of " + std::to_string(body_bytes) +
                                        " bytes does not fit");
    if (header* reused = take_free(extent)) return reused;
    grow(top_ + extent);
    auto* h = reinterpret_cast<header*>(top_);
    note_header(top_);
    top_ += extent;
    return h;
}

// Opens the heap up to `end` (and the card tables for it) in steps of
// grow_step, so memory limits count what the heap uses, not what it reserved.
void object_heap::grow(std::uintptr_t end) {
    if (end <= open_end_) return;
    std::uintptr_t from = open_end_ ? open_end_ : base_;
    std::uintptr_t to = std::min(this->end(), (end + grow_step - 1) & ~(grow_step - 1));
    auto open = [&](void* at, std::uint64_t bytes, const char* what) {
        if (bytes && ::mprotect(at, bytes, PROT_READ | PROT_WRITE) != 0)
            common::throw_system_error("mprotect", errno, "object heap", std::string("growing its ") + what);
    };
    if (!pages_) open(reinterpret_cast<void*>(from), to - from, "objects");  // a vm arena is open already
    auto card_range = [&](std::uintptr_t a) { return ((a - base_) >> card_shift_); };
    std::uint64_t c0 = card_range(from), c1 = card_range(to) + 1;
    auto page_down = [](std::uint64_t x) { return x & ~std::uint64_t{4095}; };
    auto page_up = [](std::uint64_t x) { return (x + 4095) & ~std::uint64_t{4095}; };
    open(cards_ + page_down(c0), page_up(c1) - page_down(c0), "card table");
    auto* starts = reinterpret_cast<std::byte*>(first_in_card_);
    open(starts + page_down(c0 * 4), page_up(c1 * 4) - page_down(c0 * 4), "card starts");
    open_end_ = to;
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
    if (size > extent) free_range(at + extent, size - extent);
    return reinterpret_cast<header*>(at);
}

void object_heap::free_block(std::uintptr_t at, std::uint64_t extent) {
    auto* h = reinterpret_cast<header*>(at);
    h->word = 0;
    h->type = header::free_type;
    h->count = static_cast<std::uint32_t>(extent);
    note_header(at);
    free_[extent].push_back(at);
    free_bytes_ += extent;
    // Whole pages past the free block's header go back to the kernel.
    std::uintptr_t page = 4096;
    give_back((at + sizeof(header) + page - 1) & ~(page - 1), (at + extent) & ~(page - 1));
}

void object_heap::free_range(std::uintptr_t at, std::uint64_t extent) {
    // A free block's size is a u32: bigger ranges free in pieces.
    constexpr std::uint64_t piece = std::uint64_t{1} << 31;
    for (std::uint64_t done = 0; done < extent; done += piece) free_block(at + done, std::min(piece, extent - done));
}

void object_heap::give_back(std::uintptr_t from, std::uintptr_t to) {
    if (to <= from) return;
    if (pages_)
        pages_->discard(from, (to - from) / vm::page_size);  // missing again: zeros at the next touch
    else
        ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void object_heap::make_resident(std::byte* at, std::uint64_t bytes) const noexcept {
    if (!pages_ || bytes == 0) return;
    auto first = reinterpret_cast<std::uintptr_t>(at);
    for (std::uintptr_t page = first & ~(vm::page_size - 1); page < first + bytes; page += vm::page_size)
        *reinterpret_cast<volatile std::byte*>(std::max(page, first)) = std::byte{0};
}

void object_heap::mark_written_pages() {
    for (std::uintptr_t page : pages_->take_dirty())
        if (page >= base_ && page < top_) cards_[card_of(page)] = 1;
}

const char* object_heap::write_tracking() const noexcept {
    return pages_ ? vm::to_string(pages_->tracking()) : "none";
}

// The object whose extent covers the start of `card` from an earlier card, if any.
object_heap::header* object_heap::covering(std::uint64_t card) const noexcept {
    std::uint64_t c = card;
    while (c > 0 && first_in_card_[c - 1] == no_header) --c;
    if (c == 0) return nullptr;
    std::uintptr_t start = base_ + (card << card_shift_);
    header* last = nullptr;
    for (std::uintptr_t a = base_ + ((c - 1) << card_shift_) + first_in_card_[c - 1] - 1; a < start;) {
        last = reinterpret_cast<header*>(a);
        a += extent_of(last);
        if (a <= start) last = nullptr;
    }
    return last;
}

void object_heap::release(header* h, std::uint64_t keep) {
    std::uint64_t extent = extent_of(h);
    if (extent > keep) free_range(reinterpret_cast<std::uintptr_t>(h) + keep, extent - keep);
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
    header* last = nullptr;
    for (std::uint64_t c = 0; c < used; ++c) {
        if (!cards_[c]) continue;
        if (pages_) {
            header* h = covering(c);
            if (h && h > last) visit(last = h);
        }
        if (first_in_card_[c] == no_header) continue;
        std::uintptr_t card_end = base_ + ((c + 1) << card_shift_);
        for (std::uintptr_t a = base_ + (c << card_shift_) + first_in_card_[c] - 1; a < card_end && a < top_;) {
            auto* h = reinterpret_cast<header*>(a);
            a += extent_of(h);
            if (h > last) visit(last = h);
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
        if (cards_[c] && expected[c] == no_header && !pages_)
            findings.push_back("object heap: H3: card " + std::to_string(c) + " is marked but holds no header");
    }
    return findings;
}

}  // namespace steppe::objects
