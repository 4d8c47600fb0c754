#include "common/sigsafe.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace steppe::common {

void fatal_exit(const char* text) noexcept {
    const std::size_t size = std::strlen(text);
    for (std::size_t done = 0; done < size;) {
        const ssize_t n = ::write(STDERR_FILENO, text + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
    ::_exit(fatal_exit_status);
}

void futex_wait(std::uint32_t& word, std::uint32_t expected, const timespec* timeout) noexcept {
    // Returns on a wake-up, EAGAIN (the word changed), EINTR or ETIMEDOUT: the caller re-reads.
    ::syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, expected, timeout, nullptr, 0);
}

void futex_wake_all(std::uint32_t& word) noexcept {
    ::syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait_shared(std::uint32_t& word, std::uint32_t expected, const timespec* timeout) noexcept {
    ::syscall(SYS_futex, &word, FUTEX_WAIT, expected, timeout, nullptr, 0);
}

void futex_wake_all_shared(std::uint32_t& word) noexcept {
    ::syscall(SYS_futex, &word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace steppe::common
