#include "support/page_cache.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "storage/io.hpp"

namespace steppe::test {

void drop_from_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << path;
    const bool synced = ::fdatasync(fd) == 0, dropped = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    ::close(fd);
    ASSERT_TRUE(synced) << path;
    ASSERT_TRUE(dropped) << path;
}

std::uint64_t device_read_ahead(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0) << path;
    const std::uint64_t bytes = fd < 0 ? 0 : storage::device_read_ahead_of(fd);
    if (fd >= 0) ::close(fd);
    return bytes;
}

std::size_t system_page_size() { return std::size_t(::sysconf(_SC_PAGESIZE)); }

std::size_t cached_pages(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0) << path;
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0);
    const auto bytes = std::size_t(st.st_size);
    if (bytes == 0) {
        ::close(fd);
        return 0;
    }
    void* at = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(at, MAP_FAILED);
    const std::size_t page = system_page_size();
    std::vector<unsigned char> in((bytes + page - 1) / page);
    EXPECT_EQ(::mincore(at, bytes, in.data()), 0);
    ::munmap(at, bytes);
    return std::size_t(std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; }));
}

std::size_t cached_pages_settled(const std::string& path) {
    std::size_t before = cached_pages(path);
    for (int i = 0; i < 40; ++i) {
        ::usleep(50'000);
        const std::size_t now = cached_pages(path);
        if (now == before && i >= 3) return now;
        before = now;
    }
    return before;
}

}  // namespace steppe::test
