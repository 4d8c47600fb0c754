// sync_counter.cpp — counts every fsync, fdatasync, msync(MS_SYNC) and
// sync_file_range the benchmark process makes, its libraries included.
//
// The executable defines these functions and is linked with exported symbols
// (ENABLE_EXPORTS), so the dynamic linker binds liblmdb's fdatasync and
// libpmem's msync to the definitions here, which count and forward to libc's
// (dlsym RTLD_NEXT). steppe is linked statically and calls them directly.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "harness.hpp"

namespace {

std::atomic<std::uint64_t> g_fsync{0}, g_fdatasync{0}, g_msync{0}, g_sync_file_range{0};

template <class F>
F real(const char* name) {
    void* f = ::dlsym(RTLD_NEXT, name);
    if (!f) {
        std::fprintf(stderr, "sync_counter: dlsym(%s) failed\n", name);
        std::abort();
    }
    return reinterpret_cast<F>(f);
}

}  // namespace

extern "C" {

int fsync(int fd) {
    static auto f = real<int (*)(int)>("fsync");
    g_fsync.fetch_add(1, std::memory_order_relaxed);
    return f(fd);
}

int fdatasync(int fd) {
    static auto f = real<int (*)(int)>("fdatasync");
    g_fdatasync.fetch_add(1, std::memory_order_relaxed);
    return f(fd);
}

int msync(void* addr, size_t length, int flags) {
    static auto f = real<int (*)(void*, size_t, int)>("msync");
    if (flags & MS_SYNC) g_msync.fetch_add(1, std::memory_order_relaxed);
    return f(addr, length, flags);
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    static auto f = real<int (*)(int, off64_t, off64_t, unsigned int)>("sync_file_range");
    g_sync_file_range.fetch_add(1, std::memory_order_relaxed);
    return f(fd, offset, nbytes, flags);
}

}  // extern "C"

namespace bench {

sync_counts current_syncs() noexcept {
    return {g_fsync.load(std::memory_order_relaxed), g_fdatasync.load(std::memory_order_relaxed),
            g_msync.load(std::memory_order_relaxed), g_sync_file_range.load(std::memory_order_relaxed)};
}

}  // namespace bench
