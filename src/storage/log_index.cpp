#include "storage/log_index.hpp"

#include <algorithm>

namespace steppe::storage {

namespace {
bool by_page(const log_index::entry& a, const log_index::entry& b) { return a.page < b.page; }
}  // namespace

// A new run of the entries (sorted, the last of a page twice kept), then
// merges while the newest run is at least as long as the one after it (N1).
void log_index::add(std::span<const entry> entries) {
    std::vector<entry> run(entries.begin(), entries.end());
    std::stable_sort(run.begin(), run.end(), by_page);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < run.size(); ++i)
        if (i + 1 == run.size() || run[i + 1].page != run[i].page) run[kept++] = run[i];  // the last one wins
    run.resize(kept);
    run.shrink_to_fit();
    for (const entry& e : run)
        if (entry seen; !find(e.page, seen)) ++distinct_;
    runs_.insert(runs_.begin(), std::move(run));
    while (runs_.size() > 1 && runs_[0].size() >= runs_[1].size()) {
        runs_[1] = merge(runs_[0], runs_[1]);
        runs_.erase(runs_.begin());
    }
}

void log_index::absorb(log_index&& newer) {
    if (empty()) {
        runs_ = std::move(newer.runs_);
        distinct_ = newer.distinct_;
    } else {
        add(newer.newest());
    }
    newer.clear();
}

std::vector<log_index::entry> log_index::merge(const std::vector<entry>& newer, const std::vector<entry>& older) {
    std::vector<entry> out;
    out.reserve(newer.size() + older.size());
    std::size_t i = 0, j = 0;
    while (i < newer.size() || j < older.size()) {
        if (j == older.size() || (i < newer.size() && newer[i].page <= older[j].page)) {
            if (j < older.size() && older[j].page == newer[i].page) ++j;  // superseded
            out.push_back(newer[i++]);
        } else {
            out.push_back(older[j++]);
        }
    }
    return out;
}

bool log_index::find(std::uint64_t page, entry& out) const noexcept {
    for (const std::vector<entry>& run : runs_) {
        auto it = std::lower_bound(run.begin(), run.end(), page,
                                   [](const entry& e, std::uint64_t p) { return e.page < p; });
        if (it != run.end() && it->page == page) {
            out = *it;
            return true;
        }
    }
    return false;
}

void log_index::clear() noexcept {
    runs_ = std::vector<std::vector<entry>>();  // gives the memory back (clear() would keep the capacity)
    distinct_ = 0;
}

std::vector<log_index::entry> log_index::newest() const {
    std::vector<entry> all;
    all.reserve(distinct_);
    for_each_newest([&all](const entry& e) { all.push_back(e); });
    return all;
}

std::uint64_t log_index::memory_bytes() const noexcept {
    std::uint64_t bytes = runs_.capacity() * sizeof(std::vector<entry>);
    for (const std::vector<entry>& run : runs_) bytes += run.capacity() * sizeof(entry);
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
