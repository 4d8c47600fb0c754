#include "storage/log_index.hpp"

#include <algorithm>
#include <new>

namespace steppe::storage {

namespace {
bool by_page(const log_index::entry& a, const log_index::entry& b) { return a.page < b.page; }
}  // namespace

// A new run of the entries (sorted, the last of a page twice kept), then
// merges while the newest run is at least as long as the one after it (N1).
// Everything that may throw comes before the index changes (N2).
void log_index::add(std::span<const entry> entries) {
    std::vector<entry> sorted(entries.begin(), entries.end());
    std::stable_sort(sorted.begin(), sorted.end(), by_page);
    run fresh;
    fresh.reserve(sorted.size());
    std::size_t added = 0;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        if (i + 1 < sorted.size() && sorted[i + 1].page == sorted[i].page) continue;  // the last one wins
        if (entry seen; !find(sorted[i].page, seen)) ++added;
        fresh.push_back(sorted[i]);
    }
    runs_.insert(runs_.begin(), std::move(fresh));  // a run's move cannot throw: all or nothing
    distinct_ += added;
    collapse();
}

void log_index::absorb(log_index&& newer) {
    if (!empty()) {
        // Every run of `newer` is newer than every run here: they go in front
        // as they are (no copy), and only the pages new here are counted.
        std::size_t added = 0;
        newer.for_each_newest([&](const entry& e) {
            if (entry seen; !find(e.page, seen)) ++added;
        });
        newer.runs_.reserve(newer.runs_.size() + runs_.size());  // N2: the one allocation, before any change
        newer.distinct_ = distinct_ + added;
        newer.runs_.insert(newer.runs_.end(), std::make_move_iterator(runs_.begin()),
                           std::make_move_iterator(runs_.end()));
    }
    runs_ = std::move(newer.runs_);
    distinct_ = newer.distinct_;
    collapse();
    newer.clear();
}

void log_index::collapse() noexcept {
    for (std::size_t k = 0; k + 1 < runs_.size();) {
        if (runs_[k].size() < runs_[k + 1].size()) {
            ++k;
            continue;
        }
        try {
            runs_[k + 1] = merge(std::move(runs_[k]), std::move(runs_[k + 1]));
        } catch (const std::bad_alloc&) {  // N2: nothing was merged; still N1, only longer lookups
            return;
        }
        runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(k));  // moves runs: cannot throw
        k = k > 0 ? k - 1 : 0;  // the merged run may now be as long as its newer neighbour
    }
}

// N2: out.prepare() is the merge's only allocation, before it reads
// anything. Each step consumes at least one input entry, so when the output
// starts its chunk k it has consumed k chunks' worth of entries, of which the
// inputs have handed over at least k - 1 whole chunks: with the two spares
// prepare() made, a chunk is always there.
log_index::run log_index::merge(run&& newer, run&& older) {
    run out;
    out.prepare(newer.size() + older.size());
    std::size_t i = 0, j = 0;
    while (i < newer.size() || j < older.size()) {
        if (j == older.size() || (i < newer.size() && newer[i].page <= older[j].page)) {
            if (j < older.size() && older[j].page == newer[i].page) ++j;  // superseded
            out.push_back_prepared(newer[i++]);
        } else {
            out.push_back_prepared(older[j++]);
        }
        newer.give_before(i, out);
        older.give_before(j, out);
    }
    out.drop_spares();
    return out;
}

log_index::run::run(const run& other) {
    reserve(other.size());
    for (std::size_t i = 0; i < other.size(); ++i) push_back(other[i]);
}

log_index::run& log_index::run::operator=(const run& other) {
    if (this != &other) *this = run(other);
    return *this;
}

void log_index::run::push_back(const entry& e) {
    const std::size_t at = size_ % chunk_entries;
    if (at == 0) {
        last_capacity_ = std::clamp<std::size_t>(planned_ > size_ ? planned_ - size_ : 1, 1, chunk_entries);
        chunks_.push_back(std::make_unique_for_overwrite<entry[]>(last_capacity_));
    } else if (at == last_capacity_) {  // more than planned: the last chunk becomes a whole one
        auto whole = std::make_unique_for_overwrite<entry[]>(chunk_entries);
        std::copy_n(chunks_.back().get(), at, whole.get());
        chunks_.back() = std::move(whole);
        last_capacity_ = chunk_entries;
    }
    chunks_.back()[at] = e;
    ++size_;
}

