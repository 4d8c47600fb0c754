// A cache prefetch that survives optimisation.
#pragma once

namespace steppe::common {

// Starts loading the cache line at `p`. GCC counts __builtin_prefetch as
// having no side effect, so a loop that only prefetches (a pass that asks
// for all of a page's pointer targets before using any) is deleted as a
// loop without effect (-ffinite-loops); the empty asm statement keeps it.
inline void prefetch(const void* p) noexcept {
    __builtin_prefetch(p);
    asm volatile("" : : "r"(p));
}

}  // namespace steppe::common
