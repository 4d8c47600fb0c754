// The checkers of the page engine's residency invariants R1-R7, R9 and R10 (pager.hpp),
// run between operations (under a pause, no other thread touching the
// store) by check_invariants(), with the checkers of what they build on: the
// page map (P1-P2), the fault space (I1-I7), the residency ring (Q1) and
// the cooling pool (C1).
// They read the fault space's resident pages and the ring's entries, never
// the store's memory, so checking faults nothing in and changes nothing.
#include <algorithm>
#include <set>

#include "common/hex.hpp"
#include "page/pager.hpp"

namespace steppe::page {

namespace {

const char* what_is(translate::page_map::kind k) {
    switch (k) {
    case translate::page_map::kind::page: return "a page";
    case translate::page_map::kind::guard: return "a guard page";
    case translate::page_map::kind::retired: return "a retired range";
    case translate::page_map::kind::none: break;
    }
    return "address space no unit was given";
}

bool contains(const std::vector<std::uintptr_t>& sorted, std::uintptr_t v) {
    return std::binary_search(sorted.begin(), sorted.end(), v);
}

}  // namespace

std::vector<std::string> pager::check_invariants() const {
    std::vector<std::string> findings;
    for (auto& f : map_->check_invariants(heap_->page_count())) findings.push_back("page map: " + f);
    for (auto& f : space_->check_invariants()) findings.push_back("fault space: " + f);
    for (auto& f : check_residency()) findings.push_back("residency: " + f);
    return findings;
}

std::vector<std::string> pager::check_residency() const {
    std::vector<std::string> findings;
    const std::vector<std::uintptr_t> resident = space_->resident_pages();
    std::vector<std::uintptr_t> ring;
    if (resident_) {
        findings = resident_->check_invariants();
        ring = resident_->recorded();
        check_ring(ring, findings);
        std::sort(ring.begin(), ring.end());
    }
    check_resident(resident, ring, findings);
    check_written(resident, findings);
    check_new(resident, findings);
    check_spilled(findings);
    check_cooling(findings);
    // R9: this runs under a pause, so no faulting thread may be dropping.
    if (const int dropping = fault_drops_.load(std::memory_order_seq_cst); dropping != 0)
        findings.push_back("R9: " + std::to_string(dropping) + " faulting threads drop pages under a pause");
    // R10: nor may the load-ahead thread be loading a page (it may have
    // announced one, and will see the pause and retreat).
    if (loading_inside_.load(std::memory_order_seq_cst))
        findings.push_back("R10: the load-ahead thread loads a page under a pause");
    return findings;
}

// R1 and R6, over every resident page.
void pager::check_resident(const std::vector<std::uintptr_t>& resident, const std::vector<std::uintptr_t>& ring,
                           std::vector<std::string>& findings) const {
    const std::set<std::uint64_t> fresh(txn_new_.begin(), txn_new_.end());
    const bool ring_complete = resident_ && resident_->unrecorded() == 0;
    for (std::uintptr_t v : resident) {
        const auto where = map_->lookup(v);
        if (where.what != translate::page_map::kind::page) {
            findings.push_back("R1: " + common::hex(v) + " is resident but is " + what_is(where.what));
            continue;
        }
        const heap::page_desc* d = heap_->describe(where.page);
        if (ring_complete && d && d->is_data() && !fresh.count(where.page) && !contains(ring, v))
            findings.push_back("R6: page " + std::to_string(where.page) + " at " + common::hex(v) +
                               " is resident but not in the residency ring: it could never be evicted");
    }
}

// R2: no write is lost.
void pager::check_written(const std::vector<std::uintptr_t>& resident, std::vector<std::string>& findings) const {
    if (!std::is_sorted(unwritten_.begin(), unwritten_.end()) ||
        std::adjacent_find(unwritten_.begin(), unwritten_.end()) != unwritten_.end())
        findings.push_back("R2: the written pages (unwritten_) are not sorted and unique");
    for (std::uintptr_t v : unwritten_)
        if (!contains(resident, v) && map_->lookup(v).what != translate::page_map::kind::retired)
            findings.push_back("R2: " + common::hex(v) +
                               ", written since the last commit, is neither resident nor retired");
}

// R3: new pages stay until the commit or the log has them.
void pager::check_new(const std::vector<std::uintptr_t>& resident, std::vector<std::string>& findings) const {
    for (std::uint64_t page : txn_new_) {
        const heap::page_desc* d = heap_->describe(page);
        if (!d || !d->is_data() || storage_->is_pending(page)) continue;
        const std::uintptr_t v = map_->virtual_of(page);
        if (!contains(resident, v))
            findings.push_back("R3: new page " + std::to_string(page) + " (at " + common::hex(v) +
                               ") is not resident, and the log does not hold it");
        if (fresh_.mapped() && !is_new(v))
            findings.push_back("R3: new page " + std::to_string(page) + " is not marked new: an evictor may drop it");
    }
}

// R4: no page the log holds for the transaction is marked new, and no more
// new pages were spilled than the transaction made.
void pager::check_spilled(std::vector<std::string>& findings) const {
    for (std::uint64_t page : storage_->pending_pages())
        if (fresh_.mapped() && fresh_.test(page, std::memory_order_acquire))
            findings.push_back("R4: page " + std::to_string(page) + " is in the log but still marked new");
    if (new_spilled_ > txn_new_.size())
        findings.push_back("R4: " + std::to_string(new_spilled_) + " new pages spilled, but the transaction made " +
                           std::to_string(txn_new_.size()));
}

// R5: what the ring names.
void pager::check_ring(const std::vector<std::uintptr_t>& ring, std::vector<std::string>& findings) const {
    for (std::uintptr_t v : ring) {
        if (v == 0) continue;  // Q1's finding
        const auto what = map_->lookup(v).what;
        if (v % translate::page_size != 0 || what == translate::page_map::kind::guard ||
            what == translate::page_map::kind::none)
            findings.push_back("R5: the residency ring names " + common::hex(v) + ", " + what_is(what) +
                               (v % translate::page_size ? ", not page-aligned" : ""));
    }
}

// C1 and R7: a cooling page is missing, where the page map puts it.
void pager::check_cooling(std::vector<std::string>& findings) const {
    if (!cooling_) return;
    for (auto& f : cooling_->check_invariants()) findings.push_back(f);
    for (std::uint64_t page : cooling_->pages()) {
        const std::uintptr_t v = map_->virtual_of(page);
        if (v == 0 || !space_->is_missing(v))
            findings.push_back("R7: page " + std::to_string(page) + " is cooling but " +
                               (v ? "not missing at " + common::hex(v) : std::string("has no range")) +
                               ": its next fill would not take its bytes back");
    }
}

}  // namespace steppe::page