void log_index::run::prepare(std::size_t entries) {
    const std::size_t chunks = (entries + chunk_entries - 1) / chunk_entries;
    chunks_.reserve(chunks);
    spares_.reserve(chunks + 2);
    planned_ = entries;
    // One chunk of exactly the entries when they fit in one (a small run
    // takes what it holds); else two whole ones, then the inputs' chunks.
    const std::size_t first = std::min(entries, chunk_entries);
    for (std::size_t k = 0; k < (entries > chunk_entries ? 2u : 1u); ++k)
        spares_.push_back(std::make_unique_for_overwrite<entry[]>(std::max<std::size_t>(first, 1)));
}

void log_index::run::push_back_prepared(const entry& e) noexcept {
    const std::size_t at = size_ % chunk_entries;
    if (at == 0) {
        chunks_.push_back(std::move(spares_.back()));  // reserved in prepare(): no allocation
        spares_.pop_back();
        last_capacity_ = std::min(planned_, chunk_entries);
    }
    chunks_.back()[at] = e;
    ++size_;
}

// A chunk the merge has read to its end holds chunk_entries entries, so it is
// a whole one (a run's smaller last chunk is never read to a multiple of
// chunk_entries): the output can take it as it is.
// (The merge asks at every step, and i stays where it is while the other
// input is read: a chunk given once is null.)
void log_index::run::give_before(std::size_t i, run& to) noexcept {
    if (i % chunk_entries != 0 || i == 0 || i > size_) return;
    std::unique_ptr<entry[]>& chunk = chunks_[i / chunk_entries - 1];
    if (chunk) to.spares_.push_back(std::move(chunk));  // within prepare()'s reserve
}

std::uint64_t log_index::run::memory_bytes() const noexcept {
    std::uint64_t bytes = chunks_.capacity() * sizeof(std::unique_ptr<entry[]>);
    for (std::size_t c = 0; c < chunks_.size(); ++c)
        if (chunks_[c]) bytes += (c + 1 == chunks_.size() ? last_capacity_ : chunk_entries) * sizeof(entry);
    return bytes;
}

bool log_index::run::find(std::uint64_t page, entry& out) const noexcept {
    std::size_t low = 0, high = size_;  // the first entry whose page is >= page lies in [low, high]
    while (low < high) {
        const std::size_t mid = low + (high - low) / 2;
        if ((*this)[mid].page < page) low = mid + 1;
        else high = mid;
    }
    if (low == size_ || (*this)[low].page != page) return false;
    out = (*this)[low];
    return true;
}

bool log_index::find(std::uint64_t page, entry& out) const noexcept {
    for (const run& r : runs_)
        if (r.find(page, out)) return true;
    return false;
}

void log_index::clear() noexcept {
    runs_ = std::vector<run>();  // gives the memory back (clear() would keep the capacity)
    distinct_ = 0;
}

std::vector<log_index::entry> log_index::newest() const {
    std::vector<entry> all;
    all.reserve(distinct_);
    for_each_newest([&all](const entry& e) { all.push_back(e); });
    return all;
}

std::uint64_t log_index::memory_bytes() const noexcept {
    std::uint64_t bytes = runs_.capacity() * sizeof(run);
    for (const run& r : runs_) bytes += r.memory_bytes();
    return bytes;
}

std::vector<std::string> log_index::check() const {
    std::vector<std::string> findings;
    for (std::size_t r = 0; r < runs_.size(); ++r)
        for (std::size_t i = 1; i < runs_[r].size(); ++i)
            if (runs_[r][i - 1].page >= runs_[r][i].page)
                findings.push_back("N1: run " + std::to_string(r) + " is not sorted and unique at entry " +
                                   std::to_string(i));
    if (const std::size_t held = newest().size(); held != distinct_)
        findings.push_back("N1: the index counts " + std::to_string(distinct_) + " pages but holds " +
                           std::to_string(held));
    return findings;
}

}  // namespace steppe::storage
