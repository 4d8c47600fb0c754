#include "page/cooling.hpp"

#include <steppe/error.hpp>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/sparse_mapping.hpp"
#include "common/system_error.hpp"

namespace steppe::page {

namespace {

// NORESERVE: only the parts touched cost memory.
void* map_table(std::uint64_t bytes, const char* what) {
    void* p = common::map_sparse(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        common::throw_system_error("mmap", errno, std::string("the cooling stage's ") + what + " (" +
                                                      std::to_string(bytes) + " bytes)");
    return p;
}

}  // namespace

cooling::cooling(std::size_t capacity, std::uint64_t pages)
    : capacity_(std::clamp<std::size_t>(capacity, 1, max_capacity)), pages_(pages) {
    pool_ = static_cast<std::byte*>(map_table(capacity_ * page_bytes, "pages"));
    try {
        words_ = static_cast<std::atomic<std::uint64_t>*>(map_table(capacity_ * sizeof(std::uint64_t), "slots"));
        entries_ = static_cast<std::atomic<std::uint32_t>*>(map_table(pages * sizeof(std::uint32_t), "entries"));
    } catch (...) {
        if (words_) ::munmap(words_, capacity_ * sizeof(std::uint64_t));
        ::munmap(pool_, capacity_ * page_bytes);
        throw;
    }
}

cooling::~cooling() {
    ::munmap(entries_, pages_ * sizeof(std::uint32_t));
    ::munmap(words_, capacity_ * sizeof(std::uint64_t));
    ::munmap(pool_, capacity_ * page_bytes);
}

// A free slot, or one whose page this cooler takes out of the pool (the
// page leaves memory); not one a rewarm or another cooler holds. `g` gets
// the slot's generation.
bool cooling::take_slot(std::size_t slot, std::uint32_t& g) noexcept {
    std::uint64_t word = words_[slot].load(std::memory_order_acquire);
    g = generation(word);
    if (word & claimed) return false;
    if ((word & page_mask) == 0)
        return words_[slot].compare_exchange_strong(word, claimed | with_generation(g), std::memory_order_acq_rel);
    std::uint32_t mine = entry_of(g, slot);
    if (!entries_[(word & page_mask) - 1].compare_exchange_strong(mine, 0, std::memory_order_acq_rel)) return false;
    words_[slot].store(claimed | with_generation(g), std::memory_order_release);  // nobody else can reach it now
    return true;
}

// A page that has an entry is cooling already (not resident), or being
// claimed by another cooler: it gets no second slot, or its entry would
// name the new one while the old still names it (C1 broken; a rewarm could
// then copy another page's bytes). The ring may name a page twice (a page
// dropped and filled again is recorded again), so drop_clean can be asked
// for a page that is cooling.
std::size_t cooling::claim(std::uint64_t page) noexcept {
    if (entries_[page].load(std::memory_order_acquire) != 0) return no_slot;
    for (std::size_t tries = 0; tries < 64; ++tries) {
        const std::size_t slot = hand_.fetch_add(1, std::memory_order_relaxed) % capacity_;
        std::uint32_t g;
        if (!take_slot(slot, g)) continue;
        ++g;
        // The word before the entry (C1): a rewarm that takes the entry finds the slot's word its own.
        words_[slot].store(claimed | with_generation(g) | (page + 1), std::memory_order_release);
        std::uint32_t none = 0;
        if (entries_[page].compare_exchange_strong(none, entry_of(g, slot), std::memory_order_acq_rel)) return slot;
        words_[slot].store(with_generation(g), std::memory_order_release);  // another cooler claimed the page first
        return no_slot;
    }
    return no_slot;
}

void cooling::settle(std::size_t slot, std::uint64_t page, bool left) noexcept {
    std::uint64_t word = words_[slot].load(std::memory_order_acquire);
    if (!left) {
        entries_[page].store(0, std::memory_order_release);  // resident: no rewarm could take it
        words_[slot].store(with_generation(generation(word)), std::memory_order_release);
        return;
    }
    cooled_.fetch_add(1, std::memory_order_relaxed);
    // A rewarm may have freed the slot already (the page faulted back at once).
    if (word & claimed) words_[slot].compare_exchange_strong(word, word & ~claimed, std::memory_order_acq_rel);
}

bool cooling::rewarm(std::uint64_t page, std::byte* out) noexcept {
    if (page >= pages_ || entries_[page].load(std::memory_order_relaxed) == 0) return false;
    const std::uint32_t entry = entries_[page].exchange(0, std::memory_order_acq_rel);
    if (entry == 0) return false;  // a cooler took its slot just now
    const std::size_t slot = slot_of(entry);
    std::memcpy(out, bytes(slot), page_bytes);
    words_[slot].store(with_generation(entry >> slot_bits), std::memory_order_release);
    rewarmed_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void cooling::clear() noexcept {
    for (std::size_t slot = 0; slot < capacity_; ++slot) {
        const std::uint64_t word = words_[slot].load(std::memory_order_relaxed);
        if (word & page_mask) entries_[(word & page_mask) - 1].store(0, std::memory_order_relaxed);
        words_[slot].store(with_generation(generation(word)), std::memory_order_release);
    }
}

std::uint64_t cooling::memory_bytes() const noexcept {
    const std::uint64_t used = std::min<std::uint64_t>(hand_.load(std::memory_order_relaxed), capacity_);
    return used * page_bytes + (used * sizeof(std::uint64_t) + page_bytes - 1) / page_bytes * page_bytes;
}

std::vector<std::uint64_t> cooling::pages() const {
    std::vector<std::uint64_t> out;
    for (std::size_t slot = 0; slot < capacity_; ++slot)
        if (const std::uint64_t word = words_[slot].load(std::memory_order_acquire); word & page_mask)
            out.push_back((word & page_mask) - 1);
    return out;
}

std::vector<std::string> cooling::check_invariants() const {
    std::vector<std::string> findings;
    for (std::size_t slot = 0; slot < capacity_; ++slot) {
        const std::uint64_t word = words_[slot].load(std::memory_order_acquire);
        if (word & claimed) {
            findings.push_back("C1: slot " + std::to_string(slot) + " is claimed with no cooling under way");
            continue;
        }
        if ((word & page_mask) == 0) continue;
        const std::uint64_t page = (word & page_mask) - 1;
        const std::uint32_t entry = entries_[page].load(std::memory_order_acquire);
        if (entry != entry_of(generation(word), slot))
            findings.push_back("C1: slot " + std::to_string(slot) + " holds page " + std::to_string(page) +
                               ", whose entry names " +
                               (entry ? "slot " + std::to_string(slot_of(entry)) : std::string("none")));
    }
    return findings;
}

}  // namespace steppe::page
