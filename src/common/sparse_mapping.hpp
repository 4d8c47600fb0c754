// Sparse mappings and a process that locks its memory (mlockall).
//
// steppe maps tables sized for the largest store (NORESERVE: only what is
// touched takes memory) and arenas of terabytes of address space. Under
// mlockall(MCL_FUTURE) every new mapping is made resident and locked by the
// mmap itself, so one such table would take all of its size: an open would
// take the machine's memory, or be killed by its cgroup. Under
// mlockall(MCL_FUTURE | MCL_ONFAULT) pages are locked as they are touched,
// and locked pages cannot be dropped (madvise(MADV_DONTNEED) is EINVAL), so
// eviction would fail. So:
//   - every sparse mapping steppe makes goes through map_sparse, which
//     unlocks it at once (munlock of an untouched range changes only its
//     flags): a store's memory follows its resident budget, not the lock;
//   - an open first calls refuse_mapping_lock, which stops with
//     `unsupported`, saying what to do instead, when new mappings would be
//     made resident at mmap, before anything large is mapped.
// map_sparse is async-signal-safe (two system calls: the fault handler may
// make an arena); refuse_mapping_lock is not, and runs only at open.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "common/page_size.hpp"

namespace steppe::common {

// mmap(nullptr, bytes, prot, flags, fd, offset), then munlock of the result;
// MAP_FAILED (errno set) when the mmap fails.
void* map_sparse(std::size_t bytes, int prot, int flags, int fd = -1, long offset = 0) noexcept;

// `count` T's in a sparse mapping (map_sparse, NORESERVE), each all zero
// bytes until written: memory only for the pages touched, and none zeroed
// at construction (a table as large as the resident budget would be a
// memset of megabytes at every open). T's all-zero bytes must be its empty
// value (integers, std::atomic of them). mapped() is false when the mmap
// failed.
template <class T>
class sparse_array {
    static_assert(std::is_trivially_destructible_v<T>, "unmapped, never destroyed");

public:
    sparse_array() = default;
    explicit sparse_array(std::size_t count) noexcept : bytes_(count * sizeof(T)) {
        void* p = map_sparse(bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
        if (p != MAP_FAILED) items_ = static_cast<T*>(p);
    }
    ~sparse_array() {
        if (items_) ::munmap(items_, bytes_);
    }
    sparse_array(sparse_array&& other) noexcept
        : items_(std::exchange(other.items_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    sparse_array& operator=(sparse_array&& other) noexcept {
        std::swap(items_, other.items_);
        std::swap(bytes_, other.bytes_);
        return *this;
    }
    bool mapped() const noexcept { return items_ != nullptr; }
    T& operator[](std::size_t i) const noexcept { return items_[i]; }
    // The memory the first `written` items take once written: whole pages.
    static std::uint64_t memory_bytes(std::uint64_t written) noexcept {
        return (written * sizeof(T) + page_size - 1) / page_size * page_size;
    }

private:
    T* items_ = nullptr;
    std::size_t bytes_ = 0;
};

// Throws errc::unsupported naming `path` when a new mapping of this process
// is made resident by the mmap (mlockall with MCL_FUTURE and without
// MCL_ONFAULT).
void refuse_mapping_lock(const std::string& path);

}  // namespace steppe::common
