#include "common/sparse_mapping.hpp"

#include <steppe/error.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace steppe::common {

void* map_sparse(std::size_t bytes, int prot, int flags, int fd, long offset) noexcept {
    void* p = ::mmap(nullptr, bytes, prot, flags, fd, offset);
    if (p != MAP_FAILED) {
        const int saved = errno;
        ::munlock(p, bytes);  // a no-op unless the process locks new mappings on fault
        errno = saved;
    }
    return p;
}

void refuse_mapping_lock(const std::string& path) {
    const long page = ::sysconf(_SC_PAGESIZE);
    void* probe = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    if (probe == MAP_FAILED) return;  // the maps that follow report what is wrong
    unsigned char resident = 0;
    const bool populated = ::mincore(probe, static_cast<std::size_t>(page), &resident) == 0 && (resident & 1) != 0;
    ::munmap(probe, static_cast<std::size_t>(page));
    if (populated)
        throw error(errc::unsupported,
                    "store " + path +
                        ": this process locks every new mapping into memory as it is made (mlockall with "
                        "MCL_FUTURE), and steppe reserves sparse tables and address space far larger than the "
                        "store, which would all become resident at once. Lock with mlockall(MCL_CURRENT | "
                        "MCL_FUTURE | MCL_ONFAULT) instead (steppe unlocks its own mappings, which follow the "
                        "store's resident budget), or lock only what needs it with mlock()");
}

}  // namespace steppe::common
