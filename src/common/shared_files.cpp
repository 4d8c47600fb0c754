#include "common/shared_files.hpp"

#include <atomic>

namespace steppe::common {

namespace {

struct shared_file {
    std::atomic<std::uintptr_t> base{0};  // 0: a free slot; set last, cleared first
    std::atomic<std::size_t> bytes{0};
    std::atomic<const char*> path{nullptr};
};
// Each open store maps one reader table.
shared_file g_files[256];

}  // namespace

void note_shared_file(const void* base, std::size_t bytes, const char* path) noexcept {
    for (shared_file& f : g_files) {
        std::uintptr_t free = 0;
        if (f.base.load(std::memory_order_relaxed) != 0) continue;
        // Claimed with a marker first, so two threads never share a slot.
        if (!f.base.compare_exchange_strong(free, 1, std::memory_order_acquire)) continue;
        f.bytes.store(bytes, std::memory_order_relaxed);
        f.path.store(path, std::memory_order_relaxed);
        f.base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_release);
        return;
    }
}

void forget_shared_file(const void* base) noexcept {
    for (shared_file& f : g_files)
        if (f.base.load(std::memory_order_acquire) == reinterpret_cast<std::uintptr_t>(base))
            return f.base.store(0, std::memory_order_release);
}

const char* shared_file_at(std::uintptr_t address) noexcept {
    for (const shared_file& f : g_files) {
        const std::uintptr_t base = f.base.load(std::memory_order_acquire);
        if (base > 1 && address >= base && address - base < f.bytes.load(std::memory_order_relaxed))
            return f.path.load(std::memory_order_relaxed);
    }
    return nullptr;
}

}  // namespace steppe::common
