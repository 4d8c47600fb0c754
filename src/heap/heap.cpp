// The heap's allocation paths and queries. Encoding, decoding and the audit are
// in heap_codec.cpp.
//
// Fast paths:
//   small allocate  one hash lookup for the (type, elem_size, class) non-full
//                   list, take its last page, find the first zero bit among 4
//                   words; O(1). A new page comes from the free-page set
//                   (O(log runs)) or the high-water mark.
//   small free      O(1); a page whose last chunk goes returns to the free set.
//   large allocate  best fit over free runs by length, O(log runs); else extend
//                   a free run ending at the high-water mark, else grow.
#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>

#include <steppe/error.hpp>

#include "heap/heap.hpp"
#include "heap/heap_format.hpp"
#include "common/hex.hpp"

namespace steppe {
namespace {

using common::hex;
using heap_detail::kDescsPerPage;
using heap_detail::meta_pages_needed;

[[noreturn]] void bad_free(std::uint64_t addr, const std::string& why) {
    throw error(errc::invalid_argument, "heap: free of " + hex(addr) + ": " + why);
}

}  // namespace

const char* to_string(heap::page_kind kind) noexcept {
    switch (kind) {
    case heap::page_kind::free: return "free";
    case heap::page_kind::small: return "small";
    case heap::page_kind::large_head: return "large head";
    case heap::page_kind::large_tail: return "large tail";
    case heap::page_kind::system: return "system";
    case heap::page_kind::reserved: return "reserved";
    }
    return "unknown";
}

std::uint32_t heap::page_desc::chunk_iterator::next(std::uint32_t from) const noexcept {
    std::uint32_t limit = desc_ ? desc_->chunk_capacity() : 0;
    while (from < limit) {
        std::uint64_t word = desc_->words_[from / 64] >> (from % 64);
        if (word != 0) {
            std::uint32_t bit = from + static_cast<std::uint32_t>(std::countr_zero(word));
            return bit < limit ? bit : 256;
        }
        from = (from / 64 + 1) * 64;
    }
    return 256;
}

heap::page_desc::chunk_range heap::page_desc::allocated_chunks() const noexcept {
    if (kind_ != page_kind::small) return {};
    return {chunk_iterator(this, 0), chunk_iterator(this, 256)};
}

heap::heap(std::uint64_t reserved_pages) : reserved_pages_(reserved_pages) {
    if (reserved_pages == 0 || reserved_pages > max_reserved_pages)
        throw error(errc::invalid_argument, "heap: reserved_pages " + std::to_string(reserved_pages) +
                                                " is not in [1, max_reserved_pages]");
    descs_.resize(reserved_pages);
    list_pos_.resize(reserved_pages);
    for (std::uint64_t p = 0; p < reserved_pages; ++p) desc_at(p).kind_ = page_kind::reserved;
    ensure_metadata_pages();
    mark_all_dirty();
}

// --- allocation -------------------------------------------------------------

std::uint64_t heap::allocate(std::uint32_t type, std::size_t elem_size, std::size_t count,
                             std::size_t align) {
    if (elem_size == 0 || count == 0)
        throw error(errc::invalid_argument, "heap: allocate of " + std::to_string(count) + " elements of " +
                                                std::to_string(elem_size) + " bytes: both must be > 0");
    if (!std::has_single_bit(align) || align > page_size)
        throw error(errc::invalid_argument, "heap: allocate: alignment " + std::to_string(align) +
                                                " is not a power of two <= 4096");
    if (elem_size > std::numeric_limits<std::uint32_t>::max())
        throw error(errc::invalid_argument, "heap: allocate: element size " + std::to_string(elem_size) +
                                                " does not fit in 32 bits");
    constexpr std::uint64_t max_bytes = max_page_count * page_size;
    if (count > max_bytes / elem_size)
        throw error(errc::no_space, "heap: allocate of " + std::to_string(count) + " x " +
                                        std::to_string(elem_size) + " bytes exceeds the heap's address space");
    std::uint64_t bytes = std::uint64_t{elem_size} * count;
    std::size_t cls = size_class_for(bytes, align);
    type_bound_ = std::max(type_bound_, std::uint64_t{type} + 1);
    if (cls != large) return allocate_small(type, static_cast<std::uint32_t>(elem_size), cls);
    return allocate_large(type, static_cast<std::uint32_t>(elem_size), count, (bytes + page_size - 1) / page_size);
}

std::uint64_t heap::allocate_small(std::uint32_t type, std::uint32_t elem_size, std::size_t cls) {
    std::uint64_t key = list_key(type, elem_size, cls);
    auto it = nonfull_.find(key);  // listed vectors are never empty
    if (it == nonfull_.end()) {
        std::uint64_t page = take_page();
        page_desc& d = desc_at(page);
        d = page_desc{};
        d.kind_ = page_kind::small;
        d.cls_ = static_cast<std::uint8_t>(cls);
        d.type_ = type;
        d.elem_size_ = elem_size;
        ++small_pages_;
        note_new(page);
        list_push(page);
        it = nonfull_.find(key);
    }
    assert(elem_size <= max_small_size);  // list_key keeps it in 12 bits
    std::uint64_t page = it->second.back();
    page_desc& d = desc_at(page);
    std::uint32_t bit = 0;
    for (std::size_t w = 0; w < 4; ++w) {
        if (d.words_[w] != ~std::uint64_t{0}) {
            bit = static_cast<std::uint32_t>(w * 64 + std::countr_one(d.words_[w]));
            break;
        }
    }
    // Invariant H4: a listed page has used < capacity, so a zero bit below capacity exists.
    assert(bit < d.chunk_capacity());
    d.words_[bit / 64] |= std::uint64_t{1} << (bit % 64);
    ++d.used_;
    ++small_chunks_;
    if (d.used_ == d.chunk_capacity()) list_remove(page);
    mark_dirty(page);
    const std::uint64_t address = page * page_size + std::uint64_t{bit} * d.chunk_size();
    ensure_metadata_pages();  // may grow the descriptor table, and `d` with it: not used after this
    return address;
}

std::uint64_t heap::allocate_large(std::uint32_t type, std::uint32_t elem_size, std::uint64_t count,
                                   std::uint64_t pages) {
    std::uint64_t first;
    if (auto found = free_.take_run(pages)) {
        first = *found;
    } else if (auto top = free_.run_ending_at(page_count())) {
        // Extend the free run at the top instead of leaving it as a hole.
        check_room(pages - top->second);
        free_.remove(top->first, top->second);
        first = top->first;
        grow(pages - top->second);
    } else {
        check_room(pages);
        first = grow(pages);
    }
    for (std::uint64_t i = 0; i < pages; ++i) {
        page_desc& d = desc_at(first + i);
        d = page_desc{};
        d.kind_ = i == 0 ? page_kind::large_head : page_kind::large_tail;
        d.type_ = type;
        d.elem_size_ = elem_size;
        if (i == 0) {
            d.words_[0] = pages;
            d.words_[1] = count;
        } else {
            d.words_[0] = i;
        }
        note_new(first + i);
        mark_dirty(first + i);
    }
    large_pages_ += pages;
    ++large_objects_;
    ensure_metadata_pages();
    return first * page_size;
}

std::uint64_t heap::allocate_system_page(std::uint32_t owner, std::uint64_t tag) {
    if (owner == heap_owner)
        throw error(errc::invalid_argument, "heap: system page owner 0 is reserved for the heap's metadata");
    std::uint64_t page = take_page();
    page_desc& d = desc_at(page);
    d = page_desc{};
    d.kind_ = page_kind::system;
    d.type_ = owner;
    d.words_[0] = tag;
    ++system_pages_;
    mark_dirty(page);
    ensure_metadata_pages();
    return page;
}

void heap::free_system_page(std::uint64_t page) {
    const page_desc* d = describe(page);
    if (!d || d->kind_ != page_kind::system || d->type_ == heap_owner)
        throw error(errc::invalid_argument, "heap: free_system_page(" + std::to_string(page) +
                                                "): not a system page of the store");
    --system_pages_;
    release_pages(page, 1);
}

void heap::free(std::uint64_t addr) {
    if (addr == 0) bad_free(addr, "null address");
    std::uint64_t page = addr / page_size, offset = addr % page_size;
    if (page >= page_count())
        bad_free(addr, "page " + std::to_string(page) + " is past the heap's end (" +
                           std::to_string(page_count()) + " pages)");
    page_desc& d = desc_at(page);
    switch (d.kind_) {
    case page_kind::free:
        bad_free(addr, "page " + std::to_string(page) + " is free (double free, or never allocated)");
    case page_kind::reserved:
    case page_kind::system:
        bad_free(addr, "page " + std::to_string(page) + " is a " + to_string(d.kind_) +
                           " page, not an object");
    case page_kind::large_tail:
        bad_free(addr, "address is inside the large object at " +
                           hex((page - d.words_[0]) * page_size) + ", not its start");
    case page_kind::large_head: {
        if (offset != 0)
            bad_free(addr, "address is inside the large object at " + hex(page * page_size) +
                               ", not its start");
        std::uint64_t run = d.words_[0];
        large_pages_ -= run;
        --large_objects_;
        release_pages(page, run);
        return;
    }
    case page_kind::small: {
        std::uint32_t size = d.chunk_size();
        if (offset % size != 0 || offset / size >= d.chunk_capacity())
            bad_free(addr, "not the start of a chunk (page " + std::to_string(page) + " holds " +
                               std::to_string(size) + "-byte chunks)");
        auto bit = static_cast<std::uint32_t>(offset / size);
        if (!d.chunk_allocated(bit))
            bad_free(addr, "chunk is not allocated (double free, or never allocated)");
        bool was_full = d.used_ == d.chunk_capacity();
        d.words_[bit / 64] &= ~(std::uint64_t{1} << (bit % 64));
        --d.used_;
        --small_chunks_;
        if (d.used_ == 0) {
            // Invariant H3: no empty small pages; the page goes back to the free set.
            if (!was_full) list_remove(page);
            --small_pages_;
            release_pages(page, 1);
        } else {
            if (was_full) list_push(page);
            mark_dirty(page);
        }
        return;
    }
    }
    bad_free(addr, "page has an unknown kind");
}

// --- page supply ------------------------------------------------------------

std::uint64_t heap::take_page() {
    if (auto page = free_.take_one()) return *page;
    check_room(1);
    return grow(1);
}

// Extends the high-water mark by `pages` pages and returns the first. The new
// descriptors are `free` but NOT in the free set: the caller assigns them.
// The caller has called check_room (metadata pages rely on its headroom).
std::uint64_t heap::grow(std::uint64_t pages) {
    std::uint64_t first = page_count();
    assert(pages <= max_page_count - first);
    descs_.resize(first + pages);
    list_pos_.resize(first + pages);
    // The count field of every metadata page covering new pages changes.
    for (std::uint64_t i = first / kDescsPerPage; i <= (first + pages - 1) / kDescsPerPage; ++i)
        mark_meta_dirty(i);
    return first;
}

// Throws no_space unless `pages` more pages AND the metadata pages they need
// fit below max_page_count, so that an allocation never fails halfway.
void heap::check_room(std::uint64_t pages) const {
    std::uint64_t first = page_count(), extra = 0;
    for (;;) {
        if (pages > max_page_count || first + pages + extra > max_page_count)
            throw error(errc::no_space, "heap: the heap's address space is exhausted (" +
                                            std::to_string(first) + " pages, " + std::to_string(pages) +
                                            " more wanted, limit " + std::to_string(max_page_count) + ")");
        std::uint64_t need = meta_pages_needed(first + pages + extra);
        std::uint64_t more = need > meta_pages_.size() ? need - meta_pages_.size() : 0;
        if (more <= extra) return;
        extra = more;
    }
}

// Invariant H6: ceil(page_count / 84) metadata pages. Taking one can raise the
// high-water mark by one, which can need another; each round adds a page that
// covers 84, so the loop ends (a large run can need several rounds).
void heap::ensure_metadata_pages() {
    while (meta_pages_.size() < meta_pages_needed(page_count())) {
        auto from_free = free_.take_one();
        std::uint64_t page = from_free ? *from_free : grow(1);
        std::size_t index = meta_pages_.size();
        page_desc& d = desc_at(page);
        d = page_desc{};
        d.kind_ = page_kind::system;
        d.type_ = heap_owner;
        d.words_[0] = index;
        ++system_pages_;
        meta_pages_.push_back(page);
        meta_crc_.push_back(0);
        mark_dirty(page);
        mark_meta_dirty(index);
        if (index > 0) mark_meta_dirty(index - 1);  // its `next` changes
    }
}

void heap::release_pages(std::uint64_t first, std::uint64_t count) {
    for (std::uint64_t p = first; p < first + count; ++p) {
        if (desc_at(p).is_data()) note_freed(p);
        desc_at(p) = page_desc{};
        mark_dirty(p);
    }
    free_.insert(first, count);
}

std::uint64_t heap::memory_bytes() const noexcept {
    // A tree node costs its links and colour (32 bytes), its value and
    // malloc's header, rounded to 16.
    constexpr std::uint64_t set_node = 48, map_node = 64, hash_node = 48;
    std::uint64_t bytes = descs_.memory_bytes() + list_pos_.memory_bytes() +
                          free_.runs().size() * (map_node + set_node) +
                          (new_pages_.size() + freed_pages_.size()) * set_node +
                          meta_pages_.capacity() * sizeof(std::uint64_t) + meta_crc_.capacity() * sizeof(std::uint32_t) +
                          meta_dirty_.capacity() + dirty_list_.capacity() * sizeof(std::uint32_t);
    for (const auto& [key, list] : nonfull_) bytes += hash_node + list.capacity() * sizeof(std::uint64_t);
    return bytes;
}

// H8: only groups whose metadata page holds them as they are (not dirty)
// go, each with the page and checksum it comes back from. The hand goes
// round the groups, so a trim takes those longest untouched by trims, not
// always the first ones.
bool heap::trim_descriptors(std::uint64_t keep_bytes) noexcept {
    const std::uint64_t groups = descs_.group_count();
    const std::uint64_t keep = keep_bytes / heap_detail::desc_table::slot_bytes;
    if (!descs_.has_source() || descs_.present_groups() <= keep) return true;
    constexpr std::uint64_t max_wait_ns = 20'000'000;
    const heap_detail::desc_table::exclusive section(descs_, max_wait_ns);
    if (!section) return false;
    for (std::uint64_t seen = 0; seen < groups && descs_.present_groups() > keep; ++seen) {
        const std::uint64_t g = trim_hand_ % groups;
        trim_hand_ = g + 1;  // a wrap starts a new run of dropped groups
        if (g < meta_pages_.size() && !meta_dirty_[g]) descs_.drop(section, g, meta_pages_[g], meta_crc_[g]);
    }
    return true;
}

// --- non-full lists -----------------------------------------------------------

// The page is on its list with its position, or (an allocation failed in
// either) on no list and at position 0: list_remove trusts the position.
void heap::list_push(std::uint64_t page) {
    const page_desc& d = desc_at(page);
    const auto key = list_key(d.type_, d.elem_size_, d.cls_);
    auto& list = nonfull_[key];
    try {
        list.push_back(page);
        list_pos_.set(page, static_cast<std::uint32_t>(list.size()));  // throws before it changes anything
    } catch (const std::bad_alloc&) {
        if (!list.empty() && list.back() == page && list_pos_.get(page) == 0) list.pop_back();
        if (list.empty()) nonfull_.erase(key);
        throw;
    }
}

void heap::list_remove(std::uint64_t page) {
    const page_desc& d = desc_at(page);
    auto it = nonfull_.find(list_key(d.type_, d.elem_size_, d.cls_));
    assert(it != nonfull_.end() && list_pos_.get(page) != 0);
    auto& list = it->second;
    std::size_t pos = list_pos_.get(page) - 1;
    list[pos] = list.back();
    list_pos_.set(list[pos], static_cast<std::uint32_t>(pos + 1));
    list.pop_back();
    list_pos_.set(page, 0);
    if (list.empty()) nonfull_.erase(it);
}

// --- dirty and new/freed tracking -------------------------------------------

void heap::mark_dirty(std::uint64_t page) {
    mark_meta_dirty(page / kDescsPerPage);
}

void heap::mark_meta_dirty(std::size_t index) {
    if (index >= meta_dirty_.size()) meta_dirty_.resize(index + 1);
    if (!meta_dirty_[index]) {
        meta_dirty_[index] = 1;
        dirty_list_.push_back(static_cast<std::uint32_t>(index));
    }
}

void heap::mark_all_dirty() {
    for (std::size_t i = 0; i < meta_pages_.size(); ++i) mark_meta_dirty(i);
}

void heap::note_new(std::uint64_t page) {
    freed_pages_.erase(page);
    new_pages_.insert(page);
}

void heap::note_freed(std::uint64_t page) {
    new_pages_.erase(page);
    freed_pages_.insert(page);
}

std::vector<std::uint64_t> heap::take_new_pages() {
    std::vector<std::uint64_t> out(new_pages_.begin(), new_pages_.end());
    new_pages_.clear();
    return out;
}

std::vector<std::uint64_t> heap::take_freed_pages() {
    std::vector<std::uint64_t> out(freed_pages_.begin(), freed_pages_.end());
    freed_pages_.clear();
    return out;
}

// --- queries ------------------------------------------------------------------

std::optional<heap::run> heap::large_run(std::uint64_t page) const noexcept {
    const page_desc* d = describe(page);
    if (!d) return std::nullopt;
    if (d->kind_ == page_kind::large_head) return run{page, d->words_[0]};
    if (d->kind_ == page_kind::large_tail) {
        std::uint64_t head = page - d->words_[0];
        return run{head, desc_at(head).words_[0]};
    }
    return std::nullopt;
}

bool heap::is_allocated(std::uint64_t addr) const noexcept {
    auto c = find_chunk(addr);
    return c && c->addr == addr;
}

std::optional<heap::chunk_info> heap::find_chunk(std::uint64_t addr) const noexcept {
    std::uint64_t page = addr / page_size, offset = addr % page_size;
    const page_desc* d = describe(page);
    if (!d) return std::nullopt;
    switch (d->kind_) {
    case page_kind::small: {
        std::uint32_t bit = static_cast<std::uint32_t>(offset / d->chunk_size());
        if (bit >= d->chunk_capacity() || !d->chunk_allocated(bit)) return std::nullopt;
        return chunk_info{page * page_size + std::uint64_t{bit} * d->chunk_size(), d->chunk_size(), d->type_,
                          d->elem_size_, 0, false};
    }
    case page_kind::large_head:
    case page_kind::large_tail: {
        std::uint64_t head = page - (d->kind_ == page_kind::large_tail ? d->words_[0] : 0);
        const page_desc& h = desc_at(head);
        return chunk_info{head * page_size, h.words_[0] * page_size, h.type_, h.elem_size_, h.words_[1], true};
    }
    default:
        return std::nullopt;
    }
}

heap::stats_t heap::stats() const noexcept {
    stats_t s;
    s.page_count = page_count();
    s.reserved_pages = reserved_pages_;
    s.free_pages = free_.total_pages();
    s.small_pages = small_pages_;
    s.large_pages = large_pages_;
    s.system_pages = system_pages_;
    s.meta_pages = meta_pages_.size();
    s.small_chunks = small_chunks_;
    s.large_objects = large_objects_;
    return s;
}

}  // namespace steppe
