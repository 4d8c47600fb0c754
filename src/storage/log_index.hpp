// steppe::storage::log_index — where the log holds pages: page -> where
// its newest frame's payload lies (a whole image or a difference) and the
// image's checksum. The storage
// keeps two: the committed pages since the last checkpoint, and the pages a
// transaction in progress spilled (storage::spill).
//
// 16 bytes a page (the unordered_maps they replaced cost about 56: a third
// of a 64 MiB budget for a transaction that rewrites a 1 GiB store, and as
// much again when its commit moved them to the committed index). Entries
// sit in sorted runs, newest run first; a run no longer than the one before
// it is merged into it (newer entries win), like a binary counter, so there
// are O(log n) runs, a lookup is O(log² n) and allocates nothing (the fault
// path looks pages up), and add() moves each entry O(log n) times.
//
// A run is kept in chunks of 32 KiB, and a merge hands its inputs' chunks
// to its output as it consumes them, so merging two runs holds about the
// entries of both, not twice that: with whole vectors, the last merge of a
// transaction that rewrote an 8 GiB store built a 32 MiB run while its two
// 16 MiB halves lived, and that was the peak of the rewrite under a 64 MiB
// budget.
//
// Allocation failures (N2): add() and absorb() either change nothing and
// throw, or complete. A merge allocates everything it needs before it
// consumes anything (its output's chunk table and two chunks; the rest are
// the inputs' chunks it has read), so it cannot stop half-way with inputs it
// has emptied (an index left so ended the process at its next lookup); a
// merge that cannot start leaves its runs unmerged, which only makes
// lookups slower, and the next add() tries again.
//
// (N1) Each run is sorted by page, without a page twice; runs_ is ordered
//      newest first, and a page's newest entry is in the first run that
//      has it. distinct() is the number of pages some run has. check()
//      checks both.
//
// Not thread-safe: storage guards the spilled pages' index with its spin
// lock, and changes the committed one only while no fault reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace steppe::storage {

class log_index {
public:
    struct entry {
        std::uint32_t page;  // < max_pages (2^32)
        std::uint32_t sum;
        std::uint64_t where;  // location(): packed to keep an entry 16 bytes
    };
    // Where a page version's payload lies in the log: a whole image, or a
    // difference of `diff_bytes` against the main file's page.
    struct location {
        std::uint64_t offset;  // < 2^48
        bool diff;
        std::uint32_t diff_bytes;  // <= max_diff_bytes < 2^15
    };
    static std::uint64_t pack(const location& l) noexcept {
        return l.offset | (l.diff ? std::uint64_t{1} << 63 | std::uint64_t{l.diff_bytes} << 48 : 0);
    }
    static location unpack(std::uint64_t where) noexcept {
        return {where & ((std::uint64_t{1} << 48) - 1), (where >> 63) != 0,
                static_cast<std::uint32_t>((where >> 48) & 0x7fff)};
    }
    // Adds a spill's entries (a page may come again: the newer wins).
    void add(std::span<const entry> entries);
    // Takes every entry of `newer` as newer than this index's, leaving
    // `newer` empty: a commit moves its spilled pages to the committed
    // index. Into an empty index (the first commit after a checkpoint) the
    // runs move without a copy; a copy of a transaction that rewrote an
    // 8 GiB store was 32 MiB, twice over (newest(), then add's run).
    void absorb(log_index&& newer);
    bool find(std::uint64_t page, entry& out) const noexcept;
    std::size_t distinct() const noexcept { return distinct_; }
    bool empty() const noexcept { return distinct_ == 0; }
    void clear() noexcept;
    // Every page's newest entry, ascending by page.
    std::vector<entry> newest() const;
    // Calls f(entry) for every page's newest entry, ascending by page, with
    // no copy of the index: a checkpoint walks it (a copy was 32 MiB for a
    // transaction that rewrote an 8 GiB store). O(entries x runs).
    template <class F>
    void for_each_newest(F&& f) const {
        std::vector<std::size_t> at(runs_.size(), 0);
        for (;;) {
            std::size_t first = runs_.size();  // the run whose next page is lowest; the newest such run
            for (std::size_t r = 0; r < runs_.size(); ++r)
                if (at[r] < runs_[r].size() &&
                    (first == runs_.size() || runs_[r][at[r]].page < runs_[first][at[first]].page))
                    first = r;
            if (first == runs_.size()) return;
            const entry e = runs_[first][at[first]];
            for (std::size_t r = 0; r < runs_.size(); ++r)
                if (at[r] < runs_[r].size() && runs_[r][at[r]].page == e.page) ++at[r];  // older versions
            f(e);
        }
    }
    std::uint64_t memory_bytes() const noexcept;
    std::vector<std::string> check() const;  // N1 (N2 is kept by construction; its test fails allocations)

private:
    // Entries sorted by page, in chunks of chunk_entries.
    class run {
    public:
        static constexpr std::size_t chunk_entries = 2048;
        run() = default;
        run(const run& other);  // a reader's refresh starts from its older snapshot's index
        run& operator=(const run& other);
        run(run&&) noexcept = default;
        run& operator=(run&&) noexcept = default;
        ~run() = default;
        std::size_t size() const noexcept { return size_; }
        const entry& operator[](std::size_t i) const noexcept { return chunks_[i / chunk_entries][i % chunk_entries]; }
        // Sizes the last chunk to `entries` (a bound, not a promise): a small
        // run takes what it holds, not a whole chunk.
        void reserve(std::size_t entries) noexcept { planned_ = entries; }
        void push_back(const entry& e);
        // For a merge's output: room for `entries` with no allocation after
        // this (throws, changing nothing, if it cannot get it): the chunk
        // table, and spare chunks enough until the inputs' chunks come in.
        void prepare(std::size_t entries);
        // push_back on what prepare() and give() provided: allocates nothing.
        void push_back_prepared(const entry& e) noexcept;
        // A merge has read the entries before i: the chunk wholly before it
        // (once, as i reaches its end) goes to `to` as a spare.
        void give_before(std::size_t i, run& to) noexcept;
        void drop_spares() noexcept { decltype(spares_)().swap(spares_); }  // what a merge did not need
        std::uint64_t memory_bytes() const noexcept;
        bool find(std::uint64_t page, entry& out) const noexcept;

    private:
        std::vector<std::unique_ptr<entry[]>> chunks_;  // all of chunk_entries but the last
        std::vector<std::unique_ptr<entry[]>> spares_;  // a merge's output's: chunk_entries each
        std::size_t size_ = 0;
        std::size_t planned_ = 0;
        std::size_t last_capacity_ = 0;  // of chunks_.back()
    };
    static run merge(run&& newer, run&& older);
    // Merges neighbouring runs while a run is at least as long as the older
    // one after it, so sizes grow from newest to oldest (O(log n) runs);
    // stops, leaving them as they are, where a merge cannot get its memory.
    void collapse() noexcept;
    std::vector<run> runs_;  // newest first
    std::size_t distinct_ = 0;
};

}  // namespace steppe::storage
