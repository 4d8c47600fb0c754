// The resident budget (object_engine.hpp, options::resident_budget): second
// chance over the resident object table at the safe points (the end of commit
// and of rollback), as the PEVM did at full collections (digest 004 §1.13).
//
// At a safe point over the budget:
//   1. every victim of the previous round that nothing used since leaves
//      memory (evict);
//   2. if that is not enough, every evictable object becomes a victim: its
//      header gets `proxy`, so its next use takes the residency check's slow
//      path, which clears the mark (rescue);
//   3. if memory is still over twice the budget, victims leave now until it
//      is back under the budget.
// Evictable (evictable()): persistent, not dirty (no writes are pending at a
// safe point), not pinned; and the scheme can re-point references to it:
// fault_block (the object's own header becomes the fault block: every direct
// pointer to it finds the proxy bit) or id (slots hold oids; the objects whose
// address the program may hold are pinned), not id_self_heal.
#include <unistd.h>

#include <cstring>

#include "objects/object_engine.hpp"

namespace steppe::objects::detail {

bool engine_handle::evictable(const header* h) const noexcept {
    return h->type != header::fault_block_type && h->oid() != 0 &&
           !(h->word & (header::dirty | header::pinned | header::marked));
}

void engine_handle::evict(header* h) {
    std::uint64_t oid = h->oid();
    resident_bytes_ -= heap_->extent_of(h);
    if (scheme_.detect == detection::fault_block) {
        std::uint32_t type = h->type;
        heap_->release(h, sizeof(header) + object_heap::fault_block_body);
        h->word = oid << 16 | std::uint64_t{slot_} << 8 | header::proxy;
        h->type = header::fault_block_type;
        h->count = type;  // what references to it want (T1)
        std::memset(h + 1, 0, object_heap::fault_block_body);
        rot_[oid] = h;
    } else {
        rot_.erase(oid);
        heap_->release(h, 0);
    }
    ++stats_.evicted_objects;
}

void engine_handle::enforce_budget() {
    // id_self_heal, page_fault and eager slots hold addresses nothing can
    // re-point (page_fault's checks never look at a resident object's header).
    if (scheme_.detect == detection::id_self_heal || scheme_.detect == detection::page_fault ||
        swizzle_ == swizzling::eager || resident_bytes() <= budget_)
        return;
    std::vector<header*> victims, candidates;
    for (const auto& [oid, h] : rot_) {
        if (h->word & header::victim) victims.push_back(h);
        else if (evictable(h)) candidates.push_back(h);
    }
    for (header* h : victims) evict(h);
    clear_rot_cache();  // evicted objects, and victims whose next use must reach the table
    if (resident_bytes() <= budget_) return;
    for (header* h : candidates) h->word |= header::proxy | header::victim;
    for (std::size_t i = 0; i < candidates.size() && resident_bytes() > 2 * budget_; ++i) evict(candidates[i]);
}

}  // namespace steppe::objects::detail
