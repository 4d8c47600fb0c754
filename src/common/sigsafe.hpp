// The signal-safe toolbox, for code that may run in a signal handler (the
// vm fault path, and the storage reads and page-engine messages it leads
// to): sleep and wake on a word, build a message, end the process. Only
// system calls and the caller's memory: nothing here allocates, takes a
// lock, throws or calls stdio.
#pragma once

#include <sched.h>

#include <charconv>
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <ctime>

namespace steppe::common {

// The exit status of a process that a fault it could not serve ended (EX_OSERR).
inline constexpr int fatal_exit_status = 71;

// CLOCK_MONOTONIC in nanoseconds, for the fault path's timers (miss time
// by part, store_stats): clock_gettime is async-signal-safe, and the vDSO
// serves it without a system call.
inline std::uint64_t monotonic_ns() noexcept {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

// A number a fixed_message writes in hexadecimal, with "0x" before it.
struct in_hex {
    std::uint64_t value;
};

// A message built into a buffer the caller owns (on its stack, or static),
// always NUL-terminated; what does not fit is cut off.
class fixed_message {
public:
    fixed_message(char* buf, std::size_t capacity) noexcept : buf_(buf), cap_(capacity) {
        if (cap_ > 0) buf_[0] = '\0';
    }
    fixed_message& operator<<(const char* s) noexcept {
        while (s && *s) put(*s++);
        return *this;
    }
    fixed_message& operator<<(std::uint64_t v) noexcept {
        char digits[20];
        return put_range(digits, std::to_chars(digits, digits + sizeof digits, v).ptr);  // no locale
    }
    fixed_message& operator<<(in_hex v) noexcept {
        char digits[2 + 16] = {'0', 'x'};
        return put_range(digits, std::to_chars(digits + 2, digits + sizeof digits, v.value, 16).ptr);
    }
    const char* c_str() const noexcept { return buf_; }

private:
    void put(char c) noexcept {
        if (len_ + 1 < cap_) {
            buf_[len_++] = c;
            buf_[len_] = '\0';
        }
    }
    fixed_message& put_range(const char* first, const char* last) noexcept {
        while (first != last) put(*first++);
        return *this;
    }
    char* buf_;
    std::size_t cap_, len_ = 0;
};

// Writes `text` to stderr as it is (say "\n" in it) and ends the process with
// fatal_exit_status: no destructors, no atexit handlers, no stdio flush. For
// faults that can be neither served nor reported by a throw (exceptions
// cannot cross a signal handler, and returning would retry the access).
[[noreturn]] void fatal_exit(const char* text) noexcept;

// Sleeps while `word` holds `expected` (process-private futex), until a wake,
// a signal or `timeout` (relative; null: none). Returns at once if the word
// differs; callers re-read the word in a loop, as any return may be spurious.
void futex_wait(std::uint32_t& word, std::uint32_t expected, const timespec* timeout = nullptr) noexcept;
// Wakes every thread sleeping in futex_wait on `word`.
void futex_wake_all(std::uint32_t& word) noexcept;
// The same for a word in memory shared between processes (MAP_SHARED).
void futex_wait_shared(std::uint32_t& word, std::uint32_t expected, const timespec* timeout) noexcept;
void futex_wake_all_shared(std::uint32_t& word) noexcept;
// A lock for data that fault handlers read: held only for a short copy or
// map access, never by a thread that can be interrupted by a handler
// needing it; waiters yield. Async-signal-safe. Works with std::lock_guard
// on a const lock (readers are const methods).
class spin_lock {
public:
    void lock() const noexcept {
        while (held_.test_and_set(std::memory_order_acquire)) sched_yield();
    }
    void unlock() const noexcept { held_.clear(std::memory_order_release); }

private:
    mutable std::atomic_flag held_ = ATOMIC_FLAG_INIT;
};

// The futex word of an atomic (the same 4 bytes).
inline std::uint32_t& futex_word(std::atomic<std::uint32_t>& word) noexcept {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    return *reinterpret_cast<std::uint32_t*>(&word);
}

}  // namespace steppe::common
