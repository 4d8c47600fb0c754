// The resident budget (object_engine.hpp, options::resident_budget): the
// PEVM's eviction policies (digest 004 §1.13, options::eviction_policy) over
// the resident object table at the safe points (the end of commit and of
// rollback), as the PEVM evicted only at full collections.
//
// At a safe point over the budget, by policy:
//   second_chance (the default)
//     1. every victim of the previous round that nothing used since leaves
//        memory (evict);
//     2. if that is not enough, every evictable object becomes a victim: its
//        header gets `proxy`, so its next use takes the residency check's
//        slow path, which clears the mark (rescue);
//     3. if memory is still over twice the budget, victims leave now until it
//        is back under the budget.
//   total   every evictable object leaves.
//   random  evictable objects drawn at random leave until memory is under the
//           budget (or none is left).
//   none    nothing leaves; memory grows past the budget.
// Evictable (evictable()): persistent, not dirty (no writes are pending at a
// safe point), not pinned; and the scheme can re-point references to it
// (can_evict()): fault_block (the object's own header becomes the fault
// block: every direct pointer to it finds the proxy bit) or id (slots hold
// oids; the objects whose address the program may hold are pinned), not
// id_self_heal, page_fault or eager swizzling.
#include <cstring>

#include "objects/object_engine.hpp"

namespace steppe::objects {

const char* to_string(options::eviction_policy p) noexcept {
    switch (p) {
        case options::eviction_policy::second_chance: return "second_chance";
        case options::eviction_policy::total: return "total";
        case options::eviction_policy::random: return "random";
        case options::eviction_policy::none: return "none";
    }
    return "unknown";
}

}  // namespace steppe::objects

namespace steppe::objects::detail {

using policy = options::eviction_policy;

bool engine_handle::can_evict() const noexcept {
    // id_self_heal, page_fault and eager slots hold addresses nothing can
    // re-point (page_fault's checks never look at a resident object's header).
    return scheme_.detect != detection::id_self_heal && scheme_.detect != detection::page_fault &&
           swizzle_ != swizzling::eager;
}

void engine_handle::check_eviction_policy() const {
    policy p = options_.eviction;
    if (p != policy::second_chance && p != policy::total && p != policy::random && p != policy::none)
        throw error(errc::invalid_argument, "object store " + storage_->path() + ": eviction policy " +
                                                std::to_string(static_cast<unsigned>(p)) +
                                                " is none of second_chance, total, random, none");
    // placement::in_store keeps no objects in the heap: its segment buffers
    // leave least recently used first past the budget (in_store.cpp).
    if (p != policy::second_chance && options_.place == placement::in_store)
        throw error(errc::invalid_argument, "object store " + storage_->path() + ": eviction " + to_string(p) +
                                                " does not apply to placement in_store, whose segment buffers "
                                                "leave least recently used first; leave options::eviction at "
                                                "its default");
    // The default (second_chance) stays silent where nothing can leave, as
    // before the policies existed; a policy asked for by name must not be.
    if ((p == policy::total || p == policy::random) && !can_evict())
        throw error(errc::invalid_argument,
                    "object store " + storage_->path() + ": eviction " + to_string(p) + " needs a scheme that can " +
                        "re-point references to an object that leaves; " + to_string(scheme_.detect) +
                        " with swizzling " + to_string(swizzle_) + " keeps every object in memory (use eviction " +
                        "none, or build with fault_block or id and swizzling lazy or opportunistic)");
}

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
        // The table keeps its entry: it already names h (R1), now a fault
        // block. (Re-inserting it cost a hash lookup per object, a quarter
        // of a random eviction's time at OO7 medium.)
    } else {
        rot_.erase(oid);
        heap_->release(h, 0);
    }
    ++stats_.evicted_objects;
}

void engine_handle::enforce_budget() {
    if (!can_evict() || options_.eviction == policy::none || resident_bytes() <= budget_) return;
    switch (options_.eviction) {
        case policy::second_chance: second_chance(); break;
        case policy::total: {
            std::vector<header*> all;  // evict() changes the table: collect first
            for (const auto& [oid, h] : rot_)
                if (evictable(h)) all.push_back(h);
            for (header* h : all) evict(h);
            break;
        }
        case policy::random: evict_at_random(); break;
        case policy::none: break;
    }
    clear_rot_cache();  // evicted objects, and victims whose next use must reach the table
}

void engine_handle::second_chance() {
    std::vector<header*> victims, candidates;
    for (const auto& [oid, h] : rot_) {
        if (h->word & header::victim) victims.push_back(h);
        else if (evictable(h)) candidates.push_back(h);
    }
    for (header* h : victims) evict(h);
    if (resident_bytes() <= budget_) return;
    for (header* h : candidates) h->word |= header::proxy | header::victim;
    for (std::size_t i = 0; i < candidates.size() && resident_bytes() > 2 * budget_; ++i) evict(candidates[i]);
}

void engine_handle::evict_at_random() {
    std::vector<header*> candidates;
    for (const auto& [oid, h] : rot_)
        if (evictable(h)) candidates.push_back(h);
    // Draw without replacement (a partial Fisher-Yates from the end); the
    // generator is xorshift64 with a fixed seed, so a run repeats exactly.
    for (std::size_t left = candidates.size(); left > 0 && resident_bytes() > budget_; --left) {
        eviction_random_ ^= eviction_random_ << 13;
        eviction_random_ ^= eviction_random_ >> 7;
        eviction_random_ ^= eviction_random_ << 17;
        std::size_t pick = static_cast<std::size_t>(eviction_random_ % left);
        evict(candidates[pick]);
        candidates[pick] = candidates[left - 1];
    }
}

}  // namespace steppe::objects::detail
