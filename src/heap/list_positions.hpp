// Each page's position in its non-full list (1 + index, 0 = on no list),
// kept only for the runs of pages where some page is on a list.
//
// A dense array cost 4 bytes for every page of the store (8 MiB at 8 GiB),
// while a list holds the pages with free chunks: the pages being filled, and
// those a free left gaps in. Most pages are full, so most positions are 0:
// they are kept in chunks of 1,024 pages, and a chunk whose positions are
// all 0 is not held (an 8 GiB store's build under a 64 MiB budget left the
// heap 8.4 MiB of positions of 12.3 MiB).
//
// Not thread-safe: the heap changes and reads the lists only where no fault
// runs (allocation, free, commit, check).
#pragma once

#include <cstdint>
#include <vector>

namespace steppe::heap_detail {

class list_positions {
public:
    static constexpr std::uint64_t chunk_pages = 1024;

    std::uint64_t size() const noexcept { return size_; }
    // Covers pages [0, pages); pages past it (after a shrink) are forgotten.
    void resize(std::uint64_t pages) {
        for (std::uint64_t p = pages; p < size_ && p % chunk_pages != 0; ++p) set(p, 0);  // the kept chunk's tail
        size_ = pages;
        chunks_.resize((pages + chunk_pages - 1) / chunk_pages);
        held_.resize(chunks_.size());
    }
    std::uint32_t get(std::uint64_t page) const noexcept {
        const std::vector<std::uint32_t>& chunk = chunks_[page / chunk_pages];
        return chunk.empty() ? 0 : chunk[page % chunk_pages];
    }
    void set(std::uint64_t page, std::uint32_t position) {
        const std::uint64_t c = page / chunk_pages;
        std::vector<std::uint32_t>& chunk = chunks_[c];
        if (chunk.empty()) {
            if (position == 0) return;
            chunk.assign(chunk_pages, 0);
        }
        std::uint32_t& at = chunk[page % chunk_pages];
        if ((at != 0) != (position != 0)) held_[c] = static_cast<std::uint16_t>(position != 0 ? held_[c] + 1 : held_[c] - 1);
        at = position;
        if (held_[c] == 0) std::vector<std::uint32_t>().swap(chunk);  // gives the chunk back
    }
    std::uint64_t memory_bytes() const noexcept {
        std::uint64_t bytes = chunks_.capacity() * sizeof(chunks_[0]) + held_.capacity() * sizeof(held_[0]);
        for (const std::vector<std::uint32_t>& chunk : chunks_) bytes += chunk.capacity() * sizeof(std::uint32_t);
        return bytes;
    }

private:
    std::uint64_t size_ = 0;
    std::vector<std::vector<std::uint32_t>> chunks_;  // empty: every position in it is 0
    std::vector<std::uint16_t> held_;                 // per chunk: how many positions are not 0
};

}  // namespace steppe::heap_detail
